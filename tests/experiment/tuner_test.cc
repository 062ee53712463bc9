#include "experiment/tuner.h"

#include <gtest/gtest.h>

#include "recipe/recipe_parser.h"
#include "sim/cluster_sim.h"
#include "support/components.h"
#include "support/test_util.h"

namespace libra::experiment {
namespace {

constexpr const char* kRecipe = R"(name = "tiny"
steps = 2

[cluster]
nodes = 1
gpus_per_node = 8

[model]
name = "Qwen3-0.6B"

[workload]
preset = "search-r1"

[rl]
prompts_per_step = 2
group_size = 2
staleness = 1

[tuning]
budget_runs = 6

[system]
preset = "libra"

[[baselines]]
preset = "verl-sync"
)";

recipe::Recipe Parse(const std::vector<std::string>& sets = {}) {
  auto parsed = recipe::ParseRecipe(kRecipe, "tiny.toml", sets);
  EXPECT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty());
  return parsed->recipe;
}

Components Sim() { return test::OnSimulator(); }

TEST(TunerTest, TunesRecordsAndIsFoundAgain) {
  // The search spends the budget by simulation, records every trial with the winner, and
  // FindTuning returns it for the same recipe and system (and nothing for another cluster).
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("t.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse();
  const recipe::SystemSpec& sync = r.baselines[0];
  int calls = 0;
  TuneRequest request;
  request.recipe = &r;
  request.system = &sync;
  request.progress = [&](const TuneProgress& p) {
    ++calls;
    EXPECT_EQ(p.budget, 6);
  };
  auto outcome = TuneSystem(**store, request, Sim());
  ASSERT_OK(outcome);
  EXPECT_EQ(calls, 6);
  EXPECT_FALSE(outcome->reused);
  const records::TuningRecord& t = outcome->record;
  EXPECT_EQ(t.system, "verl-sync");
  EXPECT_EQ(t.budget_runs, 6);
  EXPECT_EQ(t.seeds.size(), 6u);
  EXPECT_EQ(t.seeds.front(), TuningSeed(r.seed, 0));
  int ran = 0;
  for (const records::TuningTrialRecord& trial : t.trials) ran += trial.seed.has_value();
  EXPECT_EQ(ran, 6);
  auto tunings = (*store)->Tunings();
  ASSERT_OK(tunings);
  ASSERT_EQ(tunings->size(), 1u);
  EXPECT_EQ(tunings->front(), t);

  auto found = FindTuning(**store, r, sync);
  ASSERT_OK(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_TRUE((*found)->reused);
  EXPECT_EQ((*found)->winner, outcome->winner);
  const recipe::Recipe other = Parse({"cluster.nodes=2"});
  auto none = FindTuning(**store, other, other.baselines[0]);
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
}

TEST(TunerTest, WinnerIsTheBestMeanOfTheMostTriedConfigurations) {
  // The recorded score is the mean of the winner's runs, and no configuration run as often has
  // a higher mean.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("t.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse({"tuning.budget_runs=10"});
  TuneRequest request;
  request.recipe = &r;
  request.system = &r.baselines[0];
  auto outcome = TuneSystem(**store, request, Sim());
  ASSERT_OK(outcome);
  std::map<std::string, std::vector<double>> runs;
  for (const records::TuningTrialRecord& trial : outcome->record.trials) {
    if (trial.score) runs[trial.configuration].push_back(*trial.score);
  }
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  const std::vector<double>& winner = runs.at(outcome->record.winner);
  EXPECT_EQ(static_cast<int>(winner.size()), outcome->record.winner_runs);
  EXPECT_DOUBLE_EQ(mean(winner), outcome->record.score);
  for (const auto& [config, scores] : runs) {
    if (scores.size() == winner.size()) {
      EXPECT_LE(mean(scores), mean(winner)) << config;
    }
    EXPECT_LE(scores.size(), winner.size()) << config;
  }
}

TEST(TunerTest, RefusalsAndInterruptionsRecordNothing) {
  // Libra, a cluster recipe and an interrupted search are refused or stopped with nothing
  // recorded.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("t.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse();
  TuneRequest request;
  request.recipe = &r;
  request.system = &r.system;
  auto libra = TuneSystem(**store, request, Sim());
  EXPECT_EQ(libra.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(libra.status().message().find("it is Libra"), std::string::npos);

  recipe::Recipe cluster = r;
  cluster.backend = recipe::Backend::kCluster;
  request.recipe = &cluster;
  request.system = &cluster.baselines[0];
  auto refused = TuneSystem(**store, request, Sim());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--set backend=sim"), std::string::npos);

  request.recipe = &r;
  request.system = &r.baselines[0];
  int polls = 0;
  request.interrupted = [&] { return ++polls > 5; };
  auto interrupted = TuneSystem(**store, request, Sim());
  EXPECT_EQ(interrupted.status().code(), StatusCode::kInterrupted);
  auto tunings = (*store)->Tunings();
  ASSERT_OK(tunings);
  EXPECT_TRUE(tunings->empty());
}

}  // namespace
}  // namespace libra::experiment
