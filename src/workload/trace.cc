#include "workload/trace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "common/check.h"
#include "common/files.h"
#include "common/json.h"
#include "common/strings.h"

namespace libra::workload {
namespace {

/// Malformed lines listed in ReadTrace's error before the rest are only counted.
constexpr size_t kMaxReportedLines = 20;

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

const std::vector<std::string>& RecordKeys() {
  static const std::vector<std::string> kKeys = {"prompt", "sample",  "prompt_tokens",
                                                 "reward", "version", "turns"};
  return kKeys;
}

const std::vector<std::string>& ToolKeys() {
  static const std::vector<std::string> kKeys = {"tool", "tool_status", "tool_output_tokens",
                                                 "tool_latency_s"};
  return kKeys;
}

const std::vector<std::string>& TurnKeys() {
  static const std::vector<std::string> kKeys = {
      "generated_tokens", "end", "tool", "tool_status", "tool_output_tokens", "tool_latency_s"};
  return kKeys;
}

/// `field: what`, or just `what` for the whole line.
Status FieldError(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field.empty() ? what : field + ": " + what);
}

/// A value as messages show it: its JSON text for a scalar (cut when long), its kind for an
/// array or an object.
std::string Shown(const JsonValue& value) {
  if (value.is_array() || value.is_object()) return value.type_name();
  const std::string text = ToJson(value);
  return text.size() <= 40 ? text : text.substr(0, 40) + "...";
}

/// "prefix.key" (or "key" at the top level).
std::string Field(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

Status CheckKeys(const JsonValue& object, const std::vector<std::string>& known,
                 const std::string& prefix) {
  for (const auto& [key, value] : object.as_object()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string what = "unknown key '" + EscapeControl(key) + "'";
    const std::string hint = ClosestMatch(key, known);
    if (!hint.empty()) what += "; did you mean '" + hint + "'?";
    return FieldError(prefix, what);
  }
  return Status();
}

Result<const JsonValue*> Require(const JsonValue& object, const std::string& key,
                                 const std::string& prefix) {
  const JsonValue* value = object.Find(key);
  if (value == nullptr) return FieldError(prefix, "missing key '" + key + "'");
  return value;
}

Result<int64_t> ReadInt(const JsonValue& value, const std::string& field, int64_t min,
                        int64_t max) {
  if (!value.is_int()) return FieldError(field, "expected an integer (got " + Shown(value) + ")");
  const int64_t v = value.as_int();
  if (v < min) {
    return FieldError(field, StrFormat("must be at least %lld (got %lld)",
                                       static_cast<long long>(min), static_cast<long long>(v)));
  }
  if (v > max) {
    return FieldError(field, StrFormat("must be at most %lld (got %lld)",
                                       static_cast<long long>(max), static_cast<long long>(v)));
  }
  return v;
}

/// A number in [min, max].
Result<double> ReadNumber(const JsonValue& value, const std::string& field, double min,
                          double max) {
  if (!value.is_number()) return FieldError(field, "expected a number (got " + Shown(value) + ")");
  const double v = value.as_double();
  if (v < min)
    return FieldError(field, StrFormat("must be at least %g (got ", min) + Shown(value) + ")");
  if (v > max)
    return FieldError(field, StrFormat("must be at most %g (got ", max) + Shown(value) + ")");
  return v;
}

Result<TurnEnd> ReadTurnEnd(const JsonValue& value, const std::string& field) {
  const std::optional<TurnEnd> end =
      value.is_string() ? EnumNames<TurnEnd>::Find(value.as_string()) : std::nullopt;
  if (!end) {
    return FieldError(field,
                      "expected one of tool_call, stop, truncated (got " + Shown(value) + ")");
  }
  return *end;
}

Result<ToolStatus> ReadToolStatus(const JsonValue& value, const std::string& field) {
  const std::optional<ToolStatus> status =
      value.is_string() ? EnumNames<ToolStatus>::Find(value.as_string()) : std::nullopt;
  if (!status) {
    return FieldError(field,
                      "expected one of success, failure, timeout (got " + Shown(value) + ")");
  }
  return *status;
}

Result<TurnScript> ParseTurn(const JsonValue& value, size_t index, bool last) {
  const std::string where = StrFormat("turns[%zu]", index);
  if (!value.is_object()) return FieldError(where, "expected an object (got " + Shown(value) + ")");
  LIBRA_RETURN_IF_ERROR(CheckKeys(value, TurnKeys(), where));
  TurnScript turn;

  LIBRA_ASSIGN_OR_RETURN(const JsonValue* generated, Require(value, "generated_tokens", where));
  LIBRA_ASSIGN_OR_RETURN(turn.generated_tokens,
                         ReadInt(*generated, Field(where, "generated_tokens"), 0, kMaxTraceTokens));

  LIBRA_ASSIGN_OR_RETURN(const JsonValue* end, Require(value, "end", where));
  const std::string end_field = Field(where, "end");
  LIBRA_ASSIGN_OR_RETURN(turn.end, ReadTurnEnd(*end, end_field));
  if (!last && turn.end != TurnEnd::kToolCall) {
    return FieldError(end_field,
                      "every turn but the last must end in tool_call (got " + Shown(*end) + ")");
  }
  if (last && turn.end == TurnEnd::kToolCall) {
    return FieldError(end_field,
                      "the last turn must end in stop or truncated (got " + Shown(*end) + ")");
  }

  if (turn.end != TurnEnd::kToolCall) {
    for (const std::string& key : ToolKeys()) {
      if (value.Find(key) != nullptr) {
        return FieldError(Field(where, key), "only allowed when end is tool_call");
      }
    }
    return turn;
  }

  const JsonValue* tool = value.Find("tool");
  if (tool == nullptr) {
    return FieldError(where, "missing key 'tool' (required when end is tool_call)");
  }
  if (!tool->is_string()) {
    return FieldError(Field(where, "tool"), "expected a string (got " + Shown(*tool) + ")");
  }
  if (tool->as_string().empty()) return FieldError(Field(where, "tool"), "must not be empty");
  turn.tool = tool->as_string();
  if (const JsonValue* v = value.Find("tool_status"); v != nullptr) {
    LIBRA_ASSIGN_OR_RETURN(turn.tool_status, ReadToolStatus(*v, Field(where, "tool_status")));
  }
  if (const JsonValue* v = value.Find("tool_output_tokens"); v != nullptr) {
    LIBRA_ASSIGN_OR_RETURN(turn.tool_output_tokens,
                           ReadInt(*v, Field(where, "tool_output_tokens"), 0, kMaxTraceTokens));
  }
  if (const JsonValue* v = value.Find("tool_latency_s"); v != nullptr) {
    LIBRA_ASSIGN_OR_RETURN(turn.tool_latency_s, ReadNumber(*v, Field(where, "tool_latency_s"), 0,
                                                           kMaxTraceToolLatencyS));
  }
  return turn;
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

std::string TraceLine(const TraceRecord& record) {
  JsonValue turns = JsonValue::MakeArray();
  for (const TurnScript& t : record.turns) {
    JsonValue turn = JsonValue::MakeObject()
                         .Set("generated_tokens", t.generated_tokens)
                         .Set("end", NameOf(t.end));
    if (t.end == TurnEnd::kToolCall) {
      turn.Set("tool", t.tool)
          .Set("tool_status", NameOf(t.tool_status))
          .Set("tool_output_tokens", t.tool_output_tokens)
          .Set("tool_latency_s", t.tool_latency_s);
    }
    turns.Append(std::move(turn));
  }
  JsonValue line = JsonValue::MakeObject()
                       .Set("prompt", record.prompt)
                       .Set("sample", record.sample)
                       .Set("prompt_tokens", record.prompt_tokens)
                       .Set("reward", record.reward);
  if (record.version.has_value()) line.Set("version", *record.version);
  line.Set("turns", std::move(turns));
  return ToJson(line);
}

Result<TraceRecord> ParseTraceLine(std::string_view line) {
  const Result<JsonValue> parsed = ParseJson(line);
  if (!parsed.ok()) return Status::InvalidArgument("not JSON: " + parsed.status().message());
  const JsonValue& root = *parsed;
  if (!root.is_object()) {
    return FieldError("", "expected a JSON object (got " + Shown(root) + ")");
  }
  LIBRA_RETURN_IF_ERROR(CheckKeys(root, RecordKeys(), ""));
  TraceRecord record;

  LIBRA_ASSIGN_OR_RETURN(const JsonValue* prompt, Require(root, "prompt", ""));
  LIBRA_ASSIGN_OR_RETURN(record.prompt, ReadInt(*prompt, "prompt", 0, kInt64Max));
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* sample, Require(root, "sample", ""));
  LIBRA_ASSIGN_OR_RETURN(const int64_t sample_value, ReadInt(*sample, "sample", 0, kIntMax));
  record.sample = static_cast<int>(sample_value);
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* prompt_tokens, Require(root, "prompt_tokens", ""));
  LIBRA_ASSIGN_OR_RETURN(record.prompt_tokens,
                         ReadInt(*prompt_tokens, "prompt_tokens", 1, kMaxTraceTokens));
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* reward, Require(root, "reward", ""));
  LIBRA_ASSIGN_OR_RETURN(record.reward,
                         ReadNumber(*reward, "reward", -std::numeric_limits<double>::max(),
                                    std::numeric_limits<double>::max()));
  if (const JsonValue* version = root.Find("version"); version != nullptr) {
    LIBRA_ASSIGN_OR_RETURN(const int64_t version_value, ReadInt(*version, "version", 0, kIntMax));
    record.version = static_cast<int>(version_value);
  }

