#include "cli/common.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <filesystem>
#include <ostream>
#include <set>

#include "cli/exit_codes.h"
#include "cluster/cluster_backend.h"
#include "common/files.h"
#include "common/json.h"
#include "common/strings.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "recipe/recipe_parser.h"
#include "recipe/recipe_writer.h"
#include "sched/router.h"
#include "sim/cluster_sim.h"
#include "workload/workload.h"

namespace libra::cli {

Result<recipe::Recipe> LoadRecipe(const RecipeOptions& options, bool plan_systems) {
  std::error_code ec;
  if (std::filesystem::is_directory(options.recipe, ec)) {
    std::vector<std::string> recipes;
    for (const auto& entry : std::filesystem::directory_iterator(options.recipe, ec)) {
      if (entry.path().extension() == ".toml") recipes.push_back(entry.path().filename());
    }
    std::sort(recipes.begin(), recipes.end());
    return Status::InvalidArgument(options.recipe + " is a directory, not a recipe file" +
                                   (recipes.empty()
                                        ? std::string(" (it holds no .toml file)")
                                        : " (recipes in it: " + StrJoin(recipes, ", ") + ")"));
  }
  std::vector<std::string> overrides;
  if (options.seed)
    overrides.push_back(StrFormat("seed=%lld", static_cast<long long>(*options.seed)));
  if (options.steps) {
    overrides.push_back(StrFormat("steps=%lld", static_cast<long long>(*options.steps)));
  }
  overrides.insert(overrides.end(), options.sets.begin(), options.sets.end());
  LIBRA_ASSIGN_OR_RETURN(recipe::ParsedRecipe parsed,
                         recipe::ParseRecipeFile(options.recipe, overrides));
  experiment::ValidateWithRegistries(parsed.recipe, Builtins(), &parsed.diagnostics, plan_systems);
  recipe::SortDiagnostics(&parsed.diagnostics);
  if (!parsed.diagnostics.empty()) return recipe::DiagnosticsToStatus(parsed.diagnostics);
  if (parsed.recipe.backend == recipe::Backend::kCluster) {
    LIBRA_RETURN_IF_ERROR(cluster::DecodeClusterOptions(parsed.recipe).status());
  }
  return std::move(parsed.recipe);
}

Result<std::string> ResolveRecipe(const recipe::Recipe& recipe, const recipe::SystemSpec& system) {
  recipe::OptionLog log;
  LIBRA_RETURN_IF_ERROR(workload::MakeWorkload(recipe.workload, recipe.seed).status());
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<model::CostModel> cost, model::MakeCostModel(recipe));
  LIBRA_RETURN_IF_ERROR(
      Builtins()
          .routers
          ->Create(system.router, system.router_options, experiment::RouterDepsFor(cost.get()))
          .status());
  LIBRA_RETURN_IF_ERROR(
      Builtins().planners->Create(system.planner, system.planner_options).status());
  if (recipe.backend == recipe::Backend::kCluster) {
    LIBRA_RETURN_IF_ERROR(cluster::DecodeClusterOptions(recipe).status());
  }
  return recipe::WriteResolvedRecipe(recipe, system, log);
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
        if (recipe.backend == recipe::Backend::kSim) {
          return std::unique_ptr<backend::Backend>(
              std::make_unique<sim::ClusterSim>(recipe.sim, workload, cost));
        }
        LIBRA_ASSIGN_OR_RETURN(cluster::ClusterOptions options,
                               cluster::DecodeClusterOptions(recipe));
        // A resumed run restarts from the weights in its folder: never another run's.
        LIBRA_RETURN_IF_ERROR(ClaimFolder(context.run_dir, context.run_key));
        LIBRA_ASSIGN_OR_RETURN(
            auto made, cluster::ClusterBackend::Create(recipe, std::move(options), context.run_dir,
                                                       context.start_version));
        return std::unique_ptr<backend::Backend>(std::move(made));
      };
}

