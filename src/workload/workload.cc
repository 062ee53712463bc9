#include "workload/workload.h"

#include <filesystem>

#include "workload/agentic_workload.h"
#include "workload/trace.h"

namespace libra::workload {

const char* TurnEndName(TurnEnd end) {
  switch (end) {
    case TurnEnd::kToolCall:
      return "tool_call";
    case TurnEnd::kStop:
      return "stop";
    case TurnEnd::kTruncated:
      return "truncated";
  }
  return "?";
}

bool ParseTurnEnd(const std::string& name, TurnEnd* end) {
  for (TurnEnd e : {TurnEnd::kToolCall, TurnEnd::kStop, TurnEnd::kTruncated}) {
    if (name == TurnEndName(e)) {
      *end = e;
      return true;
    }
  }
  return false;
}

const char* ToolStatusName(ToolStatus status) {
  switch (status) {
    case ToolStatus::kSuccess:
      return "success";
    case ToolStatus::kFailure:
      return "failure";
    case ToolStatus::kTimeout:
      return "timeout";
  }
  return "?";
}

bool ParseToolStatus(const std::string& name, ToolStatus* status) {
  for (ToolStatus s : {ToolStatus::kSuccess, ToolStatus::kFailure, ToolStatus::kTimeout}) {
    if (name == ToolStatusName(s)) {
      *status = s;
      return true;
    }
  }
  return false;
}

int64_t TrajectoryScript::generated_tokens() const {
  int64_t total = 0;
  for (const TurnScript& t : turns) total += t.generated_tokens;
  return total;
}

int64_t TrajectoryScript::tool_output_tokens() const {
  int64_t total = 0;
  for (const TurnScript& t : turns) total += t.tool_output_tokens;
  return total;
}

Result<std::unique_ptr<Workload>> MakeWorkload(const recipe::WorkloadSpec& spec, uint64_t seed) {
  if (spec.kind == "agentic") return MakeAgenticWorkload(spec.preset, spec.options, seed);
  if (spec.kind == "trace") {
    // A relative trace path is relative to the recipe's folder.
    const std::filesystem::path path(spec.trace);
    return MakeTraceWorkload(path.is_absolute() || spec.base_dir.empty()
                                 ? spec.trace
                                 : (std::filesystem::path(spec.base_dir) / path).string());
  }
  return Status::InvalidRecipe("workload.kind",
                               "unknown workload kind '" + spec.kind + "' (known: agentic, trace)");
}

}  // namespace libra::workload
