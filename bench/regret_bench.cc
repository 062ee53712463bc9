// libra_regret_bench: how far the plan Libra's planner chooses is from the best layout of its
// search space, every one simulated. For each recipe it plans the recipe's first system with the
// grp planner (or --system), simulates that plan held for the whole run, and simulates the other
// layouts of the space: every training budget that is a multiple of --budget-step (and the chosen
// one), each with its best training layout and every homogeneous rollout layout that packs
// (--every-multiset: every multiset of rollout TP sizes), plus the search's own rollout layout
// and the time-shared layouts. Regret = chosen step time / best step time - 1, both simulated.
//
//   ./build/bench/libra_regret_bench [--steps N] [--seed S] [--system NAME] [--budget-step K]
//                                    [--every-multiset] [--verbose] RECIPE...
//
// --verbose prints every candidate with the planner's prediction next to the simulation.
// docs/benchmarks.md records the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/allocator.h"
#include "common/strings.h"
#include "experiment/plan_check.h"
#include "experiment/runner.h"
#include "model/cost_model.h"
#include "planner/grp_planner.h"
#include "recipe/recipe_parser.h"
#include "sim/cluster_sim.h"
#include "workload/workload.h"

namespace libra {
namespace {

struct Options {
  int steps = 0;
  int seed = -1;
  std::string system;
  int budget_step = 0;  // 0: gpus_per_node
  bool every_multiset = false;
  bool verbose = false;
  std::vector<std::string> recipes;
};

/// The built-in routers and planners on the simulator.
experiment::Components OnTheSimulator() {
  return experiment::Components{
      &sched::BuiltinRouters(), &planner::BuiltinPlanners(),
      [](const recipe::Recipe& recipe, const workload::Workload& workload,
         const model::CostModel& cost,
         const experiment::BackendContext&) -> Result<std::unique_ptr<backend::Backend>> {
        return std::unique_ptr<backend::Backend>(
            std::make_unique<sim::ClusterSim>(recipe.sim, workload, cost));
      }};
}

/// Every multiset of `tps` (descending) summing to `gpus`.
void Multisets(const std::vector<int>& tps, size_t from, int gpus, std::vector<int>& current,
               std::vector<std::vector<int>>& out) {
  if (gpus == 0) {
    out.push_back(current);
    return;
  }
  for (size_t k = from; k < tps.size(); ++k) {
    if (tps[k] > gpus) continue;
    current.push_back(tps[k]);
    Multisets(tps, k, gpus - tps[k], current, out);
    current.pop_back();
  }
}

/// Lends the waiting trainer's GPUs as instances of the largest rollout TP (a hybrid layout).
class Lender : public planner::Planner {
 public:
  explicit Lender(int gpus_per_node) : gpus_per_node_(gpus_per_node) {}
  std::string_view Name() const override { return "lender"; }
  Result<planner::Plan> Initial(const planner::PlanContext&) override {
    return Status::Internal("not a planner");
  }
  std::optional<backend::Layout> IdleTrainerLayout(const backend::Layout& current) const override {
    int tp = 1;
    for (const backend::InstanceSpec& i : current.instances) tp = std::max(tp, i.tp);
    return planner::LendTrainerGpus(current, gpus_per_node_, tp);
  }

