#include "planner/libra_ref_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "model/catalog.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

recipe::OptionTable Options(std::vector<std::pair<std::string, int64_t>> ints) {
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

struct Fixture {
  Fixture() {
    const model::CostModelContext mc{model::FindGpu("A800-80G").value(),
                                     model::FindModel("Qwen3-14B").value(), 8};
    cost = std::make_unique<model::ReferenceCostModel>(mc, model::ReferenceParamsFrom(mc));
    context.nodes = 6;
    context.gpus_per_node = 8;
    context.batch_trajectories = 256;
    context.staleness = 2;
    context.steps = 20;
    context.cost = cost.get();
    for (int i = 0; i < 64; ++i) {
      context.history.push_back({1500, 800 + 300 * (i % 50), 100});
    }
  }
  std::unique_ptr<model::ReferenceCostModel> cost;
  PlanContext context;
};

TEST(LibraRefPlannerTest, InitialPlanIsTheAuthorsOptimizersBest) {
  // The initial plan is OptimizeReference's best pair over the startup profile (tool tokens
  // excluded, as the reference's history does), packed rollout-first.
  Fixture f;
  auto planner = LibraRefPlanner::Create(recipe::OptionTable());
  ASSERT_OK(planner);
  EXPECT_EQ((*planner)->Name(), "libra-ref");
  auto plan = (*planner)->Initial(f.context);
  ASSERT_OK(plan);
  ReferencePlannerConfig config;
  config.n_total_gpus = 48;
  ReferenceRunConfig run;
  run.batch_size = 256;
  run.n_samples = 1;
  const std::vector<model::RequestInfo> requests = ReferenceRequests(f.context.history);
  EXPECT_EQ(requests[1], (model::RequestInfo{1500, 1100}));
  const ReferenceOptimization best =
      OptimizeReference(*f.cost, requests, ReferenceSearchFor(config, run));
  ASSERT_TRUE(best.found());
  EXPECT_EQ(plan->layout.train_gpus, best.train->gpus());
  EXPECT_EQ(plan->layout.train.tp, best.train->tp);
  std::vector<int> tps;
  for (const backend::InstanceSpec& i : plan->layout.instances) tps.push_back(i.tp);
  std::vector<int> expected = best.rollout_tp_list;
  std::sort(expected.begin(), expected.end(), std::greater<>());
  EXPECT_EQ(tps, expected);
  EXPECT_EQ(plan->layout.train_gpus + plan->layout.rollout_gpus(), 48);
  ASSERT_TRUE(plan->predicted_step_s.has_value());
  EXPECT_DOUBLE_EQ(*plan->predicted_step_s, best.t_global);
  EXPECT_NE(plan->reason.find("the authors' optimizer"), std::string::npos);
}

TEST(LibraRefPlannerTest, DecidesOnTheirTriggersWithTheirOneStepGate) {
  // Interval 2, warmup 1: step 0 decides nothing (warmup), step 1 nothing (interval skip: no
  // pressure), step 2 evaluates; with a 1000 s reconfiguration cost nothing is ever worth it.
  Fixture f;
  auto planner =
      LibraRefPlanner::Create(Options({{"plan_interval", 2}, {"reconfiguration_cost_s", 1000}}));
  ASSERT_OK(planner);
  auto plan = (*planner)->Initial(f.context);
  ASSERT_OK(plan);
  StepObservation o;
  o.layout = plan->layout;
  o.rollout_s = 10;
  o.train_s = 10;
  o.step_s = 10;
  o.trajectories = f.context.history;
  o.step = 0;
  EXPECT_FALSE((*planner)->OnStep(o).has_value());
  o.step = 1;
  EXPECT_FALSE((*planner)->OnStep(o).has_value());
  o.step = 2;
  const auto decision = (*planner)->OnStep(o);
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->trigger, "interval");
  EXPECT_FALSE(decision->layout.has_value());
  ASSERT_TRUE(decision->current_step_s.has_value());
  if (decision->candidate_step_s) {
    EXPECT_EQ(decision->transition_s, 1000);
    EXPECT_LT(*decision->gain_s, 0);
  }
  EXPECT_TRUE(decision->reason.starts_with("same_plan") ||
              decision->reason.starts_with("gain_below_threshold"))
      << decision->reason;
}

TEST(LibraRefPlannerTest, NeedsACostModelAndChecksItsOptions) {
  auto planner = LibraRefPlanner::Create(recipe::OptionTable());
  ASSERT_OK(planner);
  PlanContext context;
  EXPECT_EQ((*planner)->Initial(context).status().code(), StatusCode::kUnschedulable);
  EXPECT_FALSE(LibraRefPlanner::Create(Options({{"plan_interval", 0}})).ok());
  EXPECT_FALSE(LibraRefPlanner::Create(Options({{"no_such_key", 1}})).ok());
}

}  // namespace
}  // namespace libra::planner
