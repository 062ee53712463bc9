#include "cluster/trainer_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kUrl = "http://127.0.0.1:8100";

HttpResponse Reply(std::string body, long status = 200) { return HttpResponse{status, body}; }

TrainSequence Sequence(double advantage) {
  TrainSequence sequence;
  sequence.prompt_ids = {1, 3, 17, 4};
  sequence.completion_ids = {5, 17, 6, 7, 20, 8, 9, 20, 2};
  sequence.logprobs = {-0.5, -1.25, -0.125, 0, 0, 0, -0.75, -2.0, -0.25};
  sequence.loss_mask = {1, 1, 1, 0, 0, 0, 1, 1, 1};
  sequence.advantage = advantage;
  return sequence;
}

TrainStepRequest Batch() {
  TrainStepRequest request;
  request.step = 3;
  request.sequences = {Sequence(0.5), Sequence(-0.5)};
  request.timeout_s = 120;
  return request;
}

WeightUpdateGroup Group() {
  WeightUpdateGroup group;
  group.master_address = "10.0.0.2";
  group.master_port = 29600;
  group.world_size = 3;
  group.backend = "gloo";
  return group;
}

TEST(TrainerClientTest, TrainStepRequestIsExact) {
  // The batch goes as token ids, per-token logprobs and mask, and one advantage per sequence.
  TrainStepRequest request = Batch();
  request.sequences.resize(1);
  const auto http = TrainerClient(std::string(kUrl) + "/").TrainStep(request);
  ASSERT_OK(http);
  EXPECT_EQ(http->method, "POST");
  EXPECT_EQ(http->url, "http://127.0.0.1:8100/train_step");
  EXPECT_EQ(http->timeout_s, 120);
  EXPECT_EQ(http->body, R"({"step":3,"sequences":[{"prompt_ids":[1,3,17,4],)"
                        R"("completion_ids":[5,17,6,7,20,8,9,20,2],)"
                        R"("logprobs":[-0.5,-1.25,-0.125,0.0,0.0,0.0,-0.75,-2.0,-0.25],)"
                        R"("loss_mask":[1,1,1,0,0,0,1,1,1],"advantage":0.5}]})");
}

