#include "planner/heddle_planner.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "model/partition.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

/// A decode iteration of a TP-t instance costs 10 ms / t + 1 ms per sequence: TP cuts the
/// per-token latency of a small batch, but not the per-sequence work, so many small instances
/// give more throughput. KV never runs out; a role switch takes 30 s.
class FakeCost : public model::CostModel {
 public:
  std::string_view Name() const override { return "fake"; }
  const model::GpuSpec& gpu() const override { return gpu_; }
  const model::ModelArch& arch() const override { return arch_; }
  int64_t KvCapacityTokens(int) const override { return int64_t{1} << 40; }
  double IterationTime(int tp, const model::IterationLoad& load) const override {
    return 0.010 / tp + 0.001 * static_cast<double>(load.decode_sequences);
  }
  double PrefillTime(int, int64_t, int64_t) const override { return 0; }
  model::TrainEstimate TrainStep(const model::TrainLayout&, const model::TrainPasses&,
                                 std::span<const int64_t>) const override {
    model::TrainEstimate e;
    e.step_s = 1;
    e.memory_bytes = 1;
    e.memory_limit_bytes = 2;
    return e;
  }
  double DecodeGpuSecondsLowerBound(int64_t, int64_t) const override { return 0; }
  double PrefillGpuSecondsLowerBound() const override { return 0; }
  double TrainGpuSecondsLowerBound(int64_t, const model::TrainPasses&) const override { return 0; }
  double WeightSyncTime(const model::SyncRequest&) const override { return 0; }
  double RoleSwitchTime(const model::SwitchRequest&) const override { return 30; }

 private:
  model::GpuSpec gpu_;
  model::ModelArch arch_;
};

recipe::OptionTable Options(const std::vector<std::pair<std::string, int64_t>>& ints) {
  recipe::OptionTable table;
  table.path = "system.planner_options";
  table.where = "r.toml:9:1";
  for (const auto& [key, value] : ints) {
    recipe::OptionValue v;
    v.kind = recipe::OptionValue::Kind::kInt;
    v.int_value = value;
    v.where = "r.toml:10:1";
    table.entries.push_back({key, v});
  }
  return table;
}

/// Three nodes of 8 (16 rollout GPUs with train_gpus 8), a batch that copies the history.
PlanContext Context(const model::CostModel& cost, const std::vector<int64_t>& generated) {
  PlanContext c;
  c.nodes = 3;
  c.gpus_per_node = 8;
  c.cost = &cost;
  c.steps = 20;
  c.batch_trajectories = static_cast<int>(generated.size());
  for (int64_t g : generated) c.history.push_back(TrajectorySize{0, g, 0});
  return c;
}

std::vector<int64_t> Lengths(std::vector<std::pair<int, int64_t>> runs) {
  std::vector<int64_t> out;
  for (auto [count, length] : runs) out.insert(out.end(), static_cast<size_t>(count), length);
  return out;
}

std::vector<int> Tps(const backend::Layout& layout) {
  std::vector<int> tps;
  for (const backend::InstanceSpec& i : layout.instances) tps.push_back(i.tp);
  return tps;
}

TEST(HeddlePlannerTest, ALongTailGetsTp8AndUniformWorkGetsTp1) {
  // 16 rollout GPUs, exact DP (no aggregation). One 100,000-token trajectory among 255 of 1,000:
  // alone on a TP8 instance it takes (10/8 + 1) ms x 100,000 = 225 s, and no mix without a TP8
  // can beat a TP4's 350 s; the short ones fit under that on the other 8 GPUs. 256 trajectories
  // of 1,000 tokens: sixteen TP1 instances of 16 take (10 + 16) ms x 1,000 = 26 s, the only mix
  // that fast.
  const FakeCost cost;
  {
    HeddlePlanner planner({.train_gpus = 8, .max_units = 1024});
    auto plan = planner.Initial(Context(cost, Lengths({{1, 100000}, {255, 1000}})));
    ASSERT_OK(plan);
    EXPECT_EQ(plan->layout.train_gpus, 8);
    const std::vector<int> tps = Tps(plan->layout);
    EXPECT_EQ(tps.front(), 8);
    int gpus = 0;
    for (int tp : tps) gpus += tp;
    EXPECT_EQ(gpus, 16);
    const std::vector<double> lengths = planner.Profile();
    EXPECT_NEAR(planner.Makespan(tps, lengths, planner.ProfileContext()), 225, 1e-9);
    for (const TpMix& mix : planner.RankMixes(16, lengths, planner.ProfileContext(), 100).best) {
      EXPECT_GE(mix.makespan_s, 225 - 1e-9);
      if (mix.tps.front() < 8) {
        EXPECT_GE(mix.makespan_s, 350 - 1e-9);
      }
    }
    EXPECT_NE(plan->reason.find("predicted rollout makespan 225.0 s for 256 trajectories"),
              std::string::npos)
        << plan->reason;
  }
  {
    HeddlePlanner planner({.train_gpus = 8, .max_units = 1024});
    auto plan = planner.Initial(Context(cost, Lengths({{256, 1000}})));
    ASSERT_OK(plan);
    EXPECT_EQ(Tps(plan->layout), std::vector<int>(16, 1));
    const std::vector<TpMix> mixes =
        planner.RankMixes(16, planner.Profile(), planner.ProfileContext(), 2).best;
    ASSERT_GE(mixes.size(), 2u);
    EXPECT_NEAR(mixes[0].makespan_s, 26, 1e-9);
    EXPECT_GT(mixes[1].makespan_s, 26 + 1e-6);
  }
}

