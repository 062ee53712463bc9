// The components tests run experiments with: the built-in routers and planners, on the simulator
// or on a backend of the test's own (experiment::Components; the tests are their own composition
// root).
#pragma once

#include <memory>
#include <string>

#include "experiment/runner.h"
#include "model/cost_model.h"

namespace libra::test {

/// The built-in routers and planners with `make_backend`.
experiment::Components WithBackend(experiment::BackendFactory make_backend);

/// The built-in routers and planners on the simulator, whatever backend a recipe names.
experiment::Components OnSimulator();

/// The roofline cost model of catalog `gpu` and `model`, default parameters, nodes of
/// `gpus_per_node` (an unknown name stops the test binary).
std::unique_ptr<model::CostModel> Roofline(const std::string& gpu, const std::string& model,
                                           int gpus_per_node = 8);

}  // namespace libra::test
