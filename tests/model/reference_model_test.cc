#include "model/reference_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Expects `actual` to equal the number the reference prints as `printed` (libra-reference.md
// §3.2/§3.3): within a relative 1e-6 when it prints 7 or more significant digits, else within
// half a unit of its last printed digit.
void ExpectNearPrinted(double actual, const std::string& printed,
                       std::source_location where = std::source_location::current()) {
  const double expected = std::stod(printed);
  std::string mantissa = printed;
  int exponent = 0;
  if (const size_t e = printed.find_first_of("eE"); e != std::string::npos) {
    mantissa = printed.substr(0, e);
    exponent = std::stoi(printed.substr(e + 1));
  }
  const size_t dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  std::string digits;
  for (char c : mantissa) {
    if (c >= '0' && c <= '9' && !(digits.empty() && c == '0')) digits += c;
  }
  const double tolerance =
      digits.size() >= 7 ? 1e-6 * std::fabs(expected) : 0.5 * std::pow(10.0, exponent - decimals);
  if (!(std::fabs(actual - expected) <= tolerance)) {
    ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
        << "actual " << std::setprecision(17) << actual << " is not the printed " << printed
        << " (tolerance " << tolerance << ")";
  }
}

// The authors' hardware_config/a100_80g.yaml and model_arch_config/qwen3-14b.yaml
// (libra-reference.md §7.3), everything else at the reference defaults.
ReferenceParams Qwen14bOnA100() {
  ReferenceParams p;
  p.flops_peak = 3.12e14;
  p.mem_bw = 2.0e12;
  p.mem_capacity = 8.0e10;
  p.bw_intra_node = 6.0e11;
  p.bw_inter_node = 2.0e11;
  p.gpus_per_node = 8;
  p.tp_comm_overhead = 5.0e-6;
  p.num_params = 14.0e9;
  p.d_model = 5120;
  p.n_layers = 40;
  p.n_heads = 40;
  p.n_kv_heads = 8;
  p.vocab_size = 151936;
  p.dtype_bytes = 2;
  return p;
}

// The requests of the default-model cluster cross-checks (libra-reference.md §3.2).
std::vector<RequestInfo> FourRequests() {
  return {{128, 512}, {128, 1024}, {256, 2048}, {256, 4096}};
}

recipe::OptionValue Number(double value) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kDouble;
  v.double_value = value;
  return v;
}

recipe::OptionValue Integer(int64_t value) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kInt;
  v.int_value = value;
  return v;
}

recipe::OptionValue Boolean(bool value) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kBool;
  v.bool_value = value;
  return v;
}

CostModelContext CatalogContext(const std::string& gpu, const std::string& model) {
  CostModelContext context;
  context.gpu = FindGpu(gpu).value();
  context.arch = FindModel(model).value();
  return context;
}

std::unique_ptr<CostModel> CreateOrDie(const CostModelContext& context,
                                       const recipe::OptionTable& options) {
  Result<std::unique_ptr<CostModel>> made = ReferenceCostModel::Create(context, options);
  EXPECT_OK(made);
  return made.ok() ? std::move(made).value() : nullptr;
}

// ---- Rollout cross-checks (libra-reference.md §3.2) --------------------------------------------

TEST(ReferenceCostModelTest, Qwen3_14bOnA100RolloutTableMatchesTheReference) {
  // The Qwen3-14B / a100_80g table: s_kv, pool, N_max, decode_step(1000), prefill_step(1, 1024),
  // b_bar(2048, 4096) and throughput for TP 1, 2, 4, 8.
  struct Case {
    int tp;
    double s_kv;
    double pool;
    int64_t n_max;
    std::string decode, prefill, b_bar, throughput;
  };
  const std::vector<Case> cases = {
      {1, 163840, 5.1e10, 298828, "0.0165670", "0.155179", "72.956", "1611.56"},
      {2, 81920, 1.31e11, 1535156, "0.00454174", "0.0779897", "256", "8595.75"},
      {4, 40960, 2.91e11, 6820312, "0.00143544", "0.0391949", "256", "33051.3"},
      {8, 20480, 6.11e11, 28640625, "0.000658859", "0.0197974", "256", "114470"},
  };
  const ReferenceCostModel model(Qwen14bOnA100());
  for (const Case& c : cases) {
    SCOPED_TRACE("tp " + std::to_string(c.tp));
    EXPECT_DOUBLE_EQ(model.KvBytesPerTokenPerGpu(c.tp), c.s_kv);
    EXPECT_DOUBLE_EQ(model.KvPool(c.tp), c.pool);
    EXPECT_EQ(model.KvCapacityTokens(c.tp), c.n_max);
    ExpectNearPrinted(model.DecodeStep(1000, c.tp), c.decode);
    ExpectNearPrinted(model.PrefillStep(1, 1024, c.tp), c.prefill);
    ExpectNearPrinted(model.SteadyBatch(c.tp, 2048, 4096), c.b_bar);
    ExpectNearPrinted(model.Throughput(c.tp, 2048, 4096), c.throughput);
  }
}

