#include "sched/la_mlfq.h"

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
  auto router = LaMlfqRouter::Create(options, RouterDeps());
  EXPECT_OK(router);
  return router.ok() ? std::move(router).value() : nullptr;
}

RouteRequest Turn(int64_t trajectory, int64_t prompt, int64_t prompt_tokens,
                  int64_t generated_tokens = 0, int turn = 0) {
  RouteRequest r;
  r.trajectory = TrajectoryId(trajectory);
  r.prompt = PromptId(prompt);
  r.turn = turn;
  r.prompt_tokens = prompt_tokens;
  r.context_tokens = prompt_tokens + generated_tokens;
  r.generated_tokens = generated_tokens;
  return r;
}

// Routes a turn and reports it finished (OnTurnDone), returning the decision.
RouteDecision RouteAndFinish(Router& router, const RouteRequest& r,
                             std::span<const InstanceState> instances) {
  const RouteDecision d = router.Route(r, instances);
  if (d.instance) {
    router.OnTurnDone(TurnObservation{r.trajectory, r.prompt, *d.instance, r.turn, 100,
                                      workload::TurnEnd::kToolCall});
  }
  return d;
}

void Finish(Router& router, int64_t trajectory, int64_t prompt) {
  TrajectoryObservation o;
  o.trajectory = TrajectoryId(trajectory);
  o.prompt = PromptId(prompt);
  router.OnTrajectoryDone(o);
}

TEST(LaMlfqRouterTest, RoutesByPromptLengthToTwoBuckets) {
  // Reference test 2.5: short bucket [1], long [2, 4], short prompt bound 1000: 500 -> short on
  // TP1, 5000 -> long on TP2 or TP4.
  auto router = Make(Options({{"short_prompt_tokens", Int(1000)},
                              {"short_max_tokens", Int(3000)},
                              {"short_tp", Ints({1})},
                              {"long_tp", Ints({2, 4})}}));
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->Name(), "la-mlfq");
  const std::vector<InstanceState> instances = Standard();
  RouteDecision d = router->Route(Turn(1, 1, 500), instances);
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(instances[static_cast<size_t>(d.instance->value)].tp, 1);
  EXPECT_EQ(d.reason, "prompt length");
  d = router->Route(Turn(2, 2, 5000), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(instances[static_cast<size_t>(d.instance->value)].tp, 2);
}

TEST(LaMlfqRouterTest, DefaultsUseThe5000TokenBoundAndReferenceBuckets) {
  // Defaults: prompts <= 5000 tokens are short ([1, 2]); longer ones long ([4, 8]); the bound is
  // inclusive.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 2, 4, 8});
  EXPECT_EQ(router->Route(Turn(1, 1, 5000), instances).instance->value, 0);
  const RouteDecision d = router->Route(Turn(2, 2, 5001), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.instance->value, 2);
}

