#include <gtest/gtest.h>

#include "recipe/recipe.h"
#include "support/test_util.h"

namespace libra::recipe {
namespace {

Recipe Valid() {
  Recipe r;
  r.name = "v";
  r.cluster.nodes = 1;
  r.cluster.gpus_per_node = 8;
  r.model.name = "m";
  r.rl.prompts_per_step = 2;
  r.rl.group_size = 4;
  r.system.name = "s";
  r.system.path = "system";
  r.source = "v.toml";
  return r;
}

TEST(ValidateRecipeTest, ValidRecipeHasNoDiagnostics) {
  // A recipe built in code with sensible values passes.
  std::vector<Diagnostic> d;
  ValidateRecipe(Valid(), &d);
  EXPECT_TRUE(d.empty()) << d.front().ToString();
}

TEST(ValidateRecipeTest, ChecksWorkWithoutTomlLocations) {
  // Without locations a problem is placed at the start of the source.
  Recipe r = Valid();
  r.rl.group_size = 0;
  r.sim.max_num_seqs = 0;
  std::vector<Diagnostic> d;
  ValidateRecipe(r, &d);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].ToString(), "v.toml:1:1: rl.group_size: must be at least 1 (got 0)");
  EXPECT_EQ(d[1].ToString(), "v.toml:1:1: sim.max_num_seqs: must be at least 1 (got 0)");
}

TEST(ValidateRecipeTest, PerSystemStalenessMustAllowTheSyncInterval) {
  // A baseline's own staleness 0 with sync every 2 steps would deadlock: reported on it.
  Recipe r = Valid();
  r.rl.staleness = 1;
  r.rl.sync_interval = 2;
  SystemSpec b;
  b.name = "sync";
  b.path = "baselines[0]";
  b.staleness = 0;
  r.baselines.push_back(b);
  std::vector<Diagnostic> d;
  ValidateRecipe(r, &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].what,
            "baselines[0].staleness: sync_interval 2 needs a staleness bound of at least 1 "
            "(system 'sync' has 0): rollouts for step k need the weights of step k - staleness");
}

TEST(ValidateRecipeTest, OneDiagnosticPerKey) {
  // A key the parser already reported is not reported again by the checks.
  Recipe r = Valid();
  r.rl.group_size = 0;
  std::vector<Diagnostic> d = {{"v.toml:3:1", "rl.group_size: expected an integer, got a string"}};
  ValidateRecipe(r, &d);
  EXPECT_EQ(d.size(), 1u);
}

TEST(ValidateRecipeTest, WhereFallsBackToTheNearestParent) {
  // A key without a location takes its table's.
  Recipe r = Valid();
  r.locations["rl"] = "v.toml:9:1";
  EXPECT_EQ(r.Where("rl.group_size"), "v.toml:9:1");
  EXPECT_EQ(r.Where("cluster.nodes"), "v.toml:1:1");
}

TEST(ValidateRecipeTest, SortDiagnosticsOrdersByPositionThenOverrides) {
  // File positions by line and column (numerically), overrides after them in given order.
  std::vector<Diagnostic> d = {{"--set a=1", "a"},
                               {"v.toml:10:2", "b"},
                               {"v.toml:9:30", "c"},
                               {"--set b=2", "d"},
                               {"v.toml:9:4", "e"}};
  SortDiagnostics(&d);
  std::vector<std::string> order;
  for (const Diagnostic& x : d) order.push_back(x.what);
  EXPECT_EQ(order, (std::vector<std::string>{"e", "c", "b", "a", "d"}));
}

TEST(ValidateRecipeTest, DiagnosticsToStatusJoinsLines) {
  // Every diagnostic becomes one line of one kInvalidRecipe status.
  EXPECT_OK(DiagnosticsToStatus({}));
  const Status s = DiagnosticsToStatus({{"a:1:1", "x: bad"}, {"a:2:1", "y: worse"}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidRecipe);
  EXPECT_EQ(s.message(), "a:1:1: x: bad\na:2:1: y: worse");
}

}  // namespace
}  // namespace libra::recipe
