// The components tests run experiments with: the built-in routers and planners, on the simulator
// or on a backend of the test's own (experiment::Components; the tests are their own composition
// root).
#pragma once

#include "experiment/runner.h"

namespace libra::test {

/// The built-in routers and planners with `make_backend`.
experiment::Components WithBackend(experiment::BackendFactory make_backend);

/// The built-in routers and planners on the simulator, whatever backend a recipe names.
experiment::Components OnSimulator();

}  // namespace libra::test
