// GPU probes: what this node's GPUs really deliver, measured rather than taken from a datasheet.
// Inventory (name, memory, SMs, driver and runtime versions), HBM bandwidth (a device-to-device
// copy), bf16 GEMM throughput (cuBLAS), host<->device bandwidth (pinned copies), NCCL all-reduce
// and broadcast bus bandwidth across the node's GPUs (one process, ncclCommInitAll), and across
// nodes (one process per node, joined through a unique id that libra hands out).
//
// This header is plain C++: the result types, their JSON form (so that probes run on another
// machine can be imported) and the probe entry points. CUDA, cuBLAS and NCCL are included only by
// probe_cuda.cc, which is compiled when libra is configured with -DLIBRA_WITH_CUDA=ON (NCCL with
// -DLIBRA_WITH_NCCL=ON); otherwise probe_stub.cc answers every probe with an error that says how
// to build them. The probes measure; they never change the cost model themselves (that is
// src/calibrate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace libra::gpu {

// Probe kinds. Values are in SI units: bytes, bytes/s, FLOP/s, seconds.
/// Per GPU: its memory in bytes; detail: name, sms, compute_capability, pci_bus_id,
/// driver_version, runtime_version.
inline constexpr std::string_view kInventory = "inventory";
/// Per GPU: device-to-device copy bandwidth, bytes read plus bytes written per second (the
/// convention of CUDA's bandwidthTest).
inline constexpr std::string_view kHbmCopy = "hbm_copy";
/// Per GPU: dense bf16 GEMM throughput through cuBLAS (fp32 accumulation), FLOP/s.
inline constexpr std::string_view kGemmBf16 = "gemm_bf16";
/// Per GPU: pinned host-to-device and device-to-host copy bandwidth, bytes/s.
inline constexpr std::string_view kH2d = "h2d";
inline constexpr std::string_view kD2h = "d2h";
/// Node-wide (gpu = -1): NCCL all-reduce bus bandwidth at the largest message, bytes/s, as
/// nccl-tests define it (algbw * 2(n-1)/n); detail: gpus and every size measured.
inline constexpr std::string_view kAllReduce = "allreduce";
/// Node-wide: time of one all-reduce of the smallest message (8 bytes), seconds.
inline constexpr std::string_view kAllReduceLatency = "allreduce_latency";
/// Node-wide: NCCL broadcast bus bandwidth at the largest message (busbw = algbw), bytes/s.
inline constexpr std::string_view kBroadcast = "broadcast";
/// Across nodes (gpu = -1, host naming every node): NCCL all-reduce and broadcast bus bandwidth
/// over every GPU of every node, one process per node (ProbeAcrossNodes); detail: nodes,
/// gpus_per_node and every size measured.
inline constexpr std::string_view kAllReduceNodes = "allreduce_nodes";
inline constexpr std::string_view kBroadcastNodes = "broadcast_nodes";

/// What a kind measures: its unit and whether it is per GPU or node-wide.
struct ProbeKind {
  std::string_view name{};
  std::string_view unit{};  // "B", "B/s", "FLOP/s", "s"
  bool per_gpu = true;
  std::string_view description{};
};

/// Every kind, in the order probes run and print.
const std::vector<ProbeKind>& ProbeKinds();
/// The kind named `name`, or null.
const ProbeKind* FindProbeKind(std::string_view name);

/// One measurement.
struct ProbeResult {
  std::string kind;
  /// CUDA device index, or -1 for a node-wide probe (NCCL across the node's GPUs).
  int gpu = -1;
  /// In the kind's unit (SI).
  double value = 0;
  std::string unit;
  /// How it was measured (sizes, repetitions, per-size results, device properties): a JSON
  /// object, kept verbatim in the store.
  JsonValue detail = JsonValue::MakeObject();

  bool operator==(const ProbeResult&) const = default;
};

/// One probe session of one node.
struct ProbeReport {
  std::string host;
  /// ISO 8601 UTC.
  std::string recorded_at;
  std::string libra_version;
  std::vector<ProbeResult> results;

  bool operator==(const ProbeReport&) const = default;
};

/// The JSON document of a report (format "libra-probes", version 1), pretty enough to diff: one
/// probe per line.
std::string ProbeReportToJson(const ProbeReport& report);

/// Bytes of a probe report libra reads (a report of every probe of a 64-GPU node is ~100 KB).
inline constexpr size_t kMaxProbeReportBytes = size_t{16} << 20;

