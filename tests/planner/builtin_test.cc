// Tests of src/planner/builtin.cc: the registry of built-in planners.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/colocated_planner.h"
#include "planner/planner.h"
#include "planner/static_planner.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

TEST(BuiltinPlannersTest, RegistersEveryBuiltinWithASummary) {
  // The built-in registry knows every planner, each with a summary, and creates planners whose
  // Name() matches the registered name.
  const PlannerRegistry& registry = BuiltinPlanners();
  EXPECT_EQ(registry.family(), "planner");
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"colocated", "grp", "heddle", "libra-ref",
                                                        "no-ehp", "static"}));
  for (const std::string& name : registry.Names()) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(registry.Summary(name).empty());
    auto planner = registry.Create(name, recipe::OptionTable());
    ASSERT_OK(planner);
    EXPECT_EQ((*planner)->Name(), name);
  }
  EXPECT_EQ(&BuiltinPlanners(), &registry);  // built once
}

TEST(BuiltinPlannersTest, UnknownPlannerSuggestsTheClosest) {
  // A misspelt planner name is kNotFound with the known names and a suggestion.
  auto planner = BuiltinPlanners().Create("statik", recipe::OptionTable());
  ASSERT_FALSE(planner.ok());
  EXPECT_EQ(planner.status(),
            Status::NotFound(
                "unknown planner 'statik' (known: colocated, grp, heddle, libra-ref, no-ehp, "
                "static); did you mean 'static'?"));
}

TEST(BuiltinPlannersTest, RegisteringTwiceFails) {
  // Registering the built-ins twice into one registry is an internal error.
  PlannerRegistry registry("planner");
  ASSERT_OK(RegisterBuiltinPlanners(registry));
  EXPECT_EQ(RegisterBuiltinPlanners(registry).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace libra::planner
