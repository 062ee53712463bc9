// InstanceIndex: kept by whoever owns the instance list (the coordinator) next to it, and told
// of every change, so that routers need not scan every instance for each decision: the available
// instances by active count, and an epoch that moves whenever the list or an availability
// changes (routers that index the instances themselves rebuild then).
#pragma once

#include <cstdint>
#include <span>

#include "sched/load_levels.h"
#include "sched/router.h"

namespace libra::sched {

class InstanceIndex {
 public:
  /// A new instance list.
  void Reset(std::span<const InstanceState> instances);
  /// After instances[i] changed (its active count or availability).
  void Update(std::span<const InstanceState> instances, size_t i);

  size_t size() const { return active_.size(); }
  /// Moves whenever the list or an instance's availability changes; not on active counts.
  uint64_t epoch() const { return epoch_; }
  /// The available instances, by active count.
  const LoadLevels& active() const { return active_; }

 private:
  LoadLevels active_;
  uint64_t epoch_ = 0;
};

}  // namespace libra::sched
