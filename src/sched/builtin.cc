// The built-in routers, registered explicitly (no self-registering statics).
#include "sched/least_conn.h"
#include "sched/round_robin.h"
#include "sched/router.h"

namespace libra::sched {

Status RegisterBuiltinRouters(RouterRegistry& registry) {
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kRoundRobinName),
                                          "the n-th turn to the n-th instance, cyclically",
                                          &RoundRobinRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kLeastConnName),
      "fewest unfinished turns, rotating tie-break (the paper's homogeneous baseline)",
      &LeastConnRouter::Create));
  return Status();
}

const RouterRegistry& BuiltinRouters() {
  static const RouterRegistry* registry = [] {
    auto* r = new RouterRegistry("router");
    const Status s = RegisterBuiltinRouters(*r);
    LIBRA_CHECK(s.ok()) << s.ToString();
    return r;
  }();
  return *registry;
}

}  // namespace libra::sched
