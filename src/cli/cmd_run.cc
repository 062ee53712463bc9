// `libra run` and `libra compare`.
#include <algorithm>
#include <limits>
#include <map>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "recipe/presets.h"
#include "recipe/recipe_parser.h"
#include "report/summary.h"
#include "store/store.h"

namespace libra::cli {
namespace {

/// Runs `systems` of the recipe one after another (as one comparison when `compare`), prints the
/// summary and returns the exit code. With `resume_comparison` (and `compare`) it continues that
/// comparison instead of making one: runs it finished are shown as recorded, runs it left
/// unfinished are resumed, and the rest run and join it.
int RunSystems(const RecipeOptions& options, const Io& io, const recipe::Recipe& recipe,
               const std::vector<const recipe::SystemSpec*>& systems, bool compare, int repeat = 1,
               std::optional<double> reward_target = std::nullopt,
               std::optional<int64_t> resume_run = std::nullopt,
               std::optional<int64_t> resume_comparison = std::nullopt) {
  auto store = store::Store::Open(options.db);
  if (!store.ok()) return Fail(io, store.status());
  std::optional<int64_t> comparison_id;
  // The comparison's runs so far, by (system, seed).
  std::map<std::pair<std::string, uint64_t>, store::RunInfo> earlier;
  if (resume_comparison) {
    comparison_id = *resume_comparison;
    auto comparison = (*store)->GetComparison(*comparison_id);
    if (!comparison.ok()) return Fail(io, comparison.status());
    for (const int64_t id : comparison->run_ids) {
      auto run = (*store)->GetRun(id);
      if (!run.ok()) return Fail(io, run.status());
      earlier[{run->system, run->seed}] = *run;
    }
  } else if (compare) {
    store::ComparisonInfo comparison;
    comparison.name = recipe.name;
    comparison.created_at = experiment::NowIso8601();
    for (const recipe::SystemSpec* system : systems) comparison.systems.push_back(system->name);
    comparison.seeds = repeat;
    comparison.reward_target = reward_target;
    comparison.recipe_source = recipe.source;
    comparison.recipe_toml = recipe.effective_toml;
    auto id = (*store)->CreateComparison(comparison);
    if (!id.ok()) return Fail(io, id.status());
    comparison_id = *id;
  }

  InterruptGuard guard;
  const experiment::BackendFactory backend = MakeBackendFactory();
  std::vector<report::RunView> views;
  int exit_code = kExitOk;
  // Seed k of a repeat runs the recipe with seed + k; the systems share each seed's workload.
  std::vector<recipe::Recipe> seeded;
  for (int k = 0; k < repeat; ++k) {
    seeded.push_back(recipe);
    seeded.back().seed = recipe.seed + static_cast<uint64_t>(k);
  }
  // A system does not depend on the seed, so each one runs against every seeded copy.
  std::vector<std::pair<const recipe::Recipe*, const recipe::SystemSpec*>> work;
  for (const recipe::Recipe& r : seeded) {
    for (const recipe::SystemSpec* system : systems) work.emplace_back(&r, system);
  }
  for (const auto& [run_recipe, system] : work) {
    std::optional<int64_t> resume = resume_run;
    if (auto it = earlier.find({system->name, run_recipe->seed}); it != earlier.end()) {
      if (it->second.status == store::kRunOk) {
        auto view = report::ReadRunView(**store, it->second.id);
        if (!view.ok()) return Fail(io, view.status());
        if (!options.quiet) io.out << report::RunHeadline(view->run) << " (recorded before)\n";
        views.push_back(std::move(*view));
        continue;
      }
      resume = it->second.id;
    }
    ProgressLine progress(io, !options.quiet, recipe.name + "/" + system->name,
                          recipe.backend == "sim");
    experiment::RunRequest request;
    request.recipe = run_recipe;
    request.system = system;
    request.comparison_id = comparison_id;
    request.interrupted = &InterruptGuard::Interrupted;
    request.progress = [&](const experiment::Progress& p) { progress.Update(p); };
    request.resume_run = resume;
    request.take_over = options.take_over;
    auto outcome = experiment::RunSystem(**store, request, backend);
    progress.Clear();
    if (!outcome.ok()) return Fail(io, outcome.status());
    // Read back from the store, so that what is printed is what was recorded.
    auto view = report::ReadRunView(**store, outcome->run_id);
    if (!view.ok()) return Fail(io, view.status());
    if (!options.quiet) io.out << report::RunHeadline(view->run) << "\n";
    views.push_back(std::move(*view));
    if (!outcome->status.ok()) {
      exit_code = ExitCodeFor(outcome->status);
      if (outcome->status.code() != StatusCode::kInterrupted) {
        io.err << "libra: run " << outcome->run_id << " (" << system->name
               << ") failed: " << outcome->status.message() << "\n";
      } else {
        io.err << "libra: interrupted; run " << outcome->run_id << " is recorded as interrupted in "
               << options.db << " (continue it: libra run --resume " << outcome->run_id << " --db "
               << options.db;
        if (compare) {
          io.err << "; the whole comparison: libra compare --resume " << *comparison_id << " --db "
                 << options.db;
        }
        io.err << ")\n";
        break;
      }
    }
  }
  if (options.quiet) return exit_code;

  std::optional<size_t> baseline;
  if (compare && views.size() > 1) baseline = 1;  // speedups are over the first baseline
  if (repeat > 1) {
    std::vector<std::string> names;
    for (const recipe::SystemSpec* s : systems) names.push_back(s->name);
    std::optional<std::string> base;
    if (names.size() > 1) base = names[1];
    io.out << "\n"
           << report::RepeatTable(views, names, base).Render(report::Format::kText)
           << StrFormat("(%d seeds from %llu; speedup: mean of the per-seed ratios over %s)\n",
                        repeat, static_cast<unsigned long long>(recipe.seed),
                        base ? base->c_str() : "-");
  } else {
    io.out << "\n"
           << report::SummaryTable(views, baseline, reward_target).Render(report::Format::kText);
  }
  if (compare) {
    io.out << StrFormat("\ncomparison %lld recorded in %s; `libra report` shows it again\n",
                        static_cast<long long>(*comparison_id), options.db.c_str());
  } else {
    io.out << StrFormat("\nrecorded in %s; `libra report %lld` shows the steps\n",
                        options.db.c_str(), static_cast<long long>(views.front().run.id));
  }
  return exit_code;
}

// `libra run --resume RUN`: the run's recipe as recorded, and its system.
int ResumeRun(const RecipeOptions& options, const Io& io) {
  if (!options.recipe.empty() || options.seed || options.steps || !options.sets.empty()) {
    return Fail(io, Status::InvalidArgument(
                        "--resume continues a run with the recipe it recorded: give no RECIPE, "
                        "--seed, --steps or --set"));
  }
  auto store = store::Store::Open(options.db, store::Store::Options{.create_if_missing = false});
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
  if (options.take_over) return Fail(io, Status::InvalidArgument("--take-over needs --resume RUN"));
  if (options.recipe.empty()) {
    return Fail(io, Status::InvalidArgument("run needs a RECIPE (or --resume RUN)"));
  }
  auto recipe = LoadRecipe(options);
  if (!recipe.ok()) return Fail(io, recipe.status());
  return RunSystems(options, io, *recipe, {&recipe->system}, /*compare=*/false);
}

// `libra compare --resume COMPARISON`: the comparison's recorded recipe, systems and seeds.
int ResumeCompare(const CompareOptions& options, const Io& io) {
  const RecipeOptions& common = options.common;
  if (!common.recipe.empty() || common.seed || common.steps || !common.sets.empty() ||
      !options.systems.empty() || options.repeat != 1 || options.reward_target) {
    return Fail(io, Status::InvalidArgument(
                        "--resume continues a comparison as it was recorded: give no RECIPE, "
                        "--seed, --steps, --set, --systems, --repeat or --reward-target"));
  }
  auto store = store::Store::Open(common.db, store::Store::Options{.read_only = true});
  if (!store.ok()) return Fail(io, store.status());
  auto comparison = (*store)->GetComparison(*options.resume);
  if (!comparison.ok()) return Fail(io, comparison.status());
  store->reset();  // RunSystems opens it again
  if (comparison->recipe_toml.empty() || comparison->systems.empty()) {
    return Fail(io, Status::InvalidArgument(StrFormat(
                        "comparison %lld was recorded by a libra that did not record its plan; "
                        "resume its runs one by one with libra run --resume",
                        static_cast<long long>(comparison->id))));
  }
  auto parsed = recipe::ParseRecipe(comparison->recipe_toml, comparison->recipe_source, {});
  if (!parsed.ok()) return Fail(io, parsed.status());
  recipe::Recipe& recipe = parsed->recipe;
  std::vector<std::string> names;
  for (const recipe::SystemSpec* s : experiment::AllSystems(recipe)) names.push_back(s->name);
  for (const std::string& name : comparison->systems) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const recipe::Preset* preset = recipe::FindPreset(name);
    if (preset == nullptr) {
      return Fail(io, Status::InvalidArgument("comparison system '" + name +
                                              "' is neither in its recipe nor a named system"));
    }
    recipe.baselines.push_back(recipe::SystemFromPreset(
        *preset, StrFormat("baselines[%zu]", recipe.baselines.size()), "--systems " + name));
    names.push_back(name);
  }
  experiment::ValidateWithRegistries(recipe, &parsed->diagnostics);
  if (!parsed->diagnostics.empty()) {
    return Fail(io, recipe::DiagnosticsToStatus(parsed->diagnostics));
  }
  std::vector<const recipe::SystemSpec*> chosen;
  for (const std::string& name : comparison->systems) {
    for (const recipe::SystemSpec* s : experiment::AllSystems(recipe)) {
      if (s->name == name) chosen.push_back(s);
    }
  }
  return RunSystems(common, io, recipe, chosen, /*compare=*/true, comparison->seeds,
                    comparison->reward_target, std::nullopt, comparison->id);
}

int RunCompare(const CompareOptions& options, const Io& io) {
  if (options.resume) return ResumeCompare(options, io);
  if (options.common.recipe.empty()) {
    return Fail(io, Status::InvalidArgument("compare needs a RECIPE (or --resume COMPARISON)"));
  }
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
  if (recipe->seed >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - (options.repeat - 1))) {
    return Fail(
        io, Status::InvalidArgument(StrFormat(
                "--repeat %d runs seeds %llu and the next %d, beyond the largest seed "
                "(%lld)",
                options.repeat, static_cast<unsigned long long>(recipe->seed), options.repeat - 1,
                static_cast<long long>(std::numeric_limits<int64_t>::max()))));
  }
  return RunSystems(options.common, io, *recipe, chosen, /*compare=*/true, options.repeat,
                    options.reward_target);
}

}  // namespace libra::cli
