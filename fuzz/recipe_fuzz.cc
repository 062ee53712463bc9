// The recipe parser and validator, as `libra validate` runs them: TOML text -> ParseRecipe
// (includes, conversion, ValidateRecipe) -> the registries' checks -> the cluster tables. A
// recipe that passes must parse again from its effective TOML. The systems' initial plans are
// left out: a planner's search over a paper-sized cluster takes seconds under the sanitizers, so
// every such input would be a "hang"; the search's cost is bounded by the input limits and
// measured by plan_bench instead.
#include "cluster/cluster_options.h"
#include "experiment/runner.h"
#include "fuzz/fuzz_util.h"
#include "recipe/recipe_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  const std::string text(fuzz::AsText(data, size));
  auto parsed = recipe::ParseRecipe(text, "fuzz/recipe.toml");
  if (!parsed.ok()) return 0;
  const experiment::Components parts{&sched::BuiltinRouters(), &planner::BuiltinPlanners(), {}};
  experiment::ValidateWithRegistries(parsed->recipe, parts, &parsed->diagnostics,
                                     /*plan_systems=*/false);
  recipe::SortDiagnostics(&parsed->diagnostics);
  static_cast<void>(recipe::DiagnosticsToStatus(parsed->diagnostics));
  if (!parsed->diagnostics.empty()) return 0;
  if (parsed->recipe.backend == recipe::Backend::kCluster) {
    static_cast<void>(cluster::DecodeClusterOptions(parsed->recipe));
  }
  auto again = recipe::ParseRecipe(parsed->recipe.effective_toml, "fuzz/recipe.toml");
  fuzz::Expect(again.ok(), "an accepted recipe's effective TOML parses again");
  return 0;
}
