// LeastConnRouter ("least-conn"): the paper's homogeneous load-balancing baseline.
//
// Assumptions: the number of unfinished turns on an instance is a fair proxy for its load.
// Algorithm: 1. eligible = available instances below `max_active` (when set); if none is below
// the cap, every available instance. 2. m = the least `active` among them. 3. scan all instances
// cyclically from a rotating pointer; take the first eligible one with active == m; the pointer
// moves past it.
// Tie-breaks: the rotating pointer, so that ties do not always favour the first instances (the
// reference implementation's rule: sequential requests go 0..7, 0..7 on 8 instances).
// Knobs: `max_active` (per-instance cap, 0 = none; default 0).
#pragma once

#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kLeastConnName = "least-conn";

class LeastConnRouter : public Router {
 public:
  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options);
  explicit LeastConnRouter(int max_active) : max_active_(max_active) {}

  std::string_view Name() const override { return kLeastConnName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;

 private:
  int max_active_;
  size_t pointer_ = 0;
};

}  // namespace libra::sched
