#include "planner/rollout_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/rng.h"
#include "model/catalog.h"
#include "model/cost_model.h"

namespace libra::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Iterations take a + b * sequences seconds; prefill `prefill_per_token` a token; the KV cache
/// holds `kv` tokens.
class AffineCost : public model::CostModel {
 public:
  AffineCost() {
    gpu_.name = "affine";
    arch_.name = "affine";
    arch_.layers = 1;
  }
  std::string_view Name() const override { return "affine"; }
  const model::GpuSpec& gpu() const override { return gpu_; }
  const model::ModelArch& arch() const override { return arch_; }
  int64_t KvCapacityTokens(int) const override { return kv; }
  double IterationTime(int, const model::IterationLoad& load) const override {
    return a + b * static_cast<double>(load.decode_sequences);
  }
  double PrefillTime(int, int64_t tokens, int64_t) const override {
    return prefill_per_token * static_cast<double>(tokens);
  }
  double DecodeGpuSecondsLowerBound(int64_t, int64_t) const override { return 0; }
  double PrefillGpuSecondsLowerBound() const override { return 0; }
  double TrainGpuSecondsLowerBound(int64_t, const model::TrainPasses&) const override { return 0; }
  model::TrainEstimate TrainStep(const model::TrainLayout&, const model::TrainPasses&,
                                 std::span<const int64_t>) const override {
    return {};
  }
  double WeightSyncTime(const model::SyncRequest&) const override { return 0; }
  double RoleSwitchTime(const model::SwitchRequest&) const override { return 0; }

  double a = 0.01;
  double b = 0.001;
  double prefill_per_token = 0;
  int64_t kv = 1000000000;

 private:
  model::GpuSpec gpu_;
  model::ModelArch arch_;
};

RolloutLoad LoadOf(const model::CostModel& cost, const std::vector<TrajectorySize>& requests,
                   double weight) {
  RolloutLoad load;
  for (const TrajectorySize& r : requests) load.Add(CostOf(cost, 1, r), weight);
  return load;
}

TEST(RolloutModelTest, ToolLatenciesAnswerQuantileQuestions) {
  const std::vector<double> values = {4, 1, 2, 3, -1, std::nan("")};
  const ToolLatencies t(values);  // 1, 2, 3, 4
  EXPECT_DOUBLE_EQ(t.Mean(), 2.5);
  EXPECT_DOUBLE_EQ(t.MeanCappedAt(2.5), (1 + 2 + 2.5 + 2.5) / 4);
  EXPECT_DOUBLE_EQ(t.MeanCappedAt(10), 2.5);
  EXPECT_DOUBLE_EQ(t.FractionWithin(2), 0.5);
  EXPECT_DOUBLE_EQ(t.FractionWithin(0.5), 0);
  for (double age : {0.5, 1.0, 1.7, 3.2, 3.9}) {
    EXPECT_NEAR(t.AgeForCappedMean(t.MeanCappedAt(age)), age, 1e-12) << age;
  }
  EXPECT_TRUE(ToolLatencies().empty());
}

TEST(RolloutModelTest, AToolLatencyWindowIsItsLatestLatenciesSorted) {
  // Batches of any size (more than the window included, with repeats and values ToolLatencies
  // ignores) merged in and out give what sorting the window's latest latencies gives, bit for bit.
  constexpr size_t kCapacity = 50;
  ToolLatencyWindow window(kCapacity);
  EXPECT_EQ(window.Sorted(), nullptr);
  std::vector<double> all;
  Rng rng(3);
  for (int batch = 0; batch < 40; ++batch) {
    std::vector<double> latencies(
        static_cast<size_t>(rng.UniformInt(0, batch % 7 == 0 ? 120 : 20)));
    for (double& l : latencies) {
      const int64_t kind = rng.UniformInt(0, 9);
      l = kind == 0   ? -1.0
          : kind == 1 ? std::nan("")
                      : static_cast<double>(rng.UniformInt(0, 30)) / 4;
    }
    window.Add(latencies);
    all.insert(all.end(), latencies.begin(), latencies.end());
    if (all.empty()) continue;
    const std::vector<double> latest(
        all.end() - static_cast<std::ptrdiff_t>(std::min(kCapacity, all.size())), all.end());
    const ToolLatencies want(latest);
    const std::shared_ptr<const ToolLatencies> got = window.Sorted();
    ASSERT_NE(got, nullptr) << "batch " << batch;
    EXPECT_EQ(got->sorted(), want.sorted()) << "batch " << batch;
    EXPECT_EQ(got->Mean(), want.Mean()) << "batch " << batch;
    EXPECT_EQ(window.Sorted(), got);  // unchanged until the next batch
  }
  window.Clear();
  EXPECT_EQ(window.Sorted(), nullptr);
}

