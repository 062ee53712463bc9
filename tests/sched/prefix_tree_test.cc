#include "sched/prefix_tree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::sched {
namespace {

using workload::ToolStatus;

StateId S(PrefixTree& tree, const std::string& key) { return tree.states().InternKey(key).value(); }

TreeTrajectory Traj(PrefixTree& tree, int64_t prompt, const std::vector<std::string>& keys,
                    const std::vector<double>& remaining, std::optional<double> total = {}) {
  TreeTrajectory t;
  t.prompt = PromptId(prompt);
  for (const std::string& k : keys) t.states.push_back(S(tree, k));
  t.remaining = remaining;
  t.total_length = total;
  return t;
}

TEST(PercentileTest, MatchesNumpyLinear) {
  // Reference example: window 1000..10000 -> p90 9100 (numpy linear interpolation).
  std::vector<double> scratch;
  std::vector<double> w;
  for (int i = 10; i >= 1; --i) w.push_back(1000.0 * i);
  EXPECT_DOUBLE_EQ(Percentile(w, 0.9, scratch), 9100);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{7}, 0.9, scratch), 7);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{1, 2}, 0.9, scratch), 1.9);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 0.9, scratch), 0);
}

TEST(SlidingWindowTest, KeepsTheLastValuesAndTheirP90) {
  // After every push the window holds the last `capacity` values in order, and its p90 equals
  // the one computed from scratch: few distinct values (many duplicates), many, rising and
  // falling runs.
  for (const size_t capacity : {1u, 2u, 7u, 30u, 200u}) {
    for (const uint64_t distinct : {3u, 50u, 1000000u}) {
      SlidingWindow window;
      std::vector<double> all;
      std::vector<double> scratch;
      uint64_t x = 12345 + distinct;
      for (int i = 0; i < 1500; ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        double v = static_cast<double>((x >> 33) % distinct) * 10;
        if (i % 400 > 300) v = static_cast<double>(i % 400) * (i % 800 > 400 ? 1 : -1);  // runs
        window.Push(v, capacity);
        all.push_back(v);
        const size_t first = all.size() > capacity ? all.size() - capacity : 0;
        const std::vector<double> last(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());
        ASSERT_EQ(window.Values(), last) << "capacity " << capacity << ", push " << i;
        ASSERT_EQ(window.P90(), Percentile(last, 0.9, scratch))
            << "capacity " << capacity << ", push " << i;
      }
      SlidingWindow bulk;
      for (double v : all) bulk.PushUnsorted(v, capacity);
      bulk.Sort();
      EXPECT_EQ(bulk.Values(), window.Values());
      EXPECT_EQ(bulk.P90(), window.P90());
      bulk.Push(-1, capacity);  // and it goes on from there
      window.Push(-1, capacity);
      EXPECT_EQ(bulk.P90(), window.P90());
    }
  }
}

TEST(SlidingWindowTest, FollowsACapacityThatChanges) {
  // Push takes the capacity on each call: the percentile stays the one of the values held,
  // whether the capacity grows or shrinks.
  SlidingWindow window;
  std::vector<double> scratch;
  uint64_t x = 99;
  for (int i = 0; i < 900; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double v = static_cast<double>((x >> 33) % 40);
    const size_t capacity = i < 300 ? 30 : i < 600 ? 200 : 50;
    window.Push(v, capacity);
    // A smaller capacity keeps the ring's size; the oldest still leaves first.
    const int held = i < 300 ? std::min(30, i + 1) : std::min(200, 30 + i - 299);
    ASSERT_EQ(window.size(), static_cast<size_t>(held)) << "push " << i;
    ASSERT_EQ(window.P90(), Percentile(window.Values(), 0.9, scratch)) << "push " << i;
  }
}

TEST(PrefixTreeTest, NodeStatisticsMeanAllTimeP90Window) {
  // Mean over every observation ever, p90 over the last `window` only.
  PrefixTree tree(PrefixTreeOptions{.window = 3, .min_samples = 1});
  for (double x : {100.0, 200.0, 300.0, 400.0}) {
    tree.Insert(Traj(tree, 1, {"t:small:success"}, {x}));
  }
  const TreeNode* n =
      tree.LookupExact(PromptId(1), std::vector<StateId>{S(tree, "t:small:success")});
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->visits, 4);
  EXPECT_DOUBLE_EQ(n->mean, 250);
  EXPECT_EQ(n->window.Values(), (std::vector<double>{200, 300, 400}));
  EXPECT_DOUBLE_EQ(n->p90, 380);
  EXPECT_EQ(n->depth, 1);

  PrefixTree ten;
  for (int i = 1; i <= 10; ++i) ten.Insert(Traj(ten, 1, {}, {}, 1000.0 * i));
  const TreeNode* root = ten.LookupExact(PromptId(1), {});
  ASSERT_NE(root, nullptr);
  EXPECT_DOUBLE_EQ(root->mean, 5500);
  EXPECT_DOUBLE_EQ(root->p90, 9100);
}

