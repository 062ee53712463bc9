// EngineClient and TrainerClient against the real CPU workers (workers/rollout_server.py speaking
// both dialects, workers/trainer.py), over HTTP: token ids round-trip across turns, logprobs match
// the tokens, stop and max_tokens end turns, aborts return partial output, released memory
// refuses generation until resumed, and weight updates (disk and gloo broadcast) change what the
// engine generates. Skipped when /usr/bin/python3 cannot import torch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/engine_client.h"
#include "cluster/trainer_client.h"
#include "common/json.h"
#include "support/http_client_for_tests.h"
#include "support/python_workers.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using test::SendBlocking;
using ::testing::HasSubstr;

// Token ids of workers/toy_task.py.
constexpr TokenId kEos = 2;
const std::vector<TokenId> kPrompt = {1, 3, 19, 4};   // BOS KEYS d3 GO
const std::vector<TokenId> kToolResult = {7, 25, 8};  // RESULT d9 END_RESULT

Result<GenerateResult> Generate(const EngineClient& engine, const GenerateRequest& request) {
  LIBRA_ASSIGN_OR_RETURN(HttpResponse response, SendBlocking(engine.Generate(request)));
  return engine.ParseGenerate(request, response);
}

Status Ack(const EngineClient& engine, const HttpRequest& request) {
  LIBRA_ASSIGN_OR_RETURN(HttpResponse response, SendBlocking(request));
  return engine.ParseAck(request, response);
}

GenerateRequest Greedy(std::vector<TokenId> prompt, int max_tokens = 8) {
  GenerateRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.temperature = 0;
  request.ignore_eos = true;
  request.timeout_s = 60;
  return request;
}

// The toy sequence the trainer tests train on: a call, its result, an answer.
TrainSequence ToySequence(double advantage) {
  TrainSequence sequence;
  sequence.prompt_ids = kPrompt;
  sequence.completion_ids = {5, 19, 6, 7, 25, 8, 9, 25, kEos};
  sequence.logprobs = {-1.0, -2.0, -0.5, 0, 0, 0, -1.5, -2.5, -0.3};
  sequence.loss_mask = {1, 1, 1, 0, 0, 0, 1, 1, 1};
  sequence.advantage = advantage;
  return sequence;
}

class EngineClientWorkersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (test::WorkersUnavailable()) return;
    dir_ = new test::ScopedTempDir();
    initial_ = dir_->File("initial.pt");
    served_ = dir_->File("served.pt");
    for (const std::string& path : {initial_, served_}) {
      if (test::RunWorkerScript({"toy_task.py", "warm-start", "--out", path, "--steps", "0"},
                                dir_->File("setup.log")) != 0) {
        start_error_ = "cannot write initial weights: " + test::ReadFile(dir_->File("setup.log"));
        return;
      }
    }
    auto engine = test::WorkerProcess::Start(
        "rollout_server.py", {"--dialect", "both", "--model", served_, "--token-delay-ms", "5"},
        dir_->File("engine.log"));
    auto trainer =
        test::WorkerProcess::Start("trainer.py", {"--seed", "7"}, dir_->File("trainer.log"));
    if (!engine.ok() || !trainer.ok()) {
      start_error_ = (engine.ok() ? trainer.status() : engine.status()).ToString();
      return;
    }
    engine_ = std::move(engine).value().release();
    trainer_ = std::move(trainer).value().release();
  }

  static void TearDownTestSuite() {
    delete engine_;
    delete trainer_;
    delete dir_;
    engine_ = nullptr;
    trainer_ = nullptr;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (auto reason = test::WorkersUnavailable()) GTEST_SKIP() << *reason;
    ASSERT_NE(engine_, nullptr) << start_error_;
  }

  static EngineClient Client(EngineDialect dialect) {
    EngineClientOptions options;
    options.model = "tiny-lm";
    options.model_path = served_;
    options.control_timeout_s = 60;
    return EngineClient(dialect, engine_->url(), options);
  }
  static TrainerClient Trainer() {
    TrainerClientOptions options;
    options.control_timeout_s = 60;
    return TrainerClient(trainer_->url(), options);
  }
  // Loads `path` into the engine (through SGLang's disk update, which takes any path).
  static void Load(const std::string& path, int version) {
    const EngineClient sglang = Client(EngineDialect::kSglang);
    const auto request = sglang.UpdateWeightsFromDisk(path, version);
    ASSERT_OK(request);
    ASSERT_OK(Ack(sglang, *request));
  }
  static std::vector<TokenId> GreedyIds(EngineDialect dialect) {
    const auto result = Generate(Client(dialect), Greedy(kPrompt));
    EXPECT_OK(result);
    return result.ok() ? result->token_ids : std::vector<TokenId>{};
  }

  static test::ScopedTempDir* dir_;
  static std::string initial_;
  static std::string served_;
  static std::string start_error_;
  static test::WorkerProcess* engine_;
  static test::WorkerProcess* trainer_;
};

