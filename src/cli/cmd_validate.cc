// `libra validate` and `libra version`.
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "libra/config.h"
#include "planner/planner.h"
#include "recipe/presets.h"
#include "report/document.h"
#include "sched/router.h"

namespace libra::cli {

int RunValidate(const RecipeOptions& options, const Io& io) {
  auto format = ChosenFormat(options.output);
  if (!format.ok()) return Fail(io, format.status());
  auto recipe = LoadRecipe(options);
  if (!report::IsDataFormat(*format)) {
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
  // For scripts: whether the recipe is valid, each problem, and what it would run.
  report::Document doc;
  doc.AddField("recipe", options.recipe);
  doc.AddField("ok", recipe.ok());
  report::Table errors({{"error", "error", false}});
  report::Table systems({{"system", "system", false},
                         {"router", "router", false},
                         {"planner", "planner", false},
                         {"staleness", "staleness", true},
                         {"batching", "batching", false}});
  if (recipe.ok()) {
    doc.AddField("name", recipe->name);
    doc.AddField("steps", recipe->steps);
    doc.AddField("gpus", recipe->cluster.total_gpus());
    for (const recipe::SystemSpec* s : experiment::AllSystems(*recipe)) {
      systems.AddRow({report::Cell::Text(s->name), report::Cell::Text(s->router),
                      report::Cell::Text(s->planner),
                      report::Cell::Integer(recipe->StalenessFor(*s)),
                      report::Cell::Text(NameOf(recipe->BatchingFor(*s)))});
    }
  } else {
    for (const std::string& line : StrSplit(recipe.status().message(), '\n')) {
      errors.AddRow({report::Cell::Text(line)});
    }
  }
  doc.AddTable("errors", "", std::move(errors));
  doc.AddTable("systems", "", std::move(systems));
  if (const int printed = Print(io, doc, options.output); printed != kExitOk) return printed;
  return recipe.ok() ? kExitOk : ExitCodeFor(recipe.status());
}

int RunVersion(const Io& io) {
  io.out << "libra " << LIBRA_VERSION << " (" << LIBRA_GIT_REVISION << ")\n";
  io.out << "features: cuda " << (LIBRA_HAVE_CUDA ? "on" : "off") << ", nccl "
         << (LIBRA_HAVE_NCCL ? "on" : "off") << "\n";
  io.out << "backends: " << StrJoin(EnumNames<recipe::Backend>::All(), ", ") << "\n";
  io.out << "routers: " << StrJoin(Builtins().routers->Names(), ", ") << "\n";
  io.out << "planners: " << StrJoin(Builtins().planners->Names(), ", ") << "\n";
  std::vector<std::string> systems;
  for (const recipe::Preset& p : recipe::Presets()) systems.push_back(p.name);
  io.out << "named systems: " << StrJoin(systems, ", ") << "\n";
  return kExitOk;
}

}  // namespace libra::cli
