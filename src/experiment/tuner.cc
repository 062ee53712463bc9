#include "experiment/tuner.h"

#include "common/strings.h"
#include "libra/config.h"

namespace libra::experiment {

recipe::Recipe TuningRecipe(const recipe::Recipe& recipe) {
  recipe::Recipe tuning = recipe;
  if (recipe.tuning.steps > 0) tuning.steps = recipe.tuning.steps;
  return tuning;
}

Result<TuneOutcome> TuneSystem(store::Store& store, const TuneRequest& request,
                               const Components& parts) {
  const recipe::Recipe& recipe = *request.recipe;
  const recipe::SystemSpec& system = *request.system;
  if (!recipe.Simulated()) {
    return Status::InvalidArgument(
        StrFormat("%s: tuning searches by simulation, and backend = '%s'; tune a simulator copy "
                  "of the recipe (--set backend=sim)",
                  recipe.source.c_str(), NameOf(recipe.backend).c_str()));
  }
  LIBRA_ASSIGN_OR_RETURN(const KnobSpace space, KnobsFor(recipe, system));
  if (space.empty()) {
    return Status::InvalidArgument(StrFormat(
        "%s: system '%s' has no knob to tune (%s)", system.where.c_str(), system.name.c_str(),
        IsLibraSystem(system) ? "it is Libra: its planner chooses its configuration"
                              : "its [.tune] table sets enabled = false, or its planner and "
                                "router expose none"));
  }
  const recipe::Recipe base = TuningRecipe(recipe);
  SearchSettings settings;
  settings.budget_runs = recipe.tuning.budget_runs;
  for (int i = 0; i < settings.budget_runs; ++i)
    settings.seeds.push_back(TuningSeed(recipe.seed, i));

  const FeasibleFn feasible = [&](const Configuration& config) {
    return CheckInitialPlan(base, ApplyConfiguration(system, config), parts);
  };
  const EvaluateFn evaluate = [&](const Configuration& config, uint64_t seed) -> Result<double> {
    recipe::Recipe seeded = base;
    seeded.seed = seed;
    const recipe::SystemSpec tuned = ApplyConfiguration(system, config);
    LIBRA_ASSIGN_OR_RETURN(RunSummary summary,
                           SimulateSystem(seeded, tuned, parts, request.interrupted));
    if (!(summary.elapsed_s > 0)) return Status::Internal("the run took no time");
    return static_cast<double>(summary.trajectories) / summary.elapsed_s;
  };
  const SearchProgressFn progress = [&](int runs, const Trial& trial) {
    if (request.progress) request.progress(TuneProgress{runs, settings.budget_runs, &trial});
  };
  LIBRA_ASSIGN_OR_RETURN(SearchResult result,
                         Search(space, settings, feasible, evaluate, progress));

  TuneOutcome outcome;
  records::TuningRecord& record = outcome.record;
  record.key = TuningKey(recipe, system);
  record.recipe = recipe.name;
  record.system = system.name;
  record.created_at = NowIso8601();
  record.budget_runs = settings.budget_runs;
  record.steps = base.steps;
  record.seeds = settings.seeds;
  record.objective = "traj/s";
  record.winner = ToJson(result.winner_config.ToJson());
  record.score = result.winner_mean;
  record.winner_runs = result.winner_runs;
  record.libra_version = LIBRA_VERSION;
  for (const Trial& t : result.trials) {
    record.trials.push_back({ToJson(t.config.ToJson()), t.seed, t.score, t.status, t.error});
  }
  LIBRA_ASSIGN_OR_RETURN(record.id, store.RecordTuning(record));
  outcome.winner = result.winner_config;
  return outcome;
}

Result<std::optional<TuneOutcome>> FindTuning(store::Store& store, const recipe::Recipe& recipe,
                                              const recipe::SystemSpec& system) {
  LIBRA_ASSIGN_OR_RETURN(std::optional<records::TuningRecord> record,
                         store.LatestTuning(TuningKey(recipe, system), system.name));
  if (!record) return std::optional<TuneOutcome>();
  LIBRA_ASSIGN_OR_RETURN(JsonValue json, ParseJson(record->winner));
  LIBRA_ASSIGN_OR_RETURN(Configuration winner, Configuration::FromJson(json));
  LIBRA_ASSIGN_OR_RETURN(const KnobSpace space, KnobsFor(recipe, system));
  for (const Configuration::Setting& s : winner.settings) {
    bool known = false;
    for (const Knob& k : space.knobs) known = known || k.name == s.knob;
    if (!known) {
      return Status::InvalidArgument(
          StrFormat("tuning %lld of '%s' set knob '%s', which the system no longer has",
                    static_cast<long long>(record->id), system.name.c_str(), s.knob.c_str()));
    }
  }
  TuneOutcome outcome;
  outcome.record = std::move(*record);
  outcome.winner = std::move(winner);
  outcome.reused = true;
  return std::optional<TuneOutcome>(std::move(outcome));
}

}  // namespace libra::experiment
