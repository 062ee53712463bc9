// The built-in cost models, registered explicitly.
#include "model/cost_model.h"
#include "model/reference_model.h"
#include "model/roofline_model.h"

namespace libra::model {

Status RegisterBuiltinCostModels(CostModelRegistry& registry) {
  LIBRA_RETURN_IF_ERROR(registry.Register(std::string(kRooflineName),
                                          "libra's first-principles roofline model",
                                          &RooflineCostModel::Create));
  LIBRA_RETURN_IF_ERROR(
      registry.Register(std::string(kLibraRefName),
                        "the Libra authors' analytic model, reproduced exactly (for cross-checks)",
                        &ReferenceCostModel::Create));
  return Status();
}

const CostModelRegistry& BuiltinCostModels() {
  static const CostModelRegistry* registry = [] {
    auto* r = new CostModelRegistry("cost model");
    const Status s = RegisterBuiltinCostModels(*r);
    LIBRA_CHECK(s.ok()) << s.ToString();
    return r;
  }();
  return *registry;
}

Result<CostModelContext> ContextFor(const recipe::Recipe& recipe) {
  CostModelContext context;
  context.gpus_per_node = recipe.cluster.gpus_per_node;
  if (!recipe.cluster.gpu_spec.entries.empty()) {
    // A catalog GPU's numbers can be overridden one by one (a calibration does); another GPU
    // needs them all.
    const Result<GpuSpec> catalog = FindGpu(recipe.cluster.gpu);
    LIBRA_ASSIGN_OR_RETURN(context.gpu, GpuFromOptions(recipe.cluster.gpu, recipe.cluster.gpu_spec,
                                                       catalog.ok() ? &*catalog : nullptr));
  } else if (auto gpu = FindGpu(recipe.cluster.gpu); gpu.ok()) {
    context.gpu = *gpu;
  } else {
    return Status::InvalidRecipe(recipe.Where("cluster.gpu"),
                                 "cluster.gpu: " + gpu.status().message());
  }
  if (!recipe.model.arch.entries.empty()) {
    LIBRA_ASSIGN_OR_RETURN(context.arch, ModelFromOptions(recipe.model.name, recipe.model.arch));
  } else if (auto arch = FindModel(recipe.model.name); arch.ok()) {
    context.arch = *arch;
  } else {
    return Status::InvalidRecipe(recipe.Where("model.name"),
                                 "model.name: " + arch.status().message());
  }
  return context;
}

Result<std::unique_ptr<CostModel>> MakeCostModel(const recipe::Recipe& recipe) {
  LIBRA_ASSIGN_OR_RETURN(CostModelContext context, ContextFor(recipe));
  const CostModelRegistry& registry = BuiltinCostModels();
  if (!registry.Contains(recipe.cost_model.name)) {
    return Status::InvalidRecipe(
        recipe.Where("cost_model.name"),
        "cost_model.name: " + registry.UnknownMessage(recipe.cost_model.name));
  }
  return registry.Create(recipe.cost_model.name, context, recipe.cost_model.options);
}

}  // namespace libra::model
