#include "sched/tool_state.h"

#include <algorithm>
#include <cctype>

#include "common/strings.h"

namespace libra::sched {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ContainsError(std::string_view text) { return Lower(text).find("error") != std::string::npos; }

// Python's len(str): code points of UTF-8 text (continuation bytes do not count).
int64_t CodePoints(std::string_view text) {
  int64_t n = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// A member that is present and "truthy" in the Python sense for strings: not null, not "".
const JsonValue* Truthy(const JsonValue& object, std::string_view key) {
  const JsonValue* v = object.Find(key);
  if (v == nullptr || v->is_null()) return nullptr;
  if (v->is_string() && v->as_string().empty()) return nullptr;
  return v;
}

std::string AsText(const JsonValue& v) { return v.is_string() ? v.as_string() : ToJson(v); }

}  // namespace

std::string ToolState::Key() const { return tool_type + ":" + NameOf(size) + ":" + NameOf(status); }

Result<ToolState> ToolState::FromKey(std::string_view key) {
  const std::vector<std::string> parts = StrSplit(key, ':');
  if (parts.size() != 3) {
    return Status::InvalidArgument("tool state key '" + std::string(key) +
                                   "' must have exactly 3 ':'-separated parts");
  }
  ToolState state;
  state.tool_type = parts[0];
  const std::optional<SizeClass> size = EnumNames<SizeClass>::Find(parts[1]);
  const std::optional<workload::ToolStatus> status =
      EnumNames<workload::ToolStatus>::Find(parts[2]);
  if (!size) {
    return Status::InvalidArgument("tool state key '" + std::string(key) +
                                   "': unknown size class '" + parts[1] +
                                   "' (small, medium, large)");
  }
  if (!status) {
    return Status::InvalidArgument("tool state key '" + std::string(key) + "': unknown status '" +
                                   parts[2] + "' (success, failure, timeout)");
  }
  state.size = *size;
  state.status = *status;
  return state;
}

Status PayloadThresholds::Validate() const {
  if (small < 0)
    return Status::InvalidArgument(
        StrFormat("small threshold %lld < 0", static_cast<long long>(small)));
  if (large < small) {
    return Status::InvalidArgument(StrFormat("large threshold %lld < small threshold %lld",
                                             static_cast<long long>(large),
                                             static_cast<long long>(small)));
  }
  return Status();
}

Result<ToolStateExtractor> ToolStateExtractor::Create(PayloadThresholds thresholds) {
  LIBRA_RETURN_IF_ERROR(thresholds.Validate());
  return ToolStateExtractor(thresholds);
}

SizeClass ToolStateExtractor::Classify(int64_t size) const {
  if (size <= thresholds_.small) return SizeClass::kSmall;
  if (size <= thresholds_.large) return SizeClass::kMedium;
  return SizeClass::kLarge;
}

ToolState ToolStateExtractor::FromObservation(const ToolObservation& tool) const {
  return ToolState{tool.tool.empty() ? "unknown" : tool.tool, Classify(tool.output_tokens),
                   tool.status, tool.output_tokens};
}

ToolState ToolStateExtractor::FromText(std::string_view text) const {
  const int64_t length = CodePoints(text);
  return ToolState{
      "text", Classify(length),
      ContainsError(text) ? workload::ToolStatus::kFailure : workload::ToolStatus::kSuccess,
      length};
}

ToolState ToolStateExtractor::FromJson(const JsonValue& event) const {
  if (event.is_string()) return FromText(event.as_string());
  if (!event.is_object()) {
    return ToolState{"unknown", SizeClass::kMedium, workload::ToolStatus::kSuccess, 0};
  }
  ToolState state;
  const JsonValue* type = Truthy(event, "tool_type");
  if (type == nullptr) type = Truthy(event, "tool");
  state.tool_type = type == nullptr ? "unknown" : AsText(*type);

  const JsonValue* output = nullptr;
  for (std::string_view key : {"output", "result", "content"}) {
    output = event.Find(key);
    if (output != nullptr && !output->is_null()) break;
    output = nullptr;
  }
  const JsonValue* payload = event.Find("payload_tokens");
  if (payload != nullptr && payload->is_number()) {
    state.raw_size = static_cast<int64_t>(payload->as_double());
  } else if (output != nullptr) {
    state.raw_size = CodePoints(AsText(*output));
  }
  state.size = Classify(state.raw_size);
  const JsonValue* explicit_size = event.Find("payload_size_class");
  if (explicit_size != nullptr && explicit_size->is_string()) {
    // Case-insensitive, as the authors' classifier reads it.
    state.size = EnumNames<SizeClass>::Find(Lower(explicit_size->as_string())).value_or(state.size);
  }

  const JsonValue* status_value = event.Find("status");
  const std::string status =
      status_value != nullptr && status_value->is_string() ? Lower(status_value->as_string()) : "";
  if (status == "timeout" || status == "timed_out") {
    state.status = workload::ToolStatus::kTimeout;
  } else if (event.Find("error") != nullptr || event.Find("exception") != nullptr ||
             event.Find("traceback") != nullptr || status == "error" || status == "failure" ||
             status == "failed" ||
             (output != nullptr && output->is_string() && ContainsError(output->as_string()))) {
    state.status = workload::ToolStatus::kFailure;
  } else {
    state.status = workload::ToolStatus::kSuccess;
  }
  return state;
}

}  // namespace libra::sched
