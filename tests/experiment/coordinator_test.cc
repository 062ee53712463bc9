#include "experiment/coordinator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/strings.h"
#include "model/cost_model.h"
#include "planner/static_planner.h"
#include "sched/least_conn.h"
#include "sim/cluster_sim.h"
#include "support/components.h"
#include "support/fake_backend.h"
#include "support/test_util.h"

namespace libra::experiment {
namespace {

/// Every trajectory: two turns of 100 tokens with one tool call between; prompts of 50 tokens.
class FixedWorkload : public workload::Workload {
 public:
  std::string Describe() const override { return "fixed"; }
  workload::PromptInfo Prompt(int64_t index) const override { return {index, 50, 0.5}; }
  const workload::SkillParams& skill_params() const override { return skill_; }
  workload::TrajectoryScript Script(int64_t prompt, int sample, int, double) const override {
    workload::TrajectoryScript s;
    workload::TurnScript first;
    first.generated_tokens = 100;
    first.end = workload::TurnEnd::kToolCall;
    first.tool = "t";
    first.tool_output_tokens = 10;
    first.tool_latency_s = 2;
    workload::TurnScript second;
    second.generated_tokens = 100;
    second.end = workload::TurnEnd::kStop;
    s.turns = {first, second};
    s.reward = (prompt + sample) % 2 == 0 ? 1 : 0;
    return s;
  }

 private:
  workload::SkillParams skill_;
};

class MemoryRecorder : public Recorder {
 public:
  Status RecordStep(const records::StepBatch& batch) override {
    steps.push_back(batch.step);
    trajectories.insert(trajectories.end(), batch.trajectories.begin(), batch.trajectories.end());
    turns.insert(turns.end(), batch.turns.begin(), batch.turns.end());
    events.insert(events.end(), batch.events.begin(), batch.events.end());
    decisions.insert(decisions.end(), batch.decisions.begin(), batch.decisions.end());
    return Status();
  }
  Status RecordEval(int version, double score) override {
    evals.emplace_back(version, score);
    return Status();
  }
  std::vector<records::StepRecord> steps;
  std::vector<std::pair<int, double>> evals;
  std::vector<records::TrajectoryRecord> trajectories;
  std::vector<records::TurnRecord> turns;
  std::vector<records::EventRecord> events;
  std::vector<records::DecisionRecord> decisions;
};

/// A router that places nothing: the pipeline must report a stall, not hang.
class NeverRouter : public sched::Router {
 public:
  std::string_view Name() const override { return "never"; }
  sched::RouteDecision Route(const sched::RouteRequest&,
                             std::span<const sched::InstanceState>) override {
    return {std::nullopt, "never", ""};
  }
};

struct Harness {
  explicit Harness(CoordinatorConfig c, test::FakeBackend::Costs costs = {})
      : config(c), backend(workload, costs), planner(std::optional<int>(4), std::vector<int>{1}) {}

  Result<RunSummary> Run(std::function<bool()> interrupted = {}) {
    Coordinator coordinator(config, workload, router, planner, backend, recorder);
    return coordinator.Run(interrupted, {});
  }

