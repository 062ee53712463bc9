#include "backend/backend.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <variant>
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

/// A backend whose Wait hands out `next` once, then nothing (or `error`).
class ScriptedBackend : public Backend {
 public:
  std::string_view Name() const override { return "scripted"; }
  Status Submit(const Action&) override { return Status(); }
  Result<std::vector<Event>> Wait() override {
    if (!error.ok()) return error;
    return std::exchange(next, {});
  }
  std::vector<Event> next;
  Status error;
};

TEST(BackendTest, WaitIntoReplacesTheVectorWithWaitsEventsOrPassesItsError) {
  ScriptedBackend backend;
  backend.next = {Event{2.5, SyncDone{3, 1.0}}};
  std::vector<Event> events = {Event{0, LayoutApplied{}}, Event{1, LayoutApplied{}}};
  ASSERT_TRUE(backend.WaitInto(&events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].at, 2.5);
  ASSERT_TRUE(std::holds_alternative<SyncDone>(events[0].what));
  ASSERT_TRUE(backend.WaitInto(&events).ok());
  EXPECT_TRUE(events.empty());
  backend.error = Status::Backend("scripted", "engine gone");
  const Status failed = backend.WaitInto(&events);
  EXPECT_EQ(failed.code(), StatusCode::kBackend);
  EXPECT_EQ(failed.message(), backend.error.message());
}

}  // namespace
}  // namespace libra::backend