TEST(RolloutModelTest, OneTrajectoryAloneTakesItsDecodeAndItsTools) {
  // One trajectory: 1,000 tokens at tau(1) = a + b, plus 5 s of tools, synchronous.
  AffineCost cost;
  TrajectorySize r{0, 1000, 0};
  r.turns = 3;
  r.tool_s = 5;
  InstanceSetting s;
  const InstanceEstimate e = EstimateInstance(cost, s, LoadOf(cost, {r}, 1));
  EXPECT_NEAR(e.period_s, 1000 * (cost.a + cost.b) + 5, 1e-6);
  EXPECT_STREQ(e.bound, "latency");
  // With staleness 1 a batch spans two periods, and what the trainer takes counts too.
  s.staleness = 1;
  EXPECT_NEAR(EstimateInstance(cost, s, LoadOf(cost, {r}, 1)).period_s,
              (1000 * (cost.a + cost.b) + 5) / 2, 1e-6);
  s.outside_s = 3;
  EXPECT_NEAR(EstimateInstance(cost, s, LoadOf(cost, {r}, 1)).period_s,
              (1000 * (cost.a + cost.b) + 5 + 3) / 2, 1e-6);
}

TEST(RolloutModelTest, ABatchOfEqualTrajectoriesIsItsSharedDecode) {
  // n equal trajectories launched together decode as one batch: g * tau(n) (the secant of an
  // affine tau is exact).
  AffineCost cost;
  const std::vector<TrajectorySize> requests(1, TrajectorySize{0, 500, 0});
  InstanceSetting s;
  const InstanceEstimate e = EstimateInstance(cost, s, LoadOf(cost, requests, 40));
  EXPECT_NEAR(e.period_s, 500 * (cost.a + 40 * cost.b), 1e-6);
  EXPECT_NEAR(e.decode_set, 40, 1e-6);
  // Beyond max_num_seqs the engine saturates: throughput sets the pace.
  s.max_num_seqs = 10;
  const InstanceEstimate capped = EstimateInstance(cost, s, LoadOf(cost, requests, 40));
  EXPECT_NEAR(capped.period_s, 40 * 500 * (cost.a + 10 * cost.b) / 10, 1e-6);
  EXPECT_STREQ(capped.bound, "throughput");
}

TEST(RolloutModelTest, ABatchPrefillsItsPromptsThenDecodesTogether) {
  // Ten equal trajectories launched together: ten 1 s prefills one after another, then 1,000
  // tokens decoded together at tau(10). Whichever is the slowest waits for the others' prefill
  // as it waits for their decode: its own prefill is stretched as its decode is, and the work
  // beside it leaves its own prefill out.
  AffineCost cost;
  cost.prefill_per_token = 1e-4;
  const std::vector<TrajectorySize> requests(1, TrajectorySize{10000, 1000, 0});
  const InstanceEstimate e = EstimateInstance(cost, InstanceSetting{}, LoadOf(cost, requests, 10));
  EXPECT_NEAR(e.period_s, 10 * 1.0 + 1000 * (cost.a + 10 * cost.b), 1e-6);
  EXPECT_STREQ(e.bound, "latency");
  // An instance whose share of the mix is half a trajectory holds the slowest alone.
  const InstanceEstimate alone =
      EstimateInstance(cost, InstanceSetting{}, LoadOf(cost, requests, 10).Share(0.05));
  EXPECT_NEAR(alone.period_s, 1.0 + 1000 * (cost.a + cost.b), 1e-6);
}

