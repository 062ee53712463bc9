// The built-in routers, registered explicitly (no self-registering statics).
#include "sched/cmlfq.h"
#include "sched/heddle.h"
#include "sched/la_mlfq.h"
#include "sched/least_conn.h"
#include "sched/length_aware.h"
#include "sched/oracle_length.h"
#include "sched/round_robin.h"
#include "sched/router.h"
#include "sched/sorted.h"

namespace libra::sched {

Status RegisterBuiltinRouters(RouterRegistry& registry) {
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kCmlfqName),
      "C-MLFQ: start small, move to bigger TP when the tool-return history predicts a long tail",
      &CmlfqRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kRoundRobinName),
                                          "the n-th turn to the n-th instance, cyclically",
                                          &RoundRobinRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kLeastConnName),
      "fewest unfinished turns, rotating tie-break (the paper's homogeneous baseline)",
      &LeastConnRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kLengthAwareName),
      "prompt-length buckets with preferred and fallback TP degrees (the authors' default)",
      &LengthAwareRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kLaMlfqName),
      "length-aware MLFQ: prompt length, then the prompt's last bucket; demotes long runners",
      &LaMlfqRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kSortedName),
                                          "SortedRL-style: predicted-short trajectories first",
                                          &SortedRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kOracleLengthName),
      "routes by the true remaining length (simulator only): the bound for any length predictor",
      &OracleLengthRouter::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kHeddleName),
      "Heddle: predicted-longest first, presorted-DP placement by TP, KV migration at tool "
      "returns (simulator's truth plus calibrated noise as the predictor)",
      &HeddleRouter::Create));
  return Status();
}

const RouterRegistry& BuiltinRouters() {
  static const RouterRegistry registry = [] {
    RouterRegistry r("router");
    const Status s = RegisterBuiltinRouters(r);
    LIBRA_CHECK(s.ok()) << s.ToString();
    return r;
  }();
  return registry;
}

}  // namespace libra::sched
