#include "planner/reference_planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::planner {
namespace {

using model::ReferenceCostModel;
using model::ReferenceParams;
using model::ReferenceTrainConfig;
using model::RequestInfo;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Expects `actual` to equal the number the reference prints as `printed` (libra-reference.md
// §3.5-§3.7): within a relative 1e-6 when it prints 7 or more significant digits, else within
// half a unit of its last printed digit.
void ExpectNearPrinted(double actual, const std::string& printed,
                       std::source_location where = std::source_location::current()) {
  const double expected = std::stod(printed);
  const size_t dot = printed.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(printed.size() - dot - 1);
  std::string digits;
  for (char c : printed) {
    if (c >= '0' && c <= '9' && !(digits.empty() && c == '0')) digits += c;
  }
  const double tolerance =
      digits.size() >= 7 ? 1e-6 * std::fabs(expected) : 0.5 * std::pow(10.0, -decimals);
  if (!(std::fabs(actual - expected) <= tolerance)) {
    ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
        << "actual " << std::setprecision(17) << actual << " is not the printed " << printed
        << " (tolerance " << tolerance << ")";
  }
}

// The reference's default model (ModelArchConfig ~ Qwen2.5-3B on the default A100), with the
// max_seq_length 4096 of the authors' planner tests (test_global_resource_planner_simulators.py).
ReferenceParams DefaultModelParams() {
  ReferenceParams p;
  p.max_seq_length = 4096;
  return p;
}

// The authors' hardware_config/a100_80g.yaml and model_arch_config/qwen3-14b.yaml (as in
// reference_model_test.cc), with the 48-GPU configs' max_seq_length 32768.
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
  p.max_seq_length = 32768;
  return p;
}

// The authors' planner-test run: 2 training GPUs (TP1, DP2, micro 1) and 2 rollout GPUs, batch
// 8, n_samples at its default 4 (_base_config of test_global_resource_planner_simulators.py).
ReferenceRunConfig FourGpuRun() {
  ReferenceRunConfig run;
  run.train_gpus = 2;
  run.rollout_gpus = 2;
  run.train_tp = 1;
  run.train_pp = 1;
  run.train_dp = 2;
  run.micro_batch_size = 1;
  run.batch_size = 8;
  return run;
}

// Its planner: plan every step from step 0 with 4 requests of history, no transition cost or
// threshold, training TP {1, 2}, PP 1, micro-batch 1, rollout TP {1, 2, 4}.
ReferencePlannerConfig FourGpuPlanner() {
  ReferencePlannerConfig c;
  c.n_total_gpus = 4;
  c.plan_interval = 1;
  c.warmup_steps = 0;
  c.min_history_size = 4;
  c.reconfiguration_cost_s = 0;
  c.min_gain_ratio = 0;
  c.allowed_train_tp = {1, 2};
  c.allowed_train_pp = {1};
  c.allowed_rollout_tp = {1, 2, 4};
  c.micro_batch_sizes = {1};
  return c;
}

// The 48-GPU "Libra" run (configs/r2e_gym_qwen3_14b_mcore_gpu_6node48_100step.yaml, §7.4):
// training TP8 x DP4 on 32 GPUs, rollout [1, 1, 2, 4] on each of two nodes, batch 4, micro 1,
// n_samples 1.
ReferenceRunConfig FortyEightGpuRun() {
  ReferenceRunConfig run;
  run.train_gpus = 32;
  run.rollout_gpus = 16;
  run.train_tp = 8;
  run.train_pp = 1;
  run.train_dp = 4;
  run.micro_batch_size = 1;
  run.batch_size = 4;
  run.n_samples = 1;
  run.max_concurrent_rollouts = 8;
  run.rollout_tp_list = {1, 1, 2, 4, 1, 1, 2, 4};
  return run;
}

// Its planner section: interval 5, no warmup, 4 requests of history, no cost or threshold,
// training TP8 / PP1 / micro 1 in steps of 8 GPUs with 8 left for rollout, rollout the node
// pattern [1, 1, 2, 4] and heterogeneous.
ReferencePlannerConfig FortyEightGpuPlanner() {
  ReferencePlannerConfig c;
  c.n_total_gpus = 48;
  c.plan_interval = 5;
  c.warmup_steps = 0;
  c.min_history_size = 4;
  c.min_gain_ratio = 0;
  c.reconfiguration_cost_s = 0;
  c.allowed_train_tp = {8};
  c.allowed_train_pp = {1};
  c.allocation_granularity_gpus = 8;
  c.min_train_gpus = 8;
  c.min_rollout_gpus = 8;
  c.rollout_node_tp_pattern = {1, 1, 2, 4};
  c.allowed_rollout_tp = {1, 2, 4};
  c.require_heterogeneous_rollout_tp = true;
  c.micro_batch_sizes = {1};
  c.verbose = true;
  return c;
}

// §3.5's synthetic history: prompts of 1500 tokens generating 800 ... 30000.
std::vector<RequestInfo> SyntheticHistory() {
  std::vector<RequestInfo> history;
  for (int64_t gen : {800, 1500, 3000, 6000, 12000, 20000, 28000, 30000}) {
    history.push_back({1500, gen});
  }
  return history;
}

std::unique_ptr<ReferencePlanner> CreateOrDie(const ReferenceCostModel& model,
                                              const ReferencePlannerConfig& config) {
  Result<std::unique_ptr<ReferencePlanner>> made = ReferencePlanner::Create(model, config);
  EXPECT_OK(made);
  return made.ok() ? std::move(made).value() : nullptr;
}

ReferenceDecision PlanOrDie(ReferencePlanner& planner, int64_t step, const ReferenceRunConfig& run,
                            std::span<const RequestInfo> batch = {},
                            const ReferenceRuntimeMetrics* metrics = nullptr) {
  Result<ReferenceDecision> decision = planner.PlanIfNeeded(step, run, batch, metrics);
  EXPECT_OK(decision);
  return decision.ok() ? std::move(decision).value() : ReferenceDecision{};
}

std::vector<std::vector<int>> TrainTriples(const std::vector<ReferenceTrainConfig>& configs) {
  std::vector<std::vector<int>> triples;
  for (const ReferenceTrainConfig& c : configs) triples.push_back({c.tp, c.pp, c.dp});
  return triples;
}

ReferencePlan PlanOf(ReferenceTrainConfig train, std::vector<int> rollout, double t_global) {
  ReferencePlan plan;
  plan.train = train;
  plan.rollout_tp_list = std::move(rollout);
  plan.t_train = 0.1;
  plan.t_rollout = t_global;
  plan.t_global = t_global;
  return plan;
}

// ---- Search space (§3.5) -----------------------------------------------------------------------

TEST(ReferencePlannerTest, TrainingConfigsForFourGpus) {
  // §3.5: TP {1, 2}, PP {1}, micro {1} on 4 GPUs, tp then pp then dp ascending, including the
  // configurations that leave no GPU for rollout; the optimizer's min_rollout_gpus 1 drops them.
  const std::vector<int> tp = {1, 2};
  const std::vector<int> pp = {1};
  const std::vector<int> micro = {1};
  const std::vector<std::vector<int>> expected = {{1, 1, 1}, {1, 1, 2}, {1, 1, 3},
                                                  {1, 1, 4}, {2, 1, 1}, {2, 1, 2}};
  const std::vector<ReferenceTrainConfig> all = GenerateReferenceTrainingConfigs(4, tp, pp, micro);
  EXPECT_EQ(TrainTriples(all), expected);
  for (const ReferenceTrainConfig& c : all) {
    EXPECT_EQ(c.b_micro, 1);
    EXPECT_EQ(c.cp, 1);
    EXPECT_EQ(c.zero_level, 2);
  }
  ReferenceSearchOptions options;
  options.n_total_gpus = 4;
  options.allowed_train_tp = tp;
  options.allowed_train_pp = pp;
  options.micro_batch_sizes = micro;
  EXPECT_EQ(TrainTriples(ReferenceTrainingCandidates(options)),
            (std::vector<std::vector<int>>{{1, 1, 1}, {1, 1, 2}, {1, 1, 3}, {2, 1, 1}}));
}

TEST(ReferencePlannerTest, DefaultTrainingSpaceIsPowersOfTwoAndFourMicroSizes) {
  // Without lists: TP and PP are the powers of two up to 8 that fit (1, 2 for 3 GPUs), micro
  // sizes 1, 2, 4, 8, micro innermost.
  const std::vector<ReferenceTrainConfig> configs = GenerateReferenceTrainingConfigs(3);
  // (tp, pp) = (1, 1): dp 1..3; (1, 2): dp 1; (2, 1): dp 1; (2, 2) does not fit. x 4 micros.
  ASSERT_EQ(configs.size(), 5u * 4u);
  EXPECT_EQ(configs[0], (ReferenceTrainConfig{1, 1, 1, 1}));
  EXPECT_EQ(configs[3], (ReferenceTrainConfig{1, 1, 1, 8}));
  EXPECT_EQ(configs[4], (ReferenceTrainConfig{1, 1, 2, 1}));
  EXPECT_EQ(configs[12], (ReferenceTrainConfig{1, 2, 1, 1}));
  EXPECT_EQ(configs[16], (ReferenceTrainConfig{2, 1, 1, 1}));
  EXPECT_EQ(configs[19], (ReferenceTrainConfig{2, 1, 1, 8}));
  EXPECT_TRUE(GenerateReferenceTrainingConfigs(0).empty());
}

TEST(ReferencePlannerTest, TrainingFiltersGranularityMinimumsFixedGpusAndCp) {
  // 48 GPUs, TP8: granularity 8 with at least 8 training and 8 rollout GPUs keeps 8..40; a fixed
  // size keeps one; cp multiplies every configuration's GPUs.
  ReferenceSearchOptions o;
  o.n_total_gpus = 48;
  o.allowed_train_tp = {8};
  o.allowed_train_pp = {1};
  o.micro_batch_sizes = {1};
  o.allocation_granularity_gpus = 8;
  o.min_train_gpus = 8;
  o.min_rollout_gpus = 8;
  std::vector<int> gpus;
  for (const ReferenceTrainConfig& c : ReferenceTrainingCandidates(o)) gpus.push_back(c.gpus());
  EXPECT_EQ(gpus, (std::vector<int>{8, 16, 24, 32, 40}));

  o.fixed_train_gpus = 16;
  EXPECT_EQ(TrainTriples(ReferenceTrainingCandidates(o)),
            (std::vector<std::vector<int>>{{8, 1, 2}}));

  o.fixed_train_gpus = 0;
  o.train_cp_size = 2;
  gpus.clear();
  for (const ReferenceTrainConfig& c : ReferenceTrainingCandidates(o)) {
    EXPECT_EQ(c.cp, 2);
    gpus.push_back(c.gpus());
  }
  // dp 1..6 generated (cp is set after generation), 16 * dp kept up to 40.
  EXPECT_EQ(gpus, (std::vector<int>{16, 32}));

  o.train_cp_size = 1;
  o.allocation_granularity_gpus = 16;
  o.min_train_gpus = 20;
  gpus.clear();
  for (const ReferenceTrainConfig& c : ReferenceTrainingCandidates(o)) gpus.push_back(c.gpus());
  EXPECT_EQ(gpus, (std::vector<int>{32}));
}

TEST(ReferencePlannerTest, RolloutPartitionsOfEightGpus) {
  // §3.5: the partitions of 8 into {1, 2, 4, 8}, parts non-increasing, larger parts first.
  const std::vector<std::vector<int>> expected = {
      {8},
      {4, 4},
      {4, 2, 2},
      {4, 2, 1, 1},
      {4, 1, 1, 1, 1},
      {2, 2, 2, 2},
      {2, 2, 2, 1, 1},
      {2, 2, 1, 1, 1, 1},
      {2, 1, 1, 1, 1, 1, 1},
      {1, 1, 1, 1, 1, 1, 1, 1},
  };
  EXPECT_EQ(GenerateReferenceRolloutConfigs(8), expected);
  const std::vector<int> unsorted = {2, 8, 1, 4};
  EXPECT_EQ(GenerateReferenceRolloutConfigs(8, unsorted), expected);
}

TEST(ReferencePlannerTest, RolloutPartitionsRespectMaxInstancesAndTruncateAt500) {
  // At most max_instances parts; sizes above the GPUs are dropped; nothing for no GPUs; a large
  // pool keeps the first 500 layouts, largest parts first.
  EXPECT_EQ(GenerateReferenceRolloutConfigs(8, {}, 3),
            (std::vector<std::vector<int>>{{8}, {4, 4}, {4, 2, 2}}));
  const std::vector<int> big = {16};
  EXPECT_TRUE(GenerateReferenceRolloutConfigs(8, big).empty());
  EXPECT_TRUE(GenerateReferenceRolloutConfigs(0).empty());
  EXPECT_EQ(GenerateReferenceRolloutConfigs(3), (std::vector<std::vector<int>>{{2, 1}, {1, 1, 1}}));

  const std::vector<std::vector<int>> many = GenerateReferenceRolloutConfigs(64);
  ASSERT_EQ(many.size(), 500u);
  EXPECT_EQ(many.front(), std::vector<int>(8, 8));
  for (const std::vector<int>& layout : many) {
    int sum = 0;
    for (size_t i = 0; i < layout.size(); ++i) {
      sum += layout[i];
      if (i > 0) {
        EXPECT_LE(layout[i], layout[i - 1]);
      }
    }
    EXPECT_EQ(sum, 64);
    EXPECT_LE(layout.size(), 32u);
  }
  // Reference behaviour: the cut (at 500 of 571) comes before any layout without a TP4 or TP8
  // instance. The last one kept, from the authors' code:
  std::vector<int> last(11, 4);
  last.insert(last.end(), 5, 2);
  last.insert(last.end(), 10, 1);
  EXPECT_EQ(many.back(), last);
  for (const std::vector<int>& layout : many) EXPECT_GE(layout.front(), 4);
}

TEST(ReferencePlannerTest, RolloutCandidatesFromANodePatternOrHeterogeneousPartitions) {
  // A node pattern is repeated to fill the rollout GPUs, or gives nothing when it does not
  // divide them; require_heterogeneous keeps layouts with two or more distinct sizes.
  ReferenceSearchOptions o;
  o.rollout_node_tp_pattern = {1, 1, 2, 4};
  EXPECT_EQ(ReferenceRolloutCandidates(16, o),
            (std::vector<std::vector<int>>{{1, 1, 2, 4, 1, 1, 2, 4}}));
  EXPECT_TRUE(ReferenceRolloutCandidates(12, o).empty());

  o.rollout_node_tp_pattern = {2, 2, 2, 2};
  o.require_heterogeneous_rollout_tp = true;
  EXPECT_TRUE(ReferenceRolloutCandidates(8, o).empty());

  o.rollout_node_tp_pattern.clear();
  o.allowed_rollout_tp = {1, 2, 4};
  EXPECT_EQ(ReferenceRolloutCandidates(4, o), (std::vector<std::vector<int>>{{2, 1, 1}}));
  o.require_heterogeneous_rollout_tp = false;
  EXPECT_EQ(ReferenceRolloutCandidates(4, o),
            (std::vector<std::vector<int>>{{4}, {2, 2}, {2, 1, 1}, {1, 1, 1, 1}}));
}

// ---- The optimizer and the cross-checks (§3.5) -------------------------------------------------

TEST(ReferencePlannerTest, FourGpuCrossCheck) {
  // §3.5: 4 GPUs, the default model, four (128, 4096) requests, batch 8. The configured plan
  // (train 1x1x2 + rollout [1, 1]) gives way to train TP1/DP2 + rollout [2]: "reconfigure".
  const ReferenceCostModel model(DefaultModelParams());
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, FourGpuPlanner());
  ASSERT_NE(planner, nullptr);
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 4096});
  const ReferenceDecision d = PlanOrDie(*planner, 0, FourGpuRun(), batch);

  EXPECT_EQ(d.trigger, ReferenceTrigger::kInterval);
  EXPECT_EQ(d.reason, ReferenceReason::kReconfigure);
  EXPECT_TRUE(d.should_reconfigure);
  EXPECT_EQ(d.num_requests, 4);
  ASSERT_TRUE(d.current_plan.has_value());
  const ReferencePlan& current = *d.current_plan;
  EXPECT_EQ(current.train, (ReferenceTrainConfig{1, 1, 2, 1}));
  EXPECT_EQ(current.rollout_tp_list, (std::vector<int>{1, 1}));
  EXPECT_EQ(current.source, ReferencePlanSource::kCurrent);
  ExpectNearPrinted(current.t_train, "0.165852");
  ExpectNearPrinted(current.t_rollout, "0.505345");
  EXPECT_EQ(current.t_global, current.t_rollout);
  EXPECT_EQ(current.max_concurrent_rollouts, 64);

  ASSERT_TRUE(d.candidate_plan.has_value());
  const ReferencePlan& candidate = *d.candidate_plan;
  EXPECT_EQ(candidate.train, (ReferenceTrainConfig{1, 1, 2, 1}));
  EXPECT_EQ(candidate.rollout_tp_list, (std::vector<int>{2}));
  EXPECT_EQ(candidate.source, ReferencePlanSource::kOptimizer);
  ExpectNearPrinted(candidate.t_rollout, "0.278821");
  EXPECT_EQ(candidate.t_train, current.t_train);
  EXPECT_EQ(candidate.t_global, candidate.t_rollout);
  EXPECT_EQ(candidate.max_concurrent_rollouts, 8);  // max(B, 1 instance x B)
  EXPECT_DOUBLE_EQ(d.raw_gain_s, current.t_global - candidate.t_global);
  EXPECT_DOUBLE_EQ(d.net_gain_s, d.raw_gain_s);
  EXPECT_DOUBLE_EQ(d.gain_ratio, d.raw_gain_s / current.t_global);
  EXPECT_EQ(candidate.expected_gain_s, d.net_gain_s);
  EXPECT_EQ(candidate.expected_gain_ratio, d.gain_ratio);
  EXPECT_FALSE(d.elastic_signal.has_value());

  EXPECT_EQ(planner->active_plan(), candidate);
  EXPECT_EQ(planner->last_replan_step(), 0);
  ASSERT_TRUE(planner->last_decision().has_value());
  EXPECT_EQ(*planner->last_decision(), d);
}

