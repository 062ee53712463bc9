// SkillModel: a *modelled* reward curve for the simulator. The policy's skill (its chance of
// solving an average prompt) rises with the training samples it has consumed; samples generated
// by an older policy count less, and samples beyond the staleness bound not at all. Reward-vs-time
// curves from the simulator come from here and are labelled "modelled" wherever they are shown.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "recipe/options.h"

namespace libra::workload {

struct SkillParams {
  /// Skill of the initial policy (chance of success on a prompt of difficulty 0.5).
  double initial = 0.3;
  /// Skill the policy approaches with unlimited fresh samples.
  double final = 0.8;
  /// Effective samples that close half of the gap between initial and final.
  double half_gap_samples = 20000;
  /// Weight of a sample per step of policy lag: weight = lag_discount^lag (1 = lag costs nothing).
  double lag_discount = 0.85;
  /// How strongly difficulty moves a prompt's chance of success around the skill, in logits:
  /// logit(p) = logit(skill) + difficulty_spread * (0.5 - difficulty).
  double difficulty_spread = 4.0;

  bool operator==(const SkillParams&) const = default;
};

/// Reads the skill parameters' keys (reward_initial, reward_final, reward_half_gap_samples,
/// reward_lag_discount, reward_difficulty_spread) from `reader`, starting from `defaults`.
SkillParams ReadSkillParams(recipe::OptionReader& reader, const SkillParams& defaults);

/// The skill of each policy version, built up as training steps consume samples. A value type.
class SkillModel {
 public:
  explicit SkillModel(const SkillParams& params);

  /// Skill of policy version `version` (version 0 is the initial policy). REQUIRES: version <=
  /// the number of recorded steps.
  double Skill(int version) const;
  /// Records that train step `step` (making version step + 1) consumed samples with these policy
  /// lags (fractional when a sample's turns came from several versions); samples with lag >
  /// `staleness_bound` carry no weight. REQUIRES: step == steps().
  void RecordStep(int step, std::span<const double> lags, int staleness_bound);
  /// Steps recorded so far.
  int steps() const { return static_cast<int>(effective_.size()) - 1; }
  /// Effective samples consumed by version `version`.
  double EffectiveSamples(int version) const;
  /// Chance that a trajectory on a prompt of `difficulty` succeeds at `skill`.
  double SuccessProbability(double skill, double difficulty) const;

  const SkillParams& params() const { return params_; }

 private:
  SkillParams params_;
  std::vector<double> effective_;  // effective samples after each version; [0] = 0
};

}  // namespace libra::workload