TEST(RolloutModelTest, MoreWorkNeverTakesLess) {
  AffineCost cost;
  cost.prefill_per_token = 1e-5;
  InstanceSetting s;
  s.staleness = 2;
  std::vector<TrajectorySize> requests;
  double last = 0;
  for (int i = 1; i <= 12; ++i) {
    TrajectorySize r{500, 300 * i, 100};
    r.turns = 1 + i % 4;
    r.tool_s = 0.5 * i;
    requests.push_back(r);
    for (double weight : {1.0, 4.0}) {
      const double p = EstimateInstance(cost, s, LoadOf(cost, requests, weight)).period_s;
      EXPECT_GE(p, weight == 1 ? last : 0);
      if (weight == 1) last = p;
    }
    EXPECT_GE(EstimateInstance(cost, s, LoadOf(cost, requests, 4)).period_s,
              EstimateInstance(cost, s, LoadOf(cost, requests, 1)).period_s);
  }
}

/// 64 trajectories of 2,000 prompt, 2,000 generated and 2,000 tool tokens over ten turns, 90 s
/// of tools each (calls of 1-40 s), prefilling at 0.1 ms a token, with staleness 1.
struct ToolBoundWork {
  ToolBoundWork() {
    cost.prefill_per_token = 1e-4;
    TrajectorySize r{2000, 2000, 2000};
    r.turns = 10;
    r.tool_s = 90;
    load = LoadOf(cost, {r}, 64);
    setting.staleness = 1;
    setting.tools = &tools;
  }
  ToolBoundWork(const ToolBoundWork&) = delete;  // setting points at tools

  AffineCost cost;
  ToolLatencies tools{std::vector<double>{1, 2, 5, 10, 20, 30, 40}};
  RolloutLoad load;
  InstanceSetting setting;
};

TEST(RolloutModelTest, EvictedContextsArePrefilledAgain) {
  // Trajectories whose contexts wait for slow tools: with room for every context there is no
  // miss; with a small cache the hit rate falls and the re-prefill costs time; with the contexts
  // freed at every call every call misses.
  ToolBoundWork work;
  AffineCost& cost = work.cost;
  InstanceSetting& s = work.setting;
  const RolloutLoad& load = work.load;
  const InstanceEstimate ample = EstimateInstance(cost, s, load);
  EXPECT_DOUBLE_EQ(ample.hit_rate, 1);
  cost.kv = 60000;  // 15 of the 64 contexts
  const InstanceEstimate short_cache = EstimateInstance(cost, s, load);
  EXPECT_LT(short_cache.hit_rate, 1);
  EXPECT_GT(short_cache.period_s, ample.period_s);
  s.kv_policy = KvPolicy::kFree;
  const InstanceEstimate freed = EstimateInstance(cost, s, load);
  EXPECT_DOUBLE_EQ(freed.hit_rate, 0);
  EXPECT_GE(freed.period_s, short_cache.period_s);
}

