#include "experiment/tuning.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "common/strings.h"
#include "libra/config.h"
#include "recipe/presets.h"

namespace libra::experiment {
namespace {

using recipe::OptionValue;

OptionValue IntValue(int64_t v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kInt;
  o.int_value = v;
  return o;
}

OptionValue DoubleValue(double v) {
  OptionValue o;
  o.kind = OptionValue::Kind::kDouble;
  o.double_value = v;
  return o;
}

std::string ValueToString(const OptionValue& v) {
  switch (v.kind) {
    case OptionValue::Kind::kBool:
      return v.bool_value ? "true" : "false";
    case OptionValue::Kind::kInt:
      return std::to_string(v.int_value);
    case OptionValue::Kind::kDouble:
      return StrFormat("%g", v.double_value);
    case OptionValue::Kind::kString:
      return "\"" + v.string_value + "\"";
    case OptionValue::Kind::kArray: {
      std::vector<std::string> parts;
      for (const OptionValue& e : v.array) parts.push_back(ValueToString(e));
      return "[" + StrJoin(parts, ", ") + "]";
    }
    case OptionValue::Kind::kTable: {
      std::vector<std::string> parts;
      for (const recipe::OptionEntry& e : v.table) {
        parts.push_back(e.key + " = " + ValueToString(e.value));
      }
      return "{" + StrJoin(parts, ", ") + "}";
    }
  }
  return "";
}

std::string TableToString(const recipe::OptionTable& table) {
  std::vector<std::string> parts;
  for (const recipe::OptionEntry& e : table.entries) {
    parts.push_back(e.key + " = " + ValueToString(e.value));
  }
  return "{" + StrJoin(parts, ", ") + "}";
}

/// Where a knob's value goes.
enum class Target { kPlannerOption, kRouterOption, kStaleness };

/// A knob a system can have: which systems have it by default, its default values on a recipe's
/// cluster, and the check of a value a [.tune] table gives.
struct KnobDef {
  const char* name;
  Target target;
  /// The option key it sets (planner or router option).
  const char* key;
  bool integer;
  /// Whether `system` has the knob when its [.tune] table does not name it.
  bool (*has_default)(const recipe::Recipe&, const recipe::SystemSpec&);
  /// The default values on the recipe's cluster.
  std::vector<OptionValue> (*defaults)(const recipe::Recipe&, const recipe::SystemSpec&);
  /// Empty when `value` suits the recipe, else why not.
  std::string (*check)(const recipe::Recipe&, const recipe::SystemSpec&, double value);
};

bool PlannerIs(const recipe::SystemSpec& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (s.planner == n) return true;
  }
  return false;
}

bool LendsIdleTrainer(const recipe::SystemSpec& s) {
  const OptionValue* v = s.planner_options.Find("lend_idle_trainer");
  return v != nullptr && v->kind == OptionValue::Kind::kBool && v->bool_value;
}

/// The split granularity: whole nodes on clusters of four nodes or more, half nodes below.
/// The TP sizes an instance of the recipe's cluster can have: 1, 2, 4 and 8 that divide a node.
std::vector<OptionValue> TpCandidates(const recipe::Recipe& r) {
  std::vector<OptionValue> v;
  for (int tp : {1, 2, 4, 8}) {
    if (r.cluster.gpus_per_node % tp == 0) v.push_back(IntValue(tp));
  }
  return v;
}

/// Empty when `tp` is one of TpCandidates(r); else why not, naming the knob as `what`.
std::string TpProblem(const recipe::Recipe& r, const char* what, double tp) {
  const bool power = tp == 1 || tp == 2 || tp == 4 || tp == 8;
  if (power && r.cluster.gpus_per_node % static_cast<int>(tp) == 0) return "";
  return StrFormat(
      "%s %g cannot fit the cluster: it must be 1, 2, 4 or 8 and divide its %d GPUs "
      "per node",
      what, tp, r.cluster.gpus_per_node);
}

int SplitUnit(const recipe::Recipe& r) {
  const int gpn = std::max(1, r.cluster.gpus_per_node);
  return r.cluster.nodes >= 4 ? gpn : std::max(1, gpn / 2);
}

/// Knobs of the planners' options.
std::vector<KnobDef> PlannerKnobs() {
  return {
      {"train_gpus", Target::kPlannerOption, "train_gpus", true,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) {
         return PlannerIs(s, {"static", "heddle"});
       },
       [](const recipe::Recipe& r, const recipe::SystemSpec&) {
         std::vector<OptionValue> v;
         const int unit = SplitUnit(r);
         for (int g = unit; g < r.cluster.total_gpus(); g += unit) v.push_back(IntValue(g));
         return v;
       },
       [](const recipe::Recipe& r, const recipe::SystemSpec&, double g) -> std::string {
         if (g >= 1 && g <= r.cluster.total_gpus() - 1) return "";
         return StrFormat(
             "%g training GPUs cannot fit the cluster: it has %d GPUs (%d x %d) and "
             "rollout needs at least one",
             g, r.cluster.total_gpus(), r.cluster.nodes, r.cluster.gpus_per_node);
       }},
      {"rollout_tp", Target::kPlannerOption, "rollout_tp", true,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) {
         return PlannerIs(s, {"static", "colocated"}) &&
                s.planner_options.Find("rollout_tps") == nullptr;
       },
       [](const recipe::Recipe& r, const recipe::SystemSpec&) { return TpCandidates(r); },
       [](const recipe::Recipe& r, const recipe::SystemSpec&, double tp) {
         return TpProblem(r, "rollout TP", tp);
       }},
      {"max_tp", Target::kPlannerOption, "max_tp", true,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) { return PlannerIs(s, {"heddle"}); },
       [](const recipe::Recipe& r, const recipe::SystemSpec&) { return TpCandidates(r); },
       [](const recipe::Recipe& r, const recipe::SystemSpec&, double tp) {
         return TpProblem(r, "largest rollout TP", tp);
       }},
      {"reclaim_at", Target::kPlannerOption, "reclaim_at", false,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) {
         return PlannerIs(s, {"static"}) && LendsIdleTrainer(s);
       },
       [](const recipe::Recipe&, const recipe::SystemSpec&) {
         return std::vector<OptionValue>{DoubleValue(1.0), DoubleValue(0.9), DoubleValue(0.75),
                                         DoubleValue(0.5)};
       },
       [](const recipe::Recipe&, const recipe::SystemSpec&, double f) -> std::string {
         return f > 0 && f <= 1 ? "" : StrFormat("must be in (0, 1] (got %g)", f);
       }},
  };
}

