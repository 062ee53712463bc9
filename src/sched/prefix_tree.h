// PrefixTree: C-MLFQ's causality-aware prefix tree (libra-reference.md §2.3). For every prompt,
// and for all prompts together (the global root), it holds the distribution of "tokens still to
// generate after observing this exact sequence of tool returns": a node at depth d is keyed by d
// tool states and keeps an all-time mean and a p90 over a sliding window of recent values.
//
// A value-like data structure: no I/O (ToJsonValue / FromJsonValue are its file format), no clock.
// Lookup is O(depth) and does not allocate; tool states are interned to small integer ids
// (StateTable), and children are found through one open-addressing hash table keyed by (parent,
// state).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/flat_map.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/status.h"
#include "sched/tool_state.h"

namespace libra::sched {

/// An interned tool state (see StateTable).
using StateId = uint32_t;

/// Interns tool states as `tool_index * 9 + size * 3 + status`. Interning a known tool name does
/// not allocate (heterogeneous lookup).
class StateTable {
 public:
  StateId Intern(std::string_view tool_type, SizeClass size, workload::ToolStatus status);
  StateId Intern(const ToolState& state) {
    return Intern(state.tool_type, state.size, state.status);
  }
  /// Interns a "<tool>:<size>:<status>" key; kInvalidArgument when malformed.
  Result<StateId> InternKey(std::string_view key);
  /// "<tool>:<size>:<status>". REQUIRES: `id` was returned by this table.
  std::string Key(StateId id) const;
  size_t tool_count() const { return tools_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::vector<std::string> tools_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> index_;
  uint32_t last_tool_ = 0;  // the tool interned last
};

/// A finished trajectory as the tree learns it: the tool states in order and, for each, the
/// tokens still generated after it.
struct TreeTrajectory {
  PromptId prompt;
  std::vector<StateId> states;
  /// remaining[i]: tokens generated after the i-th tool return. REQUIRES: same size as states.
  std::vector<double> remaining;
  /// The whole trajectory's length, recorded at the root; when unset the root gets remaining[0].
  std::optional<double> total_length;
};

/// The last `capacity` observations of a node in arrival order (a ring), and their 90th
/// percentile kept up to date as values arrive and leave. The percentile interpolates between
/// the K-th and (K-1)-th largest values (K = n - floor(0.9 (n - 1))), so only the largest are
/// kept in order: K of them and up to kSpare more (21 to 29 of 200). An observation costs O(1)
/// unless a value enters or leaves those, and a scan of the window only once kSpare more of them
/// have left than entered since the last scan.
class SlidingWindow {
 public:
  /// Adds `value`; with `capacity` values held, the oldest leaves. REQUIRES: capacity >= 1.
  void Push(double value, size_t capacity);
  /// Push without the percentile's bookkeeping, for bulk loading; Sort() restores it.
  void PushUnsorted(double value, size_t capacity);
  void Sort();
  /// Holds the last `capacity` of `values` (oldest first).
  void Assign(std::span<const double> values, size_t capacity);
  /// Holds nothing (keeps its buffers).
  void Clear();
  size_t size() const { return ring_.size(); }
  bool empty() const { return ring_.empty(); }
  /// The values, oldest first.
  std::vector<double> Values() const;
  /// numpy.percentile(Values(), 90) with linear interpolation; 0 when empty. REQUIRES: no
  /// PushUnsorted since the last Sort.
  double P90() const { return p90_; }

 private:
  /// How many values beyond K upper_ may hold.
  static constexpr size_t kSpare = 8;
  /// K for n values: how many of the largest the percentile needs.
  static size_t TopCount(size_t n);
  /// Scans the ring for its K + kSpare largest values.
  void Refill();
  /// Computes p90_ from upper_.
  void NoteP90();

  std::vector<double> ring_;   // arrival order; once full, the oldest is at head_
  std::vector<double> upper_;  // the largest values of the ring, ascending: at least K of them
  // The percentile, kept at hand: an observation that leaves upper_ alone does not read it.
  double p90_ = 0;
  uint32_t head_ = 0;
};

/// Statistics of one node. What a lookup reads (the structure, the weight, the answer) comes
/// first, in the node's first 48 bytes; the window, which only insertions touch, after it.
struct TreeNode {
  // Structure (indexes into the tree's node pool).
  StateId state = 0;
  uint32_t first_child = FlatMap::kNone;
  uint32_t next_sibling = FlatMap::kNone;
  int depth = 0;
  /// All-time (weighted) mean of the remaining lengths.
  double mean = 0;
  /// 90th percentile (linear interpolation, numpy's default) of the window.
  double p90 = 0;
  /// Observations, and their weight after decay (== visits without decay).
  int64_t visits = 0;
  double weight = 0;
  /// The last `window` observations.
  SlidingWindow window;
};

struct PrefixTreeOptions {
  /// Observations kept for the p90. Default: 200 (reference).
  int window = 200;
  /// Minimum evidence (weight) for a node to answer a lookup; the walk stops before a child with
  /// less. Default: 1 (reference: any visited node answers).
  double min_samples = 1;
};

class PrefixTree {
 public:
  explicit PrefixTree(PrefixTreeOptions options = {});