TEST(ReferencePlannerTest, FourGpuOptimizerCountersAndFirstWinsTies) {
  // The same search through the optimizer alone. Four training candidates (1x1x4 and 2x1x2 leave
  // no rollout GPU); 1x1x3 is explored but skipped (8 % 3); the other three reach a rollout layout.
  // 2x1x1 + [2] ties 1x1x2 + [2] on T_global (both rollout bound): the first found stays.
  const ReferenceCostModel model(DefaultModelParams());
  const std::vector<RequestInfo> requests(4, RequestInfo{128, 4096});
  ReferenceSearchOptions o = ReferenceSearchFor(FourGpuPlanner(), FourGpuRun());
  EXPECT_EQ(o.dp_batch_group_size, 4);
  EXPECT_EQ(o.global_batch, 8);
  EXPECT_EQ(o.fixed_train_gpus, 0);
  o.verbose = true;
  const ReferenceOptimization r = OptimizeReference(model, requests, o);
  ASSERT_TRUE(r.found());
  EXPECT_EQ(*r.train, (ReferenceTrainConfig{1, 1, 2, 1}));
  EXPECT_EQ(r.rollout_tp_list, (std::vector<int>{2}));
  EXPECT_EQ(r.explored, 4);
  EXPECT_EQ(r.pruned_oom, 0);
  EXPECT_EQ(r.pruned_early_stop, 0);
  ExpectNearPrinted(r.t_train, "0.165852");
  ExpectNearPrinted(r.t_rollout, "0.278821");
  EXPECT_EQ(r.t_global, r.t_rollout);

  ASSERT_EQ(r.evaluated.size(), 3u);
  EXPECT_EQ(r.evaluated[0].train, (ReferenceTrainConfig{1, 1, 1, 1}));
  EXPECT_EQ(r.evaluated[0].rollout_tp_list, (std::vector<int>{2, 1}));
  EXPECT_EQ(r.evaluated[0].t_global, r.evaluated[0].t_train);  // training bound
  EXPECT_GT(r.evaluated[0].t_global, r.t_global);
  EXPECT_EQ(r.evaluated[1].train, (ReferenceTrainConfig{1, 1, 2, 1}));
  EXPECT_EQ(r.evaluated[2].train, (ReferenceTrainConfig{2, 1, 1, 1}));
  EXPECT_EQ(r.evaluated[2].rollout_tp_list, (std::vector<int>{2}));
  EXPECT_EQ(r.evaluated[2].t_global, r.t_global);
  EXPECT_LT(r.evaluated[2].t_train, r.evaluated[2].t_global);

  // Without verbose nothing is recorded; the result is the same.
  o.verbose = false;
  ReferenceOptimization quiet = OptimizeReference(model, requests, o);
  EXPECT_TRUE(quiet.evaluated.empty());
  quiet.evaluated = r.evaluated;
  EXPECT_EQ(quiet, r);
}

