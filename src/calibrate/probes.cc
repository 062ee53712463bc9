#include "calibrate/probes.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/json.h"
#include "common/strings.h"
#include "gpu/probe.h"

namespace libra::calibrate {
namespace {

constexpr double kGB = 1e9;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// A field of a probe's JSON detail, or empty.
std::string DetailText(const records::ProbeRecord& probe, const std::string& key) {
  const Result<JsonValue> detail = ParseJson(probe.detail);
  if (!detail.ok()) return "";
  const JsonValue* value = detail->Find(key);
  if (value == nullptr) return "";
  return value->is_string() ? value->as_string() : ToJson(*value);
}

/// "256 MiB" for a message size.
std::string Size(double bytes) {
  if (bytes >= 1 << 30) return StrFormat("%g GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return StrFormat("%g MiB", bytes / (1 << 20));
  return StrFormat("%g B", bytes);
}

/// The largest message size of a collective probe, from its detail.
std::string LargestSize(const records::ProbeRecord& probe) {
  const Result<JsonValue> detail = ParseJson(probe.detail);
  if (!detail.ok()) return "";
  const JsonValue* sizes = detail->Find("sizes");
  if (sizes == nullptr || !sizes->is_array() || sizes->as_array().empty()) return "";
  const JsonValue* bytes = sizes->as_array().back().Find("bytes");
  return bytes != nullptr && bytes->is_number() ? ", " + Size(bytes->as_double()) : "";
}

}  // namespace

std::vector<records::ProbeRecord> NewestProbeSession(
    const std::vector<records::ProbeRecord>& probes) {
  if (probes.empty()) return {};
  const records::ProbeRecord* newest = &probes.front();
  for (const records::ProbeRecord& p : probes) {
    if (p.id > newest->id) newest = &p;
  }
  std::vector<records::ProbeRecord> session;
  for (const records::ProbeRecord& p : probes) {
    if (p.host == newest->host && p.recorded_at == newest->recorded_at) session.push_back(p);
  }
  return session;
}

std::optional<model::GpuSpec> CatalogGpuForDevice(const std::string& device_name) {
  std::optional<model::GpuSpec> match;
  for (const model::GpuSpec& gpu : model::GpuCatalog()) {
    // "H100-80G" -> "H100": the model number a CUDA device name carries.
    const std::string number = gpu.name.substr(0, gpu.name.find('-'));
    if (device_name.find(number) == std::string::npos) continue;
    if (match) return std::nullopt;
    match = gpu;
  }
  return match;
}

namespace {

/// A probe session's records by kind.
class ProbesByKind {
 public:
  explicit ProbesByKind(const std::vector<records::ProbeRecord>& probes) {
    for (const records::ProbeRecord& p : probes) by_kind_[p.kind].push_back(&p);
  }
  /// The records of `kind` (empty when none).
  const std::vector<const records::ProbeRecord*>& Of(std::string_view kind) const {
    static const std::vector<const records::ProbeRecord*> kNone;
    auto it = by_kind_.find(std::string(kind));
    return it == by_kind_.end() ? kNone : it->second;
  }
  /// The median of a per-GPU probe's values.
  std::optional<double> Median(std::string_view kind) const {
    const auto& records = Of(kind);
    if (records.empty()) return std::nullopt;
    std::vector<double> values;
    for (const records::ProbeRecord* p : records) values.push_back(p->value);
    return calibrate::Median(values);
  }
  /// The last record of a probe of the whole node (or nodes).
  const records::ProbeRecord* NodeWide(std::string_view kind) const {
    const auto& records = Of(kind);
    return records.empty() ? nullptr : records.back();
  }

