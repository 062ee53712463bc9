#include "sched/cmlfq.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/index_equivalence.h"
#include "support/test_util.h"

namespace libra::sched {
namespace {

using recipe::OptionTable;
using recipe::OptionValue;
using workload::ToolStatus;

OptionValue Int(int64_t v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kInt;
  o.int_value = v;
  o.where = "r.toml:6:1";
  return o;
}
OptionValue Dbl(double v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kDouble;
  o.double_value = v;
  o.where = "r.toml:6:1";
  return o;
}
OptionValue Bool(bool v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kBool;
  o.bool_value = v;
  o.where = "r.toml:6:1";
  return o;
}
OptionValue Str(const std::string& v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kString;
  o.string_value = v;
  o.where = "r.toml:6:1";
  return o;
}
OptionValue Bucket(const std::string& name, int64_t max_tokens, std::vector<int64_t> tps) {
  OptionValue t;
  t.kind = OptionValue::Kind::kTable;
  t.where = "r.toml:7:1";
  OptionValue tp;
  tp.kind = OptionValue::Kind::kArray;
  for (int64_t x : tps) tp.array.push_back(Int(x));
  t.table = {{"name", Str(name)}, {"max_tokens", Int(max_tokens)}, {"tp", tp}};
  return t;
}
OptionValue Buckets(std::vector<OptionValue> buckets) {
  OptionValue a;
  a.kind = OptionValue::Kind::kArray;
  a.array = std::move(buckets);
  a.where = "r.toml:7:1";
  return a;
}

OptionTable Options(const std::vector<std::pair<std::string, OptionValue>>& entries) {
  OptionTable table;
  table.path = "system.router_options";
  table.where = "r.toml:5:1";
  for (const auto& [key, value] : entries) table.entries.push_back({key, value});
  return table;
}

// The reference test configuration of §2.12: short TP1 <= 5000, long TP2 <= 50000, default
// payload thresholds 500 / 5000.
OptionTable TestConfig(std::vector<std::pair<std::string, OptionValue>> extra = {}) {
  std::vector<std::pair<std::string, OptionValue>> entries = {
      {"reference", Bool(true)},
      {"buckets", Buckets({Bucket("short", 5000, {1}), Bucket("long", 50000, {2})})},
      {"payload_small_tokens", Int(500)},
      {"payload_large_tokens", Int(5000)}};
  for (auto& e : extra) entries.push_back(std::move(e));
  return Options(entries);
}

std::unique_ptr<CmlfqRouter> Make(const OptionTable& options, const RouterDeps& deps = {}) {
  auto router = CmlfqRouter::Create(options, deps);
  EXPECT_OK(router);
  if (!router.ok()) return nullptr;
  return std::unique_ptr<CmlfqRouter>(
      static_cast<CmlfqRouter*>(std::move(router).value().release()));
}

std::vector<InstanceState> Instances(const std::vector<int>& tps) {
  std::vector<InstanceState> out;
  for (size_t i = 0; i < tps.size(); ++i) {
    out.push_back(InstanceState{InstanceId(static_cast<int64_t>(i)), tps[i], 0, true});
  }
  return out;
}

RouteRequest First(int64_t trajectory, int64_t prompt) {
  RouteRequest r;
  r.trajectory = TrajectoryId(trajectory);
  r.prompt = PromptId(prompt);
  r.prompt_tokens = 1000;
  r.context_tokens = 1000;
  return r;
}

RouteRequest AfterTool(int64_t trajectory, int64_t prompt, int turn, const std::string& tool,
                       int64_t output_tokens, ToolStatus status = ToolStatus::kSuccess,
                       int64_t generated = 0) {
  RouteRequest r = First(trajectory, prompt);
  r.turn = turn;
  r.generated_tokens = generated;
  r.context_tokens = 1000 + generated + output_tokens;
  r.last_tool = ToolObservation{tool, status, output_tokens};
  return r;
}

void Learn(CmlfqRouter& router, int64_t prompt, const std::string& key, double remaining) {
  PrefixTree& tree = router.mutable_tree();
  TreeTrajectory t;
  t.prompt = PromptId(prompt);
  t.states = {tree.states().InternKey(key).value()};
  t.remaining = {remaining};
  tree.Insert(t);
}

int64_t Picked(const RouteDecision& d) { return d.instance ? d.instance->value : -1; }

TEST(CmlfqRouterTest, NewEpisodeStartsInShortestBucket) {
  // §2.12: schedule(1000, "test_prompt") -> short, the TP1 instance.
  auto router = Make(TestConfig());
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->Name(), "cmlfq");
  const auto instances = Instances({1, 2});
  const RouteDecision d = router->Route(First(1, 1), instances);
  EXPECT_EQ(Picked(d), 0);
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(d.reason, "cmlfq_initial_placement");
  EXPECT_EQ(router->EpisodesOn(InstanceId(0)), 1);
}

TEST(CmlfqRouterTest, LargePayloadWithLongHistoryMovesToLong) {
  // §2.12: tree (p1, [search:large:success], [30000]); a 6000-token search result -> long, TP2;
  // the same for an unseen prompt through the global root. The episode keeps its identity.
  for (int64_t prompt : {1, 2}) {
    SCOPED_TRACE(prompt);
    auto router = Make(TestConfig());
    Learn(*router, 1, "search:large:success", 30000);
    const auto instances = Instances({1, 2});
    ASSERT_EQ(Picked(router->Route(First(10, prompt), instances)), 0);
    const RouteDecision d = router->Route(AfterTool(10, prompt, 1, "search", 6000), instances);
    EXPECT_EQ(Picked(d), 1);
    EXPECT_EQ(d.bucket, "long");
    EXPECT_EQ(d.reason, "cmlfq_migration");
    EXPECT_EQ(router->EpisodesOn(InstanceId(0)), 0);
    EXPECT_EQ(router->EpisodesOn(InstanceId(1)), 1);
    // The next turn (no tool return to judge again) stays on the TP2 instance.
    RouteRequest again = AfterTool(10, prompt, 1, "search", 6000);
    const RouteDecision resume = router->Route(again, instances);
    EXPECT_EQ(Picked(resume), 1);
    EXPECT_EQ(resume.reason, "cmlfq_resume");
    EXPECT_EQ(resume.bucket, "long");
    EXPECT_EQ(router->Metrics().values.at("moves/tree"), 1);
  }
}

TEST(CmlfqRouterTest, SmallPayloadWithShortHistoryStays) {
  // §2.12: tree (p1, [search:small:success], [3000]); output "small" -> already in target.
  auto router = Make(TestConfig());
  Learn(*router, 1, "search:small:success", 3000);
  const auto instances = Instances({1, 2});
  router->Route(First(1, 1), instances);
  const RouteDecision d = router->Route(AfterTool(1, 1, 1, "search", 5), instances);
  EXPECT_EQ(Picked(d), 0);
  EXPECT_EQ(d.reason, "cmlfq_resume");
  EXPECT_EQ(router->Metrics().values.at("moves/tree"), 0);
}

TEST(CmlfqRouterTest, MeanAndP90DisagreeMeansNoMove) {
  // §2.12: root {mean 3000, p90 30000, visits 10} and a tool key absent from it -> the root is
  // the deepest prefix, mean says short and p90 says long -> no decision.
  auto router = Make(TestConfig());
  const std::string json =
      R"({"version":2,"roots":{"1":{"mean_remaining_length":3000,"p90_remaining_length":30000,"visit_count":10,)"
      R"("children":{"search:small:success":{"depth":1,"mean_remaining_length":100,"p90_remaining_length":100,"visit_count":1}}}},"global_root":null})";
  Result<PrefixTree> tree = PrefixTree::FromJsonValue(ParseJson(json).value());
  ASSERT_OK(tree);
  router->mutable_tree() = std::move(tree).value();
  const auto instances = Instances({1, 2});
  router->Route(First(1, 1), instances);
  const RouteDecision d = router->Route(AfterTool(1, 1, 1, "code", 10), instances);
  EXPECT_EQ(Picked(d), 0);
  EXPECT_EQ(router->Metrics().values.at("mean_p90_disagree"), 1);
  // Bucket mapping (reference test): 3000/4000 -> short; 3000/8000 disagree.
  EXPECT_EQ(router->BucketFor(3000), router->BucketFor(4000));
  EXPECT_NE(router->BucketFor(3000), router->BucketFor(8000));
  EXPECT_EQ(router->options().buckets[static_cast<size_t>(router->BucketFor(1e9))].name, "long");
}

TEST(CmlfqRouterTest, MovesDownWhenLittleWorkRemains) {
  // Not a classic MLFQ: a long episode moves back to short when the tree says so.
  auto router = Make(TestConfig());
  Learn(*router, 1, "a:large:success", 30000);
  Learn(*router, 1, "a:large:success", 30000);
  PrefixTree& tree = router->mutable_tree();
  TreeTrajectory t;
  t.prompt = PromptId(1);
  t.states = {tree.states().InternKey("a:large:success").value(),
              tree.states().InternKey("a:small:success").value()};
  t.remaining = {30000, 100};
  tree.Insert(t);
  const auto instances = Instances({1, 2});
  router->Route(First(1, 1), instances);
  EXPECT_EQ(router->Route(AfterTool(1, 1, 1, "a", 9000), instances).bucket, "long");
  const RouteDecision d = router->Route(AfterTool(1, 1, 2, "a", 10), instances);
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(Picked(d), 0);
  EXPECT_EQ(router->Metrics().values.at("moves/tree"), 2);
}

TEST(CmlfqRouterTest, FinishedTrajectoryFeedsTheTree) {
  // Reference: returns at positions 120 and 700 of 1000 -> remaining [880] and [300]; the root
  // gets the total; single-turn trajectories never enter the tree; the episode is released.
  auto router = Make(TestConfig());
  const auto instances = Instances({1, 2});
  router->Route(First(1, 5), instances);
  TrajectoryObservation obs;
  obs.trajectory = TrajectoryId(1);
  obs.prompt = PromptId(5);
  obs.turn_tokens = {120, 580, 300};
  obs.tools = {{"v", ToolStatus::kFailure, 0}, {"v", ToolStatus::kFailure, 0}};
  router->OnTrajectoryDone(obs);
  EXPECT_EQ(router->EpisodesOn(InstanceId(0)), 0);
  const PrefixTree& tree = router->tree();
  StateTable states = tree.states();
  const StateId v = states.InternKey("v:small:failure").value();
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(5), {})->mean, 1000);
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(5), std::vector<StateId>{v})->mean, 880);
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(5), std::vector<StateId>{v, v})->mean, 300);

  TrajectoryObservation single;
  single.trajectory = TrajectoryId(2);
  single.prompt = PromptId(6);
  single.turn_tokens = {500};
  router->OnTrajectoryDone(single);
  EXPECT_EQ(tree.LookupExact(PromptId(6), {}), nullptr);
  EXPECT_EQ(router->Metrics().values.at("tree_insertions"), 1);
}