  LIBRA_ASSIGN_OR_RETURN(const JsonValue* turns, Require(root, "turns", ""));
  if (!turns->is_array()) {
    return FieldError("turns", "expected an array (got " + Shown(*turns) + ")");
  }
  const JsonValue::Array& items = turns->as_array();
  if (items.empty()) return FieldError("turns", "must not be empty");
  if (static_cast<int64_t>(items.size()) > kMaxTraceTurns) {
    return FieldError("turns", StrFormat("%zu turns, more than libra's limit of %lld", items.size(),
                                         static_cast<long long>(kMaxTraceTurns)));
  }
  int64_t tokens = record.prompt_tokens;
  for (size_t i = 0; i < items.size(); ++i) {
    LIBRA_ASSIGN_OR_RETURN(TurnScript turn, ParseTurn(items[i], i, i + 1 == items.size()));
    tokens += turn.generated_tokens + turn.tool_output_tokens;
    record.turns.push_back(std::move(turn));
  }
  if (tokens > kMaxTraceTrajectoryTokens) {
    return FieldError("turns", StrFormat("%lld tokens in all (prompt, generated and tool output), "
                                         "more than libra's limit of %lld",
                                         static_cast<long long>(tokens),
                                         static_cast<long long>(kMaxTraceTrajectoryTokens)));
  }
  return record;
}

