#include "sched/eligible.h"

namespace libra::sched {

int64_t TrajectoryObservation::generated_tokens() const {
  int64_t total = 0;
  for (int64_t t : turn_tokens) total += t;
  return total;
}

void EligibleInstances(std::span<const InstanceState> instances, int max_active,
                       std::vector<size_t>* out) {
  out->clear();
  bool any = false;
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!instances[i].available) continue;
    any = true;
    if (max_active <= 0 || instances[i].active < max_active) out->push_back(i);
  }
  if (!out->empty() || !any) return;
  for (size_t i = 0; i < instances.size(); ++i) {
    if (instances[i].available) out->push_back(i);
  }
}

}  // namespace libra::sched
