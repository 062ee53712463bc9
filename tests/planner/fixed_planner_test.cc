#include "planner/fixed_planner.h"

#include <gtest/gtest.h>

#include "planner/static_planner.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

TEST(FixedPlannerTest, PlaysBackItsPlanAndNeverMoves) {
  Plan plan;
  plan.layout.train_gpus = 4;
  plan.layout.train = {1, 1, 4, 1};
  auto packed = PackSizes(8, {2, 2});
  ASSERT_OK(packed);
  plan.layout.instances = *packed;
  plan.predicted_step_s = 3;
  FixedPlanner fixed(plan);
  PlanContext context;
  auto initial = fixed.Initial(context);
  ASSERT_OK(initial);
  EXPECT_EQ(initial->layout, plan.layout);
  EXPECT_EQ(initial->predicted_step_s, 3);
  StepObservation o;
  o.layout = plan.layout;
  EXPECT_FALSE(fixed.OnStep(o).has_value());
  EXPECT_FALSE(fixed.IdleTrainerLayout(plan.layout).has_value());
}

TEST(FixedPlannerTest, LendsTheTrainerWhenItsPlannerDoes) {
  // The planner that made the plan decides what the waiting trainer's GPUs do.
  StaticPlanner lender(4, {2}, /*lend_idle_trainer=*/true);
  PlanContext context;
  context.nodes = 1;
  context.gpus_per_node = 8;
  auto plan = lender.Initial(context);
  ASSERT_OK(plan);
  FixedPlanner fixed(*plan, &lender);
  const std::optional<backend::Layout> lent = fixed.IdleTrainerLayout(plan->layout);
  ASSERT_TRUE(lent.has_value());
  EXPECT_EQ(lent->train_gpus, 0);
  EXPECT_EQ(lent->rollout_gpus(), 8);
}

}  // namespace
}  // namespace libra::planner
