// The planner's rollout model: how long one rollout instance takes for its share of a step's
// trajectories, following their turns. Pure functions of their arguments, on the CostModel.
//
// What it models, per instance (TP t, KV capacity K tokens), in the steady state of a pipeline:
//  * Decode with continuous batching. Iterations take tau(n) = a + b*n for a decode set of n
//    sequences at the work's mean context (an affine fit of CostModel::IterationTime). Over a
//    period P the instance decodes the G tokens of its share, so by Little's law its decode set
//    is n = G * tau(n) / (P - F) (F: the period's prefill time), and an iteration lasts
//    tau_eff = a * P / (P - F - G*b) once prefill chunks are counted in.
//  * Prefill of each turn's new tokens: the prompt, then each tool output after the cached
//    context; a trajectory whose cached context was evicted during its tool call prefills its
//    whole context again (the engines' prefix cache, the simulator's kv_policy).
//  * Tools on the critical path: a trajectory's latency is its own prefill and decode, both
//    slowed by the others' prefill and decode beside them (its decode at tau_eff), and its tool
//    latencies; its context stays in the KV cache while it waits (kv_policy
//    "cache"). When the contexts of the trajectories in flight (Little's law: the step's
//    trajectories x their mean latency / P) do not fit beside the running ones, the least
//    recently used are evicted: a context survives a tool call that returns before the cache's
//    age A, where the calls in flight fill the free cache at E[min(latency, A)] each; the
//    others re-prefill. With kv_policy "free" every tool return re-prefills.
//  * The pace: P is the smallest period with (i) the instance not saturated: P >= F +
//    G * tau(n_max) / n_max, n_max = min(max_num_seqs, K / mean context), and (ii) the slowest
//    trajectory of a batch done in time: latency + `outside` <= (staleness + 1) * P, where
//    `outside` is what else a batch waits for in the cycle (the trainer's step and sync in an
//    asynchronous disaggregated pipeline; 0 for rollout alone). With (ii) as an equality the
//    condition is a quadratic in P, solved in closed form; the eviction fixed point adds a few
//    iterations when the cache is short. When the trainer sets the pace (paced_batches), the
//    instance keeps up if its unsaturated equilibrium does with enough of the cache free.
// A synchronous pipeline is staleness 0 with nothing outside: P is then the batch's makespan.
//
// Cost: O(1) per instance from the sums of its share (RolloutLoad), so the search evaluates every
// contiguous run of the sorted sample from prefix sums.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "model/cost_model.h"
#include "planner/planner.h"

namespace libra::planner {

/// Per-call tool latencies (seconds), as a distribution the eviction model queries.
class ToolLatencies {
 public:
  ToolLatencies() = default;
  /// Any order; negative or non-finite values are ignored.
  explicit ToolLatencies(std::span<const double> latencies);
  bool empty() const { return sorted_.empty(); }
  /// The latencies kept, in ascending order.
  const std::vector<double>& sorted() const { return sorted_; }
  double Mean() const;
  /// E[min(latency, age)].
  double MeanCappedAt(double age) const;
  /// The fraction of calls that return within `age`.
  double FractionWithin(double age) const;
  /// The age A with MeanCappedAt(A) = `mean` (0 <= mean < Mean()).
  double AgeForCappedMean(double mean) const;

 private:
  std::vector<double> sorted_;
  std::vector<double> prefix_;  // prefix_[k] = sum of the k smallest
};

/// The last `capacity` tool latencies of a run and their ToolLatencies, kept sorted as they
/// arrive: each batch is sorted alone and merged in, and the latencies that leave are merged
/// out, rather than the whole window sorted again for every step.
class ToolLatencyWindow {
 public:
  explicit ToolLatencyWindow(size_t capacity) : capacity_(capacity) {}
  void Add(std::span<const double> latencies);
  void Clear();
  /// The window's ToolLatencies (the same object until the next Add); null when it holds none.
  std::shared_ptr<const ToolLatencies> Sorted();

