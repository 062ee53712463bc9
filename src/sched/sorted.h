// SortedRouter ("sorted"): SortedRL-style shortest-predicted-first admission.
//
// Pure policy: no I/O, no clock, no randomness.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <unordered_map>

#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kSortedName = "sorted";

/// Admits trajectories predicted to be short before those predicted to be long.
///
/// Assumptions: a prompt's trajectories have similar lengths (the mean of its finished
/// trajectories predicts the next one), and finishing short trajectories first shortens the
/// batch's tail and frees capacity sooner. The router reorders *admission* only: it never
/// preempts or moves a running trajectory, and only a trajectory's first turn can be held back.
///
/// Algorithm:
/// 1. prediction (first turn): the mean total generated tokens of the prompt's last
///    `prompt_window` finished trajectories (at least `min_samples` of them); otherwise the mean
///    of the last `global_window` finished trajectories of any prompt; otherwise none.
/// 2. class: "long" when the prediction exceeds `long_factor` x the global mean, else "short"
///    (no prediction: "short", so nothing is held back before any trajectory has finished). The
///    class is fixed when the trajectory is admitted; later turns reuse it.
/// 3. first turn, `max_active` > 0: if no available instance is below the cap, no instance
///    ("cap reached"; a short trajectory is remembered as waiting). If it is long and a short
///    trajectory is waiting, no instance ("shorter work waiting"): the coordinator retries both
///    when capacity frees, and the short one takes the slot whatever its place in the queue.
///    Otherwise the least-loaded instance below the cap.
/// 4. later turns, or `max_active` = 0: the least-loaded available instance (above the cap when
///    every instance is at it: an admitted trajectory is never held back).
/// Without a cap this is least-connections with short/long labels; set `max_active` (the number
/// of turns an instance should run at once) to get the reordering.
///
/// Tie-breaks: least `active`, then a rotating pointer over the instance list (as least-conn).
/// A trajectory predicted exactly at long_factor x mean is short.
///
/// Knobs: `max_active` (per-instance admission cap, 0 = none; default 0); `prompt_window` (finished
/// trajectories per prompt in the mean; default 16); `global_window` (finished trajectories in
/// the global mean; default 1024); `min_samples` (finished trajectories a prompt needs before its
/// own mean is used; default 1); `long_factor` (default 1.0).
///
/// Metrics: `routes/short`, `routes/long`, `deferred` (turns answered with no instance because of
/// the cap or waiting short work), `deferred/cap`, `deferred/behind_short`, `no_instance`,
/// `predictions/prompt`, `predictions/global`, `predictions/none` (first-turn predictions by
/// source), `waiting_short` (short trajectories waiting now).
class SortedRouter : public Router {
 public:
  struct Options {
    /// Per-instance admission cap on unfinished turns; 0 = none. Default 0.
    int max_active = 0;
    /// Finished trajectories of a prompt averaged into its prediction. Default 16.
    int prompt_window = 16;
    /// Finished trajectories (any prompt) averaged into the global mean. Default 1024.
    int global_window = 1024;
    /// Finished trajectories a prompt needs before its own mean is used. Default 1.
    int min_samples = 1;
    /// Long when the prediction exceeds long_factor x the global mean. Default 1.0.
    double long_factor = 1.0;
  };

  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  explicit SortedRouter(const Options& options) : options_(options) {}

  /// The predicted total generated tokens of a new trajectory of `prompt`; none before any
  /// trajectory has finished.
  std::optional<double> Predict(PromptId prompt) const;

  std::string_view Name() const override { return kSortedName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;
  void OnTrajectoryDone(const TrajectoryObservation& observation) override;
  RouterMetrics Metrics() const override;

 private:
  // A sliding window of totals with its running sum.
  struct Window {
    std::deque<int64_t> totals;
    int64_t sum = 0;
    void Add(int64_t total, int capacity);
    double Mean() const { return static_cast<double>(sum) / static_cast<double>(totals.size()); }
  };

  // The least-loaded available instance (below the cap when `below_cap_only`), ties to the first
  // from pointer_; none when there is none. The caller moves pointer_ past a placed pick.
  std::optional<size_t> LeastLoaded(std::span<const InstanceState> instances,
                                    bool below_cap_only) const;

  Options options_;
  std::unordered_map<PromptId, Window> prompts_;
  Window global_;
  std::unordered_map<TrajectoryId, bool> admitted_long_;  // admitted trajectory -> long?
  std::set<TrajectoryId> waiting_short_;
  size_t pointer_ = 0;
  int64_t routes_short_ = 0;
  int64_t routes_long_ = 0;
  int64_t deferred_cap_ = 0;
  int64_t deferred_behind_short_ = 0;
  int64_t no_instance_ = 0;
  int64_t predictions_prompt_ = 0;
  int64_t predictions_global_ = 0;
  int64_t predictions_none_ = 0;
};

}  // namespace libra::sched
