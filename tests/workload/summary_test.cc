#include "workload/summary.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace libra::workload {
namespace {

// A workload whose trajectory for (prompt, sample) has prompt + 1 turns: `prompt` tool calls
// (latency prompt + sample seconds, output 10 tokens, every second one a failure, timeouts when
// the version is odd) and a final stop of 100 tokens, or a truncation for sample 1. Successful
// when the skill is at least 0.5. Records its calls.
class FakeWorkload : public Workload {
 public:
  std::string Describe() const override { return "fake"; }
  PromptInfo Prompt(int64_t index) const override { return PromptInfo{index, 10, 0.5}; }
  TrajectoryScript Script(int64_t prompt, int sample, int policy_version,
                          double skill) const override {
    calls.emplace_back(prompt, sample, policy_version, skill);
    TrajectoryScript script;
    for (int64_t i = 0; i < prompt; ++i) {
      TurnScript t;
      t.generated_tokens = 10;
      t.end = TurnEnd::kToolCall;
      t.tool = "tool";
      t.tool_status = policy_version % 2 == 1 ? ToolStatus::kTimeout
                      : i % 2 == 1            ? ToolStatus::kFailure
                                              : ToolStatus::kSuccess;
      t.tool_output_tokens = 10;
      t.tool_latency_s = static_cast<double>(prompt + sample);
      script.turns.push_back(t);
    }
    TurnScript last;
    last.generated_tokens = 100;
    last.end = sample == 1 ? TurnEnd::kTruncated : TurnEnd::kStop;
    script.turns.push_back(last);
    script.reward = sample != 1 && skill >= 0.5 ? 1 : 0;
    return script;
  }
  const SkillParams& skill_params() const override { return skill_; }

  mutable std::vector<std::tuple<int64_t, int, int, double>> calls;

 private:
  SkillParams skill_;
};

TEST(SummaryTest, QuantilesByNearestRank) {
  // The p-quantile is the ceil(p * n)-th smallest value; an empty set gives zeros.
  struct Case {
    std::string name;
    std::vector<double> values;
    Quantiles expected;
  };
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  const std::vector<Case> cases = {
      {"empty", {}, {0, 0, 0, 0, 0}},
      {"one value", {5}, {5, 5, 5, 5, 5}},
      {"three unsorted values", {3, 1, 2}, {2, 3, 3, 3, 2}},
      {"one to a hundred", hundred, {50, 90, 99, 100, 50.5}},
      {"two values", {1, 10}, {1, 10, 10, 10, 5.5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(QuantilesOf(c.values), c.expected);
  }
}

TEST(SummaryTest, SummarizesEveryPromptAndSamplePerVersion) {
  // Each version gets prompts x group_size scripts at the given skill, in version order.
  const FakeWorkload w;
  const std::vector<VersionSummary> out = Summarize(w, 3, 2, {3, 0}, 0.7);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].version, 3);
  EXPECT_EQ(out[1].version, 0);
  ASSERT_EQ(w.calls.size(), 12u);
  EXPECT_EQ(w.calls.front(), std::make_tuple(int64_t{0}, 0, 3, 0.7));
  EXPECT_EQ(w.calls.back(), std::make_tuple(int64_t{2}, 1, 0, 0.7));

  const VersionSummary& v = out[1];
  // Turns 1, 1, 2, 2, 3, 3; tool calls 0, 0, 1, 1, 2, 2.
  EXPECT_EQ(v.turns, (Quantiles{2, 3, 3, 3, 2}));
  EXPECT_EQ(v.tool_calls, (Quantiles{1, 2, 2, 2, 1}));
  EXPECT_EQ(v.generated_tokens, (Quantiles{110, 120, 120, 120, 110}));
  // Latencies per call: prompt 1 -> 1, 2; prompt 2 -> 2, 2, 3, 3.
  EXPECT_EQ(v.tool_latency_s, (Quantiles{2, 3, 3, 3, 13.0 / 6}));
  EXPECT_EQ(v.tool_output_tokens, (Quantiles{10, 10, 10, 10, 10}));
  EXPECT_DOUBLE_EQ(v.truncated_fraction, 0.5);
  EXPECT_DOUBLE_EQ(v.success_fraction, 0.5);
  EXPECT_DOUBLE_EQ(v.tool_failure_fraction, 2.0 / 6);
  EXPECT_DOUBLE_EQ(v.tool_timeout_fraction, 0);
  EXPECT_DOUBLE_EQ(out[0].tool_timeout_fraction, 1);
  EXPECT_DOUBLE_EQ(out[0].tool_failure_fraction, 0);
}

TEST(SummaryTest, NoTrajectoriesGiveZeros) {
  // Zero prompts, or a group of zero, still give one all-zero summary per version.
  const FakeWorkload w;
  for (const auto& [prompts, group] : {std::pair{0, 4}, std::pair{3, 0}}) {
    const std::vector<VersionSummary> out = Summarize(w, prompts, group, {7}, 0.5);
    ASSERT_EQ(out.size(), 1u);
    VersionSummary expected;
    expected.version = 7;
    EXPECT_EQ(out[0], expected);
  }
  EXPECT_TRUE(Summarize(w, 3, 3, {}, 0.5).empty());
}

TEST(SummaryTest, NoToolCallsGiveZeroToolFractions) {
  // Trajectories without tool calls have no latency quantiles and zero tool fractions.
  const FakeWorkload w;
  const std::vector<VersionSummary> out = Summarize(w, 1, 1, {1}, 0.0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tool_latency_s, Quantiles{});
  EXPECT_DOUBLE_EQ(out[0].tool_failure_fraction, 0);
  EXPECT_DOUBLE_EQ(out[0].tool_timeout_fraction, 0);
  EXPECT_DOUBLE_EQ(out[0].success_fraction, 0);
}

}  // namespace
}  // namespace libra::workload