 private:
  size_t capacity_;
  std::deque<double> window_;    // arrival order
  std::vector<double> added_;    // valid latencies (ToolLatencies keeps) not merged in yet
  std::vector<double> evicted_;  // valid latencies not merged out yet
  std::shared_ptr<const ToolLatencies> latencies_;  // as of the last Sorted()
  bool stale_ = false;                              // whether latencies added since then
};

/// How the engines treat a trajectory's context while it waits for a tool: kept in the prefix
/// cache (evicted least recently used first under pressure) or dropped (the next turn prefills
/// the whole context). The recipe's sim.kv_policy.
using KvPolicy = recipe::KvPolicy;

/// What an instance knows that is not the work itself.
struct InstanceSetting {
  int tp = 1;
  int max_num_seqs = 256;
  /// Staleness of the pipeline (0: synchronous).
  int staleness = 0;
  /// Seconds of the cycle outside rollout that a batch also waits for (train + sync in an
  /// asynchronous disaggregated pipeline; 0 otherwise).
  double outside_s = 0;
  /// > 0: the trainer paces the pipeline (a batch launches once per `outside_s`), with at most
  /// this many batches in flight, and the question is whether the instance keeps up with that
  /// pace. It does, without the queue that makes a saturated engine thrash its cache, when its
  /// unsaturated equilibrium keeps up and the contexts in flight at that pace (Little's law)
  /// leave the cache at least kPacedHeadroom free; otherwise it is saturated with this many
  /// batches in flight. 0: every batch the staleness bound lets in at the period, staleness + 1 -
  /// outside_s / period, in whichever equilibrium a run falls into.
  double paced_batches = 0;
  /// false: a paced instance is never credited with its unsaturated regime (re-planning's
  /// candidates: near kPacedHeadroom the model cannot tell which regime a run falls into, and a
  /// move that bets wrong runs 2-3x slower).
  bool credit_pace = true;
  KvPolicy kv_policy = KvPolicy::kCache;
  /// Per-call tool latencies (may be empty: then the mean of the work's own tool time).
  const ToolLatencies* tools = nullptr;
  /// Where the router places returning turns, over the layout's `instances`: unless kKept (or
  /// `instances` is 0: a run of the sample, which does not know its layout), a turn finds its
  /// context only when it lands where it was (ReturnAffinity), and prefills it again elsewhere.
  ReturnPlacement returns = ReturnPlacement::kKept;
  int instances = 0;
};

/// The share of returning turns that the router sends back to the instance of their previous
/// turn, with `instances` in the layout, `placements_per_s` turns placed a second over all of
/// them, and a tool call of `mean_tool_s`. kKept: 1. kRotated: 1/K, the rotation's next instance
/// being any. kLeastLoaded: 1/K once other turns have been placed while the tool ran (the least
/// loaded instance is then any), and K^-kReturnStay when none has (the instance the turn just
/// left is the least loaded, unless others tie with it), the two weighted by the chance that
/// none is placed meanwhile, exp(-placements_per_s x mean_tool_s). 1 with one instance.
double ReturnAffinity(ReturnPlacement returns, int instances, double placements_per_s,
                      double mean_tool_s);

/// The exponent of ReturnAffinity's immediate return, measured on the simulator with least-conn:
/// r2e-gym's tool calls take 7 ms on average, and 73%, 60%, 50% and 41% of its returning turns land
/// on their previous instance with 3, 6, 12 and 24 instances (K^-0.28: 73.5%, 60.5%, 49.9%,
/// 41.1%); ties among the least loaded, broken in rotation, are what keeps it below 1
/// (docs/planner.md, "Routers without turn affinity").
inline constexpr double kReturnStay = 0.28;

/// The share of the KV cache that the contexts in flight at the trainer's pace may fill for the
/// instance to stay unsaturated (InstanceSetting::paced_batches): each batch arrives at once, and
/// the simulator, the reference here, leaves the thrashing a run starts in when that occupancy
/// is 0.45-0.49 and stays in it at 0.59-0.71 (swe-long, seed 1). Checked on 26 layouts of
/// seeds 1-3: the regime is right on 24, and the two misses lie at 0.49 and 0.53
/// (docs/planner.md).
inline constexpr double kPacedHeadroom = 0.5;

/// One trajectory as the model sees it on one TP size (a sampled request of the history).
struct RequestCost {
  double decode = 0;          // generated tokens
  double decode_context = 0;  // generated tokens x mean context while decoding
  double held_context = 0;    // mean context while in flight
  /// Its tool time and prefill time, each weighted by its mean context: with decode_context, the
  /// context-seconds it holds in the KV cache (longer trajectories hold larger contexts longer).
  double tool_context = 0;
  double prefill_context = 0;
  double calls = 0;      // tool calls
  double tool_s = 0;     // tool latency, all calls
  double prefill_s = 0;  // prompt and tool outputs after a cached context
  double miss_s = 0;     // more prefill if every tool call's context was evicted
  double tokens = 0;     // final context
};

/// The model's view of `request` on an instance of TP `tp`.
RequestCost CostOf(const model::CostModel& cost, int tp, const TrajectorySize& request);

/// The sums of an instance's share of a step (each request standing for `weight` trajectories)
/// and the trajectories that can be its slowest. Additive: a run's sums are prefix-sum
/// differences.
struct RolloutLoad {
  double trajectories = 0;
  double decode = 0;
  double decode_context = 0;
  double held_context = 0;
  double tool_context = 0;
  double prefill_context = 0;
  double calls = 0;
  double tool_s = 0;
  double prefill_s = 0;
  double miss_s = 0;
  /// The longest context: it must fit the KV cache alone.
  double max_tokens = 0;
  /// Candidates for the slowest trajectory: the most decode, the most tool time, the most
  /// prefill (one trajectory each, not weighted).
  RequestCost slowest[3];
  /// The part of a mix these sums are (Share's factors multiplied; 1 for a run of the sample).
  /// An instance given a share of the mix holds whichever trajectory is slowest beside as many
  /// others as its share holds, not beside its share less that one: with few trajectories an
  /// instance, that is more (Others).
  double share = 1;

