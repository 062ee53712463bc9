// Sensitivity: the comparison again under perturbations of the constants the simulator cannot
// measure. Each scenario changes the *world* (what the simulator runs) and not what the systems
// believe: planners and routers plan with the recipe's cost model, as they would on a cluster
// whose real constants differ from the assumed ones, and tuned peers keep the configuration they
// were tuned to on the recipe as written. Workload perturbations (tool latency, the length tail)
// change the trajectories themselves, which every system sees.
//
// The standard set (docs/results.md, "Robustness"): the engine's per-iteration overhead x0.5 and
// x2, training MFU x0.8 and x1.2, decode bandwidth efficiency x0.8 and x1.2 (at most 1), the
// all-reduce latency x0.5 and x2, every tool's median latency x0.5 and x2, and the length tail
// (log-normal sigma of trajectory lengths) x0.8 and x1.25; with the recipe as written, 13
// scenarios. Pure.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "recipe/recipe.h"

namespace libra::experiment {

/// One perturbation: a named change of one constant by a factor.
struct Perturbation {
  /// "overhead x2", "tool latency x0.5", ...; empty for the recipe as written.
  std::string name;
  /// What it changes: "iteration_overhead", "train_mfu", "decode_bw_util", "allreduce_latency",
  /// "tool_latency", "length_tail"; empty for none.
  std::string constant;
  double factor = 1;
  bool operator==(const Perturbation&) const = default;
};

/// The standard set, the recipe as written first.
const std::vector<Perturbation>& StandardPerturbations();

/// `recipe` with the perturbation applied to the constant's effective value (the recipe's own
/// setting, or the cost model's, catalog GPU's or workload preset's default). kInvalidArgument
/// when the recipe cannot take it (a cost model other than roofline, a trace workload).
Result<recipe::Recipe> ApplyPerturbation(const recipe::Recipe& recipe,
                                         const Perturbation& perturbation);

}  // namespace libra::experiment
