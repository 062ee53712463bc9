// Issue 20: the code's seams. One test per bug found on the way, each failing on the code before
// its fix.
#include <gtest/gtest.h>

#include "recipe/presets.h"
#include "recipe/recipe_parser.h"
#include "recipe/recipe_writer.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

TEST(Issue20Test, AResolvedRecipeKeepsTheLossObjective) {
  // The resolved recipe a run records is what `libra run` repeats it from; it left out
  // rl.objective, so a repeated areal-async run trained with the PPO loss instead of AReaL's
  // decoupled one.
  auto parsed = recipe::ParseRecipeFile(SourcePath("recipes/quickstart.toml"), {});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const recipe::Preset* areal = recipe::FindPreset("areal-async");
  ASSERT_NE(areal, nullptr);
  const recipe::SystemSpec system =
      recipe::SystemFromPreset(*areal, "baselines[0]", "quickstart.toml:1:1");
  ASSERT_EQ(parsed->recipe.ObjectiveFor(system), recipe::Objective::kDecoupled);

  const std::string text = recipe::WriteResolvedRecipe(parsed->recipe, system, recipe::OptionLog());
  auto again = recipe::ParseRecipe(text, "resolved.toml", {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(again->diagnostics.empty()) << again->diagnostics.front().ToString();
  EXPECT_EQ(again->recipe.ObjectiveFor(again->recipe.system), recipe::Objective::kDecoupled)
      << text;
}

}  // namespace
}  // namespace libra::test