  CoordinatorConfig config;
  FixedWorkload workload;
  test::FakeBackend backend;
  planner::StaticPlanner planner;
  sched::LeastConnRouter router;
  MemoryRecorder recorder;
};

CoordinatorConfig Config(int steps, int staleness) {
  CoordinatorConfig c;
  c.steps = steps;
  c.prompts_per_step = 2;
  c.group_size = 2;
  c.staleness = staleness;
  c.sync_interval = 1;
  c.plan.nodes = 1;
  c.plan.gpus_per_node = 8;
  c.plan.batch_trajectories = 4;
  return c;
}

TEST(CoordinatorTest, SynchronousStepsRollOutThenTrainThenSync) {
  // Staleness 0: turn 1 s, tool 2 s, turn 1 s -> rollout 4 s; train 4 x 260 tokens x 0.01 / 4
  // GPUs = 2.6 s; sync 1 s. Every step takes 7.6 s, the last one has no sync.
  Harness h(Config(3, 0));
  auto summary = h.Run();
  ASSERT_OK(summary);
  ASSERT_EQ(h.recorder.steps.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    const records::StepRecord& s = h.recorder.steps[static_cast<size_t>(k)];
    EXPECT_EQ(s.step, k);
    EXPECT_DOUBLE_EQ(s.start_s, 7.6 * k);
    EXPECT_DOUBLE_EQ(s.rollout_s, 4.0);
    EXPECT_NEAR(s.train_s, 2.6, 1e-9);
    EXPECT_DOUBLE_EQ(s.sync_s, k < 2 ? 1.0 : 0.0);
    EXPECT_DOUBLE_EQ(s.wait_s, 4.0);
    EXPECT_EQ(s.trajectories, 4);
    EXPECT_EQ(s.turns, 8);
    EXPECT_EQ(s.tool_calls, 4);
    EXPECT_EQ(s.generated_tokens, 800);
    EXPECT_EQ(s.prompt_tokens, 200);
    EXPECT_EQ(s.max_lag, 0);
    EXPECT_DOUBLE_EQ(s.reward_mean, 0.5);
    EXPECT_EQ(s.train_gpus, 4);
    EXPECT_EQ(s.rollout_gpus, 4);
  }
  EXPECT_NEAR(summary->elapsed_s, 7.6 * 2 + 6.6, 1e-9);
  EXPECT_EQ(summary->trajectories, 12);
  EXPECT_EQ(summary->turns, 24);
}

TEST(CoordinatorTest, BoundedStalenessOverlapsRolloutWithTraining) {
  // Staleness 1: step 1 rolls out while step 0 trains, so the run is shorter and lags reach 1
  // but never more.
  Harness sync_run(Config(4, 0));
  Harness async_run(Config(4, 1));
  ASSERT_OK(sync_run.Run());
  auto summary = async_run.Run();
  ASSERT_OK(summary);
  EXPECT_LT(async_run.recorder.steps.back().end_s, sync_run.recorder.steps.back().end_s);
  int max_lag = 0;
  for (const records::StepRecord& s : async_run.recorder.steps)
    max_lag = std::max(max_lag, s.max_lag);
  EXPECT_EQ(max_lag, 1);
  for (const records::TrajectoryRecord& t : async_run.recorder.trajectories) {
    EXPECT_GE(t.version, t.step - 1) << "trajectory " << t.id;
  }
  // Steps 0 and 1 both start rolling out at time 0.
  EXPECT_DOUBLE_EQ(async_run.recorder.trajectories[4].start_s, 0.0);
}

TEST(CoordinatorTest, PartialRolloutRunsLaterTurnsOnNewWeights) {
  // With partial rollout a trajectory whose tool call spans a weight sync runs its next turn on
  // the new weights; without it every turn runs on the weights the trajectory started with.
  auto later_versions = [](bool partial) {
    CoordinatorConfig c = Config(4, 1);
    c.partial_rollout = partial;
    test::FakeBackend::Costs costs;
    costs.sync_s = 0.1;  // step 1's train and sync end while step 2 waits for its tools
    Harness h(c, costs);
    EXPECT_OK(h.Run());
    std::map<int64_t, int> first;
    int newer = 0;
    for (const backend::StartTurn& t : h.backend.turns_started) {
      if (t.turn == 0) first[t.trajectory.value] = t.policy_version;
      newer += t.turn > 0 && t.policy_version > first.at(t.trajectory.value);
    }
    return newer;
  };
  EXPECT_EQ(later_versions(false), 0);
  EXPECT_GT(later_versions(true), 0);
}

TEST(CoordinatorTest, TrainCarriesGroupNormalisedAdvantages) {
  // The fixed workload rewards alternate within a group of two: advantages are +-1.
  Harness h(Config(2, 0));
  ASSERT_OK(h.Run());
  ASSERT_EQ(h.backend.trains.size(), 2u);
  for (const backend::Train& train : h.backend.trains) {
    ASSERT_EQ(train.advantages.size(), 4u);
    for (size_t i = 0; i < 4; i += 2) {
      EXPECT_NEAR(std::abs(train.advantages[i]), 1, 1e-5);
      EXPECT_NEAR(train.advantages[i] + train.advantages[i + 1], 0, 1e-12);
    }
  }
}

TEST(CoordinatorTest, GroupAdvantagesNormaliseWithinEachGroup) {
  const std::vector<double> a = GroupAdvantages({1, 0, 0, 2, 2, 2}, 3);
  ASSERT_EQ(a.size(), 6u);
  // Group one: mean 1/3, population sd sqrt(2)/3.
  EXPECT_NEAR(a[0], (2.0 / 3) / (std::sqrt(2.0) / 3), 1e-5);
  EXPECT_NEAR(a[1], (-1.0 / 3) / (std::sqrt(2.0) / 3), 1e-5);
  // Group two: all equal, no signal.
  EXPECT_EQ(a[3], 0);
  EXPECT_EQ(a[5], 0);
  EXPECT_TRUE(GroupAdvantages({}, 4).empty());
}

TEST(CoordinatorTest, RecordsEveryTrajectoryOnceInItsStep) {
  // Batches are complete GRPO groups: P prompts x n samples, each trajectory exactly once.
  Harness h(Config(2, 1));
  ASSERT_OK(h.Run());
  ASSERT_EQ(h.recorder.trajectories.size(), 8u);
  std::set<int64_t> ids;
  for (const records::TrajectoryRecord& t : h.recorder.trajectories) {
    EXPECT_TRUE(ids.insert(t.id).second);
    EXPECT_EQ(t.prompt / 2, t.step);
    EXPECT_EQ(t.turns, 2);
    EXPECT_EQ(t.tool_calls, 1);
    EXPECT_EQ(t.generated_tokens, 200);
    EXPECT_FALSE(t.truncated);
    EXPECT_EQ(StrSplit(t.instances, ',').size(), 2u);
    EXPECT_GT(t.end_s, t.start_s);
  }
}

TEST(CoordinatorTest, RecordsTheInitialPlanAndSpans) {
  // The planner's first decision and one span per turn, tool, train and sync are recorded.
  Harness h(Config(2, 0));
  ASSERT_OK(h.Run());
  ASSERT_EQ(h.recorder.decisions.size(), 1u);
  EXPECT_EQ(h.recorder.decisions[0].planner, "static");
  EXPECT_EQ(h.recorder.decisions[0].layout, "train 4 (tp4 pp1 dp1 mb1) | rollout tp1x4");
  EXPECT_TRUE(h.recorder.decisions[0].applied);
  std::map<std::string, int> kinds;
  for (const records::EventRecord& e : h.recorder.events) {
    ++kinds[e.kind];
    EXPECT_LE(e.start_s, e.end_s) << e.kind;
  }
  EXPECT_EQ(kinds["turn"], 0);  // per-turn spans only when asked (record_events)
  EXPECT_EQ(kinds["tool"], 0);
  EXPECT_EQ(kinds["train"], 2);
  EXPECT_EQ(kinds["sync"], 1);
}

TEST(CoordinatorTest, RecordsEveryTurnWithItsTool) {
  // Each trajectory's two turns are recorded with the tool call between them.
  Harness h(Config(1, 0));
  ASSERT_OK(h.Run());
  ASSERT_EQ(h.recorder.turns.size(), 8u);
  const records::TurnRecord& first = h.recorder.turns[0];
  EXPECT_EQ(first.turn, 0);
  EXPECT_EQ(first.end, "tool_call");
  EXPECT_EQ(first.tool, "t");
  EXPECT_EQ(first.tool_status, "success");
  EXPECT_EQ(first.tool_output_tokens, 10);
  EXPECT_DOUBLE_EQ(first.tool_latency_s, 2);
  EXPECT_DOUBLE_EQ(first.end_s - first.start_s, 1);
  const records::TurnRecord& second = h.recorder.turns[1];
  EXPECT_EQ(second.trajectory, first.trajectory);
  EXPECT_EQ(second.turn, 1);
  EXPECT_EQ(second.end, "stop");
  EXPECT_EQ(second.tool, "");
}

TEST(CoordinatorTest, RecordsTurnAndToolSpansWhenAsked) {
  // With record_events, every turn and tool call is a span too.
  CoordinatorConfig c = Config(2, 0);
  c.record_events = true;
  Harness h(c);
  ASSERT_OK(h.Run());
  std::map<std::string, int> kinds;
  for (const records::EventRecord& e : h.recorder.events) ++kinds[e.kind];
  EXPECT_EQ(kinds["turn"], 16);
  EXPECT_EQ(kinds["tool"], 8);
}

TEST(CoordinatorTest, TrajectoriesCheaperThanTheirFloorFailLoudly) {
  // Trained trajectories that need more GPU-seconds than the cluster has had mean the simulator or
  // the cost model is wrong: the run fails. Each 7.6 s step gives the 8 GPUs 60.8 GPU-seconds
  // for its 4 trajectories of 260 tokens.
  CoordinatorConfig c = Config(3, 0);
  c.trajectory_floor_gpu_s = [](const planner::TrajectorySize& size) {
    return 0.07 * static_cast<double>(size.total());  // 18.2 each, 72.8 a step
  };
  Harness h(c);
  auto summary = h.Run();
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInternal);
  EXPECT_NE(summary.status().message().find(
                "fidelity check failed at step 0: the trajectories trained so far need at least "
                "72.8 GPU-seconds at the cost model's best efficiency, more than the 60.8"),
            std::string::npos)
      << summary.status().message();
  c.trajectory_floor_gpu_s = [](const planner::TrajectorySize& size) {
    return 0.05 * static_cast<double>(size.total());  // 13 each, 52 a step
  };
  Harness fine(c);
  EXPECT_OK(fine.Run());
}

TEST(CoordinatorTest, AResumedRunCountsTheTrajectoriesTrainedBeforeIt) {
  // Resumed after step 0 (4 trajectories trained by 7.6 s): the progress and the summary count
  // on from there, so "traj/s so far" stays trained trajectories over the run's whole time.
  CoordinatorConfig c = Config(3, 0);
  ResumeState resume;
  resume.steps_done = 1;
  resume.elapsed_s = 7.6;
  resume.trajectories = 4;
  resume.next_prompt = 2;
  resume.next_trajectory = 4;
  c.resume = resume;
  Harness h(c);
  Coordinator coordinator(h.config, h.workload, h.router, h.planner, h.backend, h.recorder);
  std::vector<int64_t> trained;
  auto summary = coordinator.Run({}, [&](const Progress& p) { trained.push_back(p.trajectories); });
  ASSERT_OK(summary);
  EXPECT_EQ(trained, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(summary->trajectories, 12);
}

TEST(CoordinatorTest, SameInputsGiveIdenticalRecords) {
  // Determinism: two runs record exactly the same rows.
  Harness a(Config(5, 1));
  Harness b(Config(5, 1));
  ASSERT_OK(a.Run());
  ASSERT_OK(b.Run());
  EXPECT_EQ(a.recorder.steps, b.recorder.steps);
  EXPECT_EQ(a.recorder.trajectories, b.recorder.trajectories);
  EXPECT_EQ(a.recorder.events, b.recorder.events);
  EXPECT_EQ(a.recorder.turns, b.recorder.turns);
}

TEST(CoordinatorTest, SyncIntervalSkipsSyncs) {
  // sync_interval 2 with staleness 1: weights are pushed after steps 1 and 3 only.
  CoordinatorConfig c = Config(5, 1);
  c.sync_interval = 2;
  Harness h(c);
  ASSERT_OK(h.Run());
  std::vector<int> synced;
  for (const records::StepRecord& s : h.recorder.steps) {
    if (s.sync_s > 0) synced.push_back(s.step);
  }
  EXPECT_EQ(synced, (std::vector<int>{1, 3}));
}

TEST(CoordinatorTest, InterruptStopsBetweenEvents) {
  // An interrupt request ends the run with kInterrupted; steps done so far stay recorded.
  Harness h(Config(50, 0));
  int polls = 0;
  auto summary = h.Run([&] { return ++polls > 40; });
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInterrupted);
  EXPECT_FALSE(h.recorder.steps.empty());
  EXPECT_LT(h.recorder.steps.size(), 50u);
}

TEST(CoordinatorTest, StallIsAnErrorNotAHang) {
  // A router that never places a turn leaves nothing in flight: the run fails and says why.
  FixedWorkload workload;
  test::FakeBackend sim(workload, test::FakeBackend::Costs());
  planner::StaticPlanner planner(std::optional<int>(4), std::vector<int>{1});
  NeverRouter router;
  MemoryRecorder recorder;
  Coordinator coordinator(Config(1, 0), workload, router, planner, sim, recorder);
  auto summary = coordinator.Run({}, {});
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInternal);
  EXPECT_EQ(summary.status().message(),
            "the pipeline stalled after 0 of 1 steps: nothing is in flight and no step can "
            "start (4 trajectories waiting for an instance, 0 evaluations pending)");
}

