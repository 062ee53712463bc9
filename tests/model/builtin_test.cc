#include <gtest/gtest.h>

#include "model/cost_model.h"
#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::model {
namespace {

constexpr const char* kRecipe = R"(name = "m"
[cluster]
gpu = "H100-80G"
nodes = 2
gpus_per_node = 4
[model]
name = "Qwen3-8B"
[rl]
prompts_per_step = 1
group_size = 1
)";

recipe::Recipe Parse(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto parsed = recipe::ParseRecipe(text, "m.toml", sets);
  EXPECT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty()) << parsed->diagnostics.front().ToString();
  return parsed->recipe;
}

TEST(CostModelBuiltinTest, RegistryHasBothModels) {
  // "roofline" and "libra-ref" are registered; a second registration of a name fails.
  EXPECT_EQ(BuiltinCostModels().Names(), (std::vector<std::string>{"libra-ref", "roofline"}));
  CostModelRegistry registry("cost model");
  ASSERT_OK(RegisterBuiltinCostModels(registry));
  EXPECT_EQ(RegisterBuiltinCostModels(registry).code(), StatusCode::kInternal);
}

TEST(CostModelBuiltinTest, RecipeNamesCatalogEntries) {
  // The default cost model for the recipe's catalog GPU and model and its node size.
  auto m = MakeCostModel(Parse(kRecipe));
  ASSERT_OK(m);
  EXPECT_EQ((*m)->Name(), "roofline");
  EXPECT_EQ((*m)->gpu().name, "H100-80G");
  EXPECT_EQ((*m)->arch().name, "Qwen3-8B");
  auto context = ContextFor(Parse(kRecipe));
  ASSERT_OK(context);
  EXPECT_EQ(context->gpus_per_node, 4);
  auto ref = MakeCostModel(Parse(kRecipe, {"cost_model.name=libra-ref"}));
  ASSERT_OK(ref);
  EXPECT_EQ((*ref)->Name(), "libra-ref");
}

TEST(CostModelBuiltinTest, RecipeDescribesCustomHardwareAndModel) {
  // Custom tables replace the catalog; the names are only labels then.
  const std::string text = std::string(kRecipe) + R"(
[cluster.gpu_spec]
bf16_tflops = 100
hbm_gbps = 1000
hbm_gb = 48
nvlink_gbps = 50
allreduce_gbps = 40
inter_node_gbps = 25
h2d_gbps = 12
[model.arch]
layers = 2
hidden = 256
heads = 4
kv_heads = 2
ffn = 1024
vocab = 1000
[cost_model]
decode_bw_util = 0.5
)";
  auto m = MakeCostModel(Parse(text));
  ASSERT_OK(m);
  EXPECT_EQ((*m)->gpu().name, "H100-80G");
  EXPECT_DOUBLE_EQ((*m)->gpu().hbm_bytes, 48e9);
  EXPECT_EQ((*m)->arch().layers, 2);
  EXPECT_EQ((*m)->arch().head_dim, 64);
}

TEST(CostModelBuiltinTest, RecipeErrorsNameThePlace) {
  // Unknown entries and cost models are recipe errors at the key that names them.
  struct Case {
    std::string set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"cluster.gpu=B200",
       "--set cluster.gpu=B200: cluster.gpu: unknown GPU 'B200' (known: A100-80G, A800-80G, "
       "H100-80G, H800, H200; or describe it in a custom table); did you mean 'H200'?"},
      {"model.name=Qwen3-8b",
       "--set model.name=Qwen3-8b: model.name: unknown model 'Qwen3-8b' (known: Qwen3-0.6B, "
       "Qwen3-1.7B, Qwen3-4B, Qwen3-8B, Qwen3-14B, Qwen3-32B, Qwen3-30B-A3B, Qwen2.5-7B, "
       "Llama-3-8B; or describe it in a custom table); did you mean 'Qwen3-8B'?"},
      {"cost_model.name=vidur",
       "--set cost_model.name=vidur: cost_model.name: unknown cost model 'vidur' (known: "
       "libra-ref, roofline)"},
      {"cost_model.prefill_mfu=2",
       "--set cost_model.prefill_mfu=2: cost_model.prefill_mfu: must be in [0.01, 1] (got 2)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.set);
    auto m = MakeCostModel(Parse(kRecipe, {c.set}));
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_EQ(m.status().message(), c.message);
  }
}

}  // namespace
}  // namespace libra::model
