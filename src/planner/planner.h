// Planner: decides how the GPUs are used: how many train, and which rollout instances (TP sizes)
// run on the rest. Planners are pure policies: no I/O, no clock; they see the cluster and the
// pipeline settings and return a plan, or say why none fits.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/registry.h"
#include "model/cost_model.h"
#include "recipe/options.h"

namespace libra::planner {

/// One finished trajectory's sizes: what the planner's length history holds.
struct TrajectorySize {
  int64_t prompt_tokens = 0;     // the initial prompt (prefilled)
  int64_t generated_tokens = 0;  // generated over all turns (decoded)
  int64_t tool_tokens = 0;       // tool outputs added to the context (prefilled, not decoded)
  int turns = 1;                 // model calls; every turn but the last called a tool
  double tool_s = 0;             // tool latency over all its calls (on its critical path)
  /// The final context.
  int64_t total() const { return prompt_tokens + generated_tokens + tool_tokens; }
  bool operator==(const TrajectorySize&) const = default;
};

/// Where the router sends a turn that returns from a tool call, as far as the rollout model is
/// concerned (docs/planner.md, "Routers without turn affinity").
enum class ReturnPlacement {
  kKept,         // back to the instance that holds its context (C-MLFQ)
  kLeastLoaded,  // to the least loaded instance (least-conn, and the length-based routers)
  kRotated,      // to the next instance in rotation, whatever their load (round-robin)
};

/// What a planner plans for.
struct PlanContext {
  int nodes = 1;
  int gpus_per_node = 8;
  /// Samples per step (prompts x group size).
  int batch_trajectories = 0;
  /// The staleness bound in force (0 = synchronous).
  int staleness = 0;
  /// The cost model, for planners that predict (and to pick a training layout that fits).
  /// Must outlive the planner's calls.
  const model::CostModel* cost = nullptr;
  /// A typical trajectory's total tokens (prompt, generated and tool output): what a training
  /// sequence is sized as when comparing layouts.
  int64_t typical_sequence_tokens = 8192;
  /// The longest trajectory to expect (tokens): training memory must hold it.
  int64_t max_sequence_tokens = 8192;
  /// Training steps of the run (a transition must pay for itself over the remaining ones).
  int steps = 1;
  /// A sample of the workload's trajectories before the run (the startup length profile);
  /// planners that search start from it. May be empty.
  std::vector<TrajectorySize> history;
  /// Latencies of individual tool calls of the startup profile (seconds, any order): how long
  /// a context waits in the KV cache. May be empty.
  std::vector<double> tool_latencies_s;
  /// How weights reach the rollout instances, and every how many steps.
  model::SyncPath sync_path = model::SyncPath::kNccl;
  int sync_interval = 1;
  /// What the engines do with a context while its trajectory waits for a tool.
  recipe::KvPolicy kv_policy = recipe::KvPolicy::kCache;
  /// Continuous-batching limit of a rollout instance.
  int max_num_seqs = 256;
  /// Where the router places returning turns (PipelineShape::returns).
  ReturnPlacement returns = ReturnPlacement::kKept;
  /// Stream batches (`[rl] batching = "stream"`): each step trains the first complete groups.
  /// With them, whole groups of the startup profile, `group_size` samples of one prompt after
  /// another (empty: the ordered model only).
  bool stream_batches = false;
  int group_size = 1;
  std::vector<TrajectorySize> group_profile;

