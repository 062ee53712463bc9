#include "planner/elastic_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "planner/planner.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

// 16 GPUs, 2 nodes of 8: rollout on the first `rollout` GPUs as TP-`tp` instances, training
// (TP2) on the rest.
backend::Layout Split(int rollout, int tp = 2) {
  backend::Layout layout;
  layout.instances = PackInstances(8, 0, rollout, {tp}).value();
  layout.train_gpus = 16 - rollout;
  layout.train = model::TrainLayout{2, 1, (16 - rollout) / 2, 1};
  return layout;
}

TEST(ElasticPoolTest, GrowingTrainingDrainsTheLastInstancesThenSwitchesAtAStepBoundary) {
  ElasticPool pool(Split(8));
  EXPECT_EQ(pool.phase(), PoolPhase::kIdle);
  ASSERT_OK(pool.Begin(Split(4)));
  EXPECT_EQ(pool.phase(), PoolPhase::kDraining);
  EXPECT_EQ(pool.leaving(), (std::vector<size_t>{2, 3}));
  EXPECT_TRUE(pool.Accepting(0));
  EXPECT_TRUE(pool.Accepting(1));
  EXPECT_FALSE(pool.Accepting(2));
  EXPECT_FALSE(pool.Accepting(3));
  // A leaving instance still has a turn: not yet, even at a step boundary.
  EXPECT_FALSE(pool.Ready(std::vector<int>{5, 5, 0, 1}, true).has_value());
  // Drained, but the trainer is mid-step: not yet.
  EXPECT_FALSE(pool.Ready(std::vector<int>{5, 5, 0, 0}, false).has_value());
  // Drained at a step boundary (busy kept instances do not matter).
  const auto layout = pool.Ready(std::vector<int>{5, 5, 0, 0}, true);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(*layout, Split(4));
  EXPECT_EQ(pool.phase(), PoolPhase::kSwitching);
  EXPECT_FALSE(pool.Ready(std::vector<int>{0, 0, 0, 0}, true).has_value());
  pool.Applied();
  EXPECT_EQ(pool.phase(), PoolPhase::kIdle);
  EXPECT_EQ(pool.current(), Split(4));
  EXPECT_TRUE(pool.leaving().empty());
  EXPECT_TRUE(pool.Accepting(1));
  EXPECT_FALSE(pool.Accepting(2));  // no such instance any more
}

TEST(ElasticPoolTest, ShrinkingTrainingHasNothingToDrain) {
  ElasticPool pool(Split(4));
  ASSERT_OK(pool.Begin(Split(8)));
  EXPECT_TRUE(pool.leaving().empty());
  EXPECT_FALSE(pool.Ready(std::vector<int>{3, 3}, false).has_value());
  EXPECT_TRUE(pool.Ready(std::vector<int>{3, 3}, true).has_value());
  pool.Applied();
  EXPECT_EQ(pool.current().instances.size(), 4u);
}

TEST(ElasticPoolTest, ChangedInstancesLeaveEvenWhenTheSplitStays) {
  // Same 8 rollout GPUs, TP2 x 4 -> TP4 x 2: every instance changes, so all of them drain.
  ElasticPool pool(Split(8, 2));
  ASSERT_OK(pool.Begin(Split(8, 4)));
  EXPECT_EQ(pool.leaving(), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(KeptInstances(Split(8, 2), Split(4, 2)), (std::vector<bool>{true, true, false, false}));
}

TEST(ElasticPoolTest, CancelReopensTheLeavingInstances) {
  ElasticPool pool(Split(8));
  pool.Cancel();  // idle: no-op
  ASSERT_OK(pool.Begin(Split(4)));
  pool.Cancel();
  EXPECT_EQ(pool.phase(), PoolPhase::kIdle);
  EXPECT_TRUE(pool.Accepting(3));
  EXPECT_EQ(pool.current(), Split(8));
}

TEST(ElasticPoolTest, LendsTheTrainerAndTakesItBack) {
  // A lend keeps every instance and adds the training GPUs as instances (train_gpus 0): nothing
  // drains. Taking them back drains the added instances.
  backend::Layout lent = Split(8);
  const std::vector<backend::InstanceSpec> added = PackInstances(8, 8, 8, {2}).value();
  for (backend::InstanceSpec spec : added) {
    spec.id = InstanceId(static_cast<int64_t>(lent.instances.size()));
    lent.instances.push_back(spec);
  }
  lent.train_gpus = 0;
  ElasticPool pool(Split(8));
  ASSERT_OK(pool.Begin(lent));
  EXPECT_TRUE(pool.leaving().empty());
  ASSERT_TRUE(pool.Ready(std::vector<int>{1, 1, 1, 1}, true).has_value());
  pool.Applied();
  ASSERT_OK(pool.Begin(Split(8)));
  EXPECT_EQ(pool.leaving(), (std::vector<size_t>{4, 5, 6, 7}));
  EXPECT_FALSE(pool.Ready(std::vector<int>{0, 0, 0, 0, 0, 0, 1, 0}, true).has_value());
  ASSERT_TRUE(pool.Ready(std::vector<int>{3, 0, 0, 0, 0, 0, 0, 0}, true).has_value());
  pool.Applied();
  EXPECT_EQ(pool.current(), Split(8));
  // Without training GPUs and dropping an instance it is no lend.
  backend::Layout bad = lent;
  bad.instances.erase(bad.instances.begin());
  EXPECT_FALSE(pool.Begin(bad).ok());
}

TEST(ElasticPoolTest, RefusesBadTargets) {
  ElasticPool pool(Split(8));
  EXPECT_EQ(pool.Begin(Split(8)).message(),
            "the target is the current layout: " + Split(8).ToString());
  backend::Layout bigger = Split(8);
  bigger.train_gpus = 10;
  bigger.train.dp = 5;
  EXPECT_NE(pool.Begin(bigger).message().find("more than the 16"), std::string::npos);
  backend::Layout partial = Split(8);
  partial.instances.pop_back();  // 6 rollout GPUs and 7 training: 3.5 TP2 replicas
  partial.train_gpus = 7;
  EXPECT_NE(pool.Begin(partial).message().find("not a whole number of 2-GPU replicas"),
            std::string::npos);
  backend::Layout none = Split(8);
  none.instances.clear();
  EXPECT_FALSE(pool.Begin(none).ok());
  ASSERT_OK(pool.Begin(Split(4)));
  const Status again = pool.Begin(Split(12));
  EXPECT_NE(again.message().find("already draining"), std::string::npos);
  EXPECT_EQ(NameOf(PoolPhase::kSwitching), "switching");
}

}  // namespace
}  // namespace libra::planner
