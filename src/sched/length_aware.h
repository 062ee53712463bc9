// LengthAwareRouter ("length-aware"): the authors' prompt-length baseline (LengthAwareScheduler),
// plus TpSelector, the "preferred TP degrees, then fallback TP degrees, then anything" instance
// choice that the bucketed baselines (length-aware, la-mlfq, oracle-length) share.
//
// Pure policy: no I/O, no clock, no randomness.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kLengthAwareName = "length-aware";

/// A bucket's instance preferences: TP degrees tried in order, then the fallback TP degrees.
struct TpRule {
  std::vector<int> preferred;
  std::vector<int> fallback;
  bool operator==(const TpRule&) const = default;
};

/// How TpSelector found its instance.
enum class TpPickKind { kPreferred, kFallback, kGlobal };

struct TpPick {
  size_t index = 0;  // into the instance span
  TpPickKind kind = TpPickKind::kPreferred;
};

/// Chooses an instance for a TpRule:
/// 1. for each TP degree of `rule.preferred`, in order: candidates = available instances of that
///    degree with active < max_active (max_active 0 = no cap); the first degree with a candidate
///    wins, and among its candidates the least `active` one, ties broken by a rotating pointer
///    kept per TP degree (scan from the pointer, take the first tie, move the pointer past it);
/// 2. when `enable_fallback`, the same over `rule.fallback`;
/// 3. global fallback: the least `active` available instance of any degree, the cap ignored,
///    ties broken by a rotating global pointer;
/// 4. nothing available: no pick.
/// This is the reference's `_route_to_bucket` with least-connections, except that ties rotate
/// (the reference takes the first registered instance) so that equal instances share the load.
class TpSelector {
 public:
  TpSelector(int max_active, bool enable_fallback)
      : max_active_(max_active), enable_fallback_(enable_fallback) {}

  std::optional<TpPick> Select(const TpRule& rule, std::span<const InstanceState> instances);

 private:
  std::optional<size_t> TryDegrees(const std::vector<int>& degrees,
                                   std::span<const InstanceState> instances);

  int max_active_;
  bool enable_fallback_;
  std::map<int, size_t> pointers_;  // TP degree -> rotating pointer
  size_t global_pointer_ = 0;
};

/// Decodes one TP-degree list option for the TpSelector-based routers: each element in
/// [1, 1024], no duplicates; `allow_empty` false rejects []. Problems go to the reader.
std::vector<int> ReadTpList(recipe::OptionReader& reader, const std::string& key,
                            const std::vector<int>& default_value, bool allow_empty);

/// Routes by prompt length, like the reference's LengthAwareScheduler.
///
/// Assumptions: a long prompt predicts a long (expensive) trajectory, so it belongs on an instance
/// with more tensor parallelism; short prompts go to small instances, which have more throughput
/// per GPU for short work. Nothing is learned.
///
/// Algorithm:
/// 1. category from the trajectory's prompt length: prompt_tokens <= thresholds[0] (5000) is
///    "short", <= thresholds[1] (10000) "medium", <= thresholds[2] (15000) "long", else
///    "extra_long". The prompt length is the same for every turn, so a trajectory keeps the
///    category of its first turn for all its turns (the context that grows with tool outputs is
///    deliberately not used).
/// 2. instance by TpSelector with the category's rule: preferred TP degrees in order, then the
///    fallback degrees, then the globally least-loaded available instance. Default rules, as the
///    reference: short [1, 2] -> [4, 8]; medium [2, 4] -> [1, 8]; long [4, 8] -> [2, 1];
///    extra_long [8, 4] -> [2, 1].
/// 3. no available instance: no instance ("no instance available"); the coordinator retries.
///
/// Tie-breaks: least `active` inside a TP degree, then a rotating pointer per degree (see
/// TpSelector); degrees are tried in the listed order, never mixed.
///
/// Knobs (router options): `thresholds` (3 strictly increasing prompt-token bounds; default
/// [5000, 10000, 15000]); `<category>_tp` and `<category>_fallback_tp` for each of short, medium,
/// long, extra_long (defaults above); `max_active` (per-instance cap on unfinished turns before a
/// degree counts as full, 0 = none; default 100, the reference's max_queue_length);
/// `enable_fallback` (default true).
///
/// Metrics: `routes/<category>` (turns placed per category), `fallbacks` (placed on a fallback
/// degree or by the global fallback), `global_fallbacks`, `no_instance`.
class LengthAwareRouter : public Router {
 public:
  static constexpr int kCategories = 4;
  static constexpr std::array<std::string_view, kCategories> kCategoryNames = {
      "short", "medium", "long", "extra_long"};

  struct Options {
    /// Upper prompt-token bound (inclusive) of short, medium and long. Default 5000/10000/15000.
    std::array<int64_t, 3> thresholds = {5000, 10000, 15000};
    /// Rules of short, medium, long, extra_long. Default: see the class comment.
    std::array<TpRule, kCategories> rules = {TpRule{{1, 2}, {4, 8}}, TpRule{{2, 4}, {1, 8}},
                                             TpRule{{4, 8}, {2, 1}}, TpRule{{8, 4}, {2, 1}}};
    /// Per-instance cap on unfinished turns inside TpSelector; 0 = none. Default 100.
    int max_active = 100;
    /// Try the fallback degrees before the global fallback. Default true.
    bool enable_fallback = true;
  };

  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  explicit LengthAwareRouter(const Options& options)
      : options_(options), selector_(options.max_active, options.enable_fallback) {}

  /// The category index (0 short .. 3 extra_long) of a prompt length.
  int Categorize(int64_t prompt_tokens) const;

  std::string_view Name() const override { return kLengthAwareName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;
  RouterMetrics Metrics() const override;

 private:
  Options options_;
  TpSelector selector_;
  std::array<int64_t, kCategories> routes_{};
  int64_t fallbacks_ = 0;
  int64_t global_fallbacks_ = 0;
  int64_t no_instance_ = 0;
};

}  // namespace libra::sched
