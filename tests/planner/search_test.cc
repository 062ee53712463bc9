#include "planner/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.h"
#include "common/strings.h"
#include "model/catalog.h"
#include "model/cost_model.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A cost model whose numbers can be checked by hand: a decode iteration takes sequences / tp
/// seconds (so an instance's makespan is its generated tokens / tp), prefill is free, a TP1
/// instance holds kv_tp1 tokens and a larger one kv_per_tp * tp, a training step takes 6 / GPUs
/// seconds (TP communication comm_per_tp * (tp - 1) of it) and needs 8 / (tp * pp) bytes per GPU;
/// syncs are free.
class FakeCost : public model::CostModel {
 public:
  FakeCost() {
    gpu_.name = "fake";
    arch_.name = "fake";
    arch_.layers = 6;
  }
  std::string_view Name() const override { return "fake"; }
  const model::GpuSpec& gpu() const override { return gpu_; }
  const model::ModelArch& arch() const override { return arch_; }
  int64_t KvCapacityTokens(int tp) const override { return tp == 1 ? kv_tp1 : kv_per_tp * tp; }
  double IterationTime(int tp, const model::IterationLoad& load) const override {
    return static_cast<double>(load.decode_sequences) / tp;
  }
  double PrefillTime(int, int64_t, int64_t) const override { return 0; }
  double DecodeSpanTime(int tp, int64_t sequences, int64_t, int64_t iterations) const override {
    return static_cast<double>(iterations * sequences) / tp;
  }
  double DecodeGpuSecondsLowerBound(int64_t, int64_t) const override { return 0; }
  double PrefillGpuSecondsLowerBound() const override { return 0; }
  double TrainGpuSecondsLowerBound(int64_t, const model::TrainPasses&) const override { return 0; }
  model::TrainEstimate TrainStep(const model::TrainLayout& layout, const model::TrainPasses&,
                                 std::span<const int64_t>) const override {
    model::TrainEstimate e;
    e.compute_s = 6.0 / layout.gpus();
    e.tp_comm_s = comm_per_tp * (layout.tp - 1) * e.compute_s;
    e.step_s = e.compute_s;
    e.memory_bytes = 8.0 / (layout.tp * layout.pp);
    e.memory_limit_bytes = memory_limit;
    return e;
  }
  double WeightSyncTime(const model::SyncRequest&) const override { return 0; }
  double RoleSwitchTime(const model::SwitchRequest&) const override { return 0; }

  int64_t kv_tp1 = 1000000;
  int64_t kv_per_tp = 1000000;
  double comm_per_tp = 0;
  double memory_limit = 100;

 private:
  model::GpuSpec gpu_;
  model::ModelArch arch_;
};

std::unique_ptr<model::CostModel> Catalog(const std::string& name, const std::string& gpu,
                                          const std::string& model, int gpus_per_node) {
  const model::CostModelContext context{model::FindGpu(gpu).value(),
                                        model::FindModel(model).value(), gpus_per_node};
  return model::BuiltinCostModels().Create(name, context, recipe::OptionTable()).value();
}

/// A small asynchronous-or-not multi-turn problem drawn from `rng`: 2 nodes x 4 H100, Qwen3-8B or
/// 4B, TP 1-4, 16 trajectories a step, 8 requests of 4-40 turns with 10 + up to `max_tool_s` of
/// tools each, staleness from `min_staleness` to 2, time-shared layouts only when
/// `maybe_time_shared` (then drawn).
struct SmallCase {
  std::unique_ptr<model::CostModel> cost;
  SearchSpace space;
  PipelineShape shape;
  std::vector<RequestSample> history;
};
SmallCase DrawSmallCase(Rng& rng, bool maybe_time_shared, int min_staleness, double max_tool_s) {
  SmallCase c;
  c.cost = Catalog("roofline", "H100-80G", rng.Bernoulli(0.5) ? "Qwen3-8B" : "Qwen3-4B", 4);
  c.space.nodes = 2;
  c.space.gpus_per_node = 4;
  c.space.rollout_tps = {1, 2, 4};
  c.space.train_tps = {1, 2, 4};
  c.space.train_pps = {1, 2};
  c.space.micro_batches = {1};
  c.space.time_shared = maybe_time_shared && rng.Bernoulli(0.5);
  c.space.max_requests = 8;
  c.shape.batch_trajectories = 16;
  c.shape.staleness = static_cast<int>(rng.UniformInt(min_staleness, 2));
  for (int i = 0; i < 8; ++i) {
    RequestSample r{rng.UniformInt(1000, 4000), rng.UniformInt(2000, 30000),
                    rng.UniformInt(5000, 60000)};
    r.turns = static_cast<int>(rng.UniformInt(4, 40));
    r.tool_s = 10 + max_tool_s * rng.Uniform();
    c.history.push_back(r);
  }
  return c;
}

/// Requests that only decode: `generated` tokens each, no prompt, no tool output.
std::vector<RequestSample> Decodes(const std::vector<int64_t>& generated) {
  std::vector<RequestSample> out;
  for (int64_t g : generated) out.push_back({0, g, 0});
  return out;
}

/// r2e-gym-like trajectories: prompts around 1,500 tokens, log-normal generated tokens with a
/// median of 4,000 (at most 20,000), tool output around 500.
std::vector<RequestSample> R2eGymHistory(int count, uint64_t seed) {
  Rng rng(seed);
  std::vector<RequestSample> out;
  for (int i = 0; i < count; ++i) {
    const int64_t prompt = rng.UniformInt(1200, 1800);
    const int64_t generated =
        std::min<int64_t>(20000, std::llround(rng.LogNormal(std::log(4000.0), 0.8)));
    out.push_back({prompt, generated, rng.UniformInt(300, 700)});
  }
  return out;
}

/// The hand-checkable space: one node of 4 GPUs, rollout TP 1 or 2, training TP 1 or 2, no PP.
SearchSpace HandSpace() {
  SearchSpace space;
  space.nodes = 1;
  space.gpus_per_node = 4;
  space.rollout_tps = {1, 2};
  space.train_tps = {1, 2};
  space.train_pps = {1};
  space.micro_batches = {1};
  space.time_shared = false;
  return space;
}

PipelineShape Synchronous(int batch) {
  PipelineShape shape;
  shape.batch_trajectories = batch;
  return shape;
}