/// Knobs of the routers' options, and the staleness bound.
std::vector<KnobDef> RouterAndStalenessKnobs() {
  return {
      {"max_active", Target::kRouterOption, "max_active", true,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) { return s.router == "sorted"; },
       [](const recipe::Recipe&, const recipe::SystemSpec&) {
         std::vector<OptionValue> v;
         for (int a : {0, 8, 16, 32, 64, 128}) v.push_back(IntValue(a));
         return v;
       },
       [](const recipe::Recipe&, const recipe::SystemSpec&, double a) -> std::string {
         return a >= 0 && a <= 1e6 ? "" : StrFormat("must be in [0, 1000000] (got %g)", a);
       }},
      {"long_factor", Target::kRouterOption, "long_factor", false,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) { return s.router == "sorted"; },
       [](const recipe::Recipe&, const recipe::SystemSpec&) {
         return std::vector<OptionValue>{DoubleValue(1.0), DoubleValue(1.5), DoubleValue(2.0)};
       },
       [](const recipe::Recipe&, const recipe::SystemSpec&, double f) -> std::string {
         return f > 0 && f <= 1e3 ? "" : StrFormat("must be in (0, 1000] (got %g)", f);
       }},
      {"staleness", Target::kStaleness, "staleness", true,
       [](const recipe::Recipe&, const recipe::SystemSpec& s) {
         const recipe::Preset* p = s.preset.empty() ? nullptr : recipe::FindPreset(s.preset);
         return p != nullptr && p->staleness_knob;
       },
       [](const recipe::Recipe& r, const recipe::SystemSpec&) {
         std::vector<OptionValue> v;
         for (int k = std::max(1, r.rl.sync_interval - 1); k <= r.rl.staleness; ++k) {
           v.push_back(IntValue(k));
         }
         if (v.empty()) v.push_back(IntValue(r.rl.staleness));
         return v;
       },
       [](const recipe::Recipe& r, const recipe::SystemSpec&, double k) -> std::string {
         const int lo = r.rl.sync_interval - 1;
         if (k >= lo && k <= r.rl.staleness) return "";
         return StrFormat(
             "staleness %g is outside [%d, %d]: rl.staleness (%d) is the off-policy "
             "budget every system of the recipe shares, and rl.sync_interval %d "
             "needs at least %d",
             k, lo, r.rl.staleness, r.rl.staleness, r.rl.sync_interval, lo);
       }},
  };
}