TEST(PrefixTreeTest, InsertEveryPrefixGetsItsRemainingLength) {
  // Root gets total_length (or remaining[0]); depth i gets remaining[i-1]; the global tree too.
  PrefixTree tree;
  tree.Insert(Traj(tree, 7, {"a:small:failure", "a:small:failure"}, {880, 300}, 1000));
  const StateId a = S(tree, "a:small:failure");
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(7), {})->mean, 1000);
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(7), std::vector<StateId>{a})->mean, 880);
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(7), std::vector<StateId>{a, a})->mean, 300);
  EXPECT_EQ(tree.LookupExact(PromptId(7), std::vector<StateId>{a, a})->depth, 2);
  EXPECT_EQ(tree.LookupExact(PromptId(8), {}), nullptr);
  EXPECT_EQ(tree.node_count(), 6u);
  EXPECT_EQ(tree.global_node_count(), 3u);
  EXPECT_EQ(tree.max_depth(), 2);
  EXPECT_EQ(tree.total_insertions(), 1);

  PrefixTree no_total;
  no_total.Insert(Traj(no_total, 7, {"a:small:failure"}, {880}));
  EXPECT_DOUBLE_EQ(no_total.LookupExact(PromptId(7), {})->mean, 880);
}

TEST(PrefixTreeTest, LookupReturnsDeepestPrefixAndFallsBackToGlobalOnlyForUnseenPrompts) {
  // §2.12: an unknown child key stops at the depth-0 root; unseen prompts use the global root.
  PrefixTree tree;
  tree.Insert(Traj(tree, 1, {"search:small:success"}, {3000}, 3500));
  tree.Insert(Traj(tree, 2, {"search:large:success"}, {8000}, 9000));
  const StateId unknown = S(tree, "unknown:small:success");
  const StateId large = S(tree, "search:large:success");
  const TreeNode* n = tree.Lookup(PromptId(1), std::vector<StateId>{unknown});
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->depth, 0);
  EXPECT_DOUBLE_EQ(n->mean, 3500);
  // Prompt 1 is known, so its own tree answers even though only prompt 2 knows "large".
  EXPECT_EQ(tree.Lookup(PromptId(1), std::vector<StateId>{large})->depth, 0);
  // Unseen prompt: the global tree, depth 1, mean 8000.
  n = tree.Lookup(PromptId(99), std::vector<StateId>{large});
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->depth, 1);
  EXPECT_DOUBLE_EQ(n->mean, 8000);
  EXPECT_EQ(PrefixTree().Lookup(PromptId(1), {}), nullptr);
  // Exact lookup does not stop early.
  EXPECT_EQ(tree.LookupExact(PromptId(1), std::vector<StateId>{unknown}), nullptr);
}

TEST(PrefixTreeTest, LookupFindsEveryChildOfANodeWithMany) {
  // A lookup reads a node's first children from its list and asks the edge table for the rest:
  // twelve children of one root, each found, and a state none has is not.
  PrefixTree tree;
  std::vector<StateId> states;
  for (int i = 0; i < 12; ++i) {
    const std::string key = "tool" + std::to_string(i) + ":small:success";
    tree.Insert(Traj(tree, 1, {key}, {100.0 * (i + 1)}, 5000));
    states.push_back(S(tree, key));
  }
  for (int i = 0; i < 12; ++i) {
    const TreeNode* n = tree.LookupExact(PromptId(1), std::vector<StateId>{states[i]});
    ASSERT_NE(n, nullptr) << i;
    EXPECT_DOUBLE_EQ(n->mean, 100.0 * (i + 1)) << i;
    EXPECT_EQ(tree.Lookup(PromptId(1), std::vector<StateId>{states[i]}), n) << i;
  }
  const StateId none = S(tree, "other:small:success");
  EXPECT_EQ(tree.LookupExact(PromptId(1), std::vector<StateId>{none}), nullptr);
  EXPECT_EQ(tree.Lookup(PromptId(1), std::vector<StateId>{none})->depth, 0);
}

