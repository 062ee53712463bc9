// `libra plan`: the planner alone. What each system's planner would do on the recipe's cluster,
// and with --check, how close its predictions are to a simulation of its plan.
#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "experiment/plan_check.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "report/document.h"
#include "report/table.h"
#include "sim/cluster_sim.h"
#include "workload/workload.h"

namespace libra::cli {

namespace {

/// Limits of `--check`: the step time within 10% of the simulation, each phase within 15% (or
/// within 2% of the measured step, for phases too small for a relative error to mean much).
constexpr double kStepLimit = 0.10;
constexpr double kPhaseLimit = 0.15;
constexpr double kPhaseFloorOfStep = 0.02;

/// The built-ins on the simulator, whatever backend the recipe names: the check simulates.
experiment::Components OnTheSimulator() {
  experiment::Components parts = Builtins();
  parts.make_backend =
      [](const recipe::Recipe& recipe, const workload::Workload& workload,
         const model::CostModel& cost,
         const experiment::BackendContext&) -> Result<std::unique_ptr<backend::Backend>> {
    return std::unique_ptr<backend::Backend>(
        std::make_unique<sim::ClusterSim>(recipe.sim, workload, cost));
  };
  return parts;
}

/// A fraction shown as a signed percentage ("+11.1%"); the data formats carry the fraction.
report::Cell SignedPercent(std::optional<double> fraction) {
  report::Cell cell = report::Cell::Percent(fraction, 1);
  if (fraction && *fraction >= 0) cell.text = "+" + cell.text;
  return cell;
}

/// A table of `columns`; `with_system`: a system column first (the data table of every system).
report::Table TableOf(std::vector<report::Column> columns, bool with_system) {
  if (with_system) columns.insert(columns.begin(), {"system", "system", false});
  return report::Table(std::move(columns));
}

/// The columns of a check table.
report::Table CheckTable(bool with_system) {
  return TableOf({{"phase", "phase", false},
                  {"predicted_s", "predicted s", true},
                  {"measured_s", "measured s", true},
                  {"error", "error", true},
                  {"limit", "limit", true},
                  {"within", "within", false}},
                 with_system);
}

/// Predicted against measured, phase by phase, into `shown` (one system's) and `all` (every
/// system's, with the system first); counts the phases outside their limits.
void AddCheckRows(const std::string& system, const planner::PhaseTimes& predicted,
                  const planner::PhaseTimes& measured, report::Table* shown, report::Table* all,
                  int* outside) {
  struct Row {
    const char* name;
    double predicted;
    double measured;
    double limit;
  };
  const Row rows[] = {
      {"rollout", predicted.rollout_s, measured.rollout_s, kPhaseLimit},
      {"train", predicted.train_s, measured.train_s, kPhaseLimit},
      {"sync", predicted.sync_s, measured.sync_s, kPhaseLimit},
      {"step", predicted.step_s, measured.step_s, kStepLimit},
  };
  for (const Row& row : rows) {
    const double diff = row.predicted - row.measured;
    const bool phase = std::string(row.name) != "step";
    const bool within = std::abs(diff) <= row.limit * std::abs(row.measured) ||
                        (phase && std::abs(diff) <= kPhaseFloorOfStep * measured.step_s);
    if (!within) ++*outside;
    std::vector<report::Cell> cells = {
        report::Cell::Text(row.name),
        report::Cell::Number(row.predicted, 1),
        report::Cell::Number(row.measured, 1),
        SignedPercent(row.measured > 0 ? std::optional<double>(diff / row.measured) : std::nullopt),
        report::Cell::Percent(row.limit, 0),
        report::Cell::Text(within ? "yes" : "no")};
    shown->AddRow(cells);
    cells.insert(cells.begin(), report::Cell::Text(system));
    all->AddRow(std::move(cells));
  }
}

/// A planner's search as the text shows it: its best candidates and what it says of its search.
/// Systems whose planners searched alike share one.
struct Search {
  std::vector<std::string> systems;
  std::vector<std::string> planners;
  report::Table candidates{{}};
  std::vector<std::string> explain;
};

/// The candidates table.
report::Table CandidateTable(bool with_system) {
  return TableOf({{"rank", "rank", true},
                  {"layout", "layout", false},
                  {"rollout_s", "rollout s", true},
                  {"train_s", "train s", true},
                  {"sync_s", "sync s", true},
                  {"step_s", "step s", true}},
                 with_system);
}

/// The plans table: a row per system.
report::Table PlansTable() {
  return report::Table({
      {"system", "system", false},
      {"planner", "planner", false},
      {"train_gpus", "train GPUs", true},
      {"rollout_gpus", "rollout GPUs", true},
      {.key = "layout", .header = "layout", .wrap = 44},
      {"predicted_step_s", "predicted step s", true},
      {.key = "reason", .header = "reason", .below = true},
  });
}

/// --check: a system's predicted against measured (heading, table, note), in system order.
struct Check {
  std::string heading;
  report::Table table{{}};
  std::string note;
};

/// What `libra plan` gathers over the systems.
struct PlanReport {
  report::Table plans = PlansTable();
  report::Table all_candidates = CandidateTable(true);
  std::vector<Search> searches;
  std::vector<std::string> keys;  // each search's candidates and explanation, as text
  std::vector<Check> checks;
  report::Table all_checks = CheckTable(true);
  int checked = 0;
  int outside = 0;
};

/// `system`'s plan: its row, and its search (shared with the systems that searched alike).
void AddPlan(const recipe::SystemSpec& system, const planner::Plan& plan, bool explain,
             PlanReport* r) {
  r->plans.AddRow({
      report::Cell::Text(system.name),
      report::Cell::Text(system.planner),
      report::Cell::Integer(plan.layout.train_gpus),
      report::Cell::Integer(plan.layout.rollout_gpus()),
      report::Cell::Text(plan.layout.ToString()),
      report::Cell::Number(plan.predicted_step_s, 1),
      report::Cell::Text(plan.reason),
  });
  Search search;
  search.systems = {system.name};
  search.planners = {system.planner};
  search.candidates = CandidateTable(false);
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const planner::PlanCandidate& c = plan.candidates[i];
    std::vector<report::Cell> row = {report::Cell::Integer(static_cast<int64_t>(i + 1)),
                                     report::Cell::Text(c.layout),
                                     report::Cell::Number(c.rollout_s, 1),
                                     report::Cell::Number(c.train_s, 1),
                                     report::Cell::Number(c.sync_s, 1),
                                     report::Cell::Number(c.step_s, 1)};
    search.candidates.AddRow(row);
    row.insert(row.begin(), report::Cell::Text(system.name));
    r->all_candidates.AddRow(std::move(row));
  }
  if (explain) {
    for (const std::string& line : plan.explain) search.explain.push_back("  " + line);
  } else if (!plan.explain.empty()) {
    search.explain.push_back(plan.explain.back());
  }
  if (search.candidates.rows() == 0 && search.explain.empty()) return;
  // Systems whose planners searched alike (same candidates, same account) share one.
  const std::string key =
      search.candidates.Render(report::Format::kCsv) + "\n" + StrJoin(search.explain, "\n");
  const auto same = std::find(r->keys.begin(), r->keys.end(), key);
  if (same == r->keys.end()) {
    r->keys.push_back(key);
    r->searches.push_back(std::move(search));
    return;
  }
  Search& shared = r->searches[static_cast<size_t>(same - r->keys.begin())];
  shared.systems.push_back(system.name);
  if (std::find(shared.planners.begin(), shared.planners.end(), system.planner) ==
      shared.planners.end()) {
    shared.planners.push_back(system.planner);
  }
}

/// --check: simulates `system`'s plan and compares the planner's predictions with it.
Status AddCheck(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                const planner::Plan& plan, planner::Planner* planner, PlanReport* r) {
  Check check;
  const std::string who = system.name + " (" + system.planner + ")";
  if (!plan.predicted) {
    check.note = who + ": the planner predicts no phases; nothing to check";
    r->checks.push_back(std::move(check));
    return Status();
  }
  auto measured = experiment::MeasurePlan(recipe, system, plan, planner, OnTheSimulator());
  if (!measured.ok()) {
    return Status(measured.status().code(),
                  StrFormat("--check: simulating %s's plan: %s", system.name.c_str(),
                            measured.status().message().c_str()));
  }
  ++r->checked;
  check.heading =
      StrFormat("%s: predicted against the plan simulated for %d steps (steady state from step %d)",
                who.c_str(), measured->steps, measured->first_steady_step);
  if (measured->drift_held) {
    check.heading +=
        "\n(the workload's drift held at its start: the plan is made for the startup profile)";
  }
  check.table = CheckTable(false);
  AddCheckRows(system.name, *plan.predicted, measured->phases, &check.table, &r->all_checks,
               &r->outside);
  r->checks.push_back(std::move(check));
  return Status();
}

/// The plans, each search's candidates and account, and with --check the checks.
report::Document PlanDocument(const recipe::Recipe& recipe, const PlanOptions& options,
                              PlanReport& r) {
  report::Document doc(StrFormat("%s: %d nodes x %d %s", recipe.name.c_str(), recipe.cluster.nodes,
                                 recipe.cluster.gpus_per_node, recipe.cluster.gpu.c_str()));
  doc.AddTable("plans", "", std::move(r.plans));
  doc.AddTable("candidates", "", std::move(r.all_candidates), report::Document::Shown::kDataOnly);
  for (size_t i = 0; i < r.searches.size(); ++i) {
    Search& search = r.searches[i];
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
  if (!options.check) return doc;
  doc.AddTable("check", "", std::move(r.all_checks), report::Document::Shown::kDataOnly);
  for (size_t i = 0; i < r.checks.size(); ++i) {
    Check& check = r.checks[i];
    if (check.table.rows() > 0) {
      doc.AddTable(StrFormat("check_%zu", i), check.heading, std::move(check.table),
                   report::Document::Shown::kReadingOnly);
    }
    if (!check.note.empty()) doc.AddNote(check.note);
  }
  doc.AddNote(
      StrFormat("check: %d plan%s simulated; %d phase%s outside the limits (step 10%%, each phase "
                "15%% or 2%% "
                "of the step)",
                r.checked, r.checked == 1 ? "" : "s", r.outside, r.outside == 1 ? "" : "s"));
  doc.AddField("phases_outside_limits", r.outside);
  return doc;
}

}  // namespace

int RunPlan(const PlanOptions& options, const Io& io) {
  auto format = ChosenFormat(options.common.output);
  if (!format.ok()) return Fail(io, format.status());
  // Every check but the plans themselves: each plan is computed once, below.
  auto recipe = LoadRecipe(options.common, /*plan_systems=*/false);
  if (!recipe.ok()) return Fail(io, recipe.status());
  auto cost = model::MakeCostModel(*recipe);
  if (!cost.ok()) return Fail(io, cost.status());
  auto workload = workload::MakeWorkload(recipe->workload, recipe->seed);
  if (!workload.ok()) return Fail(io, workload.status());
  const experiment::SequenceSizes sizes = experiment::SampleSequenceSizes(
      **workload, recipe->rl.group_size, recipe->steps, experiment::AnyStreamBatches(*recipe));
  PlanReport r;
  for (const recipe::SystemSpec* system : experiment::AllSystems(*recipe)) {
    if (!options.systems.empty() && std::find(options.systems.begin(), options.systems.end(),
                                              system->name) == options.systems.end()) {
      continue;
    }
    auto planner = Builtins().planners->Create(system->planner, system->planner_options);
    if (!planner.ok()) return Fail(io, planner.status());
    auto plan =
        (*planner)->Initial(experiment::MakePlanContext(*recipe, *system, cost->get(), sizes));
    if (!plan.ok()) return Fail(io, plan.status());
    AddPlan(*system, *plan, options.explain, &r);
    if (options.check) {
      if (Status s = AddCheck(*recipe, *system, *plan, planner->get(), &r); !s.ok()) {
        return Fail(io, s);
      }
    }
  }
  if (r.plans.rows() == 0) {
    return Fail(io,
                Status::InvalidArgument("--systems matched no system of " + options.common.recipe));
  }
  const report::Document doc = PlanDocument(*recipe, options, r);
  const int printed = Print(io, doc, options.common.output);
  if (!options.check || printed != kExitOk) return printed;
  return r.outside > 0 ? kExitFailed : kExitOk;
}

}  // namespace libra::cli
