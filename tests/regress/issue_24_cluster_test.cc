// Regressions of issue 24 in the cluster backend's path (items 3 and 8).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "cluster/cluster_backend.h"
#include "cluster/cluster_test_util.h"
#include "cluster/fake_cluster.h"
#include "cluster/launcher.h"
#include "common/strings.h"
#include "experiment/coordinator.h"
#include "gtest/gtest.h"
#include "planner/static_planner.h"
#include "sched/least_conn.h"
#include "support/fake_backend.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

// ---- 24.8: a resumed run's backend counts time from its own start ------------------------------

// Every trajectory: one turn of 100 tokens; prompts of 50 tokens.
class OneTurnWorkload : public workload::Workload {
 public:
  std::string Describe() const override { return "one turn"; }
  workload::PromptInfo Prompt(int64_t index) const override { return {index, 50, 0.5}; }
  const workload::SkillParams& skill_params() const override { return skill_; }
  workload::TrajectoryScript Script(int64_t prompt, int sample, int, double) const override {
    workload::TrajectoryScript s;
    workload::TurnScript turn;
    turn.generated_tokens = 100;
    turn.end = workload::TurnEnd::kStop;
    s.turns = {turn};
    s.reward = (prompt + sample) % 2 == 0 ? 1 : 0;
    return s;
  }

 private:
  workload::SkillParams skill_;
};

class Steps : public experiment::Recorder {
 public:
  Status RecordStep(const records::StepBatch& batch) override {
    steps.push_back(batch.step);
    events.insert(events.end(), batch.events.begin(), batch.events.end());
    turns.insert(turns.end(), batch.turns.begin(), batch.turns.end());
    return Status();
  }
  std::vector<records::StepRecord> steps;
  std::vector<records::EventRecord> events;
  std::vector<records::TurnRecord> turns;
};

TEST(Issue24Test, AResumedRunRecordsSyncTimesOnOneClock) {
  // The run resumes at 1000 s of recorded time; its new backend's clock starts at 0. A sync
  // takes 1 s of the backend's time, and must be recorded as 1 s (not ~1000 s), its event and
  // the turns inside the run's time.
  experiment::CoordinatorConfig config;
  config.steps = 4;
  config.prompts_per_step = 2;
  config.group_size = 2;
  config.sync_interval = 1;
  config.plan.nodes = 1;
  config.plan.gpus_per_node = 8;
  config.plan.batch_trajectories = 4;
  experiment::ResumeState resume;
  resume.steps_done = 2;
  resume.elapsed_s = 1000;
  resume.next_prompt = 4;
  resume.next_trajectory = 8;
  config.resume = resume;
  OneTurnWorkload workload;
  FakeBackend::Costs costs;
  costs.sync_s = 1;
  FakeBackend backend(workload, costs);
  planner::StaticPlanner planner(std::optional<int>(4), std::vector<int>{1});
  sched::LeastConnRouter router;
  Steps recorder;
  experiment::Coordinator coordinator(config, workload, router, planner, backend, recorder);
  auto summary = coordinator.Run({}, {});
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  ASSERT_EQ(recorder.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(recorder.steps[0].sync_s, 1.0);  // step 2 syncs; step 3, the last, does not
  for (const records::EventRecord& e : recorder.events) {
    EXPECT_GE(e.start_s, 1000) << e.kind << " " << e.detail;
    EXPECT_LE(e.start_s, e.end_s) << e.kind << " " << e.detail;
  }
  for (const records::TurnRecord& t : recorder.turns) EXPECT_GE(t.start_s, 1000);
}

// ---- 24.3: a trainer that dies while its GPUs are lent ------------------------------------------

class Issue24TrainerTest : public ::testing::Test, public FakeClusterBackend {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start()); }
  void TearDown() override { Stop(); }
};

