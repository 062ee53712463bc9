#include "sched/sorted.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/router_support.h"
#include "support/test_util.h"

namespace libra::sched {
namespace {

using test::Cluster;
using test::Double;
using test::Int;
using test::Ints;
using test::Options;

std::unique_ptr<Router> Make(const recipe::OptionTable& options) {
  auto router = SortedRouter::Create(options, RouterDeps());
  EXPECT_OK(router);
  return router.ok() ? std::move(router).value() : nullptr;
}

RouteRequest First(int64_t trajectory, int64_t prompt) {
  RouteRequest r;
  r.trajectory = TrajectoryId(trajectory);
  r.prompt = PromptId(prompt);
  r.prompt_tokens = 100;
  r.context_tokens = 100;
  return r;
}

void Done(Router& router, int64_t trajectory, int64_t prompt, int64_t tokens) {
  TrajectoryObservation o;
  o.trajectory = TrajectoryId(trajectory);
  o.prompt = PromptId(prompt);
  o.turn_tokens = {tokens / 2, tokens - tokens / 2};
  router.OnTrajectoryDone(o);
}

// Finished history: prompt 1 short (1000 tokens), prompt 2 long (9000): global mean 5000.
void Teach(Router& router) {
  Done(router, 100, 1, 1000);
  Done(router, 101, 2, 9000);
}

TEST(SortedRouterTest, PredictsFromThePromptThenTheGlobalMean) {
  // Prompt mean when the prompt has finished trajectories, else the global mean, else none.
  SortedRouter router{SortedRouter::Options()};
  EXPECT_FALSE(router.Predict(PromptId(1)).has_value());
  Teach(router);
  Done(router, 102, 1, 3000);
  EXPECT_DOUBLE_EQ(*router.Predict(PromptId(1)), 2000);
  EXPECT_DOUBLE_EQ(*router.Predict(PromptId(2)), 9000);
  EXPECT_DOUBLE_EQ(*router.Predict(PromptId(3)), 13000.0 / 3);
}

TEST(SortedRouterTest, WindowsKeepOnlyTheLatestTrajectories) {
  // prompt_window 2 and global_window 3 average only the latest finished trajectories.
  SortedRouter::Options o;
  o.prompt_window = 2;
  o.global_window = 3;
  SortedRouter router{o};
  Done(router, 1, 1, 100);
  Done(router, 2, 1, 200);
  Done(router, 3, 1, 300);
  EXPECT_DOUBLE_EQ(*router.Predict(PromptId(1)), 250);
  Done(router, 4, 2, 1000);
  EXPECT_DOUBLE_EQ(*router.Predict(PromptId(9)), 500);  // (200 + 300 + 1000) / 3
}

TEST(SortedRouterTest, MinSamplesFallsBackToTheGlobalMean) {
  // With min_samples 2 a prompt with one finished trajectory uses the global mean.
  auto router = Make(Options({{"min_samples", Int(2)}}));
  ASSERT_NE(router, nullptr);
  Teach(*router);
  EXPECT_DOUBLE_EQ(*static_cast<SortedRouter&>(*router).Predict(PromptId(2)), 5000);
}

TEST(SortedRouterTest, ClassifiesAgainstTheGlobalMean) {
  // long = predicted > long_factor x global mean; cold start and unknown prompts are short.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 1});
  EXPECT_EQ(router->Route(First(1, 1), instances).bucket, "short");  // no history at all
  Teach(*router);
  EXPECT_EQ(router->Route(First(2, 1), instances).bucket, "short");
  const RouteDecision d = router->Route(First(3, 2), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.reason, "sorted: long");
  EXPECT_EQ(router->Route(First(4, 3), instances).bucket, "short");  // global mean: not above
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("routes/short"), 3);
  EXPECT_EQ(m.values.at("routes/long"), 1);
  EXPECT_EQ(m.values.at("predictions/none"), 1);
  EXPECT_EQ(m.values.at("predictions/prompt"), 2);
  EXPECT_EQ(m.values.at("predictions/global"), 1);
}

TEST(SortedRouterTest, LongFactorMovesTheBoundary) {
  // long_factor 2: 9000 is not above 2 x 5000, so prompt 2 is short.
  auto router = Make(Options({{"long_factor", Double(2.0)}}));
  ASSERT_NE(router, nullptr);
  Teach(*router);
  EXPECT_EQ(router->Route(First(3, 2), Cluster({1})).bucket, "short");
}

TEST(SortedRouterTest, WithoutACapEverythingGoesToTheLeastLoaded) {
  // max_active 0: no deferral; least-loaded with rotating ties, as least-conn.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  Teach(*router);
  std::vector<InstanceState> instances = Cluster({1, 1, 1});
  instances[0].active = 5;
  EXPECT_EQ(router->Route(First(1, 2), instances).instance->value, 1);
  EXPECT_EQ(router->Route(First(2, 2), instances).instance->value, 2);
  EXPECT_EQ(router->Route(First(3, 1), instances).instance->value, 1);
  EXPECT_EQ(router->Metrics().values.at("deferred"), 0);
}

TEST(SortedRouterTest, DefersWhenEveryInstanceIsAtTheCap) {
  // max_active 2: a first turn waits ("cap reached") while every instance runs 2 turns.
  auto router = Make(Options({{"max_active", Int(2)}}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1, 1});
  instances[0].active = 2;
  instances[1].active = 2;
  const RouteDecision d = router->Route(First(1, 1), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "cap reached");
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("deferred"), 1);
  EXPECT_EQ(m.values.at("deferred/cap"), 1);
  EXPECT_EQ(m.values.at("waiting_short"), 1);
}