bool Near(double a, double b) {
  if (a == b) return true;
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

TEST(SearchTest, TinyCaseMatchesTheHandComputedPlan) {
  // Requests decode 1, 2, 3 and 10 tokens; an instance takes its tokens / tp seconds; a TP1
  // holds 9 tokens, and any instance may get the 10-token request (the router does not know
  // lengths), so no layout may have a TP1. Training takes 6/GPUs s, syncs are free, synchronous:
  //   1 training GPU, 3 rollout: every layout of 3 GPUs has a TP1;
  //   2 training GPUs, 2 rollout: [2] on all 16 tokens: 8 + 3 = 11 s (tp1 dp2 and tp2 dp1 tie;
  //     the first stays and the second is cut by the bound);
  //   3 training GPUs: one TP1.
  FakeCost cost;
  cost.kv_tp1 = 9;
  const std::vector<RequestSample> history = Decodes({10, 2, 1, 3});
  for (SearchMode mode : {SearchMode::kTreeDp, SearchMode::kExhaustive}) {
    SCOPED_TRACE(mode == SearchMode::kTreeDp ? "tree-dp" : "exhaustive");
    auto result = Search(cost, HandSpace(), Synchronous(4), history, mode);
    ASSERT_OK(result);
    ASSERT_TRUE(result->best);
    EXPECT_EQ(result->best->train, (model::TrainLayout{1, 1, 2, 1}));
    EXPECT_EQ(result->best->rollout_tps, std::vector<int>({2}));
    EXPECT_DOUBLE_EQ(result->best->rollout_s, 8);
    EXPECT_DOUBLE_EQ(result->best->train_s, 3);
    EXPECT_DOUBLE_EQ(result->best->step_s, 11);
    ASSERT_EQ(result->top.size(), 1u);
    EXPECT_EQ(result->trace.budgets, 3);
    EXPECT_EQ(result->trace.pruned.at("rollout_oom"), 2);
    EXPECT_EQ(result->trace.pruned.count("tp_divides"), 0u);  // no training tree without rollout
    EXPECT_EQ(result->trace.pruned.count("bound"), mode == SearchMode::kTreeDp ? 1u : 0u);
    ASSERT_EQ(result->trace.lines.size(), 4u);
    EXPECT_NE(result->trace.lines[2].find("no plan (rollout_oom 1)"), std::string::npos)
        << result->trace.lines[2];
  }
}

TEST(SearchTest, EveryInstanceHoldsTheLongestContextToExpect) {
  // The same requests, all within a TP1's 9 tokens, but contexts of up to 10 tokens to expect
  // (the shape's cap): as with a 10-token request, no layout may have a TP1 (an engine whose KV
  // cache cannot hold its context limit does not start; the simulator stopped the run).
  FakeCost cost;
  cost.kv_tp1 = 9;
  const std::vector<RequestSample> history = Decodes({8, 2, 1, 3});
  PipelineShape shape = Synchronous(4);
  shape.max_sequence_tokens = 10;
  auto result = Search(cost, HandSpace(), shape, history);
  ASSERT_OK(result);
  ASSERT_TRUE(result->best);
  for (const CandidatePlan& plan : result->top) {
    EXPECT_EQ(std::count(plan.rollout_tps.begin(), plan.rollout_tps.end(), 1), 0)
        << plan.ToString();
  }
  EXPECT_EQ(result->trace.pruned.at("rollout_oom"), 2);
  auto evaluated = EvaluatePlan(cost, HandSpace(), shape, history, {1, 1, 2, 1}, {1, 1});
  EXPECT_EQ(evaluated.status().code(), StatusCode::kInvalidArgument);
  shape.max_sequence_tokens = 9;
  EXPECT_OK(EvaluatePlan(cost, HandSpace(), shape, history, {1, 1, 2, 1}, {1, 1}));
}

TEST(SearchTest, RolloutDpRepeatsRowsPastTheGpusItsRequestsUse) {
  // Two or three requests on up to 15 rollout GPUs: past the GPUs the requests can use, more GPUs
  // only add empty instances, so the DP's rows repeat with a period of its largest TP and it
  // stops computing them (fewer cells than GPUs x largest TPs x requests). Every budget's plan
  // still matches the exhaustive enumeration's, on both catalog cost models.
  int repeated = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const std::string name = rng.Bernoulli(0.5) ? "roofline" : "libra-ref";
    auto cost = Catalog(name, "A100-80G", rng.Bernoulli(0.5) ? "Qwen3-1.7B" : "Qwen3-4B", 4);
    SearchSpace space;
    space.nodes = 4;
    space.gpus_per_node = 4;
    // Without TP1 the rows of odd GPUs differ from those of even ones: a period of 2 or 4.
    const std::vector<std::vector<int>> sizes = {{1, 2}, {1, 2, 4}, {2, 4}, {2}};
    space.rollout_tps = sizes[static_cast<size_t>(rng.UniformInt(0, 3))];
    space.train_tps = {1, 2, 4};
    space.train_pps = {1};
    space.micro_batches = {1, 2};
    PipelineShape shape;
    shape.batch_trajectories = 16;
    shape.staleness = static_cast<int>(rng.UniformInt(0, 1));
    const int requests = static_cast<int>(rng.UniformInt(2, 3));
    std::vector<RequestSample> history;
    for (int i = 0; i < requests; ++i) {
      history.push_back(
          {rng.UniformInt(100, 3000), rng.UniformInt(10, 20000), rng.UniformInt(0, 1000)});
    }
    SCOPED_TRACE(StrFormat("seed %d", static_cast<int>(seed)));
    auto tree = Search(*cost, space, shape, history, SearchMode::kTreeDp);
    auto brute = Search(*cost, space, shape, history, SearchMode::kExhaustive);
    ASSERT_OK(tree);
    ASSERT_OK(brute);
    const int64_t every_row = static_cast<int64_t>(space.rollout_tps.size()) * 15 * (requests + 1);
    if (tree->trace.dp_cells < every_row) ++repeated;
    ASSERT_EQ(tree->top.size(), brute->top.size());
    for (size_t i = 0; i < tree->top.size(); ++i) {
      const CandidatePlan& a = tree->top[i];
      const CandidatePlan& b = brute->top[i];
      EXPECT_EQ(a.train_gpus(), b.train_gpus());
      EXPECT_TRUE(Near(a.rollout_s, b.rollout_s)) << a.ToString() << " vs " << b.ToString();
      EXPECT_TRUE(Near(a.step_s, b.step_s)) << a.ToString() << " vs " << b.ToString();
    }
  }
  EXPECT_GE(repeated, 20);  // the rows repeat in most cases: the comparison covers them
}

