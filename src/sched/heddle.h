// HeddleRouter ("heddle"): the trajectory-level scheduler and placement of Heddle (Zhang, Zhong,
// Yang, Jin, Wu, Wei, Liu, Jin, "Heddle: A Distributed Orchestration System for Agentic RL
// Rollout", arXiv 2603.28101, 2026), rebuilt from the paper's description (docs/policies.md,
// "## heddle", says what is modelled and what is not). A pure policy: no I/O, no clock, no
// randomness of its own.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kHeddleName = "heddle";

/// HeddleRouter's options (docs/policies.md, "## heddle", lists the recipe keys).
struct HeddleOptions {
  /// Log-normal sigma of the prediction error after k turns observed (index k; the last entry
  /// holds for later turns). Default {1.0, 0.55, 0.3, 0.22, 0.15}: calibrated on r2e-gym to the
  /// paper's accuracy (Pearson > 0.7 and top-20% recall > 0.8 from the second step on, rising
  /// as context accumulates; a constant sigma would lose recall as the remaining lengths
  /// narrow).
  std::vector<double> noise_sigma = {1.0, 0.55, 0.3, 0.22, 0.15};
  /// Share of the error's variance that persists across a trajectory's turns (what the
  /// predictor cannot see in any turn's context); the rest is drawn afresh each turn. Default
  /// 0.8: a predictor re-run on a growing context mostly keeps its error, so ranks move with
  /// what the new turns reveal, not with independent draws. Not in the paper.
  double noise_correlation = 0.8;
  /// Salt of the noise hash. Default 0.
  uint64_t noise_seed = 0;
  /// Seconds one prediction takes, overlapped with the tool call before the turn. Default 0.15
  /// (the paper's Table 1 for Qwen3-14B: 0.099 / 0.15 / 0.27 s).
  double prediction_latency_s = 0.15;
  /// Progressive priority (longest predicted remaining first, with preemption). Default true.
  bool priority = true;
  /// Opportunistic migration at tool returns. Default true.
  bool migration = true;
  /// Rank-fraction margin outside an instance's range before a trajectory moves. Default 0.05.
  double migration_hysteresis = 0.05;
  /// DP units: beyond this many trajectories the short end is aggregated. Default 128.
  int max_units = 128;
  /// Re-partition when the trajectories in flight changed by this fraction. Default 0.25.
  double repartition_drift = 0.25;
  /// Sequences an instance runs at once, for the group model (the engines' max_num_seqs).
  /// Default 256.
  int max_num_seqs = 256;
};

/// HeddleRouter: trajectory-level scheduling with runtime prediction, progressive priority,
/// presorted-DP placement and opportunistic migration.
///
/// Assumptions: a predictor estimates each trajectory's remaining generated tokens from its
/// context, more accurately as turns accumulate. Here it is simulated: the simulator's truth
/// (RouteRequest::oracle_remaining_tokens) times log-normal noise, exp(sigma_k * z) with z a
/// standard normal hashed from (noise_seed, trajectory), mostly kept across turns, and sigma_k
/// shrinking with the turns observed; without the truth (a real cluster) it falls back to a history
/// predictor. Long trajectories decide a batch's makespan, so they run first and on the largest TP;
/// interference grows with the group an instance serves (model/partition.h). A KV cache can move
/// between instances while its trajectory waits for a tool.
///
/// Algorithm:
///  1. Every turn re-predicts L, the trajectory's remaining tokens (once per turn; a retried turn
///     keeps its prediction); the turn's priority is L (longest first) and its setup is the
///     prediction latency, overlapped with the preceding tool call.
///  2. Partition: the trajectories in flight sorted by L, descending, are cut into contiguous
///     groups over the available instances sorted by TP, descending (ties: given order),
///     minimising the largest T_tp * F_tp(group size) * L_first (model::PresortedPartition, the
///     short end aggregated beyond max_units). Each instance owns a range of rank fractions
///     [begin/n, end/n). Recomputed when there is none, when the instances or their availability
///     change, when the number in flight moved by repartition_drift, and at every step.
///  3. A first turn goes to the instance whose range holds its rank fraction against the last
///     partition's sorted lengths (so a burst spreads like the population).
///  4. A later turn (after a tool return) is ranked among the trajectories in flight by their
///     latest predictions (the paper's ranges rescaled to the trajectories still active: every
///     remaining length shrinks as its trajectory runs). It stays on its instance while that
///     rank fraction is
///     within the instance's range widened by migration_hysteresis; outside it, it migrates to the
///     instance owning the new rank and moves its KV there (no re-prefill). An instance no longer
///     in the partition (gone, draining) sends it to its rank's instance, moving its KV too.
///
/// Tie-breaks: equal lengths sort by trajectory id; equal rank fractions take the first range
/// holding them; DP ties go to the smallest sum of squared group costs (model/partition.h).
class HeddleRouter : public Router {
 public:
  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  /// REQUIRES: deps.cost set; options valid.
  HeddleRouter(HeddleOptions options, const RouterDeps& deps);