TEST(ReferenceCostModelTest, DecodeBoundRisesNoFasterThanLinearlyWithContext) {
  // The planner sums the bound over trajectories of different contexts: it must not fall with
  // the context, nor curve upwards.
  const ReferenceCostModel model(Qwen14bOnA100());
  const auto bound = [&](int64_t context) {
    return model.DecodeGpuSecondsLowerBound(context, 256);
  };
  for (int64_t context : {500, 4000, 30000}) {
    EXPECT_LE(bound(context - 500), bound(context));
    EXPECT_GE(2 * bound(context) * (1 + 1e-12), bound(context - 500) + bound(context + 500));
  }
}

TEST(ReferenceCostModelTest, DefaultModelTp1Figures) {
  // The default model (about Qwen2.5-3B on the default A100) at TP1: s_kv, N_max and two steps.
  const ReferenceCostModel model{ReferenceParams{}};
  EXPECT_DOUBLE_EQ(model.KvBytesPerTokenPerGpu(1), 36864);
  EXPECT_EQ(model.KvCapacityTokens(1), 1901041);
  ExpectNearPrinted(model.DecodeStep(10000, 1), "0.0037462588");
  ExpectNearPrinted(model.PrefillStep(1, 1024, 1), "0.0234270943");
}

TEST(ReferenceCostModelTest, DefaultModelClusterEvaluations) {
  // The four default-model clusters over four requests: makespans, assignments and capacities.
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<RequestInfo> requests = FourRequests();

  const std::vector<int> mixed = {2, 1, 1};
  const ReferenceRolloutEvaluation a = model.EvaluateRollout(mixed, requests);
  EXPECT_FALSE(a.oom);
  ExpectNearPrinted(a.makespan, "0.095541");
  EXPECT_EQ(a.requests_per_instance, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(a.token_capacities, (std::vector<int64_t>{7968750, 1901041, 1901041}));

  const std::vector<int> ones = {1, 1, 1, 1};
  ExpectNearPrinted(model.EvaluateRollout(ones, requests).makespan, "0.26697");
  const std::vector<int> four = {4};
  ExpectNearPrinted(model.EvaluateRollout(four, requests).makespan, "0.046062");

  const std::vector<int> twos = {2, 2};
  const ReferenceRolloutEvaluation d = model.EvaluateRollout(twos, requests);
  ExpectNearPrinted(d.makespan, "0.074057");
  EXPECT_EQ(d.requests_per_instance, (std::vector<int>{1, 3}));
}

TEST(ReferenceCostModelTest, GreedyAssignmentSendsLongestFirstToEarliestFinish) {
  // On [2, 2] the longest request takes instance 0 (first wins the tie); the rest then finish
  // earlier on instance 1, in descending total length.
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<int> twos = {2, 2};
  const std::vector<std::vector<RequestInfo>> assigned = model.AssignRequests(twos, FourRequests());
  ASSERT_EQ(assigned.size(), 2u);
  EXPECT_EQ(assigned[0], (std::vector<RequestInfo>{{256, 4096}}));
  EXPECT_EQ(assigned[1], (std::vector<RequestInfo>{{256, 2048}, {128, 1024}, {128, 512}}));
}

TEST(ReferenceCostModelTest, RolloutOomAndEmptyClusterAreInfinite) {
  // A request longer than N_max of the largest TP is an OOM; an empty cluster is infinite.
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<int> one = {1};
  const std::vector<RequestInfo> too_long = {{1901041, 1}};
  const ReferenceRolloutEvaluation oom = model.EvaluateRollout(one, too_long);
  EXPECT_TRUE(oom.oom);
  EXPECT_EQ(oom.makespan, kInf);
  const std::vector<RequestInfo> just_fits = {{1901040, 1}};
  EXPECT_FALSE(model.EvaluateRollout(one, just_fits).oom);
  const ReferenceRolloutEvaluation empty = model.EvaluateRollout({}, FourRequests());
  EXPECT_FALSE(empty.oom);
  EXPECT_EQ(empty.makespan, kInf);
  EXPECT_EQ(model.EvaluateRollout(one, {}).makespan, 0.0);
}

// ---- Training cross-checks (libra-reference.md §3.3) -------------------------------------------

TEST(ReferenceCostModelTest, DefaultModelTrainingIterationsAndMemory) {
  // The default model at B = 8, L = 1024: iteration time and memory per GPU of four layouts.
  struct Case {
    ReferenceTrainConfig config;
    std::string seconds, memory_gb;
  };
  const std::vector<Case> cases = {
      {{1, 1, 2, 1}, "0.052148", "13.3171"},
      {{2, 1, 1, 1}, "0.051998", "11.4085"},
      {{1, 2, 1, 2}, "0.039965", "12.4171"},
      {{2, 2, 2, 1, /*zero_level=*/1}, "0.015117", "8.9708"},
  };
  const ReferenceCostModel model{ReferenceParams{}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.seconds);
    ExpectNearPrinted(model.TrainIterationTime(c.config, 8, 1024).seconds, c.seconds);
    ExpectNearPrinted(model.TrainMemory(c.config, c.config.b_micro, 1024) / 1e9, c.memory_gb);
  }
}