TEST(SearchTest, LayoutsAreTimedAsTheRouterFillsThem) {
  // Requests of 1, 2, 9 and 10 tokens, each standing for 3 trajectories (12 a step). The DP
  // proposes a layout per largest TP from contiguous runs of the sorted requests; every proposal,
  // and every homogeneous layout, is then timed with each instance getting its share of the mix
  // (in proportion to its GPUs). On this cost model (tokens / tp seconds) the slowest instance
  // is the one that holds a 10-token trajectory: of k TP1 instances' 12 / k trajectories each, it
  // decodes the 10 beside 12 / k - 1 others of the mix's mean 56 / 11 tokens, more than the
  // share's 66 / k tokens unless one instance holds them all.
  FakeCost cost;
  SearchSpace space = HandSpace();
  space.rollout_tps = {1};
  const std::vector<RequestSample> history = Decodes({10, 9, 2, 1});
  for (int train_gpus : {1, 2, 3}) {
    SCOPED_TRACE(train_gpus);
    space.fixed_train_gpus = train_gpus;
    auto result = Search(cost, space, Synchronous(12), history);
    ASSERT_OK(result);
    ASSERT_TRUE(result->best);
    EXPECT_EQ(result->best->rollout_tps, std::vector<int>(static_cast<size_t>(4 - train_gpus), 1));
    const double k = 4 - train_gpus;
    EXPECT_TRUE(Near(result->best->rollout_s, 10 + (12 / k - 1) * 56 / 11))
        << result->best->rollout_s;
    // At most the 4 * 5 / 2 runs of one TP size: the DP evaluates a run only when asked.
    EXPECT_LE(result->trace.segment_evaluations, 10);
    EXPECT_EQ(result->trace.dp_cells, (4 - train_gpus) * 5);  // GPUs x requests 0..4, one size
  }
  space.rollout_tps = {1, 2};
  space.fixed_train_gpus = 1;
  auto mixed = Search(cost, space, Synchronous(12), history);
  ASSERT_OK(mixed);
  ASSERT_TRUE(mixed->best);
  // A TP2 and a TP1, or three TP1s: the TP1 holds 4 trajectories either way.
  EXPECT_TRUE(Near(mixed->best->rollout_s, 10 + 3 * 56.0 / 11)) << mixed->best->rollout_s;
  EXPECT_EQ(mixed->trace.dp_cells, 2 * 3 * 5);  // largest TP 1 or 2, 1..3 GPUs, 0..4 requests
  auto evaluated = EvaluatePlan(cost, space, Synchronous(12), history, mixed->best->train, {2, 1});
  ASSERT_OK(evaluated);
  EXPECT_TRUE(Near(evaluated->rollout_s, 10 + 3 * 56.0 / 11)) << evaluated->rollout_s;
}

TEST(SearchTest, TimeSharedLayoutsAreCandidates) {
  // Synchronous, 16 tokens: time-shared, all 4 GPUs roll out as two TP2s (the 10-token
  // trajectory takes 6 s on either, decoded beside one other of the mix's mean 2 tokens) and then
  // all train (1.5 s); the best split takes 8 + 3.
  FakeCost cost;
  SearchSpace space = HandSpace();
  space.time_shared = true;
  auto result = Search(cost, space, Synchronous(4), Decodes({10, 2, 1, 3}));
  ASSERT_OK(result);
  ASSERT_TRUE(result->best);
  EXPECT_TRUE(result->best->colocated);
  EXPECT_EQ(result->best->train_gpus(), 4);
  EXPECT_EQ(result->best->rollout_gpus(), 4);
  EXPECT_EQ(result->best->rollout_tps, std::vector<int>({2, 2}));
  EXPECT_DOUBLE_EQ(result->best->rollout_s, 6);
  EXPECT_DOUBLE_EQ(result->best->step_s, 7.5);
  EXPECT_NE(result->trace.lines[result->trace.lines.size() - 2].find("time-shared 4"),
            std::string::npos);
  auto evaluated = EvaluatePlan(cost, space, Synchronous(4), Decodes({10, 2, 1, 3}),
                                result->best->train, result->best->rollout_tps, true);
  ASSERT_OK(evaluated);
  EXPECT_DOUBLE_EQ(evaluated->step_s, 7.5);
  // A time-shared plan covers every GPU with both roles.
  EXPECT_FALSE(
      EvaluatePlan(cost, space, Synchronous(4), Decodes({1}), {1, 1, 2, 1}, {2}, true).ok());
}

/// Asynchronous (staleness 1) and rollout-bound: 2 training GPUs wait 5 s of every 8.
struct WaitingTrainer {
  WaitingTrainer() {
    space.fixed_train_gpus = 2;
    space.rollout_tps = {2};
    shape.staleness = 1;
  }
  FakeCost cost;
  SearchSpace space = HandSpace();
  PipelineShape shape = Synchronous(4);
  std::vector<RequestSample> history = Decodes({10, 2, 1, 3});
};

TEST(SearchTest, ARolloutBoundPipelineLendsItsWaitingTrainer) {
  // Multi-turn: lending the waiting trainer's GPUs to rollout shortens the step; EvaluatePlan
  // reproduces it.
  WaitingTrainer w;
  auto& [cost, space, shape, history] = w;
  for (RequestSample& r : history) r.turns = 4;  // three instant tool calls each
  auto result = Search(cost, space, shape, history);
  ASSERT_OK(result);
  ASSERT_TRUE(result->best);
  EXPECT_TRUE(result->best->lend_trainer);
  EXPECT_LT(result->best->step_s, 8);
  EXPECT_GE(result->best->step_s, result->best->train_s);
  auto evaluated = EvaluatePlan(cost, space, shape, history, result->best->train, {2}, false, true);
  ASSERT_OK(evaluated);
  EXPECT_DOUBLE_EQ(evaluated->step_s, result->best->step_s);
  space.hybrid = false;
  auto plain = Search(cost, space, shape, history);
  ASSERT_OK(plain);
  ASSERT_TRUE(plain->best);
  EXPECT_FALSE(plain->best->lend_trainer);
  EXPECT_DOUBLE_EQ(plain->best->step_s, 8);
}

TEST(SearchTest, ASingleTurnWorkloadLendsNothing) {
  // Single-turn requests: their only turn goes out at launch, before the trainer's GPUs join
  // rollout, so lending them cannot shorten the step.
  WaitingTrainer w;
  const auto& [cost, space, shape, history] = w;
  auto result = Search(cost, space, shape, history);
  ASSERT_OK(result);
  ASSERT_TRUE(result->best);
  EXPECT_FALSE(result->best->lend_trainer);
  auto lent = EvaluatePlan(cost, space, shape, history, result->best->train, {2}, false, true);
  ASSERT_OK(lent);
  EXPECT_GE(lent->step_s, result->best->step_s);
}

