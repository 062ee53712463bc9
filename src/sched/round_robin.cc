#include "sched/round_robin.h"

#include "sched/eligible.h"

namespace libra::sched {

Result<std::unique_ptr<Router>> RoundRobinRouter::Create(const recipe::OptionTable& options,
                                                         const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  const int max_active = static_cast<int>(reader.Int("max_active", 0, 0, 1 << 20));
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<RoundRobinRouter>(max_active));
}

RouteDecision RoundRobinRouter::Route(const RouteRequest& /*request*/,
                                      std::span<const InstanceState> instances) {
  EligibleInstances(instances, max_active_, &eligible_);
  if (eligible_.empty()) return RouteDecision{std::nullopt, "no instance available", ""};
  const size_t pick = eligible_[counter_ % eligible_.size()];
  ++counter_;
  return RouteDecision{instances[pick].id, "round-robin", ""};
}

}  // namespace libra::sched
