#include "experiment/runner.h"

#include <ctime>

#include "common/strings.h"
#include "libra/config.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "sched/router.h"

namespace libra::experiment {
namespace {

/// Writes each step to the store as it finishes.
class StoreRecorder : public Recorder {
 public:
  StoreRecorder(store::Store& store, int64_t run_id) : store_(store), run_id_(run_id) {}

  Status RecordStep(const store::StepBatch& batch) override {
    return store_.RecordStep(run_id_, batch);
  }

 private:
  store::Store& store_;
  int64_t run_id_;
};

/// Adds `d` unless its key already has a diagnostic (a field is reported once).
void Add(recipe::Diagnostic d, std::vector<recipe::Diagnostic>* diagnostics) {
  const std::string key = d.what.substr(0, d.what.find(':') + 1);
  for (const recipe::Diagnostic& e : *diagnostics) {
    if (!key.empty() && StartsWith(e.what, key)) return;
  }
  diagnostics->push_back(std::move(d));
}

/// Splits a multi-line kInvalidRecipe message ("where: what" per line) into diagnostics.
void AppendStatus(const Status& status, const std::string& fallback_where,
                  std::vector<recipe::Diagnostic>* diagnostics) {
  for (const std::string& line : StrSplit(status.message(), '\n')) {
    // "file:line:col: key: what" -> where = "file:line:col".
    size_t colon = std::string::npos;
    int seen = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == ':' && ++seen == 3) {
        colon = i;
        break;
      }
    }
    if (status.code() == StatusCode::kInvalidRecipe && colon != std::string::npos &&
        colon + 2 <= line.size()) {
      Add(recipe::Diagnostic{line.substr(0, colon), line.substr(colon + 2)}, diagnostics);
    } else {
      Add(recipe::Diagnostic{fallback_where, line}, diagnostics);
    }
  }
}

}  // namespace

std::vector<const recipe::SystemSpec*> AllSystems(const recipe::Recipe& recipe) {
  std::vector<const recipe::SystemSpec*> systems = {&recipe.system};
  for (const recipe::SystemSpec& b : recipe.baselines) systems.push_back(&b);
  return systems;
}

planner::PlanContext MakePlanContext(const recipe::Recipe& recipe,
                                     const recipe::SystemSpec& system) {
  planner::PlanContext context;
  context.nodes = recipe.cluster.nodes;
  context.gpus_per_node = recipe.cluster.gpus_per_node;
  context.batch_trajectories = recipe.rl.prompts_per_step * recipe.rl.group_size;
  context.staleness = recipe.StalenessFor(system);
  return context;
}

void ValidateWithRegistries(const recipe::Recipe& recipe,
                            std::vector<recipe::Diagnostic>* diagnostics) {
  if (recipe.cluster.gpus_per_node >= 1) {
    if (auto cost = model::MakeCostModel(recipe); !cost.ok()) {
      AppendStatus(cost.status(), recipe.Where("cost_model"), diagnostics);
    }
  }
  for (const recipe::SystemSpec* system : AllSystems(recipe)) {
    const std::string router_key = system->path + ".router";
    const std::string planner_key = system->path + ".planner";
    const sched::RouterRegistry& routers = sched::BuiltinRouters();
    if (!routers.Contains(system->router)) {
      Add({recipe.Where(router_key), router_key + ": " + routers.UnknownMessage(system->router)},
          diagnostics);
    } else if (auto r = routers.Create(system->router, system->router_options); !r.ok()) {
      AppendStatus(r.status(), recipe.Where(router_key), diagnostics);
    }
    const planner::PlannerRegistry& planners = planner::BuiltinPlanners();
    if (!planners.Contains(system->planner)) {
      Add({recipe.Where(planner_key),
           planner_key + ": " + planners.UnknownMessage(system->planner)},
          diagnostics);
      continue;
    }
    auto p = planners.Create(system->planner, system->planner_options);
    if (!p.ok()) {
      AppendStatus(p.status(), recipe.Where(planner_key), diagnostics);
      continue;
    }
    const int staleness = recipe.StalenessFor(*system);
    if ((*p)->RequiresSynchronous() && staleness != 0) {
      Add(
          recipe::Diagnostic{
              recipe.Where(planner_key),
              StrFormat("%s: the %s planner time-shares the GPUs, so it needs staleness 0 (system "
                        "'%s' has %d); set %s.staleness = 0",
                        planner_key.c_str(), system->planner.c_str(), system->name.c_str(),
                        staleness, system->path.c_str())},
          diagnostics);
      continue;
    }
    if (recipe.cluster.nodes < 1 || recipe.cluster.gpus_per_node < 1) continue;
    auto plan = (*p)->Initial(MakePlanContext(recipe, *system));
    if (!plan.ok()) {
      Add(recipe::Diagnostic{recipe.Where(system->path + ".planner_options"),
                             system->path + ".planner_options: no plan fits the cluster: " +
                                 plan.status().message()},
          diagnostics);
    }
  }
}