TEST(CmlfqRouterTest, RemainingCountsToolTokensOnlyWhenAsked) {
  // reference = true counts the later tool outputs in the remaining length; the default does not.
  for (bool reference : {true, false}) {
    SCOPED_TRACE(reference);
    auto router = Make(Options({{"reference", Bool(reference)}}));
    TrajectoryObservation obs;
    obs.trajectory = TrajectoryId(1);
    obs.prompt = PromptId(5);
    obs.turn_tokens = {100, 200, 300};
    obs.tools = {{"v", ToolStatus::kFailure, 10}, {"v", ToolStatus::kFailure, 20}};
    router->OnTrajectoryDone(obs);
    StateTable states = router->tree().states();
    const StateId v = states.InternKey("v:small:failure").value();
    const TreeNode* n = router->tree().LookupExact(PromptId(5), std::vector<StateId>{v});
    EXPECT_DOUBLE_EQ(n->mean, reference ? 520 : 500);
    EXPECT_DOUBLE_EQ(router->tree().LookupExact(PromptId(5), {})->mean, reference ? 630 : 600);
  }
}

TEST(CmlfqRouterTest, EpisodeLoadHeldAcrossTurnsAndCapped) {
  // Episode counts (not turns) drive least-connections; the cap pushes to fallback TPs, then to
  // the global fallback, which ignores the cap.
  auto router = Make(Options({{"reference", Bool(true)}, {"max_episodes_per_instance", Int(1)}}));
  const auto instances = Instances({1, 1, 2, 4});
  EXPECT_EQ(Picked(router->Route(First(1, 1), instances)), 0);
  EXPECT_EQ(Picked(router->Route(AfterTool(1, 1, 1, "t", 5), instances)), 0);  // same episode
  EXPECT_EQ(Picked(router->Route(First(2, 1), instances)), 1);
  RouteDecision d = router->Route(First(3, 1), instances);
  EXPECT_EQ(Picked(d), 2);
  EXPECT_EQ(d.reason, "cmlfq_initial_placement_fallback");
  EXPECT_EQ(d.bucket, "short");
  EXPECT_EQ(Picked(router->Route(First(4, 1), instances)), 3);
  d = router->Route(First(5, 1), instances);
  EXPECT_EQ(Picked(d), 0);
  EXPECT_EQ(d.reason, "global_fallback");
  EXPECT_EQ(router->EpisodesOn(InstanceId(0)), 2);
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("fallbacks"), 3);
  EXPECT_EQ(m.values.at("global_fallbacks"), 1);
  EXPECT_EQ(m.values.at("routes/short"), 6);
  EXPECT_EQ(m.values.at("episodes_in_flight"), 5);
  TrajectoryObservation done;
  done.trajectory = TrajectoryId(1);
  router->OnTrajectoryDone(done);
  EXPECT_EQ(router->EpisodesOn(InstanceId(0)), 1);
}