TEST(CoordinatorTest, PlanThatDoesNotFitFails) {
  // The planner's kUnschedulable reaches the caller.
  Harness h(Config(1, 0));
  h.config.plan.gpus_per_node = 4;  // train_gpus 4 leaves nothing for rollout
  auto summary = h.Run();
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kUnschedulable);
}

// A FakeBackend that fails the first turn of trajectory 0 for good (the backend gave up on it) and
// asks the run to stop after train step `halt_step` (-1: never).
class FaultyBackend : public backend::Backend {
 public:
  FaultyBackend(const workload::Workload& workload, int halt_step)
      : inner_(workload, {}), halt_step_(halt_step) {}
  std::string_view Name() const override { return "faulty"; }
  Status Submit(const backend::Action& action) override {
    if (const auto* turn = std::get_if<backend::StartTurn>(&action);
        turn != nullptr && turn->trajectory == TrajectoryId(0) && !dropped_) {
      dropped_ = true;
      backend::Event failed;
      failed.at = now_;
      failed.what = backend::TurnFailed{turn->trajectory, turn->instance, "failed 4 times", true};
      pending_.push_back(std::move(failed));
      return Status();
    }
    return inner_.Submit(action);
  }
  Result<std::vector<backend::Event>> Wait() override {
    if (!pending_.empty()) return std::exchange(pending_, {});
    LIBRA_ASSIGN_OR_RETURN(std::vector<backend::Event> events, inner_.Wait());
    for (backend::Event& e : events) {
      now_ = e.at;
      if (auto* done = std::get_if<backend::TrainDone>(&e.what); done && done->step == halt_step_) {
        done->logprob_diff = 2.5;
        done->halt = "the logprobs diverged";
      }
    }
    return events;
  }

