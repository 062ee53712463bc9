// Tool-return state: the discrete triple `tool_type:size_class:status` that C-MLFQ uses as the edge
// key of its prefix tree (libra-reference.md §2.2). Pure functions of the tool result; no I/O.
//
// The size class is a threshold on the payload size: tokens for ToolObservation (what the
// coordinator reports) and for dictionaries carrying "payload_tokens", characters for raw text
// (the reference's rule, kept for its test vectors).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/enum_names.h"
#include "common/json.h"
#include "common/status.h"
#include "sched/router.h"
#include "workload/workload.h"

namespace libra::sched {

enum class SizeClass : uint8_t { kSmall = 0, kMedium = 1, kLarge = 2 };
constexpr std::array<EnumName<SizeClass>, 3> EnumTable(SizeClass) {
  return {
      {{SizeClass::kSmall, "small"}, {SizeClass::kMedium, "medium"}, {SizeClass::kLarge, "large"}}};
}

/// One abstracted tool return. `raw_size` (tokens or characters) is not part of the key.
struct ToolState {
  std::string tool_type;
  SizeClass size = SizeClass::kSmall;
  workload::ToolStatus status = workload::ToolStatus::kSuccess;
  int64_t raw_size = 0;

  /// "<tool_type>:<size>:<status>", e.g. "code_executor:small:failure".
  std::string Key() const;
  /// The inverse of Key(): exactly three ':'-separated parts with a known size and status
  /// (raw_size 0). kInvalidArgument naming the problem otherwise.
  static Result<ToolState> FromKey(std::string_view key);
  bool operator==(const ToolState&) const = default;
};

/// Payload size thresholds: size <= small -> small, <= large -> medium, else large.
struct PayloadThresholds {
  /// Default: 500 (the reference extractor's default).
  int64_t small = 500;
  /// Default: 5000.
  int64_t large = 5000;

  /// kInvalidArgument when small < 0 or large < small.
  Status Validate() const;
};

/// Maps tool results to ToolStates (the reference's DefaultToolStateExtractor).
class ToolStateExtractor {
 public:
  /// Default thresholds 500 / 5000.
  ToolStateExtractor() = default;
  /// kInvalidArgument when the thresholds are invalid (see PayloadThresholds::Validate).
  static Result<ToolStateExtractor> Create(PayloadThresholds thresholds);

  const PayloadThresholds& thresholds() const { return thresholds_; }
  SizeClass Classify(int64_t size) const;

  /// What the coordinator reports: tool name, status, output tokens.
  ToolState FromObservation(const ToolObservation& tool) const;
  /// Raw text: tool "text", size = characters (code points), failure iff it contains "error"
  /// (case-insensitive).
  ToolState FromText(std::string_view text) const;
  /// A reference-style tool event: a string (as FromText), an object with tool_type / tool,
  /// output / result / content, payload_tokens, payload_size_class, status, error / exception /
  /// traceback (rules in libra-reference.md §2.2), anything else "unknown:medium:success".
  ToolState FromJson(const JsonValue& event) const;

 private:
  explicit ToolStateExtractor(PayloadThresholds thresholds) : thresholds_(thresholds) {}
  PayloadThresholds thresholds_;
};

}  // namespace libra::sched
