#include "report/trace_events.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/json.h"
#include "common/strings.h"

namespace libra::report {
namespace {

constexpr int kTrainerPid = 1;
constexpr int kInstancePidBase = 100;
constexpr int kTrainTid = 1;
constexpr int kPipelineTid = 2;
constexpr int kPlannerTid = 3;

int64_t Micros(double seconds) { return std::llround(seconds * 1e6); }

JsonValue Metadata(const char* what, int pid, int tid, const std::string& name) {
  return JsonValue::MakeObject()
      .Set("name", what)
      .Set("ph", "M")
      .Set("pid", pid)
      .Set("tid", tid)
      .Set("args", JsonValue::MakeObject().Set("name", name));
}

JsonValue Event(const std::string& name, const char* category, const char* phase, int pid, int tid,
                double at_s) {
  return JsonValue::MakeObject()
      .Set("name", name)
      .Set("cat", category)
      .Set("ph", phase)
      .Set("pid", pid)
      .Set("tid", tid)
      .Set("ts", Micros(at_s));
}

/// An async slice (begin and end events) of trajectory `trajectory` on an instance.
void AsyncSlice(std::vector<JsonValue>& out, const std::string& name, const char* category, int pid,
                int64_t trajectory, double start_s, double end_s, JsonValue args) {
  out.push_back(Event(name, category, "b", pid, 1, start_s)
                    .Set("id", trajectory)
                    .Set("args", std::move(args)));
  out.push_back(Event(name, category, "e", pid, 1, std::max(start_s, end_s)).Set("id", trajectory));
}

}  // namespace

std::string TimelineJson(const TimelineInput& input) {
  std::vector<JsonValue> events;
  events.push_back(Metadata("process_name", kTrainerPid, 0, "trainer"));
  events.push_back(Metadata("thread_name", kTrainerPid, kTrainTid, "train, sync, relayout"));
  events.push_back(Metadata("thread_name", kTrainerPid, kPipelineTid, "pipeline"));
  events.push_back(Metadata("thread_name", kTrainerPid, kPlannerTid, "planner"));
  std::set<int64_t> instances;
  for (const records::TurnRecord& t : input.turns) instances.insert(t.instance);
  for (int64_t i : instances) {
    const int pid = kInstancePidBase + static_cast<int>(i);
    events.push_back(
        Metadata("process_name", pid, 0, StrFormat("instance %lld", static_cast<long long>(i))));
    events.push_back(JsonValue::MakeObject()
                         .Set("name", "process_sort_index")
                         .Set("ph", "M")
                         .Set("pid", pid)
                         .Set("tid", 0)
                         .Set("args", JsonValue::MakeObject().Set("sort_index", pid)));
  }

  for (const records::TurnRecord& t : input.turns) {
    const int pid = kInstancePidBase + static_cast<int>(t.instance);
    AsyncSlice(events, StrFormat("turn %d", t.turn), "turn", pid, t.trajectory, t.start_s, t.end_s,
               JsonValue::MakeObject()
                   .Set("trajectory", t.trajectory)
                   .Set("generated_tokens", t.generated_tokens)
                   .Set("end", t.end));
    if (!t.tool.empty()) {
      AsyncSlice(events, "tool " + t.tool, "tool", pid, t.trajectory, t.end_s,
                 t.end_s + t.tool_latency_s,
                 JsonValue::MakeObject()
                     .Set("trajectory", t.trajectory)
                     .Set("status", t.tool_status)
                     .Set("output_tokens", t.tool_output_tokens));
    }
  }

  for (const records::EventRecord& e : input.events) {
    if (e.kind == "turn" || e.kind == "tool") continue;  // drawn from the turn records
    JsonValue args = JsonValue::MakeObject().Set("step", e.step).Set("detail", e.detail);
    if (e.kind == "train" || e.kind == "sync" || e.kind == "relayout") {
      events.push_back(Event(e.kind == "train" ? StrFormat("train step %d", e.step) : e.kind,
                             e.kind.c_str(), "X", kTrainerPid, kTrainTid, e.start_s)
                           .Set("dur", Micros(std::max(0.0, e.end_s - e.start_s)))
                           .Set("args", std::move(args)));
    } else {
      events.push_back(Event(e.kind, e.kind.c_str(), "i", kTrainerPid, kPipelineTid, e.start_s)
                           .Set("s", "t")
                           .Set("args", std::move(args)));
    }
  }

  for (const records::DecisionRecord& d : input.decisions) {
    JsonValue args = JsonValue::MakeObject()
                         .Set("trigger", d.trigger)
                         .Set("applied", d.applied)
                         .Set("layout", d.layout)
                         .Set("reason", d.reason);
    if (d.predicted_step_s) args.Set("predicted_step_s", *d.predicted_step_s);
    if (d.gain_s) args.Set("gain_s", *d.gain_s);
    events.push_back(Event(d.applied ? "plan applied" : "plan kept", "planner", "i", kTrainerPid,
                           kPlannerTid, d.at_s)
                         .Set("s", "t")
                         .Set("args", std::move(args)));
  }

  JsonValue other =
      JsonValue::MakeObject()
          .Set("run", input.run.id)
          .Set("name", input.run.name)
          .Set("system", input.run.system)
          .Set("backend", input.run.backend)
          .Set("clock", input.run.Simulated() ? "simulated seconds" : "wall-clock seconds");
  std::string out = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += ToJson(events[i]);
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  out += "], \"displayTimeUnit\": \"ms\", \"otherData\": " + ToJson(other) + "}\n";
  return out;
}

}  // namespace libra::report
