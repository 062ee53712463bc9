// `include = [...]` in recipes, and [cluster.gpu_spec] overriding a catalog GPU key by key (what
// a calibration file relies on).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/cost_model.h"
#include "model/roofline_model.h"
#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::recipe {
namespace {

using ::libra::test::ScopedTempDir;
using ::libra::test::WriteFile;

constexpr const char* kBody = R"(
[cluster]
gpu = "A800-80G"
nodes = 1
gpus_per_node = 8

[model]
name = "Qwen3-8B"

[rl]
prompts_per_step = 4
group_size = 8
)";

std::vector<std::string> Messages(const ParsedRecipe& parsed) {
  std::vector<std::string> out;
  for (const Diagnostic& d : parsed.diagnostics) out.push_back(d.ToString());
  return out;
}

const model::RooflineCostModel& Roofline(const std::unique_ptr<model::CostModel>& cost) {
  return static_cast<const model::RooflineCostModel&>(*cost);
}

class RecipeIncludeTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    WriteFile(dir_.File(name), text);
    return dir_.File(name);
  }
  ScopedTempDir dir_;
};

TEST_F(RecipeIncludeTest, IncludedFileIsMergedUnderTheRecipe) {
  // The included tables fill in what the recipe lacks; the recipe's own keys win; the effective
  // recipe holds the merged values and no include, so a run repeats without the file.
  Write("calibration.toml", R"(# measured
[cluster.gpu_spec]
allreduce_gbps = 123

[cost_model]
decode_bw_util = 0.7
train_mfu = 0.35
)");
  const std::string recipe =
      Write("r.toml", std::string("name = \"r\"\ninclude = [\"calibration.toml\"]\n") + kBody +
                          "\n[cost_model]\ntrain_mfu = 0.3\n");
  auto parsed = ParseRecipeFile(recipe);
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty()) << Messages(*parsed).front();
  auto cost = model::MakeCostModel(parsed->recipe);
  ASSERT_OK(cost);
  EXPECT_DOUBLE_EQ((*cost)->gpu().allreduce_bandwidth, 123e9);
  EXPECT_DOUBLE_EQ(Roofline(*cost).params().decode_bw_util, 0.7);
  EXPECT_DOUBLE_EQ(Roofline(*cost).params().train_mfu, 0.3);  // the recipe's own

  const std::string& effective = parsed->recipe.effective_toml;
  EXPECT_EQ(effective.find("include"), std::string::npos) << effective;
  auto again = ParseRecipe(effective, "effective.toml");
  ASSERT_OK(again);
  ASSERT_TRUE(again->diagnostics.empty()) << Messages(*again).front();
  EXPECT_EQ(again->recipe.cluster.gpu_spec.entries.size(), 1u);
  EXPECT_EQ(again->recipe.cost_model.options.entries.size(), 2u);
}

TEST_F(RecipeIncludeTest, LaterIncludesWinAndPathsAreRelativeToTheRecipe) {
  // Two includes from a subfolder: the second overrides the first; --set overrides both.
  Write("conf/a.toml", "[cost_model]\ndecode_bw_util = 0.5\nprefill_mfu = 0.4\n");
  Write("conf/b.toml", "[cost_model]\ndecode_bw_util = 0.6\n");
  const std::string recipe = Write(
      "conf/r.toml", std::string("name = \"r\"\ninclude = [\"a.toml\", \"b.toml\"]\n") + kBody);
  auto parsed = ParseRecipeFile(recipe);
  ASSERT_OK(parsed);
  auto cost = model::MakeCostModel(parsed->recipe);
  ASSERT_OK(cost);
  EXPECT_DOUBLE_EQ(Roofline(*cost).params().decode_bw_util, 0.6);
  EXPECT_DOUBLE_EQ(Roofline(*cost).params().prefill_mfu, 0.4);

  auto overridden = ParseRecipeFile(recipe, {"cost_model.prefill_mfu=0.45"});
  ASSERT_OK(overridden);
  auto cost2 = model::MakeCostModel(overridden->recipe);
  ASSERT_OK(cost2);
  EXPECT_DOUBLE_EQ(Roofline(*cost2).params().prefill_mfu, 0.45);
}

TEST_F(RecipeIncludeTest, ProblemsInAnIncludedFileNameThatFile) {
  // A key the recipe checks is reported where it was written: in the included file.
  Write("inc.toml", "[cluster]\ngpus_per_nod = 4\n");
  const std::string recipe =
      Write("r.toml", std::string("name = \"r\"\ninclude = [\"inc.toml\"]\n") + kBody);
  auto parsed = ParseRecipeFile(recipe);
  ASSERT_OK(parsed);
  ASSERT_EQ(parsed->diagnostics.size(), 1u);
  EXPECT_EQ(parsed->diagnostics[0].ToString(),
            dir_.File("inc.toml") +
                ":2:16: cluster.gpus_per_nod: unknown key; did you mean 'gpus_per_node'?");
}

TEST_F(RecipeIncludeTest, IncludeErrorsNameTheFileAndTheKey) {
  // Each way an include can be wrong stops the parse with the include entry and the file.
  Write("bad.toml", "[cost_model\n");
  Write("nested.toml", "include = [\"bad.toml\"]\n");
  struct Case {
    std::string name;
    std::string include;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"missing file", "include = [\"nope.toml\"]",
       dir_.File("r.toml") + ":2:12: include[0]: " + dir_.File("nope.toml") +
           ": cannot read the included file (No such file or directory)"},
      {"not TOML", "include = [\"bad.toml\"]", dir_.File("bad.toml") + ":1:12: not valid TOML: "},
      {"nested include", "include = [\"nested.toml\"]",
       dir_.File("nested.toml") + ":1:11: include: an included file cannot include others " +
           "(included by " + dir_.File("r.toml") + ":2:12 include[0])"},
      {"not an array", "include = \"a.toml\"",
       dir_.File("r.toml") + ":2:11: include: expected an array of file names, got a string"},
      {"not a file name", "include = [3]",
       dir_.File("r.toml") + ":2:12: include[0]: expected a file name, got an integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string recipe = Write("r.toml", "name = \"r\"\n" + c.include + "\n" + kBody);
    auto parsed = ParseRecipeFile(recipe);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_EQ(parsed.status().message().substr(0, c.error.size()), c.error)
        << parsed.status().message();
  }
}

TEST_F(RecipeIncludeTest, GpuSpecOverridesACatalogGpuKeyByKey) {
  // With a catalog GPU named, [cluster.gpu_spec] changes only the numbers it gives; a GPU the
  // catalog lacks still needs every required number.
  auto parsed = ParseRecipe(std::string("name = \"r\"\n") + kBody +
                                "\n[cluster.gpu_spec]\nh2d_gbps = 50\nallreduce_latency_us = 9\n",
                            "r.toml");
  ASSERT_OK(parsed);
  auto context = model::ContextFor(parsed->recipe);
  ASSERT_OK(context);
  model::GpuSpec expected = *model::FindGpu("A800-80G");
  expected.h2d_bandwidth = 50e9;
  expected.allreduce_latency_s = 9e-6;
  EXPECT_EQ(context->gpu, expected);

  auto custom =
      ParseRecipe(std::string("name = \"r\"\n") + kBody + "\n[cluster.gpu_spec]\nh2d_gbps = 50\n",
                  "r.toml", {"cluster.gpu=L40S"});
  ASSERT_OK(custom);
  auto missing = model::ContextFor(custom->recipe);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cluster.gpu_spec.bf16_tflops: required field is "
                                            "missing"),
            std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace libra::recipe