std::string NowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

Result<RunOutcome> RunSystem(store::Store& store, const RunRequest& request,
                             const BackendFactory& make_backend) {
  const recipe::Recipe& recipe = *request.recipe;
  const recipe::SystemSpec& system = *request.system;

  store::RunInfo info;
  info.name = recipe.name;
  info.system = system.name;
  info.router = system.router;
  info.planner = system.planner;
  info.backend = recipe.backend;
  info.seed = recipe.seed;
  info.steps_planned = recipe.steps;
  info.gpus = recipe.cluster.total_gpus();
  info.recipe_source = recipe.source;
  info.recipe_toml = recipe.effective_toml;
  info.git_revision = LIBRA_GIT_REVISION;
  info.libra_version = LIBRA_VERSION;
  info.started_at = NowIso8601();
  info.comparison_id = request.comparison_id;
  LIBRA_ASSIGN_OR_RETURN(int64_t run_id, store.BeginRun(info));
  if (request.comparison_id) {
    LIBRA_RETURN_IF_ERROR(store.AddToComparison(*request.comparison_id, run_id));
  }

  RunOutcome outcome;
  outcome.run_id = run_id;
  auto run = [&]() -> Result<RunSummary> {
    LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(recipe.workload, recipe.seed));
    LIBRA_ASSIGN_OR_RETURN(auto router,
                           sched::BuiltinRouters().Create(system.router, system.router_options));
    LIBRA_ASSIGN_OR_RETURN(
        auto planner, planner::BuiltinPlanners().Create(system.planner, system.planner_options));
    LIBRA_ASSIGN_OR_RETURN(auto backend, make_backend(recipe, *workload));
    CoordinatorConfig config;
    config.steps = recipe.steps;
    config.prompts_per_step = recipe.rl.prompts_per_step;
    config.group_size = recipe.rl.group_size;
    config.staleness = recipe.StalenessFor(system);
    config.sync_interval = recipe.rl.sync_interval;
    config.nodes = recipe.cluster.nodes;
    config.gpus_per_node = recipe.cluster.gpus_per_node;
    StoreRecorder recorder(store, run_id);
    Coordinator coordinator(config, *workload, *router, *planner, *backend, recorder);
    return coordinator.Run(request.interrupted, request.progress);
  };
  Result<RunSummary> summary = run();
  const char* status = store::kRunOk;
  if (summary.ok()) {
    outcome.summary = *summary;
  } else {
    outcome.status = summary.status();
    status = outcome.status.code() == StatusCode::kInterrupted ? store::kRunInterrupted
                                                               : store::kRunFailed;
  }
  LIBRA_RETURN_IF_ERROR(store.FinishRun(run_id, status, outcome.status.message(), NowIso8601()));
  return outcome;
}

}  // namespace libra::experiment
