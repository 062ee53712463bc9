// `libra run`, `libra compare` and `libra tune`.
#include <algorithm>
#include <limits>
#include <map>
#include <ostream>
#include <tuple>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/json.h"
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

/// Where the lines that log a command's progress go: stderr when stdout carries data (csv, json).
std::ostream& LogStream(const RecipeOptions& options, const Io& io) {
  const Result<report::Format> format = ChosenFormat(options.output);
  return format.ok() && report::IsDataFormat(*format) ? io.err : io.out;
}

/// --format and --log-format name formats there are.
Status CheckFormats(const RecipeOptions& options) {
  LIBRA_RETURN_IF_ERROR(ChosenFormat(options.output).status());
  if (options.log_format != "text" && options.log_format != "json") {
    return Status::InvalidArgument("--log-format must be text or json (got '" + options.log_format +
                                   "')");
  }
  return Status();
}

Entrant AsWritten(const recipe::SystemSpec& system) {
  return Entrant{system, experiment::IsLibraSystem(system) ? "planner" : "", std::nullopt};
}

/// One seeded recipe of a run (a sensitivity scenario's perturbed world and the recipe it is
/// planned with).
struct World {
  recipe::Recipe belief;
  recipe::Recipe world;
  std::string scenario;
  /// The resolved recipe of each entrant in this world (runs.resolved_recipe).
  std::vector<std::string> resolved;
};

/// Seed k of a repeat runs the recipe with seed + k; the systems share each seed's workload. A
/// sensitivity scenario runs a perturbed world of each seeded recipe, planned with the recipe.
Result<std::vector<World>> MakeWorlds(const recipe::Recipe& recipe,
                                      const std::vector<Entrant>& entrants, const Plan& plan) {
  std::vector<experiment::Perturbation> scenarios = plan.scenarios;
  if (scenarios.empty()) scenarios.push_back({});
  std::vector<World> worlds;
  for (const experiment::Perturbation& p : scenarios) {
    for (int k = 0; k < plan.repeat; ++k) {
      World w;
      w.belief = recipe;
      w.belief.seed = recipe.seed + static_cast<uint64_t>(k);
      LIBRA_ASSIGN_OR_RETURN(w.world, experiment::ApplyPerturbation(w.belief, p));
      w.scenario = p.name;
      // Resolved before anything is recorded: a recipe that cannot be resolved is an error of
      // the recipe.
      for (const Entrant& entrant : entrants) {
        LIBRA_ASSIGN_OR_RETURN(std::string text, ResolveRecipe(w.world, entrant.system));
        w.resolved.push_back(std::move(text));
      }
      worlds.push_back(std::move(w));
    }
  }
  return worlds;
}

/// The runs of a comparison so far, by (system, seed, scenario).
using EarlierRuns = std::map<std::tuple<std::string, uint64_t, std::string>, records::RunInfo>;

/// The comparison the runs join: the one being continued (its runs so far in `earlier`), a new
/// one when `plan.compare`, else none.
Result<std::optional<int64_t>> OpenComparison(store::Store& store, const recipe::Recipe& recipe,
                                              const std::vector<Entrant>& entrants,
                                              const Plan& plan, EarlierRuns* earlier) {
  if (plan.resume_comparison) {
    LIBRA_ASSIGN_OR_RETURN(records::ComparisonInfo comparison,
                           store.GetComparison(*plan.resume_comparison));
    for (const int64_t id : comparison.run_ids) {
      LIBRA_ASSIGN_OR_RETURN(records::RunInfo run, store.GetRun(id));
      (*earlier)[{run.system, run.seed, run.scenario}] = run;
    }
    return plan.resume_comparison;
  }
  if (!plan.compare) return std::optional<int64_t>();
  records::ComparisonInfo comparison;
  comparison.name = recipe.name;
  comparison.created_at = experiment::NowIso8601();
  for (const Entrant& e : entrants) comparison.systems.push_back(e.system.name);
  comparison.seeds = plan.repeat;
  comparison.reward_target = plan.reward_target;
  comparison.recipe_source = recipe.source;
  comparison.recipe_toml = recipe.effective_toml;
  comparison.tuned = plan.tuned;
  comparison.sensitivity = !plan.scenarios.empty();
  LIBRA_ASSIGN_OR_RETURN(const int64_t id, store.CreateComparison(comparison));
  return std::optional<int64_t>(id);
}

