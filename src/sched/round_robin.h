// RoundRobinRouter ("round-robin"): the n-th turn goes to the n-th eligible instance, cyclically.
//
// Assumptions: turns cost about the same and instances are alike; nothing is learned.
// Algorithm: 1. eligible = available instances below `max_active` (when set); if none is below
// the cap, every available instance. 2. pick eligible[counter mod |eligible|]; counter += 1.
// Tie-breaks: none needed. Knobs: `max_active` (per-instance cap, 0 = none; default 0).
#pragma once

#include <vector>

#include "sched/router.h"

namespace libra::sched {

inline constexpr std::string_view kRoundRobinName = "round-robin";

class RoundRobinRouter : public Router {
 public:
  static Result<std::unique_ptr<Router>> Create(const recipe::OptionTable& options,
                                                const RouterDeps& deps);
  explicit RoundRobinRouter(int max_active) : max_active_(max_active) {}

  std::string_view Name() const override { return kRoundRobinName; }
  RouteDecision Route(const RouteRequest& request,
                      std::span<const InstanceState> instances) override;

 private:
  int max_active_;
  uint64_t counter_ = 0;
  std::vector<size_t> eligible_;  // reused by every decision
};

}  // namespace libra::sched
