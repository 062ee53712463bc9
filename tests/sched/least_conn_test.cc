#include "sched/least_conn.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/index_equivalence.h"
#include "support/router_support.h"
#include "support/test_util.h"

namespace libra::sched {
namespace {

using test::Int;
using test::Options;

std::vector<InstanceState> Idle(int n) {
  std::vector<InstanceState> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)].id = InstanceId(i);
  return out;
}

std::unique_ptr<Router> Make(const recipe::OptionTable& options) {
  auto router = LeastConnRouter::Create(options, RouterDeps());
  EXPECT_OK(router);
  return router.ok() ? std::move(router).value() : nullptr;
}

int64_t RouteOne(Router& router, std::span<const InstanceState> instances) {
  const RouteDecision d = router.Route(RouteRequest(), instances);
  return d.instance ? d.instance->value : -1;
}

TEST(LeastConnRouterTest, SequentialRequestsRotateOverEightInstances) {
  // Reference vector: each request finishes before the next is routed, so all instances are
  // always idle and the rotating tie-break gives 0..7, 0..7.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->Name(), "least-conn");
  std::vector<InstanceState> instances = Idle(8);
  std::vector<int64_t> picks;
  for (int i = 0; i < 16; ++i) {
    const int64_t pick = RouteOne(*router, instances);
    picks.push_back(pick);
    ++instances[static_cast<size_t>(pick)].active;  // routed ...
    --instances[static_cast<size_t>(pick)].active;  // ... and finished before the next one
  }
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(LeastConnRouterTest, TwoConcurrentWavesFillDistinctInstances) {
  // Reference vector: two waves of 4 concurrent requests (active counts incremented as routed,
  // nothing finishes in between) go to [0, 1, 2, 3] then [4, 5, 6, 7].
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(8);
  std::vector<std::vector<int64_t>> waves;
  for (int wave = 0; wave < 2; ++wave) {
    std::vector<int64_t> picks;
    for (int i = 0; i < 4; ++i) {
      const int64_t pick = RouteOne(*router, instances);
      picks.push_back(pick);
      ++instances[static_cast<size_t>(pick)].active;
    }
    waves.push_back(picks);
  }
  EXPECT_EQ(waves[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(waves[1], (std::vector<int64_t>{4, 5, 6, 7}));
}

TEST(LeastConnRouterTest, PicksTheLeastLoadedInstance) {
  // The instance with the fewest unfinished turns wins, wherever the pointer is.
  struct Case {
    std::string name;
    std::vector<int> active;
    int64_t pick;
  };
  const std::vector<Case> cases = {
      {"middle", {3, 1, 2}, 1},
      {"last", {3, 2, 2, 0}, 3},
      {"first", {0, 5, 5}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = Make(Options({}));
    ASSERT_NE(router, nullptr);
    std::vector<InstanceState> instances = Idle(static_cast<int>(c.active.size()));
    for (size_t i = 0; i < c.active.size(); ++i) instances[i].active = c.active[i];
    EXPECT_EQ(RouteOne(*router, instances), c.pick);
  }
}

TEST(LeastConnRouterTest, TieBreakStartsAfterThePreviousPick) {
  // After picking instance 2, a tie between 0 and 3 goes to 3 (the pointer is past 2), then
  // wraps to 0.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(4);
  instances[0].active = 1;
  instances[1].active = 1;
  instances[3].active = 1;
  EXPECT_EQ(RouteOne(*router, instances), 2);
  instances[2].active = 2;
  instances[1].active = 2;
  EXPECT_EQ(RouteOne(*router, instances), 3);
  EXPECT_EQ(RouteOne(*router, instances), 0);
}

TEST(LeastConnRouterTest, SkipsUnavailableInstances) {
  // An idle but unavailable instance (syncing) is never picked, however low its load.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(3);
  instances[0].available = false;
  instances[1].active = 4;
  instances[2].active = 3;
  EXPECT_EQ(RouteOne(*router, instances), 2);
  instances[2].available = false;
  EXPECT_EQ(RouteOne(*router, instances), 1);
}

TEST(LeastConnRouterTest, NothingAvailableGivesNoInstance) {
  // With no available instance the decision is "not now", with a reason.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Idle(3);
  for (InstanceState& s : instances) s.available = false;
  const RouteDecision d = router->Route(RouteRequest(), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no instance available");
  EXPECT_FALSE(router->Route(RouteRequest(), {}).instance.has_value());
}

TEST(LeastConnRouterTest, RejectsBadOptions) {
  // least-conn takes no options: any key is an invalid recipe naming the key and its location.
  struct Case {
    std::string name;
    recipe::OptionTable options;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"any key",
       Options({{"max_active", Int(4)}}),
       {"r.toml:6:1: system.router_options.max_active: unknown option (this policy takes no "
        "options)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = LeastConnRouter::Create(c.options, RouterDeps());
    ASSERT_FALSE(router.ok());
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidRecipe);
    for (const std::string& f : c.fragments) {
      EXPECT_NE(router.status().message().find(f), std::string::npos) << router.status().message();
    }
  }
}

TEST(LeastConnRouterTest, TheCallersIndexChangesNoDecision) {
  // With the coordinator's InstanceIndex the router picks without scanning, and picks the same.
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto plain = Make(Options({}));
    auto indexed = Make(Options({}));
    test::ExpectIndexChangesNoDecision(*plain, *indexed, seed, 3000);
  }
}

}  // namespace
}  // namespace libra::sched