TEST(ReferenceCostModelTest, DefaultModelTrainingDetails) {
  // (tp, pp, dp, b) = (1, 1, 2, 1): the parts the reference prints.
  const ReferenceCostModel model{ReferenceParams{}};
  const ReferenceTrainTime t = model.TrainIterationTime({1, 1, 2, 1}, 8, 1024);
  ExpectNearPrinted(t.fwd_per_micro_s, "0.00301");
  ExpectNearPrinted(t.bwd_per_micro_s, "0.007402");
  EXPECT_EQ(t.n_micro, 4);
  ExpectNearPrinted(t.dp_comm_s, "0.015");
  ExpectNearPrinted(t.dp_exposed_s, "0.0105");
}

TEST(ReferenceCostModelTest, Qwen3_14bOnA100TrainingAtTp8) {
  // Qwen3-14B on a100_80g, B = 4, L = 6144, one sequence per micro-batch, with the planner's
  // recompute-logprobs budget at max_seq_length 32768: TP8 with DP 4, 3 and 5.
  ReferenceParams params = Qwen14bOnA100();
  params.max_seq_length = 32768;
  const ReferenceCostModel model(params);
  const ReferenceTrainConfig dp4{8, 1, 4, 1};
  ExpectNearPrinted(model.TrainIterationTime(dp4, 4, 6144).seconds, "0.0466185");
  ExpectNearPrinted(model.TrainMemory(dp4, 1, 6144) / 1e9, "8.2234");
  ExpectNearPrinted(model.RecomputeLogprobsMemory(1, 32768, 151936, 8).total_bytes / 1e9, "3.73");
  EXPECT_FALSE(model.TrainOom(dp4, 6144));
  ExpectNearPrinted(model.TrainIterationTime({8, 1, 3, 1}, 4, 6144).seconds, "0.0455977");
  ExpectNearPrinted(model.TrainIterationTime({8, 1, 5, 1}, 4, 6144).seconds, "0.0472310");
}

TEST(ReferenceCostModelTest, RecomputeLogprobsMemoryExamples) {
  // The two memory_budget.py examples of libra-reference.md §3.10.
  const ReferenceCostModel model{ReferenceParams{}};
  const ReferenceRecomputeMemory small = model.RecomputeLogprobsMemory(2, 1024, 1000, 4);
  EXPECT_EQ(small.local_vocab, 250);
  EXPECT_EQ(small.logits_bytes, 2046000);
  EXPECT_EQ(small.total_bytes, 3069000);
  const ReferenceRecomputeMemory qwen = model.RecomputeLogprobsMemory(1, 32768, 151936, 8);
  EXPECT_EQ(qwen.local_vocab, 18992);
  EXPECT_EQ(qwen.logits_bytes, 2489243456);
  EXPECT_EQ(qwen.total_bytes, 3733865184);
}

