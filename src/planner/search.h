// The global resource planner's search: how many GPUs train, with which TP x PP x DP layout and
// micro-batch, and which rollout instances (TP sizes) serve the rest, so that the predicted
// steady-state time per step is the shortest. Two modes search exactly the same space with the
// same objective: Algorithm 1 of the Libra paper (a pruned tree over training layouts per training
// budget, and a dynamic programme over rollout layouts against the length-sorted requests), and a
// brute-force enumeration that cross-checks it on small problems.
//
// Pure functions of their arguments: no I/O, no clock, no randomness; the same input gives the
// same result, bit for bit. Every duration comes from the CostModel.
//
// The space, for a cluster of N = nodes x gpus_per_node GPUs:
//  * Training budgets n_train: the multiples of `granularity` in [min_train_gpus, max_train_gpus]
//    (only `fixed_train_gpus` when set). Training holds GPUs [0, n_train), rollout [n_train, N).
//  * Training layouts of a budget (the tree; a layout is feasible when it passes every filter):
//    TP in train_tps dividing n_train and gpus_per_node; the TP communication ratio (tp_comm_s /
//    compute_s of a one-replica layout {tp, pp 1, dp 1} at the smallest micro-batch, so a property
//    of the TP size alone) at most max_tp_comm_ratio; PP in train_pps with tp*pp dividing n_train
//    and pp dividing the model's layers; dp = n_train / (tp*pp); a micro-batch with
//    batch_trajectories % (dp*micro) == 0; the 1F1B bubble (pp-1)/(pp+n_micro-1), n_micro =
//    batch/(dp*micro), at most max_bubble; no OOM. T_train = TrainStep(layout, passes,
//    batch).step_s x train_scale, the batch being batch_trajectories sequences whose lengths cycle
//    through the sample's totals.
//  * Rollout layouts of the R = N - n_train remaining GPUs: every sequence of instances of allowed
//    TP sizes (in rollout_tps, dividing gpus_per_node) whose sizes sum to R, each taking a
//    contiguous, possibly empty (an idle instance), run of the requests sorted by total length;
//    the makespan is the slowest instance's InstanceMakespan. With node_pattern set, the only
//    layout is the pattern repeated node by node (PackInstances), its instances in the best order
//    (the tree mode finds it by a DP over instance counts, exact up to 2^20 states; beyond, it
//    takes the instances in ascending TP order, an upper bound).
//  * Objective: StepTime(rollout_s, train_s, sync_s), sync_s = WeightSyncTime of the training
//    layout towards the largest rollout TP. Because the sync depends on the largest rollout TP,
//    the rollout side is solved once per largest TP m: the fastest layout whose largest instance
//    is exactly m. That layout must pack into the rollout GPUs without crossing a node boundary
//    (first-fit decreasing into the partial first node, then whole nodes), else that (budget, m)
//    is out ("rollout_unpackable"). Sizes forming a divisibility chain (any subset of 1, 2, 4, 8)
//    always pack, so the check only bites for sets like {2, 3}.
//
// Ties, in both modes: a budget's plan is the first of the fastest (training layouts by TP, then
// PP, then micro-batch, ascending; then the largest rollout TP, ascending); between budgets the
// one with fewer training GPUs wins. Within the DP, equal makespans keep the first candidate in
// the order: larger last instance first, then its shorter segment; the exhaustive mode keeps the
// first fastest it enumerates. The modes therefore agree on every budget's step_s whenever the
// packing check cannot bite (divisibility chains); with sizes like {2, 3} a tie between a layout
// that packs and one that does not may be broken differently. They agree on the plan itself
// unless two rollout layouts have exactly equal makespans. The tree mode's only extra prune,
// "bound", is exact.
//
// Cost (tree mode): the segment table (one InstanceMakespan per TP size and contiguous run of the
// sample, O(K n^2) calls for K sizes and n requests) and the DP (O(K^2 R n^2) for R rollout GPUs)
// are computed once for all budgets; 48 GPUs take milliseconds, 1,024 GPUs well under a second
// (bench/plan_bench.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "planner/rollout_model.h"

