#include "model/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "common/rng.h"
#include "model/catalog.h"
#include "model/cost_model.h"
#include "support/test_util.h"

namespace libra::model {
namespace {

/// Instance j's per-token time at batch b: base[j] * (1 + b / knee[j]): monotone in b, as the
/// model requires.
GroupCostFn Affine(std::vector<double> base, std::vector<double> knee) {
  return [base, knee](size_t j, int64_t count) {
    return base[j] * (1 + static_cast<double>(count) / knee[j]);
  };
}

Result<std::unique_ptr<CostModel>> A800Qwen14B() {
  recipe::Recipe r;
  r.cluster.gpu = "A800-80G";
  r.cluster.nodes = 1;
  r.cluster.gpus_per_node = 8;
  r.model.name = "Qwen3-14B";
  return MakeCostModel(r);
}

std::vector<double> SortedLengths(uint64_t seed, int n) {
  Rng rng(seed);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(std::round(rng.LogNormal(7, 1)));
  std::sort(v.begin(), v.end(), std::greater<>());
  return v;
}

/// The least makespan over every assignment of trajectories to instances (m^n of them).
double BruteForceAny(const std::vector<double>& lengths, size_t m, const GroupCostFn& cost) {
  std::vector<size_t> group(lengths.size(), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    best = std::min(best, AssignmentMakespan(lengths, group, m, cost));
    size_t t = 0;
    while (t < group.size() && ++group[t] == m) group[t++] = 0;
    if (t == group.size()) return best;
  }
}

/// The least makespan over every contiguous cut in instance order.
double BruteForceContiguous(const std::vector<double>& lengths, size_t m, const GroupCostFn& cost) {
  double best = std::numeric_limits<double>::infinity();
  std::function<void(size_t, size_t, double)> go = [&](size_t j, size_t from, double worst) {
    if (j + 1 == m) {
      const auto count = static_cast<int64_t>(lengths.size() - from);
      best = std::min(best, std::max(worst, count ? cost(j, count) * lengths[from] : 0.0));
      return;
    }
    for (size_t to = from; to <= lengths.size(); ++to) {
      const auto count = static_cast<int64_t>(to - from);
      go(j + 1, to, std::max(worst, count ? cost(j, count) * lengths[from] : 0.0));
    }
  };
  go(0, 0, 0);
  return best;
}

TEST(PresortedPartitionTest, MatchesEveryAssignmentOnHomogeneousInstances) {
  // The paper's structural result: with identical instances and a cost monotone in the group
  // size, the best contiguous cut of the sorted lengths is the best of all m^n assignments.
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const int n = 3 + static_cast<int>(seed % 5);  // 3..7 trajectories
    const size_t m = 2 + seed % 2;                 // 2 or 3 instances
    const std::vector<double> lengths = SortedLengths(seed, n);
    const GroupCostFn cost = Affine(std::vector<double>(m, 1e-3), std::vector<double>(m, 3));
    const Partition p = PresortedPartition(lengths, m, cost);
    EXPECT_NEAR(p.makespan, BruteForceAny(lengths, m, cost), 1e-12) << "seed " << seed;
  }
}

TEST(PresortedPartitionTest, MatchesEveryContiguousCutOnMixedInstances) {
  // Heterogeneous instances (a fast one first, as the callers sort by TP): the DP is exact over
  // its search space, every contiguous cut in instance order; the cut it returns achieves it.
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const int n = 4 + static_cast<int>(seed % 5);
    const std::vector<double> lengths = SortedLengths(100 + seed, n);
    const GroupCostFn cost = Affine({2e-4, 1e-3, 1e-3}, {20, 3, 3});
    const Partition p = PresortedPartition(lengths, 3, cost);
    EXPECT_NEAR(p.makespan, BruteForceContiguous(lengths, 3, cost), 1e-12) << "seed " << seed;
    std::vector<size_t> group(lengths.size());
    ASSERT_EQ(p.begin.size(), 3u);
    EXPECT_EQ(p.begin[0], 0);
    EXPECT_EQ(p.end[2], n);
    for (size_t j = 0; j < 3; ++j) {
      if (j > 0) {
        EXPECT_EQ(p.begin[j], p.end[j - 1]);
      }
      for (int64_t t = p.begin[j]; t < p.end[j]; ++t) group[static_cast<size_t>(t)] = j;
    }
    EXPECT_NEAR(AssignmentMakespan(lengths, group, 3, cost), p.makespan, 1e-12);
  }
}

TEST(PresortedPartitionTest, TheLongestGoToTheFastestInstance) {
  // One fast instance and three slow ones: the longest trajectory is isolated on the fast one,
  // and the slack is spread rather than left on an empty instance.
  const std::vector<double> lengths = {20000, 3000, 2500, 2000, 1500, 1000, 900, 800};
  const GroupCostFn cost = Affine({2e-4, 1e-3, 1e-3, 1e-3}, {20, 3, 3, 3});
  const Partition p = PresortedPartition(lengths, 4, cost);
  EXPECT_EQ(p.begin[0], 0);
  EXPECT_GE(p.end[0], 1);
  for (size_t j = 1; j < 4; ++j) EXPECT_LT(p.begin[j], p.end[j]) << "instance " << j << " empty";
}

