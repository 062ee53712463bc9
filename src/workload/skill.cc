#include "workload/skill.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "common/strings.h"

namespace libra::workload {

SkillParams ReadSkillParams(recipe::OptionReader& reader, const SkillParams& defaults) {
  SkillParams p;
  p.initial = reader.Double("reward_initial", defaults.initial, 0, 1);
  p.final = reader.Double("reward_final", defaults.final, 0, 1);
  p.half_gap_samples = reader.Double("reward_half_gap_samples", defaults.half_gap_samples, 1, 1e12);
  p.lag_discount = defaults.lag_discount;
  if (reader.Has("reward_lag_discount")) {
    p.lag_discount = reader.Double("reward_lag_discount", 1, 0, 1);
  }
  p.difficulty_spread =
      reader.Double("reward_difficulty_spread", defaults.difficulty_spread, 0, 50);
  if (p.initial > p.final) {
    reader.Error("reward_final",
                 StrFormat("must be >= reward_initial (%g > %g): skill only grows with training",
                           p.initial, p.final));
  }
  return p;
}

double LagWeight(double lag, Objective objective, std::optional<double> lag_discount) {
  if (lag_discount) return std::pow(*lag_discount, std::max(0.0, lag));
  struct Point {
    double lag;
    double weight;
  };
  // AReaL (arXiv 2505.24298): PPO from Fig. 5a (training reward at 1000 updates, share of the
  // gain of staleness 0); decoupled from Table 2 (mean over AIME24/25, AMC23, MATH500 of the
  // share of the staleness-0 gain over the base model). "Unbounded" is placed at lag 64.
  static constexpr Point kPpo[] = {{0, 1},    {1, 1.00},  {2, 0.96}, {4, 0.72},
                                   {8, 0.62}, {16, 0.48}, {64, 0.42}};
  static constexpr Point kDecoupled[] = {{0, 1}, {4, 1.0}, {8, 0.90}, {16, 0.90}, {64, 0.70}};
  const std::span<const Point> points = objective == Objective::kPpo
                                            ? std::span<const Point>(kPpo)
                                            : std::span<const Point>(kDecoupled);
  if (!(lag > 0)) return points.front().weight;
  for (size_t i = 1; i < points.size(); ++i) {
    if (lag <= points[i].lag) {
      const Point& a = points[i - 1];
      const Point& b = points[i];
      return a.weight + (b.weight - a.weight) * (lag - a.lag) / (b.lag - a.lag);
    }
  }
  return points.back().weight;
}

double SelectionEfficiency(std::span<const double> batch, std::span<const double> population) {
  if (batch.empty() || population.empty()) return 1;
  const auto bucket = [](double d) {
    if (!(d >= 1.0 / 3)) return 0;
    return d < 2.0 / 3 ? 1 : 2;
  };
  double pop[3] = {0, 0, 0};
  double got[3] = {0, 0, 0};
  for (double d : population) pop[bucket(d)] += 1.0 / static_cast<double>(population.size());
  for (double d : batch) got[bucket(d)] += 1.0 / static_cast<double>(batch.size());
  double sum = 0;
  double sum_sq = 0;
  for (double d : batch) {
    const int b = bucket(d);
    const double w = pop[b] / got[b];
    sum += w;
    sum_sq += w * w;
  }
  if (!(sum_sq > 0)) return 0;
  return std::min(1.0, sum * sum / (static_cast<double>(batch.size()) * sum_sq));
}

SkillModel::SkillModel(const SkillParams& params) : params_(params), effective_{0.0} {}

double SkillModel::Skill(int version) const {
  const double samples = EffectiveSamples(version);
  return params_.final -
         (params_.final - params_.initial) * std::exp2(-samples / params_.half_gap_samples);
}

void SkillModel::RecordStep(int step, std::span<const double> lags, int staleness_bound,
                            Objective objective, double efficiency) {
  LIBRA_CHECK(step == steps()) << "step " << step << " recorded after " << steps() << " steps";
  double weight = 0;
  for (double lag : lags) {
    LIBRA_CHECK(lag >= 0) << "negative policy lag " << lag;
    if (lag > staleness_bound) continue;
    weight += LagWeight(lag, objective, params_.lag_discount);
  }
  effective_.push_back(effective_.back() + weight * efficiency);
}

double SkillModel::EvalScore(int version, std::span<const double> heldout) const {
  if (heldout.empty()) return Skill(version);
  const double skill = Skill(version);
  double sum = 0;
  for (double d : heldout) sum += SuccessProbability(skill, d);
  return sum / static_cast<double>(heldout.size());
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