TEST(CmlfqRouterTest, TieBreaksFirstInReferenceRotateByDefault) {
  // Reference: first registered instance wins ties; default: rotating pointer per TP.
  const auto instances = Instances({1, 1, 1});
  auto ref = Make(Options({{"reference", Bool(true)}}));
  auto rot = Make(Options({}));
  std::vector<int64_t> ref_picks, rot_picks;
  for (int64_t t = 0; t < 4; ++t) {
    ref_picks.push_back(Picked(ref->Route(First(t, 1), instances)));
    rot_picks.push_back(Picked(rot->Route(First(t, 1), instances)));
    TrajectoryObservation done;
    done.trajectory = TrajectoryId(t);
    ref->OnTrajectoryDone(done);
    rot->OnTrajectoryDone(done);
  }
  EXPECT_EQ(ref_picks, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(rot_picks, (std::vector<int64_t>{0, 1, 2, 0}));
}

TEST(CmlfqRouterTest, RoundRobinInsideATp) {
  // selection = "round-robin": a per-TP counter over the eligible instances.
  auto router =
      Make(Options({{"selection", Str("round-robin")}, {"max_episodes_per_instance", Int(0)}}));
  const auto instances = Instances({1, 2, 1, 1});
  std::vector<int64_t> picks;
  for (int64_t t = 0; t < 4; ++t) picks.push_back(Picked(router->Route(First(t, 1), instances)));
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 2, 3, 0}));
}

