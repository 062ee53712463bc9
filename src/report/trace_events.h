// Trace events: a run as Chrome trace-event JSON (the format chrome://tracing and Perfetto load),
// for `libra report --timeline FILE`.
//
// Tracks: one process per rollout instance, whose turns are async slices (many run at once on an
// instance, so they cannot be nested "X" slices) with the tool wait that follows a tool call; one
// "trainer" process with train steps, weight syncs, layout changes (role switches), lends and
// reclaims as complete slices; planner decisions and stale-group rejections as instant events.
// Times are microseconds of the run's clock (simulated seconds for simulated runs).
#pragma once

#include <string>
#include <vector>

#include "records/records.h"

namespace libra::report {

struct TimelineInput {
  records::RunInfo run;
  std::vector<records::TurnRecord> turns;
  std::vector<records::EventRecord> events;
  std::vector<records::DecisionRecord> decisions;
};

/// The trace as a JSON document: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData":
/// {...}}. Deterministic for the same input.
std::string TimelineJson(const TimelineInput& input);

}  // namespace libra::report
