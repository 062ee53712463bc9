#include "sched/sorted.h"

#include <algorithm>
#include <limits>

namespace libra::sched {

void SortedRouter::Window::Add(int64_t total, int capacity) {
  totals.push_back(total);
  sum += total;
  while (static_cast<int>(totals.size()) > capacity) {
    sum -= totals.front();
    totals.pop_front();
  }
}

Result<std::unique_ptr<Router>> SortedRouter::Create(const recipe::OptionTable& options,
                                                     const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  Options o;
  o.max_active = static_cast<int>(reader.Int("max_active", o.max_active, 0, 1 << 20));
  o.prompt_window = static_cast<int>(reader.Int("prompt_window", o.prompt_window, 1, 1 << 20));
  o.global_window = static_cast<int>(reader.Int("global_window", o.global_window, 1, 1 << 24));
  o.min_samples = static_cast<int>(reader.Int("min_samples", o.min_samples, 1, 1 << 20));
  o.long_factor = reader.Double("long_factor", o.long_factor, 0.0, 1e6);
  if (o.min_samples > o.prompt_window) {
    reader.Error("min_samples",
                 "must not exceed prompt_window (" + std::to_string(o.prompt_window) + ")");
  }
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<SortedRouter>(o));
}

std::optional<double> SortedRouter::Predict(PromptId prompt) const {
  auto it = prompts_.find(prompt);
  if (it != prompts_.end() && static_cast<int>(it->second.totals.size()) >= options_.min_samples) {
    return it->second.Mean();
  }
  if (!global_.totals.empty()) return global_.Mean();
  return std::nullopt;
}

std::optional<size_t> SortedRouter::LeastLoaded(std::span<const InstanceState> instances,
                                                bool below_cap_only) const {
  auto accept = [&](const InstanceState& s) {
    return s.available &&
           (!below_cap_only || options_.max_active <= 0 || s.active < options_.max_active);
  };
  int least = std::numeric_limits<int>::max();
  for (const InstanceState& s : instances) {
    if (accept(s)) least = std::min(least, s.active);
  }
  if (least == std::numeric_limits<int>::max()) return std::nullopt;
  const size_t n = instances.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (pointer_ + k) % n;
    if (instances[i].active == least && accept(instances[i])) return i;
  }
  return std::nullopt;  // unreachable
}

RouteDecision SortedRouter::Route(const RouteRequest& request,
                                  std::span<const InstanceState> instances) {
  auto admitted = admitted_long_.find(request.trajectory);
  if (admitted != admitted_long_.end()) {
    // An admitted trajectory is never held back: least-loaded, over the cap if need be.
    const std::string_view bucket = admitted->second ? "long" : "short";
    const std::optional<size_t> pick = LeastLoaded(instances, /*below_cap_only=*/false);
    if (!pick) {
      ++no_instance_;
      return RouteDecision{std::nullopt, "no instance available", bucket};
    }
    pointer_ = (*pick + 1) % instances.size();
    ++(admitted->second ? routes_long_ : routes_short_);
    return RouteDecision{instances[*pick].id, "sorted: admitted", bucket};
  }

  // First turn (or a trajectory not yet admitted): predict and classify.
  const auto prompt = prompts_.find(request.prompt);
  const bool from_prompt = prompt != prompts_.end() &&
                           static_cast<int>(prompt->second.totals.size()) >= options_.min_samples;
  const std::optional<double> predicted = Predict(request.prompt);
  const bool is_long = predicted.has_value() && !global_.totals.empty() &&
                       *predicted > options_.long_factor * global_.Mean();
  const std::string_view bucket = is_long ? "long" : "short";

  const bool capped = options_.max_active > 0;
  std::optional<size_t> pick;
  if (capped) {
    pick = LeastLoaded(instances, /*below_cap_only=*/true);
    bool any_available = false;
    for (const InstanceState& s : instances) any_available = any_available || s.available;
    if (!any_available) {
      ++no_instance_;
      return RouteDecision{std::nullopt, "no instance available", bucket};
    }
    if (!pick) {
      ++deferred_cap_;
      if (is_long) {
        waiting_short_.erase(request.trajectory);
      } else {
        waiting_short_.insert(request.trajectory);
      }
      return RouteDecision{std::nullopt, "cap reached", bucket};
    }
    if (is_long) {
      waiting_short_.erase(request.trajectory);
      if (!waiting_short_.empty()) {
        ++deferred_behind_short_;
        return RouteDecision{std::nullopt, "shorter work waiting", bucket};
      }
    }
  } else {
    pick = LeastLoaded(instances, /*below_cap_only=*/false);
    if (!pick) {
      ++no_instance_;
      return RouteDecision{std::nullopt, "no instance available", bucket};
    }
  }
  pointer_ = (*pick + 1) % instances.size();
  waiting_short_.erase(request.trajectory);
  admitted_long_[request.trajectory] = is_long;
  ++(is_long ? routes_long_ : routes_short_);
  ++(!predicted ? predictions_none_ : from_prompt ? predictions_prompt_ : predictions_global_);
  return RouteDecision{instances[*pick].id, is_long ? "sorted: long" : "sorted: short", bucket};
}

void SortedRouter::OnTrajectoryDone(const TrajectoryObservation& observation) {
  admitted_long_.erase(observation.trajectory);
  waiting_short_.erase(observation.trajectory);
  const int64_t total = observation.generated_tokens();
  prompts_[observation.prompt].Add(total, options_.prompt_window);
  global_.Add(total, options_.global_window);
}

RouterMetrics SortedRouter::Metrics() const {
  RouterMetrics m;
  m.values["routes/short"] = static_cast<double>(routes_short_);
  m.values["routes/long"] = static_cast<double>(routes_long_);
  m.values["deferred"] = static_cast<double>(deferred_cap_ + deferred_behind_short_);
  m.values["deferred/cap"] = static_cast<double>(deferred_cap_);
  m.values["deferred/behind_short"] = static_cast<double>(deferred_behind_short_);
  m.values["no_instance"] = static_cast<double>(no_instance_);
  m.values["predictions/prompt"] = static_cast<double>(predictions_prompt_);
  m.values["predictions/global"] = static_cast<double>(predictions_global_);
  m.values["predictions/none"] = static_cast<double>(predictions_none_);
  m.values["waiting_short"] = static_cast<double>(waiting_short_.size());
  return m;
}

}  // namespace libra::sched
