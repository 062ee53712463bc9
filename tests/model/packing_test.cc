#include "model/packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "common/rng.h"

namespace libra::model {
namespace {

/// Longest-first packing as it was first written: every sequence taken from a binary heap of
/// (load, rank) with pop_heap and push_heap.
RankShare PackWithHeap(const std::vector<SequenceRun>& runs, int dp) {
  std::vector<double> rank_flops(static_cast<size_t>(dp), 0);
  std::vector<double> rank_tokens(static_cast<size_t>(dp), 0);
  std::vector<int> rank_sequences(static_cast<size_t>(dp), 0);
  std::vector<std::pair<double, size_t>> least;
  for (size_t rank = 0; rank < rank_flops.size(); ++rank) least.emplace_back(0.0, rank);
  const auto later = std::greater<std::pair<double, size_t>>();
  for (const SequenceRun& run : runs) {
    for (int64_t i = 0; i < run.count; ++i) {
      std::pop_heap(least.begin(), least.end(), later);
      const size_t rank = least.back().second;
      rank_flops[rank] += run.flops;
      rank_tokens[rank] += static_cast<double>(run.tokens);
      ++rank_sequences[rank];
      least.back().first = rank_flops[rank];
      std::push_heap(least.begin(), least.end(), later);
    }
  }
  const size_t busiest = static_cast<size_t>(
      std::max_element(rank_flops.begin(), rank_flops.end()) - rank_flops.begin());
  return {std::accumulate(rank_flops.begin(), rank_flops.end(), 0.0), rank_flops[busiest],
          rank_tokens[busiest], rank_sequences[busiest]};
}

/// A training sequence's FLOPs as the roofline model counts them: linear and attention terms of
/// a 14B model.
double Flops(int64_t tokens) {
  const auto s = static_cast<double>(tokens);
  return 8 * 14e9 * s + 4 * 2.0 * 40 * 40 * 128 * s * s;
}

/// Lengths sorted longest first as runs, with Flops.
std::vector<SequenceRun> Runs(std::vector<int64_t> tokens) {
  std::sort(tokens.begin(), tokens.end(), std::greater<>());
  std::vector<SequenceRun> runs;
  for (const int64_t t : tokens) {
    if (runs.empty() || runs.back().tokens != t) runs.push_back({t, Flops(t), 0});
    ++runs.back().count;
  }
  return runs;
}

/// A planner's batch: `distinct` sampled lengths, each `repeats` times.
std::vector<SequenceRun> PlannerBatch(Rng& rng, int distinct, int repeats) {
  std::vector<int64_t> tokens;
  for (int d = 0; d < distinct; ++d) {
    const auto length = static_cast<int64_t>(1 + rng.LogNormal(8.5, 1.0));
    tokens.insert(tokens.end(), static_cast<size_t>(repeats), length);
  }
  return Runs(std::move(tokens));
}

void ExpectSame(const RankShare& got, const RankShare& want, int trial) {
  EXPECT_EQ(got.flops, want.flops) << "trial " << trial;
  EXPECT_EQ(got.busiest_flops, want.busiest_flops) << "trial " << trial;
  EXPECT_EQ(got.busiest_tokens, want.busiest_tokens) << "trial " << trial;
  EXPECT_EQ(got.busiest_sequences, want.busiest_sequences) << "trial " << trial;
}

TEST(PackingTest, PackLongestFirstMatchesAPlainHeap) {
  // Random batches, bit for bit: lengths drawn from 51 values with empty sequences (one at a
  // time), on 1-40 ranks and larger ones on up to 700; planners' batches (long runs) on up to
  // 5,000 ranks; and small integer FLOPs, whose loads tie across classes of ranks that hold
  // different tokens.
  Rng rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<SequenceRun> runs;
    int dp = 0;
    if (trial % 4 == 3) {
      runs = PlannerBatch(rng, static_cast<int>(rng.UniformInt(1, 70)),
                          static_cast<int>(rng.UniformInt(1, 300)));
      dp = static_cast<int>(rng.UniformInt(1, 5000));
    } else if (trial % 4 == 2) {
      for (int64_t f = 4; f >= 1; --f) {  // loads tie: 4 = 3 + 1 = 2 + 2, unlike their tokens
        runs.push_back({7 * f + 1, static_cast<double>(f), rng.UniformInt(1, 60)});
      }
      dp = static_cast<int>(rng.UniformInt(1, 40));
    } else {
      const bool large = trial % 40 == 1;
      std::vector<int64_t> tokens(static_cast<size_t>(rng.UniformInt(0, large ? 3000 : 60)));
      for (int64_t& t : tokens) t = rng.UniformInt(0, 4) == 0 ? 0 : 100 * rng.UniformInt(0, 50);
      runs = Runs(std::move(tokens));
      dp = static_cast<int>(rng.UniformInt(1, large ? 700 : 40));
    }
    if (trial < 2) {  // empty sequences only: they all go to the first rank
      runs = {{0, 0.0, 5}};
      dp = 3 + trial;
    }
    ExpectSame(PackLongestFirst(runs, dp), PackWithHeap(runs, dp), trial);
  }
}

TEST(PackingTest, RankClassesPackPlannersBatchesExactly) {
  // Where the classes of ranks answer, it is the plain heap's answer; and they answer for a
  // planner's batches on every degree (none of those ties two classes).
  Rng rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const std::vector<SequenceRun> runs = PlannerBatch(rng, static_cast<int>(rng.UniformInt(1, 64)),
                                                       static_cast<int>(rng.UniformInt(1, 300)));
    const int dp = trial < 6 ? 1 << trial : static_cast<int>(rng.UniformInt(1, 5000));
    const std::optional<RankShare> got = PackByRankClasses(runs, dp, 1'000'000);
    ASSERT_TRUE(got.has_value()) << "trial " << trial;
    ExpectSame(*got, PackWithHeap(runs, dp), trial);
  }
}

