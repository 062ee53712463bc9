// Trajectory traces: recorded trajectories in a JSONL file (one JSON object per line), and the
// workload that replays them. `libra report --export-trajectories` writes such files from
// recorded runs; a recipe with [workload] kind = "trace" replays one, so that systems are compared
// on the exact trajectories of a real run. The format is documented in docs/traces.md.
//
// This module reads and writes files and checks every field strictly (unknown keys, wrong types
// and impossible values are errors that name the line and the field); it does not resolve paths
// relative to a recipe (MakeWorkload does) and does not model anything: a replayed trajectory is
// the same whatever policy version or skill asks for it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workload/skill.h"
#include "workload/workload.h"

namespace libra::workload {

/// The limits of a trace (docs/traces.md): every value a trace can set is bounded, so that no trace
/// can exhaust memory or keep a run from starting. They match the agentic model's bounds
/// (docs/workloads.md) and are far above real trajectories.
inline constexpr size_t kMaxTraceBytes = size_t{256} << 20;
inline constexpr size_t kMaxTraceLineBytes = size_t{1} << 20;
inline constexpr int64_t kMaxTraceTurns = 10'000;
/// prompt_tokens, generated_tokens, tool_output_tokens; and all tokens of one trajectory.
inline constexpr int64_t kMaxTraceTokens = 100'000'000;
inline constexpr int64_t kMaxTraceTrajectoryTokens = 1'000'000'000;
/// tool_latency_s: a week.
inline constexpr double kMaxTraceToolLatencyS = 7 * 86'400;

/// One recorded trajectory: one line of a trace file. A value type.
struct TraceRecord {
  /// The prompt id (the GRPO group); >= 0.
  int64_t prompt = 0;
  /// The index of the trajectory within its group; >= 0. (prompt, sample) is unique in a trace.
  int sample = 0;
  /// Tokens of the prompt; >= 1.
  int64_t prompt_tokens = 1;
  /// The reward the trajectory received.
  double reward = 0;
  /// The policy version that generated it, when known (informational; replay ignores it).
  std::optional<int> version;
  /// The turns; non-empty, every turn but the last ends in a tool call and the last does not.
  std::vector<TurnScript> turns;

  bool operator==(const TraceRecord&) const = default;
};

/// The record as one compact JSON object, without a newline. Keys are written in the documented
/// order; `version` only when set; the tool fields only on tool_call turns (a turn that does not
/// call a tool has no tool, so they are dropped there). Does not check the record: WriteTrace
/// does.
std::string TraceLine(const TraceRecord& record);

/// Parses and checks one line (a JSON object; see docs/traces.md). On failure, kInvalidArgument
/// with the first problem, naming the field: `turns[2].end: expected one of tool_call, stop,
/// truncated (got "done")`, or `not JSON: line 1, column 14: ...` for a line that is not JSON.
Result<TraceRecord> ParseTraceLine(std::string_view line);

/// Reads a trace file: one record per line, skipping blank lines and lines whose first
/// non-blank character is '#'. Errors:
///  * kNotFound naming the path when the file cannot be read;
///  * kInvalidRecipe listing every malformed line, one per line as `<path>:<line>: <problem>`
///    (at most 20, then `<path>: N more malformed lines not shown`); a (prompt, sample) pair seen
///    before is malformed at its second occurrence, naming the first's line;
///  * kInvalidRecipe when the file holds no record.
Result<std::vector<TraceRecord>> ReadTrace(const std::string& path);

/// ReadTrace on the text of a trace file already read (named `path` in messages).
Result<std::vector<TraceRecord>> ParseTrace(std::string_view text, const std::string& path);

/// Writes `records` to `path`, one line each, replacing the file atomically: the lines go to a
/// temporary file in the same folder that is then renamed over `path`, so `path` is either
/// untouched or complete. Before writing anything, checks that ReadTrace would accept the result:
/// kInvalidArgument naming the record for one it would reject (or an empty list). kInvalidArgument
/// naming the path when the file cannot be written; no temporary file is left behind.
Status WriteTrace(const std::string& path, const std::vector<TraceRecord>& records);

/// Replays a trace. Prompt index i of the simulated dataset is the i-th distinct prompt id of the
/// trace in ascending order, wrapping around (i mod the number of prompts); its prompt_tokens come
/// from the prompt's first record in the file and its difficulty is 0.5. Sample s of a prompt is
/// its s-th recorded sample in ascending sample order, wrapping around likewise. The recorded
/// turns and reward are replayed whatever policy version and skill ask; skill_params() are the
/// defaults. Immutable after construction; safe to share.
class TraceWorkload : public Workload {
 public:
  /// REQUIRES: `records` is non-empty with unique (prompt, sample) pairs (as ReadTrace returns).
  TraceWorkload(std::string path, const std::vector<TraceRecord>& records);
  TraceWorkload(const TraceWorkload&) = delete;
  TraceWorkload& operator=(const TraceWorkload&) = delete;

  /// "trace <path>".
  std::string Describe() const override;
  /// REQUIRES: index >= 0.
  PromptInfo Prompt(int64_t index) const override;
  /// REQUIRES: prompt >= 0, sample >= 0.
  TrajectoryScript Script(int64_t prompt, int sample, int policy_version,
                          double skill) const override;
  const SkillParams& skill_params() const override { return skill_params_; }

  /// Distinct prompts in the trace.
  int64_t prompt_count() const { return static_cast<int64_t>(groups_.size()); }

 private:
  struct Group {
    int64_t prompt_id = 0;
    int64_t prompt_tokens = 0;
    std::vector<TrajectoryScript> samples;  // ascending sample number
  };
  const Group& GroupAt(int64_t index) const;

  std::string path_;
  std::vector<Group> groups_;  // ascending prompt id
  SkillParams skill_params_;
};

/// Reads the trace at `path` (ReadTrace's errors) and returns a TraceWorkload replaying it.
Result<std::unique_ptr<Workload>> MakeTraceWorkload(const std::string& path);

}  // namespace libra::workload
