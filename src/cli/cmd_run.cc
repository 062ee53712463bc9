// `libra run`, `libra compare` and `libra tune`.
#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "experiment/sensitivity.h"
#include "experiment/tuner.h"
#include "recipe/presets.h"
#include "recipe/recipe_parser.h"
#include "report/summary.h"
#include "store/store.h"

namespace libra::cli {
namespace {

/// One system of a comparison as it runs: as the recipe writes it, or a peer at its tuned
/// configuration.
struct Entrant {
  recipe::SystemSpec system;
  /// RunInfo::configuration: "planner", the tuned knob settings, or empty (as written).
  std::string configuration;
  std::optional<int64_t> tuning_id;
};

/// How a comparison runs: its seeds and, for a sensitivity study, its scenarios.
struct Plan {
  bool compare = false;
  int repeat = 1;
  std::optional<double> reward_target;
  std::optional<int64_t> resume_run;
  /// Continue this comparison instead of making one (with `compare`): runs it finished are shown
  /// as recorded, runs it left unfinished are resumed, and the rest run and join it.
  std::optional<int64_t> resume_comparison;
  /// Recorded with the comparison: whether its peers run at their tuned configurations.
  bool tuned = false;
  /// Empty: the recipe as written only.
  std::vector<experiment::Perturbation> scenarios;
};

Entrant AsWritten(const recipe::SystemSpec& system) {
  return Entrant{system, experiment::IsLibraSystem(system) ? "planner" : "", std::nullopt};
}

/// Runs `entrants` (as one comparison when `plan.compare`), prints the summary and returns the
/// exit code.
int RunSystems(const RecipeOptions& options, const Io& io, store::Store& store,
               const recipe::Recipe& recipe, const std::vector<Entrant>& entrants,
               const Plan& plan) {
  std::optional<int64_t> comparison_id;
  // The comparison's runs so far, by (system, seed, scenario).
  std::map<std::tuple<std::string, uint64_t, std::string>, store::RunInfo> earlier;
  if (plan.resume_comparison) {
    comparison_id = *plan.resume_comparison;
    auto comparison = store.GetComparison(*comparison_id);
    if (!comparison.ok()) return Fail(io, comparison.status());
    for (const int64_t id : comparison->run_ids) {
      auto run = store.GetRun(id);
      if (!run.ok()) return Fail(io, run.status());
      earlier[{run->system, run->seed, run->scenario}] = *run;
    }
  } else if (plan.compare) {
    store::ComparisonInfo comparison;
    comparison.name = recipe.name;
    comparison.created_at = experiment::NowIso8601();
    for (const Entrant& e : entrants) comparison.systems.push_back(e.system.name);
    comparison.seeds = plan.repeat;
    comparison.reward_target = plan.reward_target;
    comparison.recipe_source = recipe.source;
    comparison.recipe_toml = recipe.effective_toml;
    comparison.tuned = plan.tuned;
    comparison.sensitivity = !plan.scenarios.empty();
    auto id = store.CreateComparison(comparison);
    if (!id.ok()) return Fail(io, id.status());
    comparison_id = *id;
  }

  InterruptGuard guard;
  const experiment::BackendFactory backend = MakeBackendFactory();
  std::vector<report::RunView> views;
  int exit_code = kExitOk;
  // Seed k of a repeat runs the recipe with seed + k; the systems share each seed's workload. A
  // sensitivity scenario runs a perturbed world of each seeded recipe, planned with the recipe.
  std::vector<experiment::Perturbation> scenarios = plan.scenarios;
  if (scenarios.empty()) scenarios.push_back({});
  struct World {
    recipe::Recipe belief;
    recipe::Recipe world;
    std::string scenario;
  };
  std::vector<World> worlds;
  for (const experiment::Perturbation& p : scenarios) {
    for (int k = 0; k < plan.repeat; ++k) {
      World w;
      w.belief = recipe;
      w.belief.seed = recipe.seed + static_cast<uint64_t>(k);
      auto world = experiment::ApplyPerturbation(w.belief, p);
      if (!world.ok()) return Fail(io, world.status());
      w.world = std::move(*world);
      w.scenario = p.name;
      worlds.push_back(std::move(w));
    }
  }
  const size_t total = worlds.size() * entrants.size();
  size_t done = 0;
  for (const World& w : worlds) {
    for (const Entrant& entrant : entrants) {
      std::string label = recipe.name + "/" + entrant.system.name;
      if (!w.scenario.empty()) label += " [" + w.scenario + "]";
      if (total > 1) label = StrFormat("(%zu/%zu) ", ++done, total) + label;
      std::optional<int64_t> resume = plan.resume_run;
      if (auto it = earlier.find({entrant.system.name, w.world.seed, w.scenario});
          it != earlier.end()) {
        if (it->second.status == store::kRunOk) {
          auto view = report::ReadRunView(store, it->second.id);
          if (!view.ok()) return Fail(io, view.status());
          if (!options.quiet) io.out << report::RunHeadline(view->run) << " (recorded before)\n";
          views.push_back(std::move(*view));
          continue;
        }
        resume = it->second.id;
      }
      ProgressLine progress(io, !options.quiet, label, recipe.backend == "sim");
      experiment::RunRequest request;
      request.recipe = &w.world;
      request.system = &entrant.system;
      request.comparison_id = comparison_id;
      request.interrupted = &InterruptGuard::Interrupted;
      request.progress = [&](const experiment::Progress& p) { progress.Update(p); };
      request.resume_run = resume;
      request.take_over = options.take_over;
      request.configuration = entrant.configuration;
      request.tuning_id = entrant.tuning_id;
      request.scenario = w.scenario;
      if (!w.scenario.empty()) request.planning_recipe = &w.belief;
      auto outcome = experiment::RunSystem(store, request, backend);
      progress.Clear();
      if (!outcome.ok()) return Fail(io, outcome.status());
      // Read back from the store, so that what is printed is what was recorded.
      auto view = report::ReadRunView(store, outcome->run_id);
      if (!view.ok()) return Fail(io, view.status());
      if (!options.quiet) io.out << report::RunHeadline(view->run) << "\n";
      views.push_back(std::move(*view));
      if (!outcome->status.ok()) {
        exit_code = ExitCodeFor(outcome->status);
        if (outcome->status.code() != StatusCode::kInterrupted) {
          io.err << "libra: run " << outcome->run_id << " (" << entrant.system.name
                 << ") failed: " << outcome->status.message() << "\n";
        } else {
          io.err << "libra: interrupted; run " << outcome->run_id
                 << " is recorded as interrupted in " << options.db
                 << " (continue it: libra run --resume " << outcome->run_id << " --db "
                 << options.db;
          if (plan.compare) {
            io.err << "; the whole comparison: libra compare --resume " << *comparison_id
                   << " --db " << options.db;
          }
          io.err << ")\n";
          return exit_code;
        }
      }
    }
  }
  if (options.quiet) return exit_code;

  std::vector<std::string> names;
  for (const Entrant& e : entrants) names.push_back(e.system.name);
  const report::Convergence convergence{plan.reward_target, recipe.eval.target_fraction};
  if (!plan.scenarios.empty()) {
    io.out << "\nSensitivity: throughput (traj/s) under each scenario, mean over "
           << plan.repeat << (plan.repeat == 1 ? " seed" : " seeds") << "\n"
           << report::SensitivityMatrix(views, names).Render(report::Format::kText) << "\n"
           << report::SensitivityTable(views, names).Render(report::Format::kText)
           << "(first: the (scenario, seed) trials in which the system had the highest "
              "throughput; docs/results.md, \"Robustness\")\n";
  } else if (plan.repeat > 1) {
    std::optional<std::string> base;
    if (names.size() > 1) base = names[1];
    io.out << "\n"
           << report::RepeatTable(views, names, base, convergence).Render(report::Format::kText)
           << StrFormat("(%d seeds from %llu; speedup: mean of the per-seed ratios over %s)\n",
                        plan.repeat, static_cast<unsigned long long>(recipe.seed),
                        base ? base->c_str() : "-");
  } else {
    std::optional<size_t> baseline;
    if (plan.compare && views.size() > 1) baseline = 1;  // speedups are over the first baseline
    io.out << "\n"
           << report::SummaryTable(views, baseline, convergence).Render(report::Format::kText);
  }
  if (plan.compare) {
    io.out << StrFormat("\ncomparison %lld recorded in %s; `libra report` shows it again\n",
                        static_cast<long long>(*comparison_id), options.db.c_str());
  } else {
    io.out << StrFormat("\nrecorded in %s; `libra report %lld` shows the steps\n",
                        options.db.c_str(), static_cast<long long>(views.front().run.id));
  }
  return exit_code;
}

Result<std::unique_ptr<store::Store>> OpenStore(const RecipeOptions& options) {
  return store::Store::Open(options.db);
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
  auto parsed = recipe::ParseRecipe(run->recipe_toml, run->recipe_source, {});
  if (!parsed.ok()) return Fail(io, parsed.status());
  experiment::ValidateWithRegistries(parsed->recipe, &parsed->diagnostics);
  if (!parsed->diagnostics.empty()) {
    return Fail(io, recipe::DiagnosticsToStatus(parsed->diagnostics));
  }
  const recipe::Recipe& recipe = parsed->recipe;
  for (const recipe::SystemSpec* system : experiment::AllSystems(recipe)) {
    if (system->name != run->system) continue;
    if (run->tuning_id) {
      return Fail(io, Status::InvalidArgument(StrFormat(
                          "run %lld ran '%s' at a tuned configuration (%s); resuming a tuned run "
                          "is not supported: rerun the comparison",
                          static_cast<long long>(*options.resume), run->system.c_str(),
                          run->configuration.c_str())));
    }
    Plan plan;
    plan.resume_run = *options.resume;
    return RunSystems(options, io, **store, recipe, {AsWritten(*system)}, plan);
  }
  return Fail(io, Status::InvalidArgument(StrFormat(
                      "run %lld ran system '%s', which its recorded recipe does not define",
                      static_cast<long long>(*options.resume), run->system.c_str())));
}

/// Adds the named systems (recipe/presets.h) that the recipe does not list as extra baselines,
/// and validates the result.
Status AddNamedSystems(const std::vector<std::string>& wanted, const std::string& flag,
                       recipe::Recipe* recipe) {
  std::vector<std::string> names;
  for (const recipe::SystemSpec* s : experiment::AllSystems(*recipe)) names.push_back(s->name);
  for (const std::string& name : wanted) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const recipe::Preset* preset = recipe::FindPreset(name);
    if (preset == nullptr) {
      std::vector<std::string> presets;
      for (const recipe::Preset& p : recipe::Presets()) presets.push_back(p.name);
      std::string what = flag + ": '" + name + "' is neither a system of " + recipe->source +
                         " (" + StrJoin(names, ", ") + ") nor a named system (" +
                         StrJoin(presets, ", ") + ")";
      std::vector<std::string> all = names;
      all.insert(all.end(), presets.begin(), presets.end());
      const std::string hint = ClosestMatch(name, all);
      if (!hint.empty()) what += "; did you mean '" + hint + "'?";
      return Status::InvalidArgument(what);
    }
    recipe->baselines.push_back(recipe::SystemFromPreset(
        *preset, StrFormat("baselines[%zu]", recipe->baselines.size()), flag + " " + name));
    names.push_back(name);
  }
  std::vector<recipe::Diagnostic> diagnostics;
  experiment::ValidateWithRegistries(*recipe, &diagnostics);
  return recipe::DiagnosticsToStatus(diagnostics);
}

/// The systems named in `wanted`, in that order; every system of the recipe when empty.
std::vector<const recipe::SystemSpec*> Chosen(const recipe::Recipe& recipe,
                                              const std::vector<std::string>& wanted) {
  const std::vector<const recipe::SystemSpec*> all = experiment::AllSystems(recipe);
  std::vector<const recipe::SystemSpec*> chosen;
  for (const std::string& name : wanted) {
    for (const recipe::SystemSpec* s : all) {
      if (s->name == name) chosen.push_back(s);
    }
  }
  return chosen.empty() ? all : chosen;
}

/// Draws a tuning's progress on the progress line.
class TuneProgressLine {
 public:
  TuneProgressLine(const Io& io, bool enabled, std::string label)
      : line_(io, enabled, std::move(label), true) {}
  void Update(const experiment::TuneProgress& p) {
    if (p.trial != nullptr && p.trial->score && (!best_ || *p.trial->score > *best_)) {
      best_ = p.trial->score;
    }
    line_.Draw(StrFormat("run %d/%d (%s), best run so far %.3f traj/s", p.runs, p.budget,
                         p.trial != nullptr ? p.trial->config.ToString().c_str() : "",
                         best_.value_or(0)),
               p.runs >= p.budget);
  }
  void Clear() { line_.Clear(); }

