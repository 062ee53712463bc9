#include "experiment/plan_check.h"

#include <gtest/gtest.h>

#include <memory>

#include "planner/planner.h"
#include "recipe/recipe_parser.h"
#include "sim/cluster_sim.h"
#include "support/components.h"
#include "support/test_util.h"

namespace libra::experiment {
namespace {

constexpr const char* kRecipe = R"(name = "r"
steps = 6

[cluster]
nodes = 1
gpus_per_node = 8

[model]
name = "Qwen3-1.7B"

[workload]
kind = "agentic"
preset = "search-r1"

[rl]
prompts_per_step = 4
group_size = 4
staleness = 1

[system]
name = "split"
[system.planner_options]
train_gpus = 4
rollout_tp = 2
)";

recipe::Recipe Parse(const std::vector<std::string>& sets = {}) {
  auto parsed = recipe::ParseRecipe(kRecipe, "r.toml", sets);
  EXPECT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty());
  return parsed->recipe;
}

Components Sim() { return test::OnSimulator(); }

planner::Plan PlanOf(const recipe::Recipe& r) {
  auto planner = planner::BuiltinPlanners().Create(r.system.planner, r.system.planner_options);
  EXPECT_OK(planner);
  auto plan = (*planner)->Initial(MakePlanContext(r, r.system));
  EXPECT_OK(plan);
  return *plan;
}

TEST(PlanCheckTest, MeasuresEveryPhaseOverTheSteadyState) {
  // Asynchronous: a 6-step recipe runs kMinMeasuredSteps; the window starts after the pipeline
  // filled (staleness 1: step 2); the rollout side alone (training free) is faster per step than
  // the pipeline, which also waits for the trainer; deterministic for a seed.
  const recipe::Recipe r = Parse();
  const planner::Plan plan = PlanOf(r);
  auto measured = MeasurePlan(r, r.system, plan, nullptr, Sim());
  ASSERT_OK(measured);
  EXPECT_EQ(measured->steps, kMinMeasuredSteps);
  EXPECT_EQ(measured->first_steady_step, 2);
  const planner::PhaseTimes& p = measured->phases;
  EXPECT_GT(p.rollout_s, 0);
  EXPECT_GT(p.train_s, 0);
  EXPECT_GT(p.sync_s, 0);
  EXPECT_GE(p.step_s, p.train_s + p.sync_s - 1e-9);
  EXPECT_LE(p.rollout_s, p.step_s + 1e-9);
  auto again = MeasurePlan(r, r.system, plan, nullptr, Sim());
  ASSERT_OK(again);
  EXPECT_EQ(again->phases.step_s, p.step_s);
  EXPECT_EQ(again->phases.rollout_s, p.rollout_s);
}

TEST(PlanCheckTest, SynchronousRolloutIsTheBatchMakespan) {
  // Staleness 0: step = rollout + train + sync, each measured on the same run.
  const recipe::Recipe r = Parse({"rl.staleness=0"});
  auto measured = MeasurePlan(r, r.system, PlanOf(r), nullptr, Sim());
  ASSERT_OK(measured);
  EXPECT_EQ(measured->first_steady_step, 1);
  const planner::PhaseTimes& p = measured->phases;
  EXPECT_NEAR(p.step_s, p.rollout_s + p.train_s + p.sync_s, 0.05 * p.step_s);
}

TEST(PlanCheckTest, AFailedRunIsAnError) {
  // A plan whose training does not fit: the simulator refuses its first step.
  const recipe::Recipe r = Parse({"model.name=\"Qwen3-32B\""});
  planner::Plan plan = PlanOf(Parse());
  plan.layout.train = {1, 1, 4, 1};
  EXPECT_FALSE(MeasurePlan(r, r.system, plan, nullptr, Sim()).ok());
}

}  // namespace
}  // namespace libra::experiment
