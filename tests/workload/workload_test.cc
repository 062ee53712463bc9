#include "workload/workload.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_util.h"
#include "workload/simple_workload.h"

namespace libra::workload {
namespace {

TEST(WorkloadTest, MakeWorkloadBuildsTheSimpleGenerator) {
  // "simple" builds a SimpleWorkload with the given seed: it plays the same scripts.
  recipe::WorkloadSpec spec;
  auto made = MakeWorkload(spec, 12);
  ASSERT_OK(made);
  const SimpleWorkload direct(spec, 12);
  for (int64_t p = 0; p < 5; ++p) {
    EXPECT_EQ((*made)->Prompt(p), direct.Prompt(p));
    EXPECT_EQ((*made)->Script(p, 1, 0), direct.Script(p, 1, 0));
  }
}

TEST(WorkloadTest, MakeWorkloadRejectsUnknownGenerator) {
  // An unknown generator is an invalid recipe located at workload.generator.
  recipe::WorkloadSpec spec;
  spec.generator = "agentic";
  auto made = MakeWorkload(spec, 1);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status(),
            Status::InvalidRecipe("workload.generator", "unknown generator 'agentic'"));
}

TEST(WorkloadTest, EnumNames) {
  // Turn ends and tool statuses have stable names (they appear in traces).
  EXPECT_STREQ(TurnEndName(TurnEnd::kToolCall), "tool_call");
  EXPECT_STREQ(TurnEndName(TurnEnd::kStop), "stop");
  EXPECT_STREQ(TurnEndName(TurnEnd::kTruncated), "truncated");
  EXPECT_STREQ(ToolStatusName(ToolStatus::kSuccess), "success");
  EXPECT_STREQ(ToolStatusName(ToolStatus::kFailure), "failure");
  EXPECT_STREQ(ToolStatusName(ToolStatus::kTimeout), "timeout");
}

TEST(WorkloadTest, ScriptTotalsAndTruncation) {
  // generated_tokens sums the turns; truncated() looks at the last turn only.
  struct Case {
    std::string name;
    std::vector<TurnEnd> ends;
    std::vector<int64_t> tokens;
    int64_t total;
    bool truncated;
  };
  const std::vector<Case> cases = {
      {"empty", {}, {}, 0, false},
      {"stop", {TurnEnd::kStop}, {10}, 10, false},
      {"tool then stop", {TurnEnd::kToolCall, TurnEnd::kStop}, {10, 5}, 15, false},
      {"tool then truncated", {TurnEnd::kToolCall, TurnEnd::kTruncated}, {10, 7}, 17, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TrajectoryScript script;
    for (size_t i = 0; i < c.ends.size(); ++i) {
      TurnScript turn;
      turn.end = c.ends[i];
      turn.generated_tokens = c.tokens[i];
      script.turns.push_back(turn);
    }
    EXPECT_EQ(script.generated_tokens(), c.total);
    EXPECT_EQ(script.truncated(), c.truncated);
  }
}

}  // namespace
}  // namespace libra::workload