 private:
  int gpus_per_node_;
};

struct Candidate {
  backend::Layout layout;
  bool lend = false;
  bool chosen = false;
  std::optional<planner::CandidatePlan> predicted;
  double measured_step_s = 0;
  double measured_rollout_s = 0;
  std::string error;
};

std::string Name(const Candidate& c) { return c.layout.ToString() + (c.lend ? " (lent)" : ""); }

int RunRecipe(const Options& o, const std::string& path) {
  std::vector<std::string> sets;
  if (o.steps > 0) sets.push_back(StrFormat("steps=%d", o.steps));
  if (o.seed >= 0) sets.push_back(StrFormat("seed=%d", o.seed));
  auto parsed = recipe::ParseRecipeFile(path, sets);
  if (!parsed.ok() || !parsed->diagnostics.empty()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(),
                 parsed.ok() ? recipe::DiagnosticsToStatus(parsed->diagnostics).ToString().c_str()
                             : parsed.status().ToString().c_str());
    return 1;
  }
  const recipe::Recipe& r = parsed->recipe;
  const recipe::SystemSpec* system = nullptr;
  for (const recipe::SystemSpec* s : experiment::AllSystems(r)) {
    if (o.system.empty() ? (s->planner == "grp" || s->planner == "no-ehp") : s->name == o.system) {
      system = s;
      break;
    }
  }
  if (system == nullptr) {
    std::fprintf(stderr, "%s: no system %s\n", path.c_str(),
                 o.system.empty() ? "planned by grp" : o.system.c_str());
    return 1;
  }
  auto made_workload = workload::MakeWorkload(r.workload, r.seed);
  auto made_cost = model::MakeCostModel(r);
  for (const Status& status : {made_workload.status(), made_cost.status()}) {
    if (!status.ok()) {  // it names the recipe
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
  }
  auto workload = std::move(*made_workload);
  auto cost = std::move(*made_cost);
  const experiment::SequenceSizes sizes =
      experiment::SampleSequenceSizes(*workload, r.rl.group_size, r.steps);
  planner::GrpPlanner grp(planner::GrpOptions(), planner::kGrpName);
  {
    // The system's own options (rollout sizes, homogeneous, bounds).
    auto made = planner::BuiltinPlanners().Create(system->planner, system->planner_options);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      return 1;
    }
    grp =
        planner::GrpPlanner(static_cast<planner::GrpPlanner&>(**made).options(), planner::kGrpName);
  }
  const planner::PlanContext context = experiment::MakePlanContext(r, *system, cost.get(), sizes);
  auto plan = grp.Initial(context);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), plan.status().ToString().c_str());
    return 1;
  }
  auto searched = grp.SearchNow();
  if (!searched.ok()) return 1;
  const int gpn = r.cluster.gpus_per_node;
  const int total = r.cluster.total_gpus();
  const int step = o.budget_step > 0 ? o.budget_step : gpn;
  std::vector<Candidate> candidates;
  std::set<std::string> seen;
  auto add = [&](backend::Layout layout, bool lend, bool chosen) {
    const std::string key = layout.ToString() + (lend ? " lend" : "");
    if (!seen.insert(key).second) {
      for (Candidate& c : candidates) {
        c.chosen = c.chosen || (chosen && c.layout.ToString() + (c.lend ? " lend" : "") == key);
      }
      return;
    }
    candidates.push_back({std::move(layout), lend, chosen, std::nullopt, 0, 0, ""});
  };
  const bool chosen_lends = grp.IdleTrainerLayout(plan->layout).has_value();
  add(plan->layout, chosen_lends, true);
  const std::vector<int> sizes_desc = {8, 4, 2, 1};
  for (const planner::CandidatePlan& c : searched->top) {
    const bool keep =
        c.colocated || c.train_gpus() % step == 0 || c.train_gpus() == plan->layout.train_gpus;
    if (!keep) continue;
    auto own = planner::LayoutOf(c, gpn);
    if (own.ok()) add(*own, c.lend_trainer, false);
    const int rollout = c.colocated ? total : total - c.train_gpus();
    std::vector<std::vector<int>> multisets;
    if (o.every_multiset) {
      std::vector<int> current;
      Multisets(sizes_desc, 0, rollout, current, multisets);
    } else {
      for (int tp : sizes_desc) {
        if (tp <= gpn && rollout % tp == 0) multisets.push_back(std::vector<int>(rollout / tp, tp));
      }
    }
    for (const std::vector<int>& tps : multisets) {
      planner::CandidatePlan variant = c;
      variant.rollout_tps = tps;
      auto layout = planner::LayoutOf(variant, gpn);
      if (!layout.ok()) continue;
      add(*layout, false, false);
      if (!c.colocated && r.StalenessFor(*system) > 0) add(*layout, true, false);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const Lender lender(gpn);
  for (Candidate& c : candidates) {
    c.predicted = grp.Predict(c.layout, c.lend);
    planner::Plan fixed;
    fixed.layout = c.layout;
    auto measured = experiment::MeasurePlan(r, *system, fixed, c.lend ? &lender : nullptr,
                                            OnTheSimulator(), o.verbose);
    if (!measured.ok()) {
      c.error = measured.status().message();
      continue;
    }
    c.measured_step_s = measured->phases.step_s;
    c.measured_rollout_s = measured->phases.rollout_s;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Candidate* best = nullptr;
  const Candidate* chosen = nullptr;
  for (const Candidate& c : candidates) {
    if (!c.error.empty()) continue;
    if (best == nullptr || c.measured_step_s < best->measured_step_s) best = &c;
    if (c.chosen) chosen = &c;
  }
  std::printf("%s (%s, %d GPUs, %d steps, seed %llu): %zu layouts simulated in %.1f s\n",
              r.name.c_str(), system->name.c_str(), total, r.steps,
              static_cast<unsigned long long>(r.seed), candidates.size(), wall);
  if (o.verbose) {
    std::vector<const Candidate*> order;
    for (const Candidate& c : candidates) order.push_back(&c);
    std::stable_sort(order.begin(), order.end(), [](const Candidate* a, const Candidate* b) {
      const double x = a->error.empty() ? a->measured_step_s : 1e300;
      const double y = b->error.empty() ? b->measured_step_s : 1e300;
      return x < y;
    });
    std::printf("  %-62s %10s %10s %7s %10s %10s %10s %9s\n", "layout", "pred step", "sim step",
                "error", "pred roll", "sim roll", "pred train", "occupancy");
    for (const Candidate* c : order) {
      if (!c->error.empty()) {
        std::printf("  %-62s failed: %s\n", Name(*c).c_str(), c->error.c_str());
        continue;
      }
      const double pred = c->predicted ? c->predicted->step_s : 0;
      const double occupancy = c->predicted ? c->predicted->paced_occupancy : 0;
      std::printf("  %-62s %10.1f %10.1f %+6.1f%% %10.1f %10.1f %10.1f %9s%s\n", Name(*c).c_str(),
                  pred, c->measured_step_s, 100 * (pred / c->measured_step_s - 1),
                  c->predicted ? c->predicted->rollout_s : 0, c->measured_rollout_s,
                  c->predicted ? c->predicted->train_s + c->predicted->sync_s : 0,
                  occupancy > 0 ? StrFormat("%.2f", occupancy).c_str() : "-",
                  c->chosen ? "  <- chosen" : "");
    }
  }
  if (best == nullptr || chosen == nullptr) {
    std::printf("  the chosen plan failed in simulation\n");
    return 1;
  }
  std::printf("  chosen: %s, %.1f s a step\n  best:   %s, %.1f s a step\n  regret: %.1f%%\n",
              Name(*chosen).c_str(), chosen->measured_step_s, Name(*best).c_str(),
              best->measured_step_s, 100 * (chosen->measured_step_s / best->measured_step_s - 1));
  return 0;
}

}  // namespace
}  // namespace libra

int main(int argc, char** argv) {
  libra::TuneAllocator();  // as the libra binary runs
  libra::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--steps") {
      o.steps = std::atoi(next().c_str());
    } else if (arg == "--seed") {
      o.seed = std::atoi(next().c_str());
    } else if (arg == "--system") {
      o.system = next();
    } else if (arg == "--budget-step") {
      o.budget_step = std::atoi(next().c_str());
    } else if (arg == "--every-multiset") {
      o.every_multiset = true;
    } else if (arg == "--verbose") {
      o.verbose = true;
    } else {
      o.recipes.push_back(arg);
    }
  }
  if (o.recipes.empty()) {
    const std::string dir = std::string(LIBRA_SOURCE_DIR) + "/recipes/";
    o.recipes = {dir + "quickstart.toml", dir + "paper/r2e-gym-qwen3-14b.toml",
                 dir + "paper/search-r1-qwen3-14b.toml", dir + "paper/dapo-math-qwen3-14b.toml",
                 dir + "paper/swe-long-qwen3-14b.toml"};
  }
  int failures = 0;
  for (const std::string& path : o.recipes) failures += libra::RunRecipe(o, path);
  return failures == 0 ? 0 : 1;
}
