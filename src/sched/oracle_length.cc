#include "sched/oracle_length.h"

#include <algorithm>

#include "common/check.h"
#include "common/strings.h"

namespace libra::sched {

Result<std::unique_ptr<Router>> OracleLengthRouter::Create(const recipe::OptionTable& options,
                                                           const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  Options o;
  const std::vector<int64_t> thresholds =
      reader.IntList("thresholds", o.thresholds, 1, int64_t{1} << 40);
  bool thresholds_ok = true;
  if (thresholds.empty() || thresholds.size() > 7) {
    reader.Error("thresholds",
                 StrFormat("must list 1 to 7 remaining-token bounds, got %zu", thresholds.size()));
    thresholds_ok = false;
  } else if (std::adjacent_find(thresholds.begin(), thresholds.end(),
                                [](int64_t a, int64_t b) { return a >= b; }) != thresholds.end()) {
    reader.Error("thresholds", "must be strictly increasing");
    thresholds_ok = false;
  }
  const bool has_degrees = reader.Has("tp_degrees");
  std::vector<int> degrees = ReadTpList(reader, "tp_degrees", o.tp_degrees, false);
  if (thresholds_ok) {
    o.thresholds = thresholds;
    if (degrees.size() != thresholds.size() + 1) {
      reader.Error(has_degrees ? "tp_degrees" : "thresholds",
                   StrFormat("tp_degrees must list one TP degree per level: %zu thresholds make "
                             "%zu levels, got %zu degrees",
                             thresholds.size(), thresholds.size() + 1, degrees.size()));
    }
  }
  o.tp_degrees = degrees;
  o.max_active = static_cast<int>(reader.Int("max_active", o.max_active, 0, 1 << 20));
  o.enable_fallback = reader.Bool("enable_fallback", o.enable_fallback);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<OracleLengthRouter>(o));
}

OracleLengthRouter::OracleLengthRouter(const Options& options)
    : options_(options),
      selector_(options.max_active, options.enable_fallback),
      routes_(options.tp_degrees.size(), 0) {
  LIBRA_CHECK(options_.tp_degrees.size() == options_.thresholds.size() + 1)
      << "oracle-length: one TP degree per level";
  const size_t n = options_.tp_degrees.size();
  static const std::vector<std::vector<std::string>> kNames = {
      {},
      {},
      {"short", "long"},
      {"short", "medium", "long"},
      {"short", "medium", "long", "extra_long"}};
  for (size_t i = 0; i < n; ++i) {
    names_.push_back(n < kNames.size() ? kNames[n][i] : "level" + std::to_string(i));
  }
  for (size_t i = 0; i < n; ++i) {
    TpRule rule;
    rule.preferred = {options_.tp_degrees[i]};
    for (size_t distance = 1; distance < n; ++distance) {
      // The levels `distance` away on either side, the larger degree first.
      std::vector<int> ring;
      if (i + distance < n) ring.push_back(options_.tp_degrees[i + distance]);
      if (i >= distance) ring.push_back(options_.tp_degrees[i - distance]);
      std::stable_sort(ring.begin(), ring.end(), [](int a, int b) { return a > b; });
      for (int tp : ring) {
        if (std::find(rule.fallback.begin(), rule.fallback.end(), tp) == rule.fallback.end() &&
            tp != options_.tp_degrees[i]) {
          rule.fallback.push_back(tp);
        }
      }
    }
    rules_.push_back(rule);
  }
}

size_t OracleLengthRouter::Level(int64_t remaining_tokens) const {
  for (size_t i = 0; i < options_.thresholds.size(); ++i) {
    if (remaining_tokens <= options_.thresholds[i]) return i;
  }
  return options_.thresholds.size();
}

RouteDecision OracleLengthRouter::Route(const RouteRequest& request,
                                        std::span<const InstanceState> instances) {
  if (!request.oracle_remaining_tokens) {
    ++missing_hint_;
    return RouteDecision{std::nullopt, kOracleLengthNeedsHint, ""};
  }
  const size_t level = Level(*request.oracle_remaining_tokens);
  const std::optional<TpPick> pick = selector_.Select(rules_[level], instances);
  if (!pick) {
    ++no_instance_;
    return RouteDecision{std::nullopt, "no instance available", names_[level]};
  }
  ++routes_[level];
  switch (pick->kind) {
    case TpPickKind::kPreferred:
      return RouteDecision{instances[pick->index].id, "oracle-length", names_[level]};
    case TpPickKind::kFallback:
      ++fallbacks_;
      return RouteDecision{instances[pick->index].id, "oracle-length fallback", names_[level]};
    case TpPickKind::kGlobal:
      ++fallbacks_;
      ++global_fallbacks_;
      return RouteDecision{instances[pick->index].id, "global fallback", names_[level]};
  }
  return RouteDecision{std::nullopt, "no instance available", names_[level]};  // unreachable
}

RouterMetrics OracleLengthRouter::Metrics() const {
  RouterMetrics m;
  for (size_t i = 0; i < names_.size(); ++i) {
    m.values["routes/" + names_[i]] = static_cast<double>(routes_[i]);
  }
  m.values["fallbacks"] = static_cast<double>(fallbacks_);
  m.values["global_fallbacks"] = static_cast<double>(global_fallbacks_);
  m.values["no_instance"] = static_cast<double>(no_instance_);
  m.values["missing_hint"] = static_cast<double>(missing_hint_);
  return m;
}

}  // namespace libra::sched
