// Tuning: every peer at the configuration its own users would pick. A system's knobs are the
// settings its real counterpart exposes (rollout TP, the train/rollout split, staleness where the
// real system lets users set it, a scheduler's own thresholds), each with the values a search
// tries on the recipe's cluster. Search() spends a fixed budget of simulated runs on seeds that
// are never reporting seeds, the same budget for every system. Libra's own systems (planners
// grp, no-ehp, libra-ref) have no knobs: they get nothing beyond what their planner decides.
//
// Pure: the caller runs the simulations (an Evaluate callback) and records the outcome.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "recipe/recipe.h"

namespace libra::experiment {

/// A knob of a system and the values a search tries, in search order.
struct Knob {
  std::string name;
  std::vector<recipe::OptionValue> values;
  /// Where the values came from: "file:line:col" of a [.tune] entry, or "default".
  std::string where;
  bool operator==(const Knob&) const = default;
};

/// One value per knob of a space, in the space's order.
struct Configuration {
  struct Setting {
    std::string knob;
    recipe::OptionValue value;
    bool operator==(const Setting&) const = default;
  };
  std::vector<Setting> settings;

  /// "train_gpus=16 rollout_tp=8", or "as written" without settings.
  std::string ToString() const;
  /// {"train_gpus": 16, "rollout_tp": 8}: what the store keeps.
  JsonValue ToJson() const;
  /// The inverse of ToJson; kInvalidArgument for anything else.
  static Result<Configuration> FromJson(const JsonValue& json);
  bool operator==(const Configuration&) const = default;
};

/// A system's knobs; the search space is their product.
struct KnobSpace {
  std::vector<Knob> knobs;
  /// Configurations in the space (1 when it has no knob: the system as written).
  size_t size() const;
  /// Configuration `index` in row-major order (the last knob varies fastest).
  Configuration At(size_t index) const;
  bool empty() const { return knobs.empty(); }
};

/// Whether `system` is Libra or one of its ablations (planner grp, no-ehp or libra-ref): never
/// tuned.
bool IsLibraSystem(const recipe::SystemSpec& system);

/// The knobs of `system` on `recipe`'s cluster: the defaults its planner and router expose, with
/// the ranges of its [.tune] table in their place. kInvalidRecipe (naming the key and file:line)
/// for a [.tune] key that is not a knob of the system, a value of the wrong type, or a value that
/// cannot fit the cluster or the recipe's staleness bound. Empty for Libra's systems and for
/// `tune.enabled = false`.
Result<KnobSpace> KnobsFor(const recipe::Recipe& recipe, const recipe::SystemSpec& system);

/// `system` with `config` applied (its planner and router options and its staleness set).
recipe::SystemSpec ApplyConfiguration(const recipe::SystemSpec& system,
                                      const Configuration& config);

/// Reporting seed k of a comparison whose recipe seed is `base`: base + k (k < kMaxRepeat).
inline constexpr int kMaxRepeat = 1000;
/// Tuning seed i for a recipe seed `base`: base + 2^32 + i (mod 2^64). A tuning seed is never a
/// reporting seed of the same base (i and k are both far below 2^32).
uint64_t TuningSeed(uint64_t base, int i);

/// What a search may spend: `budget_runs` simulated runs, on the seeds `seeds[0..]` in order.
struct SearchSettings {
  int budget_runs = 24;
  std::vector<uint64_t> seeds;
};

/// One configuration tried: infeasible (its plan does not fit: checked for free, no run), or run
/// on a seed with its score (trajectories per second; a failed run scores 0 and says why).
struct Trial {
  size_t index = 0;  // in the KnobSpace
  Configuration config;
  std::optional<uint64_t> seed;
  std::optional<double> score;
  std::string status;  // "ok", "failed", "infeasible"
  std::string error;
  bool operator==(const Trial&) const = default;
};

struct SearchResult {
  std::vector<Trial> trials;
  /// The winner: the best mean score among the configurations run on the most seeds.
  size_t winner = 0;
  Configuration winner_config;
  double winner_mean = 0;
  int winner_runs = 0;
  /// Runs spent (== budget_runs whenever any configuration is feasible).
  int runs = 0;
};

/// Checks a configuration without running it (its plan fits the cluster and memory).
using FeasibleFn = std::function<Status(const Configuration&)>;
/// Runs a configuration on a seed; its throughput, or why the run failed (counted as a run
/// scoring 0). kInterrupted stops the search.
using EvaluateFn = std::function<Result<double>(const Configuration&, uint64_t seed)>;
/// Called after every run: runs spent so far, and the trial.
using SearchProgressFn = std::function<void(int runs, const Trial&)>;

/// Searches `space` with exactly `settings.budget_runs` runs:
/// 1. every configuration is checked by `feasible` (free); infeasible ones are recorded, not run;
/// 2. exploration: the feasible configurations (all of them when they fit in 2/3 of the budget,
///    else an evenly spread subset that always holds the first and the last) each run once on
///    seeds[0];
/// 3. confirmation: the rest of the budget re-runs the best ones on the next seeds, halving the
///    contenders each round down to two, so that the winner's score is a mean over several
///    seeds rather than one lucky draw;
/// 4. the winner is the best mean among the configurations run most often (ties: space order).
/// kUnschedulable when no configuration is feasible (listing why); kInterrupted from `evaluate`.
/// REQUIRES: settings.seeds.size() >= settings.budget_runs.
Result<SearchResult> Search(const KnobSpace& space, const SearchSettings& settings,
                            const FeasibleFn& feasible, const EvaluateFn& evaluate,
                            const SearchProgressFn& progress = {});

/// What identifies a tuning, so that `compare --tuned` reuses it: the recipe without its name,
/// systems and reporting settings, the system as defined, the tuning budget and steps, and this
/// libra's version and revision. A 16-digit hex digest.
std::string TuningKey(const recipe::Recipe& recipe, const recipe::SystemSpec& system);

}  // namespace libra::experiment
