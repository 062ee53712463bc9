// `libra validate` and `libra version`.
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "libra/config.h"
#include "planner/planner.h"
#include "recipe/presets.h"
#include "sched/router.h"

namespace libra::cli {

int RunValidate(const RecipeOptions& options, const Io& io) {
  auto recipe = LoadRecipe(options);
  if (!recipe.ok()) return Fail(io, recipe.status());
  if (!options.quiet) {
    std::vector<std::string> names;
    for (const recipe::SystemSpec* s : experiment::AllSystems(*recipe)) names.push_back(s->name);
    io.out << StrFormat("%s: ok (%s, %d steps, %d GPUs, systems: %s)\n", options.recipe.c_str(),
                        recipe->name.c_str(), recipe->steps, recipe->cluster.total_gpus(),
                        StrJoin(names, ", ").c_str());
  }
  return kExitOk;
}

int RunVersion(const Io& io) {
  io.out << "libra " << LIBRA_VERSION << " (" << LIBRA_GIT_REVISION << ")\n";
  io.out << "features: cuda " << (LIBRA_HAVE_CUDA ? "on" : "off") << ", nccl "
         << (LIBRA_HAVE_NCCL ? "on" : "off") << "\n";
  io.out << "backends: " << StrJoin(recipe::KnownBackends(), ", ") << "\n";
  io.out << "routers: " << StrJoin(sched::BuiltinRouters().Names(), ", ") << "\n";
  io.out << "planners: " << StrJoin(planner::BuiltinPlanners().Names(), ", ") << "\n";
  std::vector<std::string> systems;
  for (const recipe::Preset& p : recipe::Presets()) systems.push_back(p.name);
  io.out << "named systems: " << StrJoin(systems, ", ") << "\n";
  return kExitOk;
}

}  // namespace libra::cli