/// The line after each run: its headline, or a JSON object with --log-format json.
void LogRun(std::ostream& log, bool json_log, const records::RunInfo& run, bool recorded_before) {
  if (json_log) {
    log << ToJson(JsonValue::MakeObject({{"event", "run"},
                                         {"run", run.id},
                                         {"system", run.system},
                                         {"seed", static_cast<int64_t>(run.seed)},
                                         {"scenario", run.scenario},
                                         {"status", run.status},
                                         {"error", run.error},
                                         {"recorded_before", recorded_before}}))
        << "\n";
  } else {
    log << report::RunHeadline(run) << (recorded_before ? " (recorded before)" : "") << "\n";
  }
  log << std::flush;
}

/// The tables after the runs: every run, and over seeds or scenarios when there are several.
report::Document SummaryDocument(const RecipeOptions& options, const recipe::Recipe& recipe,
                                 const std::vector<Entrant>& entrants, const Plan& plan,
                                 const std::vector<report::RunView>& views,
                                 std::optional<int64_t> comparison_id) {
  report::Document doc;
  doc.AddField("db", options.db);
  std::vector<int64_t> ids;
  for (const report::RunView& v : views) ids.push_back(v.run.id);
  doc.AddField("runs", JsonValue::MakeArray({ids.begin(), ids.end()}));
  if (comparison_id) doc.AddField("comparison", *comparison_id);
  std::vector<std::string> names;
  for (const Entrant& e : entrants) names.push_back(e.system.name);
  const report::Convergence convergence{plan.reward_target, recipe.eval.target_fraction};
  std::optional<size_t> baseline;
  if (plan.compare && views.size() > 1) baseline = 1;  // speedups are over the first baseline
  const bool over_seeds = !plan.scenarios.empty() || plan.repeat > 1;
  if (!plan.scenarios.empty()) {
    doc.AddTable("sensitivity_matrix",
                 StrFormat("Sensitivity: throughput (traj/s) under each scenario, mean over %d %s",
                           plan.repeat, plan.repeat == 1 ? "seed" : "seeds"),
                 report::SensitivityMatrix(views, names));
    doc.AddTable("sensitivity", "", report::SensitivityTable(views, names));
    doc.AddNote(
        "(first: the (scenario, seed) trials in which the system had the highest throughput; "
        "docs/results.md, \"Robustness\")");
  } else if (plan.repeat > 1) {
    std::optional<std::string> base;
    if (names.size() > 1) base = names[1];
    doc.AddTable("repeat", "", report::RepeatTable(views, names, base, convergence));
    doc.AddNote(report::RepeatCaption(plan.repeat, recipe.seed, base));
  }
  // Over seeds or scenarios, the table of every run is for scripts; the text shows the tables
  // over them.
  doc.AddTable("summary", "", report::SummaryTable(views, baseline, convergence),
               over_seeds ? report::Document::Shown::kDataOnly : report::Document::Shown::kAlways);
  return doc;
}

