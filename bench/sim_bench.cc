// libra_bench: how fast the simulator runs. For each recipe (default: the paper scenario and a
// 1,024-GPU one) it runs the recipe's [system] (or --system NAME: a system of the recipe or a
// named one) on the simulator, without recording, and reports CPU and wall time, CPU time per
// simulated event, peak memory, simulated time, simulated GPU-seconds per CPU-second and events.
//
//   ./build/bench/libra_bench [--steps N] [--system NAME] [--set KEY=VALUE]... [RECIPE...]
//
// docs/benchmarks.md records the figures and the machine they came from.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/allocator.h"
#include "common/strings.h"
#include "experiment/coordinator.h"
#include "experiment/runner.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "recipe/presets.h"
#include "recipe/recipe_parser.h"
#include "sched/router.h"
#include "sim/cluster_sim.h"
#include "workload/workload.h"

namespace libra {
namespace {

/// Keeps nothing: the benchmark measures the simulator, not the store.
class NullRecorder : public experiment::Recorder {
 public:
  Status RecordStep(const records::StepBatch&) override { return Status(); }
  bool KeepsTurns() const override { return false; }
};

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Row {
  std::string name;
  std::string system;
  int gpus = 0;
  int steps = 0;
  double cpu_s = 0;
  double wall_s = 0;
  double simulated_s = 0;
  int64_t events = 0;
  int64_t iterations = 0;
  int64_t trajectories = 0;
  double bound = 0;  // perfect-balance bound, trajectories/s
};

Result<Row> RunOne(const std::string& path, int steps, const std::string& system_name,
                   std::vector<std::string> sets) {
  if (steps > 0) sets.push_back(StrFormat("steps=%d", steps));
  LIBRA_ASSIGN_OR_RETURN(recipe::ParsedRecipe parsed, recipe::ParseRecipeFile(path, sets));
  if (!parsed.diagnostics.empty()) return recipe::DiagnosticsToStatus(parsed.diagnostics);
  const recipe::Recipe& r = parsed.recipe;
  recipe::SystemSpec system = r.system;
  if (!system_name.empty()) {
    const recipe::Preset* preset = recipe::FindPreset(system_name);
    bool found = false;
    for (const recipe::SystemSpec* s : experiment::AllSystems(r)) {
      if (s->name == system_name) {
        system = *s;
        found = true;
      }
    }
    if (!found && preset == nullptr) {
      return Status::InvalidArgument("no system '" + system_name + "' in " + path +
                                     " and no named system of that name");
    }
    if (!found) system = recipe::SystemFromPreset(*preset, "system", "--system");
  }
  LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(r.workload, r.seed));
  LIBRA_ASSIGN_OR_RETURN(auto cost, model::MakeCostModel(r));
  LIBRA_ASSIGN_OR_RETURN(auto router,
                         sched::BuiltinRouters().Create(system.router, system.router_options,
                                                        experiment::RouterDepsFor(cost.get())));
  LIBRA_ASSIGN_OR_RETURN(auto planner,
                         planner::BuiltinPlanners().Create(system.planner, system.planner_options));
  sim::ClusterSim sim(r.sim, *workload, *cost);
  experiment::CoordinatorConfig config;
  config.steps = r.steps;
  config.prompts_per_step = r.rl.prompts_per_step;
  config.group_size = r.rl.group_size;
  config.staleness = r.StalenessFor(system);
  config.stream_batches = r.BatchingFor(system) == recipe::Batching::kStream;
  config.partial_rollout = r.PartialRolloutFor(system);
  config.sync_interval = r.rl.sync_interval;
  config.plan = experiment::MakePlanContext(
      r, system, cost.get(), experiment::SampleSequenceSizes(*workload, r.rl.group_size, r.steps));
  NullRecorder recorder;
  experiment::Coordinator coordinator(config, *workload, *router, *planner, sim, recorder);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = CpuSeconds();
  LIBRA_ASSIGN_OR_RETURN(experiment::RunSummary summary, coordinator.Run({}, {}));
  const double cpu_end = CpuSeconds();
  const auto end = std::chrono::steady_clock::now();
  Row row;
  row.name = r.name;
  row.system = system.name;
  row.gpus = r.cluster.total_gpus();
  row.steps = summary.steps;
  row.cpu_s = cpu_end - cpu_start;
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
  libra::TuneAllocator();  // as the libra binary runs
  int steps = 0;
  std::string system;
  std::vector<std::string> sets;
  std::vector<std::string> recipes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (arg == "--system" && i + 1 < argc) {
      system = argv[++i];
    } else if (arg == "--set" && i + 1 < argc) {
      sets.push_back(argv[++i]);
    } else if (arg == "-h" || arg == "--help") {
      std::printf(
          "usage: libra_bench [--steps N] [--system NAME] [--set KEY=VALUE]... [RECIPE...]\n");
      return 0;
    } else {
      recipes.push_back(arg);
    }
  }
  if (recipes.empty()) {
    recipes = {std::string(LIBRA_SOURCE_DIR) + "/recipes/paper/r2e-gym-ablations.toml",
               std::string(LIBRA_SOURCE_DIR) + "/bench/large-1024.toml"};
    if (steps == 0) steps = -1;  // each recipe's own steps, but the paper one at 100
  }
  std::printf("%-24s %-14s %5s %5s %7s %7s %8s %7s %10s %11s %10s %11s %7s %7s\n", "scenario",
              "system", "GPUs", "steps", "cpu s", "wall s", "us/event", "MiB", "simulated s",
              "GPU-s/cpu-s", "events", "iterations", "traj/s", "bound");
  for (const std::string& path : recipes) {
    const bool paper = path.find("paper/r2e-gym") != std::string::npos;
    const int n = steps == -1 ? (paper ? 100 : 0) : steps;
    auto row = libra::RunOne(path, n, system, sets);
    if (!row.ok()) {
      std::fprintf(stderr, "libra_bench: %s: %s\n", path.c_str(), row.status().ToString().c_str());
      return 1;
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf(
        "%-24s %-14s %5d %5d %7.3f %7.3f %8.3f %7.0f %10.0f %11.3g %10lld %11lld %7.3f %7.3f\n",
        row->name.c_str(), row->system.c_str(), row->gpus, row->steps, row->cpu_s, row->wall_s,
        1e6 * row->cpu_s / static_cast<double>(std::max<int64_t>(1, row->events)),
        static_cast<double>(usage.ru_maxrss) / 1024, row->simulated_s,
        row->simulated_s * row->gpus / row->cpu_s, static_cast<long long>(row->events),
        static_cast<long long>(row->iterations),
        static_cast<double>(row->trajectories) / row->simulated_s, row->bound);
  }
  return 0;
}