TEST(ReferenceCostModelTest, MatchesTheAuthorsCodeToFullPrecision) {
  // Values printed with repr() by the authors' model.py run on CPU: the same floating-point
  // operations in the same order give the same doubles.
  const ReferenceCostModel qwen(Qwen14bOnA100());
  EXPECT_DOUBLE_EQ(qwen.DecodeStep(1000, 1), 0.016566964705882353);
  EXPECT_DOUBLE_EQ(qwen.PrefillStep(1, 1024, 1), 0.15517947106759908);
  EXPECT_DOUBLE_EQ(qwen.Throughput(1, 2048, 4096), 1611.555690922694);
  EXPECT_DOUBLE_EQ(qwen.Throughput(8, 2048, 4096), 114470.44939036277);

  const ReferenceCostModel defaults{ReferenceParams{}};
  const std::vector<int> mixed = {2, 1, 1};
  const ReferenceRolloutEvaluation a = defaults.EvaluateRollout(mixed, FourRequests());
  ASSERT_EQ(a.instance_times.size(), 3u);
  EXPECT_DOUBLE_EQ(a.instance_times[0], 0.09554065733133689);
  EXPECT_DOUBLE_EQ(a.instance_times[1], 0.031257322698609626);
  EXPECT_DOUBLE_EQ(a.instance_times[2], 0.014250596976256684);
  EXPECT_DOUBLE_EQ(defaults.TrainIterationTime({1, 1, 2, 1}, 8, 1024).seconds,
                   0.052147881609216004);
  EXPECT_DOUBLE_EQ(defaults.TrainMemory({1, 1, 2, 1}, 1, 1024), 13317072896.0);
  EXPECT_DOUBLE_EQ(defaults.TrainIterationTime({2, 2, 2, 1, 1}, 8, 1024).seconds,
                   0.015116661809152);
  // A pipeline with fewer micro-batches than stages (n_micro 2 < pp - 1 = 3).
  EXPECT_DOUBLE_EQ(defaults.TrainIterationTime({1, 4, 1, 4}, 8, 1024).seconds,
                   0.030205495487999997);

  ReferenceParams long_seq = Qwen14bOnA100();
  long_seq.max_seq_length = 32768;
  const ReferenceCostModel qwen_long(long_seq);
  EXPECT_DOUBLE_EQ(qwen_long.TrainIterationTime({8, 1, 4, 1}, 4, 6144).seconds, 0.04661851201152);
  EXPECT_DOUBLE_EQ(qwen_long.TrainMemory({8, 1, 4, 1}, 1, 6144), 8223437984.0);
}

TEST(ReferenceCostModelTest, MoeUsesActiveParamsForLinearFlopsAndWeights) {
  // The authors' qwen3-30b-a3b.yaml (active 3e9 of 30e9) on the default A100: prefill uses
  // 2 * P_active / n_layers FLOPs per token and layer, decode reads P_active; values from their
  // code. The KV pool still subtracts all 30e9 parameters.
  ReferenceParams p;
  p.num_params = 30e9;
  p.d_model = 2048;
  p.n_layers = 48;
  p.n_heads = 32;
  p.n_kv_heads = 4;
  p.is_moe = true;
  p.active_num_params = 3e9;
  p.num_experts = 128;
  p.num_activated_experts = 8;
  const ReferenceCostModel model(p);
  EXPECT_DOUBLE_EQ(model.KvBytesPerTokenPerGpu(1), 49152);
  EXPECT_DOUBLE_EQ(model.PrefillStep(1, 1024, 2), 0.019583487355524478);
  EXPECT_DOUBLE_EQ(model.DecodeStep(5000, 2), 0.0013984941176470589);
  EXPECT_DOUBLE_EQ(model.KvPool(8), 8 * 80e9 - 30e9 * 2 - 1e9);
}

