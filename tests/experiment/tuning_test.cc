#include "experiment/tuning.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::experiment {
namespace {

constexpr const char* kRecipe = R"(name = "t"
seed = 5
steps = 4

[cluster]
nodes = 6
gpus_per_node = 8

[model]
name = "Qwen3-0.6B"

[rl]
prompts_per_step = 2
group_size = 2
staleness = 2

[system]
preset = "libra"

[[baselines]]
preset = "areal-async"

[[baselines]]
preset = "verl-sync"

[[baselines]]
preset = "sortedrl"

[[baselines]]
preset = "verl-dynamic"

[[baselines]]
preset = "heddle"
)";

recipe::Recipe Parse(const std::vector<std::string>& sets = {}) {
  auto parsed = recipe::ParseRecipe(kRecipe, "t.toml", sets);
  EXPECT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty()) << parsed->diagnostics.front().ToString();
  return parsed->recipe;
}

const recipe::SystemSpec& System(const recipe::Recipe& r, const std::string& name) {
  if (r.system.name == name) return r.system;
  for (const recipe::SystemSpec& b : r.baselines) {
    if (b.name == name) return b;
  }
  ADD_FAILURE() << "no system " << name;
  return r.system;
}

std::map<std::string, std::vector<double>> Values(const KnobSpace& space) {
  std::map<std::string, std::vector<double>> out;
  for (const Knob& k : space.knobs) {
    for (const recipe::OptionValue& v : k.values) {
      out[k.name].push_back(v.kind == recipe::OptionValue::Kind::kInt
                                ? static_cast<double>(v.int_value)
                                : v.double_value);
    }
  }
  return out;
}

TEST(TuningTest, EachPeerDeclaresTheKnobsOfItsRealSystem) {
  // The split and rollout TP for the disaggregated peers, staleness where AReaL lets users set
  // it (up to the recipe's bound), SortedRL's and verl-dynamic's thresholds; Libra has none.
  const recipe::Recipe r = Parse();
  auto libra = KnobsFor(r, System(r, "libra"));
  ASSERT_OK(libra);
  EXPECT_TRUE(libra->empty());
  auto areal = KnobsFor(r, System(r, "areal-async"));
  ASSERT_OK(areal);
  EXPECT_EQ(Values(*areal),
            (std::map<std::string, std::vector<double>>{{"train_gpus", {8, 16, 24, 32, 40}},
                                                        {"rollout_tp", {1, 2, 4, 8}},
                                                        {"staleness", {1, 2}}}));
  EXPECT_EQ(areal->size(), 40u);
  auto sync = KnobsFor(r, System(r, "verl-sync"));
  ASSERT_OK(sync);
  EXPECT_EQ(Values(*sync),
            (std::map<std::string, std::vector<double>>{{"rollout_tp", {1, 2, 4, 8}}}));
  auto sorted = KnobsFor(r, System(r, "sortedrl"));
  ASSERT_OK(sorted);
  EXPECT_EQ(Values(*sorted).count("max_active"), 1u);
  EXPECT_EQ(Values(*sorted).count("long_factor"), 1u);
  auto dynamic = KnobsFor(r, System(r, "verl-dynamic"));
  ASSERT_OK(dynamic);
  EXPECT_EQ(Values(*dynamic)["reclaim_at"], (std::vector<double>{1.0, 0.9, 0.75, 0.5}));
  // Heddle's resource manager picks its TP mix itself: the user sets the pool and the largest
  // MP degree it may use (the paper's Fix-1 .. Fix-8 range); its staleness is the recipe's.
  auto heddle = KnobsFor(r, System(r, "heddle"));
  ASSERT_OK(heddle);
  EXPECT_EQ(Values(*heddle), (std::map<std::string, std::vector<double>>{
                                 {"train_gpus", {8, 16, 24, 32, 40}}, {"max_tp", {1, 2, 4, 8}}}));
  const recipe::SystemSpec fix1 =
      ApplyConfiguration(System(r, "heddle"), heddle->At(0));  // train_gpus 8, max_tp 1
  ASSERT_NE(fix1.planner_options.Find("max_tp"), nullptr);
  EXPECT_EQ(fix1.planner_options.Find("max_tp")->int_value, 1);
}

