#include "workload/skill.h"

#include <cmath>

#include "common/check.h"
#include "common/strings.h"

namespace libra::workload {

SkillParams ReadSkillParams(recipe::OptionReader& reader, const SkillParams& defaults) {
  SkillParams p;
  p.initial = reader.Double("reward_initial", defaults.initial, 0, 1);
  p.final = reader.Double("reward_final", defaults.final, 0, 1);
  p.half_gap_samples = reader.Double("reward_half_gap_samples", defaults.half_gap_samples, 1, 1e12);
  p.lag_discount = reader.Double("reward_lag_discount", defaults.lag_discount, 0, 1);
  p.difficulty_spread =
      reader.Double("reward_difficulty_spread", defaults.difficulty_spread, 0, 50);
  if (p.initial > p.final) {
    reader.Error("reward_final",
                 StrFormat("must be >= reward_initial (%g > %g): skill only grows with training",
                           p.initial, p.final));
  }
  return p;
}

SkillModel::SkillModel(const SkillParams& params) : params_(params), effective_{0.0} {}

double SkillModel::Skill(int version) const {
  const double samples = EffectiveSamples(version);
  return params_.final -
         (params_.final - params_.initial) * std::exp2(-samples / params_.half_gap_samples);
}

void SkillModel::RecordStep(int step, std::span<const double> lags, int staleness_bound) {
  LIBRA_CHECK(step == steps()) << "step " << step << " recorded after " << steps() << " steps";
  double weight = 0;
  for (double lag : lags) {
    LIBRA_CHECK(lag >= 0) << "negative policy lag " << lag;
    if (lag > staleness_bound) continue;
    weight += std::pow(params_.lag_discount, lag);
  }
  effective_.push_back(effective_.back() + weight);
}

double SkillModel::EffectiveSamples(int version) const {
  LIBRA_CHECK(version >= 0 && version <= steps())
      << "version " << version << " with " << steps() << " steps recorded";
  return effective_[static_cast<size_t>(version)];
}

double SkillModel::SuccessProbability(double skill, double difficulty) const {
  // logit(0) and logit(1) are infinite: the limits are exact, so return them rather than NaN.
  if (!(skill > 0)) return 0;
  if (!(skill < 1)) return 1;
  if (std::isnan(difficulty)) difficulty = 0.5;
  difficulty = std::fmin(std::fmax(difficulty, 0.0), 1.0);
  const double logit =
      std::log(skill / (1 - skill)) + params_.difficulty_spread * (0.5 - difficulty);
  return 1 / (1 + std::exp(-logit));
}

}  // namespace libra::workload
