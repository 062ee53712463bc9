// What stream batches train (`[rl] batching = "stream"`, docs/planner.md "Stream batches"): a
// step's batch is the first complete groups, and a group that would lag beyond the staleness bound
// is rejected and replaced, so the long groups are trained less and their work is partly wasted.
// The share that is rejected is set by a queue (which groups the newer, shorter ones overtake),
// not by a latency threshold: ReplayStream replays the coordinator's rules on groups of fixed
// latency, and the planner scales its ordered prediction by what the replay trains.
//
// Pure: no I/O, no clock; the same groups give the same replay.
#pragma once

#include <span>

namespace libra::planner {

/// One group as the replay sees it: how long it takes from its launch to its last sample's end,
/// and the tokens its samples train (their sequences).
struct StreamGroup {
  double latency_s = 0;
  double tokens = 0;
  /// The tokens its samples decode (each decoding sample holds a place in an engine's batch).
  double decoded = 0;
};

struct StreamReplay {
  /// Rejected groups over all the groups that completed (trained or rejected).
  double rejected = 0;
  /// Tokens per trained group over the mean group's: below 1, the batches are short-biased.
  double trained_tokens = 1;
  /// Mean time between the counted steps' ends (seconds).
  double period_s = 0;
  /// Tokens decoded a step by the groups that completed (trained or rejected).
  double decoded_per_step = 0;
};

/// The pipeline the replay runs.
struct StreamPipeline {
  /// Groups a batch takes; the staleness bound (>= 1); steps replayed, the first staleness + 1 of
  /// which (groups all launched at once, before any lag) are not counted.
  int groups_per_step = 1;
  int staleness = 1;
  int steps = 40;
  /// A step's training time per token of its batch, and the weight sync after it.
  double train_s_per_token = 0;
  double sync_s = 0;
};

/// The coordinator's stream rules (experiment/coordinator.h) on `groups`, launched in order and
/// cyclically: while the rollout side holds version v, at most (v + staleness + 1) x
/// groups_per_step groups are launched plus one for each rejected; step k's batch is the first
/// groups_per_step complete groups once step k - 1 has trained and synced, after the groups whose
/// lag (k less their launch version) exceeds the staleness are rejected; the version rises to
/// k + 1 when step k has synced. The rollout side's throughput is not modelled: each group takes
/// its latency however many are in flight. REQUIRES: groups non-empty, groups_per_step >= 1,
/// staleness >= 1, steps > staleness + 1.
StreamReplay ReplayStream(std::span<const StreamGroup> groups, const StreamPipeline& pipeline);

}  // namespace libra::planner
