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

/// The simulator, whatever backend the recipe names: the check simulates.
experiment::BackendFactory SimFactory() {
  return [](const recipe::Recipe& recipe, const workload::Workload& workload,
            const model::CostModel& cost,
            const experiment::BackendContext&) -> Result<std::unique_ptr<backend::Backend>> {
    return std::unique_ptr<backend::Backend>(
        std::make_unique<sim::ClusterSim>(recipe.sim, workload, cost));
  };
}

/// The candidates table of a searching planner.
std::string Candidates(const planner::Plan& plan) {
  report::Table candidates({
      {"rank", "rank", true},
      {"layout", "layout", false},
      {"rollout_s", "rollout s", true},
      {"train_s", "train s", true},
      {"sync_s", "sync s", true},
      {"step_s", "step s", true},
  });
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const planner::PlanCandidate& c = plan.candidates[i];
    candidates.AddRow({report::Cell::Integer(static_cast<int64_t>(i + 1)),
                       report::Cell::Text(c.layout), report::Cell::Number(c.rollout_s, 1),
                       report::Cell::Number(c.train_s, 1), report::Cell::Number(c.sync_s, 1),
                       report::Cell::Number(c.step_s, 1)});
  }
  return candidates.Render(report::Format::kText);
}

/// Predicted against measured, phase by phase; counts the phases outside their limits.
std::string CheckTable(const planner::PhaseTimes& predicted, const planner::PhaseTimes& measured,
                       int* outside) {
  report::Table table({
      {"phase", "phase", false},
      {"predicted_s", "predicted s", true},
      {"measured_s", "measured s", true},
      {"error", "error", true},
      {"limit", "limit", true},
      {"within", "within", false},
  });
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
    table.AddRow({report::Cell::Text(row.name), report::Cell::Number(row.predicted, 1),
                  report::Cell::Number(row.measured, 1),
                  row.measured > 0
                      ? report::Cell::Text(StrFormat("%+.1f%%", 100 * diff / row.measured))
                      : report::Cell::Missing(),
                  report::Cell::Text(StrFormat("%.0f%%", 100 * row.limit)),
                  report::Cell::Text(within ? "yes" : "no")});
  }
  return table.Render(report::Format::kText);
}

}  // namespace

int RunPlan(const PlanOptions& options, const Io& io) {
  // Every check but the plans themselves: each plan is computed once, below.
  auto recipe = LoadRecipe(options.common, /*plan_systems=*/false);
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
  int checked = 0;
  int outside = 0;
  for (const recipe::SystemSpec* system : experiment::AllSystems(*recipe)) {
    if (!options.systems.empty() && std::find(options.systems.begin(), options.systems.end(),
                                              system->name) == options.systems.end()) {
      continue;
    }
    auto planner = planner::BuiltinPlanners().Create(system->planner, system->planner_options);
    if (!planner.ok()) return Fail(io, planner.status());
    auto plan =
        (*planner)->Initial(experiment::MakePlanContext(*recipe, *system, cost->get(), sizes));
    if (!plan.ok()) {
      return Fail(
          io, Status::InvalidRecipe(recipe->Where(system->path + ".planner_options"),
                                    system->path + ".planner_options: no plan fits the cluster: " +
                                        plan.status().message()));
    }
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
      details += StrFormat("\n%s (%s): best candidates, predicted per step\n", system->name.c_str(),
                           system->planner.c_str()) +
                 Candidates(*plan);
    }
    if (!options.explain && !plan->explain.empty()) details += plan->explain.back() + "\n";
    if (options.explain && !plan->explain.empty()) {
      details += StrFormat("\n%s (%s): search\n", system->name.c_str(), system->planner.c_str());
      for (const std::string& line : plan->explain) details += "  " + line + "\n";
    }
    if (!options.check) continue;
    if (!plan->predicted) {
      details += StrFormat("\n%s (%s): the planner predicts no phases; nothing to check\n",
                           system->name.c_str(), system->planner.c_str());
      continue;
    }
    auto measured = experiment::MeasurePlan(*recipe, *system, *plan, planner->get(), SimFactory());
    if (!measured.ok()) {
      return Fail(io, Status(measured.status().code(),
                             StrFormat("--check: simulating %s's plan: %s", system->name.c_str(),
                                       measured.status().message().c_str())));
    }
    ++checked;
    details += StrFormat(
        "\n%s (%s): predicted against the plan simulated for %d steps (steady state from step "
        "%d)\n",
        system->name.c_str(), system->planner.c_str(), measured->steps,
        measured->first_steady_step);
    if (measured->drift_held) {
      details +=
          "(the workload's drift held at its start: the plan is made for the startup "
          "profile)\n";
    }
    details += CheckTable(*plan->predicted, measured->phases, &outside);
  }
  if (table.rows() == 0) {
    return Fail(io,
                Status::InvalidArgument("--systems matched no system of " + options.common.recipe));
  }
  io.out << StrFormat("%s: %d nodes x %d %s\n\n", recipe->name.c_str(), recipe->cluster.nodes,
                      recipe->cluster.gpus_per_node, recipe->cluster.gpu.c_str())
         << table.Render(report::Format::kText) << details;
  if (options.check) {
    io.out << StrFormat(
        "\ncheck: %d plan%s simulated; %d phase%s outside the limits (step 10%%, each phase 15%% "
        "or 2%% of the step)\n",
        checked, checked == 1 ? "" : "s", outside, outside == 1 ? "" : "s");
    if (outside > 0) return kExitFailed;
  }
  return kExitOk;
}

}  // namespace libra::cli