TEST(ReferencePlannerTest, OptimizerPrunesOomAndEarlyStops) {
  // A GPU whose memory holds the TP2 configuration but not TP1: TP1 is pruned for OOM. With TP2
  // first and short requests (training bound), the slower TP1 configurations are pruned early.
  const std::vector<RequestInfo> requests(4, RequestInfo{128, 128});
  ReferenceSearchOptions o;
  o.n_total_gpus = 4;
  o.global_batch = 8;
  o.allowed_train_tp = {2, 1};
  o.allowed_train_pp = {1};
  o.micro_batch_sizes = {1};
  o.verbose = true;

  const ReferenceCostModel defaults(DefaultModelParams());
  const ReferenceOptimization r = OptimizeReference(defaults, requests, o);
  // Explored: (2,1,1), (1,1,1), (1,1,2), (1,1,3); (2,1,2) leaves no rollout GPU. (1,1,1) and
  // (1,1,2) train slower than (2,1,1)'s whole plan; (1,1,3) fails the batch split.
  EXPECT_EQ(r.explored, 4);
  EXPECT_EQ(r.pruned_oom, 0);
  EXPECT_EQ(r.pruned_early_stop, 2);
  ASSERT_EQ(r.evaluated.size(), 1u);
  EXPECT_EQ(r.evaluated[0].train, (ReferenceTrainConfig{2, 1, 1, 1}));
  EXPECT_EQ(r.evaluated[0].t_global, r.evaluated[0].t_train);
  EXPECT_GE(defaults.TrainIterationTime({1, 1, 2, 1}, 8, 256).seconds, r.t_global);

  const double tp1 = defaults.TrainMemory({1, 1, 1, 1}, 1, 256);
  const double tp2 = defaults.TrainMemory({2, 1, 1, 1}, 1, 256);
  ASSERT_GT(tp1, tp2);
  ReferenceParams small = DefaultModelParams();
  small.mem_capacity =
      ((tp1 + tp2) / 2 + small.memory_budget_safety_margin_bytes) / (1 - small.train_mem_frag_rate);
  const ReferenceOptimization oom = OptimizeReference(ReferenceCostModel(small), requests, o);
  // Only (1,1,1) is OOM: ZeRO-2 shards (1,1,2)'s states over its two replicas.
  EXPECT_EQ(oom.explored, 4);
  EXPECT_EQ(oom.pruned_oom, 1);
  ASSERT_TRUE(oom.found());
  EXPECT_EQ(*oom.train, (ReferenceTrainConfig{2, 1, 1, 1}));

  // Nothing fits: no candidate, infinite times ((1,1,3) is skipped for its batch first).
  small.mem_capacity = 1e9;
  const ReferenceOptimization none = OptimizeReference(ReferenceCostModel(small), requests, o);
  EXPECT_FALSE(none.found());
  EXPECT_TRUE(none.rollout_tp_list.empty());
  EXPECT_EQ(none.pruned_oom, 3);
  EXPECT_EQ(none.t_global, kInf);
}

TEST(ReferencePlannerTest, OptimizerSkipsBatchesThatDoNotSplitIntoWholeGroups) {
  // Batch 8 with groups of 4: DP1 and DP2 hold whole groups, DP3 fails the batch split and DP4
  // (2 sequences per replica) the group split. All four are explored.
  ReferenceSearchOptions o;
  o.n_total_gpus = 5;
  o.global_batch = 8;
  o.allowed_train_tp = {1};
  o.allowed_train_pp = {1};
  o.micro_batch_sizes = {1};
  o.dp_batch_group_size = 4;
  o.verbose = true;
  const ReferenceCostModel model(DefaultModelParams());
  const std::vector<RequestInfo> requests(4, RequestInfo{128, 4096});
  const ReferenceOptimization r = OptimizeReference(model, requests, o);
  EXPECT_EQ(r.explored, 4);
  std::vector<int> dps;
  for (const ReferenceEvaluatedPair& p : r.evaluated) dps.push_back(p.train.dp);
  EXPECT_EQ(dps, (std::vector<int>{1, 2}));
  o.dp_batch_group_size = 1;
  dps.clear();
  for (const ReferenceEvaluatedPair& p : OptimizeReference(model, requests, o).evaluated) {
    dps.push_back(p.train.dp);
  }
  EXPECT_EQ(dps, (std::vector<int>{1, 2, 4}));
}

TEST(ReferencePlannerTest, RolloutOnlyOptimizationTakesTheFirstSmallestMakespan) {
  // optimize_rollout_only over 4 GPUs for the §3.2 requests: [4] beats [2, 2] and [2, 1, 1].
  const ReferenceCostModel model{ReferenceParams{}};
  const std::vector<RequestInfo> requests = {{128, 512}, {128, 1024}, {256, 2048}, {256, 4096}};
  ReferenceSearchOptions o;
  o.allowed_rollout_tp = {1, 2, 4};
  ReferenceRolloutChoice choice = OptimizeReferenceRolloutOnly(model, 4, requests, o);
  EXPECT_EQ(choice.rollout_tp_list, (std::vector<int>{4}));
  ExpectNearPrinted(choice.makespan, "0.046062");
  o.require_heterogeneous_rollout_tp = true;
  choice = OptimizeReferenceRolloutOnly(model, 4, requests, o);
  EXPECT_EQ(choice.rollout_tp_list, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(OptimizeReferenceRolloutOnly(model, 0, requests, o), ReferenceRolloutChoice{});
}

TEST(ReferencePlannerTest, FortyEightGpuCrossCheck) {
  // §3.5: Qwen3-14B on the authors' a100_80g, the 48-GPU Libra run and the synthetic history:
  // 5 training sizes explored (8..40), and TP8/DP1 with [1, 1, 2, 4] x 5 beats the configured
  // 32/16 split by a quarter.
  const ReferenceCostModel model(Qwen14bOnA100());
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, FortyEightGpuPlanner());
  ASSERT_NE(planner, nullptr);
  const ReferenceDecision d = PlanOrDie(*planner, 0, FortyEightGpuRun(), SyntheticHistory());

  ASSERT_TRUE(d.optimization.has_value());
  const ReferenceOptimization& r = *d.optimization;
  EXPECT_EQ(r.explored, 5);
  EXPECT_EQ(r.pruned_oom, 0);
  ASSERT_TRUE(d.candidate_plan.has_value());
  const ReferencePlan& candidate = *d.candidate_plan;
  EXPECT_EQ(candidate.train, (ReferenceTrainConfig{8, 1, 1, 1}));
  EXPECT_EQ(candidate.train_gpus(), 8);
  std::vector<int> five_nodes;
  for (int i = 0; i < 5; ++i) five_nodes.insert(five_nodes.end(), {1, 1, 2, 4});
  EXPECT_EQ(candidate.rollout_tp_list, five_nodes);
  EXPECT_EQ(candidate.rollout_gpus(), 40);
  ExpectNearPrinted(candidate.t_train, "0.35405");
  ExpectNearPrinted(candidate.t_rollout, "3.20657");

  ASSERT_TRUE(d.current_plan.has_value());
  EXPECT_EQ(d.current_plan->train_gpus(), 32);
  EXPECT_EQ(d.current_plan->rollout_gpus(), 16);
  ExpectNearPrinted(d.current_plan->t_rollout, "4.28609");
  ExpectNearPrinted(d.gain_ratio, "0.2519");

  EXPECT_EQ(d.reason, ReferenceReason::kReconfigure);
  EXPECT_TRUE(d.should_reconfigure);
}