const std::vector<KnobDef>& KnobDefs() {
  static const std::vector<KnobDef> defs = [] {
    std::vector<KnobDef> all = PlannerKnobs();
    for (KnobDef& d : RouterAndStalenessKnobs()) all.push_back(std::move(d));
    return all;
  }();
  return defs;
}

const KnobDef* FindDef(const std::string& name) {
  for (const KnobDef& d : KnobDefs()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

uint64_t Fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

std::string Configuration::ToString() const {
  if (settings.empty()) return "as written";
  std::vector<std::string> parts;
  for (const Setting& s : settings) parts.push_back(s.knob + "=" + ValueToString(s.value));
  return StrJoin(parts, " ");
}

JsonValue Configuration::ToJson() const {
  JsonValue object = JsonValue::MakeObject();
  for (const Setting& s : settings) {
    switch (s.value.kind) {
      case OptionValue::Kind::kInt:
        object.Set(s.knob, s.value.int_value);
        break;
      case OptionValue::Kind::kDouble:
        object.Set(s.knob, s.value.double_value);
        break;
      case OptionValue::Kind::kBool:
        object.Set(s.knob, s.value.bool_value);
        break;
      default:
        object.Set(s.knob, s.value.string_value);
        break;
    }
  }
  return object;
}

Result<Configuration> Configuration::FromJson(const JsonValue& json) {
  if (!json.is_object()) {
    return Status::InvalidArgument(std::string("a configuration must be an object, not ") +
                                   json.type_name());
  }
  Configuration config;
  for (const auto& [key, value] : json.as_object()) {
    OptionValue v;
    if (value.is_int()) {
      v = IntValue(value.as_int());
    } else if (value.is_double()) {
      v = DoubleValue(value.as_double());
    } else if (value.is_bool()) {
      v.kind = OptionValue::Kind::kBool;
      v.bool_value = value.as_bool();
    } else if (value.is_string()) {
      v.kind = OptionValue::Kind::kString;
      v.string_value = value.as_string();
    } else {
      return Status::InvalidArgument("configuration value '" + key + "' is " + value.type_name());
    }
    config.settings.push_back({key, v});
  }
  return config;
}

size_t KnobSpace::size() const {
  size_t n = 1;
  for (const Knob& k : knobs) n *= k.values.size();
  return n;
}

Configuration KnobSpace::At(size_t index) const {
  Configuration config;
  config.settings.resize(knobs.size());
  for (size_t i = knobs.size(); i-- > 0;) {
    const size_t n = knobs[i].values.size();
    config.settings[i] = {knobs[i].name, knobs[i].values[index % n]};
    index /= n;
  }
  return config;
}

bool IsLibraSystem(const recipe::SystemSpec& system) {
  return PlannerIs(system, {"grp", "no-ehp", "libra-ref"});
}

namespace {

/// Reports a problem of a system's [.tune] table: where, the key, what.
using TuneError =
    std::function<void(const std::string& where, const std::string& key, const std::string& what)>;

/// The knobs of a system that is not Libra: those it has by default, then those its [.tune]
/// table names (`given`, by name; a name it has no knob of is an error).
std::vector<const KnobDef*> TunedKnobs(const recipe::Recipe& recipe,
                                       const recipe::SystemSpec& system, const TuneError& error,
                                       std::map<std::string, const recipe::OptionEntry*>* given) {
  std::vector<const KnobDef*> defs;
  for (const KnobDef& d : KnobDefs()) {
    if (d.has_default(recipe, system)) defs.push_back(&d);
  }
  for (const recipe::OptionEntry& e : system.tune.entries) {
    if (e.key == "enabled") continue;
    const KnobDef* def = FindDef(e.key);
    const bool allowed =
        def != nullptr && (std::find(defs.begin(), defs.end(), def) != defs.end() ||
                           def->target == Target::kStaleness);
    if (!allowed) {
      std::vector<std::string> names;
      for (const KnobDef* d : defs) names.push_back(d->name);
      if (std::find(names.begin(), names.end(), "staleness") == names.end()) {
        names.push_back("staleness");
      }
      std::string what = "'" + system.name + "' has no knob '" + e.key +
                         "' (its knobs: " + StrJoin(names, ", ") + ")";
      const std::string hint = ClosestMatch(e.key, names);
      if (!hint.empty()) what += "; did you mean '" + hint + "'?";
      error(e.value.where, e.key, what);
      continue;
    }
    if (std::find(defs.begin(), defs.end(), def) == defs.end()) defs.push_back(def);
    (*given)[e.key] = &e;
  }
  return defs;
}

/// A knob's candidates: its defaults, or the values the [.tune] table gives (`given`; each
/// checked, the bad ones reported and left out).
Knob KnobOf(const KnobDef& def, const recipe::OptionEntry* given, const recipe::Recipe& recipe,
            const recipe::SystemSpec& system, const TuneError& error) {
  Knob knob;
  knob.name = def.name;
  knob.where = "default";
  if (given == nullptr) {
    knob.values = def.defaults(recipe, system);
    return knob;
  }
  const recipe::OptionValue& v = given->value;
  knob.where = v.where;
  if (v.kind != OptionValue::Kind::kArray || v.array.empty()) {
    error(v.where, def.name, "must be a non-empty array of candidate values");
    return knob;
  }
  for (const OptionValue& e : v.array) {
    const bool number =
        e.kind == OptionValue::Kind::kInt || (!def.integer && e.kind == OptionValue::Kind::kDouble);
    if (!number) {
      error(e.where, def.name,
            std::string("values must be ") + (def.integer ? "integers" : "numbers") + ", not " +
                e.KindName());
      continue;
    }
    const double x =
        e.kind == OptionValue::Kind::kInt ? static_cast<double>(e.int_value) : e.double_value;
    const std::string why = def.check(recipe, system, x);
    if (!why.empty()) {
      error(e.where, def.name, why);
      continue;
    }
    knob.values.push_back(def.integer ? IntValue(e.int_value) : DoubleValue(x));
  }
  return knob;
}

}  // namespace

Result<KnobSpace> KnobsFor(const recipe::Recipe& recipe, const recipe::SystemSpec& system) {
  std::vector<std::string> errors;
  const TuneError error = [&](const std::string& where, const std::string& key,
                              const std::string& what) {
    errors.push_back(where + ": " + system.tune.path + "." + key + ": " + what);
  };
  const recipe::OptionValue* enabled = system.tune.Find("enabled");
  if (enabled != nullptr && enabled->kind != OptionValue::Kind::kBool) {
    error(enabled->where, "enabled", "must be a boolean, not " + enabled->KindName());
  }
  const bool off =
      enabled != nullptr && enabled->kind == OptionValue::Kind::kBool && !enabled->bool_value;
  KnobSpace space;
  if (IsLibraSystem(system)) {
    for (const recipe::OptionEntry& e : system.tune.entries) {
      if (e.key == "enabled") continue;
      error(e.value.where, e.key,
            "'" + system.name + "' is Libra (planner " + system.planner +
                "): its planner chooses its configuration, and it is never tuned");
    }
  } else {
    std::map<std::string, const recipe::OptionEntry*> given;
    for (const KnobDef* def : TunedKnobs(recipe, system, error, &given)) {
      auto it = given.find(def->name);
      Knob knob = KnobOf(*def, it == given.end() ? nullptr : it->second, recipe, system, error);
      if (!knob.values.empty()) space.knobs.push_back(std::move(knob));
    }
  }
  if (!errors.empty()) return Status(StatusCode::kInvalidRecipe, StrJoin(errors, "\n"));
  if (off) return KnobSpace{};
  constexpr size_t kMaxSpace = 100000;
  if (space.size() > kMaxSpace) {
    return Status::InvalidRecipe(
        system.tune.where,
        StrFormat("%s: '%s' has %zu configurations to search; at most %zu: "
                  "narrow its ranges",
                  system.tune.path.c_str(), system.name.c_str(), space.size(), kMaxSpace));
  }
  return space;
}

recipe::SystemSpec ApplyConfiguration(const recipe::SystemSpec& system,
                                      const Configuration& config) {
  recipe::SystemSpec out = system;
  const auto set = [](recipe::OptionTable& table, const std::string& key, OptionValue value) {
    value.where = "tuned";
    for (recipe::OptionEntry& e : table.entries) {
      if (e.key == key) {
        e.value = std::move(value);
        return;
      }
    }
    table.entries.push_back({key, std::move(value)});
  };
  for (const Configuration::Setting& s : config.settings) {
    const KnobDef* def = FindDef(s.knob);
    if (def == nullptr) continue;
    switch (def->target) {
      case Target::kPlannerOption:
        set(out.planner_options, def->key, s.value);
        break;
      case Target::kRouterOption:
        set(out.router_options, def->key, s.value);
        break;
      case Target::kStaleness:
        out.staleness = static_cast<int>(s.value.int_value);
        break;
    }
  }
  return out;
}

uint64_t TuningSeed(uint64_t base, int i) {
  return base + (uint64_t{1} << 32) + static_cast<uint64_t>(i);
}

namespace {

/// The indices of the configurations `feasible` accepts; the others are recorded as infeasible
/// trials. kUnschedulable when none fits.
Result<std::vector<size_t>> FeasibleCandidates(const KnobSpace& space, const FeasibleFn& feasible,
                                               SearchResult* result) {
  std::vector<size_t> candidates;
  std::vector<std::string> reasons;
  for (size_t i = 0; i < space.size(); ++i) {
    Configuration config = space.At(i);
    const Status ok = feasible(config);
    if (ok.ok()) {
      candidates.push_back(i);
      continue;
    }
    reasons.push_back(config.ToString() + ": " + ok.message());
    result->trials.push_back(
        {i, std::move(config), std::nullopt, std::nullopt, "infeasible", ok.message()});
  }
  if (candidates.empty()) {
    return Status::Unschedulable("no configuration of the search space fits: " +
                                 StrJoin(reasons, "; "));
  }
  return candidates;
}

/// The candidates explored (positions among `candidates` of them): every one when they fit in
/// 2/3 of the budget, else an evenly spread subset that keeps both ends of the space.
std::vector<size_t> Explored(size_t candidates, int budget) {
  const size_t explore_max = static_cast<size_t>(std::max(1, budget * 2 / 3));
  std::vector<size_t> explored;
  if (candidates <= explore_max) {
    explored.resize(candidates);
    std::iota(explored.begin(), explored.end(), size_t{0});
  } else if (explore_max == 1) {
    explored.push_back(0);
  } else {
    for (size_t k = 0; k < explore_max; ++k) {
      explored.push_back(k * (candidates - 1) / (explore_max - 1));
    }
  }
  return explored;
}

}  // namespace

Result<SearchResult> Search(const KnobSpace& space, const SearchSettings& settings,
                            const FeasibleFn& feasible, const EvaluateFn& evaluate,
                            const SearchProgressFn& progress) {
  LIBRA_CHECK(settings.budget_runs >= 1 &&
              settings.seeds.size() >= static_cast<size_t>(settings.budget_runs))
      << settings.budget_runs << " runs with " << settings.seeds.size() << " seeds";
  SearchResult result;
  LIBRA_ASSIGN_OR_RETURN(const std::vector<size_t> candidates,
                         FeasibleCandidates(space, feasible, &result));
  // Scores by candidate position; seeds used per candidate.
  std::vector<std::vector<double>> scores(candidates.size());
  const auto run = [&](size_t c) -> Status {
    const size_t index = candidates[c];
    Trial trial;
    trial.index = index;
    trial.config = space.At(index);
    trial.seed = settings.seeds[scores[c].size()];
    Result<double> score = evaluate(trial.config, *trial.seed);
    if (!score.ok() && score.status().code() == StatusCode::kInterrupted) return score.status();
    trial.status = score.ok() ? "ok" : "failed";
    trial.score = score.ok() ? *score : 0.0;
    if (!score.ok()) trial.error = score.status().message();
    scores[c].push_back(*trial.score);
    ++result.runs;
    result.trials.push_back(trial);
    if (progress) progress(result.runs, trial);
    return Status();
  };
  const auto mean = [&](size_t c) {
    return std::accumulate(scores[c].begin(), scores[c].end(), 0.0) /
           static_cast<double>(std::max<size_t>(1, scores[c].size()));
  };
  const int budget = settings.budget_runs;
  const std::vector<size_t> explored = Explored(candidates.size(), budget);
  for (size_t c : explored) {
    if (result.runs >= budget) break;
    LIBRA_RETURN_IF_ERROR(run(c));
  }
  // Confirmation: the best contenders on further seeds, halving them each round (down to two).
  size_t contenders = std::max<size_t>(2, explored.size() / 2);
  while (result.runs < budget) {
    std::vector<size_t> ranked = explored;
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](size_t a, size_t b) { return mean(a) > mean(b); });
    ranked.resize(std::min(contenders, ranked.size()));
    for (size_t c : ranked) {
      if (result.runs >= budget) break;
      LIBRA_RETURN_IF_ERROR(run(c));
    }
    contenders = std::max<size_t>(2, contenders / 2);
  }
  // The winner: the best mean among the candidates run most often.
  size_t most = 0;
  for (size_t c : explored) most = std::max(most, scores[c].size());
  std::optional<size_t> best;
  for (size_t c : explored) {
    if (scores[c].size() != most) continue;
    if (!best || mean(c) > mean(*best)) best = c;
  }
  result.winner = candidates[*best];
  result.winner_config = space.At(result.winner);
  result.winner_mean = mean(*best);
  result.winner_runs = static_cast<int>(most);
  return result;
}

