#include "cli/common.h"

#include <csignal>
#include <filesystem>
#include <ostream>

#include "cli/exit_codes.h"
#include "cluster/cluster_backend.h"
#include "common/files.h"
#include "common/strings.h"
#include "recipe/recipe_parser.h"
#include "sim/cluster_sim.h"

namespace libra::cli {

Result<recipe::Recipe> LoadRecipe(const RecipeOptions& options, bool plan_systems) {
  std::vector<std::string> overrides;
  if (options.seed)
    overrides.push_back(StrFormat("seed=%lld", static_cast<long long>(*options.seed)));
  if (options.steps) {
    overrides.push_back(StrFormat("steps=%lld", static_cast<long long>(*options.steps)));
  }
  overrides.insert(overrides.end(), options.sets.begin(), options.sets.end());
  LIBRA_ASSIGN_OR_RETURN(recipe::ParsedRecipe parsed,
                         recipe::ParseRecipeFile(options.recipe, overrides));
  experiment::ValidateWithRegistries(parsed.recipe, &parsed.diagnostics, plan_systems);
  recipe::SortDiagnostics(&parsed.diagnostics);
  if (!parsed.diagnostics.empty()) return recipe::DiagnosticsToStatus(parsed.diagnostics);
  if (parsed.recipe.backend == "cluster") {
    LIBRA_RETURN_IF_ERROR(cluster::DecodeClusterOptions(parsed.recipe).status());
  }
  return std::move(parsed.recipe);
}

int Fail(const Io& io, const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == StatusCode::kInvalidRecipe) {
    // One problem per line, compiler style, then a count.
    const std::vector<std::string> lines = StrSplit(status.message(), '\n');
    for (const std::string& line : lines) io.err << EscapeControl(line) << "\n";
    io.err << "libra: the recipe has " << lines.size() << (lines.size() == 1 ? " error" : " errors")
           << "\n";
    return ExitCodeFor(status);
  }
  io.err << "libra: error: " << EscapeControl(status.message(), /*keep_newlines=*/true) << "\n";
  return ExitCodeFor(status);
}

experiment::BackendFactory MakeBackendFactory() {
  return
      [](const recipe::Recipe& recipe, const workload::Workload& workload,
         const model::CostModel& cost,
         const experiment::BackendContext& context) -> Result<std::unique_ptr<backend::Backend>> {
        if (recipe.backend == "sim") {
          return std::unique_ptr<backend::Backend>(
              std::make_unique<sim::ClusterSim>(recipe.sim, workload, cost));
        }
        if (recipe.backend == "cluster") {
          LIBRA_ASSIGN_OR_RETURN(cluster::ClusterOptions options,
                                 cluster::DecodeClusterOptions(recipe));
          // A resumed run restarts from the weights in its folder: never another run's.
          LIBRA_RETURN_IF_ERROR(ClaimFolder(context.run_dir, context.run_key));
          LIBRA_ASSIGN_OR_RETURN(
              auto made, cluster::ClusterBackend::Create(recipe, std::move(options),
                                                         context.run_dir, context.start_version));
          return std::unique_ptr<backend::Backend>(std::move(made));
        }
        return Status::InvalidRecipe(recipe.Where("backend"),
                                     "backend '" + recipe.backend + "' is not available");
      };
}

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

// The first SIGINT or SIGTERM asks the run to stop at its next step boundary; a second one, while
// libra is still busy (a long plan, a step that takes minutes), ends it at once. The run then
// stays `running` in the database, and `libra run --resume` continues it (its libra is gone).
extern "C" void OnSignal(int signo) {
  if (g_interrupted != 0) {
    std::signal(signo, SIG_DFL);
    std::raise(signo);
    return;
  }
  g_interrupted = 1;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted = 0;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
}

InterruptGuard::~InterruptGuard() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

bool InterruptGuard::Interrupted() { return g_interrupted != 0; }

ProgressLine::ProgressLine(const Io& io, bool enabled, std::string label, bool virtual_time)
    : io_(io), enabled_(enabled && io.tty), label_(std::move(label)), virtual_time_(virtual_time) {}

ProgressLine::~ProgressLine() { Clear(); }

void ProgressLine::Update(const experiment::Progress& p) {
  const double rate = p.now_s > 0 ? static_cast<double>(p.trajectories) / p.now_s : 0;
  Draw(StrFormat("step %d/%d, %.1f s%s, %.3f traj/s", p.steps_done, p.steps_total, p.now_s,
                 virtual_time_ ? " simulated" : "", rate),
       p.steps_done >= p.steps_total);
}

void ProgressLine::Draw(const std::string& text, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && !force && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  io_.out << "\r\033[K" << label_ << ": " << text << std::flush;
  drawn_ = true;
}

void ProgressLine::Clear() {
  if (!drawn_) return;
  io_.out << "\r\033[K" << std::flush;
  drawn_ = false;
}

}  // namespace libra::cli
