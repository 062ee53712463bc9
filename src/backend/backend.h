// Backend: the seam between the coordinator and the world it drives. The coordinator submits
// actions (start a turn on an instance, run a tool, train, sync weights, lay out the GPUs) and
// waits for events (turn done, tool done, train done, sync done). The simulator plays the world in
// virtual time; the cluster backend drives real processes. The coordinator never reads a clock:
// the time of each event comes with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/train_layout.h"
#include "workload/outcomes.h"

namespace libra::backend {

/// One rollout instance: TP `tp` on GPUs [first_gpu, first_gpu + tp) of node `node`.
struct InstanceSpec {
  InstanceId id;
  int tp = 1;
  int node = 0;
  int first_gpu = 0;
  bool operator==(const InstanceSpec&) const = default;
};

/// How the GPUs are used: training GPUs and rollout instances.
struct Layout {
  /// GPUs of the trainer.
  int train_gpus = 0;
  /// How the trainer's GPUs are used (its gpus() equals train_gpus).
  model::TrainLayout train;
  std::vector<InstanceSpec> instances;
  /// Training and rollout time-share the same GPUs (rollout pauses while training).
  bool colocated = false;

  int rollout_gpus() const;
  /// "train 8 | rollout tp1x8", for logs and the decisions table.
  std::string ToString() const;
  bool operator==(const Layout&) const = default;
};

// ---- Actions (coordinator -> backend) ----------------------------------------------------------

/// Sets the layout. Only before the first turn, for now.
struct ApplyLayout {
  Layout layout;
};

/// Generates one turn of a trajectory on an instance, until a tool call or the end.
struct StartTurn {
  TrajectoryId trajectory;
  int64_t prompt = 0;
  int sample = 0;
  int turn = 0;
  InstanceId instance;
  /// Policy version that generates the trajectory (fixed at its first turn).
  int policy_version = 0;
  /// Tokens of context before this turn (prompt + generated + tool outputs so far).
  int64_t context_tokens = 0;
  /// The policy's modelled skill (workload::SkillModel): simulated backends draw rewards from it;
  /// real backends ignore it (a real policy's reward is measured).
  double skill = 0;
  /// The router's scheduling hints (sched::RouteDecision): the turn's priority (higher first,
  /// unset = first come, first served), whether the trajectory's KV moves from the instance that
  /// cached it instead of being prefilled again, and seconds of setup from the start of the
  /// preceding tool call. The simulator models all three; the cluster backend ignores them.
  std::optional<double> priority{};
  bool move_kv = false;
  double setup_s = 0;
};

/// Runs the tool the trajectory's last turn called.
struct RunTool {
  TrajectoryId trajectory;
  std::string tool;
};

/// Trains one step on a batch of sequences (their total lengths in tokens).
struct Train {
  int step = 0;
  std::vector<int64_t> sequence_tokens;
  /// The trajectory of each sequence (a real trainer trains on their token ids).
  std::vector<TrajectoryId> trajectories{};
  /// Group-normalised advantage of each sequence (a real trainer weighs its loss by them).
  std::vector<double> advantages{};
};

/// Pushes the trainer's weights of `version` to every rollout instance.
struct SyncWeights {
  int version = 0;
};

/// Scores policy `version` on held-out prompts, on backends that measure rewards
/// (Backend::ScoresEvaluations): each prompt runs as a whole trajectory on the rollout engines
/// and the reward command scores it. The engines load `version` first when they hold another.
struct Evaluate {
  int version = 0;
  /// The held-out prompts (their ids, as the prompt command gets them).
  std::vector<int64_t> prompts;
};

using Action = std::variant<ApplyLayout, StartTurn, RunTool, Train, SyncWeights, Evaluate>;

// ---- Events (backend -> coordinator) -----------------------------------------------------------

struct TurnDone {
  TrajectoryId trajectory;
  InstanceId instance;
  int64_t generated_tokens = 0;
  workload::TurnEnd end = workload::TurnEnd::kStop;
  /// The tool called (end == kToolCall).
  std::string tool;
  /// The trajectory's reward (end != kToolCall).
  double reward = 0;
  /// When generation of this turn started (after any queueing on the instance).
  double started_at = 0;
  /// The prompt's real length in tokens, reported by real backends on a trajectory's first turn
  /// (the workload model's prompt length is only an estimate there).
  std::optional<int64_t> prompt_tokens{};
};

/// A turn that could not finish (its engine died, or was dropped from the plan). Nothing of it
/// is kept: the trajectory is as it was before the turn, and the coordinator routes the turn
/// again.
struct TurnFailed {
  TrajectoryId trajectory;
  InstanceId instance;
  std::string reason;
  /// The backend gave up on the trajectory (its turn failed every retry): the coordinator drops
  /// it (a "fault" event) and draws its sample again as a new trajectory, so that its group
  /// stays whole.
  bool dropped = false;
};

/// An instance stopped (up = false) or resumed taking turns: an engine died and is being
/// restarted, was restarted, or was dropped for good. Its turns in flight fail separately.
struct InstanceHealth {
  InstanceId instance;
  bool up = true;
  std::string reason;
};

/// Something a run's record should show that is not a turn, a tool call, a step or a sync: a
/// fault, a restart, a role switch of real processes ("fault", "restart", "switch").
struct Incident {
  std::string kind;
  std::string resource;
  std::string detail;
  double started_at = 0;
};

struct ToolDone {
  TrajectoryId trajectory;
  workload::ToolStatus status = workload::ToolStatus::kSuccess;
  int64_t output_tokens = 0;
  double started_at = 0;
};

struct TrainDone {
  int step = 0;
  double started_at = 0;
  /// Real trainers: how far the trainer's log-probabilities of the trained tokens were from the
  /// engines' (StepRecord::logprob_diff, clip_fraction); unset when unknown.
  std::optional<double> logprob_diff{};
  std::optional<double> clip_fraction{};
  /// Non-empty when the run must stop after recording this step (they diverged past the
  /// recipe's threshold): the error to stop with.
  std::string halt{};
};

struct SyncDone {
  int version = 0;
  double started_at = 0;
};

struct LayoutApplied {};

/// The outcome of an Evaluate: the mean reward of the held-out prompts; unset when the backend
/// could not evaluate the version (`why` says so).
struct EvalDone {
  int version = 0;
  std::optional<double> score;
  std::string why{};
  double started_at = 0;
};

using EventWhat = std::variant<TurnDone, ToolDone, TrainDone, SyncDone, LayoutApplied, TurnFailed,
                               InstanceHealth, Incident, EvalDone>;

struct Event {
  /// Seconds since the run started (virtual in the simulator).
  double at = 0;
  EventWhat what;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// "sim", "cluster".
  virtual std::string_view Name() const = 0;
  /// Accepts an action; never blocks. Its outcome arrives later as an event.
  virtual Status Submit(const Action& action) = 0;
  /// Returns the next events, all at one time and in a fixed order; blocks (real backends) or
  /// advances virtual time (the simulator). Empty when nothing is in flight.
  virtual Result<std::vector<Event>> Wait() = 0;
  /// Wait, into `events` (its contents replaced): a caller that waits in a loop keeps one vector
  /// and its capacity. The default calls Wait.
  virtual Status WaitInto(std::vector<Event>* events) {
    LIBRA_ASSIGN_OR_RETURN(*events, Wait());
    return Status();
  }
  /// Tokens the trajectory of `turn` (its prompt, sample, version and skill) generates in all,
  /// when the backend knows the future (a simulator); nullopt on a real cluster.
  virtual std::optional<int64_t> OracleTrajectoryTokens(const StartTurn& /*turn*/) const {
    return std::nullopt;
  }
  /// Whether the backend measures evaluation scores (Evaluate). When it does not (a simulator),
  /// the coordinator's skill model gives each version's score.
  virtual bool ScoresEvaluations() const { return false; }
  /// GPU-seconds the rollout instances have spent working so far, when the backend knows it.
  virtual std::optional<double> RolloutBusyGpuSeconds() const { return std::nullopt; }
};

}  // namespace libra::backend