TEST(ReferenceCostModelTest, EffectiveParamsAndHeadDimFollowTheReferenceConfig) {
  // Dense models ignore active_num_params; a MoE without it scales P by the activated experts;
  // head_dim 0 is d_model / n_heads.
  ReferenceParams p;
  p.active_num_params = 1e9;
  EXPECT_EQ(p.EffectiveNumParams(), 3e9);
  p.is_moe = true;
  EXPECT_EQ(p.EffectiveNumParams(), 1e9);
  p.active_num_params = 0;
  p.num_experts = 128;
  p.num_activated_experts = 8;
  EXPECT_DOUBLE_EQ(p.EffectiveNumParams(), 3e9 * 8 / 128);
  EXPECT_EQ(p.HeadDim(), 128);
  p.head_dim = 64;
  EXPECT_EQ(p.HeadDim(), 64);
}

// ---- The combined evaluator (libra-reference.md §3.4, §3.5) ------------------------------------

TEST(ReferenceCostModelTest, EvaluateTakesTheSlowerOfTrainingAndRollout) {
  // §3.5's 4-GPU example: train TP1/DP2 (micro 1, B = 8) against rollout [1, 1] and [2] over four
  // (128, 4096) requests.
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<RequestInfo> requests(4, RequestInfo{128, 4096});
  const std::vector<int> ones = {1, 1};
  const ReferenceEvaluation current = model.Evaluate({1, 1, 2, 1}, ones, requests, 8);
  ExpectNearPrinted(current.t_train, "0.165852");
  ExpectNearPrinted(current.t_rollout, "0.505345");
  EXPECT_EQ(current.t_global, current.t_rollout);
  EXPECT_FALSE(current.oom());
  const std::vector<int> two = {2};
  ExpectNearPrinted(model.Evaluate({1, 1, 2, 1}, two, requests, 8).t_rollout, "0.278821");
}

TEST(ReferenceCostModelTest, EvaluateReportsWhichSideIsOutOfMemory) {
  // A training OOM makes everything infinite; a rollout OOM (or no instance) only t_global.
  ReferenceParams small_gpu;
  small_gpu.mem_capacity = 10e9;
  const std::vector<int> one = {1};
  const ReferenceEvaluation train =
      ReferenceCostModel(small_gpu).Evaluate({1, 1, 1, 1}, one, FourRequests(), 8);
  EXPECT_EQ(train.oom_source, "train");
  EXPECT_EQ(train.t_train, kInf);
  EXPECT_EQ(train.t_rollout, kInf);
  EXPECT_EQ(train.t_global, kInf);

  const ReferenceCostModel model{ReferenceParams{}};
  const ReferenceEvaluation rollout = model.Evaluate({1, 1, 2, 1}, {}, FourRequests(), 8);
  EXPECT_EQ(rollout.oom_source, "rollout");
  EXPECT_GT(rollout.t_train, 0);
  EXPECT_LT(rollout.t_train, kInf);
  EXPECT_EQ(rollout.t_global, kInf);
}

// ---- The CostModel interface mapping -----------------------------------------------------------

TEST(ReferenceCostModelTest, IterationTimeAddsADecodeStepAndAPrefillStep) {
  // Decode sequences cost DecodeStep(their contexts); prefill chunks cost PrefillStep(1, their
  // new tokens); both add; nothing costs nothing.
  const ReferenceCostModel model(Qwen14bOnA100());
  const IterationLoad decode{.decode_sequences = 3, .decode_context_tokens = 1000};
  EXPECT_EQ(model.IterationTime(2, decode), model.DecodeStep(1000, 2));
  const IterationLoad prefill{
      .prefill_chunks = 2, .prefill_tokens = 1024, .prefill_kv_tokens = 5000};
  EXPECT_EQ(model.IterationTime(2, prefill), model.PrefillStep(1, 1024, 2));
  const IterationLoad both{.decode_sequences = 3,
                           .decode_context_tokens = 1000,
                           .prefill_chunks = 2,
                           .prefill_tokens = 1024};
  EXPECT_EQ(model.IterationTime(2, both),
            model.DecodeStep(1000, 2) + model.PrefillStep(1, 1024, 2));
  EXPECT_EQ(model.IterationTime(2, IterationLoad{}), 0.0);
}

