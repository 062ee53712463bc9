// WeightSync: the trainer's weights to the rollout engines. The trainer saves every synced
// version as weights/<policy_name> (what engines load when they start, wake or catch up), then
// either every serving engine reloads it from disk ("disk"), or the trainer broadcasts it in a
// process group with every serving engine ("distributed"), set up again whenever that set
// changes; ranks as in LayOutWeightUpdateRanks (protocol.h).
#pragma once

#include <optional>
#include <set>
#include <vector>

#include "cluster/async.h"
#include "cluster/engine_supervisor.h"
#include "cluster/protocol.h"
#include "cluster/runtime.h"
#include "cluster/trainer_supervisor.h"

namespace libra::cluster {

class WeightSync {
 public:
  /// REQUIRES: everything passed in outlives the sync.
  WeightSync(Runtime& runtime, EngineSupervisor& engines, TrainerSupervisor& trainer,
             WeightVersions& versions);
  WeightSync(const WeightSync&) = delete;
  WeightSync& operator=(const WeightSync&) = delete;

  /// Saves the trainer's start version as policy.pt (and, for a new run, as checkpoint v0).
  void SaveInitial(int start_version, Done done);
  /// Saves `version` as policy.pt and pushes it to every serving engine.
  void Sync(int version, Done done);
  /// The serving set may have changed: the next distributed sync sets up a new group.
  void Invalidate() { members_.clear(); }

 private:
  void Distribute(int version, Done done);
  void Broadcast(const std::vector<int64_t>& members, int version, Done done);

  Runtime& runtime_;
  EngineSupervisor& engines_;
  TrainerSupervisor& trainer_;
  WeightVersions& versions_;
  /// The engines in the current group and its tensors.
  std::set<int64_t> members_;
  std::vector<TensorSpec> tensors_;
  int generation_ = 0;
  std::optional<WeightUpdateGroup> group_;
};

}  // namespace libra::cluster
