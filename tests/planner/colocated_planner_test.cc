#include "planner/colocated_planner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/components.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

recipe::OptionTable Options(const std::vector<std::pair<std::string, int64_t>>& ints) {
  recipe::OptionTable table;
  table.path = "system.planner_options";
  for (const auto& [key, value] : ints) {
    recipe::OptionValue v;
    v.kind = recipe::OptionValue::Kind::kInt;
    v.int_value = value;
    table.entries.push_back({key, v});
  }
  return table;
}

PlanContext Cluster(int nodes, int gpus_per_node) {
  PlanContext context;
  context.nodes = nodes;
  context.gpus_per_node = gpus_per_node;
  return context;
}

TEST(ColocatedPlannerTest, EveryGpuTrainsAndRollsOut) {
  // All GPUs train, and TP-rollout_tp instances cover all of them; the layout is colocated and
  // the pipeline must be synchronous.
  struct Case {
    std::string name;
    int nodes;
    int gpus_per_node;
    int64_t tp;
    std::string layout;
  };
  const std::vector<Case> cases = {
      {"one GPU", 1, 1, 1, "train 1 (tp1 pp1 dp1 mb1) | rollout tp1x1 (colocated)"},
      {"one node tp1", 1, 8, 1, "train 8 (tp8 pp1 dp1 mb1) | rollout tp1x8 (colocated)"},
      {"two nodes tp2", 2, 8, 2, "train 16 (tp8 pp1 dp2 mb1) | rollout tp2x8 (colocated)"},
      {"two nodes tp8", 2, 8, 8, "train 16 (tp8 pp1 dp2 mb1) | rollout tp8x2 (colocated)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto planner = ColocatedPlanner::Create(Options({{"rollout_tp", c.tp}}));
    ASSERT_OK(planner);
    EXPECT_EQ((*planner)->Name(), "colocated");
    auto plan = (*planner)->Initial(Cluster(c.nodes, c.gpus_per_node));
    ASSERT_OK(plan);
    const int total = c.nodes * c.gpus_per_node;
    EXPECT_TRUE(plan->layout.colocated);
    EXPECT_EQ(plan->layout.train_gpus, total);
    EXPECT_EQ(plan->layout.rollout_gpus(), total);
    EXPECT_EQ(plan->layout.ToString(), c.layout);
    EXPECT_EQ(plan->layout.instances.front().first_gpu, 0);
    EXPECT_EQ(plan->reason, "all GPUs roll out, then all train");
  }
}

TEST(ColocatedPlannerTest, TpMustDivideGpusPerNode) {
  // A TP size that does not divide a node is unschedulable.
  auto planner = ColocatedPlanner::Create(Options({{"rollout_tp", 4}}));
  ASSERT_OK(planner);
  EXPECT_EQ((*planner)->Initial(Cluster(2, 6)).status(),
            Status::Unschedulable("rollout_tp = 4 does not divide gpus_per_node = 6"));
  EXPECT_EQ((*planner)->Initial(Cluster(1, 2)).status(),
            Status::Unschedulable("rollout_tp = 4 does not divide gpus_per_node = 2"));
}

TEST(ColocatedPlannerTest, InstancesMustHoldTheLongestContext) {
  // As the static planner: a TP-1 instance of Qwen3-30B-A3B cannot hold 100,000 tokens.
  const auto cost = test::Roofline("A800-80G", "Qwen3-30B-A3B");
  PlanContext context = Cluster(2, 8);
  context.batch_trajectories = 64;
  context.cost = cost.get();
  context.max_sequence_tokens = 100000;
  auto tp1 = ColocatedPlanner::Create(Options({}));
  ASSERT_OK(tp1);
  EXPECT_EQ((*tp1)->Initial(context).status(), CheckInstancesHold(context, {1}));
  EXPECT_EQ((*tp1)->Initial(context).status().code(), StatusCode::kUnschedulable);
  auto tp2 = ColocatedPlanner::Create(Options({{"rollout_tp", 2}}));
  ASSERT_OK(tp2);
  EXPECT_OK((*tp2)->Initial(context));
}

TEST(ColocatedPlannerTest, RejectsBadOptions) {
  // rollout_tp must be 1, 2, 4 or 8; train_gpus is not an option of this planner.
  struct Case {
    std::string name;
    std::vector<std::pair<std::string, int64_t>> options;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"tp 3",
       {{"rollout_tp", 3}},
       "system.planner_options.rollout_tp: must be 1, 2, 4 or 8 (got 3)"},
      {"train_gpus",
       {{"train_gpus", 4}},
       "system.planner_options.train_gpus: unknown option (known: rollout_tp, rollout_tps)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto planner = ColocatedPlanner::Create(Options(c.options));
    ASSERT_FALSE(planner.ok());
    EXPECT_EQ(planner.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(planner.status().message().find(c.fragment), std::string::npos)
        << planner.status().message();
  }
}

}  // namespace
}  // namespace libra::planner
