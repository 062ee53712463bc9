#include "sched/least_conn.h"

#include <algorithm>
#include <limits>

#include "sched/eligible.h"

namespace libra::sched {

Result<std::unique_ptr<Router>> LeastConnRouter::Create(const recipe::OptionTable& options,
                                                        const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<LeastConnRouter>());
}

RouteDecision LeastConnRouter::Route(const RouteRequest& /*request*/,
                                     std::span<const InstanceState> instances) {
  const std::vector<size_t> eligible = EligibleInstances(instances, /*max_active=*/0);
  if (eligible.empty()) return RouteDecision{std::nullopt, "no instance available", ""};
  int least = std::numeric_limits<int>::max();
  for (size_t i : eligible) least = std::min(least, instances[i].active);
  const size_t n = instances.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (pointer_ + k) % n;
    if (instances[i].active != least) continue;
    if (std::find(eligible.begin(), eligible.end(), i) == eligible.end()) continue;
    pointer_ = (i + 1) % n;
    return RouteDecision{instances[i].id, "least-conn", ""};
  }
  return RouteDecision{std::nullopt, "no instance available", ""};  // unreachable
}

}  // namespace libra::sched