TEST(RolloutModelTest, ALoadBalancingRouterReturnsATurnToItsInstanceBySpreadAndPace) {
  constexpr ReturnPlacement kLeast = ReturnPlacement::kLeastLoaded;
  EXPECT_DOUBLE_EQ(ReturnAffinity(kLeast, 1, 100, 10), 1);  // one instance: always
  // A tool call that returns before another turn is placed: the immediate return's share.
  EXPECT_DOUBLE_EQ(ReturnAffinity(kLeast, 3, 10, 0), std::pow(3.0, -kReturnStay));
  EXPECT_NEAR(ReturnAffinity(kLeast, 3, 10, 0), 0.735, 0.001);
  EXPECT_NEAR(ReturnAffinity(kLeast, 24, 10, 0), 0.411, 0.001);
  // Many turns placed while it runs: any instance, 1 in K.
  EXPECT_NEAR(ReturnAffinity(kLeast, 3, 50, 1), 1.0 / 3, 1e-12);
  EXPECT_NEAR(ReturnAffinity(kLeast, 24, 50, 1), 1.0 / 24, 1e-12);
  // In between, and falling as the calls take longer or more turns are placed meanwhile.
  double before = ReturnAffinity(kLeast, 6, 10, 0);
  for (double tool_s : {0.01, 0.05, 0.1, 0.5}) {
    const double share = ReturnAffinity(kLeast, 6, 10, tool_s);
    EXPECT_LT(share, before) << tool_s;
    EXPECT_GT(share, 1.0 / 6) << tool_s;
    before = share;
  }
  EXPECT_LT(ReturnAffinity(kLeast, 6, 20, 0.05), ReturnAffinity(kLeast, 6, 10, 0.05));
  // A router that keeps them: always; one that rotates: 1 in K, however fast the call.
  EXPECT_DOUBLE_EQ(ReturnAffinity(ReturnPlacement::kKept, 24, 10, 0), 1);
  for (double tool_s : {0.0, 0.05, 5.0}) {
    EXPECT_DOUBLE_EQ(ReturnAffinity(ReturnPlacement::kRotated, 6, 10, tool_s), 1.0 / 6);
  }
  EXPECT_DOUBLE_EQ(ReturnAffinity(ReturnPlacement::kRotated, 1, 10, 0), 1);
}

TEST(RolloutModelTest, TurnsABalancingRouterMovesArePrefilledAgain) {
  // The same tool-bound work with room for every context: kept on their instance, no returning
  // turn prefills; placed by load or in rotation over K instances, those that land elsewhere do,
  // more of them the more instances there are, and more in rotation than by load.
  ToolBoundWork work;
  AffineCost& cost = work.cost;
  InstanceSetting& s = work.setting;
  const RolloutLoad& load = work.load;
  const InstanceEstimate kept = EstimateInstance(cost, s, load);
  EXPECT_DOUBLE_EQ(kept.hit_rate, 1);
  for (ReturnPlacement returns : {ReturnPlacement::kLeastLoaded, ReturnPlacement::kRotated}) {
    s.returns = returns;
    s.instances = 1;  // one instance: nowhere else to go
    EXPECT_DOUBLE_EQ(EstimateInstance(cost, s, load).period_s, kept.period_s);
    double before = kept.period_s;
    for (int instances : {2, 4, 16}) {
      s.instances = instances;
      const InstanceEstimate spread = EstimateInstance(cost, s, load);
      EXPECT_LT(spread.hit_rate, 1) << instances;
      EXPECT_GT(spread.period_s, before) << instances;
      before = spread.period_s;
    }
  }
  s.instances = 4;
  const double rotated = EstimateInstance(cost, s, load).period_s;
  s.returns = ReturnPlacement::kLeastLoaded;
  EXPECT_GE(rotated, EstimateInstance(cost, s, load).period_s);
  // A single-turn load has no returning turn to move.
  RolloutLoad single = LoadOf(cost, {TrajectorySize{100, 400, 0}}, 8);
  s.instances = 16;
  const double spread_single = EstimateInstance(cost, s, single).period_s;
  s.returns = ReturnPlacement::kKept;
  EXPECT_DOUBLE_EQ(spread_single, EstimateInstance(cost, s, single).period_s);
}

