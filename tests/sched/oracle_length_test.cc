#include "sched/oracle_length.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/router_support.h"
#include "support/test_util.h"

namespace libra::sched {
namespace {

using test::Cluster;
using test::Int;
using test::Ints;
using test::Options;

std::unique_ptr<Router> Make(const recipe::OptionTable& options) {
  auto router = OracleLengthRouter::Create(options, RouterDeps());
  EXPECT_OK(router);
  return router.ok() ? std::move(router).value() : nullptr;
}

RouteRequest Remaining(std::optional<int64_t> remaining) {
  RouteRequest r;
  r.trajectory = TrajectoryId(1);
  r.prompt = PromptId(1);
  r.prompt_tokens = 100;
  r.oracle_remaining_tokens = remaining;
  return r;
}

TEST(OracleLengthRouterTest, RoutesByRemainingLengthToTpClasses) {
  // Defaults: <= 4000 short on TP1, <= 12000 medium on TP2, longer on TP4 (bounds inclusive).
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->Name(), "oracle-length");
  const std::vector<InstanceState> instances = Cluster({4, 2, 1});
  struct Case {
    int64_t remaining;
    int64_t pick;
    std::string bucket;
  };
  for (const Case& c : std::vector<Case>{{0, 2, "short"},
                                         {4000, 2, "short"},
                                         {4001, 1, "medium"},
                                         {12000, 1, "medium"},
                                         {12001, 0, "long"}}) {
    SCOPED_TRACE(c.remaining);
    const RouteDecision d = router->Route(Remaining(c.remaining), instances);
    ASSERT_TRUE(d.instance.has_value());
    EXPECT_EQ(d.instance->value, c.pick);
    EXPECT_EQ(d.bucket, c.bucket);
    EXPECT_EQ(d.reason, "oracle-length");
  }
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("routes/short"), 2);
  EXPECT_EQ(m.values.at("routes/medium"), 2);
  EXPECT_EQ(m.values.at("routes/long"), 1);
}

TEST(OracleLengthRouterTest, MissingHintGivesNoInstance) {
  // Outside the simulator there is no hint: no instance, the fixed reason, counted.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const RouteDecision d = router->Route(Remaining(std::nullopt), Cluster({1, 2, 4}));
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "oracle-length needs the simulator's remaining-length hint");
  EXPECT_EQ(d.reason, kOracleLengthNeedsHint);
  EXPECT_EQ(router->Metrics().values.at("missing_hint"), 1);
}

TEST(OracleLengthRouterTest, FallbackPrefersTheNearestLevel) {
  // Fallback order by level distance, the larger degree first at equal distance: short
  // [1] -> [2, 4]; medium [2] -> [4, 1]; long [4] -> [2, 1].
  OracleLengthRouter router{OracleLengthRouter::Options()};
  EXPECT_EQ(router.rules()[0], (TpRule{{1}, {2, 4}}));
  EXPECT_EQ(router.rules()[1], (TpRule{{2}, {4, 1}}));
  EXPECT_EQ(router.rules()[2], (TpRule{{4}, {2, 1}}));
  EXPECT_EQ(router.level_names(), (std::vector<std::string>{"short", "medium", "long"}));
}

TEST(OracleLengthRouterTest, FallsBackWhenTheClassIsUnavailable) {
  // Long work without a TP4 instance goes to TP2, then TP1; then the global fallback (TP8).
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 2, 8});
  RouteDecision d = router->Route(Remaining(50000), instances);
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.reason, "oracle-length fallback");
  instances[1].available = false;
  EXPECT_EQ(router->Route(Remaining(50000), instances).instance->value, 0);
  instances[0].available = false;
  d = router->Route(Remaining(50000), instances);
  EXPECT_EQ(d.instance->value, 2);
  EXPECT_EQ(d.reason, "global fallback");
  instances[2].available = false;
  d = router->Route(Remaining(50000), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no instance available");
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("fallbacks"), 3);
  EXPECT_EQ(m.values.at("global_fallbacks"), 1);
  EXPECT_EQ(m.values.at("no_instance"), 1);
}

TEST(OracleLengthRouterTest, TiesRotateInsideATpClass) {
  // Least-connections with rotation inside TP1: 0, 2, 0; a loaded instance is skipped.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 4, 1});
  EXPECT_EQ(router->Route(Remaining(10), instances).instance->value, 0);
  EXPECT_EQ(router->Route(Remaining(10), instances).instance->value, 2);
  EXPECT_EQ(router->Route(Remaining(10), instances).instance->value, 0);
  instances[0].active = 1;
  EXPECT_EQ(router->Route(Remaining(10), instances).instance->value, 2);
}

TEST(OracleLengthRouterTest, CapSpillsToTheNextClass) {
  // max_active 1: a busy TP1 instance sends short work to TP2.
  auto router = Make(Options({{"max_active", Int(1)}}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 2});
  instances[0].active = 1;
  EXPECT_EQ(router->Route(Remaining(10), instances).instance->value, 1);
}

TEST(OracleLengthRouterTest, ConfigurableLevels) {
  // Two levels: <= 1000 on TP2, longer on TP8; the hint is re-read every turn.
  auto router = Make(Options({{"thresholds", Ints({1000})}, {"tp_degrees", Ints({2, 8})}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({8, 2});
  RouteDecision d = router->Route(Remaining(5000), instances);
  EXPECT_EQ(d.instance->value, 0);
  EXPECT_EQ(d.bucket, "long");
  d = router->Route(Remaining(1000), instances);
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.bucket, "short");
  auto five =
      Make(Options({{"thresholds", Ints({1, 2, 3, 4})}, {"tp_degrees", Ints({1, 2, 4, 8, 16})}}));
  ASSERT_NE(five, nullptr);
  EXPECT_EQ(static_cast<OracleLengthRouter&>(*five).level_names(),
            (std::vector<std::string>{"level0", "level1", "level2", "level3", "level4"}));
  EXPECT_EQ(five->Route(Remaining(3), Cluster({16, 4})).instance->value, 1);
}

TEST(OracleLengthRouterTest, RejectsBadOptions) {
  // Malformed options are invalid recipes naming the key.
  struct Case {
    std::string name;
    recipe::OptionTable options;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"unknown", Options({{"threshold", Ints({1})}}), "did you mean 'thresholds'?"},
      {"empty", Options({{"thresholds", Ints({})}}), "thresholds: must list 1 to 7"},
      {"not increasing", Options({{"thresholds", Ints({5, 5})}}), "must be strictly increasing"},
      {"too few degrees", Options({{"tp_degrees", Ints({1, 2})}}),
       "tp_degrees: tp_degrees must list one TP degree per level: 2 thresholds make 3 levels, got "
       "2 degrees"},
      {"thresholds without degrees", Options({{"thresholds", Ints({1})}}),
       "thresholds: tp_degrees must list one TP degree per level"},
      {"duplicate degree", Options({{"tp_degrees", Ints({1, 1, 4})}}), "lists a TP degree twice"},
      {"negative cap", Options({{"max_active", Int(-2)}}), "max_active: must be in [0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = OracleLengthRouter::Create(c.options, RouterDeps());
    ASSERT_FALSE(router.ok());
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(router.status().message().find(c.fragment), std::string::npos)
        << router.status().message();
  }
}

}  // namespace
}  // namespace libra::sched
