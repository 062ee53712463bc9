#include "sched/instance_index.h"

#include "common/check.h"

namespace libra::sched {

void InstanceIndex::Reset(std::span<const InstanceState> instances) {
  active_.Reset(instances.size());
  for (size_t i = 0; i < instances.size(); ++i) Update(instances, i);
  ++epoch_;
}

void InstanceIndex::Update(std::span<const InstanceState> instances, size_t i) {
  const InstanceState& instance = instances[i];
  LIBRA_CHECK(instances.size() == active_.size() && instance.active >= 0)
      << "instance " << i << " of " << instances.size() << ", index of " << active_.size()
      << ", active " << instance.active;
  if (instance.available != active_.present(i)) ++epoch_;
  if (instance.available) {
    active_.Set(i, instance.active);
  } else {
    active_.Remove(i);
  }
}

}  // namespace libra::sched