 private:
  ProgressLine line_;
  std::optional<double> best_;
};

/// Tunes `system` (or finds its recorded tuning, when `reuse`) and prints a line about it.
Result<experiment::TuneOutcome> TuneOrReuse(const RecipeOptions& options, const Io& io,
                                            store::Store& store, const recipe::Recipe& recipe,
                                            const recipe::SystemSpec& system, bool reuse) {
  if (reuse) {
    LIBRA_ASSIGN_OR_RETURN(std::optional<experiment::TuneOutcome> found,
                           experiment::FindTuning(store, recipe, system));
    if (found) return *std::move(found);
  }
  InterruptGuard guard;
  TuneProgressLine line(io, !options.quiet, "tune " + recipe.name + "/" + system.name);
  experiment::TuneRequest request;
  request.recipe = &recipe;
  request.system = &system;
  request.interrupted = &InterruptGuard::Interrupted;
  request.progress = [&](const experiment::TuneProgress& p) { line.Update(p); };
  Result<experiment::TuneOutcome> outcome =
      experiment::TuneSystem(store, request, MakeBackendFactory());
  line.Clear();
  return outcome;
}

/// The table of a tuning: every configuration run, best mean first.
report::Table TrialTable(const store::TuningRecord& tuning) {
  struct Row {
    std::string configuration;
    std::vector<double> scores;
    int failed = 0;
  };
  std::vector<Row> rows;
  for (const store::TuningTrialRecord& t : tuning.trials) {
    if (t.status == "infeasible") continue;
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const Row& r) { return r.configuration == t.configuration; });
    if (it == rows.end()) it = rows.insert(rows.end(), Row{t.configuration, {}, 0});
    it->scores.push_back(t.score.value_or(0));
    it->failed += t.status == "failed";
  }
  const auto mean = [](const Row& r) {
    double sum = 0;
    for (double s : r.scores) sum += s;
    return sum / static_cast<double>(r.scores.size());
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (a.scores.size() != b.scores.size()) return a.scores.size() > b.scores.size();
    return mean(a) > mean(b);
  });
  report::Table table({{"configuration", "configuration", false},
                       {"runs", "runs", true},
                       {"trajectories_per_s", "traj/s mean", true},
                       {"min", "min", true},
                       {"max", "max", true},
                       {"failed", "failed", true},
                       {"winner", "winner", false}});
  for (const Row& r : rows) {
    std::string text = r.configuration;
    auto json = ParseJson(r.configuration);
    if (json.ok()) {
      auto config = experiment::Configuration::FromJson(*json);
      if (config.ok()) text = config->ToString();
    }
    table.AddRow({report::Cell::Text(text), report::Cell::Integer(static_cast<long long>(r.scores.size())),
                  report::Cell::Number(mean(r), 3),
                  report::Cell::Number(*std::min_element(r.scores.begin(), r.scores.end()), 3),
                  report::Cell::Number(*std::max_element(r.scores.begin(), r.scores.end()), 3),
                  report::Cell::Integer(r.failed),
                  report::Cell::Text(r.configuration == tuning.winner ? "*" : "")});
  }
  return table;
}

