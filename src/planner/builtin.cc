// The built-in planners, registered explicitly (no self-registering statics).
#include "planner/colocated_planner.h"
#include "planner/grp_planner.h"
#include "planner/heddle_planner.h"
#include "planner/libra_ref_planner.h"
#include "planner/planner.h"
#include "planner/static_planner.h"

namespace libra::planner {

Status RegisterBuiltinPlanners(PlannerRegistry& registry) {
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kStaticName),
                                          "fixed train/rollout split from the recipe",
                                          &StaticPlanner::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kColocatedName),
                                          "all GPUs roll out, then all train (synchronous)",
                                          &ColocatedPlanner::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kGrpName),
      "Libra's planner: Algorithm 1 search, online re-planning through the elastic pool",
      &GrpPlanner::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kNoEhpName),
                                          "Libra's planner once at the start, no moves (ablation)",
                                          &GrpPlanner::CreateNoEhp));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kLibraRefPlannerName),
      "the Libra authors' planner: exhaustive optimizer on their cost model, one-step gain gate",
      &LibraRefPlanner::Create));
  LIBRA_RETURN_IF_ERROR(registry.Register(
      std::string(kHeddlePlannerName),
      "Heddle's resource manager: a fixed split, rollout TP mix chosen for the length profile "
      "(group makespan model), re-tuned through the elastic pool",
      &HeddlePlanner::Create));
  return Status();
}

const PlannerRegistry& BuiltinPlanners() {
  static const PlannerRegistry registry = [] {
    PlannerRegistry r("planner");
    const Status s = RegisterBuiltinPlanners(r);
    LIBRA_CHECK(s.ok()) << s.ToString();
    return r;
  }();
  return registry;
}

}  // namespace libra::planner