TEST(HeddlePlannerTest, EveryMixFillsTheRolloutGpusAndPacks) {
  // 16 GPUs of TP 1/2/4/8: each mix once (35: the ways to write 16 with parts 1, 2, 4, 8), none
  // crossing a node; limited degrees limit the mixes.
  const FakeCost cost;
  HeddlePlanner planner({.train_gpus = 8});
  ASSERT_OK(planner.Initial(Context(cost, Lengths({{64, 2000}}))));
  const MixRanking ranking = planner.RankMixes(16, planner.Profile(), 1000, 100);
  EXPECT_EQ(ranking.count, 35u);
  const std::vector<TpMix>& mixes = ranking.best;
  EXPECT_EQ(mixes.size(), 35u);
  for (const TpMix& mix : mixes) {
    int gpus = 0;
    for (int tp : mix.tps) gpus += tp;
    EXPECT_EQ(gpus, 16);
    EXPECT_OK(PackSizes(8, mix.tps));
  }
  HeddlePlanner tp_limited({.train_gpus = 8, .tp_degrees = {2, 4}});
  ASSERT_OK(tp_limited.Initial(Context(cost, Lengths({{64, 2000}}))));
  for (const TpMix& mix : tp_limited.RankMixes(16, tp_limited.Profile(), 1000, 100).best) {
    for (int tp : mix.tps) EXPECT_TRUE(tp == 2 || tp == 4);
  }
  // max_tp (the tuning knob) caps the degrees: max_tp 2 leaves the 9 mixes of 1s and 2s.
  HeddlePlanner capped({.train_gpus = 8, .max_tp = 2});
  ASSERT_OK(capped.Initial(Context(cost, Lengths({{64, 2000}}))));
  const std::vector<TpMix> small = capped.RankMixes(16, capped.Profile(), 1000, 100).best;
  EXPECT_EQ(small.size(), 9u);
  for (const TpMix& mix : small) EXPECT_LE(mix.tps.front(), 2);
}

TEST(HeddlePlannerTest, TheRankingIsThatOfScoringEveryMixWithEveryInstance) {
  // RankMixes scores each distinct mix once, with the instances of one TP beyond the DP's units
  // left out, and packs by a rule when the degrees allow: the same ranking, count and makespans
  // as packing and partitioning every mix over all of its instances (the plain way, here), with
  // few units so that the cap bites, on whole nodes and with a partial last node.
  const FakeCost cost;
  for (const int max_units : {2, 3, 5, 16}) {
    for (const int gpus : {20, 36, 40}) {
      HeddlePlanner planner({.train_gpus = 8, .max_units = max_units});
      ASSERT_OK(planner.Initial(Context(cost, Lengths({{3, 9000}, {9, 3000}, {40, 700}}))));
      const std::vector<double> lengths = planner.Profile();
      const model::GroupStepModel steps(cost, 1000, 256);
      std::vector<TpMix> all;
      std::vector<int> tps;
      std::function<void(size_t, int)> enumerate = [&](size_t d, int left) {
        static const int kDegrees[] = {8, 4, 2, 1};
        if (left == 0) {
          if (!PackSizes(8, tps).ok()) return;
          const double m =
              model::PresortedPartition(
                  lengths, tps.size(),
                  [&](size_t j, int64_t count) { return steps.StepSeconds(tps[j], count); },
                  max_units)
                  .makespan;
          all.push_back(TpMix{tps, m});
          return;
        }
        if (d == 4) return;
        for (int count = left / kDegrees[d]; count >= 0; --count) {
          const size_t before = tps.size();
          tps.insert(tps.end(), static_cast<size_t>(count), kDegrees[d]);
          enumerate(d + 1, left - count * kDegrees[d]);
          tps.resize(before);
        }
      };
      enumerate(0, gpus);
      std::stable_sort(all.begin(), all.end(),
                       [](const TpMix& a, const TpMix& b) { return a.makespan_s < b.makespan_s; });
      for (const size_t keep : {size_t{3}, all.size()}) {
        const MixRanking ranking = planner.RankMixes(gpus, lengths, 1000, keep);
        SCOPED_TRACE(StrFormat("max_units %d, %d GPUs, keep %zu", max_units, gpus, keep));
        EXPECT_EQ(ranking.count, all.size());
        ASSERT_EQ(ranking.best.size(), std::min(keep, all.size()));
        for (size_t i = 0; i < ranking.best.size(); ++i) {
          EXPECT_EQ(ranking.best[i].tps, all[i].tps) << i;
          EXPECT_EQ(ranking.best[i].makespan_s, all[i].makespan_s) << i;  // exactly
        }
      }
    }
  }
}