 private:
  test::FakeBackend inner_;
  int halt_step_;
  bool dropped_ = false;
  double now_ = 0;
  std::vector<backend::Event> pending_;
};

TEST(CoordinatorTest, ADroppedTrajectoryIsAFaultAndItsSampleIsDrawnAgain) {
  // Issue 21: a trajectory the backend gives up on is dropped, recorded as a fault, and its
  // sample drawn again as a new trajectory: every group stays whole and the run goes on.
  FixedWorkload workload;
  FaultyBackend backend(workload, -1);
  planner::StaticPlanner planner(std::optional<int>(4), std::vector<int>{1});
  sched::LeastConnRouter router;
  MemoryRecorder recorder;
  Coordinator coordinator(Config(2, 0), workload, router, planner, backend, recorder);
  ASSERT_OK(coordinator.Run({}, {}));
  ASSERT_EQ(recorder.steps.size(), 2u);
  EXPECT_EQ(recorder.steps[0].trajectories, 4);
  std::string faults;
  for (const records::EventRecord& e : recorder.events) {
    if (e.kind == "fault") faults += e.detail + "\n";
  }
  EXPECT_NE(faults.find("trajectory dropped: failed 4 times; prompt 0 sample 0 drawn again"),
            std::string::npos)
      << faults;
  for (const records::TrajectoryRecord& t : recorder.trajectories) EXPECT_NE(t.id, 0);
}