TEST(CmlfqRouterTest, FallbackOrders) {
  // Declared order (reference) vs nearest (larger ascending, then smaller descending).
  const auto buckets = Buckets(
      {Bucket("a", 100, {1}), Bucket("b", 200, {2}), Bucket("c", 300, {4}), Bucket("d", 400, {8})});
  const auto instances = Instances({2, 8, 4});  // no TP1
  auto declared = Make(Options({{"buckets", buckets}, {"fallback_order", Str("declared")}}));
  auto nearest = Make(Options({{"buckets", buckets}}));
  // From bucket "a" both try b, c, d in that order.
  EXPECT_EQ(Picked(declared->Route(First(1, 1), instances)), 0);
  EXPECT_EQ(Picked(nearest->Route(First(1, 1), instances)), 0);
  // Fallback disabled and no global fallback: nothing for bucket "a".
  auto strict = Make(
      Options({{"buckets", buckets}, {"fallback", Bool(false)}, {"global_fallback", Bool(false)}}));
  const RouteDecision d = strict->Route(First(1, 1), instances);
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no_available_instance");
  EXPECT_EQ(strict->Metrics().values.at("failed_routes"), 1);
}

TEST(CmlfqRouterTest, NearestFallbackFromMiddleBucket) {
  // A move to "c" (TP4, absent) falls back to d (TP8) first when nearest, to a (TP1) when declared.
  const auto buckets = Buckets(
      {Bucket("a", 100, {1}), Bucket("b", 200, {2}), Bucket("c", 300, {4}), Bucket("d", 400, {8})});
  const auto instances = Instances({1, 8, 1});
  for (bool nearest : {true, false}) {
    SCOPED_TRACE(nearest);
    auto router = Make(Options({{"buckets", buckets},
                                {"max_episodes_per_instance", Int(0)},
                                {"fallback_order", Str(nearest ? "nearest" : "declared")}}));
    Learn(*router, 1, "t:small:success", 250);
    router->Route(First(1, 1), instances);
    const RouteDecision d = router->Route(AfterTool(1, 1, 1, "t", 1), instances);
    EXPECT_EQ(d.bucket, "c");
    EXPECT_EQ(Picked(d), nearest ? 1 : 2);
    EXPECT_EQ(d.reason, "cmlfq_migration_fallback");
  }
}

