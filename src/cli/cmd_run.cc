// `libra run` and `libra compare`.
#include <algorithm>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/json.h"
#include "common/strings.h"
#include "recipe/presets.h"
#include "recipe/recipe_parser.h"
#include "report/summary.h"
#include "store/store.h"

namespace libra::cli {
namespace {

/// Runs `systems` of the recipe one after another (as one comparison when `compare`), prints the
/// summary and returns the exit code.
int RunSystems(const RecipeOptions& options, const Io& io, const recipe::Recipe& recipe,
               const std::vector<const recipe::SystemSpec*>& systems, bool compare, int repeat = 1,
               std::optional<double> reward_target = std::nullopt,
               std::optional<int64_t> resume_run = std::nullopt) {
  auto format = ChosenFormat(options.output);
  if (!format.ok()) return Fail(io, format.status());
  if (options.log_format != "text" && options.log_format != "json") {
    return Fail(io, Status::InvalidArgument("--log-format must be text or json (got '" +
                                            options.log_format + "')"));
  }
  const bool json_log = options.log_format == "json";
  // The step and run lines are a log: with tables for scripts on stdout, they go to stderr.
  std::ostream& log = report::IsDataFormat(*format) ? io.err : io.out;
  // Each system's resolved recipe, before anything is recorded: a recipe that cannot be resolved
  // is an error of the recipe.
  std::vector<std::vector<std::string>> resolved(static_cast<size_t>(repeat));
  std::vector<recipe::Recipe> seeded;
  for (int k = 0; k < repeat; ++k) {
    // Seed k of a repeat runs the recipe with seed + k; the systems share each seed's workload.
    seeded.push_back(recipe);
    seeded.back().seed = recipe.seed + static_cast<uint64_t>(k);
  }
  for (int k = 0; k < repeat; ++k) {
    for (const recipe::SystemSpec* system : systems) {
      auto text = ResolveRecipe(seeded[static_cast<size_t>(k)], *system);
      if (!text.ok()) return Fail(io, text.status());
      resolved[static_cast<size_t>(k)].push_back(std::move(*text));
    }
  }
  auto store = OpenStore(options.db, /*create_if_missing=*/true);
  if (!store.ok()) return Fail(io, store.status());
  std::optional<int64_t> comparison_id;
  if (compare) {
    auto id = (*store)->CreateComparison(recipe.name, experiment::NowIso8601(), repeat);
    if (!id.ok()) return Fail(io, id.status());
    comparison_id = *id;
  }

  InterruptGuard guard;
  const experiment::BackendFactory backend = MakeBackendFactory(options.db);
  std::vector<report::RunView> views;
  int exit_code = kExitOk;
  for (size_t k = 0; k < seeded.size() && exit_code != kExitInterrupted; ++k) {
    for (size_t i = 0; i < systems.size(); ++i) {
      const recipe::SystemSpec* system = systems[i];
      StepLog steps(io, !options.quiet, json_log, log, recipe.name + "/" + system->name,
                    recipe.backend == "sim");
      experiment::RunRequest request;
      request.recipe = &seeded[k];
      request.system = system;
      request.comparison_id = comparison_id;
      request.interrupted = &InterruptGuard::Interrupted;
      request.progress = [&](const experiment::Progress& p) { steps.Update(p); };
      request.resume_run = resume_run;
      request.resolved_recipe = resolved[k][i];
      auto outcome = experiment::RunSystem(**store, request, backend);
      steps.Clear();
      if (!outcome.ok()) return Fail(io, outcome.status());
      // Read back from the store, so that what is printed is what was recorded.
      auto view = report::ReadRunView(**store, outcome->run_id);
      if (!view.ok()) return Fail(io, view.status());
      if (!options.quiet) {
        if (json_log) {
          log << ToJson(JsonValue::MakeObject({{"event", "run"},
                                               {"run", view->run.id},
                                               {"system", view->run.system},
                                               {"seed", static_cast<int64_t>(view->run.seed)},
                                               {"status", view->run.status},
                                               {"error", view->run.error}}))
              << "\n";
        } else {
          log << report::RunHeadline(view->run) << "\n";
        }
        log << std::flush;
      }
      views.push_back(std::move(*view));
      if (outcome->status.ok()) continue;
      exit_code = ExitCodeFor(outcome->status);
      if (outcome->status.code() != StatusCode::kInterrupted) {
        io.err << "libra: run " << outcome->run_id << " (" << system->name
               << ") failed: " << outcome->status.message() << "\n";
        continue;
      }
      io.err << "libra: interrupted; run " << outcome->run_id << " is recorded as interrupted in "
             << options.db << " (continue it: libra run --resume " << outcome->run_id
             << DbFlag(options.db) << ")\n";
      break;
    }
  }
  if (options.quiet) return exit_code;

  report::Document doc;
  doc.AddField("db", options.db);
  std::vector<int64_t> ids;
  for (const report::RunView& v : views) ids.push_back(v.run.id);
  doc.AddField("runs", JsonValue::MakeArray({ids.begin(), ids.end()}));
  if (comparison_id) doc.AddField("comparison", *comparison_id);
  std::optional<size_t> baseline;
  if (compare && views.size() > 1) baseline = 1;  // speedups are over the first baseline
  if (repeat > 1) {
    std::vector<std::string> names;
    for (const recipe::SystemSpec* s : systems) names.push_back(s->name);
    std::optional<std::string> base;
    if (names.size() > 1) base = names[1];
    doc.AddTable("repeat", "", report::RepeatTable(views, names, base));
    doc.AddNote(report::RepeatCaption(repeat, recipe.seed, base));
  }
  doc.AddTable("summary", "", report::SummaryTable(views, baseline, reward_target),
               repeat > 1 ? report::Document::Shown::kDataOnly : report::Document::Shown::kAlways);
  if (report::IsDataFormat(*format)) {
    const int printed = Print(io, doc, options.output);
    return exit_code != kExitOk ? exit_code : printed;
  }
  io.out << "\n";
  if (const int printed = Print(io, doc, options.output); printed != kExitOk) return printed;
  if (compare) {
    io.out << StrFormat("\ncomparison %lld recorded in %s; `libra report%s` shows it again\n",
                        static_cast<long long>(*comparison_id), options.db.c_str(),
                        DbFlag(options.db).c_str());
  } else if (!views.empty()) {
    io.out << StrFormat("\nrecorded in %s; `libra report %lld%s` shows the steps\n",
                        options.db.c_str(), static_cast<long long>(views.front().run.id),
                        DbFlag(options.db).c_str());
  }
  return exit_code;
}

// `libra run --resume RUN`: the run's recipe as recorded, and its system.
int ResumeRun(const RecipeOptions& options, const Io& io) {
  auto store = OpenStore(options.db, /*create_if_missing=*/false);
  if (!store.ok()) return Fail(io, store.status());
  auto run = (*store)->GetRun(*options.resume);
  if (!run.ok()) return Fail(io, run.status());
  store->reset();  // RunSystems opens it again
  auto parsed = recipe::ParseRecipe(run->recipe_toml, run->recipe_source, {});
  if (!parsed.ok()) return Fail(io, parsed.status());
  experiment::ValidateWithRegistries(parsed->recipe, &parsed->diagnostics);
  if (!parsed->diagnostics.empty()) {
    return Fail(io, recipe::DiagnosticsToStatus(parsed->diagnostics));
  }
  const recipe::Recipe& recipe = parsed->recipe;
  for (const recipe::SystemSpec* system : experiment::AllSystems(recipe)) {
    if (system->name != run->system) continue;
    return RunSystems(options, io, recipe, {system}, /*compare=*/false, 1, std::nullopt,
                      *options.resume);
  }
  return Fail(io, Status::InvalidArgument(StrFormat(
                      "run %lld ran system '%s', which its recorded recipe does not define",
                      static_cast<long long>(*options.resume), run->system.c_str())));
}

}  // namespace

int RunRun(const RecipeOptions& options, const Io& io) {
  if (options.resume) return ResumeRun(options, io);
  if (options.recipe.empty()) {
    return Fail(io, Status::InvalidArgument("run needs a RECIPE (or --resume RUN)"));
  }
  auto recipe = LoadRecipe(options);
  if (!recipe.ok()) return Fail(io, recipe.status());
  return RunSystems(options, io, *recipe, {&recipe->system}, /*compare=*/false);
}

int RunCompare(const CompareOptions& options, const Io& io) {
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  // Named systems (recipe/presets.h) the recipe does not list join it as extra baselines.
  std::vector<std::string> names;
  for (const recipe::SystemSpec* s : experiment::AllSystems(*recipe)) names.push_back(s->name);
  for (const std::string& name : options.systems) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const recipe::Preset* preset = recipe::FindPreset(name);
    if (preset == nullptr) {
      std::vector<std::string> presets;
      for (const recipe::Preset& p : recipe::Presets()) presets.push_back(p.name);
      return Fail(io,
                  Status::InvalidArgument("--systems: '" + name + "' is neither a system of " +
                                          options.common.recipe + " (" + StrJoin(names, ", ") +
                                          ") nor a named system (" + StrJoin(presets, ", ") + ")"));
    }
    recipe->baselines.push_back(recipe::SystemFromPreset(
        *preset, StrFormat("baselines[%zu]", recipe->baselines.size()), "--systems " + name));
    names.push_back(name);
  }
  std::vector<recipe::Diagnostic> diagnostics;
  experiment::ValidateWithRegistries(*recipe, &diagnostics);
  if (!diagnostics.empty()) {
    std::vector<std::string> lines;
    for (const recipe::Diagnostic& d : diagnostics) lines.push_back(d.ToString());
    return Fail(io, Status::InvalidArgument(StrJoin(lines, "\n")));
  }
  const std::vector<const recipe::SystemSpec*> all = experiment::AllSystems(*recipe);
  std::vector<const recipe::SystemSpec*> chosen;
  for (const std::string& name : options.systems) {
    for (const recipe::SystemSpec* s : all) {
      if (s->name == name) chosen.push_back(s);
    }
  }
  if (chosen.empty()) chosen = all;
  return RunSystems(options.common, io, *recipe, chosen, /*compare=*/true, options.repeat,
                    options.reward_target);
}

}  // namespace libra::cli