TEST(RolloutModelTest, APacedInstanceReportsTheCacheItsContextsFill) {
  // A trainer far slower than rollout paces the batches: the instance reports the share of its
  // cache that the contexts in flight at that pace fill, and is credited with its unsaturated
  // equilibrium only while that share is within kPacedHeadroom.
  ToolBoundWork work;
  AffineCost& cost = work.cost;
  InstanceSetting& s = work.setting;
  const RolloutLoad& load = work.load;
  s.outside_s = 1000;
  EXPECT_EQ(EstimateInstance(cost, s, load).paced_occupancy, 0);  // not paced: not asked
  s.paced_batches = 1;
  const InstanceEstimate ample = EstimateInstance(cost, s, load);
  EXPECT_GT(ample.paced_occupancy, 0);
  EXPECT_LT(ample.paced_occupancy, kPacedHeadroom);
  EXPECT_DOUBLE_EQ(ample.hit_rate, 1);
  // A cache small enough that the same contexts would fill 80% of it (more, as fewer survive).
  cost.kv = static_cast<int64_t>(ample.paced_occupancy * 1e9 / 0.8);
  const InstanceEstimate crowded = EstimateInstance(cost, s, load);
  EXPECT_GE(crowded.paced_occupancy, 0.8 - 1e-9);
  EXPECT_GT(crowded.period_s, ample.period_s);  // not credited: the saturated equilibrium
}

TEST(RolloutModelTest, ATrajectoryLargerThanTheCacheDoesNotFit) {
  AffineCost cost;
  cost.kv = 1000;
  InstanceSetting s;
  EXPECT_EQ(EstimateInstance(cost, s, LoadOf(cost, {TrajectorySize{500, 501, 0}}, 1)).period_s,
            kInf);
  EXPECT_EQ(EstimateInstance(cost, s, RolloutLoad()).period_s, 0);
}

TEST(RolloutModelTest, SharesAndMergesAreAdditive) {
  AffineCost cost;
  const RolloutLoad a = LoadOf(cost, {TrajectorySize{100, 1000, 10}}, 2);
  const RolloutLoad b = LoadOf(cost, {TrajectorySize{200, 3000, 0}}, 1);
  const RolloutLoad both = RolloutLoad::Merge(a, b);
  EXPECT_DOUBLE_EQ(both.trajectories, 3);
  EXPECT_DOUBLE_EQ(both.decode, 5000);
  EXPECT_DOUBLE_EQ(both.slowest[0].decode, 3000);
  const RolloutLoad half = both.Share(0.5);
  EXPECT_DOUBLE_EQ(half.decode, 2500);
  EXPECT_DOUBLE_EQ(half.slowest[0].decode, 3000);  // any share may get the slowest
}

TEST(RolloutModelTest, TheSlowestHoldsItsShareOfOthers) {
  // A run of the sample is what its instance holds: beside the 3,000-token trajectory, the
  // other 1,000 tokens. A quarter of a mix of 12 trajectories (18,000 tokens) holds 3: the
  // slowest beside 2 others of the mix's mean, (18,000 - 3,000) / 11 tokens, not beside its
  // 4,500 tokens less the slowest's 3,000. An instance with one trajectory or less holds it alone.
  AffineCost cost;
  const RolloutLoad run = LoadOf(cost, {TrajectorySize{0, 1000, 0}, TrajectorySize{0, 3000, 0}}, 1);
  EXPECT_DOUBLE_EQ(run.Others(run.decode, 3000), 1000);
  const RolloutLoad mix = LoadOf(cost,
                                 {TrajectorySize{0, 500, 0}, TrajectorySize{0, 1000, 0},
                                  TrajectorySize{0, 1500, 0}, TrajectorySize{0, 3000, 0}},
                                 3);  // 12 trajectories, 18,000 tokens
  EXPECT_DOUBLE_EQ(mix.Others(mix.decode, 3000), 15000);
  const RolloutLoad quarter = mix.Share(0.25);
  EXPECT_DOUBLE_EQ(quarter.decode, 4500);
  EXPECT_DOUBLE_EQ(quarter.Others(quarter.decode, 3000), 2 * 15000.0 / 11);
  EXPECT_GT(quarter.Others(quarter.decode, 3000), quarter.decode - 3000);
  const RolloutLoad one = mix.Share(1.0 / 12);
  EXPECT_DOUBLE_EQ(one.Others(one.decode, 3000), 0);
  const RolloutLoad halved = mix.Share(0.5).Share(0.5);
  EXPECT_DOUBLE_EQ(halved.Others(halved.decode, 3000), quarter.Others(quarter.decode, 3000));
}