TEST(CmlfqRouterTest, LoadPerGpuScalesTheCapAndLeastConnections) {
  // Default: a TP2 instance takes twice a TP1 instance's episodes (cap 1 x TP); the reference
  // counts whole episodes per instance.
  for (bool per_gpu : {true, false}) {
    SCOPED_TRACE(per_gpu);
    auto router = Make(Options({{"buckets", Buckets({Bucket("all", 100, {1, 2})})},
                                {"max_episodes_per_instance", Int(1)},
                                {"load_per_gpu", Bool(per_gpu)}}));
    const auto instances = Instances({2, 1});
    std::vector<int64_t> picked;
    for (int t = 1; t <= 4; ++t) picked.push_back(Picked(router->Route(First(t, 1), instances)));
    // TP1 first (preferred order): instance 1, then TP2's cap; then the global fallback, which
    // per GPU goes to the TP2 instance (2 episodes / 2 GPUs vs 1 / 1 ties, rotation picks 0).
    if (per_gpu) {
      EXPECT_EQ(picked, (std::vector<int64_t>{1, 0, 0, 0}));
      EXPECT_EQ(router->Metrics().values.at("global_fallbacks"), 1);
    } else {
      EXPECT_EQ(picked, (std::vector<int64_t>{1, 0, 0, 1}));
      EXPECT_EQ(router->Metrics().values.at("global_fallbacks"), 2);
    }
  }
}

TEST(CmlfqRouterTest, UnavailableInstanceIsReplacedAndNoneMeansNotNow) {
  // The episode's instance going away re-selects in its bucket; no instance at all -> not now.
  auto router = Make(Options({}));
  auto instances = Instances({1, 1});
  EXPECT_EQ(Picked(router->Route(First(1, 1), instances)), 0);
  instances[0].available = false;
  const RouteDecision d = router->Route(AfterTool(1, 1, 1, "t", 5), instances);
  EXPECT_EQ(Picked(d), 1);
  EXPECT_EQ(d.reason, "cmlfq_reroute");
  EXPECT_EQ(router->EpisodesOn(InstanceId(0)), 0);
  EXPECT_EQ(router->EpisodesOn(InstanceId(1)), 1);
  instances[1].available = false;
  EXPECT_FALSE(router->Route(First(2, 1), instances).instance.has_value());
  EXPECT_FALSE(router->Route(First(1, 1), instances).instance.has_value());
  EXPECT_EQ(router->Metrics().values.at("failed_routes"), 2);
}

TEST(CmlfqRouterTest, ToolReturnIsJudgedOncePerTurn) {
  // A retried turn (after "not now") does not append its tool state twice.
  auto router = Make(TestConfig());
  const auto instances = Instances({1, 2});
  router->Route(First(1, 1), instances);
  router->Route(AfterTool(1, 1, 1, "t", 5), instances);
  router->Route(AfterTool(1, 1, 1, "t", 5), instances);
  EXPECT_EQ(router->Metrics().values.at("no_tree_evidence"), 1);
}