namespace libra::planner {

/// One trajectory of the length history, as the planner sees it: prompt tokens (prefilled),
/// generated tokens over all turns (decoded) and tool tokens (prefilled, not decoded); total() is
/// the final context. The same value as the planners' TrajectorySize (planner.h).
using RequestSample = TrajectorySize;

/// Largest SearchSpace::max_requests.
inline constexpr int kMaxSampleRequests = 1024;

/// The space the search explores.
struct SearchSpace {
  int nodes = 1;
  int gpus_per_node = 8;
  /// Allowed rollout TP sizes; sizes that do not divide gpus_per_node are ignored.
  /// Default: 1, 2, 4, 8.
  std::vector<int> rollout_tps = {1, 2, 4, 8};
  /// When non-empty, the only rollout layout: this per-node pattern repeated (PackInstances); a
  /// budget whose rollout GPUs it cannot fill exactly is infeasible ("no_rollout_layout").
  /// rollout_tps is then ignored. Default: empty.
  std::vector<int> node_pattern;
  /// Training TP (within a node), PP and micro-batch sizes. Defaults: {1, 2, 4, 8}, {1, 2, 4},
  /// {1, 2, 4, 8}.
  std::vector<int> train_tps = {1, 2, 4, 8};
  std::vector<int> train_pps = {1, 2, 4};
  std::vector<int> micro_batches = {1, 2, 4, 8};
  /// Bounds of the training budget; max_train_gpus 0 means total - min_rollout_gpus (and it is
  /// never more). Defaults: 1, 0, 1.
  int min_train_gpus = 1;
  int max_train_gpus = 0;
  int min_rollout_gpus = 1;
  /// Training budgets are multiples of this. Default: 1.
  int granularity = 1;
  /// The only training budget, when set (bounds and granularity are then not applied; it must
  /// leave at least max(1, min_rollout_gpus) GPUs to rollout). Default: unset.
  std::optional<int> fixed_train_gpus;
  /// Requests of the stratified sample of the history the rollout model runs on, at most
  /// kMaxSampleRequests (the segment table is quadratic in it). Default: 64.
  int max_requests = 64;
  /// Algorithm 1's prunes: TP communication over compute of the training step, and the pipeline
  /// bubble fraction. Defaults: 0.5, 0.3.
  double max_tp_comm_ratio = 0.5;
  double max_bubble = 0.3;
  /// Sequences a rollout instance runs at once (continuous batching). Default: 256.
  int max_num_seqs = 256;
  /// Also consider the time-shared (colocated) layout: every GPU rolls out, then every GPU
  /// trains, switching roles twice a step (not with fixed_train_gpus or node_pattern). Default:
  /// true.
  bool time_shared = true;
  /// Also consider lending the waiting trainer's GPUs to rollout (asynchronous pipelines): each
  /// budget's best plan without, and each of its rollout options with. Default: true.
  bool hybrid = true;
};

/// What the pipeline looks like (the objective depends on it).
struct PipelineShape {
  /// Trajectories trained per step. Default: 1.
  int batch_trajectories = 1;
  /// 0 = synchronous; >= 1 lets the next step's rollout overlap training. Default: 0.
  int staleness = 0;
  model::SyncPath sync_path = model::SyncPath::kNccl;
  /// Steps between weight syncs: the sync's time is spread over them. Default: 1.
  int sync_interval = 1;
  model::TrainPasses passes;
  /// The longest sequence training must hold in memory and every rollout instance in its KV
  /// cache (a context cap, or the longest expected); 0: the longest of the sampled history.
  /// Default: 0.
  int64_t max_sequence_tokens = 0;
  /// What the engines do with a context while its trajectory waits for a tool, and the
  /// latencies of individual tool calls (rollout_model.h; shared, since a planner asks many
  /// questions of one set). Defaults: cache, none (null).
  KvPolicy kv_policy = KvPolicy::kCache;
  std::shared_ptr<const ToolLatencies> tool_latencies;
  /// Whether a trainer-paced rollout side may be credited with its unsaturated regime under KV
  /// pressure (InstanceSetting::credit_pace, rollout_model.h). Default: true.
  bool credit_pace = true;
  /// Where the router places returning turns: elsewhere than kKept, a turn finds its cached
  /// context only when it lands where it was (InstanceSetting::returns, rollout_model.h).
  /// Default: kKept (C-MLFQ keeps them where they are cached).
  ReturnPlacement returns = ReturnPlacement::kKept;
  /// Calibration factors applied to the cost model's rollout and training predictions (measured
  /// over predicted). Defaults: 1.
  double rollout_scale = 1;
  double train_scale = 1;
  /// Stream batches: whole groups of the workload, `group_size` samples of one prompt after
  /// another. EvaluatePlan then predicts an asynchronous, disaggregated plan that does not lend
  /// by a replay of them at the time per token its own load sets (stream_model.h): training
  /// scaled by the trained groups' tokens, the step the replay's, rollout alone the replay with
  /// training free. The search itself ranks layouts by the ordered model. Default: null
  /// (ordered batches).
  std::shared_ptr<const std::vector<TrajectorySize>> stream_groups;
  int group_size = 1;
};

/// One plan and its predicted times (seconds).
struct CandidatePlan {
  model::TrainLayout train;
  /// The rollout instances' TP sizes, sorted descending.
  std::vector<int> rollout_tps;
  /// Time-shared: the instances cover every GPU, which all train too (rollout pauses for
  /// training and the role switches both ways).
  bool colocated = false;
  /// Hybrid: while the trainer waits for its batch, its GPUs roll out as instances of the
  /// largest rollout TP, and are drained and switched back when the batch is ready.
  bool lend_trainer = false;
  /// The rollout side's time per step (synchronous: one batch's makespan; asynchronous: its
  /// period when it never waits for the trainer), the train step (with a time-shared layout's
  /// role switches), the weight sync per step, and the step they make together (PlanStep).
  double rollout_s = 0;
  double train_s = 0;
  double sync_s = 0;
  double step_s = 0;
  /// Asynchronous and disaggregated, not lending: the largest share of an instance's KV cache
  /// that the contexts in flight fill at the trainer's pace (InstanceEstimate::paced_occupancy;
  /// above kPacedHeadroom the model takes the instance to thrash). 0 when not asked.
  double paced_occupancy = 0;