  int total_gpus() const { return nodes * gpus_per_node; }
};

/// What the coordinator reports to the planner after every step.
struct StepObservation {
  int step = 0;  // the step just finished
  double now_s = 0;
  double step_s = 0;
  double rollout_s = 0;
  double train_s = 0;
  double sync_s = 0;
  /// The trainer idled waiting for the batch (a rollout-bound step waits).
  double wait_s = 0;
  /// The trajectories the step trained on, and the latencies of their tool calls.
  std::vector<TrajectorySize> trajectories;
  std::vector<double> tool_latencies_s;
  /// Pressure on rollout: turns waiting for an instance, trajectories in flight, and
  /// trajectories rejected as too stale so far.
  int waiting_turns = 0;
  int in_flight = 0;
  int64_t rejected = 0;
  /// The layout in force; whether a transition to another one is still under way.
  backend::Layout layout;
  bool transition_in_flight = false;
};

/// A planner's decision after a step: recorded whether it changes the layout or not.
struct PlanDecision {
  /// The layout to move to; nullopt keeps the current one.
  std::optional<backend::Layout> layout;
  /// What made the planner look ("interval", "imbalance", ...), and the outcome in words.
  std::string trigger;
  std::string reason;
  /// Predicted step time of the current layout, of the candidate, the transition's cost and the
  /// net gain over the remaining steps (candidate vs current, minus the transition).
  std::optional<double> current_step_s;
  std::optional<double> candidate_step_s;
  std::optional<double> transition_s;
  std::optional<double> gain_s;
  /// Predicted time of the next step under the layout that will be in force.
  std::optional<double> next_step_s;
};

/// A plan the planner considered, with its predicted times (seconds).
struct PlanCandidate {
  std::string layout;
  double rollout_s = 0;
  double train_s = 0;
  double sync_s = 0;
  double step_s = 0;
};

/// Predicted steady-state seconds per step of a pipeline and of its phases: `rollout` is one
/// step's batch (synchronous: its makespan; asynchronous: the rollout side's time per step when
/// it never waits for the trainer), `train` the train step (with a time-shared layout's role
/// switches), `sync` the weight sync per step, `step` their combination for the pipeline.
struct PhaseTimes {
  double rollout_s = 0;
  double train_s = 0;
  double sync_s = 0;
  double step_s = 0;
};

/// A planner's answer.
struct Plan {
  backend::Layout layout;
  /// Why this plan, in words.
  std::string reason;
  /// The planner's predicted time per step, when it has a model.
  std::optional<double> predicted_step_s;
  /// The phases behind predicted_step_s, for planners whose model predicts them (`libra plan
  /// --check` compares them with a simulation of the plan).
  std::optional<PhaseTimes> predicted;
  /// The best candidates it compared (best first), and a summary of its search, for
  /// `libra plan` and `libra plan --explain` (whose last line says what was pruned and why);
  /// empty for planners that do not search.
  std::vector<PlanCandidate> candidates;
  std::vector<std::string> explain;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string_view Name() const = 0;
  /// The plan to start with. kUnschedulable (with the reason) when nothing fits this cluster.
  virtual Result<Plan> Initial(const PlanContext& context) = 0;
  /// After every step: a decision when the planner looked (whether or not it moves), nullopt
  /// when it did not. The default never re-plans.
  virtual std::optional<PlanDecision> OnStep(const StepObservation& /*observation*/) {
    return std::nullopt;
  }
  /// The layout to run while the trainer waits for its next batch: `current` with the training
  /// GPUs lent to rollout as extra instances after the current ones (train_gpus 0; the trainer
  /// takes them back, drained, once the batch is ready). nullopt (the default): they stay idle.
  virtual std::optional<backend::Layout> IdleTrainerLayout(
      const backend::Layout& /*current*/) const {
    return std::nullopt;
  }
  /// With lent GPUs: the fraction of the batch's groups complete at which the trainer starts
  /// taking them back (drained). Default 1: when the batch is ready.
  virtual double ReclaimAt() const { return 1.0; }
};

using PlannerRegistry = Registry<Planner, const recipe::OptionTable&>;

/// Registers every built-in planner (static, colocated, ...).
Status RegisterBuiltinPlanners(PlannerRegistry& registry);

/// A registry with the built-ins, built once, for a composition root (the CLI, a test, a
/// benchmark) to pass to what it runs; the layers below never reach for it.
const PlannerRegistry& BuiltinPlanners();

/// Reads the rollout TP sizes: `rollout_tp` (one size for every instance; default 1) or
/// `rollout_tps` (a pattern repeated on every node, e.g. [1, 1, 2, 4]); each 1, 2, 4 or 8.
/// Problems are reported on `reader`.
std::vector<int> ReadRolloutTps(recipe::OptionReader& reader);

/// Packs instances of the given TP sizes (largest first) onto GPUs [0, sum) node by node, first
/// fit, never across a node boundary; ids in GPU order. kUnschedulable when they do not fit.
Result<std::vector<backend::InstanceSpec>> PackSizes(int gpus_per_node, std::vector<int> tps);

/// A split layout: rollout instances of the given TP sizes packed on the first GPUs (PackSizes),
/// training with `train` on the rest. kUnschedulable when the instances do not pack.
Result<backend::Layout> SplitLayout(const model::TrainLayout& train, std::vector<int> rollout_tps,
                                    int gpus_per_node);

/// Reads a list of TP sizes under `key` (each 1, 2, 4 or 8; `allow_empty` or not); problems are
/// reported on `reader`.
std::vector<int> ReadTpList(recipe::OptionReader& reader, const std::string& key,
                            const std::vector<int>& default_value, bool allow_empty);

/// kUnschedulable unless every TP of `pattern` fits a node.
Status CheckRolloutTps(const std::vector<int>& pattern, int gpus_per_node);

/// kUnschedulable when an instance of one of `tps` cannot hold the longest context to expect
/// (PlanContext::max_sequence_tokens) in its KV cache, as an engine refuses to start with a
/// context limit its cache cannot hold; OK without a cost model.
Status CheckInstancesHold(const PlanContext& context, const std::vector<int>& tps);

/// Every training layout of `gpus` GPUs: TP 1/2/4/8 within a node, PP 1/2/4, the rest data
/// parallel, micro-batch 1; by TP, then PP, ascending.
std::vector<model::TrainLayout> TrainLayoutCandidates(int gpus, int gpus_per_node);

/// The training layout of `gpus` GPUs (TP 1/2/4/8 within a node, PP 1/2/4, the rest data
/// parallel, micro-batch 1) with the shortest predicted step for `context`'s batch (typical
/// sequences and one of the longest) among those that fit in memory; kUnschedulable when none fits.
/// Without a cost model: the largest TP that divides both, no PP.
Result<model::TrainLayout> ChooseTrainLayout(const PlanContext& context, int gpus);

/// Packs rollout instances onto the GPUs [first_gpu, first_gpu + gpus) of the cluster
/// (node-major numbering), never across a node boundary: each node repeats `pattern` (TP sizes)
/// from its start until its GPUs are used. kUnschedulable when an instance does not fit.
Result<std::vector<backend::InstanceSpec>> PackInstances(int gpus_per_node, int first_gpu, int gpus,
                                                         const std::vector<int>& pattern);
/// Whether PackInstances would succeed, without building the instances.
bool InstancesPack(int gpus_per_node, int first_gpu, int gpus, const std::vector<int>& pattern);

/// `current` with the training GPUs lent to rollout as TP-`tp` instances after the current ones
/// (the trainer waiting for its batch); nullopt when there is nothing to lend (time-shared, no
/// training GPUs, no rollout instance) or they do not pack.
std::optional<backend::Layout> LendTrainerGpus(const backend::Layout& current, int gpus_per_node,
                                               int tp);

}  // namespace libra::planner
