// Every recipe in recipes/ is validated and run (every system, a short horizon) by the built
// binary, so that the examples cannot rot.
#include <filesystem>

#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

std::vector<std::string> AllRecipes() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(SourcePath("recipes"))) {
    if (entry.is_regular_file() && entry.path().extension() == ".toml") {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RecipesTest, EveryRecipeValidatesAndRuns) {
  // validate exits 0; compare of every system for 2 steps exits 0. Recipes of the cluster
  // backend start real processes: tests/cluster/cluster_backend_test.cc runs them.
  const std::vector<std::string> recipes = AllRecipes();
  ASSERT_FALSE(recipes.empty());
  ScopedTempDir dir;
  for (const std::string& recipe : recipes) {
    SCOPED_TRACE(recipe);
    const CommandResult validate = RunLibra({"validate", recipe});
    EXPECT_EQ(validate.exit_code, 0) << validate.err;
    auto parsed = recipe::ParseRecipeFile(recipe, {});
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    if (parsed->recipe.backend == recipe::Backend::kCluster) continue;
    const CommandResult run =
        RunLibra({"compare", "--quiet", "--steps", "2", "--db", dir.File("recipes.db"), recipe});
    EXPECT_EQ(run.exit_code, 0) << run.err;
  }
}

}  // namespace
}  // namespace libra::test