/// Parses and checks a probe document: a JSON object {"format": "libra-probes", "version": 1,
/// "host", "recorded_at", "libra_version", "probes": [{"kind", "gpu", "value", "unit",
/// "detail"?}]}. Unknown keys, unknown kinds, a unit that is not the kind's, a per-GPU kind
/// without a GPU index (or a node-wide one with one), values that are not positive finite numbers
/// are errors. kInvalidArgument naming the field, e.g. "probes[2].unit: \"GB/s\" is not the unit
/// of hbm_copy (B/s)"; callers prefix the file name.
Result<ProbeReport> ParseProbeReport(std::string_view text);

/// How much work each probe does. The defaults take about ten seconds per GPU on an H100.
struct ProbeOptions {
  /// Device indices to probe; empty: every visible GPU. Default: empty.
  std::vector<int> gpus;
  /// Bytes of each device-to-device copy. Default: 1 GiB.
  int64_t copy_bytes = int64_t{1} << 30;
  /// m = n = k of the bf16 GEMM. Default: 8192.
  int gemm_size = 8192;
  /// Bytes of each pinned host<->device copy. Default: 256 MiB.
  int64_t transfer_bytes = int64_t{256} << 20;
  /// NCCL message sizes in bytes: the smallest gives the latency, the largest the bus bandwidth.
  /// Default: 8 B, 1 MiB, 64 MiB, 256 MiB.
  std::vector<int64_t> collective_bytes = {8, int64_t{1} << 20, int64_t{64} << 20,
                                           int64_t{256} << 20};
  /// Untimed runs before timing, and timed runs whose median is reported. Default: 3 and 10.
  int warmup = 3;
  int repetitions = 10;

  /// Small sizes and few repetitions: a smoke test in seconds, not a measurement to trust.
  static ProbeOptions Quick();
};

/// Whether this libra was built with the CUDA probes and with the NCCL probes.
bool BuiltWithCuda();
bool BuiltWithNccl();

/// CUDA devices visible to this process. kBackend when built without CUDA ("built without CUDA
/// (configure with -DLIBRA_WITH_CUDA=ON)") or when the CUDA runtime finds no usable device (the
/// runtime's reason, e.g. "no CUDA-capable device is detected").
Result<int> CountGpus();

/// Receives one line per probe as it starts ("gpu 0: device copy, 1 GiB x 10").
using ProbeLog = std::function<void(const std::string&)>;

/// Lower-case hex of `bytes`, and back: how an NCCL unique id travels on a command line.
/// HexDecode: kInvalidArgument for an odd length or a character that is not a hex digit.
std::string HexEncode(std::string_view bytes);
Result<std::string> HexDecode(std::string_view hex);

/// Where this process sits in a collective probe across nodes: one process per node, each driving
/// `gpus_per_node` GPUs (ProbeOptions::gpus, or GPUs 0 .. gpus_per_node - 1), ranks node-major.
struct NcclPeer {
  /// Node 0 leaves it empty: it makes the unique id and hands it out through `on_unique_id`.
  /// Every other node gets that id, as hex.
  std::string unique_id;
  int node = 0;
  int nodes = 2;
  int gpus_per_node = 1;
};

/// NCCL all-reduce and broadcast across the nodes (kAllReduceNodes, kBroadcastNodes), measured
/// with ProbeOptions::collective_bytes. Node 0 makes the unique id, calls `on_unique_id(hex)` (the
/// caller prints it, libra reads it and starts the other nodes with it), then waits in
/// ncclCommInitRank until every node has joined; its results are the measurements, the other
/// nodes' are empty. kBackend when built without NCCL, on an NCCL or CUDA error (naming the call),
/// kInvalidArgument for a peer that does not fit (node out of range, a bad id, too few GPUs).
Result<std::vector<ProbeResult>> ProbeAcrossNodes(
    const NcclPeer& peer, const ProbeOptions& options,
    const std::function<void(const std::string&)>& on_unique_id, const ProbeLog& log);

/// Runs every probe on this node: inventory, then per GPU copy, GEMM, H2D and D2H, then NCCL
/// across the probed GPUs when there are at least two and NCCL is built in (`log` says when they
/// are skipped). Fills host and results; the caller stamps recorded_at and libra_version.
/// Errors: as CountGpus; kBackend naming the GPU and the call that failed; kInvalidArgument for
/// a GPU index that does not exist.
Result<ProbeReport> ProbeLocalNode(const ProbeOptions& options, const ProbeLog& log);

}  // namespace libra::gpu
