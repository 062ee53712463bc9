#include "support/components.h"

#include <memory>
#include <utility>

#include "model/catalog.h"
#include "planner/planner.h"
#include "sched/router.h"
#include "sim/cluster_sim.h"

namespace libra::test {

experiment::Components WithBackend(experiment::BackendFactory make_backend) {
  return experiment::Components{&sched::BuiltinRouters(), &planner::BuiltinPlanners(),
                                std::move(make_backend)};
}

experiment::Components OnSimulator() {
  return WithBackend(
      [](const recipe::Recipe& r, const workload::Workload& w, const model::CostModel& cost,
         const experiment::BackendContext&) -> Result<std::unique_ptr<backend::Backend>> {
        return std::unique_ptr<backend::Backend>(std::make_unique<sim::ClusterSim>(r.sim, w, cost));
      });
}

std::unique_ptr<model::CostModel> Roofline(const std::string& gpu, const std::string& model,
                                           int gpus_per_node) {
  const model::CostModelContext context{model::FindGpu(gpu).value(),
                                        model::FindModel(model).value(), gpus_per_node};
  return model::BuiltinCostModels().Create("roofline", context, recipe::OptionTable()).value();
}

}  // namespace libra::test
