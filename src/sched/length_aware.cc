#include "sched/length_aware.h"

#include <algorithm>
#include <limits>

#include "common/strings.h"

namespace libra::sched {
namespace {

// Least `active` among the instances accepted by `accept`, ties broken by scanning cyclically
// from `pointer`; the pointer moves past the pick.
template <typename Accept>
std::optional<size_t> RotatingLeastActive(std::span<const InstanceState> instances, Accept accept,
                                          size_t& pointer) {
  const size_t n = instances.size();
  if (n == 0) return std::nullopt;
  int least = std::numeric_limits<int>::max();
  for (size_t i = 0; i < n; ++i) {
    if (accept(instances[i])) least = std::min(least, instances[i].active);
  }
  if (least == std::numeric_limits<int>::max()) return std::nullopt;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (pointer + k) % n;
    if (instances[i].active != least || !accept(instances[i])) continue;
    pointer = (i + 1) % n;
    return i;
  }
  return std::nullopt;  // unreachable
}

}  // namespace

std::optional<size_t> TpSelector::TryDegrees(const std::vector<int>& degrees,
                                             std::span<const InstanceState> instances) {
  for (int tp : degrees) {
    auto accept = [&](const InstanceState& s) {
      return s.available && s.tp == tp && (max_active_ <= 0 || s.active < max_active_);
    };
    const std::optional<size_t> pick = RotatingLeastActive(instances, accept, pointers_[tp]);
    if (pick) return pick;
  }
  return std::nullopt;
}

std::optional<TpPick> TpSelector::Select(const TpRule& rule,
                                         std::span<const InstanceState> instances) {
  if (std::optional<size_t> pick = TryDegrees(rule.preferred, instances)) {
    return TpPick{*pick, TpPickKind::kPreferred};
  }
  if (enable_fallback_) {
    if (std::optional<size_t> pick = TryDegrees(rule.fallback, instances)) {
      return TpPick{*pick, TpPickKind::kFallback};
    }
  }
  auto any = [](const InstanceState& s) { return s.available; };
  if (std::optional<size_t> pick = RotatingLeastActive(instances, any, global_pointer_)) {
    return TpPick{*pick, TpPickKind::kGlobal};
  }
  return std::nullopt;
}

std::vector<int> ReadTpList(recipe::OptionReader& reader, const std::string& key,
                            const std::vector<int>& default_value, bool allow_empty) {
  const std::vector<int64_t> fallback(default_value.begin(), default_value.end());
  const std::vector<int64_t> raw = reader.IntList(key, fallback, 1, 1024);
  std::vector<int> out(raw.begin(), raw.end());
  if (out.empty() && !allow_empty) {
    reader.Error(key, "must list at least one TP degree");
    return default_value;
  }
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    reader.Error(key, "lists a TP degree twice");
    return default_value;
  }
  return out;
}

Result<std::unique_ptr<Router>> LengthAwareRouter::Create(const recipe::OptionTable& options,
                                                          const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  Options o;
  const std::vector<int64_t> thresholds = reader.IntList(
      "thresholds", {o.thresholds[0], o.thresholds[1], o.thresholds[2]}, 1, int64_t{1} << 40);
  if (thresholds.size() != 3) {
    reader.Error("thresholds", StrFormat("must list 3 prompt-token bounds (short, medium, long), "
                                         "got %zu",
                                         thresholds.size()));
  } else if (!(thresholds[0] < thresholds[1] && thresholds[1] < thresholds[2])) {
    reader.Error("thresholds", "must be strictly increasing");
  } else {
    o.thresholds = {thresholds[0], thresholds[1], thresholds[2]};
  }
  for (int c = 0; c < kCategories; ++c) {
    const std::string name(kCategoryNames[static_cast<size_t>(c)]);
    TpRule& rule = o.rules[static_cast<size_t>(c)];
    rule.preferred = ReadTpList(reader, name + "_tp", rule.preferred, /*allow_empty=*/false);
    rule.fallback = ReadTpList(reader, name + "_fallback_tp", rule.fallback, /*allow_empty=*/true);
  }
  o.max_active = static_cast<int>(reader.Int("max_active", o.max_active, 0, 1 << 20));
  o.enable_fallback = reader.Bool("enable_fallback", o.enable_fallback);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<LengthAwareRouter>(o));
}

int LengthAwareRouter::Categorize(int64_t prompt_tokens) const {
  for (int c = 0; c < 3; ++c) {
    if (prompt_tokens <= options_.thresholds[static_cast<size_t>(c)]) return c;
  }
  return 3;
}

RouteDecision LengthAwareRouter::Route(const RouteRequest& request,
                                       std::span<const InstanceState> instances) {
  const int category = Categorize(request.prompt_tokens);
  const std::string_view bucket = kCategoryNames[static_cast<size_t>(category)];
  const std::optional<TpPick> pick =
      selector_.Select(options_.rules[static_cast<size_t>(category)], instances);
  if (!pick) {
    ++no_instance_;
    return RouteDecision{std::nullopt, "no instance available", bucket};
  }
  ++routes_[static_cast<size_t>(category)];
  switch (pick->kind) {
    case TpPickKind::kPreferred:
      return RouteDecision{instances[pick->index].id, "length-aware", bucket};
    case TpPickKind::kFallback:
      ++fallbacks_;
      return RouteDecision{instances[pick->index].id, "length-aware fallback", bucket};
    case TpPickKind::kGlobal:
      ++fallbacks_;
      ++global_fallbacks_;
      return RouteDecision{instances[pick->index].id, "global fallback", bucket};
  }
  return RouteDecision{std::nullopt, "no instance available", bucket};  // unreachable
}

RouterMetrics LengthAwareRouter::Metrics() const {
  RouterMetrics m;
  for (int c = 0; c < kCategories; ++c) {
    m.values["routes/" + std::string(kCategoryNames[static_cast<size_t>(c)])] =
        static_cast<double>(routes_[static_cast<size_t>(c)]);
  }
  m.values["fallbacks"] = static_cast<double>(fallbacks_);
  m.values["global_fallbacks"] = static_cast<double>(global_fallbacks_);
  m.values["no_instance"] = static_cast<double>(no_instance_);
  return m;
}

}  // namespace libra::sched
