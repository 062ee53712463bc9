// HeddlePlanner ("heddle"): the trajectory-adaptive resource manager of Heddle (Zhang et al.,
// arXiv 2603.28101, 2026): a fixed train/rollout split whose rollout GPUs are cut into instances
// of mixed tensor parallelism chosen for the workload's length profile, re-tuned as the lengths
// change. Pure: no I/O, no clock.
//
// Assumptions: rollout time is the makespan of a rollout batch under Heddle's group model
// (model/partition.h): trajectories sorted by length are cut into contiguous groups over the
// instances sorted by TP (the longest on the largest), a group taking T_tp * F_tp(size) * L_first.
// Long trajectories gain from high TP (lower per-token latency), short ones from many low-TP
// instances (more throughput per GPU). The split between training and rollout is the user's
// (Heddle manages the rollout pool only); `libra tune` searches it.
//
// Algorithm:
//  1. Split: the last `train_gpus` GPUs train (default half the cluster, in whole nodes, as the
//     static planner), with the training layout that fits memory fastest; the rest roll out.
//  2. Profile: the batch in flight (batch x (staleness + 1) trajectories) takes the quantiles of
//     the length history (the startup profile, then the last `history` trajectories trained on).
//  3. TP mix: every multiset of TP degrees from `tp_degrees` that fills the rollout GPUs and packs
//     without crossing a node (each instance holding at least one of the longest sequences) is
//     scored by the DP's makespan on the profile; the least wins (ties: the first in the
//     enumeration, larger TPs first). Exhaustive, not the paper's sort-initialised simulated
//     annealing: the DP already finds the best grouping for a given mix exactly, and the mixes
//     are few (a few hundred for 48 GPUs), so the search is exact and deterministic. A large
//     cluster has many (1.8 x 10^8 at 1,024 nodes) but few distinct ones: instances of one degree
//     beyond the DP's units never take a group, so the DP's rows are shared between mixes and
//     a run of mixes that score the same is counted, not scored (RankMixes).
//  4. Every `retune_steps` steps (no transition under way), the mix is re-chosen on the recent
//     lengths. It is applied through the elastic pool only when its predicted makespan gain over
//     the remaining steps beats the transition (the weight load of the new instances) and is at
//     least `min_gain` of the current makespan.
// Knobs: see HeddlePlannerOptions; docs/policies.md ("heddle planner") lists them.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "model/partition.h"
#include "planner/planner.h"

namespace libra::planner {

inline constexpr std::string_view kHeddlePlannerName = "heddle";

struct HeddlePlannerOptions {
  /// Training GPUs; default half the cluster (whole nodes when there are several).
  std::optional<int> train_gpus;
  /// TP degrees an instance may have. Default {1, 2, 4, 8}.
  std::vector<int> tp_degrees = {1, 2, 4, 8};
  /// The largest of tp_degrees an instance may have (the knob `libra tune` searches: Fix-1 is
  /// max_tp 1). Default: no limit.
  std::optional<int> max_tp{};
  /// Steps between re-tunings; 0 = never. Default 5.
  int retune_steps = 5;
  /// Least relative makespan gain that justifies a transition. Default 0.05.
  double min_gain = 0.05;
  /// Trajectories of the length history. Default 1024.
  int history = 1024;
  /// DP units (model::PresortedPartition). Default 64.
  int max_units = 64;
};

/// One TP mix and its predicted makespan.
struct TpMix {
  std::vector<int> tps;  // descending
  double makespan_s = 0;
};

/// The TP mixes of a rollout pool, ranked (HeddlePlanner::RankMixes).
struct MixRanking {
  /// The best mixes, best first; ties in the order of the enumeration (larger TPs first).
  std::vector<TpMix> best;
  /// Every mix that packs with a finite makespan.
  size_t count = 0;
};

class HeddlePlanner : public Planner {
 public:
  /// Mixes a plan's explanation lists.
  static constexpr size_t kExplainedMixes = 5;

  static Result<std::unique_ptr<Planner>> Create(const recipe::OptionTable& options);
  /// Sorts and deduplicates `options.tp_degrees` (largest first) and drops those above max_tp.
  explicit HeddlePlanner(HeddlePlannerOptions options);

  std::string_view Name() const override { return kHeddlePlannerName; }
  Result<Plan> Initial(const PlanContext& context) override;
  std::optional<PlanDecision> OnStep(const StepObservation& observation) override;

  /// The predicted makespan of `tps` (any order) on `lengths`, with sequences of
  /// `context_tokens`. Infinite when an instance cannot hold a sequence.
  double Makespan(std::vector<int> tps, const std::vector<double>& lengths,
                  int64_t context_tokens) const;
  /// The same with the step model of those sequences (which remembers its answers: every mix
  /// of one ranking shares it). Instances of one TP beyond the DP's units
  /// (model::PartitionUnitStarts) are left out: they never take a group.
  static double Makespan(std::vector<int> tps, const std::vector<double>& lengths,
                         const model::GroupStepModel& steps, int max_units);
  /// The best `keep` TP mixes of `gpus` GPUs (step 3), and how many there are; none when none
  /// packs. Every mix is scored, each distinct one once (Makespan caps counts at the DP's units).
  MixRanking RankMixes(int gpus, const std::vector<double>& lengths, int64_t context_tokens,
                       size_t keep) const;
  /// The batch the mixes are scored on, from the history (step 2), descending; and the mean
  /// context a sequence holds meanwhile.
  std::vector<double> Profile() const;
  int64_t ProfileContext() const;

 private:
  HeddlePlannerOptions options_;
  PlanContext context_;
  std::deque<TrajectorySize> history_;
};

}  // namespace libra::planner