TEST(ReferenceCostModelTest, PrefillTimeIsTheMakespanPrefillTerm) {
  // PrefillTime charges tokens / chunk prefill steps of one full chunk, ignoring the prior
  // context: exactly an instance makespan of prompts that generate nothing.
  const ReferenceCostModel model(Qwen14bOnA100());
  EXPECT_DOUBLE_EQ(model.PrefillTime(4, 4096, 0), 4 * model.PrefillStep(1, 1024, 4));
  EXPECT_EQ(model.PrefillTime(4, 4096, 30000), model.PrefillTime(4, 4096, 0));
  const std::vector<RequestInfo> prompt_only = {{1500, 0}};
  EXPECT_DOUBLE_EQ(model.PrefillTime(2, 1500, 0), model.InstanceMakespan(2, prompt_only));
}

TEST(ReferenceCostModelTest, KvCapacityTokensIsNmax) {
  // The interface's capacity is the reference N_max, quadratic growth with TP included.
  const ReferenceCostModel model(Qwen14bOnA100());
  const CostModel& as_interface = model;
  EXPECT_EQ(as_interface.KvCapacityTokens(4), 6820312);
}

TEST(ReferenceCostModelTest, TrainStepIsTheIterationTimeAndMemory) {
  // Eight sequences averaging 1024 tokens on tp1 pp1 dp2 mb1: step_s and memory are the
  // reference's, the limit is 80 GB * 0.92 - 2 GB, the parts add up, and passes change nothing.
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<int64_t> lengths = {1000, 1049, 1024, 1024, 1024, 1024, 1024, 1024};
  const TrainLayout layout{.tp = 1, .pp = 1, .dp = 2, .micro_batch = 1};
  const TrainEstimate e = model.TrainStep(layout, TrainPasses{}, lengths);
  const ReferenceTrainConfig config{1, 1, 2, 1};
  EXPECT_EQ(e.step_s, model.TrainIterationTime(config, 8, 1024).seconds);
  EXPECT_EQ(e.memory_bytes, model.TrainMemory(config, 1, 1024));
  EXPECT_DOUBLE_EQ(e.memory_limit_bytes, 80e9 * 0.92 - 2e9);
  EXPECT_FALSE(e.oom());
  EXPECT_NEAR(e.compute_s + e.tp_comm_s + e.pp_bubble_s + e.dp_comm_s, e.step_s, 1e-15);
  EXPECT_DOUBLE_EQ(e.dp_comm_s, 0.0105);
  EXPECT_EQ(e.optimizer_s, 0);
  EXPECT_EQ(e.flops, 0);
  const TrainPasses none{.activation_recompute = false, .old_logprob = false, .reference = false};
  EXPECT_EQ(model.TrainStep(layout, none, lengths).step_s, e.step_s);
}

TEST(ReferenceCostModelTest, TrainStepPartsIncludeTheBubbleAndPipelineSends) {
  // tp2 pp4 dp1 mb4 over 8 sequences has 2 micro-batches for 4 stages: the parts (compute, TP
  // communication, bubble plus sends) still add up to the step.
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<int64_t> lengths(8, 2048);
  const TrainLayout layout{.tp = 2, .pp = 4, .dp = 1, .micro_batch = 4};
  const TrainEstimate e = model.TrainStep(layout, TrainPasses{}, lengths);
  const ReferenceTrainTime t = model.TrainIterationTime({2, 4, 1, 4}, 8, 2048);
  EXPECT_EQ(e.step_s, t.seconds);
  EXPECT_GT(e.tp_comm_s, 0);
  EXPECT_GT(e.pp_bubble_s, t.pp_comm_s);
  EXPECT_EQ(e.dp_comm_s, 0);
  EXPECT_NEAR(e.compute_s + e.tp_comm_s + e.pp_bubble_s + e.dp_comm_s, e.step_s, 1e-15);
}

TEST(ReferenceCostModelTest, TrainStepReportsOomAboveTheLimit) {
  // A 16 GB GPU cannot hold the default model unsharded with ZeRO-2 on one GPU.
  ReferenceParams params;
  params.mem_capacity = 16e9;
  const ReferenceCostModel model(params);
  const std::vector<int64_t> lengths(4, 1024);
  const TrainEstimate e = model.TrainStep(TrainLayout{}, TrainPasses{}, lengths);
  EXPECT_TRUE(e.oom());
  EXPECT_TRUE(model.TrainOom({1, 1, 1, 1}, 1024));
}

