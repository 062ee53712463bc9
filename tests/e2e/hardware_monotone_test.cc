// A faster machine never makes Libra slower: every efficiency factor of the cost model improved
// by 10, 20 and 40% (one at a time), `libra` (planned by Algorithm 1, re-planned online, C-MLFQ)
// takes at most 2% longer for the same steps than on the base machine. The planner used to
// switch to worse plans on a faster machine through mispredicted discrete choices.
#include <gtest/gtest.h>

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
#include "support/test_util.h"
#include "workload/workload.h"

namespace libra::test {
namespace {

class NullRecorder : public experiment::Recorder {
 public:
  Status RecordStep(const records::StepBatch&) override { return Status(); }
};

/// Simulated seconds of the recipe's Libra system (planner grp, router cmlfq) with the overrides
/// `sets`.
double Elapsed(const std::string& recipe, const std::vector<std::string>& sets) {
  auto parsed = recipe::ParseRecipeFile(SourcePath(recipe), sets);
  EXPECT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty())
      << recipe::DiagnosticsToStatus(parsed->diagnostics).ToString();
  const recipe::Recipe& r = parsed->recipe;
  const recipe::SystemSpec* libra = nullptr;
  for (const recipe::SystemSpec* s : experiment::AllSystems(r)) {
    if (s->planner == "grp" && s->router == "cmlfq" && libra == nullptr) libra = s;
  }
  EXPECT_NE(libra, nullptr);
  if (libra == nullptr) return 0;
  const recipe::SystemSpec& system = *libra;
  auto workload = workload::MakeWorkload(r.workload, r.seed).value();
  auto cost = model::MakeCostModel(r).value();
  auto router =
      sched::BuiltinRouters()
          .Create(system.router, system.router_options, experiment::RouterDepsFor(cost.get()))
          .value();
  auto planner = planner::BuiltinPlanners().Create(system.planner, system.planner_options).value();
  sim::ClusterSim sim(r.sim, *workload, *cost);
  experiment::CoordinatorConfig config;
  config.steps = r.steps;
  config.prompts_per_step = r.rl.prompts_per_step;
  config.group_size = r.rl.group_size;
  config.staleness = r.StalenessFor(system);
  config.sync_interval = r.rl.sync_interval;
  config.plan = experiment::MakePlanContext(
      r, system, cost.get(), experiment::SampleSequenceSizes(*workload, r.rl.group_size, r.steps));
  NullRecorder recorder;
  experiment::Coordinator coordinator(config, *workload, *router, *planner, sim, recorder);
  auto summary = coordinator.Run({}, {});
  EXPECT_OK(summary);
  return summary.ok() ? summary->elapsed_s : 0;
}

/// The A800's catalog entry as a custom GPU, with its all-reduce latency `latency_us`.
std::vector<std::string> A800WithLatency(double latency_us) {
  return {"cluster.gpu=\"A800-faster-allreduce\"",
          StrFormat("cluster.gpu_spec={bf16_tflops=312, hbm_gbps=2039, hbm_gb=80, nvlink_gbps=200, "
                    "allreduce_gbps=150, allreduce_latency_us=%g, inter_node_gbps=100, "
                    "h2d_gbps=25.1, d2h_gbps=25.1}",
                    latency_us)};
}

void ExpectNeverSlower(const std::string& recipe, const std::vector<std::string>& base_sets) {
  SCOPED_TRACE(recipe);
  const double base = Elapsed(recipe, base_sets);
  ASSERT_GT(base, 0);
  struct Factor {
    const char* key;
    double value;
    bool higher_is_faster;
    double cap;
  };
  const Factor factors[] = {
      {"cost_model.train_mfu", 0.40, true, 1.0},
      {"cost_model.prefill_mfu", 0.55, true, 1.0},
      {"cost_model.decode_bw_util", 0.80, true, 1.0},
      {"cost_model.iteration_overhead_ms", 3, false, 0},
  };
  for (double improvement : {0.1, 0.2, 0.4}) {
    for (const Factor& f : factors) {
      const double value = f.higher_is_faster ? std::min(f.cap, f.value * (1 + improvement))
                                              : f.value * (1 - improvement);
      std::vector<std::string> sets = base_sets;
      sets.push_back(StrFormat("%s=%g", f.key, value));
      const double faster = Elapsed(recipe, sets);
      EXPECT_LE(faster, 1.02 * base)
          << f.key << " = " << value << ": " << faster << " s against " << base << " s";
    }
    std::vector<std::string> sets = base_sets;
    for (const std::string& s : A800WithLatency(8 * (1 - improvement))) sets.push_back(s);
    const double faster = Elapsed(recipe, sets);
    EXPECT_LE(faster, 1.02 * base) << "all-reduce latency " << 8 * (1 - improvement) << " us";
  }
}

TEST(HardwareMonotoneTest, AFasterMachineNeverMakesLibraSlower) {
  ExpectNeverSlower("recipes/quickstart.toml", {});
  ExpectNeverSlower("recipes/paper/r2e-gym-qwen3-14b.toml", {"steps=12"});
}

}  // namespace
}  // namespace libra::test