/// A backend that measures evaluation scores (as the cluster backend does): each Evaluate ends a
/// second later with the score 0.1 x version; every action is logged in order.
class EvaluatingBackend : public backend::Backend {
 public:
  explicit EvaluatingBackend(const workload::Workload& workload) : inner_(workload, {}) {}
  std::string_view Name() const override { return "evaluating"; }
  bool ScoresEvaluations() const override { return true; }
  Status Submit(const backend::Action& action) override {
    if (const auto* evaluate = std::get_if<backend::Evaluate>(&action)) {
      log.push_back(
          StrFormat("eval v%d (%zu prompts)", evaluate->version, evaluate->prompts.size()));
      prompts = evaluate->prompts;
      backend::Event done;
      done.at = now_ + 1;
      done.what = backend::EvalDone{evaluate->version, 0.1 * evaluate->version, "", now_};
      pending_.push_back(std::move(done));
      return Status();
    }
    if (const auto* sync = std::get_if<backend::SyncWeights>(&action)) {
      log.push_back(StrFormat("sync v%d", sync->version));
    }
    return inner_.Submit(action);
  }
  Result<std::vector<backend::Event>> Wait() override {
    if (!pending_.empty()) return std::exchange(pending_, {});
    LIBRA_ASSIGN_OR_RETURN(std::vector<backend::Event> events, inner_.Wait());
    for (const backend::Event& e : events) now_ = e.at;
    return events;
  }
  std::vector<std::string> log;
  std::vector<int64_t> prompts;

 private:
  test::FakeBackend inner_;
  double now_ = 0;
  std::vector<backend::Event> pending_;
};