TEST(ReferenceCostModelTest, WeightSyncIsFreeAndRoleSwitchIsFlat) {
  // The reference planner charges no weight sync and a flat reconfiguration cost.
  const ReferenceCostModel model{ReferenceParams{}};
  SyncRequest sync;
  sync.path = SyncPath::kDisk;
  EXPECT_EQ(model.WeightSyncTime(sync), 0);
  EXPECT_EQ(model.RoleSwitchTime(SwitchRequest{}), 15.0);
  SwitchRequest back;
  back.direction = SwitchDirection::kTrainToRollout;
  back.rollout_tp = 8;
  EXPECT_EQ(model.RoleSwitchTime(back), 15.0);
}

// ---- Construction and options --------------------------------------------------------------

TEST(ReferenceCostModelTest, ParamsFromTheCatalog) {
  // A100-80G and Qwen3-14B from the catalog: NVLink doubled, exact parameter count, shapes.
  const CostModelContext context = CatalogContext("A100-80G", "Qwen3-14B");
  const ReferenceParams p = ReferenceParamsFrom(context);
  EXPECT_EQ(p.flops_peak, 312e12);
  EXPECT_EQ(p.mem_bw, 2039e9);
  EXPECT_EQ(p.mem_capacity, 80e9);
  EXPECT_EQ(p.bw_intra_node, 600e9);
  EXPECT_EQ(p.bw_inter_node, 200e9);
  EXPECT_EQ(p.gpus_per_node, 8);
  EXPECT_EQ(p.tp_comm_overhead, 5e-6);
  EXPECT_EQ(p.num_params, context.arch.TotalParams());
  EXPECT_NEAR(p.num_params, 14.77e9, 0.01e9);
  EXPECT_FALSE(p.is_moe);
  EXPECT_EQ(p.EffectiveNumParams(), p.num_params);
  EXPECT_EQ(p.d_model, 5120);
  EXPECT_EQ(p.n_layers, 40);
  EXPECT_EQ(p.n_kv_heads, 8);
  EXPECT_EQ(p.HeadDim(), 128);
  EXPECT_EQ(p.vocab_size, 151936);
  EXPECT_EQ(ReferenceCostModel(p).KvBytesPerTokenPerGpu(1), 163840);
}

TEST(ReferenceCostModelTest, ParamsFromACatalogMoeModel) {
  // Qwen3-30B-A3B: a MoE whose active parameters are the catalog's matmul parameters.
  const CostModelContext context = CatalogContext("H100-80G", "Qwen3-30B-A3B");
  const ReferenceParams p = ReferenceParamsFrom(context);
  EXPECT_TRUE(p.is_moe);
  EXPECT_EQ(p.active_num_params, context.arch.ActiveMatmulParams());
  EXPECT_EQ(p.EffectiveNumParams(), context.arch.ActiveMatmulParams());
  EXPECT_EQ(p.num_experts, 128);
  EXPECT_EQ(p.num_activated_experts, 8);
  EXPECT_EQ(p.HeadDim(), 128);
}

TEST(ReferenceCostModelTest, CreateWithoutOptionsUsesTheCatalog) {
  // No options: the catalog's parameters, the context's GPU and model, the name "libra-ref".
  const CostModelContext context = CatalogContext("A100-80G", "Qwen3-14B");
  const std::unique_ptr<CostModel> model = CreateOrDie(context, {});
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->Name(), "libra-ref");
  EXPECT_EQ(model->gpu(), context.gpu);
  EXPECT_EQ(model->arch(), context.arch);
  const auto& ref = dynamic_cast<const ReferenceCostModel&>(*model);
  EXPECT_EQ(ref.params(), ReferenceParamsFrom(context));
}