TEST(ReferencePlannerTest, MatchesTheAuthorsPlannerToFullPrecision) {
  // Values printed with repr() by the authors' GlobalResourcePlanner (c51bf84) run on CPU, for
  // the two §3.5 cross-checks and the forced 20-GPU plan: the same operations, the same doubles.
  const ReferenceCostModel defaults(DefaultModelParams());
  std::unique_ptr<ReferencePlanner> four = CreateOrDie(defaults, FourGpuPlanner());
  ASSERT_NE(four, nullptr);
  const std::vector<RequestInfo> long_requests(4, RequestInfo{128, 4096});
  const ReferenceDecision a = PlanOrDie(*four, 0, FourGpuRun(), long_requests);
  ASSERT_TRUE(a.current_plan.has_value() && a.candidate_plan.has_value());
  EXPECT_DOUBLE_EQ(a.current_plan->t_train, 0.165851881506816);
  EXPECT_DOUBLE_EQ(a.current_plan->t_rollout, 0.5053450066960428);
  EXPECT_DOUBLE_EQ(a.candidate_plan->t_rollout, 0.2788208901407487);
  EXPECT_DOUBLE_EQ(a.gain_ratio, 0.4482563665490908);

  const ReferenceCostModel qwen(Qwen14bOnA100());
  std::unique_ptr<ReferencePlanner> big = CreateOrDie(qwen, FortyEightGpuPlanner());
  ASSERT_NE(big, nullptr);
  const ReferenceDecision b = PlanOrDie(*big, 0, FortyEightGpuRun(), SyntheticHistory());
  ASSERT_TRUE(b.current_plan.has_value() && b.candidate_plan.has_value());
  EXPECT_DOUBLE_EQ(b.current_plan->t_train, 0.09860762961541332);
  EXPECT_DOUBLE_EQ(b.current_plan->t_rollout, 4.286090478866721);
  EXPECT_DOUBLE_EQ(b.candidate_plan->t_train, 0.3540535786133333);
  EXPECT_DOUBLE_EQ(b.candidate_plan->t_rollout, 3.20657060708042);
  EXPECT_DOUBLE_EQ(b.gain_ratio, 0.2518658617005527);
  EXPECT_EQ(b.candidate_plan->max_concurrent_rollouts, 80);  // 20 instances x batch 4

  ReferencePlannerConfig forced_config = FourGpuPlanner();
  forced_config.n_total_gpus = 20;
  forced_config.allowed_train_tp = {4};
  forced_config.allowed_rollout_tp = {4};
  forced_config.force_train_gpus = 12;
  forced_config.force_rollout_tp_list = {4, 4};
  std::unique_ptr<ReferencePlanner> forced = CreateOrDie(defaults, forced_config);
  ASSERT_NE(forced, nullptr);
  ReferenceRunConfig run = FourGpuRun();
  run.train_gpus = 8;
  run.rollout_gpus = 12;
  run.train_tp = 4;
  const std::vector<RequestInfo> short_requests(4, RequestInfo{128, 512});
  const ReferenceDecision c = PlanOrDie(*forced, 0, run, short_requests);
  ASSERT_TRUE(c.current_plan.has_value() && c.candidate_plan.has_value());
  EXPECT_DOUBLE_EQ(c.current_plan->t_train, 0.0155985120384);
  EXPECT_DOUBLE_EQ(c.current_plan->t_rollout, 0.014250596976256684);
  EXPECT_DOUBLE_EQ(c.candidate_plan->t_train, 0.009986756019199999);
  EXPECT_DOUBLE_EQ(c.candidate_plan->t_rollout, 0.004942393001069518);
  ASSERT_TRUE(c.optimization.has_value());
  EXPECT_EQ(c.optimization->explored, 4);
}

// ---- Runtime metrics and triggers (§3.6) -------------------------------------------------------

// The dispatcher and step statistics of the authors' queue-pressure test.
ReferenceDispatcherMetrics BusyDispatcher() {
  ReferenceDispatcherMetrics d;
  d.pending_inputs = 8;
  d.runner_input_queue = 8;
  d.runner_output_queue = 0;
  d.runner_max_queue_size = 16;
  d.staleness_pending_limit = 8;
  d.staleness_running = 1;
  d.staleness_capacity = 4;
  return d;
}

ReferenceStepStats Times(double train_s, double rollout_s) {
  ReferenceStepStats s;
  s.train_time_s = train_s;
  s.rollout_time_s = rollout_s;
  s.max_concurrent_rollouts = 8;
  return s;
}

TEST(ReferencePlannerTest, RuntimeMetricsExample) {
  // §3.6: (8 + 8 + 0) / (16 + 8) queued, 1 of 8 running, rollout 20 s over training 5 s.
  const ReferenceRuntimeMetrics m = ReferenceRuntimeMetricsFrom(3, BusyDispatcher(), Times(5, 20));
  EXPECT_EQ(m.step, 3);
  ExpectNearPrinted(m.queue_pressure, "0.6667");
  EXPECT_DOUBLE_EQ(m.queue_pressure, 16.0 / 24.0);
  EXPECT_EQ(m.active_rollout_pressure, 0.125);
  EXPECT_EQ(m.rollout_train_ratio(), 4.0);
  EXPECT_EQ(m.dispatcher, BusyDispatcher());
  EXPECT_EQ(m.step_stats, Times(5, 20));

  // Without a max_concurrent_rollouts above 1: running + capacity (1 + 4).
  ReferenceStepStats no_limit = Times(5, 20);
  no_limit.max_concurrent_rollouts = 1;
  EXPECT_EQ(ReferenceRuntimeMetricsFrom(3, BusyDispatcher(), no_limit).active_rollout_pressure,
            0.2);
  // Nothing reported: every pressure 0, no division by zero; training time 0 reads as 1e-6.
  const ReferenceRuntimeMetrics empty = ReferenceRuntimeMetricsFrom(0, {}, {});
  EXPECT_EQ(empty.queue_pressure, 0);
  EXPECT_EQ(empty.active_rollout_pressure, 0);
  ReferenceStepStats rollout_only;
  rollout_only.rollout_time_s = 2;
  EXPECT_DOUBLE_EQ(ReferenceRuntimeMetricsFrom(0, {}, rollout_only).rollout_train_ratio(), 2e6);
  ReferenceDispatcherMetrics counters;
  counters.staleness_accepted = 30;
  counters.staleness_rejected = 9;
  const ReferenceRuntimeMetrics counted = ReferenceRuntimeMetricsFrom(0, counters, {});
  EXPECT_EQ(counted.accepted_rollouts, 30);
  EXPECT_EQ(counted.rejected_rollouts, 9);
}

TEST(ReferencePlannerTest, TriggersInTheirOrder) {
  // Off-interval steps with metrics: the first threshold reached names the trigger.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = FourGpuPlanner();
  config.plan_interval = 100;
  config.replan_cooldown_steps = 0;
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  struct Case {
    std::string name;
    double queue, active;
    int64_t rejected;
    double train_s, rollout_s;
    ReferenceTrigger expected;
  };
  const std::vector<Case> cases = {
      {"queue at its threshold", 0.75, 0.9, 8, 1, 2, ReferenceTrigger::kQueuePressure},
      {"active at its threshold", 0.74, 0.85, 8, 1, 2, ReferenceTrigger::kActiveRolloutPressure},
      {"8 rejections", 0.74, 0.84, 8, 1, 2, ReferenceTrigger::kRejectedRolloutDelta},
      {"imbalance", 0.74, 0.84, 7, 1, 1.25, ReferenceTrigger::kRolloutTrainImbalance},
      {"balanced", 0.74, 0.84, 7, 1, 1.24, ReferenceTrigger::kIntervalSkip},
      {"no training time", 0.74, 0.84, 7, 0, 5, ReferenceTrigger::kIntervalSkip},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ReferenceRuntimeMetrics m;
    m.queue_pressure = c.queue;
    m.active_rollout_pressure = c.active;
    m.rejected_rollouts = c.rejected;
    m.train_time_s = c.train_s;
    m.rollout_time_s = c.rollout_s;
    EXPECT_EQ(planner->Trigger(7, &m), c.expected);
    // The interval comes first, whatever the metrics.
    EXPECT_EQ(planner->Trigger(200, &m), ReferenceTrigger::kInterval);
  }
  EXPECT_EQ(planner->Trigger(7, nullptr), ReferenceTrigger::kIntervalSkip);
  EXPECT_EQ(planner->Trigger(0, nullptr), ReferenceTrigger::kInterval);

  // Online replanning off: nothing fires, not even the interval.
  config.online_replanning = false;
  std::unique_ptr<ReferencePlanner> offline = CreateOrDie(model, config);
  ASSERT_NE(offline, nullptr);
  ReferenceRuntimeMetrics hot;
  hot.queue_pressure = 1;
  EXPECT_EQ(offline->Trigger(200, &hot), ReferenceTrigger::kIntervalSkip);
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 4096});
  const ReferenceDecision d = PlanOrDie(*offline, 200, FourGpuRun(), batch, &hot);
  EXPECT_EQ(d.reason, ReferenceReason::kIntervalSkip);
  EXPECT_FALSE(d.candidate_plan.has_value());
}