 private:
  std::map<std::string, std::vector<const records::ProbeRecord*>> by_kind_;
};

/// Sets a GPU number to what a probe measured (value_si, in SI units) and records the override
/// (in the catalog's `unit`).
void Override(ProbeCalibration& c, const std::string& key, double* field, double value_si,
              double unit, const std::string& source) {
  c.overrides.push_back(GpuOverride{key, *field / unit, value_si / unit, source});
  *field = value_si;
}

/// Memory: its size, and the device copy's bandwidth (decode_bw_util).
void CalibrateMemory(const ProbesByKind& probes, const std::string& of_gpus, ProbeCalibration& c) {
  const auto& inventory = probes.Of(gpu::kInventory);
  if (!inventory.empty()) {
    double smallest = inventory.front()->value;
    for (const records::ProbeRecord* p : inventory) smallest = std::min(smallest, p->value);
    Override(c, "hbm_gb", &c.gpu.hbm_bytes, smallest, kGB,
             "GPU memory the CUDA runtime reports" + std::string(c.gpus > 1 ? " (smallest" : "") +
                 (c.gpus > 1 ? of_gpus + ")" : ""));
  }
  if (const auto copy = probes.Median(gpu::kHbmCopy)) {
    const std::string source = "device-to-device copy, median" + of_gpus;
    if (*copy > c.gpu.hbm_bandwidth) {
      c.notes.push_back(StrFormat(
          "the device copy (%.0f GB/s) beats the GPU's HBM bandwidth (%.0f GB/s): its numbers are "
          "wrong, so hbm_gbps becomes the measurement",
          *copy / kGB, c.gpu.hbm_bandwidth / kGB));
      Override(c, "hbm_gbps", &c.gpu.hbm_bandwidth, *copy, kGB, source);
    }
    c.decode_bw_util = *copy / c.gpu.hbm_bandwidth;
    c.decode_bw_source = StrFormat("%s: %.0f GB/s over hbm_gbps %.0f", source.c_str(), *copy / kGB,
                                   c.gpu.hbm_bandwidth / kGB);
  } else {
    c.notes.push_back("no device-copy probe: decode_bw_util is not set from probes");
  }
}

/// Compute and the host link: the bf16 GEMM, pinned copies each way.
void CalibrateComputeAndHost(const ProbesByKind& probes, const std::string& of_gpus,
                             ProbeCalibration& c) {
  if (const auto gemm = probes.Median(gpu::kGemmBf16)) {
    if (*gemm > c.gpu.bf16_flops) {
      c.notes.push_back(StrFormat(
          "the bf16 GEMM (%.0f TFLOP/s) beats the GPU's bf16_tflops (%.0f): its numbers are "
          "wrong, so bf16_tflops becomes the measurement",
          *gemm / 1e12, c.gpu.bf16_flops / 1e12));
      Override(c, "bf16_tflops", &c.gpu.bf16_flops, *gemm, 1e12,
               "bf16 GEMM (cuBLAS), median" + of_gpus);
    }
    c.gemm_efficiency = *gemm / c.gpu.bf16_flops;
  }
  if (const auto h2d = probes.Median(gpu::kH2d)) {
    Override(c, "h2d_gbps", &c.gpu.h2d_bandwidth, *h2d, kGB,
             "pinned host-to-device copy, median" + of_gpus);
  }
  if (const auto d2h = probes.Median(gpu::kD2h)) {
    Override(c, "d2h_gbps", &c.gpu.d2h_bandwidth, *d2h, kGB,
             "pinned device-to-host copy, median" + of_gpus);
  }
}

/// NCCL within the node and across nodes.
void CalibrateCollectives(const ProbesByKind& probes, ProbeCalibration& c) {
  if (const records::ProbeRecord* p = probes.NodeWide(gpu::kAllReduce)) {
    Override(
        c, "allreduce_gbps", &c.gpu.allreduce_bandwidth, p->value, kGB,
        "NCCL all-reduce bus bandwidth, " + DetailText(*p, "gpus") + " GPUs" + LargestSize(*p));
  } else {
    c.notes.push_back(
        "no NCCL probes (one GPU, or libra built without NCCL): allreduce_gbps, "
        "allreduce_latency_us and nvlink_gbps keep their values");
  }
  if (const records::ProbeRecord* p = probes.NodeWide(gpu::kAllReduceLatency)) {
    Override(c, "allreduce_latency_us", &c.gpu.allreduce_latency_s, p->value, 1e-6,
             "NCCL all-reduce of 8 bytes, " + DetailText(*p, "gpus") + " GPUs");
  }
  if (const records::ProbeRecord* p = probes.NodeWide(gpu::kBroadcast)) {
    Override(c, "nvlink_gbps", &c.gpu.nvlink_bandwidth, p->value, kGB,
             "NCCL broadcast bus bandwidth, " + DetailText(*p, "gpus") + " GPUs" + LargestSize(*p));
  }
  if (const records::ProbeRecord* p = probes.NodeWide(gpu::kAllReduceNodes)) {
    // A ring across nodes runs one channel per NIC, so its bus bandwidth is about what one node
    // moves over the network.
    Override(c, "inter_node_gbps", &c.gpu.inter_node_bandwidth, p->value, kGB,
             "NCCL all-reduce bus bandwidth across " + DetailText(*p, "nodes") + " nodes x " +
                 DetailText(*p, "gpus_per_node") + " GPUs" + LargestSize(*p));
  }
}

}  // namespace

Result<ProbeCalibration> CalibrateFromProbes(const std::vector<records::ProbeRecord>& probes,
                                             const model::GpuSpec& gpu) {
  if (probes.empty()) return Status::InvalidArgument("no probes to calibrate from");
  for (const records::ProbeRecord& p : probes) {
    if (!(p.value > 0) || !std::isfinite(p.value)) {
      return Status::InvalidArgument(StrFormat("probe %lld (%s) has value %g: not positive",
                                               static_cast<long long>(p.id), p.kind.c_str(),
                                               p.value));
    }
  }
  const ProbesByKind by_kind(probes);
  ProbeCalibration c;
  c.host = probes.front().host;
  c.recorded_at = probes.front().recorded_at;
  c.gpu = gpu;
  const auto& inventory = by_kind.Of(gpu::kInventory);
  if (!inventory.empty()) {
    c.gpus = static_cast<int>(inventory.size());
    c.device = DetailText(*inventory.front(), "name");
  }
  if (!c.device.empty()) {
    const std::optional<model::GpuSpec> catalog = CatalogGpuForDevice(c.device);
    if (catalog && catalog->name != gpu.name) {
      const std::string what = "the probed GPUs are " + c.device + " (catalog " + catalog->name +
                               "), not the recipe's " + gpu.name;
      // A catalog GPU's numbers must not be overwritten with another GPU's; a GPU the recipe
      // describes itself may be a variant the catalog does not tell apart.
      if (model::FindGpu(gpu.name).ok()) {
        return Status::InvalidArgument(
            what + ": probe that GPU, or calibrate a recipe whose cluster.gpu is " + catalog->name);
      }
      c.notes.push_back(what);
    }
  }
  const std::string of_gpus = c.gpus > 0 ? StrFormat(" of %d GPUs", c.gpus) : "";
  CalibrateMemory(by_kind, of_gpus, c);
  CalibrateComputeAndHost(by_kind, of_gpus, c);
  CalibrateCollectives(by_kind, c);
  return c;
}

}  // namespace libra::calibrate