  int train_gpus() const { return train.gpus(); }
  int rollout_gpus() const;
  /// "train tp8 pp1 dp1 mb1 (8 GPUs) | rollout 4x2 2x1 1x2 (12 GPUs) | rollout 9.000 s, train
  /// 3.000 s, sync 0.500 s, step 12.500 s"; "time-shared" after the rollout GPUs when colocated.
  std::string ToString() const;
  bool operator==(const CandidatePlan&) const = default;
};

/// How the search went, for `libra plan --explain` and for tests.
struct SearchTrace {
  /// Training budgets considered.
  int budgets = 0;
  /// Training-tree nodes visited (TP, PP and micro-batch nodes; in the exhaustive mode, leaves).
  int train_nodes = 0;
  /// Why candidates were dropped, and how often: "tp_divides", "tp_comm_ratio", "pp_divides",
  /// "batch_divides", "bubble", "oom" (training layouts), "bound" (a training leaf whose step
  /// cannot beat its budget's best so far; tree mode only), "no_rollout_layout" (no rollout
  /// layout of the allowed sizes or of the pattern fills the rollout GPUs), "rollout_oom" (every
  /// rollout layout has a request that fits no instance), "rollout_unpackable" (a (budget,
  /// largest TP) whose fastest layout does not pack into the nodes).
  std::map<std::string, int> pruned;
  /// Rollout DP cells computed (node_pattern: states of the instance-count DP); the runs of
  /// requests on one instance the DP asked for past its prefix-sum bound, and of those the runs
  /// estimated (EstimateInstance: the others were ruled out by their saturated period).
  int64_t dp_cells = 0;
  int64_t segment_evaluations = 0;
  int64_t segment_estimates = 0;
  /// A summary line per budget (its best plan or why it has none), then one overall line.
  std::vector<std::string> lines;

