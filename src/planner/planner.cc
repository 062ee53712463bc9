#include "planner/planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>

#include "common/strings.h"

namespace libra::planner {

std::vector<int> ReadTpList(recipe::OptionReader& reader, const std::string& key,
                            const std::vector<int>& default_value, bool allow_empty) {
  std::vector<int> tps;
  for (int64_t tp : reader.IntList(
           key, std::vector<int64_t>(default_value.begin(), default_value.end()), 1, 8)) {
    tps.push_back(static_cast<int>(tp));
  }
  for (int tp : tps) {
    if (tp != 1 && tp != 2 && tp != 4 && tp != 8) {
      reader.Error(key, StrFormat("must be 1, 2, 4 or 8 (got %d)", tp));
      break;
    }
  }
  if (!allow_empty && reader.Has(key) && tps.empty()) reader.Error(key, "must not be empty");
  return tps;
}

std::vector<int> ReadRolloutTps(recipe::OptionReader& reader) {
  std::vector<int> pattern;
  if (reader.Has("rollout_tps")) {
    if (reader.Has("rollout_tp")) {
      reader.Error("rollout_tps", "give rollout_tp or rollout_tps, not both");
    }
    pattern = ReadTpList(reader, "rollout_tps", {1}, /*allow_empty=*/false);
  } else {
    pattern.push_back(static_cast<int>(reader.Int("rollout_tp", 1)));
    if (const int tp = pattern.front(); tp != 1 && tp != 2 && tp != 4 && tp != 8) {
      reader.Error("rollout_tp", StrFormat("must be 1, 2, 4 or 8 (got %d)", tp));
    }
  }
  if (pattern.empty()) pattern.push_back(1);
  return pattern;
}

Result<std::vector<backend::InstanceSpec>> PackSizes(int gpus_per_node, std::vector<int> tps) {
  std::sort(tps.begin(), tps.end(), std::greater<>());
  int total = 0;
  for (int tp : tps) total += tp;
  const int nodes = (total + gpus_per_node - 1) / gpus_per_node;
  // Free GPUs per node: full nodes, the last one holds the remainder.
  std::vector<int> used(static_cast<size_t>(nodes), 0);
  std::vector<int> capacity(static_cast<size_t>(nodes), gpus_per_node);
  if (nodes > 0 && total % gpus_per_node != 0) capacity.back() = total % gpus_per_node;
  std::vector<backend::InstanceSpec> instances;
  for (int tp : tps) {
    size_t node = 0;
    while (node < used.size() && capacity[node] - used[node] < tp) ++node;
    if (node == used.size()) {
      std::vector<std::string> names;
      for (int t : tps) names.push_back(std::to_string(t));
      return Status::Unschedulable(StrFormat(
          "rollout instances of TP %s do not fit %d GPUs in nodes of %d without crossing a node",
          StrJoin(names, ",").c_str(), total, gpus_per_node));
    }
    backend::InstanceSpec spec;
    spec.tp = tp;
    spec.node = static_cast<int>(node);
    spec.first_gpu = static_cast<int>(node) * gpus_per_node + used[node];
    used[node] += tp;
    instances.push_back(spec);
  }
  std::stable_sort(instances.begin(), instances.end(),
                   [](const backend::InstanceSpec& a, const backend::InstanceSpec& b) {
                     return a.first_gpu < b.first_gpu;
                   });
  for (size_t i = 0; i < instances.size(); ++i)
    instances[i].id = InstanceId(static_cast<int64_t>(i));
  return instances;
}

Result<backend::Layout> SplitLayout(const model::TrainLayout& train, std::vector<int> rollout_tps,
                                    int gpus_per_node) {
  backend::Layout layout;
  LIBRA_ASSIGN_OR_RETURN(layout.instances, PackSizes(gpus_per_node, std::move(rollout_tps)));
  layout.train = train;
  layout.train_gpus = train.gpus();
  return layout;
}

Status CheckRolloutTps(const std::vector<int>& pattern, int gpus_per_node) {
  for (int tp : pattern) {
    if (tp > gpus_per_node || gpus_per_node % tp != 0) {
      return Status::Unschedulable(
          StrFormat("rollout_tp = %d does not divide gpus_per_node = %d", tp, gpus_per_node));
    }
  }
  return Status();
}

Status CheckInstancesHold(const PlanContext& context, const std::vector<int>& tps) {
  if (context.cost == nullptr) return Status();
  for (int tp : tps) {
    const int64_t capacity = context.cost->KvCapacityTokens(tp);
    if (capacity < context.max_sequence_tokens) {
      return Status::Unschedulable(StrFormat(
          "a TP-%d rollout instance of %s holds %lld tokens of KV cache, fewer than the longest "
          "context to expect (%lld tokens; an engine would not start): raise rollout_tp",
          tp, context.cost->arch().name.c_str(), static_cast<long long>(capacity),
          static_cast<long long>(context.max_sequence_tokens)));
    }
  }
  return Status();
}

std::vector<model::TrainLayout> TrainLayoutCandidates(int gpus, int gpus_per_node) {
  std::vector<model::TrainLayout> layouts;
  for (int tp : {1, 2, 4, 8}) {
    if (tp > gpus_per_node || gpus_per_node % tp != 0) continue;
    for (int pp : {1, 2, 4}) {
      if (gpus % (tp * pp) == 0) layouts.push_back({tp, pp, gpus / (tp * pp), 1});
    }
  }
  return layouts;
}

Result<model::TrainLayout> ChooseTrainLayout(const PlanContext& context, int gpus) {
  // Largest TP first, so that ties (and the choice without a cost model) favour it.
  std::vector<model::TrainLayout> candidates = TrainLayoutCandidates(gpus, context.gpus_per_node);
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const model::TrainLayout& a, const model::TrainLayout& b) { return a.tp > b.tp; });
  if (candidates.empty()) {
    return Status::Unschedulable(StrFormat("no TP x PP layout divides %d training GPUs", gpus));
  }
  if (context.cost == nullptr) return candidates.front();
  std::vector<int64_t> batch(static_cast<size_t>(std::max(1, context.batch_trajectories)),
                             context.typical_sequence_tokens);
  batch.front() = std::max(context.max_sequence_tokens, context.typical_sequence_tokens);
  std::optional<model::TrainLayout> best;
  double best_s = 0;
  double least_memory = std::numeric_limits<double>::infinity();
  for (const model::TrainLayout& layout : candidates) {
    const model::TrainEstimate e = context.cost->TrainStep(layout, model::TrainPasses(), batch);
    least_memory = std::min(least_memory, e.memory_bytes);
    if (e.oom()) continue;
    if (!best || e.step_s < best_s) {
      best = layout;
      best_s = e.step_s;
    }
  }
  if (!best) {
    return Status::Unschedulable(StrFormat(
        "training %s on %d GPUs runs out of memory in every layout (the leanest needs %.1f GB per "
        "GPU of %.1f); give training more GPUs",
        context.cost->arch().name.c_str(), gpus, least_memory / 1e9,
        context.cost->gpu().hbm_bytes / 1e9));
  }
  return *best;
}