TEST(SearchTest, LendingIsTriedOnEveryRolloutOptionOfABudget) {
  // Lent GPUs join as instances of the rollout side's largest TP and take over part of its
  // turns, so the option fastest alone need not be the fastest lent. Randomised small
  // asynchronous multi-turn cases: no homogeneous rollout layout of a budget, lent with the
  // budget's training layout, beats the plan the search keeps for that budget.
  int lent = 0;
  int compared = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const auto [cost, space, shape, history] = DrawSmallCase(rng, false, 1, 2000);
    SCOPED_TRACE(StrFormat("seed %d", static_cast<int>(seed)));
    auto result = Search(*cost, space, shape, history);
    ASSERT_OK(result);
    for (const CandidatePlan& kept : result->top) {
      lent += kept.lend_trainer ? 1 : 0;
      const int gpus = kept.rollout_gpus();
      for (int tp : space.rollout_tps) {
        if (gpus % tp != 0) continue;
        auto other =
            EvaluatePlan(*cost, space, shape, history, kept.train,
                         std::vector<int>(static_cast<size_t>(gpus / tp), tp), false, true);
        if (!other.ok()) continue;  // does not pack, or cannot be lent
        ++compared;
        EXPECT_GE(other->step_s, kept.step_s * (1 - 1e-9))
            << kept.ToString() << " against " << other->ToString();
      }
    }
  }
  EXPECT_GE(compared, 100);
  EXPECT_GE(lent, 10);  // lending is in play, so the comparison is not vacuous
}

TEST(SearchTest, EveryPruneReasonIsCounted) {
  // Small spaces that trip each filter of the training tree and each way a rollout side fails.
  FakeCost cost;
  cost.comm_per_tp = 0.3;  // TP2 0.3 (kept), TP4 0.9 (pruned)
  cost.memory_limit = 5;   // an unsharded model (tp * pp = 1) does not fit
  SearchSpace space;
  space.time_shared = false;
  space.nodes = 2;
  space.gpus_per_node = 4;
  space.train_tps = {1, 2, 4, 8};
  space.train_pps = {1, 2, 4};
  space.micro_batches = {1, 2};
  auto result = Search(cost, space, Synchronous(4), Decodes({5, 6, 7}));
  ASSERT_OK(result);
  ASSERT_TRUE(result->best);
  const std::map<std::string, int>& pruned = result->trace.pruned;
  for (const char* reason :
       {"tp_divides", "tp_comm_ratio", "pp_divides", "batch_divides", "bubble", "oom"}) {
    EXPECT_GT(pruned.count(reason) ? pruned.at(reason) : 0, 0) << reason;
  }
  // TP8 exceeds the node on all 7 budgets, TP4 is pruned by its communication wherever it
  // divides the budget (4), PP4 never divides the 6 layers.
  EXPECT_EQ(pruned.at("tp_comm_ratio"), 1);
  EXPECT_GT(result->trace.train_nodes, 0);

  // "bound": equal training times after the first leaf cannot beat it.
  FakeCost plain;
  auto tied = Search(plain, HandSpace(), Synchronous(12), Decodes({1, 2, 3}));
  ASSERT_OK(tied);
  EXPECT_GT(tied->trace.pruned.at("bound"), 0);

  // "no_rollout_layout": TP2 instances cannot fill an odd number of GPUs.
  SearchSpace even = HandSpace();
  even.rollout_tps = {2};
  auto odd = Search(plain, even, Synchronous(12), Decodes({1, 2, 3}));
  ASSERT_OK(odd);
  EXPECT_EQ(odd->trace.pruned.at("no_rollout_layout"), 2);  // 1 and 3 rollout GPUs
  ASSERT_TRUE(odd->best);
  EXPECT_EQ(odd->best->rollout_gpus(), 2);

  // "rollout_oom": nothing holds a 100-token request.
  FakeCost small;
  small.kv_tp1 = 10;
  small.kv_per_tp = 10;
  auto oom = Search(small, HandSpace(), Synchronous(12), Decodes({100}));
  ASSERT_OK(oom);
  EXPECT_FALSE(oom->best);
  EXPECT_TRUE(oom->top.empty());
  EXPECT_EQ(oom->trace.pruned.at("rollout_oom"), 3);

  // "rollout_unpackable": nodes of 6 with TP 2 and 3; 10 rollout GPUs are a partial node of 4
  // and a whole one, and 3 + 3 + 2 + 2 (the only layout with a TP3) does not pack into them.
  SearchSpace sixes = HandSpace();
  sixes.nodes = 2;
  sixes.gpus_per_node = 6;
  sixes.rollout_tps = {2, 3};
  sixes.fixed_train_gpus = 2;
  for (SearchMode mode : {SearchMode::kTreeDp, SearchMode::kExhaustive}) {
    auto unpackable = Search(plain, sixes, Synchronous(12), Decodes({1, 2, 3}), mode);
    ASSERT_OK(unpackable);
    EXPECT_EQ(unpackable->trace.pruned.at("rollout_unpackable"), 1);
    ASSERT_TRUE(unpackable->best);
    EXPECT_EQ(unpackable->best->rollout_tps, std::vector<int>({2, 2, 2, 2, 2}));
  }
}

