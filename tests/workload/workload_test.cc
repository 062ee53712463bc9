#include "workload/workload.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "recipe/recipe_parser.h"
#include "support/test_util.h"
#include "workload/trace.h"

namespace libra::workload {
namespace {

TEST(WorkloadTest, TurnEndsAndToolStatusesHaveTheNamesTracesAndTheStoreUse) {
  // The names are part of the trace format and of the turns table: they must not change.
  EXPECT_EQ(EnumNames<TurnEnd>::All(),
            (std::vector<std::string>{"tool_call", "stop", "truncated"}));
  EXPECT_EQ(EnumNames<ToolStatus>::All(),
            (std::vector<std::string>{"success", "failure", "timeout"}));
  EXPECT_EQ(EnumNames<TurnEnd>::Find("done"), std::nullopt);
}

TEST(WorkloadTest, ScriptTotals) {
  // Generated and tool-output tokens add up over the turns; truncation is read off the last.
  TrajectoryScript s;
  s.turns = {{10, TurnEnd::kToolCall, "t", ToolStatus::kSuccess, 5, 0.1},
             {7, TurnEnd::kTruncated, "", ToolStatus::kSuccess, 0, 0}};
  EXPECT_EQ(s.generated_tokens(), 17);
  EXPECT_EQ(s.tool_output_tokens(), 5);
  EXPECT_TRUE(s.truncated());
  EXPECT_FALSE(TrajectoryScript().truncated());
}

TEST(WorkloadTest, MakeWorkloadDispatchesOnKind) {
  // kind agentic builds the preset; kind trace reads the file relative to the recipe's folder;
  // any other kind is an error.
  test::ScopedTempDir dir;
  TraceRecord record;
  record.prompt = 4;
  record.prompt_tokens = 100;
  record.reward = 1;
  record.turns = {{20, TurnEnd::kStop, "", ToolStatus::kSuccess, 0, 0}};
  std::filesystem::create_directories(dir.path() / "traces");
  ASSERT_OK(WriteTrace(dir.File("traces/t.jsonl"), {record}));

  recipe::WorkloadSpec spec;
  spec.preset = "search-r1";
  auto agentic = MakeWorkload(spec, 1);
  ASSERT_OK(agentic);
  EXPECT_EQ((*agentic)->Describe(), "search-r1");

  spec.kind = recipe::WorkloadKind::kTrace;
  spec.trace = "traces/t.jsonl";
  spec.base_dir = dir.path().string();
  auto trace = MakeWorkload(spec, 1);
  ASSERT_OK(trace);
  EXPECT_EQ((*trace)->Prompt(0).prompt_tokens, 100);
  EXPECT_EQ((*trace)->Script(0, 0, 0, 0.5).generated_tokens(), 20);
}

}  // namespace
}  // namespace libra::workload