  const PrefixTreeOptions& options() const { return options_; }
  StateTable& states() { return states_; }
  const StateTable& states() const { return states_; }

  /// Adds a finished trajectory to its prompt's tree and to the global tree.
  /// REQUIRES: trajectory.states.size() == trajectory.remaining.size().
  void Insert(const TreeTrajectory& trajectory);

  /// The deepest node on the path `states` from the prompt's root if the prompt is known, else
  /// from the global root (never both). The walk stops at the first missing edge or at a child
  /// with less than min_samples evidence. Null when there is no such root or the root itself has
  /// less than min_samples. O(depth), no allocation. The pointer is valid until the next change.
  const TreeNode* Lookup(PromptId prompt, std::span<const StateId> states) const;
  /// The exact node for `states` under the prompt's root (no global fallback); null if absent.
  const TreeNode* LookupExact(PromptId prompt, std::span<const StateId> states) const;
  /// The global root, or null.
  const TreeNode* global_root() const;

  /// Clears all nodes (keeps the state table) and inserts `trajectories`, then `more` (the two
  /// halves of a ring). Cheaper than inserting them one by one: the percentiles are computed
  /// once at the end.
  void Rebuild(std::span<const TreeTrajectory> trajectories,
               std::span<const TreeTrajectory> more = {});
  /// Adds `other`'s evidence: count-weighted means, summed counts, windows concatenated (ours
  /// first) and cut to the last `window`; missing subtrees are copied.
  void Merge(const PrefixTree& other);
  /// Multiplies every node's weight by `factor` (old evidence counts less in means and in the
  /// min_samples rule). REQUIRES: 0 < factor <= 1.
  void Decay(double factor);
  /// Removes all nodes and resets the insertion counter.
  void Clear();

  /// Nodes in all prompt trees plus the global tree.
  size_t node_count() const { return nodes_.size(); }
  size_t prompt_count() const { return prompt_roots_.size(); }
  /// Nodes of the global tree.
  size_t global_node_count() const;
  int max_depth() const;
  int64_t total_insertions() const { return total_insertions_; }

  /// The persistence document (format in docs/policies.md, "Tree persistence").
  JsonValue ToJsonValue() const;
  /// Reads a document written by ToJsonValue (or by the reference, versions 1 and 2).
  /// kInvalidArgument naming the offending member path.
  static Result<PrefixTree> FromJsonValue(const JsonValue& document,
                                          PrefixTreeOptions options = {});

 private:
  static constexpr uint32_t kNone = FlatMap::kNone;
  static uint64_t EdgeKey(uint32_t parent, StateId state) {
    return (static_cast<uint64_t>(parent) << 32) | state;
  }
  uint32_t NewNode(int depth, StateId state);
  uint32_t RootFor(PromptId prompt);
  uint32_t Child(uint32_t parent, StateId state);  // creates
  /// Makes `child` the last child of `parent` (in the edge table and the sibling list).
  void Link(uint32_t parent, uint32_t child);
  /// The child of `parent` for `state`, or kNone.
  uint32_t FindChild(uint32_t parent, StateId state) const;
  /// `bulk`: the windows' sorted copies and percentiles are left for Rebuild to restore.
  void InsertAt(uint32_t root, const TreeTrajectory& trajectory, bool bulk);
  void InsertAll(const TreeTrajectory& trajectory, bool bulk);
  void Observe(TreeNode& node, double value, bool bulk);
  void RecomputeP90(TreeNode& node);
  void MergeNode(uint32_t into, const PrefixTree& other, uint32_t from,
                 std::span<const StateId> state_map);
  uint32_t CopySubtree(const PrefixTree& other, uint32_t from, std::span<const StateId> state_map,
                       int depth, StateId state);
  const TreeNode* Walk(uint32_t root, std::span<const StateId> states, bool exact) const;
  size_t SubtreeSize(uint32_t node) const;
  JsonValue NodeToJson(uint32_t node, const std::string& key) const;
  Status NodeFromJson(const JsonValue& value, const std::string& where, uint32_t node);

  PrefixTreeOptions options_;
  StateTable states_;
  std::vector<TreeNode> nodes_;
  std::vector<TreeNode> spare_;        // nodes of a cleared tree, whose windows NewNode reuses
  size_t next_spare_ = 0;              // the first of spare_ not reused yet
  FlatMap children_;                   // EdgeKey(parent, state) -> child
  FlatMap prompt_roots_;               // prompt id -> root
  std::vector<int64_t> prompt_order_;  // prompts in order of first insertion (for output)
  uint32_t global_root_ = kNone;
  int64_t total_insertions_ = 0;
};

/// numpy.percentile(values, q) with linear interpolation; 0 for no values. Uses `scratch`.
double Percentile(std::span<const double> values, double q, std::vector<double>& scratch);

}  // namespace libra::sched