TEST(TuningTest, SmallClustersSplitByHalfNodes) {
  // Below four nodes whole-node splits leave too few choices: half nodes.
  const recipe::Recipe r = Parse({"cluster.nodes=2"});
  auto space = KnobsFor(r, System(r, "areal-async"));
  ASSERT_OK(space);
  EXPECT_EQ(Values(*space)["train_gpus"], (std::vector<double>{4, 8, 12}));
}

TEST(TuningTest, TuneTableNarrowsTheRanges) {
  // A [.tune] table replaces a knob's default values; enabled = false turns tuning off.
  const recipe::Recipe r =
      Parse({"baselines[0].tune.train_gpus=[16, 24]", "baselines[0].tune.staleness=[2]",
             "baselines[1].tune.enabled=false"});
  auto areal = KnobsFor(r, System(r, "areal-async"));
  ASSERT_OK(areal);
  EXPECT_EQ(Values(*areal)["train_gpus"], (std::vector<double>{16, 24}));
  EXPECT_EQ(Values(*areal)["staleness"], (std::vector<double>{2}));
  auto sync = KnobsFor(r, System(r, "verl-sync"));
  ASSERT_OK(sync);
  EXPECT_TRUE(sync->empty());
}

TEST(TuningTest, BadTuneTablesNameTheKeyAndWhy) {
  // Ranges that cannot fit the cluster, unknown knobs, wrong types and Libra's own systems are
  // errors at the [.tune] entry.
  struct Case {
    std::string set;
    std::string system;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"baselines[0].tune.train_gpus=[16, 64]", "areal-async",
       "--set baselines[0].tune.train_gpus=[16, 64]: baselines[0].tune.train_gpus: 64 training "
       "GPUs cannot fit the cluster: it has 48 GPUs (6 x 8) and rollout needs at least one"},
      {"baselines[0].tune.rollout_tp=[16]", "areal-async",
       "--set baselines[0].tune.rollout_tp=[16]: baselines[0].tune.rollout_tp: rollout TP 16 "
       "cannot fit the cluster: it must be 1, 2, 4 or 8 and divide its 8 GPUs per node"},
      {"baselines[0].tune.staleness=[3]", "areal-async",
       "--set baselines[0].tune.staleness=[3]: baselines[0].tune.staleness: staleness 3 is "
       "outside [0, 2]: rl.staleness (2) is the off-policy budget every system of the recipe "
       "shares, and rl.sync_interval 1 needs at least 0"},
      {"baselines[1].tune.max_active=[4]", "verl-sync",
       "--set baselines[1].tune.max_active=[4]: baselines[1].tune.max_active: 'verl-sync' has "
       "no knob 'max_active' (its knobs: rollout_tp, staleness)"},
      {"baselines[0].tune.train_gpus=8", "areal-async",
       "--set baselines[0].tune.train_gpus=8: baselines[0].tune.train_gpus: must be a non-empty "
       "array of candidate values"},
      {"system.tune.train_gpus=[8]", "libra",
       "--set system.tune.train_gpus=[8]: system.tune.train_gpus: 'libra' is Libra (planner "
       "grp): its planner chooses its configuration, and it is never tuned"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.set);
    const recipe::Recipe r = Parse({c.set});
    auto space = KnobsFor(r, System(r, c.system));
    ASSERT_FALSE(space.ok());
    EXPECT_EQ(space.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_EQ(space.status().message(), c.expected);
  }
}