std::string TuningKey(const recipe::Recipe& r, const recipe::SystemSpec& s) {
  std::string key = StrFormat(
      "libra %s %s|seed %llu|cluster %s %s %d x %d|model %s %s|cost %s %s|workload %s %s %s "
      "%s|rl %d %d %d %d %s %d|sim %d %d %s %s %d|steps %d|tuning %d %d|",
      LIBRA_VERSION, LIBRA_GIT_REVISION, static_cast<unsigned long long>(r.seed),
      r.cluster.gpu.c_str(), TableToString(r.cluster.gpu_spec).c_str(), r.cluster.nodes,
      r.cluster.gpus_per_node, r.model.name.c_str(), TableToString(r.model.arch).c_str(),
      r.cost_model.name.c_str(), TableToString(r.cost_model.options).c_str(),
      NameOf(r.workload.kind).c_str(), r.workload.preset.c_str(), r.workload.trace.c_str(),
      TableToString(r.workload.options).c_str(), r.rl.prompts_per_step, r.rl.group_size,
      r.rl.staleness, r.rl.sync_interval, NameOf(r.rl.batching).c_str(),
      r.rl.partial_rollout ? 1 : 0, r.sim.max_num_seqs, r.sim.max_batched_tokens,
      NameOf(r.sim.kv_policy).c_str(), NameOf(r.sim.sync_path).c_str(), r.sim.tool_concurrency,
      r.steps, r.tuning.budget_runs, r.tuning.steps);
  key += StrFormat("system %s %s %s %s %s %d %s %d %s", s.name.c_str(), s.router.c_str(),
                   TableToString(s.router_options).c_str(), s.planner.c_str(),
                   TableToString(s.planner_options).c_str(), s.staleness.value_or(-1),
                   s.batching ? NameOf(*s.batching).c_str() : "",
                   s.partial_rollout ? static_cast<int>(*s.partial_rollout) : -1,
                   TableToString(s.tune).c_str());
  return StrFormat("%016llx", static_cast<unsigned long long>(Fnv1a(key)));
}

}  // namespace libra::experiment