/// The entrants of a comparison: peers at their tuned configuration when `tuned`.
Result<std::vector<Entrant>> Entrants(const RecipeOptions& options, const Io& io,
                                      store::Store& store, const recipe::Recipe& recipe,
                                      const std::vector<const recipe::SystemSpec*>& systems,
                                      bool tuned) {
  std::vector<Entrant> entrants;
  bool any = false;
  for (const recipe::SystemSpec* system : systems) {
    LIBRA_ASSIGN_OR_RETURN(const experiment::KnobSpace space,
                           experiment::KnobsFor(recipe, *system));
    if (!tuned || space.empty()) {
      entrants.push_back(AsWritten(*system));
      continue;
    }
    any = true;
    LIBRA_ASSIGN_OR_RETURN(experiment::TuneOutcome tuning,
                           TuneOrReuse(options, io, store, recipe, *system, /*reuse=*/true));
    if (!options.quiet) {
      io.out << StrFormat("%s: %s tuning %lld: %s (%.3f traj/s over %d tuning seeds)\n",
                          system->name.c_str(), tuning.reused ? "reusing" : "recorded",
                          static_cast<long long>(tuning.record.id),
                          tuning.winner.ToString().c_str(), tuning.record.score,
                          tuning.record.winner_runs);
    }
    entrants.push_back(Entrant{experiment::ApplyConfiguration(*system, tuning.winner),
                               tuning.winner.ToString(), tuning.record.id});
  }
  if (tuned && !any) {
    std::vector<std::string> names;
    for (const recipe::SystemSpec* s : systems) names.push_back(s->name);
    return Status::InvalidArgument(StrFormat(
        "--tuned: none of the systems compared (%s) has a knob to tune: Libra's systems are "
        "never tuned, and the others set tune.enabled = false or expose none (docs/recipes.md, "
        "\"Tuning\")",
        StrJoin(names, ", ").c_str()));
  }
  return entrants;
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
  auto store = OpenStore(options);
  if (!store.ok()) return Fail(io, store.status());
  return RunSystems(options, io, **store, *recipe, {AsWritten(recipe->system)}, Plan{});
}