TEST(CmlfqRouterTest, TimeQuantumPromotesWithoutEvidence) {
  // time_quantum: no tree node and the bucket's budget used up -> one bucket up.
  auto router = Make(Options({{"time_quantum", Bool(true)}}));
  const auto instances = Instances({1, 2, 4});
  router->Route(First(1, 1), instances);
  EXPECT_EQ(router->Route(AfterTool(1, 1, 1, "t", 5, ToolStatus::kSuccess, 3999), instances).bucket,
            "short");
  RouteDecision d =
      router->Route(AfterTool(1, 1, 2, "t", 5, ToolStatus::kSuccess, 4000), instances);
  EXPECT_EQ(d.bucket, "medium");
  EXPECT_EQ(Picked(d), 1);
  d = router->Route(AfterTool(1, 1, 3, "t", 5, ToolStatus::kSuccess, 12000), instances);
  EXPECT_EQ(d.bucket, "long");
  d = router->Route(AfterTool(1, 1, 4, "t", 5, ToolStatus::kSuccess, 40000), instances);
  EXPECT_EQ(d.bucket, "long");
  EXPECT_EQ(router->Metrics().values.at("moves/quantum"), 2);
  // Off by default.
  auto plain = Make(Options({}));
  plain->Route(First(1, 1), instances);
  EXPECT_EQ(plain->Route(AfterTool(1, 1, 1, "t", 5, ToolStatus::kSuccess, 9000), instances).bucket,
            "short");
}

// A cost model where decode is 1/tp seconds per token per iteration (times the batch size) and
// prefill 1 ms per token: only the rollout methods matter.
class FakeCost : public model::CostModel {
 public:
  explicit FakeCost(double prefill_s_per_token) : prefill_(prefill_s_per_token) {}
  std::string_view Name() const override { return "fake"; }
  const model::GpuSpec& gpu() const override { return gpu_; }
  const model::ModelArch& arch() const override { return arch_; }
  int64_t KvCapacityTokens(int /*tp*/) const override { return 1 << 30; }
  double IterationTime(int tp, const model::IterationLoad& load) const override {
    return 0.001 * static_cast<double>(load.decode_sequences) / tp;
  }
  double PrefillTime(int tp, int64_t tokens, int64_t /*prior*/) const override {
    return prefill_ * static_cast<double>(tokens) / tp;
  }
  double DecodeGpuSecondsLowerBound(int64_t, int64_t) const override { return 0; }
  double PrefillGpuSecondsLowerBound() const override { return 0; }
  double TrainGpuSecondsLowerBound(int64_t, const model::TrainPasses&) const override { return 0; }
  model::TrainEstimate TrainStep(const model::TrainLayout&, const model::TrainPasses&,
                                 std::span<const int64_t>) const override {
    return {};
  }
  double WeightSyncTime(const model::SyncRequest&) const override { return 0; }
  double RoleSwitchTime(const model::SwitchRequest&) const override { return 0; }

 private:
  double prefill_;
  model::GpuSpec gpu_;
  model::ModelArch arch_;
};

TEST(CmlfqRouterTest, CostBasedMovesNeedAModelAndVetoExpensiveMoves) {
  // cost_based_moves: an error without a cost model; a move happens only when re-prefill plus
  // decode on the target beats decoding where the episode is.
  auto no_model = CmlfqRouter::Create(Options({{"cost_based_moves", Bool(true)}}), RouterDeps());
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find("cost_based_moves"), std::string::npos);

  const auto instances = Instances({1, 2, 4});
  // Remaining 30000 on TP1: 30 s; on TP4: 7.5 s + prefill. Cheap prefill -> move.
  FakeCost cheap(1e-4);
  RouterDeps deps{&cheap, nullptr};
  auto router = Make(Options({{"cost_based_moves", Bool(true)}}), deps);
  Learn(*router, 1, "t:small:success", 30000);
  router->Route(First(1, 1), instances);
  EXPECT_EQ(router->Route(AfterTool(1, 1, 1, "t", 5), instances).bucket, "long");
  EXPECT_EQ(router->Metrics().values.at("moves/cost"), 1);
  // Prefill so expensive (1005 tokens * 0.1 s / 4 = 25 s) that moving loses -> stay.
  FakeCost dear(0.1);
  deps.cost = &dear;
  router = Make(Options({{"cost_based_moves", Bool(true)}}), deps);
  Learn(*router, 1, "t:small:success", 30000);
  router->Route(First(1, 1), instances);
  EXPECT_EQ(router->Route(AfterTool(1, 1, 1, "t", 5), instances).bucket, "short");
  EXPECT_EQ(router->Metrics().values.at("cost_vetoes"), 1);
  EXPECT_EQ(router->Metrics().values.at("moves/tree"), 0);
  // On by default when the run has a cost model, off without one and in the reference mode.
  EXPECT_TRUE(Make(Options({}), deps)->options().cost_based_moves);
  EXPECT_FALSE(Make(Options({}))->options().cost_based_moves);
  EXPECT_FALSE(Make(Options({{"reference", Bool(true)}}), deps)->options().cost_based_moves);
}

