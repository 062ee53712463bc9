#include "backend/backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace libra::backend {
namespace {

Layout MakeLayout(int train_gpus, const std::vector<int>& tps, bool colocated = false) {
  Layout layout;
  layout.train_gpus = train_gpus;
  layout.colocated = colocated;
  int gpu = train_gpus;
  for (size_t i = 0; i < tps.size(); ++i) {
    InstanceSpec spec;
    spec.id = InstanceId(static_cast<int64_t>(i));
    spec.tp = tps[i];
    spec.first_gpu = gpu;
    gpu += tps[i];
    layout.instances.push_back(spec);
  }
  return layout;
}

TEST(LayoutTest, RolloutGpusAndToString) {
  // rollout_gpus() sums the instances' TP sizes; ToString groups instances by TP, smallest first,
  // and marks colocated layouts.
  struct Case {
    std::string name;
    Layout layout;
    int rollout_gpus;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"empty", MakeLayout(0, {}), 0, "train 0 (tp1 pp1 dp1 mb1) | rollout none"},
      {"no rollout", MakeLayout(8, {}), 0, "train 8 (tp1 pp1 dp1 mb1) | rollout none"},
      {"tp1 x8", MakeLayout(8, {1, 1, 1, 1, 1, 1, 1, 1}), 8,
       "train 8 (tp1 pp1 dp1 mb1) | rollout tp1x8"},
      {"mixed, unsorted", MakeLayout(4, {4, 1, 2, 1}), 8,
       "train 4 (tp1 pp1 dp1 mb1) | rollout tp1x2+tp2x1+tp4x1"},
      {"colocated", MakeLayout(16, {8, 8}, true), 16,
       "train 16 (tp1 pp1 dp1 mb1) | rollout tp8x2 (colocated)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.layout.rollout_gpus(), c.rollout_gpus);
    EXPECT_EQ(c.layout.ToString(), c.text);
  }
}

TEST(LayoutTest, EqualityComparesEveryField) {
  // Layouts are equal only when trainer, instances and colocation all match.
  const Layout a = MakeLayout(4, {2, 2});
  EXPECT_EQ(a, MakeLayout(4, {2, 2}));
  EXPECT_NE(a, MakeLayout(4, {2, 1, 1}));
  EXPECT_NE(a, MakeLayout(2, {2, 2}));
  EXPECT_NE(a, MakeLayout(4, {2, 2}, true));
}

}  // namespace
}  // namespace libra::backend
