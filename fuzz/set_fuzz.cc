// `--set` overrides: each line of the input is one "key.path=value", applied to a small valid
// recipe and checked like `libra validate --set ...` does.
#include "experiment/runner.h"
#include "fuzz/fuzz_util.h"
#include "recipe/recipe_parser.h"

namespace {

constexpr char kRecipe[] = R"toml(
name = "fuzz"
steps = 2
[cluster]
nodes = 1
gpus_per_node = 8
[model]
name = "Qwen3-1.7B"
[rl]
prompts_per_step = 4
group_size = 2
staleness = 1
[system]
router = "cmlfq"
planner = "grp"
[system.planner_options]
interval = 2
[[baselines]]
name = "sync"
planner = "colocated"
staleness = 0
)toml";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  std::vector<std::string> overrides = fuzz::Split(fuzz::AsText(data, size), '\n');
  if (overrides.size() > 64) overrides.resize(64);
  auto parsed = recipe::ParseRecipe(kRecipe, "fuzz/set.toml", overrides);
  if (!parsed.ok()) return 0;
  const experiment::Components parts{&sched::BuiltinRouters(), &planner::BuiltinPlanners(), {}};
  experiment::ValidateWithRegistries(parsed->recipe, parts, &parsed->diagnostics);
  recipe::SortDiagnostics(&parsed->diagnostics);
  static_cast<void>(recipe::DiagnosticsToStatus(parsed->diagnostics));
  return 0;
}