TEST(TrainerClientTest, RefusesBatchesLibraGotWrong) {
  // A batch that cannot be right is refused before it is sent.
  struct Case {
    std::string name;
    TrainStepRequest request;
    std::string error;
  };
  std::vector<Case> cases;
  cases.push_back({"empty batch", TrainStepRequest{}, "the batch has no sequence"});
  TrainStepRequest short_mask = Batch();
  short_mask.sequences[1].loss_mask.pop_back();
  cases.push_back({"short mask", short_mask,
                   "sequences[1]: completion_ids, logprobs and loss_mask have 9, 9 and 8"});
  TrainStepRequest no_prompt = Batch();
  no_prompt.sequences[0].prompt_ids.clear();
  cases.push_back({"no prompt", no_prompt, "sequences[0]: prompt_ids is empty"});
  TrainStepRequest bad_bit = Batch();
  bad_bit.sequences[0].loss_mask[2] = 2;
  cases.push_back({"bad mask bit", bad_bit, "loss_mask[2] is 2, not 0 or 1"});
  TrainStepRequest nothing = Batch();
  for (TrainSequence& s : nothing.sequences) s.loss_mask.assign(9, 0);
  cases.push_back({"nothing to train", nothing, "no token has loss_mask 1"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto http = TrainerClient(kUrl).TrainStep(c.request);
    ASSERT_FALSE(http.ok());
    EXPECT_EQ(http.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(http.status().message(), HasSubstr(c.error));
  }
}

TEST(TrainerClientTest, ControlRequestsAreExact) {
  // Saving, the weight-update group, the broadcast, membership, health and metrics.
  const TrainerClient trainer(kUrl);
  struct Case {
    std::string name;
    HttpRequest request;
    std::string method;
    std::string path;
    std::string body;
  };
  const std::vector<Case> cases = {
      {"save", trainer.SaveWeights("/ckpt/v4"), "POST", "/save_weights", R"({"path":"/ckpt/v4"})"},
      {"save version", trainer.SaveWeights("/ckpt/v4", 4), "POST", "/save_weights",
       R"({"path":"/ckpt/v4","version":4})"},
      {"init group", trainer.InitWeightUpdateGroup(Group()), "POST", "/init_weight_update_group",
       R"({"master_address":"10.0.0.2","master_port":29600,"world_size":3,)"
       R"("group_name":"weight_update_group","backend":"gloo"})"},
      {"broadcast", trainer.BroadcastWeights(Group(), 4), "POST", "/broadcast_weights",
       R"({"group_name":"weight_update_group","version":4})"},
      {"join", trainer.Join("node1:gpu0-3"), "POST", "/join", R"({"replica":"node1:gpu0-3"})"},
      {"leave", trainer.Leave("node1:gpu0-3"), "POST", "/leave", R"({"replica":"node1:gpu0-3"})"},
      {"health", trainer.Health(), "GET", "/health", ""},
      {"metrics", trainer.Metrics(), "GET", "/metrics", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.request.method, c.method);
    EXPECT_EQ(c.request.url, std::string(kUrl) + c.path);
    EXPECT_EQ(c.request.body, c.body);
  }
}

TEST(TrainerClientTest, ParsesRealShapedReplies) {
  // The replies of workers/trainer.py, extra members included, parse to their values.
  const TrainerClient trainer(kUrl);
  const auto step = trainer.ParseTrainStep(
      Batch(), Reply(R"({"step":3,"version":4,"loss":-0.0123,"kl":0.002,"clip_fraction":0.0,)"
                     R"("grad_norm":0.25,"tokens":12,"sequences":2,"seconds":0.18})"));
  ASSERT_OK(step);
  TrainStepResult expected{3, 4, -0.0123, 0.002, 0.25, 12, 0.18};
  expected.clip_fraction = 0.0;  // reported; logprob_diff is not, so it stays unset
  EXPECT_EQ(*step, expected);

  const auto saved = trainer.ParseSaveWeights(
      "/ckpt/v4", Reply(R"({"path":"/ckpt/v4","version":4,"seconds":0.01})"));
  ASSERT_OK(saved);
  EXPECT_EQ(*saved, (SavedWeights{"/ckpt/v4", 4, 0.01}));

  const auto tensors = trainer.ParseInitWeightUpdateGroup(
      Reply(R"({"success":true,"group_name":"weight_update_group","rank":0,"world_size":3,)"
            R"("tensors":[{"name":"embed.weight","dtype":"float32","shape":[64,64]},)"
            R"({"name":"head.bias","dtype":"float32","shape":[64]}],"seconds":1.5})"));
  ASSERT_OK(tensors);
  EXPECT_EQ(*tensors, (std::vector<TensorSpec>{{"embed.weight", "float32", {64, 64}},
                                               {"head.bias", "float32", {64}}}));

  const auto broadcast = trainer.ParseBroadcastWeights(
      Reply(R"({"version":4,"tensors":30,"bytes":466176,"seconds":0.02})"));
  ASSERT_OK(broadcast);
  EXPECT_EQ(*broadcast, (BroadcastResult{4, 30, 466176, 0.02}));

  const auto members =
      trainer.ParseMembership(trainer.Join("b"), Reply(R"({"replicas":["a","b"],"dp_size":2})"));
  ASSERT_OK(members);
  EXPECT_EQ(members->replicas, (std::vector<std::string>{"a", "b"}));

  const auto version = trainer.ParseHealth(Reply(R"({"status":"ok","version":4})"));
  ASSERT_OK(version);
  EXPECT_EQ(*version, 4);

  const auto metrics = trainer.ParseMetrics(
      Reply(R"({"version":4,"steps":4,"tokens":480,"sequences":64,"train_seconds":0.8,)"
            R"("last_step":null,"replicas":["a"],"dp_size":1,"group_name":null})"));
  ASSERT_OK(metrics);
  EXPECT_EQ(*metrics, (TrainerMetrics{4, 4, 480, 64, 0.8, {"a"}, std::nullopt}));
}

TEST(TrainerClientTest, RejectsMalformedReplies) {
  // Each broken reply is refused with the trainer, the request and what is wrong.
  const TrainerClient trainer(kUrl);
  const std::string ok =
      R"({"step":3,"version":4,"loss":-0.01,"kl":0.0,"grad_norm":0.25,"tokens":12,"seconds":0.1})";
  auto edit = [&ok](const std::string& from, const std::string& to) {
    std::string text = ok;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  struct Case {
    std::string name;
    HttpResponse response;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"refused", Reply(R"j({"error":"sequences[0]: token id outside [0, 64)"})j", 400),
       "HTTP 400: sequences[0]: token id outside [0, 64)"},
      {"truncated", Reply(ok.substr(0, 30)), "the reply is not JSON"},
      {"no loss", Reply(edit(R"("loss":-0.01,)", "")), "loss is missing"},
      {"loss a string", Reply(edit("-0.01", R"("nan")")), "loss is a string, not a number"},
      {"negative norm", Reply(edit("0.25", "-1.0")), "grad_norm is -1, below 0"},
      {"other step", Reply(edit(R"("step":3)", R"("step":2)")),
       "the reply is for step 2, libra sent step 3"},
      {"token count", Reply(edit(R"("tokens":12)", R"("tokens":18)")),
       "the trainer trained on 18 tokens, libra sent 12"},
      {"version negative", Reply(edit(R"("version":4)", R"("version":-1)")),
       "version is -1, outside"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto parsed = trainer.ParseTrainStep(Batch(), c.response);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kBackend);
    EXPECT_THAT(parsed.status().message(),
                StartsWith("trainer POST http://127.0.0.1:8100/train_step: "));
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.error));
  }

  EXPECT_THAT(trainer
                  .ParseSaveWeights("/ckpt/v4", Reply(R"({"path":"/tmp/x","version":4,)"
                                                      R"("seconds":0.0})"))
                  .status()
                  .message(),
              HasSubstr("the trainer saved to /tmp/x, libra asked for /ckpt/v4"));
  EXPECT_THAT(trainer.ParseInitWeightUpdateGroup(Reply(R"({"success":true,"tensors":[]})"))
                  .status()
                  .message(),
              HasSubstr("tensors is empty"));
  EXPECT_THAT(
      trainer
          .ParseInitWeightUpdateGroup(
              Reply(R"({"success":true,"tensors":[{"name":"w","dtype":"float32","shape":[-1]}]})"))
          .status()
          .message(),
      HasSubstr("tensors[0].shape[0] is -1, outside"));
  EXPECT_THAT(
      trainer.ParseMembership(trainer.Leave("a"), Reply(R"({"replicas":["b"],"dp_size":2})"))
          .status()
          .message(),
      HasSubstr("trainer POST http://127.0.0.1:8100/leave: dp_size is 2 but 1 replicas"));
  EXPECT_THAT(trainer.ParseHealth(Reply(R"({"status":"starting","version":0})")).status().message(),
              HasSubstr(R"(status is "starting", not "ok")"));
  EXPECT_THAT(trainer
                  .ParseMetrics(Reply(R"({"version":1,"steps":1,"tokens":1,"sequences":1,)"
                                      R"("train_seconds":0.1,"replicas":[7]})"))
                  .status()
                  .message(),
              HasSubstr("replicas[0] is an integer, not a string"));
}

}  // namespace
}  // namespace libra::cluster