TEST(PrefixTreeTest, MinSamplesStopsTheWalk) {
  // A child with less evidence than min_samples does not answer; its parent does.
  PrefixTree tree(PrefixTreeOptions{.window = 200, .min_samples = 2});
  tree.Insert(Traj(tree, 1, {"a:small:success"}, {100}, 500));
  tree.Insert(Traj(tree, 1, {"b:small:success"}, {900}, 1500));
  const StateId a = S(tree, "a:small:success");
  const TreeNode* n = tree.Lookup(PromptId(1), std::vector<StateId>{a});
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->depth, 0);
  tree.Insert(Traj(tree, 1, {"a:small:success"}, {300}, 700));
  EXPECT_EQ(tree.Lookup(PromptId(1), std::vector<StateId>{a})->depth, 1);
  PrefixTree sparse(PrefixTreeOptions{.window = 200, .min_samples = 5});
  sparse.Insert(Traj(sparse, 1, {}, {}, 10));
  EXPECT_EQ(sparse.Lookup(PromptId(1), {}), nullptr);
}

TEST(PrefixTreeTest, MergeIsCountWeighted) {
  // Reference: two trees with one insertion each merge into root visits 2, mean 2500.
  PrefixTree a, b;
  a.Insert(Traj(a, 1, {"code:small:success"}, {1000}, 1500));
  b.states().InternKey("other:large:timeout").value();  // different state ids in b
  b.Insert(Traj(b, 1, {"code:small:success"}, {3000}, 3500));
  b.Insert(Traj(b, 2, {"code:small:failure"}, {50}, 60));
  a.Merge(b);
  const TreeNode* root = a.LookupExact(PromptId(1), {});
  EXPECT_EQ(root->visits, 2);
  EXPECT_DOUBLE_EQ(root->mean, 2500);
  EXPECT_EQ(a.total_insertions(), 3);
  const StateId code = S(a, "code:small:success");
  const TreeNode* child = a.LookupExact(PromptId(1), std::vector<StateId>{code});
  EXPECT_DOUBLE_EQ(child->mean, 2000);
  EXPECT_EQ(child->window.Values(), (std::vector<double>{1000, 3000}));
  EXPECT_DOUBLE_EQ(child->p90, 2800);
  EXPECT_NE(a.LookupExact(PromptId(2), std::vector<StateId>{S(a, "code:small:failure")}), nullptr);
  EXPECT_EQ(a.global_root()->visits, 3);
}

TEST(PrefixTreeTest, RebuildDecayAndClear) {
  // Rebuild starts over from the given trajectories; decay scales evidence weights only.
  PrefixTree tree;
  tree.Insert(Traj(tree, 1, {"a:small:success"}, {100}, 200));
  std::vector<TreeTrajectory> recent = {Traj(tree, 2, {"a:small:success"}, {10}, 20)};
  tree.Rebuild(recent);
  EXPECT_EQ(tree.LookupExact(PromptId(1), {}), nullptr);
  EXPECT_EQ(tree.total_insertions(), 1);
  EXPECT_EQ(tree.prompt_count(), 1u);
  tree.Decay(0.5);
  const TreeNode* root = tree.LookupExact(PromptId(2), {});
  EXPECT_DOUBLE_EQ(root->weight, 0.5);
  EXPECT_EQ(root->visits, 1);
  EXPECT_EQ(tree.Lookup(PromptId(2), {}), nullptr);  // 0.5 < min_samples 1
  tree.Insert(Traj(tree, 2, {"a:small:success"}, {40}, 50));
  EXPECT_DOUBLE_EQ(root->weight, 1.5);
  EXPECT_DOUBLE_EQ(tree.LookupExact(PromptId(2), {})->mean, 20 + (50 - 20) / 1.5);
  tree.Clear();
  EXPECT_EQ(tree.node_count(), 0u);
}

TEST(PrefixTreeTest, RebuildEqualsInsertingOneByOne) {
  // Rebuild (percentiles computed once at the end, from two spans) gives the very tree that
  // inserting the same trajectories in the same order gives.
  PrefixTree one_by_one(PrefixTreeOptions{.window = 5, .min_samples = 1});
  std::vector<TreeTrajectory> list;
  for (int i = 0; i < 40; ++i) {
    std::vector<std::string> keys = {"a:small:failure"};
    if (i % 3 != 0) keys.push_back(i % 2 ? "b:large:success" : "a:small:failure");
    std::vector<double> remaining;
    for (size_t k = 0; k < keys.size(); ++k) remaining.push_back((i * 37 % 11) * 100.0 + k);
    list.push_back(Traj(one_by_one, i % 4, keys, remaining, 5000.0 - i * 13));
  }
  for (const TreeTrajectory& t : list) one_by_one.Insert(t);
  PrefixTree rebuilt(PrefixTreeOptions{.window = 5, .min_samples = 1});
  rebuilt.states() = one_by_one.states();
  rebuilt.Insert(list.back());  // discarded by the rebuild
  const std::span<const TreeTrajectory> all(list);
  rebuilt.Rebuild(all.first(25), all.subspan(25));
  EXPECT_EQ(rebuilt.ToJsonValue(), one_by_one.ToJsonValue());
}