// `libra compare --resume COMPARISON`: the comparison's recorded recipe, systems, seeds, tuning
// and scenarios.
int ResumeCompare(const CompareOptions& options, const Io& io) {
  const RecipeOptions& common = options.common;
  if (!common.recipe.empty() || common.seed || common.steps || !common.sets.empty() ||
      !options.systems.empty() || options.repeat != 1 || options.reward_target ||
      options.tuned || options.as_written || options.sensitivity) {
    return Fail(io, Status::InvalidArgument(
                        "--resume continues a comparison as it was recorded: give no RECIPE, "
                        "--seed, --steps, --set, --systems, --repeat, --reward-target, --tuned, "
                        "--as-written or --sensitivity"));
  }
  auto store = store::Store::Open(common.db, store::Store::Options{.create_if_missing = false});
  if (!store.ok()) return Fail(io, store.status());
  auto comparison = (*store)->GetComparison(*options.resume);
  if (!comparison.ok()) return Fail(io, comparison.status());
  if (comparison->recipe_toml.empty() || comparison->systems.empty()) {
    return Fail(io, Status::InvalidArgument(StrFormat(
                        "comparison %lld was recorded by a libra that did not record its plan; "
                        "resume its runs one by one with libra run --resume",
                        static_cast<long long>(comparison->id))));
  }
  auto parsed = recipe::ParseRecipe(comparison->recipe_toml, comparison->recipe_source, {});
  if (!parsed.ok()) return Fail(io, parsed.status());
  recipe::Recipe& recipe = parsed->recipe;
  if (Status added = AddNamedSystems(comparison->systems, "--systems", &recipe); !added.ok()) {
    return Fail(io, added);
  }
  // The recorded tunings are found again (a libra of another version tunes afresh).
  auto entrants = Entrants(common, io, **store, recipe, Chosen(recipe, comparison->systems),
                           comparison->tuned);
  if (!entrants.ok()) return Fail(io, entrants.status());
  Plan plan;
  plan.compare = true;
  plan.repeat = comparison->seeds;
  plan.reward_target = comparison->reward_target;
  plan.resume_comparison = comparison->id;
  plan.tuned = comparison->tuned;
  if (comparison->sensitivity) plan.scenarios = experiment::StandardPerturbations();
  return RunSystems(common, io, **store, recipe, *entrants, plan);
}

