// Runner: runs one system of a recipe end to end and records it in the store: builds the workload,
// the router and the planner from their registries, asks the composition root for a backend,
// drives the coordinator, and marks the run ok, failed or interrupted.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "experiment/coordinator.h"
#include "model/cost_model.h"
#include "recipe/recipe.h"
#include "store/store.h"
#include "workload/workload.h"

namespace libra::experiment {

/// Builds the backend a recipe asks for (the CLI knows the concrete backends).
using BackendFactory = std::function<Result<std::unique_ptr<backend::Backend>>(
    const recipe::Recipe& recipe, const workload::Workload& workload,
    const model::CostModel& cost)>;

/// Checks what the registries and the catalog know about a recipe: its GPU, model and cost model
/// exist and accept their tables; each system's router and planner exist and accept their
/// options, and the pipeline suits the planner. Appends one Diagnostic per problem.
void ValidateWithRegistries(const recipe::Recipe& recipe,
                            std::vector<recipe::Diagnostic>* diagnostics);

/// The systems of a recipe in report order: [system] first, then [[baselines]].
std::vector<const recipe::SystemSpec*> AllSystems(const recipe::Recipe& recipe);

/// Sizes of a workload's trajectories (prompt, generated and tool-output tokens together), from a
/// sample across the run's policy versions: the mean and the largest.
struct SequenceSizes {
  int64_t typical = 1;
  int64_t max = 1;
};
SequenceSizes SampleSequenceSizes(const workload::Workload& workload, int group_size, int steps);

/// The planner's context for a recipe and system; `cost` (may be null) and `sizes` (sampled once
/// per workload) let the planner size training layouts for the workload's trajectories.
planner::PlanContext MakePlanContext(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                                     const model::CostModel* cost = nullptr,
                                     std::optional<SequenceSizes> sizes = std::nullopt);

/// The perfect-balance bound (performance.md §5): the trajectories per second the cluster could
/// train if rollout and training overlapped perfectly at the cost model's best efficiency, with
/// no bubbles and no sync: G / (r + t), r and t the lower bounds of the rollout and training
/// GPU-seconds of the workload's mean trajectory (sampled over the run's policy versions).
double PerfectBalanceBound(const recipe::Recipe& recipe, const model::CostModel& cost,
                           const workload::Workload& workload);

struct RunRequest {
  /// Must outlive the call.
  const recipe::Recipe* recipe = nullptr;
  const recipe::SystemSpec* system = nullptr;
  std::optional<int64_t> comparison_id;
  std::function<bool()> interrupted;
  std::function<void(const Progress&)> progress;
};

struct RunOutcome {
  int64_t run_id = 0;
  /// OK, kInterrupted, or why the run failed (the run is recorded either way).
  Status status;
  RunSummary summary;
};

/// Runs `request.system` and records it. Returns an error only when the run could not be
/// recorded at all (for example the store failed); a run that fails is an outcome.
Result<RunOutcome> RunSystem(store::Store& store, const RunRequest& request,
                             const BackendFactory& make_backend);

/// The current wall-clock time as ISO 8601 UTC ("2026-12-02T15:04:05Z").
std::string NowIso8601();

}  // namespace libra::experiment
