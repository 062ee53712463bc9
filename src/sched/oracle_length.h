// OracleLengthRouter ("oracle-length"): routes by the true remaining length, which only the
// simulator knows. It is the upper bound for any length predictor, not a deployable policy.
//
// Pure policy: no I/O, no clock, no randomness.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/length_aware.h"
#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kOracleLengthName = "oracle-length";

/// The reason of every decision made without the simulator's hint.
inline constexpr std::string_view kOracleLengthNeedsHint =
    "oracle-length needs the simulator's remaining-length hint";

/// Long remaining work to the largest-TP instances, short remaining work to the smallest.
///
/// Assumptions: RouteRequest::oracle_remaining_tokens is the exact number of tokens the trajectory
/// will still generate (set by the simulator only); more tensor parallelism pays off for longer
/// remaining work. Re-prefill on a move is ignored: each turn is placed afresh.
///
/// Algorithm, for each turn:
/// 1. no hint: no instance, reason kOracleLengthNeedsHint (counted in `missing_hint`). Create
///    succeeds anyway; the runner refuses to run this router on a backend other than the
///    simulator.
/// 2. level i = the first i with remaining <= thresholds[i], else the last level; with the default
///    thresholds [4000, 12000]: short (<= 4000), medium (<= 12000), long.
/// 3. instance by TpSelector: preferred TP degree tp_degrees[i] (default [1, 2, 4]); fallback the
///    other levels' degrees by distance from level i (nearer first, the larger degree first at
///    equal distance); then the globally least-loaded instance.
///
/// Tie-breaks: least `active` inside a TP degree, then a rotating pointer per degree (as
/// TpSelector); remaining exactly at a threshold belongs to the lower level.
///
/// Knobs: `thresholds` (strictly increasing remaining-token bounds, 1..7 of them; default
/// [4000, 12000]); `tp_degrees` (one per level, thresholds + 1 of them; default [1, 2, 4]);
/// `max_active` (per-instance cap inside TpSelector, 0 = none; default 0); `enable_fallback`
/// (default true).
///
/// Levels are named short, long (2 levels); short, medium, long (3); short, medium, long,
/// extra_long (4); level0, level1, ... otherwise.
///
/// Metrics: `routes/<level>`, `fallbacks`, `global_fallbacks`, `no_instance`, `missing_hint`.
class OracleLengthRouter : public Router {
 public:
  struct Options {
    /// Remaining-token bounds (inclusive) of every level but the last. Default [4000, 12000].
    std::vector<int64_t> thresholds = {4000, 12000};
    /// Preferred TP degree of each level. Default [1, 2, 4].
    std::vector<int> tp_degrees = {1, 2, 4};
    /// Per-instance cap inside TpSelector; 0 = none. Default 0.
    int max_active = 0;
    /// Try the other levels' degrees before the global fallback. Default true.
    bool enable_fallback = true;
  };

  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  explicit OracleLengthRouter(const Options& options);

  /// The level of a remaining length.
  size_t Level(int64_t remaining_tokens) const;
  const std::vector<std::string>& level_names() const { return names_; }
  const std::vector<TpRule>& rules() const { return rules_; }

  std::string_view Name() const override { return kOracleLengthName; }
  bool WantsOracle() const override { return true; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;
  RouterMetrics Metrics() const override;

 private:
  Options options_;
  TpSelector selector_;
  std::vector<std::string> names_;
  std::vector<TpRule> rules_;
  std::vector<int64_t> routes_;
  int64_t fallbacks_ = 0;
  int64_t global_fallbacks_ = 0;
  int64_t no_instance_ = 0;
  int64_t missing_hint_ = 0;
};

}  // namespace libra::sched
