// Tuner: tunes one system of a recipe by simulation (experiment/tuning.h's Search, with runs of
// the simulator that record nothing) and records the tuning, with every trial, in the store; and
// finds the tuning recorded for a recipe and system, so that `libra compare --tuned` reuses it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "experiment/runner.h"
#include "experiment/tuning.h"
#include "store/store.h"

namespace libra::experiment {

/// What a tuning reports as it goes: runs spent of the budget, the trial just run, and the best
/// mean score so far (trajectories per second).
struct TuneProgress {
  int runs = 0;
  int budget = 0;
  const Trial* trial = nullptr;
};

struct TuneRequest {
  /// Must outlive the call.
  const recipe::Recipe* recipe = nullptr;
  const recipe::SystemSpec* system = nullptr;
  std::function<bool()> interrupted;
  std::function<void(const TuneProgress&)> progress;
};

/// A tuning: as recorded, and its winner.
struct TuneOutcome {
  records::TuningRecord record;
  Configuration winner;
  /// Found in the store rather than searched now.
  bool reused = false;
};

/// Searches the system's knobs with the recipe's [tuning] budget and records the tuning (in one
/// transaction, after the search: an interrupted or failed search records nothing). Errors:
/// kInvalidArgument when the backend is not the simulator or the system has no knob (Libra's
/// systems, `tune.enabled = false`); kInvalidRecipe for a bad [.tune] table; kUnschedulable when
/// no configuration fits; kInterrupted.
Result<TuneOutcome> TuneSystem(store::Store& store, const TuneRequest& request,
                               const Components& parts);

/// The newest tuning recorded for this recipe and system (experiment::TuningKey), with its
/// winner; nullopt when there is none. kInvalidArgument when the recorded winner no longer
/// names the system's knobs.
Result<std::optional<TuneOutcome>> FindTuning(store::Store& store, const recipe::Recipe& recipe,
                                              const recipe::SystemSpec& system);

/// The recipe a tuning runs: the recipe's, with [tuning] steps when set.
recipe::Recipe TuningRecipe(const recipe::Recipe& recipe);

}  // namespace libra::experiment
