// LeastConnRouter ("least-conn"): the paper's homogeneous load-balancing baseline.
//
// Assumptions: the number of unfinished turns on an instance is a fair proxy for its load.
// Algorithm: 1. m = the least `active` among the available instances. 2. scan all instances
// cyclically from a rotating pointer; take the first available one with active == m; the pointer
// moves past it.
// Tie-breaks: the rotating pointer, so that ties do not always favour the first instances (the
// reference implementation's rule: sequential requests go 0..7, 0..7 on 8 instances).
// Knobs: none. (A "prefer instances below a cap" knob would never change the least-loaded
// choice, so there is none.)
#pragma once

#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kLeastConnName = "least-conn";

class LeastConnRouter : public Router {
 public:
  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  LeastConnRouter() = default;

  std::string_view Name() const override { return kLeastConnName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;

 private:
  size_t pointer_ = 0;
};

}  // namespace libra::sched