/// The cut by the plain O(m n^2) programme, every group scanned: the least makespan, then among
/// cuts within it the least sum of squared normalised costs (ties to the first found).
Partition UnprunedCut(const std::vector<double>& lengths, size_t m, const GroupCostFn& cost) {
  const size_t n = lengths.size();
  const double inf = std::numeric_limits<double>::infinity();
  auto group = [&](size_t j, size_t k, size_t i) {
    return k == i ? 0.0 : cost(j, static_cast<int64_t>(i - k)) * lengths[k];
  };
  std::vector<std::vector<double>> d(m + 1, std::vector<double>(n + 1, inf));
  d[0][0] = 0;
  for (size_t j = 1; j <= m; ++j) {
    for (size_t i = 0; i <= n; ++i) {
      for (size_t k = 0; k <= i; ++k) {
        d[j][i] = std::min(d[j][i], std::max(d[j - 1][k], group(j - 1, k, i)));
      }
    }
  }
  Partition out{d[m][n], std::vector<int64_t>(m), std::vector<int64_t>(m)};
  const double limit = out.makespan * (1 + 1e-9);
  std::vector<std::vector<double>> e(m + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(m + 1, std::vector<size_t>(n + 1, 0));
  e[0][0] = 0;
  for (size_t j = 1; j <= m; ++j) {
    for (size_t i = 0; i <= n; ++i) {
      for (size_t k = i + 1; k-- > 0;) {
        const double cost_s = group(j - 1, k, i);
        if (cost_s > limit || e[j - 1][k] == inf) continue;
        const double c = cost_s / out.makespan;
        if (e[j - 1][k] + c * c < e[j][i]) {
          e[j][i] = e[j - 1][k] + c * c;
          from[j][i] = k;
        }
      }
    }
  }
  for (size_t j = m, i = n; j >= 1; --j) {
    out.begin[j - 1] = static_cast<int64_t>(from[j][i]);
    out.end[j - 1] = static_cast<int64_t>(i);
    i = from[j][i];
  }
  return out;
}

TEST(PresortedPartitionTest, MatchesTheUnprunedProgramme) {
  // Beyond what brute force enumerates (60 lengths, five mixed instances): the bisection of the
  // min-max pass and the bounds of the spread pass give the plain programme's cut exactly.
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const std::vector<double> lengths = SortedLengths(200 + seed, 60);
    const GroupCostFn cost = Affine({2e-4, 5e-4, 5e-4, 1e-3, 1e-3}, {40, 10, 10, 3, 3});
    const Partition p = PresortedPartition(lengths, 5, cost);
    const Partition want = UnprunedCut(lengths, 5, cost);
    EXPECT_EQ(p.makespan, want.makespan) << "seed " << seed;
    EXPECT_EQ(p.begin, want.begin) << "seed " << seed;
    EXPECT_EQ(p.end, want.end) << "seed " << seed;
  }
}

TEST(PresortedPartitionTest, AggregatesTheShortEnd) {
  // 2,000 lengths with 64 units: the longest 32 stay single; the result still covers every
  // trajectory once and is close to the exact DP's makespan (which bounds it from below).
  const std::vector<double> lengths = SortedLengths(7, 2000);
  const GroupCostFn cost = Affine({2e-4, 5e-4, 1e-3, 1e-3}, {200, 100, 50, 50});
  const Partition coarse = PresortedPartition(lengths, 4, cost, 64);
  const Partition fine = PresortedPartition(lengths, 4, cost, 4000);
  EXPECT_EQ(coarse.begin[0], 0);
  EXPECT_EQ(coarse.end[3], 2000);
  EXPECT_GE(coarse.makespan, fine.makespan - 1e-9);
  EXPECT_LE(coarse.makespan, fine.makespan * 1.05);
}

TEST(PresortedPartitionTest, EmptyInput) {
  const Partition p = PresortedPartition({}, 2, Affine({1, 1}, {1, 1}));
  EXPECT_EQ(p.makespan, 0);
  EXPECT_EQ(p.begin, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(p.end, (std::vector<int64_t>{0, 0}));
}

TEST(GroupStepModelTest, WavesBeyondWhatFits) {
  // Qwen3-14B on A800: the step grows with the batch; beyond the KV capacity the group runs in
  // waves (time per token proportional to the group size).
  auto cost = A800Qwen14B();
  ASSERT_OK(cost);
  const GroupStepModel model(**cost, 20000, 256);
  const int64_t fit = model.Fit(1);
  ASSERT_GT(fit, 4);
  EXPECT_LT(model.StepSeconds(1, 1), model.StepSeconds(1, 4));
  EXPECT_LT(model.StepSeconds(2, 1), model.StepSeconds(1, 1));  // TP2 is faster per token
  EXPECT_NEAR(model.StepSeconds(1, 3 * fit), 3 * model.StepSeconds(1, fit), 1e-12);
  EXPECT_EQ(model.StepSeconds(4, 0), 0);
}

TEST(KvTransferTimeTest, BytesOverTheLink) {
  // 20,000 tokens of Qwen3-14B KV (160 KiB each) over A800 NVLink (200 GB/s) and the network
  // (100 GB/s).
  auto cost = A800Qwen14B();
  ASSERT_OK(cost);
  const double bytes = 20000.0 * 2 * 40 * 8 * 128 * 2;
  EXPECT_NEAR(KvTransferTime(**cost, 20000, true), bytes / 200e9, 1e-12);
  EXPECT_NEAR(KvTransferTime(**cost, 20000, false), bytes / 100e9, 1e-12);
  EXPECT_EQ(KvTransferTime(**cost, 0, false), 0);
}

}  // namespace
}  // namespace libra::model
