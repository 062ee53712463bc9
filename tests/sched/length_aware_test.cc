#include "sched/length_aware.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/router_support.h"
#include "support/test_util.h"

namespace libra::sched {
namespace {

using test::Bool;
using test::Cluster;
using test::Int;
using test::Ints;
using test::Options;

// The reference tests' standard instances: tp1_0, tp1_1, tp2_0, tp4_0.
std::vector<InstanceState> Standard() { return Cluster({1, 1, 2, 4}); }

std::unique_ptr<Router> Make(const recipe::OptionTable& options) {
  auto router = LengthAwareRouter::Create(options, RouterDeps());
  EXPECT_OK(router);
  return router.ok() ? std::move(router).value() : nullptr;
}

RouteRequest Prompt(int64_t prompt_tokens) {
  RouteRequest r;
  r.prompt_tokens = prompt_tokens;
  r.context_tokens = prompt_tokens;
  return r;
}

int64_t Pick(Router& router, int64_t prompt_tokens, std::span<const InstanceState> instances) {
  const RouteDecision d = router.Route(Prompt(prompt_tokens), instances);
  return d.instance ? d.instance->value : -1;
}

TEST(LengthAwareRouterTest, CategorizesByTheReferenceThresholds) {
  // Reference thresholds 5000/10000/15000, bounds inclusive.
  LengthAwareRouter router{LengthAwareRouter::Options()};
  struct Case {
    int64_t tokens;
    int category;
  };
  for (const Case& c : std::vector<Case>{{0, 0},
                                         {5000, 0},
                                         {5001, 1},
                                         {10000, 1},
                                         {10001, 2},
                                         {15000, 2},
                                         {15001, 3},
                                         {1000000, 3}}) {
    SCOPED_TRACE(c.tokens);
    EXPECT_EQ(router.Categorize(c.tokens), c.category);
  }
}

TEST(LengthAwareRouterTest, ReferenceCategorizeVector) {
  // Reference test 1.1: thresholds 1000/3000/6000.
  auto router = Make(Options({{"thresholds", Ints({1000, 3000, 6000})}}));
  ASSERT_NE(router, nullptr);
  auto& la = static_cast<LengthAwareRouter&>(*router);
  EXPECT_EQ(la.Categorize(500), 0);
  EXPECT_EQ(la.Categorize(1000), 0);
  EXPECT_EQ(la.Categorize(1001), 1);
  EXPECT_EQ(la.Categorize(3000), 1);
  EXPECT_EQ(la.Categorize(5000), 2);
  EXPECT_EQ(la.Categorize(6000), 2);
  EXPECT_EQ(la.Categorize(10000), 3);
}

TEST(LengthAwareRouterTest, DefaultRulesPickThePreferredDegree) {
  // With one instance per TP degree, each category lands on its first preferred degree.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->Name(), "length-aware");
  const std::vector<InstanceState> instances = Cluster({1, 2, 4, 8});
  struct Case {
    int64_t tokens;
    int64_t pick;
    std::string bucket;
  };
  for (const Case& c : std::vector<Case>{
           {100, 0, "short"}, {7000, 1, "medium"}, {12000, 2, "long"}, {20000, 3, "extra_long"}}) {
    SCOPED_TRACE(c.bucket);
    const RouteDecision d = router->Route(Prompt(c.tokens), instances);
    ASSERT_TRUE(d.instance.has_value());
    EXPECT_EQ(d.instance->value, c.pick);
    EXPECT_EQ(d.bucket, c.bucket);
    EXPECT_EQ(d.reason, "length-aware");
  }
}

TEST(LengthAwareRouterTest, ReferenceRoutingVector) {
  // Reference test 1.2: rules short [1], medium [2], long [4], extra_long [4] on the standard
  // instances; 500 -> TP1, 2000 -> TP2, 5000 -> TP4, none a fallback.
  auto router = Make(Options({{"thresholds", Ints({1000, 3000, 6000})},
                              {"short_tp", Ints({1})},
                              {"medium_tp", Ints({2})},
                              {"long_tp", Ints({4})},
                              {"extra_long_tp", Ints({4})}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Standard();
  EXPECT_EQ(instances[static_cast<size_t>(Pick(*router, 500, instances))].tp, 1);
  EXPECT_EQ(instances[static_cast<size_t>(Pick(*router, 2000, instances))].tp, 2);
  EXPECT_EQ(instances[static_cast<size_t>(Pick(*router, 5000, instances))].tp, 4);
  EXPECT_EQ(router->Metrics().values.at("fallbacks"), 0);
}

TEST(LengthAwareRouterTest, ReferenceFallbackVector) {
  // Reference test 1.3: only a TP2 instance; a short prompt (preferred [1]) falls back to it.
  auto router = Make(Options({{"thresholds", Ints({1000, 3000, 6000})},
                              {"short_tp", Ints({1})},
                              {"short_fallback_tp", Ints({2})}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({2});
  const RouteDecision d = router->Route(Prompt(500), instances);
  ASSERT_TRUE(d.instance.has_value());
  EXPECT_EQ(d.instance->value, 0);
  EXPECT_EQ(d.reason, "length-aware fallback");
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(router->Metrics().values.at("fallbacks"), 1);
  EXPECT_EQ(router->Metrics().values.at("global_fallbacks"), 0);
}

TEST(LengthAwareRouterTest, ReferenceLoadBalanceVector) {
  // Reference test 1.4: two TP1 instances, two concurrent short requests go to different ones.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 1});
  const int64_t a = Pick(*router, 500, instances);
  ++instances[static_cast<size_t>(a)].active;
  const int64_t b = Pick(*router, 500, instances);
  EXPECT_NE(a, b);
}

TEST(LengthAwareRouterTest, FallbackOrderFollowsTheRule) {
  // Short: preferred [1, 2], fallback [4, 8]. Without TP1 it takes TP2 (still preferred); without
  // TP1 and TP2 it takes TP4 before TP8 (fallback, in order).
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({8, 4, 2, 1});
  instances[3].available = false;
  RouteDecision d = router->Route(Prompt(100), instances);
  EXPECT_EQ(d.instance->value, 2);
  EXPECT_EQ(d.reason, "length-aware");
  instances[2].available = false;
  d = router->Route(Prompt(100), instances);
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.reason, "length-aware fallback");
  instances[1].available = false;
  d = router->Route(Prompt(100), instances);
  EXPECT_EQ(d.instance->value, 0);
}

TEST(LengthAwareRouterTest, GlobalFallbackTakesTheLeastLoadedOfAnyDegree) {
  // Short prompts with only TP16 instances: neither preferred nor fallback degrees exist, so the
  // least-loaded instance of any degree wins.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({16, 16});
  instances[0].active = 3;
  const RouteDecision d = router->Route(Prompt(100), instances);
  ASSERT_TRUE(d.instance.has_value());
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.reason, "global fallback");
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("fallbacks"), 1);
  EXPECT_EQ(m.values.at("global_fallbacks"), 1);
}

TEST(LengthAwareRouterTest, DisabledFallbackGoesStraightToGlobal) {
  // enable_fallback = false skips the fallback degrees: TP4 is not preferred over the
  // less-loaded TP16.
  auto router = Make(Options({{"enable_fallback", Bool(false)}}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({4, 16});
  instances[0].active = 2;
  const RouteDecision d = router->Route(Prompt(100), instances);
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.reason, "global fallback");
}

TEST(LengthAwareRouterTest, CapMovesWorkToTheNextDegree) {
  // With max_active 2, a full TP1 instance sends short work to TP2 (next preferred degree); when
  // every degree is full the global fallback ignores the cap.
  auto router = Make(Options({{"max_active", Int(2)}}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 2, 4});
  instances[0].active = 2;
  EXPECT_EQ(Pick(*router, 100, instances), 1);
  instances[1].active = 2;
  EXPECT_EQ(Pick(*router, 100, instances), 2);
  instances[2].active = 3;
  const RouteDecision d = router->Route(Prompt(100), instances);
  EXPECT_EQ(d.instance->value, 0);
  EXPECT_EQ(d.reason, "global fallback");
}

TEST(LengthAwareRouterTest, TiesRotateInsideADegree) {
  // Three idle TP1 instances among others: sequential short requests (each finishing before the
  // next) rotate 0, 2, 4, 0.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4, 1, 4, 1});
  std::vector<int64_t> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(Pick(*router, 100, instances));
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 2, 4, 0}));
}

TEST(LengthAwareRouterTest, LeastLoadedWinsInsideADegree) {
  // Inside the preferred degree the least-loaded instance wins whatever the pointer.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 1, 1});
  instances[0].active = 2;
  instances[1].active = 1;
  instances[2].active = 3;
  EXPECT_EQ(Pick(*router, 100, instances), 1);
}

TEST(LengthAwareRouterTest, EveryTurnKeepsTheFirstTurnsCategory) {
  // The category comes from the prompt length only: a later turn with a huge context stays short.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 8});
  RouteRequest r = Prompt(1000);
  r.turn = 3;
  r.context_tokens = 50000;
  r.generated_tokens = 40000;
  r.previous = InstanceId(0);
  const RouteDecision d = router->Route(r, instances);
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(d.instance->value, 0);
}

TEST(LengthAwareRouterTest, NothingAvailableGivesNoInstance) {
  // No available instance: "not now", counted in no_instance, not in routes.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 2});
  for (InstanceState& s : instances) s.available = false;
  const RouteDecision d = router->Route(Prompt(100), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no instance available");
  EXPECT_FALSE(router->Route(Prompt(100), {}).instance.has_value());
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("no_instance"), 2);
  EXPECT_EQ(m.values.at("routes/short"), 0);
}

TEST(LengthAwareRouterTest, MetricsCountRoutesPerCategory) {
  // Reference test 1.5: 10 short and 5 extra-long requests on the standard instances.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Standard();
  for (int i = 0; i < 10; ++i) EXPECT_GE(Pick(*router, 500, instances), 0);
  for (int i = 0; i < 5; ++i) EXPECT_GE(Pick(*router, 20000, instances), 0);
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("routes/short"), 10);
  EXPECT_EQ(m.values.at("routes/medium"), 0);
  EXPECT_EQ(m.values.at("routes/long"), 0);
  EXPECT_EQ(m.values.at("routes/extra_long"), 5);
  // extra_long prefers [8, 4]: no TP8, so TP4 (still preferred), no fallback.
  EXPECT_EQ(m.values.at("fallbacks"), 0);
}

TEST(LengthAwareRouterTest, RejectsBadOptions) {
  // Every malformed option is an invalid recipe naming the key and its location.
  struct Case {
    std::string name;
    recipe::OptionTable options;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"unknown key",
       Options({{"short_tps", Ints({1})}}),
       {"system.router_options.short_tps: unknown option; did you mean 'short_tp'?"}},
      {"two thresholds",
       Options({{"thresholds", Ints({1, 2})}}),
       {"system.router_options.thresholds: must list 3 prompt-token bounds"}},
      {"decreasing thresholds",
       Options({{"thresholds", Ints({3, 2, 4})}}),
       {"thresholds: must be strictly increasing"}},
      {"zero threshold", Options({{"thresholds", Ints({0, 2, 4})}}), {"thresholds: every element"}},
      {"empty preferred", Options({{"long_tp", Ints({})}}), {"long_tp: must list at least one"}},
      {"duplicate degree",
       Options({{"medium_fallback_tp", Ints({1, 1})}}),
       {"medium_fallback_tp: lists a TP degree twice"}},
      {"bad degree", Options({{"short_tp", Ints({0})}}), {"short_tp: every element must be in"}},
      {"negative cap", Options({{"max_active", Int(-1)}}), {"max_active: must be in [0"}},
      {"wrong type", Options({{"enable_fallback", Int(1)}}), {"expected a boolean"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = LengthAwareRouter::Create(c.options, RouterDeps());
    ASSERT_FALSE(router.ok());
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(router.status().message().find("r.toml:6:1"), std::string::npos);
    for (const std::string& f : c.fragments) {
      EXPECT_NE(router.status().message().find(f), std::string::npos) << router.status().message();
    }
  }
}

TEST(LengthAwareRouterTest, EmptyFallbackIsAllowed) {
  // An empty fallback list is valid: the global fallback follows the preferred degrees.
  auto router = Make(Options({{"short_fallback_tp", Ints({})}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({4});
  const RouteDecision d = router->Route(Prompt(100), instances);
  EXPECT_EQ(d.reason, "global fallback");
}

}  // namespace
}  // namespace libra::sched
