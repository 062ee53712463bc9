// libra_plan_bench: how fast the global resource planner's search (Algorithm 1, planner/search.h)
// is. Times Search for the paper's setting (48 A800 as 6 x 8, Qwen3-14B, 256 trajectories a
// step, in the free space and in the paper's constrained one) and for 1,024 and 8,192 H100
// (128 and 1,024 x 8, Qwen3-32B, 2,048 and 16,384 trajectories a step), on r2e-gym-like lengths,
// and prints the milliseconds and the chosen plan. Not a test: run it by hand (docs/benchmarks.md).
// Arguments, when given, keep only the scenarios whose names start with one of them:
//   libra_plan_bench paper-48 large-1024
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/allocator.h"
#include "common/rng.h"
#include "model/catalog.h"
#include "model/cost_model.h"
#include "planner/search.h"

namespace {

using libra::planner::PipelineShape;
using libra::planner::RequestSample;
using libra::planner::SearchSpace;

/// r2e-gym-like trajectories: prompts around 1,500 tokens, log-normal generated tokens with a
/// median of 4,000 (at most 20,000), tool output around 500.
std::vector<RequestSample> History(int count, uint64_t seed) {
  libra::Rng rng(seed);
  std::vector<RequestSample> out;
  for (int i = 0; i < count; ++i) {
    const int64_t prompt = rng.UniformInt(1200, 1800);
    const int64_t generated =
        std::min<int64_t>(20000, std::llround(rng.LogNormal(std::log(4000.0), 0.8)));
    out.push_back({prompt, generated, rng.UniformInt(300, 700)});
  }
  return out;
}

struct Scenario {
  std::string name;
  std::string gpu;
  std::string model;
  SearchSpace space;
  PipelineShape shape;
  int history = 0;
  int repeats = 1;
};

int Run(const Scenario& s) {
  const libra::model::CostModelContext context{libra::model::FindGpu(s.gpu).value(),
                                               libra::model::FindModel(s.model).value(),
                                               s.space.gpus_per_node};
  std::unique_ptr<libra::model::CostModel> cost =
      libra::model::BuiltinCostModels()
          .Create("roofline", context, libra::recipe::OptionTable())
          .value();
  const std::vector<RequestSample> history = History(s.history, 1);
  std::vector<double> ms;
  libra::Result<libra::planner::SearchResult> result = libra::Status::Internal("not run");
  for (int r = 0; r < s.repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    result = libra::planner::Search(*cost, s.space, s.shape, history);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  if (!result.ok()) {
    std::printf("%s: %s\n", s.name.c_str(), result.status().ToString().c_str());
    return 1;
  }
  std::sort(ms.begin(), ms.end());
  const libra::planner::SearchTrace& t = result->trace;
  std::printf("%s: %d GPUs (%d x %d %s), %s, %d trajectories a step, staleness %d\n",
              s.name.c_str(), s.space.nodes * s.space.gpus_per_node, s.space.nodes,
              s.space.gpus_per_node, s.gpu.c_str(), s.model.c_str(), s.shape.batch_trajectories,
              s.shape.staleness);
  std::printf("  search: min %.2f ms, median %.2f ms, max %.2f ms over %d runs\n", ms.front(),
              ms[ms.size() / 2], ms.back(), s.repeats);
  std::printf(
      "  trace: %d budgets, %d tree nodes, %lld DP cells, %lld segment evaluations (%lld "
      "estimated)\n",
      t.budgets, t.train_nodes, static_cast<long long>(t.dp_cells),
      static_cast<long long>(t.segment_evaluations), static_cast<long long>(t.segment_estimates));
  std::printf("  best: %s\n", result->best ? result->best->ToString().c_str() : "no feasible plan");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  libra::TuneAllocator();  // as the libra binary runs
  std::vector<Scenario> scenarios;
  {
    Scenario s;
    s.name = "paper-48 (free space)";
    s.gpu = "A800-80G";
    s.model = "Qwen3-14B";
    s.space.nodes = 6;
    s.space.gpus_per_node = 8;
    s.shape.batch_trajectories = 256;
    s.shape.staleness = 2;
    s.history = 256;
    s.repeats = 20;
    scenarios.push_back(s);
    s.name = "paper-48 (pattern [1 1 2 4], TP8, multiples of 8)";
    s.space.node_pattern = {1, 1, 2, 4};
    s.space.train_tps = {8};
    s.space.train_pps = {1};
    s.space.micro_batches = {1};
    s.space.granularity = 8;
    s.space.min_train_gpus = 8;
    s.space.min_rollout_gpus = 8;
    scenarios.push_back(s);
  }
  {
    Scenario s;
    s.name = "large-1024 (free space)";
    s.gpu = "H100-80G";
    s.model = "Qwen3-32B";
    s.space.nodes = 128;
    s.space.gpus_per_node = 8;
    s.shape.batch_trajectories = 2048;
    s.shape.staleness = 1;
    s.history = 4096;
    s.repeats = 5;
    scenarios.push_back(s);
    s.name = "large-8192 (free space)";
    s.space.nodes = 1024;
    s.shape.batch_trajectories = 16384;
    s.repeats = 3;
    scenarios.push_back(s);
  }
  int failures = 0;
  for (const Scenario& s : scenarios) {
    const bool wanted = argc < 2 || std::any_of(argv + 1, argv + argc, [&](const char* prefix) {
                          return s.name.rfind(prefix, 0) == 0;
                        });
    if (wanted) failures += Run(s);
  }
  return failures == 0 ? 0 : 1;
}