test::ScopedTempDir* EngineClientWorkersTest::dir_ = nullptr;
std::string EngineClientWorkersTest::initial_;
std::string EngineClientWorkersTest::served_;
std::string EngineClientWorkersTest::start_error_;
test::WorkerProcess* EngineClientWorkersTest::engine_ = nullptr;
test::WorkerProcess* EngineClientWorkersTest::trainer_ = nullptr;

TEST_F(EngineClientWorkersTest, TokenIdsRoundTripAcrossTurns) {
  // A second turn continues from the exact ids of the first plus a tool result; both dialects
  // generate the same greedy tokens, with one logprob per token.
  Load(initial_, 0);
  std::vector<TokenId> first_turn;
  for (EngineDialect dialect : {EngineDialect::kVllm, EngineDialect::kSglang}) {
    SCOPED_TRACE(NameOf(dialect));
    const EngineClient engine = Client(dialect);
    const auto turn = Generate(engine, Greedy(kPrompt, 4));
    ASSERT_OK(turn);
    EXPECT_EQ(turn->token_ids.size(), 4u);
    EXPECT_EQ(turn->logprobs.size(), 4u);
    EXPECT_EQ(turn->finish_reason, FinishReason::kLength);
    for (double logprob : turn->logprobs) EXPECT_LE(logprob, 0);
    if (first_turn.empty()) first_turn = turn->token_ids;
    EXPECT_EQ(turn->token_ids, first_turn);

    std::vector<TokenId> context = kPrompt;
    context.insert(context.end(), turn->token_ids.begin(), turn->token_ids.end());
    context.insert(context.end(), kToolResult.begin(), kToolResult.end());
    GenerateRequest next = Greedy(context, 5);
    next.temperature = 1.0;
    next.seed = 11;
    const auto second = Generate(engine, next);
    ASSERT_OK(second);
    EXPECT_EQ(second->prompt_tokens, static_cast<int64_t>(context.size()));
    EXPECT_EQ(second->logprobs.size(), second->token_ids.size());
    const auto again = Generate(engine, next);
    ASSERT_OK(again);
    EXPECT_EQ(again->token_ids, second->token_ids) << "the same seed must sample the same";
  }
}

TEST_F(EngineClientWorkersTest, StopTokensAndMaxTokensEndTheTurn) {
  // A stop token ends the turn and is returned as the last token, named as matched.
  Load(initial_, 0);
  const std::vector<TokenId> greedy = GreedyIds(EngineDialect::kVllm);
  ASSERT_FALSE(greedy.empty());
  for (EngineDialect dialect : {EngineDialect::kVllm, EngineDialect::kSglang}) {
    SCOPED_TRACE(NameOf(dialect));
    GenerateRequest request = Greedy(kPrompt);
    request.stop_token_ids = {greedy[0]};
    const auto stopped = Generate(Client(dialect), request);
    ASSERT_OK(stopped);
    EXPECT_EQ(stopped->token_ids, std::vector<TokenId>{greedy[0]});
    EXPECT_EQ(stopped->finish_reason, FinishReason::kStop);
    EXPECT_EQ(stopped->matched_stop, std::optional<TokenId>(greedy[0]));
  }
}

TEST_F(EngineClientWorkersTest, AbortReturnsPartialOutput) {
  // Aborting a long request by its id returns the tokens generated so far.
  for (EngineDialect dialect : {EngineDialect::kVllm, EngineDialect::kSglang}) {
    SCOPED_TRACE(NameOf(dialect));
    const EngineClient engine = Client(dialect);
    GenerateRequest request = Greedy(kPrompt, 200);
    request.request_id = "abort-" + NameOf(dialect);
    auto pending = std::async(std::launch::async, [&] { return Generate(engine, request); });
    HttpRequest load;
    load.method = "GET";
    load.url = engine_->url() + "/get_load";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      const auto reply = SendBlocking(load);
      ASSERT_OK(reply);
      const auto parsed = ParseJson(reply->body);
      ASSERT_OK(parsed);
      if (parsed->as_array()[0].Find("num_running_reqs")->as_int() > 0) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the request never started";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_OK(Ack(engine, engine.Abort(request.request_id)));
    const auto result = pending.get();
    ASSERT_OK(result);
    EXPECT_EQ(result->finish_reason, FinishReason::kAbort);
    EXPECT_LT(result->token_ids.size(), 200u);
    EXPECT_EQ(result->logprobs.size(), result->token_ids.size());
  }
}

