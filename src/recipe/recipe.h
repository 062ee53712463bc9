// Recipe: one experiment, as plain values. Parsed from TOML by recipe_parser.cc (the only file that
// includes toml++), checked by ValidateRecipe (pure). Every field's default and meaning is listed
// in docs/recipes.md; keep the two in step.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/enum_names.h"
#include "recipe/options.h"

namespace libra::recipe {

// The recipe's settings that take one of a few names: parsed once here (EnumNames), compared as
// enums everywhere else.

/// Where a recipe runs: the built-in simulator, or real processes (docs/cluster.md).
enum class Backend { kSim, kCluster };
constexpr std::array<EnumName<Backend>, 2> EnumTable(Backend) {
  return {{{Backend::kSim, "sim"}, {Backend::kCluster, "cluster"}}};
}

/// What the rollouts are: the generative agentic model, or a JSONL trace replayed.
enum class WorkloadKind { kAgentic, kTrace };
constexpr std::array<EnumName<WorkloadKind>, 2> EnumTable(WorkloadKind) {
  return {{{WorkloadKind::kAgentic, "agentic"}, {WorkloadKind::kTrace, "trace"}}};
}

/// How a step's batch is formed (RlSpec::batching).
enum class Batching { kOrdered, kStream };
constexpr std::array<EnumName<Batching>, 2> EnumTable(Batching) {
  return {{{Batching::kOrdered, "ordered"}, {Batching::kStream, "stream"}}};
}

/// How the trainer's loss treats samples of older policies.
enum class Objective {
  kPpo,        // the clipped PPO/GRPO ratio against the behaviour policy (verl, most systems)
  kDecoupled,  // AReaL's decoupled objective: a proximal policy separates the two corrections
};
constexpr std::array<EnumName<Objective>, 2> EnumTable(Objective) {
  return {{{Objective::kPpo, "ppo"}, {Objective::kDecoupled, "decoupled"}}};
}

/// What happens to a trajectory's KV cache while it waits for a tool (SimSpec::kv_policy).
enum class KvPolicy { kCache, kFree };
constexpr std::array<EnumName<KvPolicy>, 2> EnumTable(KvPolicy) {
  return {{{KvPolicy::kCache, "cache"}, {KvPolicy::kFree, "free"}}};
}

/// How weights reach the rollout engines.
enum class SyncPath {
  kNccl,  // gathered on the trainer, broadcast over NCCL, loaded in place
  kDisk,  // written to shared storage, read and reloaded by the engines
};
constexpr std::array<EnumName<SyncPath>, 2> EnumTable(SyncPath) {
  return {{{SyncPath::kNccl, "nccl"}, {SyncPath::kDisk, "disk"}}};
}

/// [cluster]: the GPUs an experiment runs on.
struct ClusterSpec {
  /// GPU type from the catalog, or the name of a custom one. Default: "A800-80G".
  std::string gpu = "A800-80G";
  /// [cluster.gpu_spec]: a custom GPU's numbers (decoded by the model catalog); empty to use the
  /// catalog entry named by `gpu`.
  OptionTable gpu_spec;
  /// Number of nodes. Required.
  int nodes = 0;
  /// GPUs per node. Required.
  int gpus_per_node = 0;

