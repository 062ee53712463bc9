#include "report/trace_events.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/json.h"
#include "support/test_util.h"

namespace libra::report {
namespace {

TimelineInput SmallRun() {
  TimelineInput in;
  in.run.id = 7;
  in.run.name = "small";
  in.run.system = "libra \"q\"";
  in.run.backend = "sim";
  records::TurnRecord first;
  first.trajectory = 0;
  first.turn = 0;
  first.instance = 1;
  first.start_s = 0.5;
  first.end_s = 2.25;
  first.generated_tokens = 120;
  first.end = "tool_call";
  first.tool = "validator";
  first.tool_status = "failure";
  first.tool_output_tokens = 30;
  first.tool_latency_s = 0.125;
  records::TurnRecord second = first;
  second.turn = 1;
  second.instance = 0;  // it moved
  second.start_s = 2.5;
  second.end_s = 3;
  second.end = "stop";
  second.tool.clear();
  second.tool_status.clear();
  records::TurnRecord other = first;
  other.trajectory = 1;  // overlaps the first on instance 1
  other.start_s = 1;
  other.end_s = 4;
  other.end = "stop";
  other.tool.clear();
  in.turns = {first, second, other};
  records::EventRecord train;
  train.kind = "train";
  train.start_s = 4;
  train.end_s = 6;
  train.resource = "trainer";
  train.detail = "step 0";
  records::EventRecord sync = train;
  sync.kind = "sync";
  sync.start_s = 6;
  sync.end_s = 6.5;
  records::EventRecord reject = train;
  reject.kind = "reject";
  reject.start_s = reject.end_s = 4;
  reject.detail = "prompt 3: lag 3 > staleness 2";
  records::EventRecord turn_event = train;  // drawn from the turn records instead
  turn_event.kind = "turn";
  in.events = {train, sync, reject, turn_event};
  records::DecisionRecord d;
  d.at_s = 6.5;
  d.trigger = "interval";
  d.applied = true;
  d.layout = "train 4 | rollout tp1x4";
  d.reason = "gain 3 s";
  d.predicted_step_s = 5.5;
  in.decisions = {d};
  return in;
}

TEST(TraceEventsTest, LoadsAsValidTraceEventJson) {
  const std::string text = TimelineJson(SmallRun());
  auto parsed = ParseJson(text);
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->is_object());
  const JsonValue* events = nullptr;
  for (const auto& [key, value] : parsed->as_object()) {
    if (key == "traceEvents") events = &value;
  }
  ASSERT_NE(events, nullptr);
  ASSERT_TRUE(events->is_array());
  std::map<std::tuple<int64_t, std::string, int64_t>, int> open;  // (pid, cat, id) -> depth
  std::set<std::string> phases;
  for (const JsonValue& e : events->as_array()) {
    ASSERT_TRUE(e.is_object());
    std::map<std::string, const JsonValue*> f;
    for (const auto& [key, value] : e.as_object()) f[key] = &value;
    ASSERT_TRUE(f.count("name") && f["name"]->is_string()) << ToJson(e);
    ASSERT_TRUE(f.count("ph") && f["ph"]->is_string()) << ToJson(e);
    ASSERT_TRUE(f.count("pid") && f["pid"]->type() == JsonValue::Type::kInt) << ToJson(e);
    ASSERT_TRUE(f.count("tid") && f["tid"]->type() == JsonValue::Type::kInt) << ToJson(e);
    const std::string ph = f["ph"]->as_string();
    phases.insert(ph);
    if (ph == "M") {
      ASSERT_TRUE(f.count("args") && f["args"]->is_object()) << ToJson(e);
      continue;
    }
    ASSERT_TRUE(f.count("ts") && f["ts"]->type() == JsonValue::Type::kInt) << ToJson(e);
    EXPECT_GE(f["ts"]->as_int(), 0);
    if (ph == "X") {
      ASSERT_TRUE(f.count("dur") && f["dur"]->type() == JsonValue::Type::kInt) << ToJson(e);
      EXPECT_GE(f["dur"]->as_int(), 0);
    } else if (ph == "b" || ph == "e") {
      ASSERT_TRUE(f.count("id") && f.count("cat")) << ToJson(e);
      int& depth = open[{f["pid"]->as_int(), f["cat"]->as_string(), f["id"]->as_int()}];
      depth += ph == "b" ? 1 : -1;
      EXPECT_GE(depth, 0) << "an async end before its begin: " << ToJson(e);
    } else {
      EXPECT_EQ(ph, "i");
    }
  }
  for (const auto& [key, depth] : open) EXPECT_EQ(depth, 0) << "an async slice never ends";
  EXPECT_EQ(phases, (std::set<std::string>{"M", "X", "b", "e", "i"}));
  test::ExpectGolden("report/timeline_small.json", "TimelineJson of a hand-made run", text);
}

TEST(TraceEventsTest, EmptyRunIsValidJsonWithItsTracks) {
  TimelineInput in;
  in.run.id = 1;
  in.run.backend = "cluster";
  const std::string text = TimelineJson(in);
  auto parsed = ParseJson(text);
  ASSERT_OK(parsed);
  EXPECT_NE(text.find("\"clock\":\"wall-clock seconds\""), std::string::npos) << text;
}

}  // namespace
}  // namespace libra::report
