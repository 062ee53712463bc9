#include "workload/agentic_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/strings.h"
#include "support/test_util.h"
#include "workload/summary.h"

namespace libra::workload {
namespace {

constexpr uint64_t kSeed = 20240601;

recipe::OptionValue Number(double v) {
  recipe::OptionValue x;
  x.kind = recipe::OptionValue::Kind::kDouble;
  x.double_value = v;
  return x;
}

recipe::OptionValue Integer(int64_t v) {
  recipe::OptionValue x;
  x.kind = recipe::OptionValue::Kind::kInt;
  x.int_value = v;
  return x;
}

recipe::OptionValue Text(const std::string& v) {
  recipe::OptionValue x;
  x.kind = recipe::OptionValue::Kind::kString;
  x.string_value = v;
  return x;
}

// A [workload] table as the recipe parser would hand it over: each value at its own line.
recipe::OptionTable Table(const std::vector<recipe::OptionEntry>& entries) {
  recipe::OptionTable table;
  table.where = "recipes/w.toml:1:1";
  table.path = "workload";
  int line = 2;
  for (recipe::OptionEntry e : entries) {
    e.value.where = StrFormat("recipes/w.toml:%d:1", line++);
    table.entries.push_back(e);
  }
  return table;
}

// The workload of `preset` with `entries` applied; fails the test on an error.
AgenticWorkload Make(const std::string& preset, const std::vector<recipe::OptionEntry>& entries,
                     uint64_t seed = kSeed) {
  auto defaults = PresetParams(preset);
  EXPECT_OK(defaults);
  auto params = ReadAgenticParams(*defaults, Table(entries));
  EXPECT_OK(params);
  return AgenticWorkload(preset, params.ok() ? *params : *defaults, seed);
}

// Caps lifted so that the length distribution is seen before truncation.
const std::vector<recipe::OptionEntry> kNoCaps = {
    {"max_new_tokens", Integer(10000000000)},
    {"max_turn_tokens", Integer(1000000000)},
};

std::vector<recipe::OptionEntry> With(std::vector<recipe::OptionEntry> base,
                                      const std::vector<recipe::OptionEntry>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double Variance(const std::vector<double>& v) {
  const double m = Mean(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double Correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const double mx = Mean(x), my = Mean(y);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

TEST(AgenticWorkloadTest, TotalTokensHaveATenfoldTail) {
  // Before caps, total generated tokens are log-normal with p99 about 10x the median and the
  // median at tokens_median (dapo-math: one turn, so the total is the drawn work).
  const AgenticWorkload w = Make("dapo-math", kNoCaps);
  std::vector<double> tokens;
  for (int p = 0; p < 4000; ++p) {
    tokens.push_back(static_cast<double>(w.Script(p, 0, 0, 0.5).generated_tokens()));
  }
  const Quantiles q = QuantilesOf(tokens);
  EXPECT_NEAR(q.p50 / w.params().tokens_median, 1.0, 0.06);
  EXPECT_NEAR(q.p99 / q.p50, 10.0, 1.5);
}

TEST(AgenticWorkloadTest, GroupsShareTheirLengths) {
  // Samples of one prompt vary less in log length than samples across prompts, by about
  // 1 - group_correlation; at correlation 1 a group's lengths are identical.
  struct Case {
    std::string name;
    double correlation;
    double min_ratio;
    double max_ratio;
  };
  const std::vector<Case> cases = {
      {"preset (0.6)", 0.6, 0.3, 0.5},
      {"independent", 0.0, 0.9, 1.1},
      {"identical", 1.0, 0.0, 0.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AgenticWorkload w =
        Make("dapo-math", With(kNoCaps, {{"group_correlation", Number(c.correlation)}}));
    std::vector<double> all;
    double within = 0;
    const int prompts = 400, group = 8;
    for (int p = 0; p < prompts; ++p) {
      std::vector<double> logs;
      for (int s = 0; s < group; ++s) {
        logs.push_back(std::log(static_cast<double>(w.Script(p, s, 0, 0.5).generated_tokens())));
      }
      within += Variance(logs) * group / (group - 1) / prompts;
      all.insert(all.end(), logs.begin(), logs.end());
    }
    const double ratio = within / Variance(all);
    EXPECT_GE(ratio, c.min_ratio - 1e-6);
    EXPECT_LE(ratio, c.max_ratio + 1e-6);
  }
}

TEST(AgenticWorkloadTest, DifficultyShiftsLengthAndSuccess) {
  // Harder prompts run longer and succeed less often; a group shares its prompt.
  const AgenticWorkload w = Make("dapo-math", kNoCaps);
  std::vector<double> difficulty, log_tokens, reward;
  for (int p = 0; p < 2000; ++p) {
    const PromptInfo info = w.Prompt(p);
    EXPECT_EQ(info, w.Prompt(p));
    EXPECT_GE(info.difficulty, 0);
    EXPECT_LE(info.difficulty, 1);
    const TrajectoryScript s = w.Script(p, 0, 0, 0.5);
    difficulty.push_back(info.difficulty);
    log_tokens.push_back(std::log(static_cast<double>(s.generated_tokens())));
    reward.push_back(s.reward);
  }
  EXPECT_GT(Correlation(difficulty, log_tokens), 0.3);
  EXPECT_LT(Correlation(difficulty, reward), -0.3);
  EXPECT_NEAR(Mean(difficulty), 0.5, 0.03);  // uniform in [0, 1]
}

// For every trajectory with a tool call: whether its first call failed, and the tokens it still
// generates after that call.
void FirstCallOutcomes(const AgenticWorkload& w, std::vector<double>* failed,
                       std::vector<double>* remaining) {
  for (int p = 0; p < 3000; ++p) {
    const TrajectoryScript s = w.Script(p, 0, 0, 0.5);
    if (s.turns.size() < 2) continue;
    failed->push_back(s.turns[0].tool_status == ToolStatus::kFailure ? 1 : 0);
    remaining->push_back(static_cast<double>(s.generated_tokens() - s.turns[0].generated_tokens));
  }
}

TEST(AgenticWorkloadTest, ToolOutcomesRevealRemainingWorkOnlyWithCausalStrength) {
  // At strength 1 a failed call predicts more work after it; at 0 the outcome says nothing
  // (correlation within sampling noise of zero), and the failure rate is the same either way.
  struct Case {
    std::string name;
    double strength;
    double min_corr;
    double max_corr;
  };
  const std::vector<Case> cases = {
      {"no causal link", 0.0, -0.04, 0.04},
      {"strong causal link", 1.0, 0.3, 1.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AgenticWorkload w = Make("r2e-gym", {{"causal_strength", Number(c.strength)},
                                               {"validator_failure_rate", Number(0.5)}});
    std::vector<double> failed, remaining;
    FirstCallOutcomes(w, &failed, &remaining);
    ASSERT_GT(failed.size(), 1500u);
    const double corr = Correlation(failed, remaining);
    EXPECT_GE(corr, c.min_corr);
    EXPECT_LE(corr, c.max_corr);
  }
}

TEST(AgenticWorkloadTest, SlowToolCallsRevealRemainingWorkOnlyWithCausalStrength) {
  // The latency of a call follows the same latent work: long trajectories meet slow tools at
  // strength 1, at 0 latency and remaining work are unrelated.
  for (const double strength : {0.0, 1.0}) {
    SCOPED_TRACE(strength);
    const AgenticWorkload w = Make("r2e-gym", {{"causal_strength", Number(strength)}});
    std::vector<double> log_latency, remaining;
    for (int p = 0; p < 3000; ++p) {
      const TrajectoryScript s = w.Script(p, 0, 0, 0.5);
      if (s.turns.size() < 2) continue;
      log_latency.push_back(std::log(s.turns[0].tool_latency_s));
      remaining.push_back(std::log(static_cast<double>(s.generated_tokens())));
    }
    const double corr = Correlation(log_latency, remaining);
    if (strength == 0) {
      EXPECT_NEAR(corr, 0, 0.04);
    } else {
      EXPECT_GT(corr, 0.6);
    }
  }
}

TEST(AgenticWorkloadTest, DriftFactorFollowsItsMode) {
  // Each drift mode moves the length scale in its direction and by its factor.
  struct Case {
    std::string name;
    std::vector<recipe::OptionEntry> entries;
    std::vector<std::pair<int, double>> factors;  // (version, expected factor)
  };
  const std::vector<Case> cases = {
      {"none", {}, {{0, 1}, {100, 1}, {1000, 1}}},
      {"growth (default x3 over 200)",
       {{"drift", Text("growth")}},
       {{0, 1}, {100, 2}, {200, 3}, {400, 3}}},
      {"shrink (default x0.5)", {{"drift", Text("shrink")}}, {{0, 1}, {100, 0.75}, {300, 0.5}}},
      {"u-shape",
       {{"drift", Text("u-shape")}, {"drift_factor", Number(0.4)}, {"drift_steps", Integer(100)}},
       {{0, 1}, {25, 0.7}, {50, 0.4}, {75, 0.7}, {100, 1}, {150, 1}}},
      {"step",
       {{"drift", Text("step")}, {"drift_step_at", Integer(10)}},
       {{0, 1}, {9, 1}, {10, 2}, {50, 2}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AgenticWorkload w = Make("r2e-gym", c.entries);
    for (const auto& [version, factor] : c.factors) {
      SCOPED_TRACE(version);
      EXPECT_NEAR(DriftFactor(w.params(), version), factor, 1e-12);
    }
  }
}

TEST(AgenticWorkloadTest, DriftMovesTrajectoriesInItsDirection) {
  // Mean generated tokens (and, with tools, turns) at a later version move as the mode says, so
  // a split sized for version 0 goes stale.
  struct Case {
    std::string name;
    std::vector<recipe::OptionEntry> entries;
    int version;
    int direction;  // +1 longer, -1 shorter, 0 unchanged
  };
  const std::vector<Case> cases = {
      {"none", {}, 200, 0},
      {"growth", {{"drift", Text("growth")}}, 200, +1},
      {"shrink", {{"drift", Text("shrink")}}, 200, -1},
      {"u-shape at its bottom", {{"drift", Text("u-shape")}}, 100, -1},
      {"u-shape at its end", {{"drift", Text("u-shape")}}, 200, 0},
      {"step before", {{"drift", Text("step")}}, 99, 0},
      {"step after", {{"drift", Text("step")}}, 100, +1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AgenticWorkload w = Make("r2e-gym", c.entries);
    const std::vector<VersionSummary> s = Summarize(w, 200, 2, {0, c.version}, 0.5);
    const double tokens = s[1].generated_tokens.mean / s[0].generated_tokens.mean;
    const double turns = s[1].turns.mean / s[0].turns.mean;
    if (c.direction == 0) {
      EXPECT_DOUBLE_EQ(tokens, 1);
      EXPECT_DOUBLE_EQ(turns, 1);
    } else if (c.direction > 0) {
      EXPECT_GT(tokens, 1.3);
      EXPECT_GT(turns, 1.2);
    } else {
      EXPECT_LT(tokens, 0.8);
      EXPECT_LT(turns, 0.9);
    }
  }
}

TEST(AgenticWorkloadTest, LimitsTruncateAndZeroTheReward) {
  // Work beyond max_turns or max_new_tokens ends in a truncated last turn (no tool) with reward 0.
  struct Case {
    std::string name;
    std::string preset;
    std::vector<recipe::OptionEntry> entries;
    int max_turns;
    int64_t max_new_tokens;
  };
  const std::vector<Case> cases = {
      {"turn cap", "r2e-gym", {{"max_turns", Integer(2)}}, 2, 30000},
      {"token cap with tools", "r2e-gym", {{"max_new_tokens", Integer(2000)}}, 12, 2000},
      {"token cap single turn", "dapo-math", {{"max_new_tokens", Integer(3000)}}, 1, 3000},
      {"per-turn cap single turn", "dapo-math", {{"max_turn_tokens", Integer(3000)}}, 1, 3000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AgenticWorkload w = Make(c.preset, c.entries);
    int truncated = 0;
    for (int p = 0; p < 300; ++p) {
      const TrajectoryScript s = w.Script(p, 0, 0, 1.0);
      EXPECT_LE(static_cast<int>(s.turns.size()), c.max_turns);
      EXPECT_LE(s.generated_tokens(), c.max_new_tokens);
      if (!s.truncated()) {
        EXPECT_EQ(s.reward, 1);  // full skill: every finished trajectory succeeds
        continue;
      }
      ++truncated;
      EXPECT_EQ(s.reward, 0);
      EXPECT_TRUE(s.turns.back().tool.empty());
      const bool at_turn_cap = static_cast<int>(s.turns.size()) == c.max_turns;
      const bool at_token_cap = s.generated_tokens() == c.max_new_tokens ||
                                s.turns.back().generated_tokens == w.params().max_turn_tokens;
      EXPECT_TRUE(at_turn_cap || at_token_cap);
    }
    EXPECT_GT(truncated, 10);
  }
}

TEST(AgenticWorkloadTest, ContextCapBoundsEveryTrajectory) {
  // max_context_tokens caps prompt + generated + tool output; reaching it truncates, and the
  // workload reports the cap so that planners size memory for it.
  const AgenticWorkload capped = Make("swe-long", {{"max_context_tokens", Integer(40000)}});
  ASSERT_EQ(capped.MaxContextTokens(), std::optional<int64_t>(40000));
  EXPECT_FALSE(Make("swe-long", {}).MaxContextTokens().has_value());
  int at_cap = 0;
  for (int p = 0; p < 100; ++p) {
    const TrajectoryScript s = capped.Script(p, 0, 0, 0.5);
    const int64_t context =
        capped.Prompt(p).prompt_tokens + s.generated_tokens() + s.tool_output_tokens();
    EXPECT_LE(context, 40000) << "prompt " << p;
    if (context == 40000) {
      ++at_cap;
      EXPECT_TRUE(s.truncated());
      EXPECT_EQ(s.reward, 0);
    }
  }
  EXPECT_GT(at_cap, 10);
}

TEST(AgenticWorkloadTest, ScriptsAreDeterministicAndOrderIndependent) {
  // The same seed gives the same scripts whatever order they are asked for in; another seed
  // gives other scripts.
  const AgenticWorkload a = Make("r2e-gym", {});
  const AgenticWorkload b = Make("r2e-gym", {});
  const AgenticWorkload other = Make("r2e-gym", {}, kSeed + 1);
  std::vector<TrajectoryScript> forward, backward;
  for (int p = 0; p < 20; ++p) {
    for (int s = 0; s < 4; ++s) forward.push_back(a.Script(p, s, 3, 0.4));
  }
  for (int p = 19; p >= 0; --p) {
    for (int s = 3; s >= 0; --s) {
      b.Prompt(1000 - p);
      b.Script(p + 7, s, 0, 0.9);
      backward.push_back(b.Script(p, s, 3, 0.4));
    }
  }
  std::reverse(backward.begin(), backward.end());
  EXPECT_EQ(forward, backward);
  int differ = 0;
  for (int p = 0; p < 20; ++p) {
    if (other.Script(p, 0, 3, 0.4) != forward[static_cast<size_t>(p) * 4]) ++differ;
    EXPECT_EQ(a.Prompt(p), b.Prompt(p));
  }
  EXPECT_GT(differ, 15);
}

TEST(AgenticWorkloadTest, SkillChangesOnlyTheReward) {
  // A more skilled policy walks the same trajectory; only whether it succeeds changes, and it
  // never turns a success into a failure.
  const AgenticWorkload w = Make("search-r1", {});
  int gained = 0;
  for (int p = 0; p < 200; ++p) {
    TrajectoryScript low = w.Script(p, 1, 5, 0.2);
    const TrajectoryScript high = w.Script(p, 1, 5, 0.8);
    EXPECT_GE(high.reward, low.reward);
    if (high.reward > low.reward) ++gained;
    low.reward = high.reward;
    EXPECT_EQ(low, high);
  }
  EXPECT_GT(gained, 50);
}

TEST(AgenticWorkloadTest, EveryPresetGeneratesSaneTrajectories) {
  // Each preset respects its own limits and tool catalogue, and has its documented shape.
  struct Case {
    std::string preset;
    double min_mean_turns;
    double max_mean_turns;
    double max_truncated;
  };
  const std::vector<Case> cases = {
      {"r2e-gym", 2.5, 6, 0.12},
      {"search-r1", 2, 3, 0.15},
      {"dapo-math", 1, 1, 0.08},
      {"swe-long", 75, 95, 0.45},
  };
  ASSERT_EQ(cases.size(), AgenticPresetNames().size());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    const AgenticWorkload w = Make(c.preset, {});
    const AgenticParams& params = w.params();
    EXPECT_EQ(w.Describe(), c.preset);
    for (int p = 0; p < 100; ++p) {
      const PromptInfo info = w.Prompt(p);
      EXPECT_GE(info.prompt_tokens, 1);
      EXPECT_LE(info.prompt_tokens, params.prompt_tokens_max);
      for (int s = 0; s < 4; ++s) {
        const TrajectoryScript script = w.Script(p, s, 0, 0.5);
        ASSERT_FALSE(script.turns.empty());
        EXPECT_LE(static_cast<int>(script.turns.size()), params.max_turns);
        EXPECT_LE(script.generated_tokens(), params.max_new_tokens);
        EXPECT_TRUE(script.reward == 0 || script.reward == 1);
        for (size_t i = 0; i < script.turns.size(); ++i) {
          const TurnScript& t = script.turns[i];
          EXPECT_GE(t.generated_tokens, 1);
          EXPECT_LE(t.generated_tokens, params.max_turn_tokens);
          if (i + 1 < script.turns.size()) {
            ASSERT_EQ(t.end, TurnEnd::kToolCall);
            const ToolParams* tool = params.Tool(t.tool);
            ASSERT_NE(tool, nullptr) << t.tool;
            EXPECT_GT(tool->weight, 0);
            EXPECT_GE(t.tool_latency_s, 0);
            if (tool->timeout_s > 0) {
              EXPECT_LE(t.tool_latency_s, tool->timeout_s);
            }
            if (t.tool_status == ToolStatus::kTimeout) {
              EXPECT_EQ(t.tool_latency_s, tool->timeout_s);
            }
            EXPECT_GE(t.tool_output_tokens, 0);
            EXPECT_LE(t.tool_output_tokens, tool->output_tokens_max);
          } else {
            EXPECT_NE(t.end, TurnEnd::kToolCall);
            EXPECT_TRUE(t.tool.empty());
          }
        }
      }
    }
    const VersionSummary s = Summarize(w, 100, 4, {0}, 0.5)[0];
    EXPECT_GE(s.turns.mean, c.min_mean_turns);
    EXPECT_LE(s.turns.mean, c.max_mean_turns);
    EXPECT_LE(s.truncated_fraction, c.max_truncated);
    EXPECT_GT(s.success_fraction, 0.1);
  }
}

TEST(AgenticWorkloadTest, SweLongToolsTimeOut) {
  // Slow SWE tools sometimes reach their timeouts (300 s shell, 900 s tests), which then cost
  // exactly the timeout and return the timeout's error message.
  const AgenticWorkload w = Make("swe-long", {});
  std::set<std::string> tools;
  int timeouts = 0;
  for (int p = 0; p < 40; ++p) {
    for (const TurnScript& t : w.Script(p, 0, 0, 0.5).turns) {
      if (t.end != TurnEnd::kToolCall) continue;
      tools.insert(t.tool);
      if (t.tool_status != ToolStatus::kTimeout) continue;
      ++timeouts;
      EXPECT_EQ(t.tool_latency_s, w.params().Tool(t.tool)->timeout_s);
      EXPECT_EQ(t.tool_output_tokens, w.params().timeout_output_tokens);
    }
  }
  EXPECT_EQ(tools, (std::set<std::string>{"shell", "test"}));
  EXPECT_GT(timeouts, 0);
}

TEST(AgenticWorkloadTest, DefaultParamsAreTheR2eGymPreset) {
  // A default-constructed AgenticParams is r2e-gym, whose tool catalogue has every tool.
  auto r2e = PresetParams("r2e-gym");
  ASSERT_OK(r2e);
  EXPECT_EQ(*r2e, AgenticParams{});
  std::vector<std::string> names;
  for (const ToolParams& t : r2e->tools) names.push_back(t.name);
  EXPECT_EQ(names, AgenticToolNames());
  EXPECT_NEAR(r2e->tokens_sigma, std::log(10) / 2.326, 1e-4);
}

TEST(AgenticWorkloadTest, OverridesApplyAndBadOnesAreReported) {
  // Any parameter can be overridden; every problem is reported at its key, all at once.
  struct Case {
    std::string name;
    std::string preset;
    std::vector<recipe::OptionEntry> entries;
    std::vector<std::string> errors;  // substrings; empty for success
  };
  const std::vector<Case> cases = {
      {"overrides", "r2e-gym", {{"max_turns", Integer(8)}, {"causal_strength", Number(0.25)}}, {}},
      {"tool and reward keys",
       "swe-long",
       {{"shell_timeout_s", Integer(120)}, {"reward_final", Number(0.5)}},
       {}},
      {"tools for a single-turn preset",
       "dapo-math",
       {{"max_turns", Integer(4)}, {"python_weight", Number(1)}},
       {}},
      {"unknown key with hint",
       "r2e-gym",
       {{"max_turn", Integer(8)}},
       {"recipes/w.toml:2:1: workload.max_turn: unknown option; did you mean 'max_turns'?"}},
      {"out of range",
       "r2e-gym",
       {{"causal_strength", Number(1.5)}},
       {"recipes/w.toml:2:1: workload.causal_strength: must be in [0, 1] (got 1.5)"}},
      {"wrong type", "r2e-gym", {{"max_turns", Text("eight")}}, {"expected an integer"}},
      {"unknown drift mode",
       "r2e-gym",
       {{"drift", Text("sideways")}},
       {"must be one of none, growth, shrink, u-shape, step (got 'sideways')"}},
      {"growth that shrinks",
       "r2e-gym",
       {{"drift", Text("growth")}, {"drift_factor", Number(0.5)}},
       {"workload.drift_factor: must be > 1 for drift = 'growth' (got 0.5)"}},
      {"u-shape that rises",
       "r2e-gym",
       {{"drift", Text("u-shape")}, {"drift_factor", Number(2)}},
       {"must be < 1 for drift = 'u-shape'"}},
      {"skill that falls",
       "r2e-gym",
       {{"reward_initial", Number(0.9)}},
       {"workload.reward_final: must be >= reward_initial"}},
      {"turns without tools",
       "dapo-math",
       {{"max_turns", Integer(3)}},
       {"workload.max_turns: is 3 but no tool has a weight > 0"}},
      {"several problems at once",
       "search-r1",
       {{"retriever_weight", Number(-1)}, {"tokens_sigma", Number(9)}, {"bogus", Integer(1)}},
       {"retriever_weight: must be in", "tokens_sigma: must be in", "bogus: unknown option"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto made = MakeAgenticWorkload(c.preset, Table(c.entries), kSeed);
    if (c.errors.empty()) {
      ASSERT_OK(made);
      const auto& w = dynamic_cast<const AgenticWorkload&>(**made);
      auto expected = ReadAgenticParams(*PresetParams(c.preset), Table(c.entries));
      ASSERT_OK(expected);
      EXPECT_EQ(w.params(), *expected);
      EXPECT_NE(w.params(), *PresetParams(c.preset));
      continue;
    }
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidRecipe);
    for (const std::string& e : c.errors) {
      EXPECT_NE(made.status().message().find(e), std::string::npos) << made.status().message();
    }
  }
}

TEST(AgenticWorkloadTest, UnknownPresetListsThePresets) {
  // An unknown preset is reported at the table's location under workload.preset, with a hint.
  auto made = MakeAgenticWorkload("r2e_gym", Table({}), kSeed);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(
      made.status().ToString(),
      Status::InvalidRecipe("recipes/w.toml:1:1: workload.preset",
                            "unknown preset 'r2e_gym'; did you mean 'r2e-gym'? (known: r2e-gym, "
                            "search-r1, dapo-math, swe-long)")
          .ToString());
  auto alone = PresetParams("nope");
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kInvalidRecipe);
  EXPECT_EQ(alone.status().message().rfind("workload.preset: unknown preset 'nope'", 0), 0u)
      << alone.status().message();
}

TEST(AgenticWorkloadTest, DocumentedKeysAreTheKeysRead) {
  // docs/workloads.md names exactly the keys the reader accepts (tool keys as <tool>_field).
  auto made = MakeAgenticWorkload("r2e-gym", Table({{"zzz", Integer(1)}}), kSeed);
  ASSERT_FALSE(made.ok());
  const std::string message = made.status().message();
  const size_t known = message.find("(known: ");
  ASSERT_NE(known, std::string::npos);
  const std::string list = message.substr(known + 8, message.find(')', known) - known - 8);
  std::set<std::string> read;
  for (const std::string& key : StrSplit(list, ',')) read.insert(key.substr(key[0] == ' '));

  // Keys are the first cells of the tables headed "| key |" in the "## Parameters" section.
  const std::string doc = test::ReadFile(test::SourcePath("docs/workloads.md"));
  const std::regex row(R"(^\| `([a-z_<>0-9]+)` \|)");
  std::set<std::string> documented;
  bool in_section = false, in_key_table = false;
  for (const std::string& line : StrSplit(doc, '\n')) {
    if (StartsWith(line, "## ")) in_section = line == "## Parameters";
    if (!StartsWith(line, "|")) in_key_table = false;
    if (StartsWith(line, "| key |")) in_key_table = true;
    std::smatch m;
    if (!in_section || !in_key_table || !std::regex_search(line, m, row)) continue;
    const std::string key = m[1];
    if (StartsWith(key, "<tool>_")) {
      for (const std::string& tool : AgenticToolNames()) documented.insert(tool + key.substr(6));
    } else {
      documented.insert(key);
    }
  }
  EXPECT_EQ(documented, read);
}

}  // namespace
}  // namespace libra::workload
