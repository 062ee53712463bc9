// TurnRunner against a fake SGLang engine and tool and reward commands in the sandbox: a turn
// that calls the tool, the tool's tokens masked out, the final turn scored, the transcript the
// trainer gets, and turns that fail back to the coordinator. No torch needed.
#include "cluster/turn_runner.h"

#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

class TurnRunnerTest : public ::testing::Test {
 protected:
  backend::StartTurn Turn(int64_t trajectory, int turn) {
    backend::StartTurn t;
    t.trajectory = TrajectoryId(trajectory);
    t.prompt = 5;
    t.turn = turn;
    t.instance = InstanceId(0);
    return t;
  }

  // Runs until `count` events have arrived.
  bool Events(size_t count) {
    return f_.RunUntil([&] { return f_.sink->events.size() >= count; });
  }

  FakeTurnRig rig_{1};
  FakeRuntime& f_ = rig_.f;
  FakeEngines& engines_ = rig_.engines;
  cluster::TurnRunner& runner_ = rig_.runner;
};

TEST_F(TurnRunnerTest, ATrajectoryCallsItsToolAndIsScored) {
  runner_.StartTurn(Turn(1, 0));
  ASSERT_TRUE(Events(1)) << f_.sink->failure.message();
  auto done = f_.sink->Of<backend::TurnDone>();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].end, workload::TurnEnd::kToolCall);
  EXPECT_EQ(done[0].generated_tokens, 2);
  EXPECT_EQ(done[0].prompt_tokens, 3);
  // The whole transcript went to the engine, token ids as the prompt command gave them.
  EXPECT_EQ(engines_.received.back().body.Find("input_ids")->ToString(), "[1,3,4]");
  runner_.RunTool(backend::RunTool{TrajectoryId(1), "tool"});
  ASSERT_TRUE(Events(2)) << f_.sink->failure.message();
  auto tools = f_.sink->Of<backend::ToolDone>();
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0].status, workload::ToolStatus::kSuccess);
  EXPECT_EQ(tools[0].output_tokens, 1);
  runner_.StartTurn(Turn(1, 1));
  ASSERT_TRUE(Events(3)) << f_.sink->failure.message();
  EXPECT_EQ(engines_.received.back().body.Find("input_ids")->ToString(), "[1,3,4,7,20,30]");
  done = f_.sink->Of<backend::TurnDone>();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].end, workload::TurnEnd::kStop);
  EXPECT_EQ(done[1].reward, 1.0);
  EXPECT_EQ(f_.sink->completed, 3);

  auto sequences = runner_.TakeSequences({TrajectoryId(1)}, {0.5});
  ASSERT_TRUE(sequences.ok());
  ASSERT_EQ(sequences->size(), 1u);
  const cluster::TrainSequence& s = (*sequences)[0];
  EXPECT_EQ(s.prompt_ids, (std::vector<cluster::TokenId>{1, 3, 4}));
  EXPECT_EQ(s.completion_ids, (std::vector<cluster::TokenId>{7, 20, 30, 8, 2}));
  EXPECT_EQ(s.loss_mask, (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  EXPECT_EQ(s.logprobs, (std::vector<double>{-0.5, -0.5, 0, -0.5, -0.5}));
  EXPECT_EQ(s.advantage, 0.5);
  // Taken once.
  EXPECT_FALSE(runner_.TakeSequences({TrajectoryId(1)}, {0.5}).ok());
}

TEST_F(TurnRunnerTest, EverySamplingParameterIsSent) {
  runner_.StartTurn(Turn(1, 0));
  ASSERT_TRUE(Events(1));
  const JsonValue* params = engines_.received.back().body.Find("sampling_params");
  ASSERT_NE(params, nullptr);
  for (const char* key : {"max_new_tokens", "temperature", "top_p", "stop_token_ids"}) {
    EXPECT_NE(params->Find(key), nullptr) << key;
  }
}

TEST_F(TurnRunnerTest, ATurnOnAnInstanceThatDoesNotServeFails) {
  backend::StartTurn turn = Turn(1, 0);
  turn.instance = InstanceId(3);
  runner_.StartTurn(turn);
  ASSERT_TRUE(Events(1));
  auto failed = f_.sink->Of<backend::TurnFailed>();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].reason, "instance 3 is not serving");
}

TEST_F(TurnRunnerTest, AReplyThatIsNotWhatWasAskedForEndsTheRun) {
  engines_.generate = [](int, const std::vector<int64_t>&) {
    TestHttpReply reply;
    reply.body = R"({"meta_info": {}})";
    return reply;
  };
  runner_.StartTurn(Turn(1, 0));
  ASSERT_TRUE(RunLoopUntil(*f_.loop, [&] { return !f_.sink->failure.ok(); }));
  EXPECT_NE(f_.sink->failure.message().find("meta_info.finish_reason is missing"),
            std::string::npos)
      << f_.sink->failure.message();
}

TEST_F(TurnRunnerTest, AToolThatFailsIsAFailedCallAndAnIncident) {
  f_.options.agent.tool_command = *cluster::CommandTemplate::Parse("sh -c 'exit 3'");
  runner_.StartTurn(Turn(1, 0));
  ASSERT_TRUE(Events(1));
  runner_.RunTool(backend::RunTool{TrajectoryId(1), "tool"});
  ASSERT_TRUE(Events(3));
  auto tools = f_.sink->Of<backend::ToolDone>();
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0].status, workload::ToolStatus::kFailure);
  EXPECT_EQ(tools[0].output_tokens, 0);
  ASSERT_EQ(f_.sink->Incidents("tool").size(), 1u);
}

}  // namespace
}  // namespace libra::test