TEST(ReferencePlannerTest, QueuePressureTriggersBetweenIntervals) {
  // The authors' test: interval 100, queue threshold 0.5, no cooldown; the §3.6 metrics at step
  // 3 start an evaluation.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = FourGpuPlanner();
  config.allowed_rollout_tp = {1, 2};
  config.plan_interval = 100;
  config.queue_pressure_threshold = 0.5;
  config.replan_cooldown_steps = 0;
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  for (int i = 0; i < 4; ++i) {
    const std::vector<RequestInfo> one = {{128, 2048}};
    EXPECT_EQ(planner->ObserveBatch(one), 1);
  }
  const ReferenceRuntimeMetrics& m = planner->ObserveRuntime(3, BusyDispatcher(), Times(5, 20));
  EXPECT_EQ(planner->latest_runtime_metrics(), &m);
  // Without explicit metrics the latest observed ones are used.
  const ReferenceDecision d = PlanOrDie(*planner, 3, FourGpuRun());
  EXPECT_EQ(d.trigger, ReferenceTrigger::kQueuePressure);
  ASSERT_TRUE(d.runtime_metrics.has_value());
  EXPECT_EQ(d.runtime_metrics->step, 3);
  // The authors' code (run on CPU) moves the two TP1 instances into one TP2.
  ASSERT_TRUE(d.candidate_plan.has_value());
  EXPECT_EQ(d.reason, ReferenceReason::kReconfigure);
  EXPECT_EQ(d.candidate_plan->rollout_tp_list, (std::vector<int>{2}));
  EXPECT_DOUBLE_EQ(d.candidate_plan->t_rollout, 0.09695270755251337);
  ASSERT_TRUE(d.optimization.has_value());
  EXPECT_EQ(d.optimization->explored, 4);
  EXPECT_EQ(d.optimization->pruned_early_stop, 1);
}

TEST(ReferencePlannerTest, RejectedDeltaIsConsumedByTheEvaluation) {
  // The authors' test (delta threshold 1, pressures out of reach): one rejection triggers an
  // evaluation, which records it, so the same count does not trigger again at the next step;
  // eight more do (default threshold in a second planner).
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = FourGpuPlanner();
  config.allowed_rollout_tp = {1, 2};
  config.plan_interval = 100;
  config.rejected_rollout_delta_threshold = 1;
  config.replan_cooldown_steps = 0;
  config.active_rollout_pressure_threshold = 2.0;
  config.queue_pressure_threshold = 2.0;
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  const std::vector<RequestInfo> history(4, RequestInfo{128, 2048});
  planner->ObserveBatch(history);
  ReferenceDispatcherMetrics dispatcher;
  dispatcher.runner_max_queue_size = 16;
  dispatcher.staleness_pending_limit = 8;
  dispatcher.staleness_rejected = 1;
  ReferenceStepStats stats;
  stats.max_concurrent_rollouts = 8;

  const ReferenceRuntimeMetrics first = planner->ObserveRuntime(3, dispatcher, stats);
  EXPECT_EQ(PlanOrDie(*planner, 3, FourGpuRun(), {}, &first).trigger,
            ReferenceTrigger::kRejectedRolloutDelta);
  EXPECT_EQ(planner->last_rejected_rollouts(), 1);
  const ReferenceRuntimeMetrics second = planner->ObserveRuntime(4, dispatcher, stats);
  EXPECT_EQ(PlanOrDie(*planner, 4, FourGpuRun(), {}, &second).trigger,
            ReferenceTrigger::kIntervalSkip);

  config.rejected_rollout_delta_threshold = 8;
  std::unique_ptr<ReferencePlanner> defaults = CreateOrDie(model, config);
  ASSERT_NE(defaults, nullptr);
  defaults->ObserveBatch(history);
  ReferenceRuntimeMetrics m;
  m.rejected_rollouts = 8;
  EXPECT_EQ(PlanOrDie(*defaults, 3, FourGpuRun(), {}, &m).trigger,
            ReferenceTrigger::kRejectedRolloutDelta);
  m.rejected_rollouts = 15;
  EXPECT_EQ(defaults->Trigger(4, &m), ReferenceTrigger::kIntervalSkip);
  m.rejected_rollouts = 16;
  EXPECT_EQ(defaults->Trigger(4, &m), ReferenceTrigger::kRejectedRolloutDelta);
}

TEST(ReferencePlannerTest, WarmupCooldownAndInsufficientHistoryDecideNothing) {
  // Warmup (default 1 step) comes first; with too little history the planner waits; after a
  // change, the cooldown holds the next look back; the active plan is carried in those decisions.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = FourGpuPlanner();
  config.warmup_steps = 1;
  config.replan_cooldown_steps = 2;
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  const std::vector<RequestInfo> three(3, RequestInfo{128, 4096});

  ReferenceDecision d = PlanOrDie(*planner, 0, FourGpuRun(), three);
  EXPECT_EQ(d.reason, ReferenceReason::kWarmup);
  EXPECT_EQ(d.trigger, ReferenceTrigger::kWarmup);
  EXPECT_FALSE(d.should_reconfigure);
  EXPECT_FALSE(d.current_plan.has_value());
  EXPECT_EQ(d.num_requests, 3);

  d = PlanOrDie(*planner, 1, FourGpuRun());
  EXPECT_EQ(d.reason, ReferenceReason::kInsufficientHistory);
  EXPECT_EQ(d.trigger, ReferenceTrigger::kInterval);
  EXPECT_FALSE(d.current_plan.has_value());
  EXPECT_FALSE(planner->active_plan().has_value());

  const std::vector<RequestInfo> one = {{128, 4096}};
  d = PlanOrDie(*planner, 2, FourGpuRun(), one);
  EXPECT_EQ(d.reason, ReferenceReason::kReconfigure);
  EXPECT_EQ(planner->last_replan_step(), 2);
  ASSERT_TRUE(planner->active_plan().has_value());
  const ReferencePlan active = *planner->active_plan();

  for (int64_t step : {2, 3}) {
    d = PlanOrDie(*planner, step, FourGpuRun());
    EXPECT_EQ(d.reason, ReferenceReason::kCooldown);
    EXPECT_EQ(d.trigger, ReferenceTrigger::kCooldown);
    EXPECT_EQ(d.current_plan, active);
    EXPECT_FALSE(d.candidate_plan.has_value());
  }
  EXPECT_EQ(PlanOrDie(*planner, 4, FourGpuRun()).trigger, ReferenceTrigger::kInterval);
  EXPECT_EQ(planner->last_decision()->step, 4);
}

TEST(ReferencePlannerTest, KeepingThePlanMakesTheCurrentPlanActive) {
  // A run already in the best layout: same plan, nothing changes, and the configuration's plan
  // becomes the active one. No feasible candidate (every training layout OOM) keeps it.
  const ReferenceCostModel model(DefaultModelParams());
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, FourGpuPlanner());
  ASSERT_NE(planner, nullptr);
  ReferenceRunConfig run = FourGpuRun();
  run.rollout_tp_list = {2};
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 4096});
  const ReferenceDecision d = PlanOrDie(*planner, 0, run, batch);
  EXPECT_EQ(d.reason, ReferenceReason::kSamePlan);
  EXPECT_FALSE(d.should_reconfigure);
  EXPECT_EQ(d.raw_gain_s, 0);
  EXPECT_EQ(planner->active_plan(), d.current_plan);
  EXPECT_EQ(planner->last_replan_step(), -1000000000);

  ReferenceParams tiny = DefaultModelParams();
  tiny.mem_capacity = 1e9;
  const ReferenceCostModel small(tiny);
  std::unique_ptr<ReferencePlanner> starved = CreateOrDie(small, FourGpuPlanner());
  ASSERT_NE(starved, nullptr);
  const ReferenceDecision none = PlanOrDie(*starved, 0, run, batch);
  EXPECT_EQ(none.reason, ReferenceReason::kNoFeasibleCandidate);
  EXPECT_FALSE(none.should_reconfigure);
  ASSERT_TRUE(none.current_plan.has_value());
  // Reference behaviour: the plan in force is timed even though it does not fit in memory.
  EXPECT_GT(none.current_plan->t_train, 0);
  EXPECT_LT(none.current_plan->t_train, kInf);
  ASSERT_TRUE(none.optimization.has_value());
  EXPECT_FALSE(none.optimization->found());
  EXPECT_FALSE(none.candidate_plan.has_value());
  EXPECT_FALSE(starved->active_plan().has_value());
}

