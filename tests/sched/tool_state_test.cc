#include "sched/tool_state.h"

#include <gtest/gtest.h>

#include <string>

#include "support/test_util.h"

namespace libra::sched {
namespace {

JsonValue Parse(const std::string& text) {
  Result<JsonValue> v = ParseJson(text);
  EXPECT_OK(v);
  return v.ok() ? *v : JsonValue();
}

TEST(ToolStateExtractorTest, ReferenceVectors) {
  // libra-reference.md §2.2 cross-check vectors, default thresholds 500 / 5000.
  struct Case {
    std::string name;
    JsonValue event;
    std::string key;
  };
  const std::string x501(501, 'x');
  const std::string x6000(6000, 'x');
  const ToolStateExtractor extractor;
  const Case cases[] = {
      {"ok", JsonValue("ok"), "text:small:success"},
      {"501 x", JsonValue(x501), "text:medium:success"},
      {"error text", JsonValue("Error: boom"), "text:small:failure"},
      {"code 6000", Parse(R"({"tool_type":"code","output":")" + x6000 + R"("})"),
       "code:large:success"},
      {"search timeout", Parse(R"({"tool":"search","result":"fine","status":"timeout"})"),
       "search:small:timeout"},
      {"payload tokens", Parse(R"({"tool_type":"v","output":"a","payload_tokens":7000})"),
       "v:large:success"},
      {"explicit size", Parse(R"({"tool_type":"v","output":"a","payload_size_class":"LARGE"})"),
       "v:large:success"},
      {"traceback", Parse(R"({"tool_type":"v","output":"","traceback":"..."})"), "v:small:failure"},
      {"integer", JsonValue(42), "unknown:medium:success"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(extractor.FromJson(c.event).Key(), c.key);
  }
}

TEST(ToolStateExtractorTest, StatusRulesAndRawSize) {
  // Dict status rules: error/exception keys, status words, and "error" inside the output.
  const ToolStateExtractor extractor;
  EXPECT_EQ(extractor.FromJson(Parse(R"({"tool":"t","error":null})")).Key(), "t:small:failure");
  EXPECT_EQ(extractor.FromJson(Parse(R"({"tool":"t","exception":"x"})")).Key(), "t:small:failure");
  EXPECT_EQ(extractor.FromJson(Parse(R"({"tool":"t","status":"FAILED"})")).Key(),
            "t:small:failure");
  EXPECT_EQ(extractor.FromJson(Parse(R"({"tool":"t","status":"timed_out"})")).Key(),
            "t:small:timeout");
  EXPECT_EQ(extractor.FromJson(Parse(R"({"tool":"t","content":"an ERROR here"})")).Key(),
            "t:small:failure");
  EXPECT_EQ(extractor.FromJson(Parse(R"({"output":"fine"})")).Key(), "unknown:small:success");
  EXPECT_EQ(extractor.FromText("hello").raw_size, 5);
  EXPECT_EQ(extractor.FromText("h\xc3\xa9llo").raw_size, 5);  // code points, as Python
}

TEST(ToolStateExtractorTest, ThresholdsAreInclusiveAndValidated) {
  // size <= small -> small, <= large -> medium, else large; bad thresholds are rejected.
  Result<ToolStateExtractor> e = ToolStateExtractor::Create({1000, 12000});
  ASSERT_OK(e);
  EXPECT_EQ(e->Classify(1000), SizeClass::kSmall);
  EXPECT_EQ(e->Classify(1001), SizeClass::kMedium);
  EXPECT_EQ(e->Classify(12000), SizeClass::kMedium);
  EXPECT_EQ(e->Classify(12001), SizeClass::kLarge);
  EXPECT_FALSE(ToolStateExtractor::Create({-1, 10}).ok());
  EXPECT_FALSE(ToolStateExtractor::Create({10, 9}).ok());
  EXPECT_OK(ToolStateExtractor::Create({10, 10}));
}

TEST(ToolStateExtractorTest, ObservationUsesTokens) {
  // The coordinator's ToolObservation: tool name, status, output tokens.
  const ToolStateExtractor extractor;
  ToolObservation tool{"r2e_issue_validator", workload::ToolStatus::kFailure, 120};
  EXPECT_EQ(extractor.FromObservation(tool).Key(), "r2e_issue_validator:small:failure");
  tool.output_tokens = 6000;
  tool.status = workload::ToolStatus::kTimeout;
  EXPECT_EQ(extractor.FromObservation(tool).Key(), "r2e_issue_validator:large:timeout");
}

TEST(ToolStateTest, KeyRoundTripAndStrictParse) {
  // FromKey inverts Key and needs exactly three known parts.
  Result<ToolState> s = ToolState::FromKey("code_executor:small:failure");
  ASSERT_OK(s);
  EXPECT_EQ(s->tool_type, "code_executor");
  EXPECT_EQ(s->size, SizeClass::kSmall);
  EXPECT_EQ(s->status, workload::ToolStatus::kFailure);
  EXPECT_EQ(s->Key(), "code_executor:small:failure");
  EXPECT_FALSE(ToolState::FromKey("a:small").ok());
  EXPECT_FALSE(ToolState::FromKey("a:b:small:success").ok());
  EXPECT_FALSE(ToolState::FromKey("a:huge:success").ok());
  EXPECT_FALSE(ToolState::FromKey("a:small:ok").ok());
}

}  // namespace
}  // namespace libra::sched