TEST(SortedRouterTest, ShortWorkWaitingHoldsBackLongWork) {
  // A short trajectory deferred at the cap makes the next long one wait even after a slot
  // frees; the short one then takes the slot, after which long work is admitted again. The
  // coordinator's queue order (long first) is thereby reordered.
  auto router = Make(Options({{"max_active", Int(1)}}));
  ASSERT_NE(router, nullptr);
  Teach(*router);
  std::vector<InstanceState> instances = Cluster({1, 1});
  instances[0].active = 1;
  instances[1].active = 1;
  EXPECT_EQ(router->Route(First(1, 2), instances).reason, "cap reached");  // long
  EXPECT_EQ(router->Route(First(2, 1), instances).reason, "cap reached");  // short
  instances[1].active = 0;                                                 // a slot frees
  RouteDecision d = router->Route(First(1, 2), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "shorter work waiting");
  EXPECT_EQ(d.bucket, "long");
  d = router->Route(First(2, 1), instances);
  ASSERT_TRUE(d.instance.has_value());
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.bucket, "short");
  instances[0].active = 0;  // another slot frees: the long one goes
  d = router->Route(First(1, 2), instances);
  ASSERT_TRUE(d.instance.has_value());
  EXPECT_EQ(d.instance->value, 0);
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("deferred"), 3);
  EXPECT_EQ(m.values.at("deferred/cap"), 2);
  EXPECT_EQ(m.values.at("deferred/behind_short"), 1);
  EXPECT_EQ(m.values.at("waiting_short"), 0);
}

TEST(SortedRouterTest, AdmittedTrajectoriesAreNeverHeldBack) {
  // Later turns of an admitted long trajectory route even with short work waiting and every
  // instance at the cap (it does not preempt or starve running work); they keep their class.
  auto router = Make(Options({{"max_active", Int(1)}}));
  ASSERT_NE(router, nullptr);
  Teach(*router);
  std::vector<InstanceState> instances = Cluster({1, 1});
  EXPECT_TRUE(router->Route(First(1, 2), instances).instance.has_value());
  instances[0].active = 1;
  instances[1].active = 1;
  EXPECT_EQ(router->Route(First(2, 1), instances).reason, "cap reached");
  RouteRequest later = First(1, 2);
  later.turn = 1;
  later.generated_tokens = 500;
  const RouteDecision d = router->Route(later, instances);
  ASSERT_TRUE(d.instance.has_value());
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.reason, "sorted: admitted");
}

TEST(SortedRouterTest, FinishedTrajectoriesLeaveTheWaitingSet) {
  // A waiting short trajectory that ends (cancelled) no longer holds long work back.
  auto router = Make(Options({{"max_active", Int(1)}}));
  ASSERT_NE(router, nullptr);
  Teach(*router);
  std::vector<InstanceState> instances = Cluster({1});
  instances[0].active = 1;
  router->Route(First(2, 1), instances);
  Done(*router, 2, 1, 0);
  instances[0].active = 0;
  EXPECT_TRUE(router->Route(First(1, 2), instances).instance.has_value());
}

TEST(SortedRouterTest, NothingAvailableGivesNoInstance) {
  // No available instance: "no instance available", not a deferral.
  auto router = Make(Options({{"max_active", Int(1)}}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({1});
  instances[0].available = false;
  EXPECT_EQ(router->Route(First(1, 1), instances).reason, "no instance available");
  EXPECT_EQ(router->Route(First(1, 1), {}).reason, "no instance available");
  EXPECT_EQ(router->Metrics().values.at("no_instance"), 2);
  EXPECT_EQ(router->Metrics().values.at("deferred"), 0);
}

TEST(SortedRouterTest, RejectsBadOptions) {
  // Malformed options are invalid recipes naming the key.
  struct Case {
    std::string name;
    recipe::OptionTable options;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"unknown", Options({{"max_actives", Int(3)}}), "did you mean 'max_active'?"},
      {"zero window", Options({{"prompt_window", Int(0)}}), "prompt_window: must be in [1"},
      {"zero global", Options({{"global_window", Int(0)}}), "global_window: must be in [1"},
      {"min above window", Options({{"prompt_window", Int(2)}, {"min_samples", Int(3)}}),
       "min_samples: must not exceed prompt_window (2)"},
      {"negative factor", Options({{"long_factor", Double(-1)}}), "long_factor: must be in [0"},
      {"wrong type", Options({{"long_factor", Ints({1})}}), "long_factor: expected a number"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = SortedRouter::Create(c.options, RouterDeps());
    ASSERT_FALSE(router.ok());
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(router.status().message().find(c.fragment), std::string::npos)
        << router.status().message();
  }
}

}  // namespace
}  // namespace libra::sched
