// The rows libra records: plain values shared by the coordinator (which produces them), the store
// (which persists them) and the reports and calibration (which read them). A module of its own, so
// that reading records needs no database.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace libra::records {

/// A process, named so that a recycled pid or a reboot is not taken for it: the host, the pid,
/// and the boot and start time of the process ("<boot id>/<start ticks>"). Which libra records a
/// run (store/run_owner.h tells whether it still runs).
struct RunOwner {
  std::string host;
  int64_t pid = 0;
  std::string start;

  bool operator==(const RunOwner&) const = default;
  /// "pid 1234 on host node-1".
  std::string ToString() const;
};

/// Run status values stored in runs.status.
inline constexpr const char* kRunRunning = "running";
inline constexpr const char* kRunOk = "ok";
inline constexpr const char* kRunFailed = "failed";
inline constexpr const char* kRunInterrupted = "interrupted";

/// One experiment run: a system on a recipe with a seed (table `runs`).
struct RunInfo {
  int64_t id = 0;       // assigned by the store
  std::string name;     // the recipe's name
  std::string system;   // the system's name ([system] or a baseline)
  std::string router;   // router registry name
  std::string planner;  // planner registry name
  std::string backend;  // the recipe's backend: "sim" or "cluster" (Simulated())
  uint64_t seed = 0;
  int steps_planned = 0;
  int gpus = 0;               // GPUs in the cluster
  std::string recipe_source;  // path of the recipe file
  std::string recipe_toml;    // the recipe as given (after --set), with all its systems
  /// The run's fully resolved recipe: every default filled in, its own system as [system]; what
  /// `libra run` repeats the run from. Empty for runs recorded before schema version 8.
  std::string resolved_recipe;
  std::string git_revision;  // source revision of the libra binary
  std::string libra_version;
  std::string started_at;  // ISO 8601 UTC, wall clock
  std::string ended_at;    // empty while running
  std::string status = kRunRunning;
  std::string error;  // why it failed, when it did
  std::optional<int64_t> comparison_id;
  /// Trajectories/s no run of this cluster, model and workload can exceed (the perfect-balance
  /// bound); unset when the backend has none.
  std::optional<double> throughput_bound;
  /// How the system was configured: "planner" (Libra: its planner decides), the knob settings of
  /// a tuned peer ("train_gpus=16 rollout_tp=8"), or empty: as the recipe writes it.
  std::string configuration;
  /// The tuning (table `tunings`) its configuration came from.
  std::optional<int64_t> tuning_id;
  /// The sensitivity scenario it ran under (`compare --sensitivity`); empty for the recipe as is.
  std::string scenario;
  /// The staleness bound in force (unset in runs recorded before it was kept).
  std::optional<int> staleness;
  /// The evaluation score of the initial policy (version 0) on the held-out prompts.
  std::optional<double> eval_initial;
  /// The run's own folder (logs, weights, scratch of a cluster run), relative to the database's
  /// folder, e.g. "runs/libra-3-5f2a9c1e": unique per run and database. Assigned by the store;
  /// empty for runs recorded before schema version 8, whose folder is "runs/<id>".
  std::string folder;
  /// The libra process recording the run (while it is `running`); unset when not recorded.
  RunOwner owner;

  /// Whether the run was simulated: its times are virtual seconds, and it replays exactly.
  bool Simulated() const { return backend == "sim"; }

  bool operator==(const RunInfo&) const = default;
};

/// One training step (table `steps`). Times are seconds since the run's start: virtual seconds
/// in the simulator, wall seconds on a real cluster.
struct StepRecord {
  int step = 0;
  double start_s = 0;    // when the previous step's train finished (0 for step 0)
  double end_s = 0;      // when this step's train (and sync, if any) finished
  double rollout_s = 0;  // first turn started -> last trajectory of the batch done
  double train_s = 0;    // the train step itself
  double sync_s = 0;     // weight sync after this step (0 when none)
  double wait_s = 0;     // the trainer idled waiting for this batch
  int trajectories = 0;
  int64_t turns = 0;
  int64_t tool_calls = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double reward_mean = 0;
  int policy_version = 0;  // version the batch trained (the step's input weights)
  int max_lag = 0;         // the largest policy lag of a sample in the batch
  int rollout_gpus = 0;
  int train_gpus = 0;
  /// Fraction of the cluster's GPU-time in this step spent generating or training, and the
  /// GPU-seconds left idle (bubbles, waits, syncs); unset when the backend cannot tell.
  std::optional<double> gpu_util;
  std::optional<double> idle_gpu_s;
  /// What the planner predicted this step would take (unset when it made no prediction).
  std::optional<double> predicted_step_s;
  /// The evaluation score of the version this step trained (policy_version + 1) on held-out
  /// prompts: modelled in the simulator, measured on real runs; unset on steps not evaluated.
  std::optional<double> eval_score;
  /// Real trainers: the mean absolute difference between the trainer's log-probability of each
  /// trained token (before the step's update) and the engine's, and the fraction of trained
  /// tokens whose probability ratio was clipped; unset when the trainer does not report them.
  std::optional<double> logprob_diff{};
  std::optional<double> clip_fraction{};

  bool operator==(const StepRecord&) const = default;
};

/// One finished trajectory (table `trajectories`).
struct TrajectoryRecord {
  int64_t id = 0;      // per run
  int64_t prompt = 0;  // prompt index (a GRPO group shares it)
  int sample = 0;      // index within the group
  int step = 0;        // the batch it trained in
  int version = 0;     // policy version that generated it
  int turns = 0;
  int tool_calls = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double start_s = 0;
  double end_s = 0;
  double reward = 0;
  bool truncated = false;
  std::string instances;  // instance id of each turn, comma separated
  int migrations = 0;     // turns that ran on another instance than the turn before

