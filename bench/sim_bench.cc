// libra_bench: how fast the simulator runs. For each recipe (default: the paper scenario and a
// 1,024-GPU one) it runs the recipe's [system] on the simulator, without recording, and reports
// wall time, simulated time, simulated GPU-seconds per wall-second and events per second.
//
//   ./build/bench/libra_bench [--steps N] [RECIPE...]
//
// docs/benchmarks.md records the figures and the machine they came from.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/strings.h"
#include "experiment/coordinator.h"
#include "experiment/runner.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "recipe/recipe_parser.h"
#include "sched/router.h"
#include "sim/cluster_sim.h"
#include "workload/workload.h"

namespace libra {
namespace {

/// Keeps nothing: the benchmark measures the simulator, not the store.
class NullRecorder : public experiment::Recorder {
 public:
  Status RecordStep(const store::StepBatch&) override { return Status(); }
};

struct Row {
  std::string name;
  int gpus = 0;
  int steps = 0;
  double wall_s = 0;
  double simulated_s = 0;
  int64_t events = 0;
  int64_t iterations = 0;
  int64_t trajectories = 0;
  double bound = 0;  // perfect-balance bound, trajectories/s
};

Result<Row> RunOne(const std::string& path, int steps) {
  std::vector<std::string> sets;
  if (steps > 0) sets.push_back(StrFormat("steps=%d", steps));
  LIBRA_ASSIGN_OR_RETURN(recipe::ParsedRecipe parsed, recipe::ParseRecipeFile(path, sets));
  if (!parsed.diagnostics.empty()) return recipe::DiagnosticsToStatus(parsed.diagnostics);
  const recipe::Recipe& r = parsed.recipe;
  LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(r.workload, r.seed));
  LIBRA_ASSIGN_OR_RETURN(auto cost, model::MakeCostModel(r));
  LIBRA_ASSIGN_OR_RETURN(auto router,
                         sched::BuiltinRouters().Create(r.system.router, r.system.router_options,
                                                        sched::RouterDeps{cost.get()}));
  LIBRA_ASSIGN_OR_RETURN(
      auto planner, planner::BuiltinPlanners().Create(r.system.planner, r.system.planner_options));
  sim::ClusterSim sim(r.sim, *workload, *cost);
  experiment::CoordinatorConfig config;
  config.steps = r.steps;
  config.prompts_per_step = r.rl.prompts_per_step;
  config.group_size = r.rl.group_size;
  config.staleness = r.StalenessFor(r.system);
  config.sync_interval = r.rl.sync_interval;
  config.plan = experiment::MakePlanContext(
      r, r.system, cost.get(),
      experiment::SampleSequenceSizes(*workload, r.rl.group_size, r.steps));
  NullRecorder recorder;
  experiment::Coordinator coordinator(config, *workload, *router, *planner, sim, recorder);
  const auto start = std::chrono::steady_clock::now();
  LIBRA_ASSIGN_OR_RETURN(experiment::RunSummary summary, coordinator.Run({}, {}));
  const auto end = std::chrono::steady_clock::now();
  Row row;
  row.name = r.name;
  row.gpus = r.cluster.total_gpus();
  row.steps = summary.steps;
  row.wall_s = std::chrono::duration<double>(end - start).count();
  row.simulated_s = summary.elapsed_s;
  row.events = sim.stats().events;
  row.iterations = sim.stats().iterations;
  row.trajectories = summary.trajectories;
  row.bound = experiment::PerfectBalanceBound(r, *cost, *workload);
  return row;
}

}  // namespace
}  // namespace libra

int main(int argc, char** argv) {
  int steps = 0;
  std::vector<std::string> recipes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (arg == "-h" || arg == "--help") {
      std::printf("usage: libra_bench [--steps N] [RECIPE...]\n");
      return 0;
    } else {
      recipes.push_back(arg);
    }
  }
  if (recipes.empty()) {
    recipes = {std::string(LIBRA_SOURCE_DIR) + "/recipes/paper/r2e-gym-qwen3-14b.toml",
               std::string(LIBRA_SOURCE_DIR) + "/bench/large-1024.toml"};
    if (steps == 0) steps = -1;  // each recipe's own steps, but the paper one at 100
  }
  std::printf("%-24s %5s %5s %8s %11s %13s %10s %10s %11s %8s %8s\n", "scenario", "GPUs", "steps",
              "wall s", "simulated s", "GPU-s/wall-s", "events", "events/s", "iterations", "traj/s",
              "bound");
  for (const std::string& path : recipes) {
    const bool paper = path.find("paper/r2e-gym") != std::string::npos;
    const int n = steps == -1 ? (paper ? 100 : 0) : steps;
    auto row = libra::RunOne(path, n);
    if (!row.ok()) {
      std::fprintf(stderr, "libra_bench: %s: %s\n", path.c_str(), row.status().ToString().c_str());
      return 1;
    }
    std::printf("%-24s %5d %5d %8.3f %11.0f %13.3g %10lld %10.3g %11lld %8.3f %8.3f\n",
                row->name.c_str(), row->gpus, row->steps, row->wall_s, row->simulated_s,
                row->simulated_s * row->gpus / row->wall_s, static_cast<long long>(row->events),
                static_cast<double>(row->events) / row->wall_s,
                static_cast<long long>(row->iterations),
                static_cast<double>(row->trajectories) / row->simulated_s, row->bound);
  }
  return 0;
}