Result<std::vector<TraceRecord>> ReadTrace(const std::string& path) {
  Result<std::string> read = ReadFileBounded(path, kMaxTraceBytes, "trace file");
  if (!read.ok() && read.status().code() == StatusCode::kInvalidArgument) {
    return Status(StatusCode::kInvalidRecipe, read.status().message());
  }
  LIBRA_RETURN_IF_ERROR(read.status());
  return ParseTrace(*read, path);
}

Result<std::vector<TraceRecord>> ParseTrace(std::string_view text, const std::string& path) {
  std::vector<TraceRecord> records;
  std::vector<std::string> errors;
  std::map<std::pair<int64_t, int>, size_t> first_line;  // (prompt, sample) -> line number
  size_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;

    Result<TraceRecord> record =
        line.size() > kMaxTraceLineBytes
            ? Result<TraceRecord>(Status::InvalidArgument(StrFormat(
                  "the line is longer than libra's limit of %zu bytes", kMaxTraceLineBytes)))
            : ParseTraceLine(line);
    if (!record.ok()) {
      errors.push_back(StrFormat("%s:%zu: ", path.c_str(), line_number) +
                       record.status().message());
      continue;
    }
    const auto key = std::make_pair(record->prompt, record->sample);
    const auto [it, inserted] = first_line.emplace(key, line_number);
    if (!inserted) {
      errors.push_back(StrFormat(
          "%s:%zu: duplicate trajectory (prompt %lld, sample %d); first at "
          "line %zu",
          path.c_str(), line_number, static_cast<long long>(key.first), key.second, it->second));
      continue;
    }
    records.push_back(std::move(record).value());
  }
  if (!errors.empty()) {
    const size_t total = errors.size();
    if (total > kMaxReportedLines) {
      errors.resize(kMaxReportedLines);
      errors.push_back(StrFormat("%s: %zu more malformed lines not shown", path.c_str(),
                                 total - kMaxReportedLines));
    }
    return Status(StatusCode::kInvalidRecipe, StrJoin(errors, "\n"));
  }
  if (records.empty()) {
    return Status::InvalidRecipe(path, "no trajectories (every line is blank or a comment)");
  }
  return records;
}

