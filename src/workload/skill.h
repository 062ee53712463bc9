// SkillModel: a *modelled* reward curve for the simulator. The policy's skill (its chance of
// solving an average prompt) rises with the training samples it has consumed; samples generated
// by an older policy count less, and samples beyond the staleness bound not at all. Reward-vs-time
// curves from the simulator come from here and are labelled "modelled" wherever they are shown.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "recipe/options.h"
#include "recipe/recipe.h"

namespace libra::workload {

struct SkillParams {
  /// Skill of the initial policy (chance of success on a prompt of difficulty 0.5).
  double initial = 0.3;
  /// Skill the policy approaches with unlimited fresh samples.
  double final = 0.8;
  /// Effective samples that close half of the gap between initial and final.
  double half_gap_samples = 20000;
  /// When set: the weight of a sample per step of policy lag, weight = lag_discount^lag, in place
  /// of the measured curves of LagWeight (an assumption a recipe makes). Default: unset.
  std::optional<double> lag_discount;
  /// How strongly difficulty moves a prompt's chance of success around the skill, in logits:
  /// logit(p) = logit(skill) + difficulty_spread * (0.5 - difficulty).
  double difficulty_spread = 4.0;

  bool operator==(const SkillParams&) const = default;
};

/// How the trainer's loss treats samples of older policies (the recipe's rl.objective).
using Objective = recipe::Objective;

/// What a sample of policy lag `lag` (training steps; fractional for a trajectory whose turns
/// came from several versions) is worth for learning, relative to a fresh one, under `objective`:
/// piecewise linear between the measured points (docs/workloads.md, "Learning effects"):
/// PPO, AReaL (arXiv 2505.24298) Fig. 5a, share of the fresh run's reward gain at maximum
/// staleness 0/1/2/4/8/16/unbounded: 1, 1.00, 0.96, 0.72, 0.62, 0.48, 0.42; decoupled, AReaL
/// Table 2, mean share of the fresh run's gain over four benchmarks: 1 up to lag 4, then 0.90,
/// 0.90, 0.70. A lag beyond 16 counts as unbounded (reached at 64). With `lag_discount` set:
/// lag_discount^lag instead.
double LagWeight(double lag, Objective objective, std::optional<double> lag_discount);

/// How much a batch chosen out of dataset order still teaches about the prompt distribution:
/// the effective-sample fraction (sum w)^2 / (n sum w^2) of the batch's groups weighted by
/// p_population / p_batch over three difficulty buckets ([0, 1/3), [1/3, 2/3), [2/3, 1]), where
/// the population is the prompts the batch stands for in dataset order. 1 when the batch has the
/// population's mix (always, for ordered batching); lower the more it over-represents some
/// difficulty (a batch of the first groups to finish holds the short, easy ones). Empty batch: 1.
double SelectionEfficiency(std::span<const double> batch_difficulties,
                           std::span<const double> population_difficulties);

/// Reads the skill parameters' keys (reward_initial, reward_final, reward_half_gap_samples,
/// reward_lag_discount (optional), reward_difficulty_spread) from `reader`, starting from
/// `defaults`.
SkillParams ReadSkillParams(recipe::OptionReader& reader, const SkillParams& defaults);

/// The skill of each policy version, built up as training steps consume samples. A value type.
class SkillModel {
 public:
  explicit SkillModel(const SkillParams& params);

  /// Skill of policy version `version` (version 0 is the initial policy). REQUIRES: version <=
  /// the number of recorded steps.
  double Skill(int version) const;
  /// Records that train step `step` (making version step + 1) consumed samples with these policy
  /// lags (fractional when a sample's turns came from several versions), each worth
  /// LagWeight(lag, objective) times `efficiency` (SelectionEfficiency of its batch); samples
  /// with lag > `staleness_bound` carry no weight. REQUIRES: step == steps().
  void RecordStep(int step, std::span<const double> lags, int staleness_bound,
                  Objective objective = Objective::kPpo, double efficiency = 1.0);
  /// Steps recorded so far.
  int steps() const { return static_cast<int>(effective_.size()) - 1; }
  /// Effective samples consumed by version `version`.
  double EffectiveSamples(int version) const;
  /// Chance that a trajectory on a prompt of `difficulty` succeeds at `skill`.
  double SuccessProbability(double skill, double difficulty) const;
  /// The evaluation score of version `version`: its expected reward on held-out prompts of these
  /// difficulties (the mean chance of success; no sampling noise, so that it does not depend on
  /// which trajectories a system happened to train on). REQUIRES: version <= steps().
  double EvalScore(int version, std::span<const double> heldout_difficulties) const;

  const SkillParams& params() const { return params_; }

 private:
  SkillParams params_;
  std::vector<double> effective_;  // effective samples after each version; [0] = 0
};

}  // namespace libra::workload
