// LaMlfqRouter ("la-mlfq"): the authors' "length-aware MLFQ" baseline as their live training path
// behaves, plus the demotion rule their path never calls (on by default here).
//
// Pure policy: no I/O, no clock, no randomness.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "sched/length_aware.h"
#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kLaMlfqName = "la-mlfq";

/// Two buckets, "short" and "long", chosen by prompt length and remembered per prompt.
///
/// Assumptions: a prompt that needed the long bucket recently will need it again (its samples in
/// the same group, and the same prompt in the next epochs); a trajectory that has already
/// generated more than the short bucket's token budget is long.
///
/// Algorithm, for each turn:
/// 1. a trajectory demoted earlier stays in "long" (reason "demoted").
/// 2. otherwise, when the prompt has a history entry recorded at most `history_ttl` steps ago
///    (step - recorded_step <= history_ttl; older entries are deleted on lookup and on OnStep),
///    its bucket (reason "history hit"); else "short" if prompt_tokens <= short_prompt_tokens,
///    else "long" (reason "prompt length").
/// 3. migration (when `migrate`): in "short", with generated_tokens > short_max_tokens, the
///    trajectory is demoted to "long" for the rest of its life (reason "migrated"; counted in
///    `migrations`).
/// 4. instance by TpSelector with the bucket's rule: short [1, 2] -> fallback [4, 8], long
///    [4, 8] -> fallback [1, 2] (the reference derives each fallback from the other bucket's
///    degrees), then the globally least-loaded instance.
/// 5. when the turn finishes, the prompt's history entry becomes {bucket of that turn, current
///    step} (the reference's on_request_done(final_bucket)), so the next samples of the prompt
///    follow a demoted sibling.
/// With `migrate = false` this is exactly the reference's live path: route by prompt length, then
/// stick to the last bucket used by that prompt for `history_ttl` steps. The reference's scouts
/// and waiting samples are not modelled (its workflows never pass n_samples > 1), and its
/// migration controller is never called there; demotion is this implementation's improvement.
///
/// Tie-breaks: as TpSelector (least `active` per degree, rotating pointer per degree).
///
/// Knobs: `short_prompt_tokens` (prompt-length bound of "short", default 5000); `short_max_tokens`
/// (the short bucket's token budget, the demotion threshold, default 5000); `migrate` (default
/// true); `history_ttl` (steps an entry stays valid, 0 = forever, default 5); `short_tp`
/// ([1, 2]), `short_fallback_tp` ([4, 8]), `long_tp` ([4, 8]), `long_fallback_tp` ([1, 2]);
/// `max_active` (per-instance cap inside TpSelector, 0 = none, default 100); `enable_fallback`
/// (default true).
///
/// Metrics: `routes/short`, `routes/long`, `history_hits`, `migrations`, `fallbacks`,
/// `global_fallbacks`, `no_instance`, `history_size`.
class LaMlfqRouter : public Router {
 public:
  enum Bucket { kShort = 0, kLong = 1 };

  struct Options {
    /// Prompts up to this many tokens start in "short". Default 5000.
    int64_t short_prompt_tokens = 5000;
    /// Generated tokens beyond which a "short" trajectory is demoted. Default 5000.
    int64_t short_max_tokens = 5000;
    /// Apply the demotion rule. Default true (the reference never calls it).
    bool migrate = true;
    /// Steps a prompt's history entry stays valid; 0 = forever. Default 5.
    int history_ttl = 5;
    /// Rules of "short" and "long". Default {[1, 2] -> [4, 8]}, {[4, 8] -> [1, 2]}.
    TpRule short_rule{{1, 2}, {4, 8}};
    TpRule long_rule{{4, 8}, {1, 2}};
    /// Per-instance cap inside TpSelector; 0 = none. Default 100.
    int max_active = 100;
    /// Try the fallback degrees before the global fallback. Default true.
    bool enable_fallback = true;
  };

  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  explicit LaMlfqRouter(const Options& options)
      : options_(options), selector_(options.max_active, options.enable_fallback) {}

  std::string_view Name() const override { return kLaMlfqName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;
  void OnTurnDone(const TurnObservation& observation) override;
  void OnTrajectoryDone(const TrajectoryObservation& observation) override;
  void OnStep(int step) override;
  RouterMetrics Metrics() const override;

 private:
  struct HistoryEntry {
    Bucket bucket = kShort;
    int step = 0;
  };
  struct TrajectoryState {
    Bucket last_bucket = kShort;
    bool demoted = false;
  };

  bool Expired(const HistoryEntry& entry) const;

  Options options_;
  TpSelector selector_;
  int step_ = 0;
  std::unordered_map<PromptId, HistoryEntry> history_;
  std::unordered_map<TrajectoryId, TrajectoryState> trajectories_;
  int64_t routes_[2] = {0, 0};
  int64_t history_hits_ = 0;
  int64_t migrations_ = 0;
  int64_t fallbacks_ = 0;
  int64_t global_fallbacks_ = 0;
  int64_t no_instance_ = 0;
};

}  // namespace libra::sched