TEST(CoordinatorTest, ABackendThatScoresEvaluationsIsAskedForEveryDueVersion) {
  // Issue 19: on a real backend the score is measured, not modelled: the initial version, every
  // eval interval among the synced versions, and the last (which is never synced for rollout);
  // the run ends once the last score is in.
  FixedWorkload workload;
  EvaluatingBackend backend(workload);
  planner::StaticPlanner planner(std::optional<int>(4), std::vector<int>{1});
  sched::LeastConnRouter router;
  MemoryRecorder recorder;
  CoordinatorConfig config = Config(5, 0);
  config.eval_interval = 2;
  config.eval_prompts = 3;
  Coordinator coordinator(config, workload, router, planner, backend, recorder);
  ASSERT_OK(coordinator.Run({}, {}));
  EXPECT_EQ(StrJoin(backend.log, ", "),
            "eval v0 (3 prompts), sync v1, sync v2, eval v2 (3 prompts), sync v3, sync v4, "
            "eval v4 (3 prompts), eval v5 (3 prompts)");
  EXPECT_EQ(backend.prompts,
            (std::vector<int64_t>{HeldOutPrompt(0), HeldOutPrompt(1), HeldOutPrompt(2)}));
  ASSERT_EQ(recorder.evals.size(), 4u);
  EXPECT_EQ(recorder.evals[0], std::make_pair(0, 0.0));
  EXPECT_EQ(recorder.evals[3], std::make_pair(5, 0.5));
  // No modelled score beside the measured ones.
  for (const records::StepRecord& step : recorder.steps) EXPECT_FALSE(step.eval_score.has_value());
}

TEST(CoordinatorTest, AStepTheBackendHaltsOnIsRecordedThenTheRunStops) {
  // Issue 21: a train step whose logprobs diverged past the recipe's threshold is recorded (with
  // its mismatch), and the run stops with the backend's reason, before any sync.
  FixedWorkload workload;
  FaultyBackend backend(workload, 1);
  planner::StaticPlanner planner(std::optional<int>(4), std::vector<int>{1});
  sched::LeastConnRouter router;
  MemoryRecorder recorder;
  Coordinator coordinator(Config(4, 0), workload, router, planner, backend, recorder);
  auto summary = coordinator.Run({}, {});
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("the logprobs diverged"), std::string::npos);
  ASSERT_EQ(recorder.steps.size(), 2u);
  EXPECT_EQ(recorder.steps[1].logprob_diff, 2.5);
  EXPECT_FALSE(recorder.steps[0].logprob_diff.has_value());
  EXPECT_DOUBLE_EQ(recorder.steps[1].sync_s, 0.0);
}

}  // namespace
}  // namespace libra::experiment

namespace libra::experiment {
namespace {

// One node of 8 GPUs: rollout as TP1 instances on the first `rollout` GPUs, training (TP2) on the
// rest.
backend::Layout Split(int rollout) {
  backend::Layout layout;
  layout.instances = planner::PackInstances(8, 0, rollout, {1}).value();
  layout.train_gpus = 8 - rollout;
  layout.train = model::TrainLayout{2, 1, (8 - rollout) / 2, 1};
  return layout;
}

/// Starts with 6 rollout GPUs; after step 0 asks for 2 (training grows by two replicas), after
/// step 2 for 6 again. Without `moves`, it holds the start and only records what it is told.
class ScriptedPlanner : public planner::Planner {
 public:
  explicit ScriptedPlanner(bool moves = true) : moves_(moves) {}
  std::string_view Name() const override { return "scripted"; }
  Result<planner::Plan> Initial(const planner::PlanContext&) override {
    planner::Plan plan;
    plan.layout = Split(6);
    plan.reason = "scripted";
    plan.predicted_step_s = 10.0;
    return plan;
  }
  std::optional<planner::PlanDecision> OnStep(const planner::StepObservation& o) override {
    observations.push_back(o);
    if (!moves_) return std::nullopt;
    planner::PlanDecision d;
    d.trigger = "script";
    d.reason = "scripted";
    d.next_step_s = 20.0 + o.step;
    if (o.step == 0) d.layout = Split(2);
    if (o.step == 2) d.layout = Split(6);
    return d;
  }
  std::vector<planner::StepObservation> observations;

