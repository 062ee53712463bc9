// Which engine serves each rollout instance of a new layout, and what happens to the others: the
// decision behind every role switch of the cluster backend, as a pure function (no process, no
// I/O) so that it can be checked case by case.
//
// Rules, in order of preference for instance i of the new layout:
//   1. the engine that served instance i of the old layout, when it runs on the same GPUs (it may
//      still have turns in flight);
//   2. else any live engine of the old layout on the same GPUs (already drained), or a sleeping
//      engine on the same GPUs (it wakes); the lowest engine key first;
//   3. else a new engine of the instance's TP size starts, and every sleeping engine that no
//      instance takes and whose GPUs overlap the instance's stops for good.
// Engines of the old layout that serve no new instance go to sleep. Rules 2 and 3 never choose a
// dead engine; rule 1 keeps a dropped engine at its index, so its instance stays down.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace libra::cluster {

/// What the assignment needs to know of one engine.
struct EngineView {
  int64_t key = 0;
  /// Its GPUs and TP.
  backend::InstanceSpec spec;
  /// It serves an instance of the current layout.
  bool in_layout = false;
  bool sleeping = false;
  bool dead = false;
  bool operator==(const EngineView&) const = default;
};

/// One thing a layout change does to an engine, in the order it is decided.
struct EngineChange {
  enum class Kind { kSleep, kWake, kStop, kStart };
  Kind kind = Kind::kStart;
  /// The engine (kSleep, kWake, kStop); -1 for kStart.
  int64_t engine = -1;
  /// The new layout's instance it serves (kWake, kStart); -1 otherwise.
  int instance = -1;
  bool operator==(const EngineChange&) const = default;
  /// "sleep engine 3", "start instance 2", for test messages.
  std::string ToString() const;
};

struct LayoutAssignment {
  /// For each instance of the new layout, the existing engine that serves it; nullopt where a
  /// new engine starts.
  std::vector<std::optional<int64_t>> serving;
  /// Sleeps first (old layout order), then per new instance its wake, or its stops and start.
  std::vector<EngineChange> changes;
  bool operator==(const LayoutAssignment&) const = default;
};

/// Assigns engines to `instances`. `current[i]` is the engine key serving instance i of the old
/// layout (empty for the first layout); `engines` holds every engine, by ascending key.
LayoutAssignment AssignEngines(const std::vector<int64_t>& current,
                               const std::vector<EngineView>& engines,
                               const std::vector<backend::InstanceSpec>& instances);

}  // namespace libra::cluster