TEST(ReferencePlannerTest, HistoryDropsEmptyRequestsClampsLengthsAndKeepsTheNewest) {
  // Both lengths <= 0: dropped; each length raised to at least 1; FIFO of max_history_size.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = FourGpuPlanner();
  config.max_history_size = 3;
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  const std::vector<RequestInfo> batch = {{0, 0}, {-5, 0}, {0, 7}, {9, -2}};
  EXPECT_EQ(planner->ObserveBatch(batch), 2);
  EXPECT_EQ(planner->history(), (std::vector<RequestInfo>{{1, 7}, {9, 1}}));
  const std::vector<RequestInfo> more = {{10, 10}, {11, 11}};
  EXPECT_EQ(planner->ObserveBatch(more), 2);
  EXPECT_EQ(planner->history(), (std::vector<RequestInfo>{{9, 1}, {10, 10}, {11, 11}}));
  const std::vector<RequestInfo> fresh = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {0, 0}};
  EXPECT_EQ(planner->ReplaceHistory(fresh), 3);
  EXPECT_EQ(planner->history(), (std::vector<RequestInfo>{{2, 2}, {3, 3}, {4, 4}}));
  // Runtime metrics are bounded the same way.
  for (int step = 0; step < 5; ++step) planner->ObserveRuntime(step, {}, {});
  EXPECT_EQ(planner->latest_runtime_metrics()->step, 4);
}

// ---- The transition-cost check (§3.6) ----------------------------------------------------------

TEST(ReferencePlannerTest, TransitionNeedsAPositiveNetGainAndTheMinimumRatio) {
  // Defaults: 15 s per change, 5% of the current T_global.
  ReferencePlannerConfig config;
  const ReferencePlan current = PlanOf({8, 1, 4, 1}, {1, 1, 2, 4}, 100);
  struct Case {
    std::string name;
    double candidate_s;
    ReferenceReason reason;
  };
  const std::vector<Case> cases = {
      {"gain 20 s, ratio 0.2", 80, ReferenceReason::kReconfigure},
      {"net gain 0 is not a gain", 85, ReferenceReason::kGainBelowThreshold},
      {"net gain negative", 90, ReferenceReason::kGainBelowThreshold},
      {"slower", 120, ReferenceReason::kGainBelowThreshold},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ReferencePlan candidate = PlanOf({8, 1, 1, 1}, {1, 1, 2, 4}, c.candidate_s);
    const ReferenceTransition t =
        EvaluateReferenceTransition(config, current, candidate, false, false);
    EXPECT_EQ(t.raw_gain_s, 100 - c.candidate_s);
    EXPECT_EQ(t.net_gain_s, 100 - c.candidate_s - 15);
    EXPECT_DOUBLE_EQ(t.gain_ratio, (100 - c.candidate_s) / 100);
    EXPECT_FALSE(t.same_plan);
    EXPECT_EQ(t.reason, c.reason);
    EXPECT_EQ(t.should_reconfigure, c.reason == ReferenceReason::kReconfigure);
    EXPECT_EQ(t.resource_change, t.should_reconfigure);
  }

  // No cost: a ratio below min_gain_ratio is refused, one at it passes.
  config.reconfiguration_cost_s = 0;
  const ReferencePlan small_current = PlanOf({8, 1, 4, 1}, {1, 1, 2, 4}, 1.0);
  EXPECT_EQ(EvaluateReferenceTransition(config, small_current, PlanOf({8, 1, 1, 1}, {4, 4}, 0.96),
                                        false, false)
                .reason,
            ReferenceReason::kGainBelowThreshold);
  EXPECT_EQ(EvaluateReferenceTransition(config, small_current, PlanOf({8, 1, 1, 1}, {4, 4}, 0.95),
                                        false, false)
                .reason,
            ReferenceReason::kReconfigure);
}

TEST(ReferencePlannerTest, TransitionComparesRolloutMultisetsAndReasonPriority) {
  // Same plan = same tp, pp, dp, cp, micro-batch and sorted rollout TPs (zero level ignored);
  // reasons: elastic > forced > forced runtime > reconfigure > same plan > gain below threshold.
  ReferencePlannerConfig config;
  config.reconfiguration_cost_s = 0;
  const ReferencePlan current = PlanOf({8, 1, 4, 1}, {1, 2, 4, 1}, 100);
  ReferencePlan reordered = PlanOf({8, 1, 4, 1, /*zero_level=*/1}, {4, 2, 1, 1}, 50);
  EXPECT_TRUE(SameReferencePlan(current, reordered));
  ReferenceTransition t = EvaluateReferenceTransition(config, current, reordered, false, false);
  EXPECT_EQ(t.reason, ReferenceReason::kSamePlan);
  EXPECT_FALSE(t.should_reconfigure);
  EXPECT_EQ(t.raw_gain_s, 50);

  for (ReferenceTrainConfig other :
       {ReferenceTrainConfig{4, 1, 4, 1}, ReferenceTrainConfig{8, 2, 4, 1},
        ReferenceTrainConfig{8, 1, 2, 1}, ReferenceTrainConfig{8, 1, 4, 2},
        ReferenceTrainConfig{8, 1, 4, 1, 2, 2}}) {
    EXPECT_FALSE(SameReferencePlan(current, PlanOf(other, {1, 2, 4, 1}, 100)));
  }
  EXPECT_FALSE(SameReferencePlan(current, PlanOf({8, 1, 4, 1}, {1, 2, 4}, 100)));

  // Forcing the runtime reconfigure changes even to the same plan, whatever the gain.
  config.force_runtime_reconfigure = true;
  const ReferencePlan slower_same = PlanOf({8, 1, 4, 1}, {4, 2, 1, 1}, 200);
  t = EvaluateReferenceTransition(config, current, slower_same, false, false);
  EXPECT_TRUE(t.should_reconfigure);
  EXPECT_EQ(t.reason, ReferenceReason::kForcedRuntimeReconfigure);
  // A forced candidate wins over it; the elastic adjustment over everything.
  const ReferencePlan slower_other = PlanOf({8, 1, 2, 1}, {4, 4, 4, 4}, 200);
  EXPECT_EQ(EvaluateReferenceTransition(config, current, slower_other, true, false).reason,
            ReferenceReason::kForcedReconfigure);
  EXPECT_EQ(EvaluateReferenceTransition(config, current, slower_other, true, true).reason,
            ReferenceReason::kElasticHybridAdjustment);

  // Without the runtime force: a forced candidate is taken at any gain unless it is the same plan.
  config.force_runtime_reconfigure = false;
  t = EvaluateReferenceTransition(config, current, slower_other, true, false);
  EXPECT_TRUE(t.should_reconfigure);
  EXPECT_EQ(t.reason, ReferenceReason::kForcedReconfigure);
  t = EvaluateReferenceTransition(config, current, slower_same, true, false);
  EXPECT_FALSE(t.should_reconfigure);
  EXPECT_EQ(t.reason, ReferenceReason::kSamePlan);
  // The elastic signal alone changes something: should, with no resource change.
  t = EvaluateReferenceTransition(config, current, slower_same, false, true);
  EXPECT_TRUE(t.should_reconfigure);
  EXPECT_FALSE(t.resource_change);
  EXPECT_EQ(t.reason, ReferenceReason::kElasticHybridAdjustment);
}

TEST(ReferencePlannerTest, InfiniteCurrentPlanRefusesEveryCandidate) {
  // Reference behaviour: inf - finite is an infinite gain, inf / inf a NaN ratio, which fails
  // the ratio test: the planner stays on an infeasible plan.
  ReferencePlannerConfig config;
  const ReferencePlan current = PlanOf({8, 1, 4, 1}, {1, 1}, kInf);
  const ReferenceTransition t =
      EvaluateReferenceTransition(config, current, PlanOf({8, 1, 1, 1}, {4, 4}, 5), false, false);
  EXPECT_EQ(t.raw_gain_s, kInf);
  EXPECT_TRUE(std::isnan(t.gain_ratio));
  EXPECT_FALSE(t.should_reconfigure);
  EXPECT_EQ(t.reason, ReferenceReason::kGainBelowThreshold);
}

// ---- Forced overrides (GRP_FORCE_*) ------------------------------------------------------------

// The authors' cluster-swap test: 20 GPUs, training TP4 x DP2 on 8, 12 rollout GPUs.
ReferenceRunConfig TwentyGpuRun() {
  ReferenceRunConfig run = FourGpuRun();
  run.train_gpus = 8;
  run.rollout_gpus = 12;
  run.train_tp = 4;
  run.train_dp = 2;
  return run;
}

ReferencePlannerConfig TwentyGpuPlanner() {
  ReferencePlannerConfig config = FourGpuPlanner();
  config.n_total_gpus = 20;
  config.fixed_train_gpus = 8;  // ignored: the strategy is "grp"
  config.allowed_train_tp = {4};
  config.allowed_rollout_tp = {4};
  return config;
}

