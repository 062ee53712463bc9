#include "sched/round_robin.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::sched {
namespace {

recipe::OptionTable Options(const std::vector<std::pair<std::string, int64_t>>& ints) {
  recipe::OptionTable table;
  table.path = "system.router_options";
  table.where = "r.toml:5:1";
  for (const auto& [key, value] : ints) {
    recipe::OptionValue v;
    v.kind = recipe::OptionValue::Kind::kInt;
    v.int_value = value;
    v.where = "r.toml:6:1";
    table.entries.push_back({key, v});
  }
  return table;
}

std::vector<InstanceState> Idle(int n) {
  std::vector<InstanceState> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)].id = InstanceId(i);
  return out;
}

std::unique_ptr<Router> Make(const recipe::OptionTable& options) {
  auto router = RoundRobinRouter::Create(options, RouterDeps());
  EXPECT_OK(router);
  return router.ok() ? std::move(router).value() : nullptr;
}

int64_t RouteOne(Router& router, std::span<const InstanceState> instances) {
  const RouteDecision d = router.Route(RouteRequest(), instances);
  return d.instance ? d.instance->value : -1;
}

TEST(RoundRobinRouterTest, CyclesOverInstancesRegardlessOfLoad) {
  // The n-th turn goes to instance n mod 3, even when that instance is the busiest.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->Name(), "round-robin");
  std::vector<InstanceState> instances = Idle(3);
  instances[0].active = 10;
  std::vector<int64_t> picks;
  for (int i = 0; i < 7; ++i) picks.push_back(RouteOne(*router, instances));
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(RoundRobinRouterTest, SkipsUnavailableInstances) {
  // Unavailable instances are left out of the cycle.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(4);
  instances[1].available = false;
  std::vector<int64_t> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(RouteOne(*router, instances));
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 2, 3, 0, 2, 3}));
}

TEST(RoundRobinRouterTest, MaxActiveSkipsInstancesAtTheCap) {
  // With max_active 2, instances with two unfinished turns are skipped while others are below
  // the cap; when all are at the cap every available instance is used again (the turn queues).
  auto router = Make(Options({{"max_active", 2}}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(3);
  instances[0].active = 2;
  std::vector<int64_t> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(RouteOne(*router, instances));
  EXPECT_EQ(picks, (std::vector<int64_t>{1, 2, 1, 2}));
  for (InstanceState& s : instances) s.active = 2;
  EXPECT_NE(RouteOne(*router, instances), -1);
}

TEST(RoundRobinRouterTest, NothingAvailableGivesNoInstance) {
  // With every instance unavailable (or none at all) the decision is "not now".
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(2);
  for (InstanceState& s : instances) s.available = false;
  const RouteDecision d = router->Route(RouteRequest(), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no instance available");
  EXPECT_FALSE(router->Route(RouteRequest(), {}).instance.has_value());
}

TEST(RoundRobinRouterTest, RejectsBadOptions) {
  // Unknown keys and out-of-range values are invalid recipes naming the key and its location.
  struct Case {
    std::string name;
    recipe::OptionTable options;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"typo",
       Options({{"max_actve", 1}}),
       {"r.toml:6:1: system.router_options.max_actve: unknown option",
        "did you mean 'max_active'?"}},
      {"negative", Options({{"max_active", -1}}), {"system.router_options.max_active", "got -1"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = RoundRobinRouter::Create(c.options, RouterDeps());
    ASSERT_FALSE(router.ok());
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidRecipe);
    for (const std::string& f : c.fragments) {
      EXPECT_NE(router.status().message().find(f), std::string::npos) << router.status().message();
    }
  }
}

}  // namespace
}  // namespace libra::sched