  bool operator==(const TrajectoryRecord&) const = default;
};

/// One turn of a finished trajectory (table `turns`): what a trace needs to replay it.
struct TurnRecord {
  int64_t trajectory = 0;  // TrajectoryRecord::id
  int turn = 0;            // 0-based
  int64_t instance = 0;    // rollout instance that generated it
  double start_s = 0;      // generation started (after queueing)
  double end_s = 0;        // generation ended
  int64_t generated_tokens = 0;
  std::string end;          // "tool_call", "stop", "truncated"
  std::string tool;         // the tool called ("" unless end is tool_call)
  std::string tool_status;  // "success", "failure", "timeout" ("" without a tool)
  int64_t tool_output_tokens = 0;
  double tool_latency_s = 0;

  bool operator==(const TurnRecord&) const = default;
};

/// One planner decision (table `decisions`).
struct DecisionRecord {
  int64_t seq = 0;  // per run
  double at_s = 0;
  int step = 0;
  std::string planner;
  std::string reason;
  int train_gpus = 0;
  int rollout_gpus = 0;
  std::string layout;                      // e.g. "train 8 | rollout tp1x8"
  std::optional<double> predicted_step_s;  // the plan chosen (or kept)
  bool applied = false;
  /// What made the planner look ("initial", "interval", "imbalance", ...).
  std::string trigger;
  /// Predicted step time of the plan in force when deciding.
  std::optional<double> current_step_s;
  /// Predicted seconds saved over the remaining steps, net of the transition.
  std::optional<double> gain_s;
  /// Predicted seconds the transition costs (drain, role switches, reloads).
  std::optional<double> transition_s;

  bool operator==(const DecisionRecord&) const = default;
};

/// One span of activity on a resource (table `events`): a turn on an instance, a tool call, a
/// train step, a weight sync. The timeline report is drawn from these.
struct EventRecord {
  int64_t seq = 0;   // per run
  std::string kind;  // "turn", "tool", "train", "sync"
  double start_s = 0;
  double end_s = 0;
  std::string resource;  // "instance 3", "trainer", "tools"
  std::optional<int64_t> trajectory;
  int step = 0;
  std::string detail;

  bool operator==(const EventRecord&) const = default;
};

/// Everything one finished step writes, in one transaction: the step, the trajectories it
/// trained on with their turns, the spans since the previous step and the planner's decisions.
struct StepBatch {
  StepRecord step;
  std::vector<TrajectoryRecord> trajectories;
  std::vector<TurnRecord> turns;
  std::vector<EventRecord> events;
  std::vector<DecisionRecord> decisions;
  /// The router's counters after the step (cumulative since the run started), by name.
  std::map<std::string, double> router_metrics;

  bool operator==(const StepBatch&) const = default;
};

/// One GPU measurement of a node (table `probes`, written by `libra probe`): a probe session is
/// the rows of one host with one recorded_at. Values in SI units (src/gpu/probe.h lists the kinds).
struct ProbeRecord {
  int64_t id = 0;           // assigned by the store
  std::string host;         // the node that was probed
  int gpu = -1;             // CUDA device index; -1 for a node-wide probe (NCCL)
  std::string kind;         // "hbm_copy", "gemm_bf16", "allreduce", ...
  double value = 0;         // in `unit`
  std::string unit;         // "B/s", "FLOP/s", "B", "s"
  std::string detail;       // JSON object: how it was measured
  std::string recorded_at;  // ISO 8601 UTC, the session's start
  std::string libra_version;

  bool operator==(const ProbeRecord&) const = default;
};

/// One configuration a tuning tried (table `tuning_trials`).
struct TuningTrialRecord {
  std::string configuration;     // JSON object: knob -> value
  std::optional<uint64_t> seed;  // unset: found infeasible without a run
  std::optional<double> score;
  std::string status;  // "ok", "failed", "infeasible"
  std::string error;

  bool operator==(const TuningTrialRecord&) const = default;
};

/// A search of one system's knobs (`libra tune`; table `tunings`).
struct TuningRecord {
  int64_t id = 0;   // assigned by the store
  std::string key;  // experiment::TuningKey: what the tuning is valid for
  std::string recipe;
  std::string system;
  std::string created_at;  // ISO 8601 UTC
  int budget_runs = 0;
  int steps = 0;
  std::vector<uint64_t> seeds;
  std::string objective;  // "traj/s"
  std::string winner;     // JSON object: knob -> value
  double score = 0;
  int winner_runs = 0;
  std::string libra_version;
  std::vector<TuningTrialRecord> trials;

  bool operator==(const TuningRecord&) const = default;
};

/// Runs that belong together (tables `comparisons`, `comparison_runs`).
struct ComparisonInfo {
  int64_t id = 0;
  std::string name;
  std::string created_at;        // ISO 8601 UTC
  std::vector<int64_t> run_ids;  // in the order they were added
  /// What `libra compare` was asked to run, so that an interrupted comparison can be continued
  /// (`libra compare --resume`): the systems in order, the seeds of each (`--repeat`), the reward
  /// target and the recipe (after --set). Empty (seeds 1) for comparisons recorded before schema
  /// version 8, which cannot be continued.
  std::vector<std::string> systems;
  int seeds = 1;
  std::optional<double> reward_target;
  std::string recipe_source;
  std::string recipe_toml;
  /// Whether the peers ran at their tuned configurations (`--tuned`) and the comparison is a
  /// sensitivity study (`--sensitivity`); false for comparisons recorded before schema version 9.
  bool tuned = false;
  bool sensitivity = false;

  bool operator==(const ComparisonInfo&) const = default;
};

}  // namespace libra::records