TEST(ReferencePlannerTest, ForcedTrainGpusAndRolloutListReplaceTheCandidate) {
  // force_train_gpus 12 and force_rollout_tp_list [4, 4]: a forced change to TP4 x DP3 + [4, 4],
  // timed by the model, with the run's max_concurrent_rollouts.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = TwentyGpuPlanner();
  config.force_train_gpus = 12;
  config.force_rollout_tp_list = {4, 4};
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 512});
  const ReferenceDecision d = PlanOrDie(*planner, 0, TwentyGpuRun(), batch);
  EXPECT_TRUE(d.should_reconfigure);
  EXPECT_EQ(d.reason, ReferenceReason::kForcedReconfigure);
  ASSERT_TRUE(d.candidate_plan.has_value());
  const ReferencePlan& forced = *d.candidate_plan;
  EXPECT_EQ(forced.train_gpus(), 12);
  EXPECT_EQ(forced.train, (ReferenceTrainConfig{4, 1, 3, 1}));
  EXPECT_EQ(forced.rollout_tp_list, (std::vector<int>{4, 4}));
  EXPECT_EQ(forced.source, ReferencePlanSource::kForcedTrainAndRollout);
  EXPECT_EQ(forced.t_train, model.TrainIterationTime({4, 1, 3, 1}, 8, 640).seconds);
  const std::vector<int> fours = {4, 4};
  EXPECT_EQ(forced.t_rollout, model.EvaluateRollout(fours, batch).makespan);
  EXPECT_EQ(forced.t_global, std::max(forced.t_train, forced.t_rollout));
  EXPECT_EQ(forced.max_concurrent_rollouts, 64);
  EXPECT_EQ(planner->active_plan(), forced);
}

TEST(ReferencePlannerTest, ForcedRolloutListAloneKeepsTheCurrentTraining) {
  // Only the rollout list: the current training and its time; it must fill the run's rollout
  // GPUs. Only the training GPUs: the current rollout layout and its time.
  const ReferenceCostModel model(DefaultModelParams());
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 512});
  ReferencePlannerConfig config = TwentyGpuPlanner();
  config.force_rollout_tp_list = {4, 4, 4};
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  ReferenceDecision d = PlanOrDie(*planner, 0, TwentyGpuRun(), batch);
  ASSERT_TRUE(d.candidate_plan.has_value());
  EXPECT_EQ(d.candidate_plan->source, ReferencePlanSource::kForcedRolloutTp);
  EXPECT_EQ(d.candidate_plan->train, d.current_plan->train);
  EXPECT_EQ(d.candidate_plan->t_train, d.current_plan->t_train);
  EXPECT_EQ(d.reason, ReferenceReason::kForcedReconfigure);

  config.force_rollout_tp_list.clear();
  config.force_train_gpus = 4;
  planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  d = PlanOrDie(*planner, 0, TwentyGpuRun(), batch);
  ASSERT_TRUE(d.candidate_plan.has_value());
  EXPECT_EQ(d.candidate_plan->source, ReferencePlanSource::kForcedTrainGpus);
  EXPECT_EQ(d.candidate_plan->train, (ReferenceTrainConfig{4, 1, 1, 1}));
  EXPECT_EQ(d.candidate_plan->rollout_tp_list, d.current_plan->rollout_tp_list);
  EXPECT_EQ(d.candidate_plan->t_rollout, d.current_plan->t_rollout);
  EXPECT_EQ(d.reason, ReferenceReason::kForcedReconfigure);

  // Forcing what is already in force is the same plan.
  config.force_train_gpus = 8;
  planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  d = PlanOrDie(*planner, 0, TwentyGpuRun(), batch);
  EXPECT_EQ(d.reason, ReferenceReason::kSamePlan);
  EXPECT_FALSE(d.should_reconfigure);
}

TEST(ReferencePlannerTest, ForcedOverridesThatDoNotFitAreErrors) {
  // A list that does not fill the rollout GPUs, training GPUs not a multiple of TP x PP x CP or
  // beyond the cluster: kInvalidArgument at planning time; non-positive values at creation.
  const ReferenceCostModel model(DefaultModelParams());
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 512});
  struct Case {
    std::string name;
    std::vector<int> tps;
    std::optional<int> train_gpus;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"list short of rollout_gpus", {4, 4}, std::nullopt, "must sum to rollout_gpus=12"},
      {"list short of the forced split", {4, 4}, 8, "must sum to rollout_gpus=12"},
      {"not whole replicas", {}, 6, "divisible by train TP*PP*CP=4"},
      {"beyond the cluster", {}, 12, "must fit n_total_gpus=20"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ReferencePlannerConfig config = TwentyGpuPlanner();
    config.force_rollout_tp_list = c.tps;
    config.force_train_gpus = c.train_gpus;
    std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
    ASSERT_NE(planner, nullptr);
    const Result<ReferenceDecision> d = planner->PlanIfNeeded(0, TwentyGpuRun(), batch);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(c.message), std::string::npos) << d.status().message();
    EXPECT_FALSE(planner->last_decision().has_value());
    EXPECT_EQ(planner->history().size(), 4u);
  }
  ReferencePlannerConfig config = TwentyGpuPlanner();
  config.force_train_gpus = 0;
  EXPECT_EQ(ReferencePlanner::Create(model, config).status().code(), StatusCode::kInvalidArgument);
  config.force_train_gpus.reset();
  config.force_rollout_tp_list = {4, 0, 4};
  EXPECT_EQ(ReferencePlanner::Create(model, config).status().code(), StatusCode::kInvalidArgument);
}

// ---- The elastic-hybrid signal (§3.7) ----------------------------------------------------------

// The authors' elastic tests: the 4-GPU run, rollout TP {1, 2}, training fixed at the run's.
ReferencePlannerConfig ElasticPlanner() {
  ReferencePlannerConfig config = FourGpuPlanner();
  config.allowed_rollout_tp = {1, 2};
  config.fixed_train_gpus = 2;
  config.elastic_hybrid_planning_enabled = true;
  return config;
}

ReferenceDecision ElasticDecision(const ReferenceCostModel& model, ReferencePlannerConfig config,
                                  const ReferenceRunConfig& run, const ReferenceStepStats& stats) {
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  if (planner == nullptr) return {};
  planner->ObserveBatch(std::vector<RequestInfo>(4, RequestInfo{128, 512}));
  ReferenceDispatcherMetrics dispatcher;
  dispatcher.runner_max_queue_size = 16;
  const ReferenceRuntimeMetrics metrics = planner->ObserveRuntime(1, dispatcher, stats);
  return PlanOrDie(*planner, 1, run, {}, &metrics);
}

TEST(ReferencePlannerTest, ElasticJoinWhenTrainingIsTheBottleneck) {
  // §3.7: training 20 s against rollout 5 s, no hybrids, replicas of 1 GPU: borrow all of the 2
  // rollout GPUs, "join", and the decision is an elastic adjustment.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = ElasticPlanner();
  config.initial_allocation_strategy = ReferenceInitialAllocation::kConfigured;
  const ReferenceDecision d = ElasticDecision(model, config, FourGpuRun(), Times(20, 5));
  EXPECT_TRUE(d.should_reconfigure);
  EXPECT_EQ(d.reason, ReferenceReason::kElasticHybridAdjustment);
  ASSERT_TRUE(d.elastic_signal.has_value());
  const ReferenceElasticSignal& s = *d.elastic_signal;
  EXPECT_EQ(s.action, ReferenceElasticAction::kJoin);
  EXPECT_EQ(s.reason, ReferenceElasticReason::kTrainingBottleneck);
  EXPECT_EQ(s.desired_replicas, 2);
  EXPECT_EQ(s.capacity_replicas, 2);
  EXPECT_EQ(s.current_replicas, 0);
  EXPECT_EQ(s.replica_size_gpus, 1);
  EXPECT_EQ(s.train_rollout_ratio, 4.0);
  EXPECT_EQ(s.rollout_pressure, 0.0);
  EXPECT_EQ(s.step, 1);
  EXPECT_EQ(s.ttl_steps, 20);
  EXPECT_EQ(s.expires_step(), 21);
  EXPECT_TRUE(s.should_adjust());
  ASSERT_TRUE(d.candidate_plan.has_value());
  // fixed_train_gpus honoured: TP2 x DP1 + [2] (the authors' code picks the same).
  EXPECT_EQ(d.candidate_plan->train, (ReferenceTrainConfig{2, 1, 1, 1}));
  EXPECT_EQ(d.candidate_plan->rollout_tp_list, (std::vector<int>{2}));
}

TEST(ReferencePlannerTest, ElasticCapacityCountsCompleteReplicas) {
  // §3.7: 8 training GPUs (TP4) and 24 rollout GPUs, replicas of 4, 4 rollout GPUs kept: capacity
  // (24 - 4) / 4 = 5, all wanted.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config = ElasticPlanner();
  config.n_total_gpus = 32;
  config.initial_allocation_strategy = ReferenceInitialAllocation::kConfigured;
  config.fixed_train_gpus = 8;
  config.allowed_train_tp = {4};
  config.elastic_hybrid_replica_size_gpus = 4;
  config.elastic_hybrid_min_rollout_gpus = 4;
  ReferenceRunConfig run = FourGpuRun();
  run.train_gpus = 8;
  run.rollout_gpus = 24;
  run.train_tp = 4;
  run.train_dp = 2;
  const ReferenceDecision d = ElasticDecision(model, config, run, Times(20, 5));
  ASSERT_TRUE(d.elastic_signal.has_value());
  EXPECT_EQ(d.elastic_signal->replica_size_gpus, 4);
  EXPECT_EQ(d.elastic_signal->capacity_replicas, 5);
  EXPECT_EQ(d.elastic_signal->desired_replicas, 5);

  // A replica size other than TP x PP x CP is an error.
  config.elastic_hybrid_replica_size_gpus = 8;
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  const std::vector<RequestInfo> batch(4, RequestInfo{128, 512});
  const Result<ReferenceDecision> wrong = planner->PlanIfNeeded(1, run, batch);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("one complete DP replica (4); got 8"), std::string::npos);
}

