// EngineSupervisor against fake engines (HttpTestServers answering as SGLang) whose processes are
// sleeping children of a fake launcher: start and catch up, sleep and wake, a kill and its
// restart, the restart budget and the drop, failed health checks. No torch needed.
#include "cluster/engine_supervisor.h"

#include "cluster/cluster_test_util.h"
#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

using cluster::Done;
using cluster::Engine;
using cluster::EngineState;

class EngineSupervisorTest : public ::testing::Test {
 protected:
  EngineSupervisorTest()
      : engines_(f_.loop.get(), f_.options.engine.base_port, 8),
        supervisor_(f_.runtime, versions_) {}

  // Launches an engine on GPUs [first, first + tp) and waits until it serves.
  int64_t Started(int first, int tp) {
    const int64_t key = supervisor_.Add(backend::InstanceSpec{InstanceId(0), tp, 0, first}).key;
    std::optional<Status> ready;
    supervisor_.Launch(key, [&](Status s) { ready = s; });
    EXPECT_TRUE(f_.RunUntil([&] { return ready.has_value(); }));
    EXPECT_TRUE(ready && ready->ok()) << (ready ? ready->message() : "no answer");
    return key;
  }

  FakeRuntime f_;
  FakeEngines engines_;
  cluster::WeightVersions versions_;
  cluster::EngineSupervisor supervisor_;
};

TEST_F(EngineSupervisorTest, StartsAnEngineOnItsGpusAndPort) {
  const int64_t key = Started(2, 2);
  const Engine& e = supervisor_.at(key);
  EXPECT_EQ(e.state, EngineState::kReady);
  EXPECT_EQ(e.weights, 0);
  ASSERT_EQ(f_.asked.size(), 1u);
  EXPECT_EQ(f_.asked[0].name, "engine-0");
  EXPECT_EQ(f_.asked[0].env.at("CUDA_VISIBLE_DEVICES"), "2,3");
  const std::vector<std::string> argv = {"engine", "--port",
                                         std::to_string(f_.options.engine.base_port), "--tp", "2"};
  EXPECT_EQ(f_.asked[0].argv, argv);
  EXPECT_EQ(engines_.Count("/update_weights_from_disk"), 0);  // it started on the synced weights
}

TEST_F(EngineSupervisorTest, AnEngineStartedOnOlderWeightsLoadsTheSyncedOnesFirst) {
  versions_.policy = versions_.synced = 3;
  // It starts on policy.pt, which holds the synced version: nothing to load.
  const int64_t key = Started(0, 1);
  EXPECT_EQ(supervisor_.at(key).weights, 3);
  // An engine that woke with older weights loads them from disk before it serves.
  std::optional<Status> slept, woke;
  supervisor_.Sleep(key, [&](Status s) { slept = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return slept.has_value(); }));
  versions_.policy = versions_.synced = 4;
  supervisor_.Wake(key, [&](Status s) { woke = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return woke.has_value(); }));
  EXPECT_TRUE(woke->ok()) << woke->message();
  EXPECT_EQ(engines_.Count("/update_weights_from_disk"), 1);
  EXPECT_EQ(supervisor_.at(key).weights, 4);
}

TEST_F(EngineSupervisorTest, SleepAndWakeReleaseAndResumeMemory) {
  const int64_t key = Started(0, 1);
  std::optional<Status> slept;
  supervisor_.Sleep(key, [&](Status s) { slept = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return slept.has_value(); }));
  EXPECT_TRUE(slept->ok());
  EXPECT_EQ(supervisor_.at(key).state, EngineState::kSleeping);
  EXPECT_EQ(engines_.Count("/release_memory_occupation"), 1);
  // A turn that arrives while it sleeps waits for it.
  std::optional<Status> serving;
  supervisor_.WhenServing(key, [&](Status s) { serving = s; });
  EXPECT_FALSE(serving.has_value());
  std::optional<Status> woke;
  supervisor_.Wake(key, [&](Status s) { woke = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return woke.has_value() && serving.has_value(); }));
  EXPECT_TRUE(woke->ok());
  EXPECT_TRUE(serving->ok());
  EXPECT_EQ(engines_.Count("/resume_memory_occupation"), 1);
}

TEST_F(EngineSupervisorTest, AKilledEngineFailsItsTurnsAndIsRestarted) {
  const int64_t key = Started(0, 1);
  supervisor_.SetInstances({key});
  supervisor_.at(key).in_layout = true;
  const uint64_t attempt = supervisor_.BeginTurn(key, TrajectoryId(7));
  FakeRuntime::Kill(supervisor_.Pid(InstanceId(0)));
  ASSERT_TRUE(f_.RunUntil([&] { return !f_.sink->Incidents("restart").empty(); }));
  const auto failed = f_.sink->Of<backend::TurnFailed>();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].trajectory, TrajectoryId(7));
  EXPECT_EQ(failed[0].reason, "engine-0 died");
  EXPECT_FALSE(supervisor_.EndTurn(key, TrajectoryId(7), attempt));  // its reply comes too late
  EXPECT_EQ(f_.sink->Incidents("fault").size(), 1u);
  EXPECT_EQ(f_.sink->Incidents("restart")[0], "engine-0: restarted (attempt 1)");
  const auto health = f_.sink->Of<backend::InstanceHealth>();
  ASSERT_EQ(health.size(), 2u);
  EXPECT_FALSE(health[0].up);
  EXPECT_TRUE(health[1].up);
  // The new process has its own name; it listens on the port the dead one left.
  ASSERT_EQ(f_.asked.size(), 2u);
  EXPECT_EQ(f_.asked[1].name, "engine-0-r1");
  EXPECT_EQ(f_.asked[1].argv[2], std::to_string(f_.options.engine.base_port));
  EXPECT_EQ(supervisor_.at(key).state, EngineState::kReady);
  EXPECT_EQ(supervisor_.restarting(), 0);
}

