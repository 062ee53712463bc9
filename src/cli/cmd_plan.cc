// `libra plan`: the planner alone. What each system's planner would do on the recipe's cluster.
#include <algorithm>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "report/document.h"
#include "report/table.h"
#include "workload/workload.h"

namespace libra::cli {

namespace {

/// A planner's search as the text shows it: its best candidates and what it says of its search.
/// Systems whose planners searched alike share one.
struct Search {
  std::vector<std::string> systems;
  std::vector<std::string> planners;
  report::Table candidates{{}};
  std::vector<std::string> explain;
};

/// The candidates table; `with_system`: a system column first (the data table of every system).
report::Table CandidateTable(bool with_system) {
  std::vector<report::Column> columns = {
      {"rank", "rank", true},       {"layout", "layout", false}, {"rollout_s", "rollout s", true},
      {"train_s", "train s", true}, {"sync_s", "sync s", true},  {"step_s", "step s", true},
  };
  if (with_system) columns.insert(columns.begin(), {"system", "system", false});
  return report::Table(columns);
}

}  // namespace

int RunPlan(const PlanOptions& options, const Io& io) {
  auto format = ChosenFormat(options.common.output);
  if (!format.ok()) return Fail(io, format.status());
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  report::Table table({
      {"system", "system", false},
      {"planner", "planner", false},
      {"train_gpus", "train GPUs", true},
      {"rollout_gpus", "rollout GPUs", true},
      {.key = "layout", .header = "layout", .wrap = 44},
      {"predicted_step_s", "predicted step s", true},
      {.key = "reason", .header = "reason", .below = true},
  });
  report::Table all_candidates = CandidateTable(true);
  auto cost = model::MakeCostModel(*recipe);
  if (!cost.ok()) return Fail(io, cost.status());
  auto workload = workload::MakeWorkload(recipe->workload, recipe->seed);
  if (!workload.ok()) return Fail(io, workload.status());
  const experiment::SequenceSizes sizes =
      experiment::SampleSequenceSizes(**workload, recipe->rl.group_size, recipe->steps);
  std::vector<Search> searches;
  std::vector<std::string> keys;  // each search's candidates and explanation, as text
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
    Search search;
    search.systems = {system->name};
    search.planners = {system->planner};
    search.candidates = CandidateTable(false);
    for (size_t i = 0; i < plan->candidates.size(); ++i) {
      const planner::PlanCandidate& c = plan->candidates[i];
      std::vector<report::Cell> row = {report::Cell::Integer(static_cast<int64_t>(i + 1)),
                                       report::Cell::Text(c.layout),
                                       report::Cell::Number(c.rollout_s, 1),
                                       report::Cell::Number(c.train_s, 1),
                                       report::Cell::Number(c.sync_s, 1),
                                       report::Cell::Number(c.step_s, 1)};
      search.candidates.AddRow(row);
      row.insert(row.begin(), report::Cell::Text(system->name));
      all_candidates.AddRow(std::move(row));
    }
    if (options.explain) {
      for (const std::string& line : plan->explain) search.explain.push_back("  " + line);
    } else if (!plan->explain.empty()) {
      search.explain.push_back(plan->explain.back());
    }
    if (search.candidates.rows() == 0 && search.explain.empty()) continue;
    // Systems whose planners searched alike (same candidates, same account) share one.
    const std::string key =
        search.candidates.Render(report::Format::kCsv) + "\n" + StrJoin(search.explain, "\n");
    const auto same = std::find(keys.begin(), keys.end(), key);
    if (same == keys.end()) {
      keys.push_back(key);
      searches.push_back(std::move(search));
      continue;
    }
    Search& shared = searches[static_cast<size_t>(same - keys.begin())];
    shared.systems.push_back(system->name);
    if (std::find(shared.planners.begin(), shared.planners.end(), system->planner) ==
        shared.planners.end()) {
      shared.planners.push_back(system->planner);
    }
  }
  if (table.rows() == 0) {
    return Fail(io,
                Status::InvalidArgument("--systems matched no system of " + options.common.recipe));
  }
  report::Document doc(StrFormat("%s: %d nodes x %d %s", recipe->name.c_str(),
                                 recipe->cluster.nodes, recipe->cluster.gpus_per_node,
                                 recipe->cluster.gpu.c_str()));
  doc.AddTable("plans", "", std::move(table));
  doc.AddTable("candidates", "", std::move(all_candidates), report::Document::Shown::kDataOnly);
  for (size_t i = 0; i < searches.size(); ++i) {
    Search& search = searches[i];
    const std::string who =
        StrJoin(search.systems, ", ") + " (" + StrJoin(search.planners, ", ") + ")";
    if (search.candidates.rows() > 0) {
      doc.AddTable(StrFormat("candidates_%zu", i), who + ": best candidates, predicted per step",
                   std::move(search.candidates), report::Document::Shown::kReadingOnly);
    }
    if (!search.explain.empty()) {
      doc.AddNote((options.explain ? who + ": search\n" : std::string()) +
                  StrJoin(search.explain, "\n"));
    }
  }
  return Print(io, doc, options.common.output);
}

}  // namespace libra::cli