int RunCompare(const CompareOptions& options, const Io& io) {
  if (options.tuned && options.as_written) {
    return Fail(io, Status::InvalidArgument("--tuned and --as-written contradict each other"));
  }
  if (options.resume) return ResumeCompare(options, io);
  if (options.common.recipe.empty()) {
    return Fail(io, Status::InvalidArgument("compare needs a RECIPE (or --resume COMPARISON)"));
  }
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  if (Status added = AddNamedSystems(options.systems, "--systems", &*recipe); !added.ok()) {
    return Fail(io, added);
  }
  if (recipe->seed >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - (options.repeat - 1))) {
    return Fail(
        io, Status::InvalidArgument(StrFormat(
                "--repeat %d runs seeds %llu and the next %d, beyond the largest seed (%lld)",
                options.repeat, static_cast<unsigned long long>(recipe->seed), options.repeat - 1,
                static_cast<long long>(std::numeric_limits<int64_t>::max()))));
  }
  const bool tuned = options.tuned || (recipe->tuning.compare_tuned && !options.as_written);
  auto store = OpenStore(options.common);
  if (!store.ok()) return Fail(io, store.status());
  auto entrants =
      Entrants(options.common, io, **store, *recipe, Chosen(*recipe, options.systems), tuned);
  if (!entrants.ok()) return Fail(io, entrants.status());
  Plan plan;
  plan.compare = true;
  plan.repeat = options.repeat;
  plan.reward_target = options.reward_target;
  plan.tuned = tuned;
  if (options.sensitivity) plan.scenarios = experiment::StandardPerturbations();
  return RunSystems(options.common, io, **store, *recipe, *entrants, plan);
}