Status WriteTrace(const std::string& path, const std::vector<TraceRecord>& records) {
  if (records.empty()) return Status::InvalidArgument(path + ": no trajectories to write");
  std::string text;
  std::map<std::pair<int64_t, int>, size_t> first_index;
  for (size_t i = 0; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    const std::string where = StrFormat("%s: records[%zu] (prompt %lld, sample %d)", path.c_str(),
                                        i, static_cast<long long>(r.prompt), r.sample);
    const std::string line = TraceLine(r);
    const Result<TraceRecord> back = ParseTraceLine(line);
    if (!back.ok()) return Status::InvalidArgument(where + ": " + back.status().message());
    const auto [it, inserted] = first_index.emplace(std::make_pair(r.prompt, r.sample), i);
    if (!inserted) {
      return Status::InvalidArgument(where + StrFormat(": repeats records[%zu]", it->second));
    }
    text += line;
    text += '\n';
  }
  return WriteFileAtomically(path, text, "trace file");
}

TraceWorkload::TraceWorkload(std::string path, const std::vector<TraceRecord>& records)
    : path_(std::move(path)) {
  LIBRA_CHECK(!records.empty()) << "a trace workload needs at least one record";
  // Per prompt id (ascending): its first record in file order, and its records by sample.
  std::map<int64_t, std::pair<const TraceRecord*, std::map<int, const TraceRecord*>>> prompts;
  for (const TraceRecord& r : records) {
    auto& [first, samples] = prompts[r.prompt];
    if (first == nullptr) first = &r;
    const bool inserted = samples.emplace(r.sample, &r).second;
    LIBRA_CHECK(inserted) << "duplicate trajectory (prompt " << r.prompt << ", sample " << r.sample
                          << ")";
  }
  groups_.reserve(prompts.size());
  for (const auto& [prompt_id, entry] : prompts) {
    Group group;
    group.prompt_id = prompt_id;
    group.prompt_tokens = entry.first->prompt_tokens;
    for (const auto& [sample, record] : entry.second) {
      TrajectoryScript script;
      script.turns = record->turns;
      script.reward = record->reward;
      group.samples.push_back(std::move(script));
    }
    groups_.push_back(std::move(group));
  }
}

std::string TraceWorkload::Describe() const { return "trace " + path_; }

const TraceWorkload::Group& TraceWorkload::GroupAt(int64_t index) const {
  LIBRA_CHECK(index >= 0) << "prompt index " << index;
  return groups_[static_cast<size_t>(index % prompt_count())];
}

PromptInfo TraceWorkload::Prompt(int64_t index) const {
  PromptInfo info;
  info.index = index;
  info.prompt_tokens = GroupAt(index).prompt_tokens;
  info.difficulty = 0.5;
  return info;
}

TrajectoryScript TraceWorkload::Script(int64_t prompt, int sample, int /*policy_version*/,
                                       double /*skill*/) const {
  LIBRA_CHECK(sample >= 0) << "sample " << sample;
  const Group& group = GroupAt(prompt);
  return group.samples[static_cast<size_t>(sample) % group.samples.size()];
}

Result<std::unique_ptr<Workload>> MakeTraceWorkload(const std::string& path) {
  LIBRA_ASSIGN_OR_RETURN(const std::vector<TraceRecord> records, ReadTrace(path));
  return std::unique_ptr<Workload>(std::make_unique<TraceWorkload>(path, records));
}

}  // namespace libra::workload
