// The probe result types and their JSON form; no CUDA here.
#include "gpu/probe.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/strings.h"

namespace libra::gpu {
namespace {

constexpr std::string_view kFormat = "libra-probes";
constexpr int64_t kFormatVersion = 1;

Status FieldError(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field + ": " + what);
}

/// A value as messages show it: its JSON text (cut when long) or its kind.
std::string Shown(const JsonValue& value) {
  if (value.is_array() || value.is_object()) return value.type_name();
  const std::string text = ToJson(value);
  return text.size() <= 40 ? text : text.substr(0, 40) + "...";
}

Status CheckKeys(const JsonValue& object, const std::vector<std::string>& known,
                 const std::string& prefix) {
  for (const auto& [key, value] : object.as_object()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string what = "unknown key '" + key + "'";
    const std::string hint = ClosestMatch(key, known);
    if (!hint.empty()) what += "; did you mean '" + hint + "'?";
    return Status::InvalidArgument(prefix.empty() ? what : prefix + ": " + what);
  }
  return Status();
}

Result<const JsonValue*> Require(const JsonValue& object, const std::string& key,
                                 const std::string& prefix) {
  const JsonValue* value = object.Find(key);
  if (value == nullptr) {
    return Status::InvalidArgument((prefix.empty() ? "" : prefix + ": ") + "missing key '" + key +
                                   "'");
  }
  return value;
}

Result<std::string> ReadString(const JsonValue& object, const std::string& key,
                               const std::string& prefix, bool allow_empty) {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* value, Require(object, key, prefix));
  const std::string field = prefix.empty() ? key : prefix + "." + key;
  if (!value->is_string())
    return FieldError(field, "expected a string (got " + Shown(*value) + ")");
  if (!allow_empty && value->as_string().empty()) return FieldError(field, "must not be empty");
  return value->as_string();
}

Result<ProbeResult> ParseProbe(const JsonValue& value, const std::string& prefix) {
  if (!value.is_object()) {
    return FieldError(prefix, std::string("expected an object (got ") + value.type_name() + ")");
  }
  LIBRA_RETURN_IF_ERROR(CheckKeys(value, {"kind", "gpu", "value", "unit", "detail"}, prefix));
  ProbeResult probe;
  LIBRA_ASSIGN_OR_RETURN(probe.kind, ReadString(value, "kind", prefix, false));
  const ProbeKind* kind = FindProbeKind(probe.kind);
  if (kind == nullptr) {
    std::vector<std::string> names;
    for (const ProbeKind& k : ProbeKinds()) names.emplace_back(k.name);
    std::string what =
        "unknown probe kind '" + probe.kind + "' (known: " + StrJoin(names, ", ") + ")";
    const std::string hint = ClosestMatch(probe.kind, names);
    if (!hint.empty()) what += "; did you mean '" + hint + "'?";
    return FieldError(prefix + ".kind", what);
  }

  LIBRA_ASSIGN_OR_RETURN(const JsonValue* gpu, Require(value, "gpu", prefix));
  if (!gpu->is_int() || gpu->as_int() < -1 || gpu->as_int() > 1023) {
    return FieldError(
        prefix + ".gpu",
        "expected a device index in [0, 1023], or -1 for the node (got " + Shown(*gpu) + ")");
  }
  probe.gpu = static_cast<int>(gpu->as_int());
  if (kind->per_gpu && probe.gpu < 0) {
    return FieldError(prefix + ".gpu", "a " + probe.kind + " probe needs a device index");
  }
  if (!kind->per_gpu && probe.gpu >= 0) {
    return FieldError(prefix + ".gpu",
                      "a " + probe.kind + " probe is node-wide: its gpu must be -1");
  }

  LIBRA_ASSIGN_OR_RETURN(const JsonValue* number, Require(value, "value", prefix));
  if (!number->is_number() || !std::isfinite(number->as_double()) || number->as_double() <= 0) {
    return FieldError(prefix + ".value", "expected a positive number (got " + Shown(*number) + ")");
  }
  probe.value = number->as_double();

  LIBRA_ASSIGN_OR_RETURN(probe.unit, ReadString(value, "unit", prefix, false));
  if (probe.unit != kind->unit) {
    return FieldError(prefix + ".unit", "\"" + probe.unit + "\" is not the unit of " + probe.kind +
                                            " (" + std::string(kind->unit) + ")");
  }

  if (const JsonValue* detail = value.Find("detail"); detail != nullptr) {
    if (!detail->is_object()) {
      return FieldError(prefix + ".detail",
                        std::string("expected an object (got ") + detail->type_name() + ")");
    }
    probe.detail = *detail;
  }
  return probe;
}

}  // namespace

