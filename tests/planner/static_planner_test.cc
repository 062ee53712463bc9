#include "planner/static_planner.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "support/components.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

recipe::OptionTable Options(const std::vector<std::pair<std::string, int64_t>>& ints) {
  recipe::OptionTable table;
  table.path = "system.planner_options";
  table.where = "r.toml:9:1";
  for (const auto& [key, value] : ints) {
    recipe::OptionValue v;
    v.kind = recipe::OptionValue::Kind::kInt;
    v.int_value = value;
    v.where = "r.toml:10:1";
    table.entries.push_back({key, v});
  }
  return table;
}

PlanContext Cluster(int nodes, int gpus_per_node) {
  PlanContext context;
  context.nodes = nodes;
  context.gpus_per_node = gpus_per_node;
  context.batch_trajectories = 64;
  return context;
}

TEST(StaticPlannerTest, DefaultSplitsHalfTheCluster) {
  // Without train_gpus: half the GPUs of one node, or half the nodes (rounded down, whole nodes)
  // of a multi-node cluster; the rest roll out on the first GPUs, the trainer takes the last ones
  // (so that moving GPUs between the two keeps the rollout instances' ids).
  struct Case {
    std::string name;
    int nodes;
    int gpus_per_node;
    int64_t rollout_tp;
    int train_gpus;
    std::string layout;
    int first_rollout_gpu;
  };
  const std::vector<Case> cases = {
      {"one node of 8", 1, 8, 1, 4, "train 4 (tp4 pp1 dp1 mb1) | rollout tp1x4", 0},
      {"one node of 2", 1, 2, 1, 1, "train 1 (tp1 pp1 dp1 mb1) | rollout tp1x1", 0},
      {"one node of 8, tp4", 1, 8, 4, 4, "train 4 (tp4 pp1 dp1 mb1) | rollout tp4x1", 0},
      {"two nodes, tp8", 2, 8, 8, 8, "train 8 (tp8 pp1 dp1 mb1) | rollout tp8x1", 0},
      {"three nodes", 3, 8, 2, 8, "train 8 (tp8 pp1 dp1 mb1) | rollout tp2x8", 0},
      {"four nodes, tp8", 4, 8, 8, 16, "train 16 (tp8 pp1 dp2 mb1) | rollout tp8x2", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto planner = StaticPlanner::Create(Options({{"rollout_tp", c.rollout_tp}}));
    ASSERT_OK(planner);
    auto plan = (*planner)->Initial(Cluster(c.nodes, c.gpus_per_node));
    ASSERT_OK(plan);
    EXPECT_EQ(plan->layout.train_gpus, c.train_gpus);
    EXPECT_FALSE(plan->layout.colocated);
    EXPECT_EQ(plan->layout.train_gpus + plan->layout.rollout_gpus(), c.nodes * c.gpus_per_node);
    EXPECT_EQ(plan->layout.ToString(), c.layout);
    ASSERT_FALSE(plan->layout.instances.empty());
    EXPECT_EQ(plan->layout.instances.front().first_gpu, c.first_rollout_gpu);
    EXPECT_EQ(plan->reason, "default split: half the cluster");
    EXPECT_FALSE(plan->predicted_step_s.has_value());
  }
}

TEST(StaticPlannerTest, ExplicitTrainGpus) {
  // train_gpus from the recipe is used as given; instances pack the rest node by node.
  auto planner = StaticPlanner::Create(Options({{"train_gpus", 6}, {"rollout_tp", 2}}));
  ASSERT_OK(planner);
  EXPECT_EQ((*planner)->Name(), "static");
  auto plan = (*planner)->Initial(Cluster(2, 8));
  ASSERT_OK(plan);
  EXPECT_EQ(plan->layout.train_gpus, 6);
  EXPECT_EQ(plan->layout.ToString(), "train 6 (tp2 pp1 dp3 mb1) | rollout tp2x5");
  std::vector<int> first_gpus;
  std::vector<int> nodes;
  for (const backend::InstanceSpec& i : plan->layout.instances) {
    first_gpus.push_back(i.first_gpu);
    nodes.push_back(i.node);
  }
  EXPECT_EQ(first_gpus, (std::vector<int>{0, 2, 4, 6, 8}));
  EXPECT_EQ(nodes, (std::vector<int>{0, 0, 0, 0, 1}));
  EXPECT_EQ(plan->reason, "fixed split from the recipe");
}

TEST(StaticPlannerTest, LendsIdleTrainerGpusOnlyWhenAsked) {
  // lend_idle_trainer: the 8 training GPUs become TP2 instances 4..7 after the rollout ones.
  recipe::OptionTable options = Options({{"train_gpus", 8}, {"rollout_tp", 2}});
  recipe::OptionValue lend;
  lend.kind = recipe::OptionValue::Kind::kBool;
  lend.bool_value = true;
  options.entries.push_back({"lend_idle_trainer", lend});
  auto lending = StaticPlanner::Create(options);
  ASSERT_OK(lending);
  auto plan = (*lending)->Initial(Cluster(2, 8));
  ASSERT_OK(plan);
  const std::optional<backend::Layout> lent = (*lending)->IdleTrainerLayout(plan->layout);
  ASSERT_TRUE(lent.has_value());
  EXPECT_EQ(lent->train_gpus, 0);
  ASSERT_EQ(lent->instances.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(lent->instances[i].id.value, static_cast<int64_t>(i));
    EXPECT_EQ(lent->instances[i].tp, 2);
    EXPECT_EQ(lent->instances[i].first_gpu, static_cast<int>(2 * i));
  }
  auto plain = StaticPlanner::Create(Options({{"train_gpus", 8}}));
  ASSERT_OK(plain);
  ASSERT_OK((*plain)->Initial(Cluster(2, 8)));
  EXPECT_FALSE((*plain)->IdleTrainerLayout(plan->layout).has_value());
}

TEST(StaticPlannerTest, UnschedulableClusters) {
  // Splits that can never fit are kUnschedulable with the reason.
  struct Case {
    std::string name;
    std::vector<std::pair<std::string, int64_t>> options;
    int nodes;
    int gpus_per_node;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"single GPU",
       {},
       1,
       1,
       "a static split needs at least 2 GPUs (one to train, one to roll out); use the colocated "
       "planner"},
      {"train_gpus equal to total",
       {{"train_gpus", 8}},
       1,
       8,
       "train_gpus = 8 leaves no GPU for rollout (the cluster has 8)"},
      {"train_gpus above total",
       {{"train_gpus", 20}},
       2,
       8,
       "train_gpus = 20 leaves no GPU for rollout (the cluster has 16)"},
      {"tp does not divide gpus_per_node",
       {{"rollout_tp", 4}},
       2,
       6,
       "rollout_tp = 4 does not divide gpus_per_node = 6"},
      {"tp larger than a node",
       {{"rollout_tp", 8}},
       2,
       4,
       "rollout_tp = 8 does not divide gpus_per_node = 4"},
      {"train_gpus leaves a fragment tp8 cannot use",
       {{"train_gpus", 4}, {"rollout_tp", 8}},
       2,
       8,
       "4 rollout GPUs left on node 1 cannot hold a TP-8 instance (an instance never spans "
       "nodes)"},
      {"default split of one node too small for tp8",
       {{"rollout_tp", 8}},
       1,
       8,
       "4 rollout GPUs left on node 0 cannot hold a TP-8 instance (an instance never spans "
       "nodes)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto planner = StaticPlanner::Create(Options(c.options));
    ASSERT_OK(planner);
    auto plan = (*planner)->Initial(Cluster(c.nodes, c.gpus_per_node));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status(), Status::Unschedulable(c.message));
  }
}

