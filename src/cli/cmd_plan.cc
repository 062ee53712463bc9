// `libra plan`: the planner alone. What each system's planner would do on the recipe's cluster.
#include <algorithm>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "report/table.h"
#include "workload/workload.h"

namespace libra::cli {

int RunPlan(const PlanOptions& options, const Io& io) {
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  report::Table table({
      {"system", "system", false},
      {"planner", "planner", false},
      {"train_gpus", "train GPUs", true},
      {"rollout_gpus", "rollout GPUs", true},
      {"layout", "layout", false},
      {"predicted_step_s", "predicted step s", true},
      {"reason", "reason", false},
  });
  auto cost = model::MakeCostModel(*recipe);
  if (!cost.ok()) return Fail(io, cost.status());
  auto workload = workload::MakeWorkload(recipe->workload, recipe->seed);
  if (!workload.ok()) return Fail(io, workload.status());
  const experiment::SequenceSizes sizes =
      experiment::SampleSequenceSizes(**workload, recipe->rl.group_size, recipe->steps);
  std::string details;
  for (const recipe::SystemSpec* system : experiment::AllSystems(*recipe)) {
    if (!options.systems.empty() && std::find(options.systems.begin(), options.systems.end(),
                                              system->name) == options.systems.end()) {
      continue;
    }
    auto planner = planner::BuiltinPlanners().Create(system->planner, system->planner_options);
    if (!planner.ok()) return Fail(io, planner.status());
    auto plan =
        (*planner)->Initial(experiment::MakePlanContext(*recipe, *system, cost->get(), sizes));
    if (!plan.ok()) return Fail(io, plan.status());
    table.AddRow({
        report::Cell::Text(system->name),
        report::Cell::Text(system->planner),
        report::Cell::Integer(plan->layout.train_gpus),
        report::Cell::Integer(plan->layout.rollout_gpus()),
        report::Cell::Text(plan->layout.ToString()),
        report::Cell::Number(plan->predicted_step_s, 1),
        report::Cell::Text(plan->reason),
    });
    if (!plan->candidates.empty()) {
      report::Table candidates({
          {"rank", "rank", true},
          {"layout", "layout", false},
          {"rollout_s", "rollout s", true},
          {"train_s", "train s", true},
          {"sync_s", "sync s", true},
          {"step_s", "step s", true},
      });
      for (size_t i = 0; i < plan->candidates.size(); ++i) {
        const planner::PlanCandidate& c = plan->candidates[i];
        candidates.AddRow({report::Cell::Integer(static_cast<int64_t>(i + 1)),
                           report::Cell::Text(c.layout), report::Cell::Number(c.rollout_s, 1),
                           report::Cell::Number(c.train_s, 1), report::Cell::Number(c.sync_s, 1),
                           report::Cell::Number(c.step_s, 1)});
      }
      details += StrFormat("\n%s (%s): best candidates, predicted per step\n", system->name.c_str(),
                           system->planner.c_str()) +
                 candidates.Render(report::Format::kText);
    }
    if (!options.explain && !plan->explain.empty()) details += plan->explain.back() + "\n";
    if (options.explain && !plan->explain.empty()) {
      details += StrFormat("\n%s (%s): search\n", system->name.c_str(), system->planner.c_str());
      for (const std::string& line : plan->explain) details += "  " + line + "\n";
    }
  }
  if (table.rows() == 0) {
    return Fail(io,
                Status::InvalidArgument("--systems matched no system of " + options.common.recipe));
  }
  io.out << StrFormat("%s: %d nodes x %d %s\n\n", recipe->name.c_str(), recipe->cluster.nodes,
                      recipe->cluster.gpus_per_node, recipe->cluster.gpu.c_str())
         << table.Render(report::Format::kText) << details;
  return kExitOk;
}

}  // namespace libra::cli
