// CmlfqRouter ("cmlfq"): the causality-driven multi-level feedback queue of Libra (Chen, Tan, Li,
// Xu, "Libra: Efficient Resource Management for Agentic RL Post-Training", arXiv 2606.03077;
// semantics of the authors' code in libra-reference.md §2.2-§2.5, §2.11). A pure policy: no I/O
// after Create (which may read a warm-start tree), no clock, no randomness.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/window_index.h"
#include "sched/load_levels.h"
#include "sched/prefix_tree.h"
#include "sched/router.h"
#include "sched/tool_state.h"

namespace libra::sched {

inline constexpr std::string_view kCmlfqName = "cmlfq";

/// One queue level: a token threshold and the TP degrees it prefers.
struct CmlfqBucket {
  std::string name;
  /// Remaining lengths up to this many tokens belong here (the largest bucket takes the rest).
  int64_t max_tokens = 0;
  /// TP degrees tried in order.
  std::vector<int> tp;
};

/// CmlfqRouter's options (docs/policies.md, "## cmlfq", lists the recipe keys).
struct CmlfqOptions {
  /// Default: short <= 4000 on TP 1, medium <= 12000 on TP 2, long <= 30000 on TP 4 (the
  /// authors' 48-GPU configuration).
  std::vector<CmlfqBucket> buckets = {
      {"short", 4000, {1}}, {"medium", 12000, {2}}, {"long", 30000, {4}}};
  /// Try other buckets' TP degrees when the preferred ones are full. Default: true.
  bool fallback = true;
  /// Fallback order: false = the other buckets' TPs in declaration order (reference); true =
  /// larger buckets ascending, then smaller ones descending ("nearest"). Default: true.
  bool nearest_fallback = true;
  /// Last resort: the least-loaded available instance, ignoring the cap. Default: true.
  bool global_fallback = true;
  /// Episodes per instance beyond which it is skipped by preferred and fallback selection;
  /// 0 = no cap. Default: 3.
  int max_episodes_per_instance = 3;
  /// Selection inside a TP: false = least-connections, true = round-robin. Default: false.
  bool round_robin = false;
  /// Least-connections ties: true = rotating pointer per TP, false = first instance (reference).
  /// Default: true.
  bool rotate_ties = true;
  /// Tool payload size classes (tokens). Default: 1000 / 12000 (48-GPU configuration).
  PayloadThresholds payload = {1000, 12000};
  /// Prefix-tree window and minimum evidence. Default: 200, 1.
  PrefixTreeOptions tree;
  /// Rebuild the tree from the recent trajectories every N steps; 0 = never. Default: 5.
  int rebuild_interval = 5;
  /// Trajectories kept for rebuilds. Default: 5000.
  int max_recent_trajectories = 5000;
  /// Whether remaining lengths count the tool output tokens that follow (the reference's token
  /// positions do) or only generated tokens. Default: false.
  bool remaining_includes_tool_tokens = false;
  /// Promote one bucket up when a trajectory has generated its bucket's max_tokens and the tree
  /// has no evidence for it. Default: false.
  bool time_quantum = false;
  /// Veto a move unless decode on the target plus re-prefill beats staying. Needs a cost model.
  /// Default: on when the run has a cost model.
  bool cost_based_moves = false;
  /// Per-step factor on the tree's evidence weights, in (0, 1]; 1 = no decay. Default: 1.
  double decay = 1;
  /// Count load per GPU: the episode cap is max_episodes_per_instance x TP, and least-connections
  /// compares episodes / TP, so a TP4 instance holds four times a TP1 instance's episodes.
  bool load_per_gpu = true;
};

/// CmlfqRouter: routes whole episodes to heterogeneous TP buckets from tool-return outcomes.
///
/// Assumptions: how much a trajectory still generates is predicted by the sequence of its tool
/// outcomes (tool, payload size class, status) so far, per prompt; long remainders run better on
/// high-TP instances (faster per-sequence decode), short ones on low-TP instances (more
/// throughput per GPU). Moving costs a full re-prefill of the context on the new instance (no KV
/// transfer). Load is counted in episodes, held across tool waits.
///
/// Algorithm:
///  1. A new episode starts in the shortest bucket (no use of prompt length or history) and is
///     placed by the selection rule below; the instance's episode count goes up.
///  2. A later turn that follows a tool return appends the return's state to the episode's state
///     sequence and looks it up in the prefix tree (deepest matching prefix of the prompt's
///     tree, or of the global tree for an unseen prompt; nodes need min_samples evidence).
///  3. Both the node's mean and its p90 are mapped to a bucket (first bucket whose max_tokens is
///     >= the length, else the largest). If they agree on a different bucket, the episode moves
///     there (up or down). If they disagree or agree on the current bucket, it stays.
///  4. Option time_quantum: with no tree node, an episode that has generated its bucket's
///     max_tokens moves one bucket up.
///  5. Option cost_based_moves: a move from steps 3-4 happens only if
///     prefill(context, target TP) + decode(remaining, target) < decode(remaining, current),
///     with decode time from the cost model's iteration time at the instance's episode count.
///  6. A move selects an instance in the target bucket; if none is found the episode stays.
///     Otherwise the next turn goes to the episode's instance (re-selected in its bucket only if
///     that instance became unavailable).
///  7. Selection in a bucket: for each preferred TP in order, the available instances of that
///     TP below the per-instance episode cap (x TP with load_per_gpu); least-connections by
///     episode count (per GPU with load_per_gpu) or round-robin per TP. Then the fallback TPs, then
///     the global fallback (every available instance, cap ignored, least episodes). Nothing
///     available: no instance ("not now").
///  8. When a trajectory finishes, its instance's episode count goes down and, if it had tool
///     returns, it is inserted in the tree: after the i-th return, the tokens still generated.
///  9. Every rebuild_interval steps the tree is rebuilt from the last max_recent_trajectories;
///     every step its evidence is multiplied by `decay`.
///
/// Tie-breaks: least-connections ties go to a rotating pointer per TP (default) or to the first
/// instance in the given order (reference); the global fallback likewise. Buckets with equal
/// max_tokens keep their declaration order.
///
/// Knobs (defaults): see CmlfqOptions. `reference = true` in the options table selects the
/// authors' behaviour: 48-GPU buckets, cap 3, first-instance ties, declaration-order fallback,
/// rebuild every 5 steps, remaining lengths including tool tokens, load per instance, no extras.
class CmlfqRouter : public Router {
 public:
  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  /// REQUIRES: options validated as Create does; deps.cost set when cost_based_moves.
  CmlfqRouter(CmlfqOptions options, const RouterDeps& deps, PrefixTree tree);
  CmlfqRouter(const CmlfqRouter&) = delete;
  CmlfqRouter& operator=(const CmlfqRouter&) = delete;