TEST(CmlfqRouterTest, OnStepRebuildsAndDecays) {
  // Every rebuild_interval steps the tree is rebuilt from recent trajectories (a warm-start tree
  // is discarded); decay scales evidence every step.
  auto router = Make(Options({{"rebuild_interval", Int(2)}, {"decay", Dbl(0.5)}}));
  Learn(*router, 9, "w:small:success", 100);  // stands for warm-start evidence
  TrajectoryObservation obs;
  obs.trajectory = TrajectoryId(1);
  obs.prompt = PromptId(5);
  obs.turn_tokens = {100, 200};
  obs.tools = {{"v", ToolStatus::kSuccess, 0}};
  router->OnTrajectoryDone(obs);
  router->OnStep(1);
  EXPECT_DOUBLE_EQ(router->tree().LookupExact(PromptId(5), {})->weight, 0.5);
  EXPECT_NE(router->tree().LookupExact(PromptId(9), {}), nullptr);
  router->OnStep(2);
  EXPECT_EQ(router->tree().LookupExact(PromptId(9), {}), nullptr);
  EXPECT_DOUBLE_EQ(router->tree().LookupExact(PromptId(5), {})->weight, 1);
  const RouterMetrics m = router->Metrics();
  EXPECT_EQ(m.values.at("tree_rebuilds"), 1);
  EXPECT_EQ(m.values.at("tree_nodes"), 4);
}

TEST(CmlfqRouterTest, RecentRingKeepsTheLastTrajectories) {
  // max_recent_trajectories bounds what a rebuild sees, oldest dropped first.
  auto router = Make(Options({{"rebuild_interval", Int(1)}, {"max_recent_trajectories", Int(2)}}));
  for (int64_t t = 0; t < 3; ++t) {
    TrajectoryObservation obs;
    obs.trajectory = TrajectoryId(t);
    obs.prompt = PromptId(t);
    obs.turn_tokens = {100, 200};
    obs.tools = {{"v", ToolStatus::kSuccess, 0}};
    router->OnTrajectoryDone(obs);
  }
  router->OnStep(1);
  EXPECT_EQ(router->tree().LookupExact(PromptId(0), {}), nullptr);
  EXPECT_NE(router->tree().LookupExact(PromptId(1), {}), nullptr);
  EXPECT_NE(router->tree().LookupExact(PromptId(2), {}), nullptr);
  EXPECT_EQ(router->tree().total_insertions(), 2);
}

TEST(CmlfqRouterTest, WarmStartLoadsATree) {
  // warm_start = path: the persisted tree, read through the caller's file reader (the router
  // does no I/O), answers from the first tool return.
  PrefixTree tree;
  TreeTrajectory t;
  t.prompt = PromptId(1);
  t.states = {tree.states().InternKey("t:small:success").value()};
  t.remaining = {20000};
  tree.Insert(t);
  const std::map<std::string, std::string> files = {{"tree.json", ToJson(tree.ToJsonValue())},
                                                    {"bad.json", R"({"version":2})"},
                                                    {"text.json", "not json"}};
  RouterDeps deps;
  deps.read_file = [&files](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound(path + ": cannot read the router file");
    return it->second;
  };
  auto router = Make(Options({{"warm_start", Str("tree.json")}}), deps);
  ASSERT_NE(router, nullptr);
  const auto instances = Instances({1, 2, 4});
  router->Route(First(1, 1), instances);
  EXPECT_EQ(router->Route(AfterTool(1, 1, 1, "t", 5), instances).bucket, "long");

  // Every failure names the option and the file, and what is wrong.
  struct Case {
    std::string file;
    bool reader;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{{"bad.json", true, "bad.json: document: missing 'roots'"},
                                         {"text.json", true, "text.json: "},
                                         {"gone.json", true, "gone.json: cannot read"},
                                         {"tree.json", false, "tree.json: this run reads no"}}) {
    SCOPED_TRACE(c.file);
    auto bad =
        CmlfqRouter::Create(Options({{"warm_start", Str(c.file)}}), c.reader ? deps : RouterDeps{});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(bad.status().message().find("warm_start"), std::string::npos)
        << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(c.message), std::string::npos) << bad.status().ToString();
  }
}