  void Add(const RequestCost& request, double weight);
  /// What the others add to a sum (`total` over these trajectories: the tokens they decode, the
  /// seconds they prefill) on the instance that holds a trajectory adding `own`: the rest of a
  /// run; for a share of a mix, its trajectories less one, each adding the mean of the mix's
  /// others.
  double Others(double total, double own) const;
  /// Sums times `factor` (an instance's even share of a pool), candidates unchanged.
  RolloutLoad Share(double factor) const;
  /// `a` and `b` together (two shares of one mix, or two runs of the sample).
  static RolloutLoad Merge(const RolloutLoad& a, const RolloutLoad& b);
  bool empty() const { return trajectories <= 0; }
};

/// The instance's steady state for its load.
struct InstanceEstimate {
  /// Seconds per step (the period), or the batch's makespan when synchronous with nothing
  /// outside. +infinity when a trajectory does not fit the KV cache.
  double period_s = 0;
  /// Decode set, effective iteration time, and the fraction of tool calls whose context
  /// survived in the cache.
  double decode_set = 0;
  double iteration_s = 0;
  double hit_rate = 1;
  /// Which condition set the pace: "idle", "throughput" or "latency".
  const char* bound = "idle";
  /// When the trainer paces the instance (InstanceSetting::paced_batches, credited) and its
  /// unsaturated equilibrium keeps up: the share of the KV cache the contexts in flight fill at
  /// that pace, which kPacedHeadroom bounds. 0 when not asked.
  double paced_occupancy = 0;
};

/// The period of an instance with load `load` (see the file comment). 0 for no load.
InstanceEstimate EstimateInstance(const model::CostModel& cost, const InstanceSetting& setting,
                                  const RolloutLoad& load);
/// At most EstimateInstance(cost, setting, load).period_s, for a small part of its cost: the
/// period of the saturated instance with every context cached (no eviction, no latency bound).
double PeriodFloor(const model::CostModel& cost, const InstanceSetting& setting,
                   const RolloutLoad& load);

}  // namespace libra::planner