TEST(ReferenceCostModelTest, OptionsReproduceTheAuthorsYamlConfiguration) {
  // Overriding the two numbers their YAMLs round turns the catalog's A100 + Qwen3-14B into their
  // a100_80g + qwen3-14b exactly, and the §3.2 table follows.
  recipe::OptionTable options;
  options.entries = {{"mem_bw", Number(2.0e12)}, {"num_params", Number(14.0e9)}};
  const std::unique_ptr<CostModel> model =
      CreateOrDie(CatalogContext("A100-80G", "Qwen3-14B"), options);
  ASSERT_NE(model, nullptr);
  const auto& ref = dynamic_cast<const ReferenceCostModel&>(*model);
  ReferenceParams expected = Qwen14bOnA100();
  expected.head_dim = 128;  // explicit in the catalog, derived (5120 / 40) in their YAML
  EXPECT_EQ(ref.params(), expected);
  ExpectNearPrinted(ref.DecodeStep(1000, 1), "0.0165670");
  EXPECT_EQ(model->KvCapacityTokens(8), 28640625);
}

TEST(ReferenceCostModelTest, OptionsOfEveryKindOverride) {
  // Integer, boolean and float options change the results they feed.
  const CostModelContext context = CatalogContext("A100-80G", "Qwen3-14B");
  const ReferenceCostModel base(context, ReferenceParamsFrom(context));
  recipe::OptionTable options;
  options.entries = {{"prefill_chunk_size", Integer(512)},
                     {"recompute_logprobs", Boolean(false)},
                     {"reconfiguration_cost_s", Integer(30)},
                     {"vocab_size", Integer(1000)}};
  const std::unique_ptr<CostModel> model = CreateOrDie(context, options);
  ASSERT_NE(model, nullptr);
  const auto& ref = dynamic_cast<const ReferenceCostModel&>(*model);
  EXPECT_EQ(ref.params().prefill_chunk_size, 512);
  EXPECT_FALSE(ref.params().recompute_logprobs);
  EXPECT_EQ(ref.params().vocab_size, 1000);
  EXPECT_DOUBLE_EQ(model->PrefillTime(1, 1024, 0), 2 * ref.PrefillStep(1, 512, 1));
  EXPECT_LT(ref.TrainMemory({8, 1, 4, 1}, 1, 6144), base.TrainMemory({8, 1, 4, 1}, 1, 6144));
  EXPECT_EQ(model->RoleSwitchTime(SwitchRequest{}), 30.0);
}

TEST(ReferenceCostModelTest, UnknownOptionIsAnInvalidRecipe) {
  // A typo fails loudly, naming the key and suggesting the right one.
  recipe::OptionTable options;
  options.path = "cost_model.options";
  options.entries = {{"mem_bandwith", Number(2e12)}};
  const Result<std::unique_ptr<CostModel>> made =
      ReferenceCostModel::Create(CatalogContext("A100-80G", "Qwen3-14B"), options);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidRecipe);
  EXPECT_NE(made.status().message().find("mem_bandwith"), std::string::npos);
  EXPECT_NE(made.status().message().find("mem_bw"), std::string::npos);
}

TEST(ReferenceCostModelTest, OutOfRangeOrWrongTypeOptionIsAnInvalidRecipe) {
  // A fraction above 1 and a float where an integer belongs are both reported.
  recipe::OptionTable options;
  options.entries = {{"kv_frag_rate", Number(1.5)}, {"zero_level", Number(2.0)}};
  const Result<std::unique_ptr<CostModel>> made =
      ReferenceCostModel::Create(CatalogContext("A100-80G", "Qwen3-14B"), options);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidRecipe);
  EXPECT_NE(made.status().message().find("kv_frag_rate"), std::string::npos);
  EXPECT_NE(made.status().message().find("zero_level"), std::string::npos);
}

TEST(ReferenceCostModelTest, ParamsOnlyModelDescribesItsParams) {
  // Built from params alone, gpu() and arch() carry the params' numbers.
  const ReferenceCostModel model(Qwen14bOnA100());
  EXPECT_EQ(model.gpu().bf16_flops, 3.12e14);
  EXPECT_EQ(model.gpu().hbm_bandwidth, 2.0e12);
  EXPECT_EQ(model.gpu().nvlink_bandwidth, 3.0e11);
  EXPECT_EQ(model.arch().layers, 40);
  EXPECT_EQ(model.arch().head_dim, 128);
  EXPECT_EQ(model.Name(), "libra-ref");
}

}  // namespace
}  // namespace libra::model