TEST(SearchTest, BudgetsFollowTheBoundsGranularityAndFixedSize) {
  // 8 GPUs: multiples of 2 in [2, 6]; or only the fixed size; impossible bounds are errors.
  FakeCost cost;
  SearchSpace space;
  space.time_shared = false;
  space.nodes = 2;
  space.gpus_per_node = 4;
  space.train_pps = {1};
  space.granularity = 2;
  space.min_train_gpus = 2;
  space.max_train_gpus = 6;
  const std::vector<RequestSample> history = Decodes({5, 6, 7, 8});
  auto ranged = Search(cost, space, Synchronous(24), history);
  ASSERT_OK(ranged);
  EXPECT_EQ(ranged->trace.budgets, 3);
  std::vector<int> budgets;
  for (const CandidatePlan& plan : ranged->top) {
    budgets.push_back(plan.train_gpus());
    EXPECT_EQ(plan.train_gpus() + plan.rollout_gpus(), 8);
  }
  std::sort(budgets.begin(), budgets.end());
  EXPECT_EQ(budgets, std::vector<int>({2, 4, 6}));
  for (size_t i = 1; i < ranged->top.size(); ++i) {
    EXPECT_LE(ranged->top[i - 1].step_s, ranged->top[i].step_s);
  }

  space.min_rollout_gpus = 4;  // caps training at 4
  auto capped = Search(cost, space, Synchronous(24), history);
  ASSERT_OK(capped);
  EXPECT_EQ(capped->trace.budgets, 2);

  space.fixed_train_gpus = 3;  // overrides granularity and bounds
  auto fixed = Search(cost, space, Synchronous(12), history);
  ASSERT_OK(fixed);
  EXPECT_EQ(fixed->trace.budgets, 1);
  ASSERT_TRUE(fixed->best);
  EXPECT_EQ(fixed->best->train_gpus(), 3);

  space.fixed_train_gpus = 5;  // leaves 3 < min_rollout_gpus
  EXPECT_EQ(Search(cost, space, Synchronous(8), history).status().code(),
            StatusCode::kInvalidArgument);
  space.fixed_train_gpus.reset();
  space.min_train_gpus = 7;
  EXPECT_EQ(Search(cost, space, Synchronous(8), history).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SearchTest, RejectsEmptyHistoryImpossibleSpacesAndLargeExhaustiveProblems) {
  // Errors are kInvalidArgument and say why.
  FakeCost cost;
  EXPECT_EQ(Search(cost, HandSpace(), Synchronous(4), {}).status().code(),
            StatusCode::kInvalidArgument);
  SearchSpace no_tp = HandSpace();
  no_tp.rollout_tps = {3};
  EXPECT_EQ(Search(cost, no_tp, Synchronous(4), Decodes({1})).status().code(),
            StatusCode::kInvalidArgument);
  SearchSpace no_pp = HandSpace();
  no_pp.train_pps = {};
  EXPECT_EQ(Search(cost, no_pp, Synchronous(4), Decodes({1})).status().code(),
            StatusCode::kInvalidArgument);
  SearchSpace big;
  big.nodes = 3;
  auto refused = Search(cost, big, Synchronous(4), Decodes({1, 2}), SearchMode::kExhaustive);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("at most 16 GPUs"), std::string::npos);
  SearchSpace many = HandSpace();
  many.max_requests = 64;
  std::vector<int64_t> lengths(20);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<int64_t>(i + 1);
  EXPECT_EQ(
      Search(cost, many, Synchronous(4), Decodes(lengths), SearchMode::kExhaustive).status().code(),
      StatusCode::kInvalidArgument);
  many.max_requests = 10;  // sampled down to 10: accepted
  EXPECT_OK(Search(cost, many, Synchronous(4), Decodes(lengths), SearchMode::kExhaustive));
}

TEST(SearchTest, NodePatternIsTheOnlyRolloutLayout) {
  // Pattern [1 1 2] per node of 4: 2 training GPUs leave a partial node of 2 ([1 1]) and a whole
  // node ([1 1 2]); 1 training GPU leaves 3 on the first node, where the pattern's TP2 does not
  // fit after 1, 1. The 10-token trajectory may land on a TP1, where it alone takes 10 s.
  FakeCost cost;
  SearchSpace space = HandSpace();
  space.nodes = 2;
  space.node_pattern = {1, 1, 2};
  for (SearchMode mode : {SearchMode::kTreeDp, SearchMode::kExhaustive}) {
    space.fixed_train_gpus = 2;
    auto two = Search(cost, space, Synchronous(4), Decodes({1, 2, 3, 10}), mode);
    ASSERT_OK(two);
    ASSERT_TRUE(two->best);
    EXPECT_EQ(two->best->rollout_tps, std::vector<int>({2, 1, 1, 1, 1}));
    EXPECT_DOUBLE_EQ(two->best->rollout_s, 10);
    space.fixed_train_gpus = 1;
    auto one = Search(cost, space, Synchronous(4), Decodes({1, 2, 3, 10}), mode);
    ASSERT_OK(one);
    EXPECT_FALSE(one->best);
    EXPECT_EQ(one->trace.pruned.at("no_rollout_layout"), 1);
  }
  // A TP1 that cannot hold the longest request rules the pattern out.
  cost.kv_tp1 = 9;
  space.fixed_train_gpus = 2;
  auto small = Search(cost, space, Synchronous(4), Decodes({1, 2, 3, 10}));
  ASSERT_OK(small);
  EXPECT_FALSE(small->best);
  EXPECT_EQ(small->trace.pruned.at("rollout_oom"), 1);
}

TEST(SearchTest, TreeDpAndExhaustiveAgreeOnRandomSmallCases) {
  // Randomised small clusters (1-2 nodes of 4 GPUs), 3-8 requests, both catalog cost models,
  // random rollout TP sets, node patterns and pipelines: both modes find the same best step time
  // for every budget, and EvaluatePlan reproduces each plan's times.
  int feasible = 0;
  int cases = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    const std::string name = rng.Bernoulli(0.5) ? "roofline" : "libra-ref";
    const std::string model = rng.Bernoulli(0.5) ? "Qwen3-1.7B" : "Qwen3-4B";
    auto cost = Catalog(name, "A100-80G", model, 4);
    SearchSpace space;
    space.nodes = static_cast<int>(rng.UniformInt(1, 2));
    space.gpus_per_node = 4;
    const std::vector<std::vector<int>> tp_sets = {{1}, {2}, {1, 2}, {1, 4}, {2, 4}, {1, 2, 4}};
    space.rollout_tps = tp_sets[static_cast<size_t>(rng.UniformInt(0, 5))];
    if (rng.Bernoulli(0.25)) {
      const std::vector<std::vector<int>> patterns = {
          {1, 1, 2}, {2, 2}, {1, 1, 1, 1}, {4}, {2, 1, 1}};
      space.node_pattern = patterns[static_cast<size_t>(rng.UniformInt(0, 4))];
    }
    space.train_tps = {1, 2, 4};
    space.train_pps = {1, 2};
    space.micro_batches = {1, 2, 4};
    space.max_num_seqs = rng.Bernoulli(0.3) ? 2 : 256;
    const int requests = static_cast<int>(rng.UniformInt(3, 8));
    space.max_requests = requests;
    PipelineShape shape;
    shape.batch_trajectories = static_cast<int>(8 << rng.UniformInt(0, 2));
    shape.staleness = static_cast<int>(rng.UniformInt(0, 1));
    std::vector<RequestSample> history;
    for (int i = 0; i < requests; ++i) {
      history.push_back(
          {rng.UniformInt(100, 3000), rng.UniformInt(10, 20000), rng.UniformInt(0, 1000)});
    }
    SCOPED_TRACE(StrFormat("seed %d: %s %s, %d nodes, %d requests, batch %d",
                           static_cast<int>(seed), name.c_str(), model.c_str(), space.nodes,
                           requests, shape.batch_trajectories));
    auto tree = Search(*cost, space, shape, history, SearchMode::kTreeDp);
    auto brute = Search(*cost, space, shape, history, SearchMode::kExhaustive);
    ASSERT_OK(tree);
    ASSERT_OK(brute);
    ++cases;
    ASSERT_EQ(tree->best.has_value(), brute->best.has_value());
    ASSERT_EQ(tree->top.size(), brute->top.size());
    if (!tree->best) continue;
    ++feasible;
    EXPECT_TRUE(Near(tree->best->step_s, brute->best->step_s))
        << tree->best->ToString() << " vs " << brute->best->ToString();
    for (size_t i = 0; i < tree->top.size(); ++i) {
      const CandidatePlan& a = tree->top[i];
      const CandidatePlan& b = brute->top[i];
      EXPECT_EQ(a.train_gpus(), b.train_gpus());
      EXPECT_TRUE(Near(a.step_s, b.step_s)) << a.ToString() << " vs " << b.ToString();
      EXPECT_TRUE(Near(a.rollout_s, b.rollout_s)) << a.ToString() << " vs " << b.ToString();
      auto evaluated = EvaluatePlan(*cost, space, shape, history, a.train, a.rollout_tps,
                                    a.colocated, a.lend_trainer);
      ASSERT_OK(evaluated);
      EXPECT_TRUE(Near(evaluated->rollout_s, a.rollout_s)) << a.ToString();
      EXPECT_TRUE(Near(evaluated->step_s, a.step_s)) << a.ToString();
    }
  }
  EXPECT_EQ(cases, 40);
  EXPECT_GE(feasible, 25);  // the comparison is not vacuous
}