/// Prints the summary of `views` and where they are recorded; the exit code.
int PrintSummary(const RecipeOptions& options, report::Format format, const Io& io,
                 const recipe::Recipe& recipe, const std::vector<Entrant>& entrants,
                 const Plan& plan, const std::vector<report::RunView>& views,
                 std::optional<int64_t> comparison_id, int exit_code) {
  const report::Document doc =
      SummaryDocument(options, recipe, entrants, plan, views, comparison_id);
  if (report::IsDataFormat(format)) {
    const int printed = Print(io, doc, options.output);
    return exit_code != kExitOk ? exit_code : printed;
  }
  io.out << "\n";
  if (const int printed = Print(io, doc, options.output); printed != kExitOk) return printed;
  if (plan.compare) {
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

/// Says that run `run_id` failed or was interrupted, and how to continue it.
void ReportUnfinished(const RecipeOptions& options, const Io& io, const Plan& plan, int64_t run_id,
                      const std::string& system, const Status& status,
                      std::optional<int64_t> comparison_id) {
  if (status.code() != StatusCode::kInterrupted) {
    io.err << "libra: run " << run_id << " (" << system << ") failed: " << status.message() << "\n";
    return;
  }
  io.err << "libra: interrupted; run " << run_id << " is recorded as interrupted in " << options.db
         << " (continue it: libra run --resume " << run_id << DbFlag(options.db);
  if (plan.compare) {
    io.err << "; the whole comparison: libra compare --resume " << *comparison_id
           << DbFlag(options.db);
  }
  io.err << ")\n";
}

/// Runs `entrants` (as one comparison when `plan.compare`), prints the summary and returns the
/// exit code.
int RunSystems(const RecipeOptions& options, const Io& io, store::Store& store,
               const recipe::Recipe& recipe, const std::vector<Entrant>& entrants,
               const Plan& plan) {
  if (Status s = CheckFormats(options); !s.ok()) return Fail(io, s);
  const report::Format format = *ChosenFormat(options.output);
  const bool json_log = options.log_format == "json";
  // The step and run lines are a log: with tables for scripts on stdout, they go to stderr.
  std::ostream& log = report::IsDataFormat(format) ? io.err : io.out;
  auto worlds = MakeWorlds(recipe, entrants, plan);
  if (!worlds.ok()) return Fail(io, worlds.status());
  EarlierRuns earlier;
  auto comparison_id = OpenComparison(store, recipe, entrants, plan, &earlier);
  if (!comparison_id.ok()) return Fail(io, comparison_id.status());

  InterruptGuard guard;
  std::vector<report::RunView> views;
  int exit_code = kExitOk;
  const size_t total = worlds->size() * entrants.size();
  size_t done = 0;
  for (const World& w : *worlds) {
    for (size_t e = 0; e < entrants.size(); ++e) {
      const Entrant& entrant = entrants[e];
      std::string label = recipe.name + "/" + entrant.system.name;
      if (!w.scenario.empty()) label += " [" + w.scenario + "]";
      if (total > 1) label = StrFormat("(%zu/%zu) ", ++done, total) + label;
      std::optional<int64_t> resume = plan.resume_run;
      if (auto it = earlier.find({entrant.system.name, w.world.seed, w.scenario});
          it != earlier.end()) {
        if (it->second.status == records::kRunOk) {
          auto view = ReadRunView(store, it->second.id);
          if (!view.ok()) return Fail(io, view.status());
          if (!options.quiet) LogRun(log, json_log, view->run, /*recorded_before=*/true);
          views.push_back(std::move(*view));
          continue;
        }
        resume = it->second.id;
      }
      StepLog steps(io, !options.quiet, json_log, log, label, recipe.Simulated());
      experiment::RunRequest request;
      request.recipe = &w.world;
      request.system = &entrant.system;
      request.comparison_id = *comparison_id;
      request.interrupted = &InterruptGuard::Interrupted;
      request.progress = [&](const experiment::Progress& p) { steps.Update(p); };
      request.resume_run = resume;
      request.take_over = options.take_over;
      request.configuration = entrant.configuration;
      request.tuning_id = entrant.tuning_id;
      request.scenario = w.scenario;
      if (!w.scenario.empty()) request.planning_recipe = &w.belief;
      request.resolved_recipe = w.resolved[e];
      auto outcome = experiment::RunSystem(store, request, Builtins());
      steps.Clear();
      if (!outcome.ok()) return Fail(io, outcome.status());
      // Read back from the store, so that what is printed is what was recorded.
      auto view = ReadRunView(store, outcome->run_id);
      if (!view.ok()) return Fail(io, view.status());
      if (!options.quiet) LogRun(log, json_log, view->run, /*recorded_before=*/false);
      views.push_back(std::move(*view));
      if (outcome->status.ok()) continue;
      exit_code = ExitCodeFor(outcome->status);
      ReportUnfinished(options, io, plan, outcome->run_id, entrant.system.name, outcome->status,
                       *comparison_id);
      if (outcome->status.code() == StatusCode::kInterrupted) return exit_code;
    }
  }
  if (options.quiet) return exit_code;
  return PrintSummary(options, format, io, recipe, entrants, plan, views, *comparison_id,
                      exit_code);
}

// `libra run --resume RUN`: the run's recipe as recorded, and its system.
int ResumeRun(const RecipeOptions& options, const Io& io) {
  if (!options.recipe.empty() || options.seed || options.steps || !options.sets.empty()) {
    return Fail(io, Status::InvalidArgument(
                        "--resume continues a run with the recipe it recorded: give no RECIPE, "
                        "--seed, --steps or --set"));
  }
  auto store = OpenStore(options.db, StoreAccess::kWrite);
  if (!store.ok()) return Fail(io, store.status());
  auto run = (*store)->GetRun(*options.resume);
  if (!run.ok()) return Fail(io, run.status());
  auto parsed = recipe::ParseRecipe(run->recipe_toml, run->recipe_source, {});
  if (!parsed.ok()) return Fail(io, parsed.status());
  experiment::ValidateWithRegistries(parsed->recipe, Builtins(), &parsed->diagnostics);
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
      std::string what = flag + ": '" + name + "' is neither a system of " + recipe->source + " (" +
                         StrJoin(names, ", ") + ") nor a named system (" + StrJoin(presets, ", ") +
                         ")";
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
  experiment::ValidateWithRegistries(*recipe, Builtins(), &diagnostics);
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
      : line_(io, enabled, /*json=*/false, io.err, std::move(label), /*virtual_time=*/true) {}
  void Update(const experiment::TuneProgress& p) {
    if (p.trial != nullptr && p.trial->score && (!best_ || *p.trial->score > *best_)) {
      best_ = p.trial->score;
    }
    line_.Draw(
        StrFormat("run %d/%d (%s), best run so far %.3f traj/s", p.runs, p.budget,
                  p.trial != nullptr ? p.trial->config.ToString().c_str() : "", best_.value_or(0)),
        p.runs >= p.budget);
  }
  void Clear() { line_.Clear(); }

 private:
  StepLog line_;
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
  Result<experiment::TuneOutcome> outcome = experiment::TuneSystem(store, request, Builtins());
  line.Clear();
  return outcome;
}

/// The table of tunings' trials: one row per configuration run, best mean first within each
/// tuning; the system column is for data formats (the text shows one table per system).
report::Table TrialTable() {
  using Shown = report::Column::Shown;
  return report::Table({{.key = "system", .header = "system", .shown = Shown::kData},
                        {"configuration", "configuration", false},
                        {"runs", "runs", true},
                        {"trajectories_per_s", "traj/s mean", true},
                        {"min", "min", true},
                        {"max", "max", true},
                        {"failed", "failed", true},
                        {"winner", "winner", false}});
}

/// Adds the configurations `system`'s tuning ran to `table` (TrialTable).
void AddTrialRows(const std::string& system, const records::TuningRecord& tuning,
                  report::Table* table) {
  struct Row {
    std::string configuration;
    std::vector<double> scores;
    int failed = 0;
  };
  std::vector<Row> rows;
  for (const records::TuningTrialRecord& t : tuning.trials) {
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
  for (const Row& r : rows) {
    std::string text = r.configuration;
    auto json = ParseJson(r.configuration);
    if (json.ok()) {
      auto config = experiment::Configuration::FromJson(*json);
      if (config.ok()) text = config->ToString();
    }
    table->AddRow({report::Cell::Text(system), report::Cell::Text(text),
                   report::Cell::Integer(static_cast<long long>(r.scores.size())),
                   report::Cell::Number(mean(r), 3),
                   report::Cell::Number(*std::min_element(r.scores.begin(), r.scores.end()), 3),
                   report::Cell::Number(*std::max_element(r.scores.begin(), r.scores.end()), 3),
                   report::Cell::Integer(r.failed),
                   report::Cell::Text(r.configuration == tuning.winner ? "*" : "")});
  }
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
      LogStream(options, io) << StrFormat(
          "%s: %s tuning %lld: %s (%.3f traj/s over %d tuning seeds)\n", system->name.c_str(),
          tuning.reused ? "reusing" : "recorded", static_cast<long long>(tuning.record.id),
          tuning.winner.ToString().c_str(), tuning.record.score, tuning.record.winner_runs);
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
  auto store = OpenStore(options.db, StoreAccess::kCreate);
  if (!store.ok()) return Fail(io, store.status());
  return RunSystems(options, io, **store, *recipe, {AsWritten(recipe->system)}, Plan{});
}

// `libra compare --resume COMPARISON`: the comparison's recorded recipe, systems, seeds, tuning
// and scenarios.
int ResumeCompare(const CompareOptions& options, const Io& io) {
  const RecipeOptions& common = options.common;
  if (!common.recipe.empty() || common.seed || common.steps || !common.sets.empty() ||
      !options.systems.empty() || options.repeat != 1 || options.reward_target || options.tuned ||
      options.as_written || options.sensitivity) {
    return Fail(io, Status::InvalidArgument(
                        "--resume continues a comparison as it was recorded: give no RECIPE, "
                        "--seed, --steps, --set, --systems, --repeat, --reward-target, --tuned, "
                        "--as-written or --sensitivity"));
  }
  auto store = OpenStore(common.db, StoreAccess::kWrite);
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
  auto entrants =
      Entrants(common, io, **store, recipe, Chosen(recipe, comparison->systems), comparison->tuned);
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
  if (Status s = CheckFormats(options.common); !s.ok()) return Fail(io, s);
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
  auto store = OpenStore(options.common.db, StoreAccess::kCreate);
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
  if (Status s = CheckFormats(options.common); !s.ok()) return Fail(io, s);
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
  auto store = OpenStore(options.common.db, StoreAccess::kCreate);
  if (!store.ok()) return Fail(io, store.status());
  report::Document doc;
  doc.AddField("db", options.common.db);
  report::Table all_trials = TrialTable();
  using Shown = report::Column::Shown;
  report::Table tunings(
      {{"system", "system", false},
       {"tuning", "tuning", true},
       {"budget_runs", "runs", true},
       {"steps", "steps", true},
       {.key = "first_seed", .header = "first seed", .right_align = true, .shown = Shown::kData},
       {.key = "last_seed", .header = "last seed", .right_align = true, .shown = Shown::kData},
       {"infeasible", "infeasible", true},
       {"winner", "winner", false},
       {"trajectories_per_s", "traj/s", true},
       {"winner_runs", "seeds", true}});
  for (const recipe::SystemSpec* system : systems) {
    auto tuning = TuneOrReuse(options.common, io, **store, *recipe, *system, /*reuse=*/false);
    if (!tuning.ok()) return Fail(io, tuning.status());
    const records::TuningRecord& t = tuning->record;
    int infeasible = 0;
    for (const records::TuningTrialRecord& trial : t.trials) {
      infeasible += trial.status == "infeasible";
    }
    report::Table trials = TrialTable();
    AddTrialRows(system->name, t, &trials);
    AddTrialRows(system->name, t, &all_trials);
    doc.AddTable("trials_" + system->name,
                 StrFormat("%s: %d simulated runs of %d steps on tuning seeds %llu..%llu; %d "
                           "configurations could not be planned",
                           system->name.c_str(), t.budget_runs, t.steps,
                           static_cast<unsigned long long>(t.seeds.front()),
                           static_cast<unsigned long long>(t.seeds.back()), infeasible),
                 std::move(trials), report::Document::Shown::kReadingOnly);
    doc.AddNote(StrFormat("winner: %s, %.3f traj/s (mean of %d seeds); recorded as tuning %lld",
                          tuning->winner.ToString().c_str(), t.score, t.winner_runs,
                          static_cast<long long>(t.id)));
    tunings.AddRow({report::Cell::Text(system->name), report::Cell::Integer(t.id),
                    report::Cell::Integer(t.budget_runs), report::Cell::Integer(t.steps),
                    report::Cell::Integer(static_cast<long long>(t.seeds.front())),
                    report::Cell::Integer(static_cast<long long>(t.seeds.back())),
                    report::Cell::Integer(infeasible),
                    report::Cell::Text(tuning->winner.ToString()), report::Cell::Number(t.score, 3),
                    report::Cell::Integer(t.winner_runs)});
  }
  if (options.common.quiet) return kExitOk;
  doc.AddTable("tunings", "", std::move(tunings), report::Document::Shown::kDataOnly);
  doc.AddTable("trials", "", std::move(all_trials), report::Document::Shown::kDataOnly);
  doc.AddNote(StrFormat("`libra compare %s --tuned%s` runs the peers at these configurations",
                        options.common.recipe.c_str(), DbFlag(options.common.db).c_str()));
  return Print(io, doc, options.common.output);
}

}  // namespace libra::cli