  std::string_view Name() const override { return kHeddleName; }
  bool WantsOracle() const override { return true; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;
  void OnTrajectoryDone(const TrajectoryObservation& observation) override;
  void OnStep(int step) override;
  RouterMetrics Metrics() const override;

  /// The simulated predictor: `oracle_remaining` x exp(sigma_k * z), k = turn, z = sqrt(c) *
  /// z(noise_seed, trajectory) + sqrt(1 - c) * z(noise_seed, trajectory, turn) (standard
  /// normal; c = noise_correlation); at least 1 token.
  static double PredictWithNoise(const HeddleOptions& options, TrajectoryId trajectory, int turn,
                                 int64_t oracle_remaining);

  /// The current partition: instance ids in DP order with their rank-fraction ranges.
  struct Range {
    InstanceId id;
    int tp = 1;
    double lo = 0;
    double hi = 0;
  };
  const std::vector<Range>& ranges() const { return ranges_; }
  /// The latest prediction for a trajectory in flight.
  std::optional<double> Predicted(TrajectoryId trajectory) const;

 private:
  struct Trajectory {
    double predicted = 0;
    int turn = -1;
    int64_t context = 0;
  };

  double Predict(const RouteRequest& request);
  bool InstancesChanged(std::span<const InstanceState> instances) const;
  void Repartition(std::span<const InstanceState> instances);
  double RankFraction(double predicted) const;
  /// The rank fraction of `id` among the trajectories in flight, by their latest predictions.
  double LiveRankFraction(TrajectoryId id, double predicted) const;
  /// Adds or removes a trajectory in flight of prediction `predicted` in ranked_.
  void Rank(double predicted, int64_t id);
  void Unrank(double predicted, int64_t id);
  /// Index into ranges_ of the range holding `rank`; ranges_.size() when none.
  size_t RangeFor(double rank) const;
  size_t FindRange(InstanceId id) const;

  HeddleOptions options_;
  const model::CostModel* cost_;
  std::unordered_map<int64_t, Trajectory> trajectories_;
  /// Every trajectory in flight as (latest prediction, id), longest first, ties by id: a
  /// trajectory's live rank is its position.
  std::vector<std::pair<double, int64_t>> ranked_;
  std::vector<Range> ranges_;
  std::vector<double> snapshot_;  // predicted lengths at the last partition, descending
  struct Seen {
    InstanceId id;
    int tp = 0;
    bool available = false;
    bool operator==(const Seen&) const = default;
  };
  std::vector<Seen> seen_;  // the instances the partition was made for
  bool stale_ = true;
  std::deque<int64_t> history_;  // generated tokens of the last finished trajectories

  int64_t routes_ = 0, placements_ = 0, migrations_ = 0, reroutes_ = 0, resumes_ = 0;
  int64_t repartitions_ = 0, predictions_ = 0, history_predictions_ = 0, no_instance_ = 0;
};

}  // namespace libra::sched
