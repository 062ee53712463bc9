#include "planner/stream_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace libra::planner {
namespace {

StreamPipeline Pipeline(int per_step, int staleness, double train_s_per_token) {
  StreamPipeline p;
  p.groups_per_step = per_step;
  p.staleness = staleness;
  p.steps = 40;
  p.train_s_per_token = train_s_per_token;
  return p;
}

/// 32 groups of eight latencies, 1 to 71 s, the longer ones with more tokens.
std::vector<StreamGroup> Spread() {
  std::vector<StreamGroup> groups;
  for (int i = 0; i < 32; ++i) groups.push_back({1.0 + (i % 8) * 10.0, 1.0 + (i % 8)});
  return groups;
}

TEST(StreamModelTest, GroupsThatTakeAlikeAreAllTrainedAtTheTrainersPace) {
  // Groups of one latency complete in launch order: none is overtaken, none rejected, the batches
  // are the mean group, and the step is the trainer's (2 groups x 5 tokens x 1 s = 10 s) once
  // the 10 s latency is hidden behind the batches in flight. A step decodes its two groups.
  const std::vector<StreamGroup> groups(16, StreamGroup{10, 5, 4});
  const StreamReplay r = ReplayStream(groups, Pipeline(2, 1, 1.0));
  EXPECT_EQ(r.rejected, 0);
  EXPECT_EQ(r.trained_tokens, 1);
  EXPECT_DOUBLE_EQ(r.period_s, 10);
  EXPECT_DOUBLE_EQ(r.decoded_per_step, 8);
}

TEST(StreamModelTest, ShortGroupsOvertakeLongOnesWhichAreRejected) {
  // Every other group is long (50 s, 10 tokens) and the others short (1 s, 1 token): batches
  // fill with the short ones and the long ones lag past the bound, so the trained tokens fall
  // below the mean group's.
  std::vector<StreamGroup> groups;
  for (int i = 0; i < 8; ++i) {
    groups.push_back({1, 1, 1});
    groups.push_back({50, 10, 10});
  }
  const StreamReplay r = ReplayStream(groups, Pipeline(2, 1, 0.1));
  EXPECT_GT(r.rejected, 0.2);
  EXPECT_LT(r.trained_tokens, 0.8);
  // The rejected long groups were decoded too: a step decodes more than its two groups' tokens.
  EXPECT_GT(r.decoded_per_step, 2 * r.trained_tokens * 5.5);
}

TEST(StreamModelTest, ASlowerTrainerRejectsLess) {
  // The bound is in steps: a longer step gives a long group more seconds to finish within it.
  const std::vector<StreamGroup> groups = Spread();
  const StreamReplay fast = ReplayStream(groups, Pipeline(4, 1, 0.1));
  const StreamReplay slow = ReplayStream(groups, Pipeline(4, 1, 2.0));
  EXPECT_GT(fast.rejected, slow.rejected);
  EXPECT_LT(fast.trained_tokens, slow.trained_tokens);
  EXPECT_LT(fast.period_s, slow.period_s);
  // A step is never shorter than its training: 4 groups of at least 1 token at 2 s a token.
  EXPECT_GE(slow.period_s, 8);
}

TEST(StreamModelTest, MoreStalenessRejectsMore) {
  // More batches in flight give newer short groups more chances to overtake a long one, as in
  // the simulator (r2e-gym's stream batches reject 4.0%, 13.3% and 20.0% of the groups at
  // staleness 1, 2 and 4: docs/planner.md).
  const std::vector<StreamGroup> groups = Spread();
  const StreamReplay one = ReplayStream(groups, Pipeline(4, 1, 0.5));
  const StreamReplay three = ReplayStream(groups, Pipeline(4, 3, 0.5));
  EXPECT_LT(one.rejected, three.rejected);
}

TEST(StreamModelDeathTest, ASynchronousPipelineHasNothingToReplay) {
  const std::vector<StreamGroup> groups(4, StreamGroup{1, 1});
  EXPECT_DEATH(ReplayStream(groups, Pipeline(1, 0, 1.0)), "stream replay of 4 groups");
}

}  // namespace
}  // namespace libra::planner
