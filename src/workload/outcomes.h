// How a turn ends and what a tool call returns: the value types the backend's events carry,
// apart from the Workload interface so that the backend seam does not include it.
#pragma once

#include <array>

#include "common/enum_names.h"

namespace libra::workload {

/// How a turn ends.
enum class TurnEnd {
  kToolCall,   // the model called a tool; another turn follows its result
  kStop,       // the model finished the trajectory
  kTruncated,  // a limit (max turns, max new tokens) cut the trajectory
};
constexpr std::array<EnumName<TurnEnd>, 3> EnumTable(TurnEnd) {
  return {{{TurnEnd::kToolCall, "tool_call"},
           {TurnEnd::kStop, "stop"},
           {TurnEnd::kTruncated, "truncated"}}};
}

/// What a tool call returns.
enum class ToolStatus { kSuccess, kFailure, kTimeout };
constexpr std::array<EnumName<ToolStatus>, 3> EnumTable(ToolStatus) {
  return {{{ToolStatus::kSuccess, "success"},
           {ToolStatus::kFailure, "failure"},
           {ToolStatus::kTimeout, "timeout"}}};
}

}  // namespace libra::workload