TEST(SearchTest, ALeastConnRouterPaysForTheTurnsItMoves) {
  // Multi-turn trajectories whose contexts stay cached across their tool calls: with the
  // returning turns placed by load alone (least-conn), those that land on another instance
  // prefill again, so the same layout rolls out slower wherever there is another instance to
  // land on; one instance has nowhere else to send them.
  auto cost = Catalog("roofline", "A800-80G", "Qwen3-14B", 8);
  SearchSpace space;
  space.nodes = 2;
  space.gpus_per_node = 8;
  PipelineShape shape;
  shape.batch_trajectories = 64;
  shape.staleness = 1;
  std::vector<RequestSample> history = R2eGymHistory(64, 5);
  for (RequestSample& r : history) {
    r.turns = 5;
    r.tool_s = 8;
  }
  const model::TrainLayout train{8, 1, 1, 1};
  auto rollout = [&](bool balanced, std::vector<int> tps) {
    shape.returns = balanced ? ReturnPlacement::kLeastLoaded : ReturnPlacement::kKept;
    auto plan = EvaluatePlan(*cost, space, shape, history, train, std::move(tps));
    EXPECT_OK(plan);
    return plan.ok() ? plan->rollout_s : 0.0;
  };
  EXPECT_DOUBLE_EQ(rollout(true, {8}), rollout(false, {8}));
  EXPECT_GT(rollout(true, {4, 4}), rollout(false, {4, 4}));
  EXPECT_GT(rollout(true, {2, 2, 2, 2}), rollout(false, {2, 2, 2, 2}));
}

TEST(SearchTest, PaperSettingYieldsAFeasiblePlan) {
  // 48 A800 (6 x 8), Qwen3-14B, 256 r2e-gym-like trajectories a step, staleness 2: a plan that
  // fits in memory, uses all 48 GPUs, and whose times EvaluatePlan reproduces.
  auto cost = Catalog("roofline", "A800-80G", "Qwen3-14B", 8);
  SearchSpace space;
  space.nodes = 6;
  space.gpus_per_node = 8;
  PipelineShape shape;
  shape.batch_trajectories = 256;
  shape.staleness = 2;
  const std::vector<RequestSample> history = R2eGymHistory(256, 42);
  auto result = Search(*cost, space, shape, history);
  ASSERT_OK(result);
  ASSERT_TRUE(result->best);
  const CandidatePlan& best = *result->best;
  EXPECT_EQ(best.train_gpus() + best.rollout_gpus(), 48);
  EXPECT_GT(best.rollout_gpus(), 0);
  EXPECT_EQ(result->trace.budgets, 47);
  // Of the 4 * 64 * 65 / 2 runs, the DP's lower bound rules some out unevaluated, and of those
  // it asks for, their floors rule out more without an estimate.
  EXPECT_GT(result->trace.segment_evaluations, 0);
  EXPECT_LT(result->trace.segment_evaluations, 4 * 64 * 65 / 2);
  EXPECT_GT(result->trace.segment_estimates, 0);
  EXPECT_LT(result->trace.segment_estimates, result->trace.segment_evaluations);
  EXPECT_GT(best.rollout_s, 0);
  EXPECT_GT(best.train_s, 0);
  EXPECT_GE(best.step_s, best.train_s + best.sync_s);
  auto evaluated = EvaluatePlan(*cost, space, shape, history, best.train, best.rollout_tps,
                                best.colocated, best.lend_trainer);
  ASSERT_OK(evaluated);  // which includes: the training layout does not run out of memory
  EXPECT_DOUBLE_EQ(evaluated->rollout_s, best.rollout_s);
  EXPECT_DOUBLE_EQ(evaluated->step_s, best.step_s);
  EXPECT_DOUBLE_EQ(evaluated->train_s, best.train_s);
  EXPECT_DOUBLE_EQ(evaluated->sync_s, best.sync_s);
  // The paper's constrained space (pattern [1 1 2 4], training TP8 in multiples of 8).
  space.node_pattern = {1, 1, 2, 4};
  space.train_tps = {8};
  space.train_pps = {1};
  space.micro_batches = {1};
  space.granularity = 8;
  space.min_train_gpus = 8;
  space.min_rollout_gpus = 8;
  auto paper = Search(*cost, space, shape, history);
  ASSERT_OK(paper);
  ASSERT_TRUE(paper->best);
  EXPECT_EQ(paper->best->train.tp, 8);
  EXPECT_EQ(paper->best->train_gpus() % 8, 0);
  EXPECT_EQ(paper->best->train_gpus() + paper->best->rollout_gpus(), 48);
  EXPECT_LE(best.step_s, paper->best->step_s);  // the free space contains the constrained one
  // The pattern's layouts are timed as the router fills them: no free segments are evaluated.
  EXPECT_EQ(paper->trace.segment_evaluations, 0);
}