  std::string_view Name() const override { return kCmlfqName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;
  void OnTrajectoryDone(const TrajectoryObservation& observation) override;
  void OnStep(int step) override;
  RouterMetrics Metrics() const override;

  const CmlfqOptions& options() const { return options_; }
  /// The learned tree (for persistence: tree().Save(path)).
  const PrefixTree& tree() const { return tree_; }
  PrefixTree& mutable_tree() { return tree_; }
  /// The bucket a remaining length maps to (index into options().buckets).
  int BucketFor(double remaining_tokens) const;
  /// Episodes the router holds on an instance.
  int EpisodesOn(InstanceId instance) const;

 private:
  static constexpr size_t kNoPick = std::numeric_limits<size_t>::max();
  enum class PickKind { kPreferred, kFallback, kGlobal };
  struct Pick {
    size_t index = kNoPick;
    PickKind kind = PickKind::kPreferred;
    int tp = 0;  // the TP list entry that chose it; 0 for global
  };
  struct Episode {
    PromptId prompt;
    int bucket = 0;
    InstanceId instance;
    size_t instance_index = 0;
    int last_tool_turn = -1;
    std::vector<StateId> states;
  };

  /// Where a tool return sends an episode: its bucket, the tree's evidence for it (null when
  /// none), and whether the time quantum moved it.
  struct Target {
    int bucket = 0;
    const TreeNode* node = nullptr;
    bool quantum = false;
  };

  RouteDecision PlaceNewEpisode(const RouteRequest& request,
                                std::span<const InstanceState> instances);
  /// The episode's target bucket; a tool return appends its state and consults the tree.
  Target TargetBucket(const RouteRequest& request, Episode& ep);
  /// Whether moving to `pick` pays (always, without cost-based moves); counts the verdict.
  bool MovePays(const RouteRequest& request, const Episode& ep, const Target& target,
                const Pick& pick, bool current_ok, std::span<const InstanceState> instances);
  /// Moves the episode to `pick` in `bucket`: the pick committed, the loads moved, the route
  /// counted.
  void Reassign(Episode& ep, int bucket, const Pick& pick,
                std::span<const InstanceState> instances);
  int Load(const InstanceState& instance) const;
  void AddLoad(InstanceId instance, int delta);
  /// Uses the caller's InstanceIndex for this decision when there is one: keeps groups_ (the
  /// available instances by TP and episode load) and rebuilds it when the index's epoch moved.
  void IndexInstances(const RouteRequest& request, std::span<const InstanceState> instances);
  /// SelectInTp through groups_: the same pick, without a scan. `n`: the number of instances.
  Pick SelectIndexed(int tp, size_t n, size_t pointer, bool capped) const;
  Pick SelectInTp(int tp, std::span<const InstanceState> instances, bool capped) const;
  Pick Select(int bucket, std::span<const InstanceState> instances) const;
  bool Less(const InstanceState& a, const InstanceState& b) const;
  int Cap(const InstanceState& instance) const;
  void Commit(const Pick& pick, std::span<const InstanceState> instances);
  double DecodeSeconds(int tp, int sequences, int64_t context, double remaining) const;
  void CountRoute(int bucket, const Pick& pick);
  /// What a decision that picked an instance did ("cmlfq_<why>", "_fallback" appended for a
  /// fallback pick, "global_fallback" for a global one).
  enum Why { kInitialPlacement, kMigration, kReroute };
  static std::string_view Reason(Why why, const Pick& pick);

  CmlfqOptions options_;
  const model::CostModel* cost_;
  ToolStateExtractor extractor_;
  PrefixTree tree_;
  std::vector<int> sorted_;                    // bucket indexes by max_tokens ascending
  std::vector<std::vector<int>> fallback_tp_;  // per bucket
  std::vector<int> load_;                      // episodes per instance id value
  std::vector<size_t> tp_pointer_;             // rotating pointer / round-robin counter per TP
  size_t global_pointer_ = 0;

  // With the caller's InstanceIndex: the available instances of each TP by episode load.
  struct TpGroup {
    int tp = 0;
    LoadLevels levels;
  };
  std::vector<TpGroup> groups_;
  std::vector<uint32_t> group_of_;   // by position in the instance list
  std::vector<size_t> position_of_;  // by instance id value; kNoPick when absent
  const InstanceIndex* indexed_from_ = nullptr;
  uint64_t indexed_epoch_ = 0;
  bool use_index_ = false;  // for the decision in progress

  std::vector<Episode> episodes_;
  std::vector<uint32_t> free_episodes_;
  WindowIndex episode_of_;  // trajectory id -> episode index

  std::vector<TreeTrajectory> recent_;  // ring, oldest at recent_next_ once full
  size_t recent_next_ = 0;
  TreeTrajectory scratch_;

  // Counters.
  std::vector<int64_t> routes_;  // per bucket
  int64_t placements_ = 0, fallbacks_ = 0, global_fallbacks_ = 0, failed_routes_ = 0;
  int64_t moves_tree_ = 0, moves_quantum_ = 0, moves_cost_ = 0, cost_vetoes_ = 0;
  int64_t moves_failed_ = 0, disagree_ = 0, no_evidence_ = 0, reroutes_ = 0, rebuilds_ = 0;
};

}  // namespace libra::sched