TEST(StaticPlannerTest, InstancesMustHoldTheLongestContext) {
  // A rollout TP whose KV cache cannot hold the longest context to expect is unschedulable (an
  // engine would not start), rather than a run that fails when that context comes.
  const auto cost = test::Roofline("A800-80G", "Qwen3-30B-A3B");
  PlanContext context = Cluster(4, 8);
  context.cost = cost.get();
  context.max_sequence_tokens = 100000;
  auto tp1 = StaticPlanner::Create(Options({}));
  ASSERT_OK(tp1);
  EXPECT_EQ((*tp1)->Initial(context).status(), CheckInstancesHold(context, {1}));
  EXPECT_EQ((*tp1)->Initial(context).status().code(), StatusCode::kUnschedulable);
  auto tp2 = StaticPlanner::Create(Options({{"rollout_tp", 2}}));
  ASSERT_OK(tp2);
  EXPECT_OK((*tp2)->Initial(context));
}

TEST(StaticPlannerTest, RejectsBadOptions) {
  // Bad option values and unknown keys are invalid recipes naming the key.
  struct Case {
    std::string name;
    std::vector<std::pair<std::string, int64_t>> options;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"tp not a power of two",
       {{"rollout_tp", 3}},
       "r.toml:10:1: system.planner_options.rollout_tp: must be 1, 2, 4 or 8 (got 3)"},
      {"tp 16", {{"rollout_tp", 16}}, "must be 1, 2, 4 or 8 (got 16)"},
      {"zero train_gpus",
       {{"train_gpus", 0}},
       "system.planner_options.train_gpus: must be in [1, 1048576] (got 0)"},
      {"typo",
       {{"train_gpu", 4}},
       "system.planner_options.train_gpu: unknown option; did you mean 'train_gpus'?"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto planner = StaticPlanner::Create(Options(c.options));
    ASSERT_FALSE(planner.ok());
    EXPECT_EQ(planner.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(planner.status().message().find(c.fragment), std::string::npos)
        << planner.status().message();
  }
}

}  // namespace
}  // namespace libra::planner