const std::vector<ProbeKind>& ProbeKinds() {
  static const std::vector<ProbeKind>* const kinds = new std::vector<ProbeKind>{
      {kInventory, "B", true, "GPU memory (name, SMs, driver and runtime in detail)"},
      {kHbmCopy, "B/s", true, "device-to-device copy, bytes read + written per second"},
      {kGemmBf16, "FLOP/s", true, "bf16 GEMM through cuBLAS"},
      {kH2d, "B/s", true, "pinned host-to-device copy"},
      {kD2h, "B/s", true, "pinned device-to-host copy"},
      {kAllReduce, "B/s", false, "NCCL all-reduce bus bandwidth, largest message"},
      {kAllReduceLatency, "s", false, "NCCL all-reduce of 8 bytes"},
      {kBroadcast, "B/s", false, "NCCL broadcast bus bandwidth, largest message"},
      {kAllReduceNodes, "B/s", false, "NCCL all-reduce bus bandwidth across nodes"},
      {kBroadcastNodes, "B/s", false, "NCCL broadcast bus bandwidth across nodes"},
  };
  return *kinds;
}

const ProbeKind* FindProbeKind(std::string_view name) {
  for (const ProbeKind& kind : ProbeKinds()) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

Result<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return Status::InvalidArgument(StrFormat("odd number of hex digits (%zu)", hex.size()));
  }
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]);
    const int low = digit(hex[i + 1]);
    if (high < 0 || low < 0) {
      return Status::InvalidArgument(StrFormat("not a hex digit at %zu: '%c'", high < 0 ? i : i + 1,
                                               hex[high < 0 ? i : i + 1]));
    }
    bytes.push_back(static_cast<char>(high << 4 | low));
  }
  return bytes;
}

ProbeOptions ProbeOptions::Quick() {
  ProbeOptions o;
  o.copy_bytes = int64_t{64} << 20;
  o.gemm_size = 2048;
  o.transfer_bytes = int64_t{16} << 20;
  o.collective_bytes = {8, int64_t{16} << 20};
  o.warmup = 1;
  o.repetitions = 3;
  return o;
}

std::string ProbeReportToJson(const ProbeReport& report) {
  std::string out = "{\"format\":" + JsonQuote(kFormat) +
                    StrFormat(",\"version\":%lld", static_cast<long long>(kFormatVersion)) +
                    ",\n \"host\":" + JsonQuote(report.host) +
                    ",\"recorded_at\":" + JsonQuote(report.recorded_at) +
                    ",\"libra_version\":" + JsonQuote(report.libra_version) + ",\n \"probes\":[";
  for (size_t i = 0; i < report.results.size(); ++i) {
    const ProbeResult& p = report.results[i];
    const JsonValue probe = JsonValue::MakeObject({{"kind", p.kind},
                                                   {"gpu", p.gpu},
                                                   {"value", p.value},
                                                   {"unit", p.unit},
                                                   {"detail", p.detail}});
    out += (i == 0 ? "\n  " : ",\n  ") + ToJson(probe);
  }
  out += "\n]}\n";
  return out;
}

Result<ProbeReport> ParseProbeReport(std::string_view text) {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue root, ParseJson(text));
  if (!root.is_object()) {
    return Status::InvalidArgument(std::string("expected a JSON object (got ") + root.type_name() +
                                   ")");
  }
  LIBRA_RETURN_IF_ERROR(
      CheckKeys(root, {"format", "version", "host", "recorded_at", "libra_version", "probes"}, ""));
  LIBRA_ASSIGN_OR_RETURN(const std::string format, ReadString(root, "format", "", false));
  if (format != kFormat) {
    return FieldError("format", "expected \"" + std::string(kFormat) + "\" (got " +
                                    JsonQuote(format) + "): not a libra probe file");
  }
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* version, Require(root, "version", ""));
  if (!version->is_int() || version->as_int() != kFormatVersion) {
    return FieldError("version",
                      StrFormat("this libra reads version %lld (got %s)",
                                static_cast<long long>(kFormatVersion), Shown(*version).c_str()));
  }
  ProbeReport report;
  LIBRA_ASSIGN_OR_RETURN(report.host, ReadString(root, "host", "", false));
  LIBRA_ASSIGN_OR_RETURN(report.recorded_at, ReadString(root, "recorded_at", "", false));
  LIBRA_ASSIGN_OR_RETURN(report.libra_version, ReadString(root, "libra_version", "", true));
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* probes, Require(root, "probes", ""));
  if (!probes->is_array()) {
    return FieldError("probes", std::string("expected an array (got ") + probes->type_name() + ")");
  }
  if (probes->as_array().empty()) return FieldError("probes", "no probes");
  for (size_t i = 0; i < probes->as_array().size(); ++i) {
    LIBRA_ASSIGN_OR_RETURN(ProbeResult probe,
                           ParseProbe(probes->as_array()[i], StrFormat("probes[%zu]", i)));
    report.results.push_back(std::move(probe));
  }
  return report;
}

}  // namespace libra::gpu