 private:
  bool moves_;
};

TEST(CoordinatorTest, LayoutChangesMidRunLoseNoTrajectory) {
  // On the simulator, training grows by two TP2 replicas after step 0 and shrinks back after
  // step 2, synchronous and asynchronous: the leaving instances drain first (the simulator
  // refuses a layout that drops an instance with work on it), every trajectory trains exactly
  // once, the steps record the split in force and the planner's predictions.
  const auto cost = test::Roofline("A800-80G", "Qwen3-0.6B");
  for (int staleness : {0, 1}) {
    SCOPED_TRACE(staleness);
    CoordinatorConfig config = Config(5, staleness);
    config.prompts_per_step = 8;
    config.plan.batch_trajectories = 16;
    FixedWorkload workload;
    sim::ClusterSim sim(recipe::SimSpec(), workload, *cost);
    ScriptedPlanner planner;
    sched::LeastConnRouter router;
    MemoryRecorder recorder;
    Coordinator coordinator(config, workload, router, planner, sim, recorder);
    auto summary = coordinator.Run({}, {});
    ASSERT_OK(summary);
    EXPECT_EQ(summary->trajectories, 5 * 16);
    std::set<int64_t> ids;
    for (const records::TrajectoryRecord& t : recorder.trajectories) ids.insert(t.id);
    EXPECT_EQ(ids.size(), 80u);
    ASSERT_EQ(recorder.steps.size(), 5u);
    // Decisions: the initial plan, then one per step but the last; two of them move.
    ASSERT_EQ(recorder.decisions.size(), 5u);
    EXPECT_EQ(recorder.decisions[0].trigger, "initial");
    EXPECT_TRUE(recorder.decisions[1].applied);
    EXPECT_EQ(recorder.decisions[1].train_gpus, 6);
    EXPECT_FALSE(recorder.decisions[2].applied);
    EXPECT_TRUE(recorder.decisions[3].applied);
    EXPECT_EQ(recorder.decisions[3].train_gpus, 2);
    // The split in force at each step's end: 2 training GPUs, then 6 from a step after the
    // first decision, back to 2 by the end.
    EXPECT_EQ(recorder.steps[0].train_gpus, 2);
    EXPECT_EQ(recorder.steps[2].train_gpus, 6);
    EXPECT_EQ(recorder.steps[4].train_gpus, 2);
    EXPECT_EQ(recorder.steps[0].predicted_step_s, 10.0);
    EXPECT_EQ(recorder.steps[1].predicted_step_s, 20.0);
    EXPECT_EQ(recorder.steps[4].predicted_step_s, 23.0);
    int relayouts = 0;
    for (const records::EventRecord& e : recorder.events) relayouts += e.kind == "relayout";
    EXPECT_EQ(relayouts, 2);
    // The planner saw each step's trajectories and sizes.
    ASSERT_EQ(planner.observations.size(), 4u);
    EXPECT_EQ(planner.observations[0].trajectories.size(), 16u);
    // FixedWorkload: two turns, one tool call of 2 s.
    planner::TrajectorySize size{50, 200, 10};
    size.turns = 2;
    size.tool_s = 2;
    EXPECT_EQ(planner.observations[0].trajectories[0], size);
  }
}

/// FixedWorkload, but prompt 0's tool call takes `tool_s` (1,000 s: its group ends long after
/// the groups launched with it have trained).
class OneSlowPromptWorkload : public FixedWorkload {
 public:
  explicit OneSlowPromptWorkload(double tool_s = 1000) : tool_s_(tool_s) {}
  workload::TrajectoryScript Script(int64_t prompt, int sample, int version,
                                    double skill) const override {
    workload::TrajectoryScript s = FixedWorkload::Script(prompt, sample, version, skill);
    if (prompt == 0) s.turns[0].tool_latency_s = tool_s_;
    return s;
  }