TEST(PrefixTreeTest, JsonRoundTripKeepsWindowsAndGlobalRoot) {
  // Written as JSON text and read back, the tree keeps every node, window and the global root.
  PrefixTree tree;
  tree.Insert(Traj(tree, 3, {"a:small:failure", "b:large:timeout"}, {700.5, 20}, 1000));
  tree.Insert(Traj(tree, 4, {"a:small:failure"}, {50}, 60));
  Result<JsonValue> json = ParseJson(ToJson(tree.ToJsonValue()));
  ASSERT_OK(json);
  Result<PrefixTree> loaded = PrefixTree::FromJsonValue(*json);
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->ToJsonValue(), tree.ToJsonValue());
  EXPECT_EQ(loaded->node_count(), tree.node_count());
  EXPECT_EQ(loaded->total_insertions(), 2);
  PrefixTree& l = *loaded;
  const TreeNode* n = l.LookupExact(
      PromptId(3), std::vector<StateId>{S(l, "a:small:failure"), S(l, "b:large:timeout")});
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->window.Values(), (std::vector<double>{20}));
  EXPECT_EQ(l.global_root()->visits, 2);
  const std::string text = ToJson(tree.ToJsonValue());
  EXPECT_NE(text.find(R"("key":"3:[a:small:failure,b:large:timeout]")"), std::string::npos) << text;
}

TEST(PrefixTreeTest, ReadErrorsNameWhatIsWrong) {
  // Strict loading: every problem names the member path.
  struct Case {
    std::string name;
    std::string json;
    std::string message;
  };
  const std::string node =
      R"({"mean_remaining_length":1,"p90_remaining_length":1,"visit_count":1})";
  const Case cases[] = {
      {"not json", "{", "line 1"},
      {"version", R"({"version":3,"roots":{}})", "version: expected 1 or 2"},
      {"unknown top", R"({"version":2,"roots":{},"extra":1})", "unknown member 'extra'"},
      {"no roots", R"({"version":2})", "missing 'roots'"},
      {"prompt", R"({"version":2,"roots":{"p1":)" + node + "}}", "roots[\"p1\"]: prompt id"},
      {"visit",
       R"({"version":2,"roots":{"1":{"mean_remaining_length":1,"p90_remaining_length":1}}})",
       "missing 'visit_count'"},
      {"mean type",
       R"({"version":2,"roots":{"1":{"mean_remaining_length":"x","p90_remaining_length":1,"visit_count":1}}})",
       "roots[\"1\"].mean_remaining_length: expected a number"},
      {"child key",
       R"({"version":2,"roots":{"1":{"mean_remaining_length":1,"p90_remaining_length":1,"visit_count":1,"children":{"bad":)" +
           node + "}}}}",
       "roots[\"1\"].children[\"bad\"]"},
      {"depth",
       R"({"version":2,"roots":{"1":{"depth":1,"mean_remaining_length":1,"p90_remaining_length":1,"visit_count":1}}})",
       "roots[\"1\"].depth: expected 0"},
      {"window",
       R"({"version":2,"roots":{"1":{"mean_remaining_length":1,"p90_remaining_length":1,"visit_count":1,"remaining_lengths":[1,"a"]}}})",
       "remaining_lengths[1]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<JsonValue> json = ParseJson(c.json);
    const Status status = json.ok() ? PrefixTree::FromJsonValue(*json).status() : json.status();
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.ToString();
  }
}

TEST(PrefixTreeTest, VersionOneSynthesisesGlobalRoot) {
  // A version-1 file has no global root: it is the merge of every prompt tree.
  const std::string json =
      R"({"version":1,"roots":{"1":{"mean_remaining_length":100,"p90_remaining_length":100,"visit_count":1,"remaining_lengths":[100]},)"
      R"("2":{"mean_remaining_length":300,"p90_remaining_length":300,"visit_count":1,"remaining_lengths":[300]}}})";
  Result<PrefixTree> tree = PrefixTree::FromJsonValue(ParseJson(json).value());
  ASSERT_OK(tree);
  ASSERT_NE(tree->global_root(), nullptr);
  EXPECT_EQ(tree->global_root()->visits, 2);
  EXPECT_DOUBLE_EQ(tree->global_root()->mean, 200);
}

}  // namespace
}  // namespace libra::sched