TEST(CmlfqRouterTest, OptionErrors) {
  // Every option problem fails Create with the key named.
  struct Case {
    std::string name;
    OptionTable options;
    std::string message;
  };
  OptionValue not_table = Buckets({Int(3)});
  OptionValue missing = Buckets({Bucket("a", 10, {1})});
  missing.array[0].table.erase(missing.array[0].table.begin() + 1);
  const Case cases[] = {
      {"unknown", Options({{"bukets", Int(1)}}), "did you mean 'buckets'"},
      {"not table", Options({{"buckets", not_table}}), "expected a table"},
      {"missing", Options({{"buckets", missing}}), "max_tokens: missing"},
      {"duplicate", Options({{"buckets", Buckets({Bucket("a", 10, {1}), Bucket("a", 20, {2})})}}),
       "duplicate bucket name 'a'"},
      {"empty tp", Options({{"buckets", Buckets({Bucket("a", 10, {})})}}), "at least one TP"},
      {"selection", Options({{"selection", Str("random")}}), "must be one of"},
      {"payload", Options({{"payload_small_tokens", Int(10)}, {"payload_large_tokens", Int(5)}}),
       "must be >= payload_small_tokens"},
      {"decay", Options({{"decay", Dbl(0)}}), "decay"},
      {"window", Options({{"window", Int(0)}}), "window"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = CmlfqRouter::Create(c.options, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidRecipe);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
  }
}

TEST(CmlfqRouterTest, ReferenceFortyEightGpuLayout) {
  // The authors' 48-GPU layout: per node TP1, TP1, TP2, TP4 (two nodes), cap 3, first-instance
  // ties. Short episodes fill the TP1 instances to the cap, then fall back to TP2, then TP4.
  auto router = Make(Options({{"reference", Bool(true)}}));
  const auto instances = Instances({1, 1, 2, 4, 1, 1, 2, 4});
  std::vector<int64_t> picks;
  for (int64_t t = 0; t < 16; ++t) picks.push_back(Picked(router->Route(First(t, 1), instances)));
  EXPECT_EQ(picks, (std::vector<int64_t>{0, 1, 4, 5, 0, 1, 4, 5, 0, 1, 4, 5, 2, 6, 2, 6}));
  const CmlfqOptions& o = router->options();
  ASSERT_EQ(o.buckets.size(), 3u);
  EXPECT_EQ(o.buckets[0].max_tokens, 4000);
  EXPECT_EQ(o.buckets[1].max_tokens, 12000);
  EXPECT_EQ(o.buckets[2].max_tokens, 30000);
  EXPECT_EQ(o.max_episodes_per_instance, 3);
  EXPECT_EQ(o.rebuild_interval, 5);
  EXPECT_EQ(o.payload.small, 1000);
  EXPECT_EQ(o.payload.large, 12000);
}

TEST(CmlfqRouterTest, TheCallersIndexChangesNoDecision) {
  // With the coordinator's InstanceIndex, selection in a TP and the global fallback go through
  // the router's per-TP load levels instead of a scan, and pick the same instances, whatever the
  // selection options.
  const std::vector<OptionTable> configs = {
      Options({}),
      Options({{"reference", Bool(true)}}),
      Options({{"load_per_gpu", Bool(false)}, {"max_episodes_per_instance", Int(1)}}),
      Options({{"tie_break", Str("first")}, {"fallback", Bool(false)}}),
      Options({{"max_episodes_per_instance", Int(0)}, {"global_fallback", Bool(false)}}),
      Options({{"selection", Str("round-robin")}})};
  for (size_t c = 0; c < configs.size(); ++c) {
    SCOPED_TRACE(c);
    auto plain = Make(configs[c]);
    auto indexed = Make(configs[c]);
    test::ExpectIndexChangesNoDecision(*plain, *indexed, 7 + c, 3000);
  }
}

}  // namespace
}  // namespace libra::sched
