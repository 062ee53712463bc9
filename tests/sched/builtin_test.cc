// Tests of src/sched/builtin.cc: the registry of built-in routers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/least_conn.h"
#include "sched/round_robin.h"
#include "sched/router.h"
#include "support/test_util.h"

namespace libra::sched {
namespace {

TEST(BuiltinRoutersTest, RegistersEveryBuiltinWithASummary) {
  // The built-in registry knows round-robin and least-conn, each with a summary, and creates
  // routers whose Name() matches the registered name.
  const RouterRegistry& registry = BuiltinRouters();
  EXPECT_EQ(registry.family(), "router");
  for (const std::string& name : {std::string(kRoundRobinName), std::string(kLeastConnName)}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(registry.Contains(name));
    EXPECT_FALSE(registry.Summary(name).empty());
    auto router = registry.Create(name, recipe::OptionTable(), RouterDeps());
    ASSERT_OK(router);
    EXPECT_EQ((*router)->Name(), name);
  }
  EXPECT_EQ(&BuiltinRouters(), &registry);  // built once
}

TEST(BuiltinRoutersTest, UnknownRouterSuggestsTheClosest) {
  // A misspelt router name is kNotFound with the known names and a suggestion.
  auto router = BuiltinRouters().Create("least_conn", recipe::OptionTable(), RouterDeps());
  ASSERT_FALSE(router.ok());
  EXPECT_EQ(router.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(router.status().message(),
            "unknown router 'least_conn' (known: cmlfq, heddle, la-mlfq, least-conn, length-aware, "
            "oracle-length, round-robin, sorted); did you mean "
            "'least-conn'?");
}

TEST(BuiltinRoutersTest, RegisteringTwiceFails) {
  // Registering the built-ins into a registry that has them already is an internal error.
  RouterRegistry registry("router");
  ASSERT_OK(RegisterBuiltinRouters(registry));
  EXPECT_EQ(RegisterBuiltinRouters(registry).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace libra::sched
