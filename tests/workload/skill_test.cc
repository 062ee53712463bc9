#include "workload/skill.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::workload {
namespace {

recipe::OptionValue Number(double v) {
  recipe::OptionValue x;
  x.kind = recipe::OptionValue::Kind::kDouble;
  x.double_value = v;
  return x;
}

recipe::OptionTable Table(std::vector<recipe::OptionEntry> entries) {
  recipe::OptionTable table;
  table.entries = std::move(entries);
  table.where = "w.toml:1:1";
  table.path = "workload";
  return table;
}

TEST(SkillModelTest, StartsAtInitialSkill) {
  // Before any training step, version 0 has the initial skill and no effective samples.
  const SkillModel model(SkillParams{});
  EXPECT_EQ(model.steps(), 0);
  EXPECT_DOUBLE_EQ(model.EffectiveSamples(0), 0);
  EXPECT_DOUBLE_EQ(model.Skill(0), SkillParams{}.initial);
}

TEST(SkillModelTest, EffectiveSamplesDiscountLagAndDropStaleSamples) {
  // A step's samples weigh lag_discount^lag each, and nothing beyond the staleness bound.
  struct Case {
    std::string name;
    std::vector<double> lags;
    int bound;
    double effective;
  };
  const double d = 0.5;
  const std::vector<Case> cases = {
      {"no samples", {}, 2, 0},
      {"fresh samples weigh one", {0, 0, 0}, 2, 3},
      {"lagged samples are discounted", {0, 1, 2}, 2, 1 + d + d * d},
      {"beyond the bound weighs nothing", {0, 3, 5}, 2, 1},
      {"synchronous bound keeps only fresh samples", {0, 1}, 0, 1},
      {"a fractional lag (turns from two versions) is discounted smoothly", {0.5}, 2,
       0.70710678118654757},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SkillParams params;
    params.lag_discount = d;
    SkillModel model(params);
    model.RecordStep(0, c.lags, c.bound);
    EXPECT_EQ(model.steps(), 1);
    EXPECT_DOUBLE_EQ(model.EffectiveSamples(1), c.effective);
  }
}

TEST(SkillModelTest, HalfGapSamplesCloseHalfTheGap) {
  // Skill follows final - (final - initial) * 2^(-E / half_gap): each half_gap halves the gap.
  SkillParams params;
  params.initial = 0.2;
  params.final = 0.6;
  params.half_gap_samples = 100;
  SkillModel model(params);
  const std::vector<double> fresh(100, 0);
  model.RecordStep(0, fresh, 1);
  model.RecordStep(1, fresh, 1);
  EXPECT_DOUBLE_EQ(model.EffectiveSamples(2), 200);
  EXPECT_NEAR(model.Skill(1), 0.4, 1e-12);
  EXPECT_NEAR(model.Skill(2), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(model.Skill(0), 0.2);  // earlier versions keep their skill
}

TEST(SkillModelTest, StaleSamplesRaiseSkillLessThanFreshOnes) {
  // The same number of samples teaches less when they are stale.
  SkillModel fresh(SkillParams{});
  SkillModel stale(SkillParams{});
  fresh.RecordStep(0, std::vector<double>(1000, 0), 4);
  stale.RecordStep(0, std::vector<double>(1000, 3), 4);
  EXPECT_GT(fresh.Skill(1), stale.Skill(1));
  EXPECT_GT(stale.Skill(1), stale.Skill(0));
}

TEST(SkillModelTest, SuccessProbabilityFollowsSkillAndDifficulty) {
  // A prompt of difficulty 0.5 succeeds with the skill; easier ones more, harder ones less; the
  // extremes are exact and out-of-range inputs are clamped instead of producing NaN.
  const SkillModel model(SkillParams{});
  struct Case {
    std::string name;
    double skill;
    double difficulty;
    double expected;
  };
  const double easy = 1 / (1 + std::exp(-(std::log(0.3 / 0.7) + 4 * 0.5)));
  const double hard = 1 / (1 + std::exp(-(std::log(0.3 / 0.7) - 4 * 0.5)));
  const std::vector<Case> cases = {
      {"average prompt", 0.3, 0.5, 0.3},
      {"easiest prompt", 0.3, 0.0, easy},
      {"hardest prompt", 0.3, 1.0, hard},
      {"difficulty below range is clamped", 0.3, -3, easy},
      {"difficulty above range is clamped", 0.3, 7, hard},
      {"NaN difficulty counts as average", 0.3, std::nan(""), 0.3},
      {"no skill never succeeds", 0.0, 0.0, 0.0},
      {"negative skill never succeeds", -1, 0.5, 0.0},
      {"full skill always succeeds", 1.0, 1.0, 1.0},
      {"skill above one always succeeds", 2.0, 0.5, 1.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_NEAR(model.SuccessProbability(c.skill, c.difficulty), c.expected, 1e-12);
  }
}

TEST(SkillModelTest, ReadSkillParamsAppliesOverridesAndChecksThem) {
  // Absent keys keep the defaults, present ones override, bad ones are reported at their key.
  struct Case {
    std::string name;
    std::vector<recipe::OptionEntry> entries;
    SkillParams expected;
    std::string error;  // substring of the error; empty for success
  };
  SkillParams overridden;
  overridden.initial = 0.1;
  overridden.final = 0.9;
  overridden.half_gap_samples = 500;
  overridden.lag_discount = 1;
  overridden.difficulty_spread = 0;
  const std::vector<Case> cases = {
      {"defaults", {}, SkillParams{}, ""},
      {"every key",
       {{"reward_initial", Number(0.1)},
        {"reward_final", Number(0.9)},
        {"reward_half_gap_samples", Number(500)},
        {"reward_lag_discount", Number(1)},
        {"reward_difficulty_spread", Number(0)}},
       overridden,
       ""},
      {"initial above final",
       {{"reward_initial", Number(0.9)}},
       {},
       "workload.reward_final: must be >= reward_initial"},
      {"skill out of range", {{"reward_final", Number(1.5)}}, {}, "must be in [0, 1] (got 1.5)"},
      {"discount out of range", {{"reward_lag_discount", Number(-0.1)}}, {}, "must be in [0, 1]"},
      {"half gap below one sample", {{"reward_half_gap_samples", Number(0)}}, {}, "must be in"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const recipe::OptionTable table = Table(c.entries);
    recipe::OptionReader reader(table);
    const SkillParams read = ReadSkillParams(reader, SkillParams{});
    const Status status = reader.Finish();
    if (c.error.empty()) {
      EXPECT_OK(status);
      EXPECT_EQ(read, c.expected);
    } else {
      EXPECT_EQ(status.code(), StatusCode::kInvalidRecipe);
      EXPECT_NE(status.message().find(c.error), std::string::npos) << status.message();
    }
  }
}

TEST(SkillModelTest, LagWeightFollowsTheMeasuredCurves) {
  // PPO: AReaL Fig. 5a; decoupled: AReaL Table 2; linear in between, flat beyond lag 64.
  struct Case {
    double lag;
    Objective objective;
    double weight;
  };
  const std::vector<Case> cases = {
      {0, Objective::kPpo, 1.0},        {1, Objective::kPpo, 1.0},
      {2, Objective::kPpo, 0.96},       {3, Objective::kPpo, 0.84},
      {4, Objective::kPpo, 0.72},       {16, Objective::kPpo, 0.48},
      {1000, Objective::kPpo, 0.42},    {2, Objective::kDecoupled, 1.0},
      {4, Objective::kDecoupled, 1.0},  {6, Objective::kDecoupled, 0.95},
      {16, Objective::kDecoupled, 0.9}, {64, Objective::kDecoupled, 0.7},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.lag);
    EXPECT_NEAR(LagWeight(c.lag, c.objective, std::nullopt), c.weight, 1e-12);
  }
  EXPECT_DOUBLE_EQ(LagWeight(2, Objective::kPpo, 0.5), 0.25);  // the recipe's assumption
}

TEST(SkillModelTest, SelectionEfficiencyPenalisesOnlyAShiftedMix) {
  // A batch with the population's difficulty mix teaches fully; one made of the easy third only
  // (the first groups to finish) is down-weighted by its effective-sample fraction.
  const std::vector<double> population = {0.1, 0.2, 0.5, 0.6, 0.8, 0.9};
  EXPECT_DOUBLE_EQ(SelectionEfficiency(population, population), 1.0);
  const std::vector<double> shuffled = {0.9, 0.5, 0.1, 0.8, 0.2, 0.6};
  EXPECT_DOUBLE_EQ(SelectionEfficiency(shuffled, population), 1.0);
  // 4 easy + 2 medium for a population of 2 + 2 + 2: weights 0.5 x4, 1 x2 -> (4)^2/(6 * 3) = 0.889.
  const std::vector<double> easy = {0.1, 0.2, 0.15, 0.05, 0.5, 0.6};
  EXPECT_NEAR(SelectionEfficiency(easy, population), 16.0 / 18.0, 1e-12);
  EXPECT_DOUBLE_EQ(SelectionEfficiency({}, population), 1.0);
}

TEST(SkillModelTest, EvalScoreIsTheExpectedRewardOnHeldOutPrompts) {
  // The mean chance of success over the held-out difficulties; it rises with training and does
  // not depend on which samples were drawn.
  SkillModel model(SkillParams{});
  const std::vector<double> heldout = {0.2, 0.5, 0.8};
  double expected = 0;
  for (double d : heldout) expected += model.SuccessProbability(model.Skill(0), d) / 3;
  EXPECT_DOUBLE_EQ(model.EvalScore(0, heldout), expected);
  model.RecordStep(0, std::vector<double>(5000, 0.0), 2);
  EXPECT_GT(model.EvalScore(1, heldout), model.EvalScore(0, heldout));
  const std::vector<double> middle = {0.5};
  EXPECT_DOUBLE_EQ(model.EvalScore(0, middle), model.Skill(0));
}

TEST(SkillModelTest, EfficiencyScalesTheStepsSamples) {
  // RecordStep's efficiency multiplies the weighted samples (a biased batch teaches less).
  SkillModel a(SkillParams{});
  SkillModel b(SkillParams{});
  a.RecordStep(0, std::vector<double>(100, 0.0), 2, Objective::kPpo, 1.0);
  b.RecordStep(0, std::vector<double>(100, 0.0), 2, Objective::kPpo, 0.5);
  EXPECT_DOUBLE_EQ(a.EffectiveSamples(1), 100);
  EXPECT_DOUBLE_EQ(b.EffectiveSamples(1), 50);
}

}  // namespace
}  // namespace libra::workload
