// Evaluator against two fake SGLang engines and shell tool and reward commands: held-out prompts
// scored as whole trajectories spread over the engines, their events kept from the coordinator,
// failed turns run again elsewhere, and a reward command that fails ends the run. No torch
// needed.
#include "cluster/evaluator.h"

#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

class EvaluatorTest : public ::testing::Test {
 protected:
  EvaluatorTest() {
    f_.runtime.sink = &evaluator_;
    f_.options.engine.retry_backoff_s = 0.01;
  }

  /// Evaluates `prompts` held-out prompts of version 3; the score, or nullopt when the run
  /// failed first.
  std::optional<double> Evaluate(int prompts) {
    backend::Evaluate evaluate{3, {}};
    for (int i = 0; i < prompts; ++i) evaluate.prompts.push_back((int64_t{1} << 41) + i);
    std::optional<double> score;
    evaluator_.Run(evaluate, [&](double s) { score = s; });
    EXPECT_TRUE(evaluator_.busy() || score.has_value());
    f_.RunUntil([&] { return score.has_value(); });
    return score;
  }

  /// Generate requests the engine on `port` received.
  size_t GeneratesOn(int port) const {
    size_t n = 0;
    for (const Received& r : engines_.received) n += r.port == port && r.path == "/generate";
    return n;
  }

  FakeTurnRig rig_{2};
  FakeRuntime& f_ = rig_.f;
  FakeEngines& engines_ = rig_.engines;
  cluster::Evaluator evaluator_{f_.runtime, rig_.supervisor, rig_.runner, *f_.sink};
};

TEST_F(EvaluatorTest, ScoresEveryPromptAsAWholeTrajectoryOnEveryEngine) {
  f_.options.agent.reward_command =
      *cluster::CommandTemplate::Parse(R"(sh -c 'cat >/dev/null; echo "{{\"reward\": 0.25}}"')");
  const std::optional<double> score = Evaluate(4);
  ASSERT_TRUE(score.has_value()) << f_.sink->failure.message();
  EXPECT_DOUBLE_EQ(*score, 0.25);
  EXPECT_FALSE(evaluator_.busy());
  // Each prompt: a tool call, then its answer; spread over both engines.
  const int port = f_.options.engine.base_port;
  EXPECT_EQ(GeneratesOn(port) + GeneratesOn(port + 1), 8u);
  EXPECT_GT(GeneratesOn(port), 0u);
  EXPECT_GT(GeneratesOn(port + 1), 0u);
  // The held-out prompt ids reached the prompt command, and nothing of the evaluation reached
  // the coordinator: its turns and tool calls are the evaluator's.
  EXPECT_TRUE(f_.sink->Of<backend::TurnDone>().empty());
  EXPECT_TRUE(f_.sink->Of<backend::ToolDone>().empty());
  EXPECT_EQ(f_.sink->completed, 0);
}

TEST_F(EvaluatorTest, EveryEvaluationSamplesAPromptWithTheSameSeeds) {
  ASSERT_TRUE(Evaluate(2).has_value());
  std::vector<std::string> first;
  for (const Received& r : engines_.received) {
    if (r.path == "/generate") first.push_back(r.body.Find("sampling_params")->ToString());
  }
  engines_.received.clear();
  ASSERT_TRUE(Evaluate(2).has_value());
  std::vector<std::string> second;
  for (const Received& r : engines_.received) {
    if (r.path == "/generate") second.push_back(r.body.Find("sampling_params")->ToString());
  }
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(first, second);
}

TEST_F(EvaluatorTest, OtherEventsPassThrough) {
  backend::TurnDone done;
  done.trajectory = TrajectoryId(7);
  f_.runtime.Emit(done, true);
  f_.runtime.Emit(backend::Incident{"tool", "x", "y", 0}, false);
  EXPECT_EQ(f_.sink->Of<backend::TurnDone>().size(), 1u);
  EXPECT_EQ(f_.sink->Incidents("tool").size(), 1u);
  EXPECT_EQ(f_.sink->completed, 1);
  // A late word on an evaluation trajectory (none is running) is not the coordinator's.
  f_.runtime.Emit(backend::TurnFailed{TrajectoryId(cluster::kFirstEvalTrajectory + 2),
                                      InstanceId(0), "engine-0 died"},
                  true);
  EXPECT_TRUE(f_.sink->Of<backend::TurnFailed>().empty());
  EXPECT_EQ(f_.sink->completed, 1);
}

TEST_F(EvaluatorTest, ATurnThatFailsRunsAgainElsewhere) {
  const int port = f_.options.engine.base_port;
  int refused = 0;
  engines_.generate = [&](int on, const std::vector<int64_t>& prompt) {
    // The first engine aborts its first two turns (as when it is put to sleep).
    if (on == port && refused < 2) {
      ++refused;
      return FakeEngines::Reply(prompt, {}, "abort");
    }
    const bool answered =
        std::find(prompt.begin(), prompt.end(), int64_t{FakeEngines::kToolOutput}) != prompt.end();
    return answered ? FakeEngines::Reply(prompt, {8, FakeEngines::kEos})
                    : FakeEngines::Reply(prompt, {7, FakeEngines::kToolCall});
  };
  const std::optional<double> score = Evaluate(4);
  ASSERT_TRUE(score.has_value()) << f_.sink->failure.message();
  EXPECT_DOUBLE_EQ(*score, 1.0);
  EXPECT_EQ(refused, 2);
  EXPECT_TRUE(f_.sink->Of<backend::TurnFailed>().empty());
}

TEST_F(EvaluatorTest, ARewardCommandThatFailsEndsTheRun) {
  f_.options.agent.reward_command = *cluster::CommandTemplate::Parse("sh -c 'exit 4'");
  EXPECT_FALSE(Evaluate(2).has_value());
  EXPECT_FALSE(f_.sink->failure.ok());
  EXPECT_NE(f_.sink->failure.message().find("reward-eval-"), std::string::npos)
      << f_.sink->failure.message();
}

TEST_F(EvaluatorTest, APromptThatKeepsFailingEndsTheRunNamingIt) {
  engines_.generate = [](int, const std::vector<int64_t>& prompt) {
    return FakeEngines::Reply(prompt, {}, "abort");
  };
  EXPECT_FALSE(Evaluate(1).has_value());
  EXPECT_NE(f_.sink->failure.message().find("evaluation of version 3: held-out prompt "
                                            "2199023255552 failed 9 times"),
            std::string::npos)
      << f_.sink->failure.message();
}

}  // namespace
}  // namespace libra::test