TEST(TuningTest, ApplyConfigurationSetsOptionsAndStaleness) {
  // The winner's values land in the planner's and router's options and the staleness bound.
  const recipe::Recipe r = Parse();
  auto space = KnobsFor(r, System(r, "areal-async"));
  ASSERT_OK(space);
  const Configuration config = space->At(space->size() - 1);
  EXPECT_EQ(config.ToString(), "train_gpus=40 rollout_tp=8 staleness=2");
  const recipe::SystemSpec tuned = ApplyConfiguration(System(r, "areal-async"), config);
  ASSERT_NE(tuned.planner_options.Find("train_gpus"), nullptr);
  EXPECT_EQ(tuned.planner_options.Find("train_gpus")->int_value, 40);
  EXPECT_EQ(tuned.planner_options.Find("rollout_tp")->int_value, 8);
  EXPECT_EQ(tuned.staleness, 2);
  auto round_trip = Configuration::FromJson(config.ToJson());
  ASSERT_OK(round_trip);
  EXPECT_EQ(*round_trip, config);
}

TEST(TuningTest, TuningSeedsAreNeverReportingSeeds) {
  // For any base seed (including ones near 2^64, where addition wraps), the tuning seeds of a
  // full budget and the reporting seeds of the largest --repeat are disjoint.
  for (uint64_t base : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 32, ~uint64_t{0} - 5,
                        ~uint64_t{0} - (uint64_t{1} << 32) + 3}) {
    SCOPED_TRACE(base);
    std::set<uint64_t> reporting;
    for (int k = 0; k < kMaxRepeat; ++k) reporting.insert(base + static_cast<uint64_t>(k));
    for (int i = 0; i < 100000; i += 7) EXPECT_EQ(reporting.count(TuningSeed(base, i)), 0u);
  }
}

/// A synthetic objective over a 2-knob space: a known best, seed noise, and infeasible points.
struct Synthetic {
  KnobSpace space;
  std::map<std::pair<int64_t, int64_t>, double> truth;
  int evaluations = 0;
};

Synthetic MakeSynthetic() {
  Synthetic s;
  Knob a{"train_gpus", {}, "default"};
  Knob b{"rollout_tp", {}, "default"};
  for (int64_t v : {8, 16, 24, 32, 40}) {
    recipe::OptionValue o;
    o.kind = recipe::OptionValue::Kind::kInt;
    o.int_value = v;
    a.values.push_back(o);
  }
  for (int64_t v : {1, 2, 4, 8}) {
    recipe::OptionValue o;
    o.kind = recipe::OptionValue::Kind::kInt;
    o.int_value = v;
    b.values.push_back(o);
  }
  s.space.knobs = {a, b};
  for (int64_t g : {8, 16, 24, 32, 40}) {
    for (int64_t tp : {1, 2, 4, 8}) {
      // Peak at (24, 4), 2.0; smooth around it.
      s.truth[{g, tp}] = 2.0 - std::abs(static_cast<double>(g - 24)) / 40 -
                         std::abs(std::log2(static_cast<double>(tp)) - 2) / 5;
    }
  }
  return s;
}

TEST(TuningTest, SearchFindsTheKnownBest) {
  // With seed noise smaller than the gaps, the search returns the true best, and spends exactly
  // its budget; infeasible points cost nothing.
  Synthetic s = MakeSynthetic();
  const auto feasible = [](const Configuration& c) {
    return c.settings[0].value.int_value == 40 ? Status::Unschedulable("OOM") : Status();
  };
  const auto evaluate = [&](const Configuration& c, uint64_t seed) -> Result<double> {
    ++s.evaluations;
    const double noise = static_cast<double>(seed % 7) / 700;  // < 0.01
    return s.truth[{c.settings[0].value.int_value, c.settings[1].value.int_value}] + noise;
  };
  SearchSettings settings;
  settings.budget_runs = 24;
  for (int i = 0; i < 24; ++i) settings.seeds.push_back(TuningSeed(3, i));
  auto result = Search(s.space, settings, feasible, evaluate);
  ASSERT_OK(result);
  EXPECT_EQ(result->winner_config.ToString(), "train_gpus=24 rollout_tp=4");
  EXPECT_EQ(result->runs, 24);
  EXPECT_EQ(s.evaluations, 24);
  EXPECT_GE(result->winner_runs, 2);  // confirmed on more than one seed
  int infeasible = 0;
  for (const Trial& t : result->trials) infeasible += t.status == "infeasible";
  EXPECT_EQ(infeasible, 4);
}