const experiment::Components& Builtins() {
  static const experiment::Components parts{&sched::BuiltinRouters(), &planner::BuiltinPlanners(),
                                            MakeBackendFactory()};
  return parts;
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

StepLog::StepLog(const Io& io, bool enabled, bool json, std::ostream& lines, std::string label,
                 bool virtual_time)
    : io_(io),
      enabled_(enabled),
      json_(json),
      redraw_(io.tty && !json),
      lines_(lines),
      label_(std::move(label)),
      virtual_time_(virtual_time) {}

StepLog::~StepLog() { Clear(); }

void StepLog::Update(const experiment::Progress& p) {
  if (!enabled_) return;
  const double rate = p.now_s > 0 ? static_cast<double>(p.trajectories) / p.now_s : 0;
  if (redraw_) {
    Draw(StrFormat("step %d/%d, %.1f s%s, %.3f traj/s", p.steps_done, p.steps_total, p.now_s,
                   virtual_time_ ? " simulated" : "", rate),
         p.steps_done >= p.steps_total);
    return;
  }
  if (p.step == nullptr) return;
  const records::StepRecord& s = *p.step;
  if (json_) {
    JsonValue line = JsonValue::MakeObject({
        {"event", "step"},
        {"run", p.run_id},
        {"label", label_},
        {"step", s.step},
        {"steps", p.steps_total},
        {"end_s", s.end_s},
        {"step_s", s.end_s - s.start_s},
        {"rollout_s", s.rollout_s},
        {"train_s", s.train_s},
        {"sync_s", s.sync_s},
        {"wait_s", s.wait_s},
        {"trajectories", s.trajectories},
        {"generated_tokens", s.generated_tokens},
        {"reward_mean", s.reward_mean},
        {"trajectories_per_s", rate},
        {"simulated", virtual_time_},
    });
    lines_ << ToJson(line) << "\n" << std::flush;
    return;
  }
  lines_ << StrFormat(
                "%s: run %lld step %d/%d done at %.1f s%s: step %.1f s (rollout %.1f, train "
                "%.1f, wait %.1f), reward %.3f, %.3f traj/s so far",
                label_.c_str(), static_cast<long long>(p.run_id), s.step + 1, p.steps_total,
                s.end_s, virtual_time_ ? " simulated" : "", s.end_s - s.start_s, s.rollout_s,
                s.train_s, s.wait_s, s.reward_mean, rate)
         << "\n"
         << std::flush;
}

void StepLog::Draw(const std::string& text, bool force) {
  if (!enabled_ || !redraw_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && !force && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  io_.out << "\r\033[K" << label_ << ": " << text << std::flush;
  drawn_ = true;
}

void StepLog::Clear() {
  if (!drawn_) return;
  io_.out << "\r\033[K" << std::flush;
  drawn_ = false;
}

Result<report::Format> ChosenFormat(const OutputOptions& output) {
  if (output.json) return report::Format::kJson;
  const std::optional<report::Format> format = report::ParseFormat(output.format);
  if (!format) {
    return Status::InvalidArgument("--format must be text, md, csv or json (got '" + output.format +
                                   "')");
  }
  return *format;
}

int Print(const Io& io, const report::Document& doc, const OutputOptions& output) {
  Result<report::Format> format = ChosenFormat(output);
  if (!format.ok()) return Fail(io, format.status());
  if (output.table.empty()) {
    io.out << doc.Render(*format);
    return kExitOk;
  }
  Result<std::string> table = doc.RenderTable(*format, output.table);
  if (!table.ok()) return Fail(io, table.status());
  io.out << *table;
  return kExitOk;
}

std::string DbFlag(const std::string& db) {
  return db == RecipeOptions().db ? std::string() : " --db " + db;
}

Result<std::unique_ptr<store::Store>> OpenStore(const std::string& db, StoreAccess access) {
  std::error_code ec;
  if (std::filesystem::is_directory(db, ec)) {
    return Status::InvalidArgument("--db " + db + " is a directory, not a results database");
  }
  store::Store::Options options;
  options.create_if_missing = access == StoreAccess::kCreate;
  options.read_only = access == StoreAccess::kRead;
  Result<std::unique_ptr<store::Store>> store = store::Store::Open(db, options);
  if (!store.ok()) return Status::InvalidArgument(store.status().message());
  return store;
}

Status CheckFolderOf(const std::string& path, const std::string& flag) {
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (folder.empty()) return Status();
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    return Status::InvalidArgument(
        flag + " " + path + ": the folder " + folder.string() +
        (std::filesystem::exists(folder, ec) ? " is not a folder" : " does not exist"));
  }
  return Status();
}

Status MakeFolder(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status();
  std::filesystem::path path = std::filesystem::path(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "out/"
  LIBRA_RETURN_IF_ERROR(CheckFolderOf(path.string(), flag));
  if (!std::filesystem::create_directory(dir, ec) && ec) {
    return Status::InvalidArgument(flag + " " + dir + ": cannot create the folder (" +
                                   ec.message() + ")");
  }
  return Status();
}

namespace {

std::string ComparisonTitle(const records::ComparisonInfo& c) {
  std::string title = StrFormat("comparison %lld: %s, %zu runs", static_cast<long long>(c.id),
                                c.name.c_str(), c.run_ids.size());
  if (c.seeds > 1) title += StrFormat(" (%d seeds)", c.seeds);
  return title + " (" + c.created_at + ")";
}

}  // namespace

Result<Selection> Select(store::Store& store, const std::vector<std::string>& args,
                         const std::string& db) {
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::RunInfo> runs, store.ListRuns());
  if (runs.empty()) {
    return Status::NotFound(db + " holds no run yet; `libra run RECIPE" + DbFlag(db) +
                            "` records one");
  }
  if (args.empty()) {
    const records::RunInfo& latest = runs.back();
    if (!latest.comparison_id) return Selection{{latest.id}, "", std::nullopt};
    LIBRA_ASSIGN_OR_RETURN(records::ComparisonInfo comparison,
                           store.GetComparison(*latest.comparison_id));
    return Selection{comparison.run_ids, ComparisonTitle(comparison), comparison};
  }
  Selection selection;
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::ComparisonInfo> comparisons, store.ListComparisons());
  for (const std::string& arg : args) {
    if (!arg.empty() &&
        std::all_of(arg.begin(), arg.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      int64_t id = 0;
      if (std::from_chars(arg.data(), arg.data() + arg.size(), id).ec != std::errc()) {
        return Status::NotFound("run " + arg + " is not in " + db);
      }
      selection.ids.push_back(id);
      continue;
    }
    auto comparison = std::find_if(comparisons.rbegin(), comparisons.rend(),
                                   [&](const records::ComparisonInfo& c) { return c.name == arg; });
    if (comparison != comparisons.rend()) {
      selection.ids.insert(selection.ids.end(), comparison->run_ids.begin(),
                           comparison->run_ids.end());
      if (args.size() == 1) {
        selection.title = ComparisonTitle(*comparison);
        selection.comparison = *comparison;
      }
      continue;
    }
    auto run = std::find_if(runs.rbegin(), runs.rend(),
                            [&](const records::RunInfo& r) { return r.system == arg; });
    if (run != runs.rend()) {
      selection.ids.push_back(run->id);
      continue;
    }
    std::set<std::string> names;
    for (const records::ComparisonInfo& c : comparisons) names.insert(c.name);
    for (const records::RunInfo& r : runs) names.insert(r.system);
    std::string what =
        "'" + arg + "' is neither a run id, a comparison nor a system in " + db +
        " (names: " + StrJoin(std::vector<std::string>(names.begin(), names.end()), ", ") + ")";
    const std::string hint =
        ClosestMatch(arg, std::vector<std::string>(names.begin(), names.end()));
    if (!hint.empty()) what += "; did you mean '" + hint + "'?";
    return Status::NotFound(what);
  }
  return selection;
}

Result<report::RunView> ReadRunView(store::Store& store, int64_t run_id) {
  report::RunView view;
  LIBRA_ASSIGN_OR_RETURN(view.run, store.GetRun(run_id));
  LIBRA_ASSIGN_OR_RETURN(view.steps, store.Steps(run_id));
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::DecisionRecord> decisions, store.Decisions(run_id));
  if (!decisions.empty()) view.start_layout = decisions.front().layout;
  return view;
}

Result<std::vector<report::RunView>> ReadViews(store::Store& store,
                                               const std::vector<int64_t>& ids) {
  std::vector<report::RunView> views;
  for (int64_t id : ids) {
    LIBRA_ASSIGN_OR_RETURN(report::RunView view, ReadRunView(store, id));
    views.push_back(std::move(view));
  }
  return views;
}

}  // namespace libra::cli