TEST(RolloutModelTest, CatalogModelPeriodsAreFiniteAndFallWithTp) {
  // Qwen3-14B on A800: a long-tailed batch is faster per step on TP 8 than on TP 1.
  const model::CostModelContext context{model::FindGpu("A800-80G").value(),
                                        model::FindModel("Qwen3-14B").value(), 8};
  auto cost = model::BuiltinCostModels().Create("roofline", context, {}).value();
  std::vector<TrajectorySize> requests;
  for (int i = 0; i < 16; ++i) requests.push_back({1500, 500 + 1500 * i, 400});
  InstanceSetting s;
  s.staleness = 2;
  double last = kInf;
  for (int tp : {1, 2, 4, 8}) {
    s.tp = tp;
    RolloutLoad load;
    for (const TrajectorySize& r : requests) load.Add(CostOf(*cost, tp, r), 2);
    const double p = EstimateInstance(*cost, s, load).period_s;
    EXPECT_GT(p, 0);
    EXPECT_LT(p, last) << tp;
    last = p;
  }
}

TEST(RolloutModelTest, ThePeriodFloorNeverExceedsTheEstimate) {
  // The search skips estimating a run whose floor already loses (search.cc), so the floor must
  // hold for every load and setting: random batches on Qwen3-14B, with ample and short caches,
  // contexts kept or freed at tool calls, staleness, a trainer outside rollout and its pace.
  const model::CostModelContext context{model::FindGpu("A800-80G").value(),
                                        model::FindModel("Qwen3-14B").value(), 8};
  auto cost = model::BuiltinCostModels().Create("roofline", context, {}).value();
  ToolLatencies tools{std::vector<double>{0.5, 2, 5, 10, 30, 60}};
  Rng rng(7);
  int equal = 0;
  int below = 0;
  for (int round = 0; round < 400; ++round) {
    InstanceSetting s;
    s.tp = 1 << rng.UniformInt(0, 3);
    s.max_num_seqs = round % 3 == 0 ? 16 : 256;
    s.staleness = static_cast<int>(rng.UniformInt(0, 2));
    s.outside_s = round % 4 == 0 ? 0 : rng.Uniform() * 300;
    s.paced_batches = round % 5 == 0 ? 1.5 : 0;
    s.kv_policy = round % 7 == 0 ? KvPolicy::kFree : KvPolicy::kCache;
    s.tools = round % 2 == 0 ? &tools : nullptr;
    RolloutLoad load;
    const int64_t requests = rng.UniformInt(1, 40);
    for (int64_t r = 0; r < requests; ++r) {
      TrajectorySize size{rng.UniformInt(100, 4000), rng.UniformInt(0, 30000),
                          rng.UniformInt(0, 20000)};
      size.turns = static_cast<int>(rng.UniformInt(1, 12));
      size.tool_s = size.turns > 1 ? rng.Uniform() * 200 : 0;
      load.Add(CostOf(*cost, s.tp, size), round % 3 == 1 ? 8 : 1);
    }
    const double floor = PeriodFloor(*cost, s, load);
    const double period = EstimateInstance(*cost, s, load).period_s;
    ASSERT_LE(floor, period) << "round " << round;
    ++(floor == period ? equal : below);
  }
  // Both kinds occur: a throughput-bound instance with every context cached is at its floor.
  EXPECT_GT(equal, 0);
  EXPECT_GT(below, 0);
  EXPECT_EQ(PeriodFloor(*cost, InstanceSetting(), RolloutLoad()), 0);
}

}  // namespace
}  // namespace libra::planner
