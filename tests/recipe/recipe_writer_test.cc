#include "recipe/recipe_writer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::recipe {
namespace {

OptionValue Double(double v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kDouble;
  o.double_value = v;
  return o;
}

TEST(RecipeWriterTest, ValuesAreTomlThatReadsBackExactly) {
  EXPECT_EQ(TomlValue(Double(0.1)), "0.1");
  EXPECT_EQ(TomlValue(Double(2)), "2.0");
  EXPECT_EQ(TomlValue(Double(1e300)), "1e+300");
  EXPECT_EQ(TomlValue(Double(1.0 / 3)), "0.3333333333333333");
  EXPECT_EQ(TomlValue(Double(INFINITY)), "inf");
  OptionValue s;
  s.kind = OptionValue::Kind::kString;
  s.string_value = "say \"hi\"\\\n\x01";
  EXPECT_EQ(TomlValue(s), "\"say \\\"hi\\\"\\\\\\n\\u0001\"");
  OptionValue table;
  table.kind = OptionValue::Kind::kTable;
  table.table = {{"name", s}, {"a b", Double(1)}};
  OptionValue array;
  array.kind = OptionValue::Kind::kArray;
  array.array = {table};
  EXPECT_EQ(TomlValue(array), "[{name = \"say \\\"hi\\\"\\\\\\n\\u0001\", \"a b\" = 1.0}]");
  EXPECT_EQ(TomlKey("max_tokens"), "max_tokens");
  EXPECT_EQ(TomlKey("a.b"), "\"a.b\"");
}

TEST(RecipeWriterTest, ResolvedRecipeHasItsOwnSystemAndEveryField) {
  // A baseline written out is the [system] of a recipe with no baselines; every field is there
  // with its value, defaults included; parsing it gives the same values.
  auto parsed = ParseRecipeFile(test::SourcePath("recipes/quickstart.toml"), {});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_TRUE(parsed->diagnostics.empty());
  const Recipe& recipe = parsed->recipe;
  const SystemSpec& baseline = recipe.baselines.at(0);  // sync-colocated, staleness 0
  const OptionLog log;
  const std::string text = WriteResolvedRecipe(recipe, baseline, log);
  EXPECT_EQ(text.find("[[baselines]]"), std::string::npos) << text;
  EXPECT_NE(text.find("[system]\nname = \"sync-colocated\"\nrouter = \"least-conn\"\n"
                      "planner = \"colocated\"\nstaleness = 0\nbatching = \"ordered\"\n"
                      "partial_rollout = false\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[sim]\nmax_num_seqs = 256\n"), std::string::npos) << text;
  auto again = ParseRecipe(text, "resolved.toml", {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->diagnostics.empty()) << again->diagnostics.front().ToString();
  EXPECT_EQ(again->recipe.system.name, "sync-colocated");
  EXPECT_EQ(again->recipe.StalenessFor(again->recipe.system), 0);
  EXPECT_EQ(again->recipe.rl, recipe.rl);
  EXPECT_EQ(again->recipe.sim, recipe.sim);
  EXPECT_EQ(again->recipe.seed, recipe.seed);
  EXPECT_TRUE(again->recipe.baselines.empty());
  // Written again from what it parsed to, it is the same text.
  EXPECT_EQ(WriteResolvedRecipe(again->recipe, again->recipe.system, log), text);
}

TEST(RecipeWriterTest, RecipeDirAndTracePathsBecomeAbsolute) {
  // So that the resolved recipe runs from any folder.
  Recipe recipe;
  recipe.name = "r";
  recipe.workload.kind = WorkloadKind::kTrace;
  recipe.workload.trace = "traces/t.jsonl";
  recipe.workload.base_dir = "/data/exp";
  recipe.cluster_backend.base_dir = "/data/exp";
  OptionValue command;
  command.kind = OptionValue::Kind::kString;
  command.string_value = "python3 {recipe_dir}/../workers/trainer.py --port {port}";
  recipe.cluster_backend.trainer.entries = {{"command", command}};
  recipe.cluster_backend.trainer.path = "trainer";
  const std::string text = WriteResolvedRecipe(recipe, recipe.system, OptionLog());
  EXPECT_NE(text.find("trace = \"/data/exp/traces/t.jsonl\""), std::string::npos) << text;
  EXPECT_NE(text.find("[trainer]\ncommand = \"python3 /data/exp/../workers/trainer.py --port "
                      "{port}\""),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace libra::recipe
