#include "sched/least_conn.h"

#include <algorithm>
#include <limits>

#include "common/check.h"
#include "sched/instance_index.h"

namespace libra::sched {

Result<std::unique_ptr<Router>> LeastConnRouter::Create(const recipe::OptionTable& options,
                                                        const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<LeastConnRouter>());
}

RouteDecision LeastConnRouter::Route(const RouteRequest& request,
                                     std::span<const InstanceState> instances) {
  const size_t n = instances.size();
  size_t pick = LoadLevels::kNone;
  if (request.index != nullptr) {
    // The caller's index: the least active, first from the pointer, without a scan.
    const LoadLevels& active = request.index->active();
    LIBRA_CHECK(active.size() == n) << "index of " << active.size() << " for " << n;
    if (active.MinLoad() >= 0 && n > 0) pick = active.FirstWith(active.MinLoad(), pointer_);
  } else {
    int least = std::numeric_limits<int>::max();
    for (const InstanceState& s : instances) {
      if (s.available) least = std::min(least, s.active);
    }
    for (size_t k = 0; k < n && least != std::numeric_limits<int>::max(); ++k) {
      const size_t i = (pointer_ + k) % n;
      if (instances[i].available && instances[i].active == least) {
        pick = i;
        break;
      }
    }
  }
  if (pick == LoadLevels::kNone) return RouteDecision{std::nullopt, "no instance available", ""};
  pointer_ = (pick + 1) % n;
  return RouteDecision{instances[pick].id, "least-conn", ""};
}

}  // namespace libra::sched
