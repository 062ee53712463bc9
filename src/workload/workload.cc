#include "workload/workload.h"

#include "workload/simple_workload.h"

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

int64_t TrajectoryScript::generated_tokens() const {
  int64_t total = 0;
  for (const TurnScript& t : turns) total += t.generated_tokens;
  return total;
}

Result<std::unique_ptr<Workload>> MakeWorkload(const recipe::WorkloadSpec& spec, uint64_t seed) {
  if (spec.generator == "simple") {
    return std::unique_ptr<Workload>(std::make_unique<SimpleWorkload>(spec, seed));
  }
  return Status::InvalidRecipe("workload.generator", "unknown generator '" + spec.generator + "'");
}

}  // namespace libra::workload
