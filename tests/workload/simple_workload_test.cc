#include "workload/simple_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace libra::workload {
namespace {

recipe::WorkloadSpec DefaultSpec() { return recipe::WorkloadSpec(); }

TEST(SimpleWorkloadTest, SameSeedGivesIdenticalPromptsAndScripts) {
  // Two workloads with one seed agree on every prompt and every trajectory.
  const SimpleWorkload a(DefaultSpec(), 5);
  const SimpleWorkload b(DefaultSpec(), 5);
  for (int64_t p = 0; p < 20; ++p) {
    EXPECT_EQ(a.Prompt(p), b.Prompt(p));
    for (int s = 0; s < 4; ++s) EXPECT_EQ(a.Script(p, s, 0), b.Script(p, s, 0));
  }
}

TEST(SimpleWorkloadTest, DifferentSeedGivesDifferentScripts) {
  // Another seed gives other prompts and trajectories (nearly all of them differ).
  const SimpleWorkload a(DefaultSpec(), 5);
  const SimpleWorkload b(DefaultSpec(), 6);
  int same_scripts = 0;
  int same_prompts = 0;
  for (int64_t p = 0; p < 50; ++p) {
    same_prompts += a.Prompt(p) == b.Prompt(p) ? 1 : 0;
    same_scripts += a.Script(p, 0, 0) == b.Script(p, 0, 0) ? 1 : 0;
  }
  EXPECT_LT(same_prompts, 5);
  EXPECT_LT(same_scripts, 5);
}

TEST(SimpleWorkloadTest, ScriptDoesNotDependOnGenerationOrder) {
  // Script(p, s) is the same whether it is asked first, last, or after many others: each
  // trajectory has its own stream.
  const SimpleWorkload fresh(DefaultSpec(), 9);
  const TrajectoryScript expected = fresh.Script(7, 3, 0);
  const PromptInfo expected_prompt = fresh.Prompt(7);

  const SimpleWorkload busy(DefaultSpec(), 9);
  for (int64_t p = 20; p >= 0; --p) {
    busy.Prompt(p);
    for (int s = 0; s < 8; ++s) busy.Script(p, s, 0);
  }
  EXPECT_EQ(busy.Script(7, 3, 0), expected);
  EXPECT_EQ(busy.Prompt(7), expected_prompt);
  // Samples of one prompt are different trajectories.
  EXPECT_NE(busy.Script(7, 4, 0), expected);
}

TEST(SimpleWorkloadTest, TruncatesAtMaxTurnsWithZeroReward) {
  // When every turn wants a tool, the max_turns-th turn is recorded as truncated and the reward
  // is 0 even though the prompt would always be solved.
  recipe::WorkloadSpec spec;
  spec.tool_call_probability = 1.0;
  spec.max_turns = 3;
  spec.max_new_tokens = 1000000;
  spec.success_rate = 1.0;
  spec.tool_output_tokens = 77;
  const SimpleWorkload workload(spec, 1);
  for (int64_t p = 0; p < 20; ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const TrajectoryScript script = workload.Script(p, 0, 0);
    ASSERT_EQ(script.turns.size(), 3u);
    for (size_t t = 0; t + 1 < script.turns.size(); ++t) {
      EXPECT_EQ(script.turns[t].end, TurnEnd::kToolCall);
      EXPECT_EQ(script.turns[t].tool, "tool");
      EXPECT_EQ(script.turns[t].tool_output_tokens, 77);
      EXPECT_GE(script.turns[t].generated_tokens, 1);
    }
    EXPECT_EQ(script.turns.back().end, TurnEnd::kTruncated);
    EXPECT_TRUE(script.truncated());
    EXPECT_EQ(script.reward, 0.0);
  }
}

TEST(SimpleWorkloadTest, TruncatesAtMaxNewTokensExactly) {
  // A trajectory that reaches max_new_tokens is cut to exactly that many generated tokens, its
  // last turn is truncated and its reward is 0.
  recipe::WorkloadSpec spec;
  spec.tool_call_probability = 1.0;
  spec.max_turns = 1000;
  spec.turn_tokens = 40;
  spec.max_new_tokens = 100;
  spec.success_rate = 1.0;
  const SimpleWorkload workload(spec, 2);
  for (int64_t p = 0; p < 20; ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const TrajectoryScript script = workload.Script(p, 1, 0);
    EXPECT_EQ(script.generated_tokens(), 100);
    EXPECT_EQ(script.turns.back().end, TurnEnd::kTruncated);
    EXPECT_GE(script.turns.back().generated_tokens, 1);
    EXPECT_EQ(script.reward, 0.0);
  }
}

TEST(SimpleWorkloadTest, ZeroToolProbabilityGivesSingleTurn) {
  // Without tool calls every trajectory is one turn that stops (or is truncated by tokens).
  recipe::WorkloadSpec spec;
  spec.tool_call_probability = 0.0;
  const SimpleWorkload workload(spec, 3);
  for (int64_t p = 0; p < 50; ++p) {
    const TrajectoryScript script = workload.Script(p, 0, 0);
    ASSERT_EQ(script.turns.size(), 1u);
    EXPECT_NE(script.turns[0].end, TurnEnd::kToolCall);
    EXPECT_TRUE(script.turns[0].tool.empty());
  }
}

TEST(SimpleWorkloadTest, RewardFollowsSuccessRate) {
  // Untruncated trajectories succeed with the mean success rate: never at 0, always at 1, about
  // 30% at 0.3.
  struct Case {
    std::string name;
    double success_rate;
    double mean;
    double tolerance;
  };
  const std::vector<Case> cases = {
      {"never", 0.0, 0.0, 0.0},
      {"always", 1.0, 1.0, 0.0},
      {"thirty percent", 0.3, 0.3, 0.04},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    recipe::WorkloadSpec spec;
    spec.tool_call_probability = 0.0;
    spec.max_new_tokens = 1 << 30;
    spec.success_rate = c.success_rate;
    const SimpleWorkload workload(spec, 4);
    double sum = 0;
    int n = 0;
    for (int64_t p = 0; p < 500; ++p) {
      for (int s = 0; s < 8; ++s) {
        const TrajectoryScript script = workload.Script(p, s, 0);
        ASSERT_FALSE(script.truncated());
        ASSERT_TRUE(script.reward == 0.0 || script.reward == 1.0);
        sum += script.reward;
        ++n;
      }
    }
    EXPECT_NEAR(sum / n, c.mean, c.tolerance);
  }
}

TEST(SimpleWorkloadTest, GroupMembersShareDifficulty) {
  // Samples of one prompt share its difficulty: the mean reward per prompt varies across prompts
  // much more than independent samples would make it (binomial noise of the group mean).
  recipe::WorkloadSpec spec;
  spec.tool_call_probability = 0.0;
  spec.max_new_tokens = 1 << 30;
  spec.success_rate = 0.5;
  const SimpleWorkload workload(spec, 8);
  constexpr int kPrompts = 300;
  constexpr int kGroup = 16;
  std::vector<double> means;
  double within = 0;  // pooled within-group variance
  for (int64_t p = 0; p < kPrompts; ++p) {
    double sum = 0;
    for (int s = 0; s < kGroup; ++s) sum += workload.Script(p, s, 0).reward;
    const double mean = sum / kGroup;
    means.push_back(mean);
    within += mean * (1 - mean);  // variance of a 0/1 variable with this mean
  }
  within /= kPrompts;
  double grand = 0;
  for (double m : means) grand += m;
  grand /= kPrompts;
  double across = 0;
  for (double m : means) across += (m - grand) * (m - grand);
  across /= kPrompts - 1;
  // Independent samples: across ~= within / kGroup. Shared difficulty (uniform p): across ~= 1/12.
  EXPECT_GT(across, 3 * within / kGroup) << "across " << across << ", within " << within;
  EXPECT_NEAR(grand, 0.5, 0.05);
}

TEST(SimpleWorkloadTest, PromptLengthsStayWithinHalfOfMean) {
  // Prompt lengths are uniform in [mean/2, mean*3/2] (at least 1 token), with the given mean.
  struct Case {
    std::string name;
    int64_t mean;
    int64_t lo;
    int64_t hi;
  };
  const std::vector<Case> cases = {
      {"default", 512, 256, 768},
      {"odd", 101, 50, 151},
      {"one token", 1, 1, 1},
      {"two tokens", 2, 1, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    recipe::WorkloadSpec spec;
    spec.prompt_tokens = c.mean;
    const SimpleWorkload workload(spec, 6);
    int64_t min_seen = INT64_MAX;
    int64_t max_seen = 0;
    double sum = 0;
    constexpr int kPrompts = 4000;
    for (int64_t p = 0; p < kPrompts; ++p) {
      const PromptInfo prompt = workload.Prompt(p);
      EXPECT_EQ(prompt.index, p);
      min_seen = std::min(min_seen, prompt.prompt_tokens);
      max_seen = std::max(max_seen, prompt.prompt_tokens);
      sum += static_cast<double>(prompt.prompt_tokens);
    }
    EXPECT_EQ(min_seen, c.lo);
    EXPECT_EQ(max_seen, c.hi);
    EXPECT_NEAR(sum / kPrompts, static_cast<double>(c.lo + c.hi) / 2, 0.03 * c.mean + 0.05);
  }
}

TEST(SimpleWorkloadTest, TurnTokensHaveTheConfiguredMedian) {
  // Tokens per turn are log-normal around turn_tokens: about half the turns are shorter.
  recipe::WorkloadSpec spec;
  spec.tool_call_probability = 0.0;
  spec.turn_tokens = 300;
  spec.turn_tokens_sigma = 0.5;
  spec.max_new_tokens = 1 << 30;
  const SimpleWorkload workload(spec, 10);
  std::vector<int64_t> tokens;
  for (int64_t p = 0; p < 4000; ++p) tokens.push_back(workload.Script(p, 0, 0).generated_tokens());
  std::sort(tokens.begin(), tokens.end());
  const int64_t median = tokens[tokens.size() / 2];
  EXPECT_NEAR(static_cast<double>(median), 300.0, 15.0);
}

}  // namespace
}  // namespace libra::workload