TEST(TuningTest, SearchSpendsTheSameBudgetWhateverTheSpace) {
  // A one-point space and a space larger than the budget both spend exactly the budget.
  for (size_t knobs : {0u, 2u}) {
    Synthetic s = MakeSynthetic();
    s.space.knobs.resize(knobs);
    int runs = 0;
    SearchSettings settings;
    settings.budget_runs = 7;
    for (int i = 0; i < 7; ++i) settings.seeds.push_back(TuningSeed(0, i));
    auto result = Search(
        s.space, settings, [](const Configuration&) { return Status(); },
        [&](const Configuration&, uint64_t) -> Result<double> {
          ++runs;
          return 1.0;
        });
    ASSERT_OK(result);
    EXPECT_EQ(runs, 7);
    EXPECT_EQ(result->runs, 7);
  }
}

TEST(TuningTest, SearchSeedsAreTheTuningSeedsInOrder) {
  // Every run uses a seed of the settings, each configuration its seeds in order from the first.
  Synthetic s = MakeSynthetic();
  SearchSettings settings;
  settings.budget_runs = 30;
  for (int i = 0; i < 30; ++i) settings.seeds.push_back(TuningSeed(9, i));
  std::map<std::string, std::vector<uint64_t>> seen;
  auto result = Search(
      s.space, settings, [](const Configuration&) { return Status(); },
      [&](const Configuration& c, uint64_t seed) -> Result<double> {
        seen[c.ToString()].push_back(seed);
        return static_cast<double>(c.settings[0].value.int_value);
      });
  ASSERT_OK(result);
  for (const auto& [config, seeds] : seen) {
    for (size_t i = 0; i < seeds.size(); ++i)
      EXPECT_EQ(seeds[i], TuningSeed(9, static_cast<int>(i)));
  }
}

TEST(TuningTest, FailedRunsScoreZeroAndInterruptStops) {
  // A run that fails counts as a run scoring 0; an interrupt ends the search with kInterrupted.
  Synthetic s = MakeSynthetic();
  SearchSettings settings;
  settings.budget_runs = 4;
  for (int i = 0; i < 4; ++i) settings.seeds.push_back(i);
  auto failed = Search(
      s.space, settings, [](const Configuration&) { return Status(); },
      [](const Configuration&, uint64_t) -> Result<double> {
        return Status::Unschedulable("out of memory at step 3");
      });
  ASSERT_OK(failed);
  EXPECT_EQ(failed->trials.back().status, "failed");
  EXPECT_EQ(failed->trials.back().error, "out of memory at step 3");
  auto interrupted = Search(
      s.space, settings, [](const Configuration&) { return Status(); },
      [](const Configuration&, uint64_t) -> Result<double> { return Status::Interrupted("stop"); });
  EXPECT_EQ(interrupted.status().code(), StatusCode::kInterrupted);
  auto none = Search(
      s.space, settings, [](const Configuration&) { return Status::Unschedulable("no"); },
      [](const Configuration&, uint64_t) -> Result<double> { return 1.0; });
  EXPECT_EQ(none.status().code(), StatusCode::kUnschedulable);
}

TEST(TuningTest, KeyChangesWithWhatTheTuningDependsOn) {
  // The cluster, the system's definition and the budget change the key; the reporting settings
  // (a comparison's repeat) do not exist in it.
  const recipe::Recipe r = Parse();
  const std::string key = TuningKey(r, System(r, "areal-async"));
  EXPECT_EQ(key.size(), 16u);
  EXPECT_EQ(key, TuningKey(Parse(), System(Parse(), "areal-async")));
  const recipe::Recipe bigger = Parse({"cluster.nodes=8"});
  EXPECT_NE(key, TuningKey(bigger, System(bigger, "areal-async")));
  const recipe::Recipe budget = Parse({"tuning.budget_runs=12"});
  EXPECT_NE(key, TuningKey(budget, System(budget, "areal-async")));
  EXPECT_NE(key, TuningKey(r, System(r, "verl-sync")));
}

}  // namespace
}  // namespace libra::experiment
