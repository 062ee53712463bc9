// Shared by the load-balancing routers: which instances may take a turn now.
#pragma once

#include <span>
#include <vector>

#include "sched/router.h"

namespace libra::sched {

/// Sets `out` to the indexes of the available instances with active < max_active (max_active 0 =
/// no cap); when every available instance is at the cap, all available ones (they queue the
/// turn). `out` is a buffer the caller reuses, so that a decision does not allocate.
void EligibleInstances(std::span<const InstanceState> instances, int max_active,
                       std::vector<size_t>* out);

}  // namespace libra::sched