  int total_gpus() const { return nodes * gpus_per_node; }
  bool operator==(const ClusterSpec&) const = default;
};

/// [model]: the policy model.
struct ModelSpec {
  /// Model name from the catalog, or the name of a custom one. Required.
  std::string name;
  /// [model.arch]: a custom model's shape (decoded by the model catalog); empty to use the
  /// catalog entry named by `name`.
  OptionTable arch;
  bool operator==(const ModelSpec&) const = default;
};

/// [cost_model]: which cost model times rollout, training and transitions, and its parameters.
struct CostModelSpec {
  /// Cost model from the registry. Default: "roofline".
  std::string name = "roofline";
  /// Every other key of [cost_model]: the model's own parameters.
  OptionTable options;
  bool operator==(const CostModelSpec&) const = default;
};

/// [workload]: what the rollouts look like: an agentic preset with overrides, or a trace.
struct WorkloadSpec {
  /// "agentic" (the generative model) or "trace" (a JSONL file replayed). Default: "agentic".
  WorkloadKind kind = WorkloadKind::kAgentic;
  /// The agentic preset: "r2e-gym", "search-r1", "dapo-math", "swe-long". Default: "r2e-gym".
  std::string preset = "r2e-gym";
  /// The trace file (kind = "trace"), relative to the recipe's folder. Required for a trace.
  std::string trace;
  /// Every other key: the agentic model's parameters, overriding the preset (decoded by the
  /// workload module; docs/workloads.md).
  OptionTable options;
  /// The recipe's folder, for a relative trace path.
  std::string base_dir;
  bool operator==(const WorkloadSpec&) const = default;
};

/// [rl]: the RL pipeline.
struct RlSpec {
  /// Prompts sampled per training step. Required.
  int prompts_per_step = 0;
  /// GRPO group size n (samples per prompt). Required.
  int group_size = 0;
  /// Maximum policy lag of a sample (0 = synchronous). Default: 0.
  int staleness = 0;
  /// Weights are synced to rollout every this many train steps. Default: 1.
  int sync_interval = 1;
  /// How a step's batch is formed: "ordered" (step k trains the groups of prompts k*P..k*P+P-1,
  /// so no sample can exceed the staleness bound) or "stream" (the first P groups to complete,
  /// whatever their prompts; a group that would exceed the bound is rejected). Default: "ordered".
  Batching batching = Batching::kOrdered;
  /// After a weight sync, in-flight trajectories generate their next turns with the new weights
  /// (interruptible rollouts) instead of the weights they started with. Default: false.
  bool partial_rollout = false;
  /// The trainer's loss, which decides what a stale sample is worth: "ppo" (the clipped ratio
  /// against the behaviour policy) or "decoupled" (AReaL's decoupled objective). Default: "ppo".
  Objective objective = Objective::kPpo;
  bool operator==(const RlSpec&) const = default;
};

/// [eval]: the evaluation score every policy version gets, from which convergence is read.
struct EvalSpec {
  /// Evaluate every this many versions (the last version always). Default: 1.
  int interval = 1;
  /// Held-out prompts evaluated (never trained on). Default: 256.
  int prompts = 256;
  /// The time-to-target column times when a run's evaluation score first reaches this fraction
  /// of the way from the initial score to the best final score among the systems compared (per
  /// seed). Default: 0.8.
  double target_fraction = 0.8;
  bool operator==(const EvalSpec&) const = default;
};

/// [sim]: the simulated engines, tools and trainer. Times come from the cost model.
struct SimSpec {
  /// Sequences an instance runs at once (the engine's max_num_seqs). Default: 256.
  int max_num_seqs = 256;
  /// Tokens one iteration processes at most, decode and prefill chunks together (the engine's
  /// max_num_batched_tokens). Default: 8192.
  int max_batched_tokens = 8192;
  /// What happens to a trajectory's KV cache while it waits for a tool: "cache" keeps it in the
  /// instance's prefix cache (evicted least recently used first under memory pressure: the
  /// engines' behaviour with prefix caching), "free" drops it. Default: "cache".
  KvPolicy kv_policy = KvPolicy::kCache;
  /// How weights reach the engines: "nccl" or "disk" (write, read, restart). Default: "nccl".
  SyncPath sync_path = SyncPath::kNccl;
  /// Tool calls running at once (a sandbox pool); more wait. 0: unlimited. Default: 0.
  int tool_concurrency = 0;
  /// Record a span per turn and tool call (the timeline's detail); off for speed. Default: false.
  bool record_events = false;
  bool operator==(const SimSpec&) const = default;
};

/// [launcher], [engine], [trainer] and [agent]: how the cluster backend (backend = "cluster")
/// starts and drives real processes. Decoded by the cluster module, which owns their schema
/// (docs/cluster.md); the simulator ignores them.
struct ClusterBackendSpec {
  OptionTable launcher;
  OptionTable engine;
  OptionTable trainer;
  OptionTable agent;
  /// The recipe's folder: relative paths and {recipe_dir} in command templates start there.
  std::string base_dir;
  bool operator==(const ClusterBackendSpec&) const = default;
};

/// [system] or one [[baselines]] entry: the mechanisms under test.
struct SystemSpec {
  /// Name shown in reports; unique within a recipe. Default for [system]: "system"; for an
  /// entry with a preset and no name, the preset's name.
  std::string name;
  /// A named system (presets.h) this entry starts from; its own keys override. Default: none.
  std::string preset;
  /// Router name from the router registry. Default: "least-conn".
  std::string router = "least-conn";
  /// [.router_options]: decoded by the router itself.
  OptionTable router_options;
  /// Planner name from the planner registry. Default: "static".
  std::string planner = "static";
  /// [.planner_options]: decoded by the planner itself.
  OptionTable planner_options;
  /// Override rl.staleness, rl.batching and rl.partial_rollout for this system (e.g. a
  /// synchronous baseline). Default: unset.
  std::optional<int> staleness;
  std::optional<Batching> batching;
  std::optional<bool> partial_rollout;
  /// Override rl.objective for this system (AReaL's decoupled loss). Default: unset.
  std::optional<Objective> objective;
  /// [.tune]: the ranges `libra tune` searches for this system's knobs (each key a knob name, its
  /// value an array of candidates), replacing the defaults the knob takes from the cluster;
  /// `enabled = false` keeps the system as written. Decoded by the experiment module
  /// (docs/recipes.md, "Tuning"). Default: empty (every knob of the system at its default range).
  OptionTable tune;
  /// "file:line:col" of the table, for messages.
  std::string where;
  /// Dotted path of the table ("system", "baselines[1]").
  std::string path;

