// ElasticPool: moves GPUs between rollout and training while the run goes on, without blocking
// it and without losing a trajectory. A pure state machine: the coordinator tells it what the
// instances are doing and submits the layouts it hands out.
//
// A transition from the current layout to a target:
//   kIdle --Begin(target)--> kDraining --Ready(...) returns the target--> kSwitching
//        --Applied()--> kIdle (current = target)
// * kDraining: the rollout instances that the target does not keep (leaving()) stop taking new
//   turns (Accepting() is false, the coordinator marks them unavailable to the router), so the
//   next turns of their trajectories are routed elsewhere; the turns already on them finish.
// * Ready(active, step_boundary) hands out the target once every leaving instance has no
//   unfinished turn and the trainer is between steps (a worker joins training, and leaves it, at
//   a step boundary). A target that only adds instances has nothing to drain.
// * kSwitching: the backend switches the workers' roles (loading training state or rollout
//   weights: the cost model's role-switch time); Applied() when it reports the new layout.
// Instances are kept by position: instance i is kept when the target's instance i has the same
// id, TP and GPUs (planners pack rollout on the first GPUs, so growing or shrinking training
// changes only the last instances). Workers move in whole training replicas: when the training
// TP and PP stay, the change in training GPUs is a multiple of TP x PP.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/enum_names.h"
#include "common/status.h"

namespace libra::planner {

enum class PoolPhase { kIdle, kDraining, kSwitching };

/// "idle", "draining", "switching".
constexpr std::array<EnumName<PoolPhase>, 3> EnumTable(PoolPhase) {
  return {{{PoolPhase::kIdle, "idle"},
           {PoolPhase::kDraining, "draining"},
           {PoolPhase::kSwitching, "switching"}}};
}

/// For each instance of `from`, whether `to` keeps it (same position, id, TP and GPUs).
std::vector<bool> KeptInstances(const backend::Layout& from, const backend::Layout& to);

class ElasticPool {
 public:
  explicit ElasticPool(backend::Layout current);

  const backend::Layout& current() const { return current_; }
  PoolPhase phase() const { return phase_; }
  /// The layout being moved to (kDraining, kSwitching).
  const std::optional<backend::Layout>& target() const { return target_; }
  /// Indexes (into current().instances) of the instances leaving rollout.
  const std::vector<size_t>& leaving() const { return leaving_; }

  /// Starts moving to `target`. kInvalidArgument while another transition is in flight, or when
  /// the target is the current layout, has no rollout instance or no training GPU (except a
  /// lend: Planner::IdleTrainerLayout, which keeps every current instance), uses more GPUs than
  /// the current one, or moves part of a training replica.
  Status Begin(backend::Layout target);
  /// Whether the instance at `index` of current() takes new turns.
  bool Accepting(size_t index) const;
  /// The layout to submit now, or nullopt: `active` holds the unfinished turns of each instance
  /// of current() (same order); `step_boundary` is whether the trainer is between steps.
  /// Moves to kSwitching when it returns a layout.
  std::optional<backend::Layout> Ready(std::span<const int> active, bool step_boundary);
  /// The backend reports the target applied: it becomes current, and the pool is idle.
  /// REQUIRES: phase() == kSwitching.
  void Applied();
  /// Abandons a transition that is still draining: the leaving instances take turns again.
  /// No-op when idle; REQUIRES: phase() != kSwitching.
  void Cancel();

 private:
  backend::Layout current_;
  PoolPhase phase_ = PoolPhase::kIdle;
  std::optional<backend::Layout> target_;
  std::vector<size_t> leaving_;
};

}  // namespace libra::planner
