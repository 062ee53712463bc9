// Helpers shared by the subcommands: loading a recipe with every check, reporting errors, the
// backend factory, Ctrl-C handling and the progress line.
#pragma once

#include <chrono>
#include <string>

#include "cli/commands.h"
#include "common/status.h"
#include "experiment/coordinator.h"
#include "experiment/runner.h"
#include "recipe/recipe.h"

namespace libra::cli {

/// Parses the recipe with the command-line overrides (--seed, --steps, --set) and runs every
/// check, structural and against the registries. kInvalidRecipe lists every problem, one per line.
/// `plan_systems` false leaves out planning each system (a caller that plans them itself, once).
Result<recipe::Recipe> LoadRecipe(const RecipeOptions& options, bool plan_systems = true);

/// Prints the error ("libra: error: <message>", or a recipe's problems one per line with a
/// count) to io.err and returns the exit code for `status` (0, printing nothing, when it is OK).
int Fail(const Io& io, const Status& status);

/// Builds the backend a recipe names; a cluster run keeps its files (logs, weights, scratch) in
/// its own folder (BackendContext::run_dir), which it claims first: a folder holding another
/// run's files is refused.
experiment::BackendFactory MakeBackendFactory();

/// Installs a SIGINT/SIGTERM handler for the duration of a run; Interrupted() reports a signal.
/// A second signal ends libra at once (with the signal's default action), for when the run is
/// busy in a long computation; its run stays `running` and can be resumed.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool Interrupted();
};

/// Draws "step 3/10 ..." on one terminal line, at most ten times a second; silent when the output
/// is not a terminal or --quiet is given.
class ProgressLine {
 public:
  /// `virtual_time`: the backend's clock is simulated (the line says so).
  ProgressLine(const Io& io, bool enabled, std::string label, bool virtual_time);
  ~ProgressLine();
  void Update(const experiment::Progress& progress);
  /// Draws "<label>: <text>" (at most ten times a second unless `force`).
  void Draw(const std::string& text, bool force = false);
  /// Erases the line.
  void Clear();

 private:
  const Io& io_;
  bool enabled_;
  std::string label_;
  bool virtual_time_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace libra::cli
