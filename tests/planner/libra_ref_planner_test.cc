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

TEST(LibraRefPlannerTest, PlansOnTheRecipesLibraRefModelWithItsOverrides) {
  // [cost_model] name = "libra-ref" with overrides: the planner plans on exactly that model (the
  // authors' YAML numbers for Qwen3-14B), not on one rebuilt from the catalog.
  Fixture f;
  recipe::OptionTable overrides;
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, double>>{{"num_params", 14.0e9},
                                                   {"mem_bw", 2.0e12},
                                                   {"bw_inter_node", 25e9},
                                                   {"max_seq_length", 32768},
                                                   {"reconfiguration_cost_s", 40}}) {
    recipe::OptionValue v;
    v.kind = recipe::OptionValue::Kind::kDouble;
    v.double_value = value;
    if (key == "max_seq_length") {
      v.kind = recipe::OptionValue::Kind::kInt;
      v.int_value = static_cast<int64_t>(value);
    }
    v.where = "r.toml:3:1";
    overrides.entries.push_back({key, v});
  }
  const model::CostModelContext mc{model::FindGpu("A800-80G").value(),
                                   model::FindModel("Qwen3-14B").value(), 8};
  auto made = model::BuiltinCostModels().Create("libra-ref", mc, overrides);
  ASSERT_OK(made);
  const auto& given = static_cast<const model::ReferenceCostModel&>(**made);
  f.context.cost = made->get();
  auto planner = LibraRefPlanner::Create(recipe::OptionTable());
  ASSERT_OK(planner);
  auto plan = (*planner)->Initial(f.context);
  ASSERT_OK(plan);
  ReferencePlannerConfig config;
  config.n_total_gpus = 48;
  ReferenceRunConfig run;
  run.batch_size = 256;
  run.n_samples = 1;
  const ReferenceOptimization expected = OptimizeReference(
      given, ReferenceRequests(f.context.history), ReferenceSearchFor(config, run));
  ASSERT_TRUE(expected.found());
  EXPECT_DOUBLE_EQ(*plan->predicted_step_s, expected.t_global);
  const ReferenceOptimization catalog = OptimizeReference(
      *f.cost, ReferenceRequests(f.context.history), ReferenceSearchFor(config, run));
  EXPECT_NE(expected.t_global, catalog.t_global);  // the overrides matter
  // The model's reconfiguration cost is the one its one-step gate charges.
  StepObservation o;
  o.layout = plan->layout;
  o.trajectories = f.context.history;
  o.rollout_s = o.train_s = o.step_s = 10;
  o.step = 10;
  const auto decision = (*planner)->OnStep(o);
  ASSERT_TRUE(decision.has_value());
  if (decision->transition_s) {
    EXPECT_EQ(*decision->transition_s, 40);
  }
}

TEST(LibraRefPlannerTest, TakesEveryOptionOfTheAuthorsPlanner) {
  // Their GlobalResourcePlannerConfig by name, GRP_FORCE_* as options; allowed_train_tp and
  // allowed_train_pp restrict the optimizer's training candidates.
  Fixture f;
  recipe::OptionTable table = Options({{"plan_interval", 3},
                                       {"warmup_steps", 2},
                                       {"min_history_size", 4},
                                       {"max_history_size", 1000},
                                       {"fixed_train_gpus", 16},
                                       {"allocation_granularity_gpus", 8},
                                       {"min_train_gpus", 8},
                                       {"min_rollout_gpus", 8},
                                       {"runtime_replan_cooldown_steps", 2},
                                       {"runtime_rejected_rollout_delta_threshold", 4},
                                       {"elastic_hybrid_replica_size_gpus", 0},
                                       {"elastic_hybrid_min_rollout_gpus", 8},
                                       {"elastic_hybrid_signal_ttl_steps", 5},
                                       {"force_train_gpus", 16}});
  auto add = [&table](const std::string& key, recipe::OptionValue v) {
    v.where = "r.toml:11:1";
    table.entries.push_back({key, v});
  };
  recipe::OptionValue d;
  d.kind = recipe::OptionValue::Kind::kDouble;
  for (const char* key :
       {"min_gain_ratio", "runtime_queue_pressure_threshold",
        "runtime_active_rollout_pressure_threshold", "runtime_rollout_train_imbalance_threshold",
        "elastic_hybrid_borrow_train_rollout_ratio", "elastic_hybrid_release_train_rollout_ratio",
        "elastic_hybrid_max_rollout_pressure"}) {
    d.double_value = 0.5;
    add(key, d);
  }
  recipe::OptionValue b;
  b.kind = recipe::OptionValue::Kind::kBool;
  for (const char* key :
       {"require_heterogeneous_rollout_tp", "online_replanning", "elastic_hybrid_planning_enabled",
        "verbose", "force_runtime_reconfigure"}) {
    add(key, b);
  }
  recipe::OptionValue str;
  str.kind = recipe::OptionValue::Kind::kString;
  str.string_value = "configured";
  add("initial_allocation_strategy", str);
  recipe::OptionValue list;
  list.kind = recipe::OptionValue::Kind::kArray;
  for (int64_t tp : {2, 4}) {
    recipe::OptionValue item;
    item.kind = recipe::OptionValue::Kind::kInt;
    item.int_value = tp;
    list.array.push_back(item);
  }
  for (const char* key :
       {"allowed_train_tp", "allowed_rollout_tp", "micro_batch_sizes", "allowed_train_pp"}) {
    add(key, list);
  }
  recipe::OptionValue empty;
  empty.kind = recipe::OptionValue::Kind::kArray;
  add("rollout_node_tp_pattern", empty);
  add("force_rollout_tp_list", empty);
  auto planner = LibraRefPlanner::Create(table);
  ASSERT_OK(planner);
  auto plan = (*planner)->Initial(f.context);
  ASSERT_OK(plan);
  // "configured" honours fixed_train_gpus, and only the allowed training sizes are tried.
  EXPECT_EQ(plan->layout.train_gpus, 16);
  EXPECT_TRUE(plan->layout.train.tp == 2 || plan->layout.train.tp == 4);
  EXPECT_TRUE(plan->layout.train.pp == 2 || plan->layout.train.pp == 4);
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