TEST(SearchTest, SameInputGivesIdenticalResults) {
  // No hidden state: two searches of the same input agree bit for bit, trace included.
  auto cost = Catalog("roofline", "A800-80G", "Qwen3-14B", 8);
  SearchSpace space;
  space.nodes = 2;
  PipelineShape shape;
  shape.batch_trajectories = 64;
  shape.staleness = 1;
  const std::vector<RequestSample> history = R2eGymHistory(100, 3);
  auto first = Search(*cost, space, shape, history);
  auto second = Search(*cost, space, shape, history);
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_TRUE(*first == *second);
  ASSERT_TRUE(first->best);
  // The history's order does not matter either: it is sorted first.
  std::vector<RequestSample> reversed(history.rbegin(), history.rend());
  auto third = Search(*cost, space, shape, reversed);
  ASSERT_OK(third);
  EXPECT_TRUE(*first == *third);
  // Nor does a caller's SortHistory (which lets the search skip its own sort).
  std::vector<RequestSample> sorted = reversed;
  SortHistory(sorted);
  EXPECT_FALSE(std::equal(sorted.begin(), sorted.end(), reversed.begin()));
  auto fourth = Search(*cost, space, shape, sorted);
  ASSERT_OK(fourth);
  EXPECT_TRUE(*first == *fourth);
  const CandidatePlan& plan = *first->best;
  auto unsorted = EvaluatePlan(*cost, space, shape, reversed, plan.train, plan.rollout_tps,
                               plan.colocated, false);
  auto presorted = EvaluatePlan(*cost, space, shape, sorted, plan.train, plan.rollout_tps,
                                plan.colocated, false);
  ASSERT_OK(unsorted);
  ASSERT_OK(presorted);
  EXPECT_TRUE(*unsorted == *presorted);
}

/// 64 groups of 8 samples of 3,000 tokens, every fourth group with one of 20,000.
std::vector<RequestSample> TailedGroups() {
  std::vector<RequestSample> samples;
  for (int i = 0; i < 512; ++i) samples.push_back({1500, i % 32 == 0 ? 20000 : 3000, 500});
  return samples;
}

std::shared_ptr<const std::vector<RequestSample>> Groups(std::vector<RequestSample> samples) {
  return std::make_shared<const std::vector<RequestSample>>(std::move(samples));
}

/// The stream tests' problem: 2 nodes x 4 H100 with Qwen3-4B, staleness 1, 64 trajectories a
/// step in groups of 8.
struct GroupedProblem {
  std::unique_ptr<model::CostModel> cost = Catalog("roofline", "H100-80G", "Qwen3-4B", 4);
  SearchSpace space;
  PipelineShape shape;
  GroupedProblem() {
    space.nodes = 2;
    space.gpus_per_node = 4;
    shape.batch_trajectories = 64;
    shape.staleness = 1;
    shape.group_size = 8;
  }
};

TEST(SearchTest, StreamBatchesTrainTheShortGroupsAndWaitForNoSlowestOne) {
  // 2 nodes x 4 H100, Qwen3-4B, staleness 1, 64 trajectories a step in groups of 8, a quarter of
  // the groups with one long sample (20,000 tokens against 3,000): with stream batches short
  // groups overtake long ones and some are rejected, so the plan trains fewer tokens than the
  // ordered one; its step is at least its trainer's cycle; and its rollout alone is shorter than
  // an ordered batch's, which waits for its slowest trajectory where the replay rejects the
  // group that holds it.
  // Groups that take alike train what ordered batches train, and a synchronous pipeline is
  // unchanged (nothing lags).
  GroupedProblem p;
  const auto& cost = p.cost;
  const SearchSpace& space = p.space;
  PipelineShape& shape = p.shape;
  const std::vector<RequestSample> history = TailedGroups();
  const model::TrainLayout train{2, 1, 2, 1};
  auto ordered = EvaluatePlan(*cost, space, shape, history, train, {2, 2});
  ASSERT_OK(ordered);
  shape.stream_groups = Groups(history);
  auto stream = EvaluatePlan(*cost, space, shape, history, train, {2, 2});
  ASSERT_OK(stream);
  EXPECT_LT(stream->train_s, 0.95 * ordered->train_s);
  EXPECT_LT(stream->rollout_s, 0.9 * ordered->rollout_s);
  EXPECT_GE(stream->step_s, stream->train_s + stream->sync_s);
  EXPECT_EQ(stream->sync_s, ordered->sync_s);

  shape.stream_groups = Groups(std::vector<RequestSample>(512, RequestSample{1500, 3000, 500}));
  auto alike = EvaluatePlan(*cost, space, shape, history, train, {2, 2});
  ASSERT_OK(alike);
  EXPECT_DOUBLE_EQ(alike->train_s, ordered->train_s);

  shape.stream_groups = Groups(history);
  shape.staleness = 0;
  PipelineShape synchronous = shape;
  synchronous.stream_groups = nullptr;
  auto sync_stream = EvaluatePlan(*cost, space, shape, history, train, {2, 2});
  auto sync_ordered = EvaluatePlan(*cost, space, synchronous, history, train, {2, 2});
  ASSERT_OK(sync_stream);
  ASSERT_OK(sync_ordered);
  EXPECT_EQ(*sync_stream, *sync_ordered);
}

TEST(SearchTest, AStreamReplayDecodesNoFasterThanFullEngines) {
  // Contexts of 50,000 to 60,000 tokens: a TP2 instance of Qwen3-4B on H100s fits about twenty,
  // and a stream pipeline with staleness 1 keeps some 64 an instance in flight. Those beyond
  // what an instance holds take turns, so rollout alone is at least each instance's share of a
  // step's decoded tokens at a full engine's pace (here with the contexts at their shortest, so
  // more of them fit and the pace is faster than any the engine reaches).
  GroupedProblem p;
  const auto& cost = p.cost;
  const SearchSpace& space = p.space;
  PipelineShape& shape = p.shape;
  shape.max_sequence_tokens = 65536;
  const std::vector<RequestSample> history(512, RequestSample{50000, 10000, 0});
  shape.stream_groups = Groups(history);
  auto plan = EvaluatePlan(*cost, space, shape, history, {2, 1, 2, 1}, {2, 2});
  ASSERT_OK(plan);
  const double held = std::floor(static_cast<double>(cost->KvCapacityTokens(2)) / 50000);
  ASSERT_LT(held, 32);
  const double full_pace =
      cost->DecodeSpanTime(2, static_cast<int64_t>(held), static_cast<int64_t>(held) * 50000, 1) /
      held;
  EXPECT_GE(plan->rollout_s, 64.0 * 10000 / 2 * full_pace);
}