TEST(PackingTest, TheBusiestRankIsTheFirstOfEquals) {
  // The first sequence goes to rank 0, the second (as many FLOPs, fewer tokens) to rank 1: the
  // busiest rank is rank 0, with the first one's tokens, whichever way it is packed.
  const std::vector<SequenceRun> runs = {{10, 2.0, 1}, {9, 2.0, 1}};
  for (const RankShare& share : {PackLongestFirst(runs, 2), *PackByRankClasses(runs, 2, 1000)}) {
    EXPECT_EQ(share.busiest_flops, 2);
    EXPECT_EQ(share.busiest_tokens, 10);
    EXPECT_EQ(share.flops, 4);
  }
}

TEST(PackingTest, RankClassesGiveUpWhereTheyWouldNotBeExact) {
  // Two ranks reach a load of 2 by different sequences (2; 1 + 1): they would take turns by
  // rank, so the classes give up, and the packing places each sequence instead.
  const std::vector<SequenceRun> tie = {{2, 2.0, 1}, {1, 1.0, 3}};
  EXPECT_FALSE(PackByRankClasses(tie, 2, 1000).has_value());
  // The same with three classes, the one tied with the least loaded the root's second child.
  const std::vector<SequenceRun> second = {{5, 5.0, 1}, {3, 3.0, 1}, {1, 3.0, 2}};
  EXPECT_FALSE(PackByRankClasses(second, 3, 1000).has_value());
  ExpectSame(PackLongestFirst(second, 3), PackWithHeap(second, 3), 0);
  const RankShare share = PackLongestFirst(tie, 2);
  EXPECT_EQ(share.busiest_flops, 3);  // rank 0: 2 + 1, the first of the two at 2
  EXPECT_EQ(share.busiest_tokens, 3);
  EXPECT_EQ(share.busiest_sequences, 2);
  // A sequence that adds no load: the first rank takes every one of them.
  EXPECT_FALSE(PackByRankClasses({{{0, 0.0, 4}}}, 3, 1000).has_value());
  // Past the visits allowed.
  const std::vector<SequenceRun> many = {{5, 5.0, 7}, {3, 3.0, 9}};
  EXPECT_FALSE(PackByRankClasses(many, 4, 1).has_value());
  ASSERT_TRUE(PackByRankClasses(many, 4, 1000).has_value());
  ExpectSame(*PackByRankClasses(many, 4, 1000), PackWithHeap(many, 4), 0);
}

}  // namespace
}  // namespace libra::model
