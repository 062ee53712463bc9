// From GPU probes (src/gpu, stored by `libra probe`) to the cost model's numbers.
//
// The model keeps a GPU's datasheet peaks (bf16_tflops, hbm_gbps) and says how much of them real
// work reaches with efficiency factors. Probes therefore change:
//   * numbers the model uses as achieved figures, replaced by the measurement: hbm_gb (memory the
//     runtime reports), allreduce_gbps and allreduce_latency_us (NCCL all-reduce bus bandwidth and
//     8-byte time), nvlink_gbps (NCCL broadcast bus bandwidth: the link the model sends weights
//     and pipeline activations over), h2d_gbps and d2h_gbps (pinned copies);
//   * decode_bw_util, set to device-copy bandwidth / hbm_gbps: the default's own assumption is
//     that decode streams HBM as fast as a copy does (docs/cost-model.md), and this measures it;
//   * nothing else: the GEMM probe gives an upper bound on prefill_mfu and train_mfu (prefill and
//     training do more than GEMMs), reported, not applied.
// A peak the probe beats (a copy faster than hbm_gbps) means the GPU's numbers are wrong: the
// peak is replaced by the measurement and the factor set to 1. Per-GPU probes are summarised by
// their median over the node's GPUs (memory by the smallest). Pure: no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/catalog.h"
#include "records/records.h"

namespace libra::calibrate {

/// One [cluster.gpu_spec] number a probe sets, in the key's units.
struct GpuOverride {
  std::string key;  // "allreduce_gbps"
  double before = 0;
  double value = 0;
  /// Where the number comes from, e.g. "NCCL all-reduce bus bandwidth, 8 GPUs, 256 MiB".
  std::string source;
};

struct ProbeCalibration {
  /// The session: host, when, and the GPUs seen.
  std::string host;
  std::string recorded_at;
  int gpus = 0;
  std::string device;
  /// The GPU with the measured numbers in place.
  model::GpuSpec gpu;
  std::vector<GpuOverride> overrides;
  /// Device copy / HBM bandwidth in force, with its source; unset without a copy probe.
  std::optional<double> decode_bw_util;
  std::string decode_bw_source;
  /// Measured GEMM FLOP/s over bf16_tflops: a ceiling for prefill_mfu and train_mfu.
  std::optional<double> gemm_efficiency;
  /// Everything worth a user's attention (missing probes, a device that is not the recipe's GPU).
  std::vector<std::string> notes;
};

/// The newest session among `probes`: the rows with the host and recorded_at of the highest id.
std::vector<records::ProbeRecord> NewestProbeSession(
    const std::vector<records::ProbeRecord>& probes);

/// What the session `probes` says about `gpu` (the recipe's GPU). kInvalidArgument when the
/// session has no probes, a value is not positive, or the probed device is another catalog GPU
/// than `gpu` (a GPU the recipe describes itself only gets a note).
Result<ProbeCalibration> CalibrateFromProbes(const std::vector<records::ProbeRecord>& probes,
                                             const model::GpuSpec& gpu);

/// The catalog GPU a CUDA device name is, by the model number in both ("NVIDIA H100 80GB HBM3"
/// is H100-80G); nullopt when no catalog entry, or more than one, matches.
std::optional<model::GpuSpec> CatalogGpuForDevice(const std::string& device_name);

}  // namespace libra::calibrate