TEST(LaMlfqRouterTest, HistoryHitRoutesAShortPromptToLong) {
  // Reference test 2.6: once a prompt's turn finished in "long", a short prompt of it goes long
  // ("history hit") in the next step.
  auto router = Make(Options({{"short_prompt_tokens", Int(1000)},
                              {"short_tp", Ints({1})},
                              {"long_tp", Ints({2, 4})},
                              {"migrate", Bool(false)}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Standard();
  router->OnStep(0);
  EXPECT_EQ(RouteAndFinish(*router, Turn(1, 7, 5000), instances).bucket, "long");
  Finish(*router, 1, 7);
  router->OnStep(1);
  const RouteDecision d = router->Route(Turn(2, 7, 500), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.reason, "history hit");
  EXPECT_EQ(router->Metrics().values.at("history_hits"), 1);
}

TEST(LaMlfqRouterTest, HistoryExpiresAfterTtlSteps) {
  // Reference HistoryTable rule: an entry of step s is valid while step - s <= ttl (ttl 2 here):
  // recorded at step 0, still hit at step 2, gone at step 3.
  auto router = Make(Options({{"history_ttl", Int(2)}, {"short_prompt_tokens", Int(1000)}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  router->OnStep(0);
  RouteAndFinish(*router, Turn(1, 7, 5000), instances);
  Finish(*router, 1, 7);
  EXPECT_EQ(router->Metrics().values.at("history_size"), 1);
  router->OnStep(2);
  EXPECT_EQ(router->Route(Turn(2, 7, 500), instances).reason, "history hit");
  Finish(*router, 2, 7);
  router->OnStep(3);
  EXPECT_EQ(router->Metrics().values.at("history_size"), 0);
  const RouteDecision d = router->Route(Turn(3, 7, 500), instances);
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(d.reason, "prompt length");
}

TEST(LaMlfqRouterTest, ZeroTtlNeverExpires) {
  // history_ttl 0 keeps entries forever (the reference's ttl <= 0).
  auto router = Make(Options({{"history_ttl", Int(0)}, {"short_prompt_tokens", Int(1000)}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  RouteAndFinish(*router, Turn(1, 7, 5000), instances);
  router->OnStep(1000);
  EXPECT_EQ(router->Route(Turn(2, 7, 10), instances).bucket, "long");
}

TEST(LaMlfqRouterTest, SticksToTheLastBucketOfThePrompt) {
  // The history holds the bucket of the prompt's latest finished turn: short then long.
  auto router = Make(Options({{"short_prompt_tokens", Int(1000)}, {"migrate", Bool(false)}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  EXPECT_EQ(RouteAndFinish(*router, Turn(1, 7, 500), instances).bucket, "short");
  EXPECT_EQ(router->Route(Turn(2, 7, 5000), instances).bucket, "short");  // history hit
}

TEST(LaMlfqRouterTest, MigrationDemotesOnceGeneratedExceedsTheBudget) {
  // Reference MigrationController vector with budget 3000: 1000 generated -> stays short; 5000
  // -> long ("migrated"); later turns stay long ("demoted") and are not counted again.
  auto router = Make(Options({{"short_max_tokens", Int(3000)}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  EXPECT_EQ(RouteAndFinish(*router, Turn(1, 7, 500, 0, 0), instances).bucket, "short");
  EXPECT_EQ(RouteAndFinish(*router, Turn(1, 7, 500, 1000, 1), instances).bucket, "short");
  RouteDecision d = RouteAndFinish(*router, Turn(1, 7, 500, 5000, 2), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.reason, "migrated");
  EXPECT_EQ(d.instance->value, 1);
  d = RouteAndFinish(*router, Turn(1, 7, 500, 50000, 3), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.reason, "demoted");
  EXPECT_EQ(router->Metrics().values.at("migrations"), 1);
}

TEST(LaMlfqRouterTest, MigrationBoundIsExclusive) {
  // Exactly the budget is not "exceeded" (generated > short_max_tokens).
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  EXPECT_EQ(router->Route(Turn(1, 7, 500, 5000, 1), instances).bucket, "short");
  EXPECT_EQ(router->Route(Turn(1, 7, 500, 5001, 2), instances).bucket, "long");
}

TEST(LaMlfqRouterTest, DemotionPropagatesToSiblingsThroughHistory) {
  // After a demoted turn finishes, the prompt's next trajectory starts in long.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  RouteAndFinish(*router, Turn(1, 7, 500, 6000, 2), instances);
  const RouteDecision d = router->Route(Turn(2, 7, 500), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(d.reason, "history hit");
}

TEST(LaMlfqRouterTest, ReferenceCompatibleModeNeverMigrates) {
  // migrate = false reproduces the authors' live path: generated tokens never matter.
  auto router = Make(Options({{"migrate", Bool(false)}}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  EXPECT_EQ(router->Route(Turn(1, 7, 500, 100000, 5), instances).bucket, "short");
  EXPECT_EQ(router->Metrics().values.at("migrations"), 0);
}

TEST(LaMlfqRouterTest, FinishedTrajectoriesAreForgotten) {
  // A finished trajectory's demotion is dropped; the prompt's history stays.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 4});
  RouteAndFinish(*router, Turn(1, 7, 500, 6000, 2), instances);
  Finish(*router, 1, 7);
  EXPECT_EQ(router->Metrics().values.at("history_size"), 1);
  // Same id reused for a new prompt: no longer demoted.
  EXPECT_EQ(router->Route(Turn(1, 8, 500), instances).bucket, "short");
}

TEST(LaMlfqRouterTest, FallbacksFollowTheOtherBucketsDegrees) {
  // Short without TP1/TP2 falls back to TP4 (fallback [4, 8]); with only TP16, global fallback.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  std::vector<InstanceState> instances = Cluster({16, 4});
  RouteDecision d = router->Route(Turn(1, 1, 10), instances);
  EXPECT_EQ(d.instance->value, 1);
  EXPECT_EQ(d.reason, "prompt length, fallback");
  instances[1].available = false;
  d = router->Route(Turn(2, 2, 10), instances);
  EXPECT_EQ(d.instance->value, 0);
  EXPECT_EQ(d.reason, "prompt length, global fallback");
  instances[0].available = false;
  d = router->Route(Turn(3, 3, 10), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no instance available");
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("fallbacks"), 2);
  EXPECT_EQ(m.values.at("global_fallbacks"), 1);
  EXPECT_EQ(m.values.at("no_instance"), 1);
  EXPECT_EQ(m.values.at("routes/short"), 2);
}

TEST(LaMlfqRouterTest, TiesRotateInsideABucket) {
  // Idle TP1 instances take sequential short turns in rotation.
  auto router = Make(Options({}));
  ASSERT_NE(router, nullptr);
  const std::vector<InstanceState> instances = Cluster({1, 1, 4, 1});
  std::vector<int64_t> picks;
  for (int i = 0; i < 4; ++i)
    picks.push_back(router->Route(Turn(i, i, 10), instances).instance->value);
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 1, 3, 0}));
}

TEST(LaMlfqRouterTest, RejectsBadOptions) {
  // Malformed options are invalid recipes naming the key.
  struct Case {
    std::string name;
    recipe::OptionTable options;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"unknown", Options({{"history_tt", Int(3)}}), "did you mean 'history_ttl'?"},
      {"negative ttl", Options({{"history_ttl", Int(-1)}}), "history_ttl: must be in [0"},
      {"zero budget", Options({{"short_max_tokens", Int(0)}}), "short_max_tokens: must be in [1"},
      {"empty long", Options({{"long_tp", Ints({})}}), "long_tp: must list at least one"},
      {"wrong type", Options({{"migrate", Int(1)}}), "migrate: expected a boolean"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto router = LaMlfqRouter::Create(c.options, RouterDeps());
    ASSERT_FALSE(router.ok());
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(router.status().message().find(c.fragment), std::string::npos)
        << router.status().message();
  }
}

}  // namespace
}  // namespace libra::sched