  bool operator==(const SearchTrace&) const = default;
};

struct SearchResult {
  /// The best plan; nullopt when nothing is feasible.
  std::optional<CandidatePlan> best;
  /// The best plan of each feasible training budget, by predicted step (ties: fewer training
  /// GPUs).
  std::vector<CandidatePlan> top;
  SearchTrace trace;

  bool operator==(const SearchResult&) const = default;
};

enum class SearchMode {
  /// Algorithm 1: the pruned training tree and the rollout DP. Fast: milliseconds for 48 GPUs.
  kTreeDp,
  /// Every training layout x every sequence of rollout instances x every split of the requests.
  /// For cross-checks on small problems only.
  kExhaustive,
};

/// Largest problem the exhaustive mode accepts: GPUs, sampled requests, and rollout layouts x
/// request splits to enumerate over all budgets.
inline constexpr int kExhaustiveMaxGpus = 16;
inline constexpr int kExhaustiveMaxRequests = 10;
inline constexpr double kExhaustiveMaxEnumerations = 5e7;

/// Sorts `history` as Search and EvaluatePlan sample it (by total length, then prompt, generated,
/// tool tokens, turns and tool time; stable). Both skip their own sort of a sorted history, so a
/// caller asking several questions of one history sorts it once; the answers are the same.
void SortHistory(std::vector<RequestSample>& history);

/// The best plan for `history` (the recent trajectories). The history is sorted by total length
/// and stratified-sampled to at most space.max_requests (evenly spaced ranks, the shortest and the
/// longest included, cut at the rank of a batch's longest), and the trajectory at that rank by
/// latency (tool time plus generated tokens at one sequence's pace on the largest rollout TP)
/// takes the place of the sampled one nearest it in length; each sampled request stands for
/// batch_trajectories / sample size trajectories. kInvalidArgument for an empty history or an
/// impossible space (no budget in the bounds, no allowed rollout TP, empty TP/PP/micro-batch
/// lists, non-positive sizes); the exhaustive mode also refuses problems beyond the kExhaustive*
/// limits, saying so. A space in which every candidate is pruned is not an error: best is nullopt
/// and the trace says why.
Result<SearchResult> Search(const model::CostModel& cost, const SearchSpace& space,
                            const PipelineShape& shape, std::span<const RequestSample> history,
                            SearchMode mode = SearchMode::kTreeDp);

/// Orders plans as Search orders SearchResult::top: by predicted step (ties: fewer training GPUs).
/// The plans of several searches (one per rollout TP size, `homogeneous`) are ranked together by
/// it.
void RankPlans(std::vector<CandidatePlan>& top);

/// The predicted times of one given plan (the current one, to compare against), with the search's
/// model: the history sampled as in Search; the instances of each TP size share one contiguous run
/// of the sorted sample evenly (a router balances identical instances), smaller sizes taking
/// shorter trajectories, the runs chosen for the shortest rollout. `colocated`: the time-shared
/// layout (the instances must cover every GPU, and training uses them all). The search's own
/// filters (bubble, TP communication, divisibility) are not applied. kInvalidArgument for an
/// empty history or no instance, when the plan does not fit the cluster (GPUs, an instance across
/// nodes), when training runs out of memory, or when a request fits no instance's KV cache.
Result<CandidatePlan> EvaluatePlan(const model::CostModel& cost, const SearchSpace& space,
                                   const PipelineShape& shape,
                                   std::span<const RequestSample> history,
                                   const model::TrainLayout& train, std::vector<int> rollout_tps,
                                   bool colocated = false, bool lend_trainer = false);

}  // namespace libra::planner
