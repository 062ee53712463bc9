// TrainerSupervisor against a fake trainer (an HttpTestServer speaking libra's trainer protocol)
// whose process is a sleeping child of a fake launcher: start, the prepare command, replicas
// joining and leaving, a kill and its restart from the last checkpoint with the job sent again,
// and the restart budget. No torch needed.
#include "cluster/trainer_supervisor.h"

#include "cluster/cluster_test_util.h"
#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

class TrainerSupervisorTest : public ::testing::Test {
 protected:
  TrainerSupervisorTest() : trainer_(f_.loop.get(), f_.options.trainer.port) {}

  void Start(cluster::TrainerSupervisor& supervisor) {
    supervisor.Start();
    ASSERT_TRUE(f_.RunUntil([&] { return supervisor.ready(); })) << f_.sink->failure.message();
  }

  FakeRuntime f_;
  FakeTrainer trainer_;
};

TEST_F(TrainerSupervisorTest, StartsFromTheInitialWeights) {
  cluster::TrainerSupervisor supervisor(f_.runtime, 0);
  Start(supervisor);
  ASSERT_EQ(f_.asked.size(), 1u);
  EXPECT_EQ(f_.asked[0].name, "trainer");
  const std::vector<std::string> argv = {"trainer", "--port",
                                         std::to_string(f_.options.trainer.port), "--weights",
                                         f_.options.trainer.initial_weights};
  EXPECT_EQ(f_.asked[0].argv, argv);
  EXPECT_EQ(supervisor.version(), 0);
}

TEST_F(TrainerSupervisorTest, AResumedRunStartsFromItsCheckpoint) {
  cluster::TrainerSupervisor supervisor(f_.runtime, 3);
  Start(supervisor);
  EXPECT_EQ(f_.asked[0].argv.back(), f_.runtime.CheckpointPath(3));
  EXPECT_EQ(supervisor.version(), 3);
}

TEST_F(TrainerSupervisorTest, ThePrepareCommandRunsWhenTheInitialWeightsAreMissing) {
  std::filesystem::remove(f_.options.trainer.initial_weights);
  f_.options.trainer.has_prepare_command = true;
  f_.options.trainer.prepare_command = *cluster::CommandTemplate::Parse("make {weights}");
  f_.launcher->programs["prepare"] = {"true"};
  cluster::TrainerSupervisor supervisor(f_.runtime, 0);
  Start(supervisor);
  ASSERT_EQ(f_.asked.size(), 2u);
  EXPECT_EQ(f_.asked[0].name, "prepare");
  EXPECT_EQ(f_.asked[0].argv.back(), f_.options.trainer.initial_weights);
  EXPECT_EQ(f_.asked[1].name, "trainer");
}

TEST_F(TrainerSupervisorTest, ReplicasJoinAndLeave) {
  cluster::TrainerSupervisor supervisor(f_.runtime, 0);
  Start(supervisor);
  std::optional<Status> done;
  supervisor.SetReplicas(3, false, [&](Status s) { done = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return done.has_value(); }));
  EXPECT_TRUE(done->ok()) << done->message();
  EXPECT_EQ(trainer_.replicas, (std::vector<std::string>{"replica-0", "replica-1", "replica-2"}));
  EXPECT_TRUE(f_.sink->Incidents("switch").empty());  // not announced
  done.reset();
  supervisor.SetReplicas(1, true, [&](Status s) { done = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return done.has_value(); }));
  EXPECT_TRUE(done->ok());
  EXPECT_EQ(trainer_.replicas, (std::vector<std::string>{"replica-0"}));
  EXPECT_EQ(supervisor.replicas(), 1);
  EXPECT_EQ(f_.sink->Incidents("switch"),
            (std::vector<std::string>{"trainer: data parallelism 3 -> 1 replicas"}));
}

TEST_F(TrainerSupervisorTest, AKilledTrainerRestartsFromItsCheckpointAndResendsItsJob) {
  cluster::TrainerSupervisor supervisor(f_.runtime, 0);
  Start(supervisor);
  supervisor.Checkpointed(2, f_.runtime.CheckpointPath(2));
  supervisor.set_layout_replicas(2);
  int jobs = 0;
  supervisor.SetJob([&] { ++jobs; });
  FakeRuntime::Kill(supervisor.Pid());
  ASSERT_TRUE(f_.RunUntil([&] { return jobs == 1; })) << f_.sink->failure.message();
  EXPECT_EQ(f_.sink->Incidents("fault").size(), 1u);
  EXPECT_EQ(f_.sink->Incidents("restart"),
            (std::vector<std::string>{"trainer: restarted from " + f_.runtime.CheckpointPath(2) +
                                      " (version 2)"}));
  ASSERT_EQ(f_.asked.size(), 2u);
  EXPECT_EQ(f_.asked[1].name, "trainer-r1");
  EXPECT_EQ(f_.asked[1].argv.back(), f_.runtime.CheckpointPath(2));
  EXPECT_EQ(supervisor.replicas(), 2);  // the layout's replicas joined again
}

TEST_F(TrainerSupervisorTest, ATrainerThatDiesPastItsRestartsEndsTheRun) {
  f_.options.trainer.restarts = 0;
  cluster::TrainerSupervisor supervisor(f_.runtime, 0);
  Start(supervisor);
  FakeRuntime::Kill(supervisor.Pid());
  ASSERT_TRUE(RunLoopUntil(*f_.loop, [&] { return !f_.sink->failure.ok(); }));
  EXPECT_NE(f_.sink->failure.message().find("exited (killed by SIGKILL) after 0 restart(s)"),
            std::string::npos)
      << f_.sink->failure.message();
}

TEST_F(TrainerSupervisorTest, ARequestThatFailsWhileTheTrainerLivesEndsTheRun) {
  cluster::TrainerSupervisor supervisor(f_.runtime, 0);
  Start(supervisor);
  supervisor.RequestFailed(Status::Backend("trainer", "POST /train_step: timed out"));
  ASSERT_TRUE(RunLoopUntil(*f_.loop, [&] { return !f_.sink->failure.ok(); }));
  EXPECT_EQ(f_.sink->failure.message(), "trainer: POST /train_step: timed out");
}

}  // namespace
}  // namespace libra::test
