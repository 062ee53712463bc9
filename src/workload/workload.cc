#include "workload/workload.h"

#include <filesystem>

#include "workload/agentic_workload.h"
#include "workload/trace.h"

namespace libra::workload {

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
  if (spec.kind == recipe::WorkloadKind::kAgentic) {
    return MakeAgenticWorkload(spec.preset, spec.options, seed);
  }
  // A trace: a relative path is relative to the recipe's folder.
  const std::filesystem::path path(spec.trace);
  return MakeTraceWorkload(path.is_absolute() || spec.base_dir.empty()
                               ? spec.trace
                               : (std::filesystem::path(spec.base_dir) / path).string());
}

}  // namespace libra::workload