namespace {

/// The first instance of a packing that does not fit: its node, TP, and the GPUs left there.
struct Misfit {
  int node = 0;
  int tp = 0;
  int free = 0;
};

/// Lays out PackInstances' instances in order, calling `add(spec)` for each (ids left to the
/// caller); the first that does not fit, if one does not.
template <typename Add>
std::optional<Misfit> WalkPacking(int gpus_per_node, int first_gpu, int gpus,
                                  const std::vector<int>& pattern, Add add) {
  int gpu = first_gpu;
  const int end = first_gpu + gpus;
  while (gpu < end) {
    const int node = gpu / gpus_per_node;
    const int node_end = std::min(end, (node + 1) * gpus_per_node);
    // Each node starts the pattern afresh and repeats it until its GPUs are used up.
    for (size_t k = 0; gpu < node_end; k = (k + 1) % pattern.size()) {
      const int tp = pattern[k];
      const int free = node_end - gpu;
      if (tp > free) return Misfit{node, tp, free};
      backend::InstanceSpec spec;
      spec.tp = tp;
      spec.node = node;
      spec.first_gpu = gpu;
      add(spec);
      gpu += tp;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<backend::InstanceSpec>> PackInstances(int gpus_per_node, int first_gpu, int gpus,
                                                         const std::vector<int>& pattern) {
  if (pattern.empty()) return Status::Unschedulable("no rollout TP given");
  std::vector<backend::InstanceSpec> instances;
  const std::optional<Misfit> misfit =
      WalkPacking(gpus_per_node, first_gpu, gpus, pattern, [&](backend::InstanceSpec spec) {
        spec.id = InstanceId(static_cast<int64_t>(instances.size()));
        instances.push_back(spec);
      });
  if (misfit) {
    return Status::Unschedulable(StrFormat(
        "%d rollout GPU%s left on node %d cannot hold a TP-%d instance (an instance never "
        "spans nodes)",
        misfit->free, misfit->free == 1 ? "" : "s", misfit->node, misfit->tp));
  }
  return instances;
}

bool InstancesPack(int gpus_per_node, int first_gpu, int gpus, const std::vector<int>& pattern) {
  return !pattern.empty() &&
         !WalkPacking(gpus_per_node, first_gpu, gpus, pattern, [](const backend::InstanceSpec&) {});
}

std::optional<backend::Layout> LendTrainerGpus(const backend::Layout& current, int gpus_per_node,
                                               int tp) {
  if (current.colocated || current.train_gpus <= 0 || current.instances.empty() ||
      gpus_per_node <= 0) {
    return std::nullopt;
  }
  auto added = PackInstances(gpus_per_node, current.rollout_gpus(), current.train_gpus, {tp});
  if (!added.ok()) return std::nullopt;
  backend::Layout lent = current;
  for (backend::InstanceSpec spec : *added) {
    spec.id = InstanceId(static_cast<int64_t>(lent.instances.size()));
    lent.instances.push_back(spec);
  }
  lent.train_gpus = 0;
  return lent;
}

}  // namespace libra::planner