 private:
  double tool_s_;
};

TEST(CoordinatorTest, AStaleGroupIsDroppedWhileTheTrainersGpusAreLent) {
  // Stream batches, the waiting trainer's GPUs lent to rollout: prompt 0's group ends beyond the
  // staleness bound while the trainer waits, lent, for the last step's batch. It is dropped and
  // replaced then; the run used to stall there, waiting for a batch the stale group blocked.
  const auto cost = test::Roofline("A800-80G", "Qwen3-0.6B");
  CoordinatorConfig config = Config(3, 1);
  config.stream_batches = true;
  OneSlowPromptWorkload workload;
  sim::ClusterSim sim(recipe::SimSpec(), workload, *cost);
  planner::StaticPlanner planner(std::optional<int>(4), std::vector<int>{1}, true);
  sched::LeastConnRouter router;
  MemoryRecorder recorder;
  Coordinator coordinator(config, workload, router, planner, sim, recorder);
  auto summary = coordinator.Run({}, {});
  ASSERT_OK(summary);
  ASSERT_EQ(recorder.steps.size(), 3u);
  int lends = 0;
  std::vector<std::string> rejects;
  for (const records::EventRecord& e : recorder.events) {
    lends += e.kind == "lend";
    if (e.kind == "reject") rejects.push_back(e.detail);
  }
  EXPECT_GT(lends, 0);
  EXPECT_EQ(rejects, std::vector<std::string>{"prompt 0: lag 2 > staleness 1, 2 samples dropped"});
  EXPECT_EQ(recorder.trajectories.size(), 12u);
  for (const records::TrajectoryRecord& t : recorder.trajectories) EXPECT_NE(t.prompt, 0);
  // The run's throughput (the tuner's objective) counts what it trained, not the dropped group.
  EXPECT_EQ(summary->trajectories, 12);
  EXPECT_EQ(summary->rejected_groups, 1);
}

TEST(CoordinatorTest, TheRejectedGroupsSizesReachThePlannerOnce) {
  // Stream batches: prompt 0's group ends mid-run beyond the staleness bound and is rejected.
  // The planner is told its sizes once, with the next step's observation beside the trained
  // ones, so that its length history holds what rollout generated.
  const auto cost = test::Roofline("A800-80G", "Qwen3-0.6B");
  CoordinatorConfig config = Config(30, 1);
  config.stream_batches = true;
  OneSlowPromptWorkload workload(30);  // its group ends a few steps late
  sim::ClusterSim sim(recipe::SimSpec(), workload, *cost);
  ScriptedPlanner planner(/*moves=*/false);
  sched::LeastConnRouter router;
  MemoryRecorder recorder;
  Coordinator coordinator(config, workload, router, planner, sim, recorder);
  auto summary = coordinator.Run({}, {});
  ASSERT_OK(summary);
  ASSERT_EQ(summary->rejected_groups, 1);
  std::vector<planner::TrajectorySize> rejected;
  for (const planner::StepObservation& o : planner.observations) {
    rejected.insert(rejected.end(), o.rejected_trajectories.begin(), o.rejected_trajectories.end());
    for (const planner::TrajectorySize& t : o.trajectories) EXPECT_LT(t.tool_s, 30);
  }
  ASSERT_EQ(rejected.size(), 2u);  // the group's two samples
  for (const planner::TrajectorySize& t : rejected) EXPECT_GE(t.tool_s, 30);
}

/// Keeps what MemoryRecorder keeps but the turns, as the recorders of summary-only runs do.
class TurnlessRecorder : public MemoryRecorder {
 public:
  bool KeepsTurns() const override { return false; }
};

TEST(CoordinatorTest, ARecorderThatKeepsNoTurnsIsSentNoneAndTheRunIsTheSame) {
  // The turns' rows are built only for a recorder that reads them; the planner still sees every
  // tool call's latency, in the same order.
  struct Run {
    Result<RunSummary> summary;
    std::vector<planner::StepObservation> observations;
  };
  auto run = [](MemoryRecorder& recorder) {
    const auto cost = test::Roofline("A800-80G", "Qwen3-0.6B");
    FixedWorkload workload;
    sim::ClusterSim sim(recipe::SimSpec(), workload, *cost);
    ScriptedPlanner planner(/*moves=*/false);
    sched::LeastConnRouter router;
    Coordinator coordinator(Config(4, 1), workload, router, planner, sim, recorder);
    Result<RunSummary> summary = coordinator.Run({}, {});
    return Run{std::move(summary), std::move(planner.observations)};
  };
  MemoryRecorder full;
  TurnlessRecorder turnless;
  const Run with_turns = run(full);
  const Run without = run(turnless);
  ASSERT_OK(with_turns.summary);
  ASSERT_OK(without.summary);
  EXPECT_EQ(full.turns.size(), 32u);  // 4 steps x 4 trajectories x 2 turns
  EXPECT_TRUE(turnless.turns.empty());
  EXPECT_EQ(full.steps, turnless.steps);
  EXPECT_EQ(full.trajectories, turnless.trajectories);
  std::vector<double> latencies, recorded;
  for (const records::TurnRecord& turn : full.turns) {
    if (!turn.tool.empty()) recorded.push_back(turn.tool_latency_s);
  }
  ASSERT_EQ(with_turns.observations.size(), without.observations.size());
  for (size_t i = 0; i < without.observations.size(); ++i) {
    const planner::StepObservation& o = without.observations[i];
    EXPECT_EQ(o.tool_latencies_s, with_turns.observations[i].tool_latencies_s);
    latencies.insert(latencies.end(), o.tool_latencies_s.begin(), o.tool_latencies_s.end());
  }
  // Every step but the last is observed: its trajectories' 16 - 4 tool calls.
  EXPECT_EQ(latencies.size(), 12u);
  EXPECT_EQ(latencies, std::vector<double>(recorded.begin(), recorded.begin() + 12));
}

}  // namespace
}  // namespace libra::experiment