TEST(HeddlePlannerTest, RetunesWhenTheLengthsChangeAndTheGainPays) {
  // Planned for uniform short work (sixteen TP1), the run then sees a long tail: at the re-tune
  // step the planner moves to a mix with a TP8 through the pool; a re-tune on the same lengths
  // keeps it; with one step left the gain does not pay for the 30 s switch.
  const FakeCost cost;
  HeddlePlanner planner({.train_gpus = 8, .retune_steps = 2, .history = 256, .max_units = 1024});
  auto plan = planner.Initial(Context(cost, Lengths({{256, 1000}})));
  ASSERT_OK(plan);
  StepObservation o;
  o.layout = plan->layout;
  o.step = 0;
  EXPECT_FALSE(planner.OnStep(o));  // not a re-tune step
  o.step = 1;
  for (int64_t g : Lengths({{1, 100000}, {255, 1000}})) o.trajectories.push_back({0, g, 0});
  std::optional<PlanDecision> d = planner.OnStep(o);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->trigger, "retune");
  ASSERT_TRUE(d->layout) << d->reason;
  EXPECT_EQ(d->layout->train_gpus, 8);
  EXPECT_EQ(d->layout->train, plan->layout.train);
  EXPECT_EQ(Tps(*d->layout).front(), 8);
  EXPECT_EQ(*d->transition_s, 30);
  EXPECT_GT(*d->gain_s, 0);

  o.layout = *d->layout;
  o.step = 3;
  o.trajectories.clear();
  d = planner.OnStep(o);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->layout);
  EXPECT_NE(d->reason.find("is the best mix"), std::string::npos) << d->reason;

  HeddlePlanner late({.train_gpus = 8, .retune_steps = 1, .history = 256, .max_units = 1024});
  PlanContext short_run = Context(cost, Lengths({{256, 1000}}));
  short_run.steps = 2;
  auto late_plan = late.Initial(short_run);
  ASSERT_OK(late_plan);
  StepObservation last;
  last.layout = late_plan->layout;
  last.step = 1;  // no step left after it
  for (int64_t g : Lengths({{1, 100000}, {255, 1000}})) last.trajectories.push_back({0, g, 0});
  d = late.OnStep(last);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->layout);
  EXPECT_NE(d->reason.find("kept:"), std::string::npos) << d->reason;
}

TEST(HeddlePlannerTest, DefaultSplitAndBadOptions) {
  // Without train_gpus half the cluster trains (whole nodes); unknown keys and bad values fail.
  const FakeCost cost;
  auto planner = HeddlePlanner::Create(Options({}));
  ASSERT_OK(planner);
  PlanContext c = Context(cost, Lengths({{64, 2000}}));
  c.nodes = 4;
  auto plan = (*planner)->Initial(c);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->layout.train_gpus, 16);
  EXPECT_EQ(plan->layout.rollout_gpus(), 16);

  auto bad = HeddlePlanner::Create(Options({{"train_gpus", 0}, {"retune", 3}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train_gpus"), std::string::npos);
  EXPECT_NE(bad.status().message().find("retune: unknown option"), std::string::npos);

  auto below = HeddlePlanner::Create(Options({{"max_tp", 0}}));
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.status().message().find("max_tp"), std::string::npos);

  auto all = HeddlePlanner::Create(Options({{"train_gpus", 24}}));
  ASSERT_OK(all);
  auto none = (*all)->Initial(Context(cost, Lengths({{64, 2000}})));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("leaves no GPU for rollout"), std::string::npos);
}

}  // namespace
}  // namespace libra::planner