TEST(SearchTest, EvaluatePlanRejectsPlansThatDoNotFit) {
  // More GPUs than the cluster, an instance across a node, a training OOM, a request that fits
  // no instance: each is kInvalidArgument.
  FakeCost cost;
  cost.memory_limit = 5;
  cost.kv_tp1 = 5;
  cost.kv_per_tp = 5;
  SearchSpace space = HandSpace();
  space.nodes = 2;
  space.gpus_per_node = 6;
  const PipelineShape shape = Synchronous(3);
  const std::vector<RequestSample> history = Decodes({1, 2, 3});
  auto ok = EvaluatePlan(cost, space, shape, history, {2, 1, 1, 1}, {1, 2, 2});
  ASSERT_OK(ok);
  EXPECT_EQ(ok->rollout_tps, std::vector<int>({2, 2, 1}));
  EXPECT_DOUBLE_EQ(ok->rollout_s, 3);  // the 3-token request may land on the TP1
  EXPECT_DOUBLE_EQ(ok->train_s, 3);
  EXPECT_DOUBLE_EQ(ok->step_s, 6);
  EXPECT_EQ(EvaluatePlan(cost, space, shape, history, {2, 1, 1, 1}, {6, 6}).status().code(),
            StatusCode::kInvalidArgument);  // 14 GPUs
  EXPECT_EQ(EvaluatePlan(cost, space, shape, history, {2, 1, 1, 1}, {3, 3, 2, 2}).status().code(),
            StatusCode::kInvalidArgument);  // partial node of 4 + node of 6
  EXPECT_EQ(EvaluatePlan(cost, space, shape, history, {1, 1, 2, 1}, {2}).status().code(),
            StatusCode::kInvalidArgument);  // OOM
  EXPECT_EQ(EvaluatePlan(cost, space, shape, Decodes({12}), {2, 1, 1, 1}, {2}).status().code(),
            StatusCode::kInvalidArgument);  // 12 tokens, TP2 holds 10
  EXPECT_EQ(EvaluatePlan(cost, space, shape, history, {2, 1, 1, 1}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SearchTest, ABatchSmallerThanTheSampleSpansIt) {
  // Totals 1,000 to 8,000 and batches of 4: the sample leaves out the longest (a batch of 4 holds
  // the longest of 5 on average) and the training batch takes every other rank of the rest up to
  // its longest, not the 4 shortest (which under-predicted small batches' training by up to 45%).
  const auto cost = Catalog("roofline", "A800-80G", "Qwen3-1.7B", 8);
  SearchSpace space = HandSpace();
  space.max_requests = 8;
  PipelineShape shape = Synchronous(4);
  std::vector<RequestSample> history;
  for (int64_t k = 1; k <= 8; ++k) history.push_back({0, 1000 * k, 0});
  const model::TrainLayout layout{1, 1, 2, 1};
  auto plan = EvaluatePlan(*cost, space, shape, history, layout, {1, 1});
  ASSERT_OK(plan);
  const std::vector<int64_t> spanning = {1000, 3000, 5000, 7000};
  EXPECT_DOUBLE_EQ(plan->train_s, cost->TrainStep(layout, shape.passes, spanning).step_s);
  const std::vector<int64_t> shortest = {1000, 2000, 3000, 4000};
  EXPECT_LT(cost->TrainStep(layout, shape.passes, shortest).step_s, plan->train_s);
}

TEST(SearchTest, TheSampleKeepsABatchsSlowestByLatency) {
  // 64 trajectories of 1,000 to 64,000 generated tokens; eight short ones (2,000-9,000 tokens)
  // each make one tool call, of 5,000-12,000 s. Thinned by length to 8 requests, the sample would
  // hold none of them (it takes ranks 0, 9, 17, ...), and a synchronous step would be predicted
  // at the longest decode, well under 5,000 s. A batch of 16 holds the slowest of 17 by latency:
  // the 4th slowest of the 64 (6,000 tokens, a call of 9,000 s) takes the place of the sampled
  // one nearest in length, and the step waits for it, not for a slower one.
  const auto cost = Catalog("roofline", "A800-80G", "Qwen3-1.7B", 8);
  SearchSpace space = HandSpace();
  space.max_requests = 8;
  const PipelineShape shape = Synchronous(16);
  std::vector<RequestSample> history;
  for (int64_t k = 1; k <= 64; ++k) {
    const bool tool = k >= 2 && k <= 9;
    history.push_back(
        {0, 1000 * k, tool ? 10 : 0, tool ? 2 : 1, tool ? 1000.0 * static_cast<double>(k + 3) : 0});
  }
  auto plan = EvaluatePlan(*cost, space, shape, history, {1, 1, 2, 1}, {1, 1});
  ASSERT_OK(plan);
  EXPECT_GE(plan->rollout_s, 9000);
  EXPECT_LT(plan->rollout_s, 10000);
}

TEST(SearchTest, AMicroBatchOfTheLongestSequencesMustFit) {
  // A run's micro-batch can hold its longest sequences together, so a layout of micro-batches
  // of 8 must hold 8 of the longest expected sequences, not one of them among typical ones (the
  // simulator ran such a plan out of memory at step 1). Micro-batches of one are unchanged.
  const auto cost = Catalog("roofline", "A800-80G", "Qwen3-8B", 8);
  SearchSpace space;
  space.nodes = 2;
  space.gpus_per_node = 8;
  PipelineShape shape = Synchronous(64);
  shape.max_sequence_tokens = 24000;
  const std::vector<RequestSample> history = R2eGymHistory(256, 7);
  const model::TrainLayout eight{2, 1, 4, 8};
  const model::TrainLayout one{2, 1, 4, 1};
  std::vector<int64_t> typical(64, 6000);
  typical.front() = shape.max_sequence_tokens;
  std::vector<int64_t> longest = typical;
  std::fill_n(longest.begin(), 8, shape.max_sequence_tokens);
  ASSERT_FALSE(cost->TrainStep(eight, shape.passes, typical).oom());
  ASSERT_TRUE(cost->TrainStep(eight, shape.passes, longest).oom());
  ASSERT_FALSE(cost->TrainStep(one, shape.passes, longest).oom());
  auto rejected = EvaluatePlan(*cost, space, shape, history, eight, {4, 4});
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rejected.status().message().find("runs out of memory"), std::string::npos);
  EXPECT_OK(EvaluatePlan(*cost, space, shape, history, one, {4, 4}));
  auto result = Search(*cost, space, shape, history);
  ASSERT_OK(result);
  for (const CandidatePlan& plan : result->top) {
    std::vector<int64_t> worst = typical;
    std::fill_n(worst.begin(), std::min(64, plan.train.micro_batch), shape.max_sequence_tokens);
    EXPECT_FALSE(cost->TrainStep(plan.train, shape.passes, worst).oom()) << plan.ToString();
  }
}

}  // namespace
}  // namespace libra::planner
