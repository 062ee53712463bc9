#include "planner/planner.h"

#include "common/strings.h"

namespace libra::planner {

int ReadRolloutTp(recipe::OptionReader& reader) {
  const int tp = static_cast<int>(reader.Int("rollout_tp", 1));
  if (tp != 1 && tp != 2 && tp != 4 && tp != 8) {
    reader.Error("rollout_tp", StrFormat("must be 1, 2, 4 or 8 (got %d)", tp));
  }
  return tp;
}

Status CheckRolloutTp(int tp, int gpus_per_node) {
  if (tp > gpus_per_node || gpus_per_node % tp != 0) {
    return Status::Unschedulable(
        StrFormat("rollout_tp = %d does not divide gpus_per_node = %d", tp, gpus_per_node));
  }
  return Status();
}

Result<std::vector<backend::InstanceSpec>> PackInstances(int gpus_per_node, int first_gpu, int gpus,
                                                         int tp) {
  std::vector<backend::InstanceSpec> instances;
  int gpu = first_gpu;
  const int end = first_gpu + gpus;
  while (gpu < end) {
    const int node = gpu / gpus_per_node;
    const int node_end = std::min(end, (node + 1) * gpus_per_node);
    const int free = node_end - gpu;
    if (free < tp || free % tp != 0) {
      return Status::Unschedulable(
          StrFormat("%d rollout GPU%s on node %d cannot be split into TP-%d instances (an instance "
                    "never spans nodes)",
                    free, free == 1 ? "" : "s", node, tp));
    }
    for (; gpu + tp <= node_end; gpu += tp) {
      backend::InstanceSpec spec;
      spec.id = InstanceId(static_cast<int64_t>(instances.size()));
      spec.tp = tp;
      spec.node = node;
      spec.first_gpu = gpu;
      instances.push_back(spec);
    }
  }
  return instances;
}

}  // namespace libra::planner