TEST_F(EngineSupervisorTest, EnginesTakeTheLowestPortNoLiveEngineHolds) {
  // However often engines die and start again, they stay within base_port .. base_port + (most
  // engines alive at once) - 1: a run's ports never creep into the trainer's or another
  // service's.
  f_.options.engine.restarts = 5;
  const int base = f_.options.engine.base_port;
  const int64_t a = Started(0, 1);
  const int64_t b = Started(1, 1);
  supervisor_.SetInstances({a, b});
  supervisor_.at(a).in_layout = true;
  supervisor_.at(b).in_layout = true;
  EXPECT_EQ(supervisor_.at(a).port, base);
  EXPECT_EQ(supervisor_.at(b).port, base + 1);
  for (int kill = 1; kill <= 3; ++kill) {
    ASSERT_TRUE(supervisor_.at(a).process.has_value());
    FakeRuntime::Kill(f_.processes->pid(*supervisor_.at(a).process));
    ASSERT_TRUE(f_.RunUntil([&] {
      return static_cast<int>(f_.sink->Incidents("restart").size()) == kill &&
             supervisor_.at(a).state == EngineState::kReady;
    }));
    EXPECT_EQ(supervisor_.at(a).port, base) << "after kill " << kill;
    EXPECT_EQ(supervisor_.at(b).port, base + 1);
  }
  for (const cluster::ProcessSpec& asked : f_.asked) {
    EXPECT_LE(std::stoi(asked.argv[2]), base + 1) << asked.name;
  }
}

TEST_F(EngineSupervisorTest, AnEngineThatDiesPastItsRestartsIsDropped) {
  const int64_t key = Started(0, 1);
  supervisor_.SetInstances({key});
  supervisor_.at(key).in_layout = true;
  FakeRuntime::Kill(supervisor_.Pid(InstanceId(0)));
  ASSERT_TRUE(f_.RunUntil([&] { return !f_.sink->Incidents("restart").empty(); }));
  // Asleep, it holds a turn that waits for it to serve.
  std::optional<Status> slept, serving;
  supervisor_.Sleep(key, [&](Status s) { slept = s; });
  ASSERT_TRUE(f_.RunUntil([&] { return slept.has_value(); }));
  supervisor_.WhenServing(key, [&](Status s) { serving = s; });
  FakeRuntime::Kill(supervisor_.Pid(InstanceId(0)));
  ASSERT_TRUE(f_.RunUntil([&] { return !f_.sink->Incidents("drop").empty(); }));
  EXPECT_EQ(f_.sink->Incidents("drop")[0], "engine-0: dropped after 1 restart(s)");
  ASSERT_TRUE(serving.has_value());
  EXPECT_FALSE(serving->ok());
  EXPECT_EQ(serving->message(), "engine-0 was dropped");
  EXPECT_EQ(supervisor_.at(key).state, EngineState::kDead);
  EXPECT_EQ(supervisor_.Serving(InstanceId(0)), nullptr);
}

TEST_F(EngineSupervisorTest, AFailedHealthCheckStopsAndRestartsTheEngine) {
  const int64_t key = Started(0, 1);
  engines_.control = [](int, const std::string& path) -> std::optional<TestHttpReply> {
    if (path != "/health") return std::nullopt;
    TestHttpReply sick;
    sick.status = 503;
    return sick;
  };
  supervisor_.Check(key);
  ASSERT_TRUE(f_.RunUntil([&] { return f_.sink->Incidents("fault").size() >= 2; }));
  EXPECT_EQ(f_.sink->Incidents("fault")[0], "engine-0: failed its health check; stopping it");
}

TEST_F(EngineSupervisorTest, StoppingAnEngineIsNoFault) {
  const int64_t key = Started(0, 1);
  const std::optional<pid_t> pid = f_.processes->pid(*supervisor_.at(key).process);
  supervisor_.Stop(key);
  ASSERT_TRUE(f_.RunUntil([&] { return !IsAlive(*pid); }));
  ASSERT_TRUE(f_.RunUntil([&] { return !supervisor_.at(key).process.has_value(); }));
  EXPECT_TRUE(f_.sink->Incidents("fault").empty());
  EXPECT_EQ(supervisor_.at(key).state, EngineState::kDead);
}

TEST_F(EngineSupervisorTest, DrainWaitsForTheTurnsInFlight) {
  const int64_t key = Started(0, 1);
  const uint64_t a = supervisor_.BeginTurn(key, TrajectoryId(1));
  const uint64_t b = supervisor_.BeginTurn(key, TrajectoryId(2));
  bool drained = false;
  supervisor_.Drain(key, [&] { drained = true; });
  EXPECT_FALSE(drained);
  EXPECT_TRUE(supervisor_.EndTurn(key, TrajectoryId(1), a));
  EXPECT_FALSE(drained);
  EXPECT_TRUE(supervisor_.EndTurn(key, TrajectoryId(2), b));
  EXPECT_TRUE(drained);
  // Paused: a turn waits until it is resumed.
  std::optional<Status> serving;
  supervisor_.WhenServing(key, [&](Status s) { serving = s; });
  EXPECT_FALSE(serving.has_value());
}

}  // namespace
}  // namespace libra::test