TEST(ReferencePlannerTest, ElasticReleaseWhenRolloutIsTheBottleneck) {
  // §3.7: training 2 s against rollout 20 s with one active hybrid: release it.
  const ReferenceCostModel model(DefaultModelParams());
  ReferenceStepStats stats = Times(2, 20);
  stats.active_hybrid_replicas = 1;
  const ReferenceDecision d = ElasticDecision(model, ElasticPlanner(), FourGpuRun(), stats);
  EXPECT_TRUE(d.should_reconfigure);
  ASSERT_TRUE(d.elastic_signal.has_value());
  EXPECT_EQ(d.elastic_signal->action, ReferenceElasticAction::kRelease);
  EXPECT_EQ(d.elastic_signal->reason, ReferenceElasticReason::kRolloutBottleneck);
  EXPECT_EQ(d.elastic_signal->desired_replicas, 0);
  EXPECT_EQ(d.elastic_signal->current_replicas, 1);
}

TEST(ReferencePlannerTest, ElasticReleaseCancelsAJoiningReplica) {
  // §3.7: one replica joining and one join pending (the larger, 1, is taken): one replica is
  // counted as allocated, and the release cancels it.
  const ReferenceCostModel model(DefaultModelParams());
  ReferenceStepStats stats = Times(2, 20);
  stats.joining_hybrid_replicas = 1;
  stats.pending_hybrid_replica_joins = 1;
  const ReferenceDecision d = ElasticDecision(model, ElasticPlanner(), FourGpuRun(), stats);
  EXPECT_TRUE(d.should_reconfigure);
  ASSERT_TRUE(d.elastic_signal.has_value());
  EXPECT_EQ(d.elastic_signal->current_replicas, 1);
  EXPECT_EQ(d.elastic_signal->joining_replicas, 1);
  EXPECT_EQ(d.elastic_signal->active_replicas, 0);
  EXPECT_EQ(d.elastic_signal->action, ReferenceElasticAction::kRelease);
}

TEST(ReferencePlannerTest, ElasticSignalRules) {
  // The remaining rules, in order, on the pure function.
  ReferencePlannerConfig config;
  config.elastic_hybrid_planning_enabled = true;
  ReferenceRunConfig run;  // 4 + 4 GPUs, training TP1
  const ReferencePlan current = PlanOf({1, 1, 4, 1}, {1, 1, 1, 1}, 10);
  ReferencePlan candidate = PlanOf({1, 1, 4, 1}, {1, 1, 1, 1}, 10);
  candidate.t_train = 12;  // model ratio 12 / 10 = 1.2: borrow

  auto signal = [&](const ReferenceRuntimeMetrics* m) {
    Result<std::optional<ReferenceElasticSignal>> s =
        BuildReferenceElasticSignal(config, 7, run, current, candidate, m);
    EXPECT_OK(s);
    return s.ok() && s->has_value() ? **s : ReferenceElasticSignal{};
  };
  // Without metrics the candidate's model times decide.
  ReferenceElasticSignal s = signal(nullptr);
  EXPECT_EQ(s.reason, ReferenceElasticReason::kTrainingBottleneck);
  EXPECT_DOUBLE_EQ(s.train_rollout_ratio, 1.2);
  EXPECT_EQ(s.desired_replicas, 4);
  EXPECT_EQ(s.rollout_pressure, 0);
  // A candidate time of 0 falls back to the current plan's (Python's `or`).
  candidate.t_train = 0;
  EXPECT_DOUBLE_EQ(signal(nullptr).train_rollout_ratio, 0.1 / 10);
  candidate.t_train = 12;

  ReferenceRuntimeMetrics m;
  m.train_time_s = 10;
  m.rollout_time_s = 10;  // ratio 1: between release and borrow
  m.step_stats.active_hybrid_replicas = 3;
  s = signal(&m);
  EXPECT_EQ(s.reason, ReferenceElasticReason::kHysteresisHold);
  EXPECT_EQ(s.action, ReferenceElasticAction::kHold);
  EXPECT_EQ(s.desired_replicas, 3);
  EXPECT_FALSE(s.should_adjust());

  m.active_rollout_pressure = 0.8;
  s = signal(&m);
  EXPECT_EQ(s.reason, ReferenceElasticReason::kProtectRolloutCapacity);
  EXPECT_EQ(s.action, ReferenceElasticAction::kRelease);
  EXPECT_EQ(s.rollout_pressure, 0.8);
  m.active_rollout_pressure = 0;

  candidate.train.dp = 7;  // 7 training GPUs against the run's 4: three more replicas wanted
  s = signal(&m);
  EXPECT_EQ(s.reason, ReferenceElasticReason::kCandidateRequestsMoreTrainingCapacity);
  EXPECT_EQ(s.desired_replicas, 3);
  candidate.train.dp = 20;
  EXPECT_EQ(signal(&m).desired_replicas, 4);  // capped by the capacity

  config.elastic_hybrid_min_rollout_gpus = 4;
  s = signal(&m);
  EXPECT_EQ(s.reason, ReferenceElasticReason::kNoCompleteReplicaCapacity);
  EXPECT_EQ(s.capacity_replicas, 0);
  EXPECT_EQ(s.desired_replicas, 0);

  config.elastic_hybrid_planning_enabled = false;
  Result<std::optional<ReferenceElasticSignal>> off =
      BuildReferenceElasticSignal(config, 7, run, current, candidate, &m);
  ASSERT_OK(off);
  EXPECT_FALSE(off->has_value());
}

TEST(ReferencePlannerTest, ReleaseRatioAboveBorrowRatioIsACreationError) {
  // The constructor refuses a release ratio above the borrow ratio (after negative values are
  // raised to 0); equal ratios are allowed; the other knobs are raised to their minimums.
  const ReferenceCostModel model(DefaultModelParams());
  ReferencePlannerConfig config;
  config.elastic_hybrid_release_train_rollout_ratio = 1.2;
  const Result<std::unique_ptr<ReferencePlanner>> made = ReferencePlanner::Create(model, config);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("release ratio cannot exceed borrow ratio"),
            std::string::npos);

  config.elastic_hybrid_release_train_rollout_ratio = 1.15;
  EXPECT_OK(ReferencePlanner::Create(model, config));
  config.elastic_hybrid_borrow_train_rollout_ratio = -1;
  config.elastic_hybrid_release_train_rollout_ratio = -2;
  config.plan_interval = 0;
  config.min_history_size = 0;
  config.elastic_hybrid_signal_ttl_steps = 0;
  config.allowed_rollout_tp.clear();
  std::unique_ptr<ReferencePlanner> planner = CreateOrDie(model, config);
  ASSERT_NE(planner, nullptr);
  EXPECT_EQ(planner->config().elastic_hybrid_borrow_train_rollout_ratio, 0);
  EXPECT_EQ(planner->config().plan_interval, 1);
  EXPECT_EQ(planner->config().min_history_size, 1);
  EXPECT_EQ(planner->config().elastic_hybrid_signal_ttl_steps, 1);
  EXPECT_EQ(planner->config().allowed_rollout_tp, (std::vector<int>{1, 2, 4, 8}));

  config = ReferencePlannerConfig{};
  config.allowed_train_pp = {1, 0};
  EXPECT_EQ(ReferencePlanner::Create(model, config).status().code(), StatusCode::kInvalidArgument);
}

TEST(ReferencePlannerTest, NamesAreTheReferenceStrings) {
  // The enums print as the reference's wire strings.
  EXPECT_EQ(NameOf(ReferenceTrigger::kRejectedRolloutDelta), "rejected_rollout_delta");
  EXPECT_EQ(NameOf(ReferenceReason::kGainBelowThreshold), "gain_below_threshold");
  EXPECT_EQ(NameOf(ReferenceReason::kElasticHybridAdjustment), "elastic_hybrid_adjustment");
  EXPECT_EQ(NameOf(ReferenceElasticAction::kRelease), "release");
  EXPECT_EQ(NameOf(ReferenceElasticReason::kCandidateRequestsMoreTrainingCapacity),
            "candidate_requests_more_training_capacity");
  EXPECT_EQ(NameOf(ReferencePlanSource::kForcedTrainAndRollout),
            "forced_runtime_train_and_rollout");
  ReferencePlan plan = PlanOf({8, 1, 1, 1}, {1, 1, 2, 4}, 3.5);
  EXPECT_EQ(plan.ToString().substr(0, 58),
            "train tp8 pp1 cp1 dp1 mb1 (8 GPUs) + rollout [1,1,2,4] (8 ");
}

}  // namespace
}  // namespace libra::planner