int RunTune(const TuneOptions& options, const Io& io) {
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  if (options.budget) recipe->tuning.budget_runs = *options.budget;
  if (Status added = AddNamedSystems(options.systems, "--system", &*recipe); !added.ok()) {
    return Fail(io, added);
  }
  std::vector<const recipe::SystemSpec*> systems;
  for (const recipe::SystemSpec* s : Chosen(*recipe, options.systems)) {
    auto space = experiment::KnobsFor(*recipe, *s);
    if (!space.ok()) return Fail(io, space.status());
    // Asked for by name: tuned (or refused with the reason); by default, those with knobs.
    if (!options.systems.empty() || !space->empty()) systems.push_back(s);
  }
  if (systems.empty()) {
    return Fail(io, Status::InvalidArgument(
                        options.common.recipe +
                        ": no system has a knob to tune (Libra's systems are never tuned; "
                        "--system NAME adds a named peer such as areal-async)"));
  }
  auto store = OpenStore(options.common);
  if (!store.ok()) return Fail(io, store.status());
  for (const recipe::SystemSpec* system : systems) {
    auto tuning = TuneOrReuse(options.common, io, **store, *recipe, *system, /*reuse=*/false);
    if (!tuning.ok()) return Fail(io, tuning.status());
    if (options.common.quiet) continue;
    const store::TuningRecord& t = tuning->record;
    int infeasible = 0;
    for (const store::TuningTrialRecord& trial : t.trials) infeasible += trial.status == "infeasible";
    io.out << StrFormat(
                  "%s: %d simulated runs of %d steps on tuning seeds %llu..%llu; %d "
                  "configurations could not be planned\n",
                  system->name.c_str(), t.budget_runs, t.steps,
                  static_cast<unsigned long long>(t.seeds.front()),
                  static_cast<unsigned long long>(t.seeds.back()), infeasible)
           << TrialTable(t).Render(report::Format::kText)
           << StrFormat("winner: %s, %.3f traj/s (mean of %d seeds); recorded as tuning %lld\n\n",
                        tuning->winner.ToString().c_str(), t.score, t.winner_runs,
                        static_cast<long long>(t.id));
  }
  if (!options.common.quiet) {
    io.out << StrFormat("`libra compare %s --tuned --db %s` runs the peers at these "
                        "configurations\n",
                        options.common.recipe.c_str(), options.common.db.c_str());
  }
  return kExitOk;
}

}  // namespace libra::cli