TEST_F(Issue24TrainerTest, ATrainerKilledWhileLentIsRestartedAndTakesItsGpusBack) {
  // The trainer lends its GPUs (one replica stays, idle), then dies. Taking the GPUs back must
  // go through the trainer's restart path (fault, restart, the replica joins the new process),
  // not fail the run on "/join: cannot connect".
  Until<backend::LayoutApplied>(backend::ApplyLayout{FakeLayout(2, {2, 1, 1})});
  Until<backend::LayoutApplied>(backend::ApplyLayout{FakeLayout(0, {2, 1, 1, 1, 1}, false, 2)});
  const std::optional<pid_t> killed = backend_->TrainerPid();
  ASSERT_TRUE(killed.has_value());
  // Its port answers only once a new trainer process runs (a dead one's port resets).
  trainer_->alive = [this, killed] {
    const std::optional<pid_t> now = backend_->TrainerPid();
    return now.has_value() && *now != *killed;
  };
  // It dies while the engines release their GPUs for it, and the backend sees the exit before it
  // asks the trainer to take them back: then its own request and the restart's must not both run
  // (they raced, and the layout was applied before the restart was, or a replica joined twice).
  engines_->control = [killed](int, const std::string& path) -> std::optional<TestHttpReply> {
    if (path == "/release_memory_occupation" && IsAlive(*killed)) {
      EXPECT_EQ(kill(*killed, SIGKILL), 0);
      EXPECT_TRUE(Eventually([killed] { return !IsAlive(*killed); }));  // exited, not reaped
    }
    return std::nullopt;
  };
  auto back = Until<backend::LayoutApplied>(backend::ApplyLayout{FakeLayout(2, {2, 1, 1})});
  EXPECT_EQ(Incidents(back, "fault").size(), 1u);
  EXPECT_EQ(Incidents(back, "restart").size(), 1u);
  EXPECT_EQ(trainer_->replicas, (std::vector<std::string>{"replica-0", "replica-1"}));
  EXPECT_EQ(trainer_->Count("/join"), 2) << "the first layout's join, then the restart's only";
  // And it trains on.
  RunTrajectory(0);
  backend::Train train;
  train.trajectories = {TrajectoryId(0)};
  train.advantages = {1.0};
  Until<backend::TrainDone>(train);
}

TEST(Issue24Test, APromptLongerThanTheContextStopsTheRunNamingIt) {
  // Smaller finding: a prompt that leaves no room to generate failed at the train step (exit 2,
  // the trainer refusing the sequence). It now stops the run when the prompt is loaded, naming it
  // and the limit. The fake prompt command gives 3 tokens.
  FakeTurnRig rig(1);
  FakeRuntime& f = rig.f;
  f.options.engine.max_context_tokens = 3;
  backend::StartTurn turn;
  turn.trajectory = TrajectoryId(1);
  turn.prompt = 7;
  turn.instance = InstanceId(0);
  rig.runner.StartTurn(turn);
  ASSERT_TRUE(RunLoopUntil(*f.loop, [&] { return !f.sink->failure.ok(); }));
  EXPECT_EQ(f.sink->failure.message(),
            "prompt-7: the prompt has 3 tokens, and [engine] max_context_tokens = 3 leaves no room "
            "to generate; raise it, or shorten or drop the prompt");
  EXPECT_TRUE(rig.engines.received.empty() || rig.engines.received.back().path != "/generate");
}

TEST(Issue24Test, AKilledLibrasSshControlFolderIsRemovedByTheNext) {
  // Smaller finding: a libra killed with SIGKILL left its ssh control-socket folder in /tmp for
  // good. Each folder now carries its libra's pid; the next ssh launcher removes the folders of
  // libras that no longer run, and leaves a running one's.
  const pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  const std::filesystem::path stale =
      tmp / StrFormat("libra-ssh-%d-test01", static_cast<int>(dead));
  const std::filesystem::path live =
      tmp / StrFormat("libra-ssh-%d-test02", static_cast<int>(getpid()));
  std::filesystem::create_directories(stale);
  std::filesystem::create_directories(live);
  WriteFile((stale / "master").string(), "");
  cluster::SshTarget target;
  target.host = "node-1";
  auto launcher = cluster::SshLauncher::Create(target, {});
  ASSERT_TRUE(launcher.ok()) << launcher.status().message();
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_NE(
      (*launcher)->control_dir().find(StrFormat("/libra-ssh-%d-", static_cast<int>(getpid()))),
      std::string::npos);
  std::filesystem::remove_all(live);
}

}  // namespace
}  // namespace libra::test
