#include "sched/eligible.h"

namespace libra::sched {

int64_t TrajectoryObservation::generated_tokens() const {
  int64_t total = 0;
  for (int64_t t : turn_tokens) total += t;
  return total;
}

std::vector<size_t> EligibleInstances(std::span<const InstanceState> instances, int max_active) {
  std::vector<size_t> below_cap;
  std::vector<size_t> available;
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!instances[i].available) continue;
    available.push_back(i);
    if (max_active <= 0 || instances[i].active < max_active) below_cap.push_back(i);
  }
  return below_cap.empty() ? available : below_cap;
}

}  // namespace libra::sched