TEST_F(EngineClientWorkersTest, ReleasedMemoryRefusesGenerationUntilResumed) {
  // vLLM sleep / wake_up and SGLang release / resume: generation fails in between.
  for (EngineDialect dialect : {EngineDialect::kVllm, EngineDialect::kSglang}) {
    SCOPED_TRACE(NameOf(dialect));
    const EngineClient engine = Client(dialect);
    ASSERT_OK(Ack(engine, engine.ReleaseMemory()));
    const auto refused = Generate(engine, Greedy(kPrompt));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kBackend);
    EXPECT_THAT(refused.status().message(), HasSubstr("HTTP 503: the engine's memory is released"));
    ASSERT_OK(Ack(engine, engine.ResumeMemory({MemoryTag::kWeights})));
    EXPECT_FALSE(Generate(engine, Greedy(kPrompt)).ok()) << "the KV cache is still released";
    ASSERT_OK(Ack(engine, engine.ResumeMemory({MemoryTag::kKvCache})));
    EXPECT_OK(Generate(engine, Greedy(kPrompt)));
  }
}

TEST_F(EngineClientWorkersTest, DiskWeightUpdatesChangeTheOutputs) {
  // The trainer's weights, saved to disk and loaded by either dialect, change the greedy output
  // in the same way.
  Load(initial_, 0);
  const std::vector<TokenId> before = GreedyIds(EngineDialect::kSglang);
  const TrainerClient trainer = Trainer();
  const std::string v1 = dir_->File("v1.pt");
  auto reply = SendBlocking(trainer.SaveWeights(v1));
  ASSERT_OK(reply);
  ASSERT_OK(trainer.ParseSaveWeights(v1, *reply));

  const EngineClient sglang = Client(EngineDialect::kSglang);
  const auto from_disk = sglang.UpdateWeightsFromDisk(v1, 1);
  ASSERT_OK(from_disk);
  ASSERT_OK(Ack(sglang, *from_disk));
  const auto after = Generate(sglang, Greedy(kPrompt));
  ASSERT_OK(after);
  EXPECT_NE(after->token_ids, before);
  EXPECT_EQ(after->weight_version, "1");

  Load(initial_, 0);
  reply = SendBlocking(trainer.SaveWeights(served_));
  ASSERT_OK(reply);
  ASSERT_OK(trainer.ParseSaveWeights(served_, *reply));
  const EngineClient vllm = Client(EngineDialect::kVllm);
  const auto reload = vllm.UpdateWeightsFromDisk(served_, 1);
  ASSERT_OK(reload);
  ASSERT_OK(Ack(vllm, *reload));
  EXPECT_EQ(GreedyIds(EngineDialect::kVllm), after->token_ids);
}

TEST_F(EngineClientWorkersTest, BroadcastWeightUpdatesMatchTheTrainer) {
  // The trainer (rank 0) broadcasts over gloo to the engine (rank 1), once per dialect; the
  // engine then generates exactly what the trainer's weights loaded from disk generate.
  const TrainerClient trainer = Trainer();
  const auto ranks = LayOutWeightUpdateRanks({1});
  ASSERT_OK(ranks);
  for (EngineDialect dialect : {EngineDialect::kSglang, EngineDialect::kVllm}) {
    SCOPED_TRACE(NameOf(dialect));
    const EngineClient engine = Client(dialect);
    Load(initial_, 0);
    const std::vector<TokenId> before = GreedyIds(dialect);

    WeightUpdateGroup group;
    group.master_address = "127.0.0.1";
    group.master_port = test::FreePort();
    group.world_size = ranks->world_size;
    group.backend = "gloo";
    auto engine_joins = std::async(std::launch::async, [&] {
      return Ack(engine, engine.InitWeightUpdateGroup(group, ranks->rank_offsets[0]));
    });
    auto trainer_reply = SendBlocking(trainer.InitWeightUpdateGroup(group));
    ASSERT_OK(engine_joins.get());
    ASSERT_OK(trainer_reply);
    const auto tensors = trainer.ParseInitWeightUpdateGroup(*trainer_reply);
    ASSERT_OK(tensors);

    TrainStepRequest step;
    step.sequences = {ToySequence(1.0), ToySequence(-0.5)};
    const auto train = trainer.TrainStep(step);
    ASSERT_OK(train);
    auto trained = SendBlocking(*train);
    ASSERT_OK(trained);
    const auto metrics = trainer.ParseTrainStep(step, *trained);
    ASSERT_OK(metrics);

    auto engine_receives = std::async(std::launch::async, [&] {
      return Ack(engine, engine.UpdateWeightsFromDistributed(group, *tensors, metrics->version));
    });
    auto broadcast = SendBlocking(trainer.BroadcastWeights(group, metrics->version));
    ASSERT_OK(engine_receives.get());
    ASSERT_OK(broadcast);
    const auto sent = trainer.ParseBroadcastWeights(*broadcast);
    ASSERT_OK(sent);
    EXPECT_EQ(sent->tensors, static_cast<int64_t>(tensors->size()));
    EXPECT_EQ(sent->version, metrics->version);
    const std::vector<TokenId> broadcast_ids = GreedyIds(dialect);
    EXPECT_NE(broadcast_ids, before);

    const std::string saved = dir_->File("broadcast.pt");
    auto reply = SendBlocking(trainer.SaveWeights(saved, metrics->version));
    ASSERT_OK(reply);
    ASSERT_OK(trainer.ParseSaveWeights(saved, *reply));
    Load(saved, metrics->version);
    EXPECT_EQ(GreedyIds(dialect), broadcast_ids);
  }
}

class TrainerClientWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto reason = test::WorkersUnavailable()) GTEST_SKIP() << *reason;
    auto trainer = test::WorkerProcess::Start("trainer.py", {"--replica", "replica-0"},
                                              dir_.File("trainer.log"));
    ASSERT_OK(trainer);
    process_ = std::move(trainer).value();
    TrainerClientOptions options;
    options.control_timeout_s = 60;
    client_ = std::make_unique<TrainerClient>(process_->url(), options);
  }

  Result<TrainStepResult> Train(const TrainStepRequest& request) {
    LIBRA_ASSIGN_OR_RETURN(HttpRequest http, client_->TrainStep(request));
    LIBRA_ASSIGN_OR_RETURN(HttpResponse response, SendBlocking(http));
    return client_->ParseTrainStep(request, response);
  }
  Result<Membership> Members(const HttpRequest& request) {
    LIBRA_ASSIGN_OR_RETURN(HttpResponse response, SendBlocking(request));
    return client_->ParseMembership(request, response);
  }

  test::ScopedTempDir dir_;
  std::unique_ptr<test::WorkerProcess> process_;
  std::unique_ptr<TrainerClient> client_;
};

TEST_F(TrainerClientWorkersTest, TrainsAcrossRoleSwitches) {
  // Train steps advance the version; replicas join and leave between them; metrics add up.
  auto health = SendBlocking(client_->Health());
  ASSERT_OK(health);
  const auto version = client_->ParseHealth(*health);
  ASSERT_OK(version);
  EXPECT_EQ(*version, 0);

  TrainStepRequest step;
  step.step = 0;
  step.sequences = {ToySequence(1.0), ToySequence(-1.0)};
  const auto first = Train(step);
  ASSERT_OK(first);
  EXPECT_EQ(first->version, 1);
  EXPECT_EQ(first->tokens, 12);
  EXPECT_GT(first->grad_norm, 0);

  const auto joined = Members(client_->Join("replica-1"));
  ASSERT_OK(joined);
  EXPECT_EQ(joined->replicas, (std::vector<std::string>{"replica-0", "replica-1"}));
  step.step = 1;
  step.sequences.push_back(ToySequence(0.5));
  const auto second = Train(step);
  ASSERT_OK(second);
  EXPECT_EQ(second->version, 2);
  const auto left = Members(client_->Leave("replica-0"));
  ASSERT_OK(left);
  EXPECT_EQ(left->replicas, (std::vector<std::string>{"replica-1"}));

  auto reply = SendBlocking(client_->Metrics());
  ASSERT_OK(reply);
  const auto metrics = client_->ParseMetrics(*reply);
  ASSERT_OK(metrics);
  EXPECT_EQ(metrics->steps, 2);
  EXPECT_EQ(metrics->tokens, 12 + 18);
  EXPECT_EQ(metrics->replicas, (std::vector<std::string>{"replica-1"}));
}

TEST_F(TrainerClientWorkersTest, RefusalsCarryTheTrainersReason) {
  // What the trainer refuses comes back as kBackend with its own explanation.
  TrainStepRequest step;
  step.sequences = {ToySequence(1.0)};
  step.sequences[0].prompt_ids[0] = 70;  // Outside the tiny model's vocabulary.
  const auto refused = Train(step);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kBackend);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("/train_step: HTTP 400: sequences[0]: token id outside [0, 64)"));

  const std::string path = dir_.File("w.pt");
  auto reply = SendBlocking(client_->SaveWeights(path, 5));
  ASSERT_OK(reply);
  EXPECT_THAT(client_->ParseSaveWeights(path, *reply).status().message(),
              HasSubstr("HTTP 409: the trainer holds version 0, not 5"));
  const auto last = Members(client_->Leave("replica-0"));
  ASSERT_FALSE(last.ok());
  EXPECT_THAT(last.status().message(), HasSubstr("is the last one"));
}

}  // namespace
}  // namespace libra::cluster
