// Router: decides, for every turn of every trajectory, which rollout instance serves it.
//
// Routers are pure policies: no I/O, no clock, no randomness of their own. They see a snapshot of
// the instances and the request, return a decision, and learn from observations the coordinator
// hands them. The same router code runs under the simulator and on a real cluster.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/ids.h"
#include "common/registry.h"
#include "recipe/options.h"
#include "workload/workload.h"

namespace libra::sched {

/// What a router sees of one rollout instance.
struct InstanceState {
  InstanceId id;
  int tp = 1;
  /// Turns routed to it and not yet finished (running or queued in the engine).
  int active = 0;
  /// False while the instance cannot take work (syncing weights, switching role, dead).
  bool available = true;
};

/// The tool result that preceded a turn.
struct ToolObservation {
  std::string tool;
  workload::ToolStatus status = workload::ToolStatus::kSuccess;
  int64_t output_tokens = 0;
};

/// One turn to place.
struct RouteRequest {
  TrajectoryId trajectory;
  PromptId prompt;
  int turn = 0;
  int64_t prompt_tokens = 0;
  /// Context before the turn (prompt + generated + tool outputs).
  int64_t context_tokens = 0;
  /// Tokens the trajectory generated so far.
  int64_t generated_tokens = 0;
  /// Instance of the previous turn (invalid for the first turn).
  InstanceId previous;
  /// The tool result that ended the previous turn (turn > 0).
  std::optional<ToolObservation> last_tool;
};

/// Where a turn goes. No instance means "not now": the coordinator retries when capacity frees.
struct RouteDecision {
  std::optional<InstanceId> instance;
  /// Why, for the trajectory log ("least-conn", "cap reached", ...).
  std::string reason;
};

/// What happened to a turn, for routers that learn.
struct TurnObservation {
  TrajectoryId trajectory;
  PromptId prompt;
  InstanceId instance;
  int turn = 0;
  int64_t generated_tokens = 0;
  workload::TurnEnd end = workload::TurnEnd::kStop;
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view Name() const = 0;
  /// Places one turn. `instances` lists every rollout instance in a stable order.
  virtual RouteDecision Route(const RouteRequest& request,
                              std::span<const InstanceState> instances) = 0;
  /// Called when a turn routed by this router finishes.
  virtual void OnTurnDone(const TurnObservation& /*observation*/) {}
  /// Called when a training step starts consuming a new batch.
  virtual void OnStep(int /*step*/) {}
};

using RouterRegistry = Registry<Router, const recipe::OptionTable&>;

/// Registers every built-in router (round-robin, least-conn, ...).
Status RegisterBuiltinRouters(RouterRegistry& registry);

/// A registry with the built-ins, built once.
const RouterRegistry& BuiltinRouters();

}  // namespace libra::sched
