// Helpers shared by the subcommands: loading a recipe with every check, reporting errors, the
// backend factory, Ctrl-C handling, the step log, output formats and the database.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "common/status.h"
#include "experiment/coordinator.h"
#include "experiment/runner.h"
#include "recipe/recipe.h"
#include "report/document.h"
#include "report/summary.h"
#include "store/store.h"

namespace libra::cli {

/// Parses the recipe with the command-line overrides (--seed, --steps, --set) and runs every
/// check, structural and against the registries. kInvalidRecipe lists every problem, one per line.
/// `plan_systems` false leaves out planning each system (a caller that plans them itself, once).
Result<recipe::Recipe> LoadRecipe(const RecipeOptions& options, bool plan_systems = true);

/// The fully resolved recipe of `system` on `recipe` (recipe/recipe_writer.h): its policies,
/// workload, cost model and (for the cluster backend) node tables are built once while an
/// OptionLog records every option they read.
Result<std::string> ResolveRecipe(const recipe::Recipe& recipe, const recipe::SystemSpec& system);

/// Prints the error ("libra: error: <message>", or a recipe's problems one per line with a
/// count) to io.err and returns the exit code for `status` (0, printing nothing, when it is OK).
int Fail(const Io& io, const Status& status);

/// Builds the backend a recipe names; a cluster run keeps its files (logs, weights, scratch) in
/// its own folder (BackendContext::run_dir), which it claims first: a folder holding another
/// run's files is refused.
experiment::BackendFactory MakeBackendFactory();

/// What the CLI's runs are assembled from: the built-in routers and planners, and the backends
/// MakeBackendFactory builds. The CLI is the composition root: it builds them and passes them in.
const experiment::Components& Builtins();

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

/// What run and compare show of a run's progress. On a terminal (and with text logs) a line
/// "label: step 3/10, ..." redrawn at most ten times a second; otherwise one line per finished
/// step, as text or (--log-format json) as one JSON object, to `lines`. Nothing when disabled
/// (--quiet).
class StepLog {
 public:
  /// `virtual_time`: the backend's clock is simulated (the lines say so).
  StepLog(const Io& io, bool enabled, bool json, std::ostream& lines, std::string label,
          bool virtual_time);
  ~StepLog();
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;
  void Update(const experiment::Progress& progress);
  /// On a terminal with text logs, draws "<label>: <text>" on the progress line (at most ten
  /// times a second unless `force`); nothing otherwise.
  void Draw(const std::string& text, bool force = false);
  /// Erases the progress line.
  void Clear();

 private:
  const Io& io_;
  bool enabled_;
  bool json_;
  bool redraw_;  // a progress line on the terminal, not lines
  std::ostream& lines_;
  std::string label_;
  bool virtual_time_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

/// The format that --format and --json ask for; kInvalidArgument for an unknown one.
Result<report::Format> ChosenFormat(const OutputOptions& output);

/// Prints `doc` as `output` asks (only the --table given, when one is); the exit code.
int Print(const Io& io, const report::Document& doc, const OutputOptions& output);

/// " --db PATH" when `db` is not the default database, for the commands that hints print
/// ("libra report 3 --db q.db"); "" otherwise.
std::string DbFlag(const std::string& db);

/// How a command uses the results database: creates it when missing (run, compare, tune), writes
/// to one that exists (resume), or only reads (reports: opened read-only, so that it can lie in
/// a folder they cannot write; store::Store::Options::read_only).
enum class StoreAccess { kCreate, kWrite, kRead };

/// Opens the results database a command names. A database that cannot be opened (missing when
/// it must exist, a directory, not a libra database, corrupt, damaged, newer, locked) is the
/// caller's to fix: kInvalidArgument (exit 2) with the store's message, whatever the kind.
Result<std::unique_ptr<store::Store>> OpenStore(const std::string& db, StoreAccess access);

/// Checks that a file can be created at `path`: the folder it goes into exists and is a folder.
/// kInvalidArgument "<flag> <path>: the folder <dir> does not exist" otherwise. Nothing is
/// created.
Status CheckFolderOf(const std::string& path, const std::string& flag);

/// The runs a report or an export shows: their ids, a title when they are a comparison, and the
/// comparison when they are exactly one.
struct Selection {
  std::vector<int64_t> ids;
  std::string title;
  std::optional<records::ComparisonInfo> comparison;
};

/// Resolves runs named on the command line: ids, comparison names (the latest of that name),
/// system names (its latest run); none means the latest comparison, or the latest run.
/// kNotFound (with the names there are, and the closest) for a name that matches nothing.
Result<Selection> Select(store::Store& store, const std::vector<std::string>& args,
                         const std::string& db);

/// A run and its steps from the store, for the report module (which reads no database).
/// kNotFound for an unknown run.
Result<report::RunView> ReadRunView(store::Store& store, int64_t run_id);

/// The runs with their steps, in order.
Result<std::vector<report::RunView>> ReadViews(store::Store& store,
                                               const std::vector<int64_t>& ids);

/// Creates the folder `dir` (nothing when it exists); its parent must exist.
Status MakeFolder(const std::string& dir, const std::string& flag);

}  // namespace libra::cli
