// Longest-first (LPT) packing of a training batch onto data-parallel ranks: every sequence, the
// longest first, goes to the least-loaded rank by FLOPs, the first of equals. A training step
// estimate needs only what the packing gives the busiest rank, and the batch's FLOPs.
//
// A planner's batch repeats a sample of lengths (a few dozen distinct ones, each hundreds of
// times), and it is packed once per data-parallel degree it tries (every degree up to thousands
// on a large cluster). So the batch is given as runs of equal sequences, and ranks that hold
// the same share are packed as one class (PackByRankClasses); where that would not be exact, each
// sequence is placed on its own. Both give the same result, bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace libra::model {

/// The batch's FLOPs and the busiest rank's share of them (the first of equals).
struct RankShare {
  double flops = 0;
  double busiest_flops = 0;
  double busiest_tokens = 0;
  int busiest_sequences = 0;
};

/// `count` consecutive equal sequences of a batch sorted longest first.
struct SequenceRun {
  int64_t tokens = 0;
  double flops = 0;  // of one sequence
  int64_t count = 0;
};

/// The batch `runs`, longest first, packed onto `dp` (>= 1) ranks.
RankShare PackLongestFirst(std::span<const SequenceRun> runs, int dp);

/// PackLongestFirst worked out per class of ranks with the same share, in O(classes visited x
/// log classes) instead of O(sequences x log dp). Ranks of the least-loaded class take a run's
/// sequences one each in rank order, so a class moves or splits as one. Empty where that would
/// not be exact (two classes of equal load take turns by rank; a sequence adds no load) or after
/// `max_visits` class visits.
std::optional<RankShare> PackByRankClasses(std::span<const SequenceRun> runs, int dp,
                                           int64_t max_visits);

}  // namespace libra::model
