#include "experiment/sensitivity.h"

#include <gtest/gtest.h>

#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::experiment {
namespace {

constexpr const char* kRecipe = R"(name = "s"

[cluster]
nodes = 1
gpus_per_node = 8

[model]
name = "Qwen3-0.6B"

[cost_model]
train_mfu = 0.5

[workload]
preset = "search-r1"

[rl]
prompts_per_step = 2
group_size = 2
)";

recipe::Recipe Parse(const std::string& text = kRecipe) {
  auto parsed = recipe::ParseRecipe(text, "s.toml", {});
  EXPECT_OK(parsed);
  return parsed->recipe;
}

double Number(const recipe::OptionTable& table, const std::string& key) {
  const recipe::OptionValue* v = table.Find(key);
  EXPECT_NE(v, nullptr) << key;
  if (v == nullptr) return -1;
  return v->kind == recipe::OptionValue::Kind::kInt ? static_cast<double>(v->int_value)
                                                    : v->double_value;
}

const Perturbation& Named(const std::string& name) {
  for (const Perturbation& p : StandardPerturbations()) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << name;
  return StandardPerturbations().front();
}

TEST(SensitivityTest, TheStandardSetCoversEveryUnmeasurableConstantBothWays) {
  // The recipe as written first, then each constant scaled down and up.
  const std::vector<Perturbation>& set = StandardPerturbations();
  ASSERT_EQ(set.size(), 13u);
  EXPECT_TRUE(set.front().constant.empty());
  std::map<std::string, int> per_constant;
  for (size_t i = 1; i < set.size(); ++i) {
    ++per_constant[set[i].constant];
    EXPECT_NE(set[i].factor, 1.0) << set[i].name;
  }
  for (const char* c : {"iteration_overhead", "train_mfu", "decode_bw_util", "allreduce_latency",
                        "tool_latency", "length_tail"}) {
    EXPECT_EQ(per_constant[c], 2) << c;
  }
}

TEST(SensitivityTest, ScalesTheEffectiveValue) {
  // The recipe's own value when it sets one (train_mfu 0.5), else the default: the cost model's,
  // the catalog GPU's, the workload preset's.
  const recipe::Recipe r = Parse();
  auto mfu = ApplyPerturbation(r, Named("train MFU x0.8"));
  ASSERT_OK(mfu);
  EXPECT_DOUBLE_EQ(Number(mfu->cost_model.options, "train_mfu"), 0.4);
  auto overhead = ApplyPerturbation(r, Named("overhead x2"));
  ASSERT_OK(overhead);
  EXPECT_DOUBLE_EQ(Number(overhead->cost_model.options, "iteration_overhead_ms"), 6.0);
  auto bw = ApplyPerturbation(r, Named("decode BW x1.2"));
  ASSERT_OK(bw);
  EXPECT_DOUBLE_EQ(Number(bw->cost_model.options, "decode_bw_util"), 0.96);
  auto ar = ApplyPerturbation(r, Named("all-reduce x2"));
  ASSERT_OK(ar);
  EXPECT_GT(Number(ar->cluster.gpu_spec, "allreduce_latency_us"), 0);
  auto tools = ApplyPerturbation(r, Named("tool latency x2"));
  ASSERT_OK(tools);
  EXPECT_GT(Number(tools->workload.options, "retriever_latency_median_s"), 0);
  auto tail = ApplyPerturbation(r, Named("length tail x1.25"));
  ASSERT_OK(tail);
  EXPECT_GT(Number(tail->workload.options, "tokens_sigma"), 0);
  auto same = ApplyPerturbation(r, StandardPerturbations().front());
  ASSERT_OK(same);
  EXPECT_EQ(same->cost_model, r.cost_model);
}

TEST(SensitivityTest, RefusesWhatTheRecipeCannotTake) {
  // The reference cost model has no roofline constants; a trace has no workload model.
  recipe::Recipe r = Parse();
  r.cost_model.name = "libra-ref";
  auto refused = ApplyPerturbation(r, Named("overhead x2"));
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  recipe::Recipe trace = Parse();
  trace.workload.kind = recipe::WorkloadKind::kTrace;
  auto no_model = ApplyPerturbation(trace, Named("tool latency x0.5"));
  EXPECT_EQ(no_model.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace libra::experiment
