// The group makespan model of Heddle (Zhang et al., "Heddle: A Distributed Orchestration System
// for Agentic RL Rollout", arXiv 2603.28101, §placement) and its presorted dynamic programme,
// shared by the `heddle` router (placement) and planner (TP mix).
//
// Model: a group g of trajectories on an instance of TP t completes in
//   C(g) = T_t * F_t(|g|) * L_first(g),
// T_t the per-token decode time at batch 1, F_t(b) the slowdown of a batch of b, L_first the
// longest (first, after a descending sort) length of the group. T_t * F_t(b) is one decode
// iteration of b sequences, from the cost model; a group larger than the instance holds at once
// (KV capacity, the engine's sequence limit) runs in waves, b / fit iterations per token.
//
// Partition: trajectories sorted by length, descending, are cut into contiguous runs, one per
// instance, instances in the order given (the callers sort them by TP, descending: the longest
// trajectories go to the largest TP). The DP minimises the largest group cost exactly over those
// cuts; the paper proves an optimal contiguous cut exists when instances are homogeneous and F
// grows with the group size. Ties between cuts with the same makespan (not specified by the
// paper) go to the cut with the smallest sum of squared group costs, so that slack spreads the
// work instead of leaving instances empty. Beyond `max_units` trajectories the short end is
// aggregated into equal chunks (the longest half of the units stay single). The makespan pass
// bisects (O(units x instances x log units)); the tie-breaking pass visits only the cuts that can
// still complete within the makespan, at most O(units^2 x instances).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/cost_model.h"

namespace libra::model {

/// T_t * F_t(b): seconds per generated token of a group of `b` sequences on a TP-`t` instance.
class GroupStepModel {
 public:
  /// Sequences are taken to hold `context_tokens` each (>= 1); at most `max_num_seqs` run at
  /// once. `cost` must outlive the model.
  GroupStepModel(const CostModel& cost, int64_t context_tokens, int max_num_seqs);

  /// Seconds per token of `sequences` sequences (0 for none) on TP `tp`; memoised per TP.
  /// Infinite when the instance cannot hold even one sequence.
  double StepSeconds(int tp, int64_t sequences) const;
  /// Sequences a TP-`tp` instance runs at once.
  int64_t Fit(int tp) const;

 private:
  const CostModel& cost_;
  int64_t context_;
  int max_num_seqs_;
  mutable std::vector<std::vector<double>> memo_;  // by tp (index), by sequences
};

/// The result of a partition: instance j takes the sorted trajectories [begin[j], end[j]).
struct Partition {
  double makespan = 0;
  std::vector<int64_t> begin;
  std::vector<int64_t> end;
};

/// Seconds per token of a group of `count` trajectories on instance `j`: the group costs that
/// times the length of its longest trajectory.
using GroupCostFn = std::function<double(size_t j, int64_t count)>;

/// Cuts `lengths` (sorted descending) into `instances` contiguous groups, instance order fixed,
/// minimising the largest group cost (then the sum of squared costs). Groups may be empty (cost
/// 0). With more than `max_units` lengths (>= 2) the short end is aggregated into chunks.
/// `cost` is asked once per instance and group size.
/// REQUIRES: lengths sorted descending; instances >= 1; each instance's cost non-decreasing in
/// the count (a larger group is never faster per token).
Partition PresortedPartition(std::span<const double> lengths, size_t instances,
                             const GroupCostFn& cost, int max_units = 128);

/// One step of PresortedPartition's DP: for each end i in [first, before.size()), row[i] = the
/// least makespan of units [0, i) on the instances of `before` (before[k]: of units [0, k)) and
/// one more, whose group [k, i) costs cost(k, i) (k < i). A group grows as k falls, so its cost
/// rises while before[k] falls: the least is where they cross, found by bisection. x is the
/// first k with before[k] >= cost (k = i, the empty group, costs 0); the least is before[x] or,
/// just before the crossing, the cost of [x-1, i).
template <typename Cost>
void PresortedStep(std::span<const double> before, const Cost& cost, size_t first,
                   std::span<double> row) {
  for (size_t i = first; i < before.size(); ++i) {
    size_t lo = 0, x = i;
    while (lo < x) {
      const size_t k = lo + (x - lo) / 2;
      if (before[k] >= cost(k, i)) {
        x = k;
      } else {
        lo = k + 1;
      }
    }
    row[i] = x > 0 ? std::min(before[x], cost(x - 1, i)) : before[x];
  }
}

/// PresortedPartition's makespan alone (its first pass), without the cut.
double PresortedMakespan(std::span<const double> lengths, size_t instances, const GroupCostFn& cost,
                         int max_units = 128);

/// Where each of PresortedPartition's DP units starts among `n` sorted lengths, and one more entry
/// (n): every length alone up to `max_units`, else the longest half of the units alone and the
/// rest in equal chunks. No cut has more non-empty groups than units, so instances beyond that
/// many of one kind in a row (interchangeable) never change the makespan.
std::vector<int64_t> PartitionUnitStarts(int64_t n, int max_units);

/// The makespan of a given assignment (group of each trajectory, for brute-force checks).
double AssignmentMakespan(std::span<const double> lengths, std::span<const size_t> group,
                          size_t instances, const GroupCostFn& cost);

/// Seconds to move `tokens` tokens of KV cache between two instances: within a node over one
/// GPU's NVLink, across nodes over the node's network bandwidth (GpuSpec).
double KvTransferTime(const CostModel& cost, int64_t tokens, bool same_node);

}  // namespace libra::model