  bool operator==(const SystemSpec&) const = default;
};

/// [tuning]: how `libra tune` and `libra compare --tuned` tune the peers (docs/recipes.md).
struct TuningSpec {
  /// `libra compare` runs every peer at its tuned configuration without --tuned. Default: false.
  bool compare_tuned = false;
  /// Simulated runs the search of each system may spend (every system the same). Default: 24.
  int budget_runs = 24;
  /// Training steps of each tuning run. Default: 0, the recipe's steps.
  int steps = 0;
  bool operator==(const TuningSpec&) const = default;
};

/// A whole recipe.
struct Recipe {
  /// Experiment name. Required.
  std::string name;
  /// Seed of the run's random streams. Default: 1.
  uint64_t seed = 1;
  /// Training steps to run. Default: 10.
  int steps = 10;
  /// Execution backend. Default: "sim".
  Backend backend = Backend::kSim;
  ClusterSpec cluster;
  ModelSpec model;
  CostModelSpec cost_model;
  WorkloadSpec workload;
  RlSpec rl;
  EvalSpec eval;
  SimSpec sim;
  ClusterBackendSpec cluster_backend;
  TuningSpec tuning;
  SystemSpec system;
  std::vector<SystemSpec> baselines;

  /// Where the recipe came from (a path, or a name given to in-memory text).
  std::string source;
  /// The recipe as TOML after --set overrides: what a run records so that it can be repeated.
  std::string effective_toml;
  /// Location of each key path that was set ("file:line:col" or "--set k=v"); for messages.
  std::map<std::string, std::string> locations;

  /// Whether the recipe's world is simulated (backend = "sim"): virtual time, so that a run
  /// replays exactly and its throughput can be bounded before it runs. What the rest of libra
  /// asks, rather than which backend it is.
  bool Simulated() const { return backend == Backend::kSim; }

  /// "file:line:col: key.path" for a key (falls back to the nearest located parent, or the file).
  std::string Where(const std::string& key_path) const;

  /// The staleness bound in force for `spec`.
  int StalenessFor(const SystemSpec& spec) const { return spec.staleness.value_or(rl.staleness); }
  Batching BatchingFor(const SystemSpec& spec) const { return spec.batching.value_or(rl.batching); }
  bool PartialRolloutFor(const SystemSpec& spec) const {
    return spec.partial_rollout.value_or(rl.partial_rollout);
  }
  Objective ObjectiveFor(const SystemSpec& spec) const {
    return spec.objective.value_or(rl.objective);
  }
};

/// One problem found in a recipe: "file:line:col: key.path: what".
struct Diagnostic {
  std::string where;
  std::string what;
  std::string ToString() const { return where + ": " + what; }
  bool operator==(const Diagnostic&) const = default;
};

/// Orders diagnostics as a reader meets them: by line and column of the file, then the --set
/// overrides in the order given. Stable.
void SortDiagnostics(std::vector<Diagnostic>* diagnostics);

/// kInvalidRecipe listing every diagnostic, one per line; OK when there are none.
Status DiagnosticsToStatus(const std::vector<Diagnostic>& diagnostics);

/// The intrinsic checks that need no registry: ranges, divisibility, cross-field rules, unique
/// names. Appends one Diagnostic per problem.
void ValidateRecipe(const Recipe& recipe, std::vector<Diagnostic>* diagnostics);

}  // namespace libra::recipe
