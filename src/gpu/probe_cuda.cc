// The probes on the CUDA runtime, cuBLAS and (when built with it) NCCL. No custom kernels: a
// device-to-device cudaMemcpy for HBM bandwidth, cublasGemmEx in bf16 for compute, pinned
// cudaMemcpyAsync for host<->device, and ncclAllReduce / ncclBroadcast over every probed GPU of
// the node from this one process (ncclCommInitAll). Every timed probe warms up, then reports the
// median of its repetitions; device work is timed with CUDA events, NCCL with the host clock
// around a batch of collectives that ends in a synchronisation (as nccl-tests do).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "common/strings.h"
#include "gpu/probe.h"
#include "libra/config.h"

#if LIBRA_HAVE_NCCL
#include <nccl.h>
#endif

namespace libra::gpu {
namespace {

// ---- Errors and RAII handles ----

/// "gpu N" or "node" for messages.
std::string Where(int gpu) { return gpu < 0 ? "node" : StrFormat("gpu %d", gpu); }

Status Check(cudaError_t error, int gpu, const std::string& call) {
  if (error == cudaSuccess) return Status();
  return Status::Backend(Where(gpu), call + ": " + cudaGetErrorString(error));
}

Status Check(cublasStatus_t status, int gpu, const std::string& call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status();
  return Status::Backend(Where(gpu), call + ": " + cublasGetStatusString(status));
}

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct CublasDestroy {
  void operator()(cublasHandle_t handle) const { cublasDestroy(handle); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
using HostBuffer = std::unique_ptr<void, HostFree>;

Result<DeviceBuffer> AllocateDevice(int gpu, int64_t bytes) {
  void* p = nullptr;
  LIBRA_RETURN_IF_ERROR(Check(cudaMalloc(&p, static_cast<size_t>(bytes)), gpu,
                              StrFormat("cudaMalloc(%lld bytes)", static_cast<long long>(bytes))));
  DeviceBuffer buffer(p);
  // Non-zero contents: GEMMs of zeros draw less power and can run faster than real ones.
  LIBRA_RETURN_IF_ERROR(Check(cudaMemset(p, 0x3c, static_cast<size_t>(bytes)), gpu, "cudaMemset"));
  return buffer;
}

Result<HostBuffer> AllocatePinned(int gpu, int64_t bytes) {
  void* p = nullptr;
  LIBRA_RETURN_IF_ERROR(
      Check(cudaMallocHost(&p, static_cast<size_t>(bytes)), gpu,
            StrFormat("cudaMallocHost(%lld bytes)", static_cast<long long>(bytes))));
  std::fill_n(static_cast<unsigned char*>(p), bytes, static_cast<unsigned char>(0x3c));
  return HostBuffer(p);
}

/// A stream and two events on the current device.
class Timer {
 public:
  static Result<std::unique_ptr<Timer>> Create(int gpu) {
    auto timer = std::unique_ptr<Timer>(new Timer(gpu));
    LIBRA_RETURN_IF_ERROR(Check(cudaStreamCreateWithFlags(&timer->stream_, cudaStreamNonBlocking),
                                gpu, "cudaStreamCreate"));
    LIBRA_RETURN_IF_ERROR(Check(cudaEventCreate(&timer->start_), gpu, "cudaEventCreate"));
    LIBRA_RETURN_IF_ERROR(Check(cudaEventCreate(&timer->stop_), gpu, "cudaEventCreate"));
    return timer;
  }
  ~Timer() {
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  cudaStream_t stream() const { return stream_; }

  /// Median seconds of `launch(stream)` over `repetitions` timed runs after `warmup` untimed ones.
  template <typename Launch>
  Result<double> MedianSeconds(int warmup, int repetitions, Launch launch) {
    for (int i = 0; i < warmup; ++i) LIBRA_RETURN_IF_ERROR(launch(stream_));
    LIBRA_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream_), gpu_, "cudaStreamSynchronize"));
    std::vector<double> seconds;
    for (int i = 0; i < repetitions; ++i) {
      LIBRA_RETURN_IF_ERROR(Check(cudaEventRecord(start_, stream_), gpu_, "cudaEventRecord"));
      LIBRA_RETURN_IF_ERROR(launch(stream_));
      LIBRA_RETURN_IF_ERROR(Check(cudaEventRecord(stop_, stream_), gpu_, "cudaEventRecord"));
      LIBRA_RETURN_IF_ERROR(Check(cudaEventSynchronize(stop_), gpu_, "cudaEventSynchronize"));
      float ms = 0;
      LIBRA_RETURN_IF_ERROR(
          Check(cudaEventElapsedTime(&ms, start_, stop_), gpu_, "cudaEventElapsedTime"));
      seconds.push_back(static_cast<double>(ms) / 1e3);
    }
    return Median(seconds);
  }

  static double Median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  }

 private:
  explicit Timer(int gpu) : gpu_(gpu) {}
  int gpu_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

JsonValue Timing(int64_t bytes, double seconds, const ProbeOptions& o) {
  return JsonValue::MakeObject({{"bytes", bytes},
                                {"median_s", seconds},
                                {"warmup", o.warmup},
                                {"repetitions", o.repetitions}});
}

std::string Gib(int64_t bytes) {
  return bytes >= (int64_t{1} << 30)
             ? StrFormat("%.0f GiB", static_cast<double>(bytes) / (1 << 30))
             : StrFormat("%.0f MiB", static_cast<double>(bytes) / (1 << 20));
}

// ---- Per-GPU probes ----

Result<ProbeResult> ProbeInventory(int gpu, int driver, int runtime) {
  cudaDeviceProp prop{};
  LIBRA_RETURN_IF_ERROR(Check(cudaGetDeviceProperties(&prop, gpu), gpu, "cudaGetDeviceProperties"));
  char bus[32] = {};
  LIBRA_RETURN_IF_ERROR(
      Check(cudaDeviceGetPCIBusId(bus, sizeof bus, gpu), gpu, "cudaDeviceGetPCIBusId"));
  ProbeResult r;
  r.kind = std::string(kInventory);
  r.gpu = gpu;
  r.value = static_cast<double>(prop.totalGlobalMem);
  r.unit = "B";
  r.detail = JsonValue::MakeObject(
      {{"name", std::string(prop.name)},
       {"sms", prop.multiProcessorCount},
       {"compute_capability", StrFormat("%d.%d", prop.major, prop.minor)},
       {"pci_bus_id", std::string(bus)},
       {"driver_version", StrFormat("%d.%d", driver / 1000, (driver % 1000) / 10)},
       {"runtime_version", StrFormat("%d.%d", runtime / 1000, (runtime % 1000) / 10)}});
  return r;
}

Result<ProbeResult> ProbeCopy(int gpu, const ProbeOptions& o) {
  const int64_t bytes = o.copy_bytes;
  LIBRA_ASSIGN_OR_RETURN(DeviceBuffer src, AllocateDevice(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(DeviceBuffer dst, AllocateDevice(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Timer> timer, Timer::Create(gpu));
  LIBRA_ASSIGN_OR_RETURN(
      const double seconds, timer->MedianSeconds(o.warmup, o.repetitions, [&](cudaStream_t s) {
        return Check(cudaMemcpyAsync(dst.get(), src.get(), static_cast<size_t>(bytes),
                                     cudaMemcpyDeviceToDevice, s),
                     gpu, "cudaMemcpyAsync(device to device)");
      }));
  // Every byte is read once and written once.
  return ProbeResult{std::string(kHbmCopy), gpu, 2.0 * static_cast<double>(bytes) / seconds, "B/s",
                     Timing(bytes, seconds, o)};
}

Result<ProbeResult> ProbeGemm(int gpu, const ProbeOptions& o) {
  const int n = o.gemm_size;
  const int64_t bytes = int64_t{2} * n * n;  // bf16
  LIBRA_ASSIGN_OR_RETURN(DeviceBuffer a, AllocateDevice(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(DeviceBuffer b, AllocateDevice(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(DeviceBuffer c, AllocateDevice(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Timer> timer, Timer::Create(gpu));
  cublasHandle_t raw = nullptr;
  LIBRA_RETURN_IF_ERROR(Check(cublasCreate(&raw), gpu, "cublasCreate"));
  std::unique_ptr<cublasContext, CublasDestroy> handle(raw);
  LIBRA_RETURN_IF_ERROR(Check(cublasSetStream(raw, timer->stream()), gpu, "cublasSetStream"));
  const float alpha = 1;
  const float beta = 0;
  LIBRA_ASSIGN_OR_RETURN(
      const double seconds, timer->MedianSeconds(o.warmup, o.repetitions, [&](cudaStream_t) {
        return Check(cublasGemmEx(raw, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(),
                                  CUDA_R_16BF, n, b.get(), CUDA_R_16BF, n, &beta, c.get(),
                                  CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     gpu, "cublasGemmEx(bf16)");
      }));
  const double flops = 2.0 * n * n * static_cast<double>(n);
  return ProbeResult{std::string(kGemmBf16), gpu, flops / seconds, "FLOP/s",
                     JsonValue::MakeObject({{"m", n},
                                            {"n", n},
                                            {"k", n},
                                            {"median_s", seconds},
                                            {"warmup", o.warmup},
                                            {"repetitions", o.repetitions}})};
}

Result<ProbeResult> ProbeTransfer(int gpu, bool to_device, const ProbeOptions& o) {
  const int64_t bytes = o.transfer_bytes;
  LIBRA_ASSIGN_OR_RETURN(HostBuffer host, AllocatePinned(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(DeviceBuffer device, AllocateDevice(gpu, bytes));
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Timer> timer, Timer::Create(gpu));
  LIBRA_ASSIGN_OR_RETURN(
      const double seconds, timer->MedianSeconds(o.warmup, o.repetitions, [&](cudaStream_t s) {
        return to_device
                   ? Check(cudaMemcpyAsync(device.get(), host.get(), static_cast<size_t>(bytes),
                                           cudaMemcpyHostToDevice, s),
                           gpu, "cudaMemcpyAsync(host to device)")
                   : Check(cudaMemcpyAsync(host.get(), device.get(), static_cast<size_t>(bytes),
                                           cudaMemcpyDeviceToHost, s),
                           gpu, "cudaMemcpyAsync(device to host)");
      }));
  JsonValue detail = Timing(bytes, seconds, o);
  detail.Set("pinned", true);
  return ProbeResult{std::string(to_device ? kH2d : kD2h), gpu,
                     static_cast<double>(bytes) / seconds, "B/s", std::move(detail)};
}

// ---- NCCL ----

#if LIBRA_HAVE_NCCL

Status Check(ncclResult_t result, const std::string& call) {
  if (result == ncclSuccess) return Status();
  return Status::Backend("nccl", call + ": " + ncclGetErrorString(result));
}

/// The ranks of one process in a communicator that spans several processes.
struct Membership {
  ncclUniqueId id{};
  int first_rank = 0;
  int ranks = 0;
};

/// One communicator, stream and pair of buffers per GPU of this process: the communicator of just
/// these GPUs (ncclCommInitAll), or, with a membership, their ranks in a larger one.
class Clique {
 public:
  static Result<std::unique_ptr<Clique>> Create(const std::vector<int>& gpus, int64_t bytes,
                                                const Membership* member = nullptr) {
    auto clique = std::unique_ptr<Clique>(new Clique());
    clique->gpus_ = gpus;
    clique->comms_.resize(gpus.size(), nullptr);
    if (member == nullptr) {
      LIBRA_RETURN_IF_ERROR(
          Check(ncclCommInitAll(clique->comms_.data(), static_cast<int>(gpus.size()), gpus.data()),
                "ncclCommInitAll"));
    } else {
      // One process, several ranks: their inits must be one group, or the first waits forever
      // for the others.
      Status status = Check(ncclGroupStart(), "ncclGroupStart");
      for (size_t i = 0; i < gpus.size() && status.ok(); ++i) {
        status = Check(cudaSetDevice(gpus[i]), gpus[i], "cudaSetDevice");
        if (status.ok()) {
          status = Check(ncclCommInitRank(&clique->comms_[i], member->ranks, member->id,
                                          member->first_rank + static_cast<int>(i)),
                         "ncclCommInitRank");
        }
      }
      const Status ended = Check(ncclGroupEnd(), "ncclGroupEnd");
      LIBRA_RETURN_IF_ERROR(status);
      LIBRA_RETURN_IF_ERROR(ended);
    }
    for (int gpu : gpus) {
      LIBRA_RETURN_IF_ERROR(Check(cudaSetDevice(gpu), gpu, "cudaSetDevice"));
      LIBRA_ASSIGN_OR_RETURN(DeviceBuffer send, AllocateDevice(gpu, bytes));
      LIBRA_ASSIGN_OR_RETURN(DeviceBuffer receive, AllocateDevice(gpu, bytes));
      cudaStream_t stream = nullptr;
      LIBRA_RETURN_IF_ERROR(Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), gpu,
                                  "cudaStreamCreate"));
      clique->streams_.push_back(stream);
      clique->send_.push_back(std::move(send));
      clique->receive_.push_back(std::move(receive));
    }
    return clique;
  }
  ~Clique() {
    for (size_t i = 0; i < streams_.size(); ++i) {
      cudaSetDevice(gpus_[i]);
      cudaStreamDestroy(streams_[i]);
    }
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }
  Clique(const Clique&) = delete;
  Clique& operator=(const Clique&) = delete;

  /// Median seconds of one collective of `bytes` bytes (floats) on every GPU.
  Result<double> MedianSeconds(bool all_reduce, int64_t bytes, const ProbeOptions& o) {
    const size_t count = static_cast<size_t>(std::max<int64_t>(1, bytes / 4));
    // Small messages are timed in batches, so that the host clock resolves them.
    const int batch = bytes < (int64_t{1} << 20) ? 100 : 5;
    auto run = [&](int times) -> Status {
      for (int t = 0; t < times; ++t) {
        LIBRA_RETURN_IF_ERROR(Check(ncclGroupStart(), "ncclGroupStart"));
        for (size_t i = 0; i < gpus_.size(); ++i) {
          if (all_reduce) {
            LIBRA_RETURN_IF_ERROR(Check(ncclAllReduce(send_[i].get(), receive_[i].get(), count,
                                                      ncclFloat, ncclSum, comms_[i], streams_[i]),
                                        "ncclAllReduce"));
          } else {
            LIBRA_RETURN_IF_ERROR(Check(ncclBroadcast(send_[i].get(), receive_[i].get(), count,
                                                      ncclFloat, 0, comms_[i], streams_[i]),
                                        "ncclBroadcast"));
          }
        }
        LIBRA_RETURN_IF_ERROR(Check(ncclGroupEnd(), "ncclGroupEnd"));
      }
      for (size_t i = 0; i < gpus_.size(); ++i) {
        LIBRA_RETURN_IF_ERROR(Check(cudaSetDevice(gpus_[i]), gpus_[i], "cudaSetDevice"));
        LIBRA_RETURN_IF_ERROR(
            Check(cudaStreamSynchronize(streams_[i]), gpus_[i], "cudaStreamSynchronize"));
      }
      return Status();
    };
    LIBRA_RETURN_IF_ERROR(run(o.warmup));
    std::vector<double> seconds;
    for (int r = 0; r < o.repetitions; ++r) {
      const auto start = std::chrono::steady_clock::now();
      LIBRA_RETURN_IF_ERROR(run(batch));
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      seconds.push_back(elapsed.count() / batch);
    }
    return Timer::Median(seconds);
  }

 private:
  Clique() = default;
  std::vector<int> gpus_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<DeviceBuffer> send_;
  std::vector<DeviceBuffer> receive_;
};

/// All-reduce (bandwidth and latency) and broadcast across `gpus` of this node; with a membership,
/// across every rank of it (bandwidths only, as kAllReduceNodes and kBroadcastNodes).
Result<std::vector<ProbeResult>> ProbeCollectives(const std::vector<int>& gpus,
                                                  const ProbeOptions& o, const ProbeLog& log,
                                                  const Membership* member = nullptr) {
  std::vector<int64_t> sizes = o.collective_bytes;
  std::sort(sizes.begin(), sizes.end());
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Clique> clique,
                         Clique::Create(gpus, sizes.back(), member));
  const int64_t ranks = member == nullptr ? static_cast<int64_t>(gpus.size()) : member->ranks;
  const double n = static_cast<double>(ranks);
  std::vector<ProbeResult> results;
  for (const bool all_reduce : {true, false}) {
    const char* name = all_reduce ? "all-reduce" : "broadcast";
    log(StrFormat("%s: NCCL %s over %lld GPUs, %zu sizes up to %s",
                  member == nullptr ? "node" : "nodes", name, static_cast<long long>(ranks),
                  sizes.size(), Gib(sizes.back()).c_str()));
    JsonValue per_size = JsonValue::MakeArray();
    double busbw = 0;
    double smallest_s = 0;
    for (const int64_t bytes : sizes) {
      LIBRA_ASSIGN_OR_RETURN(const double seconds, clique->MedianSeconds(all_reduce, bytes, o));
      const double algbw = static_cast<double>(bytes) / seconds;
      // nccl-tests: all-reduce moves 2(n-1)/n of the data over the busiest link; broadcast 1.
      busbw = all_reduce ? algbw * 2 * (n - 1) / n : algbw;
      if (bytes == sizes.front()) smallest_s = seconds;
      per_size.Append(JsonValue::MakeObject(
          {{"bytes", bytes}, {"time_s", seconds}, {"algbw", algbw}, {"busbw", busbw}}));
    }
    JsonValue detail = JsonValue::MakeObject({{"gpus", ranks},
                                              {"sizes", per_size},
                                              {"warmup", o.warmup},
                                              {"repetitions", o.repetitions}});
    if (member != nullptr) {
      detail.Set("nodes", ranks / static_cast<int64_t>(gpus.size()));
      detail.Set("gpus_per_node", static_cast<int64_t>(gpus.size()));
      results.push_back(ProbeResult{std::string(all_reduce ? kAllReduceNodes : kBroadcastNodes), -1,
                                    busbw, "B/s", detail});
      continue;
    }
    results.push_back(
        ProbeResult{std::string(all_reduce ? kAllReduce : kBroadcast), -1, busbw, "B/s", detail});
    if (all_reduce) {
      results.push_back(
          ProbeResult{std::string(kAllReduceLatency), -1, smallest_s, "s",
                      JsonValue::MakeObject({{"gpus", static_cast<int64_t>(gpus.size())},
                                             {"bytes", sizes.front()}})});
    }
  }
  return results;
}

#endif  // LIBRA_HAVE_NCCL

}  // namespace

bool BuiltWithCuda() { return true; }
bool BuiltWithNccl() { return LIBRA_HAVE_NCCL != 0; }

Result<int> CountGpus() {
  int count = 0;
  LIBRA_RETURN_IF_ERROR(Check(cudaGetDeviceCount(&count), -1, "cudaGetDeviceCount"));
  if (count == 0) return Status::Backend("gpu", "the CUDA runtime sees no GPU");
  return count;
}

Result<ProbeReport> ProbeLocalNode(const ProbeOptions& options, const ProbeLog& progress) {
  const ProbeLog log = [&progress](const std::string& line) {
    if (progress) progress(line);
  };
  LIBRA_ASSIGN_OR_RETURN(const int count, CountGpus());
  std::vector<int> gpus = options.gpus;
  if (gpus.empty()) {
    for (int i = 0; i < count; ++i) gpus.push_back(i);
  }
  for (int gpu : gpus) {
    if (gpu < 0 || gpu >= count) {
      return Status::InvalidArgument(
          StrFormat("gpu %d does not exist (this node has %d: 0 to %d)", gpu, count, count - 1));
    }
  }
  if (options.repetitions < 1 || options.warmup < 0 || options.copy_bytes < 1 ||
      options.gemm_size < 1 || options.transfer_bytes < 1 || options.collective_bytes.empty()) {
    return Status::InvalidArgument("probe sizes and repetitions must be positive");
  }
  int driver = 0;
  int runtime = 0;
  LIBRA_RETURN_IF_ERROR(Check(cudaDriverGetVersion(&driver), -1, "cudaDriverGetVersion"));
  LIBRA_RETURN_IF_ERROR(Check(cudaRuntimeGetVersion(&runtime), -1, "cudaRuntimeGetVersion"));

  ProbeReport report;
  char host[256] = {};
  report.host = gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
  for (int gpu : gpus) {
    LIBRA_ASSIGN_OR_RETURN(ProbeResult inventory, ProbeInventory(gpu, driver, runtime));
    report.results.push_back(std::move(inventory));
  }
  for (int gpu : gpus) {
    LIBRA_RETURN_IF_ERROR(Check(cudaSetDevice(gpu), gpu, "cudaSetDevice"));
    log(StrFormat("gpu %d: device copy, %s x %d", gpu, Gib(options.copy_bytes).c_str(),
                  options.repetitions));
    LIBRA_ASSIGN_OR_RETURN(ProbeResult copy, ProbeCopy(gpu, options));
    report.results.push_back(std::move(copy));
    log(StrFormat("gpu %d: bf16 GEMM %d^3 x %d", gpu, options.gemm_size, options.repetitions));
    LIBRA_ASSIGN_OR_RETURN(ProbeResult gemm, ProbeGemm(gpu, options));
    report.results.push_back(std::move(gemm));
    log(StrFormat("gpu %d: host<->device, %s x %d each way", gpu,
                  Gib(options.transfer_bytes).c_str(), options.repetitions));
    for (const bool to_device : {true, false}) {
      LIBRA_ASSIGN_OR_RETURN(ProbeResult transfer, ProbeTransfer(gpu, to_device, options));
      report.results.push_back(std::move(transfer));
    }
  }
#if LIBRA_HAVE_NCCL
  if (gpus.size() >= 2) {
    LIBRA_ASSIGN_OR_RETURN(std::vector<ProbeResult> collectives,
                           ProbeCollectives(gpus, options, log));
    for (ProbeResult& r : collectives) report.results.push_back(std::move(r));
  } else {
    log("node: NCCL collectives skipped (they need at least two GPUs)");
  }
#else
  log("node: NCCL collectives skipped (built without NCCL: configure with -DLIBRA_WITH_NCCL=ON)");
#endif
  return report;
}

Result<std::vector<ProbeResult>> ProbeAcrossNodes(
    const NcclPeer& peer, const ProbeOptions& options,
    const std::function<void(const std::string&)>& on_unique_id, const ProbeLog& progress) {
#if LIBRA_HAVE_NCCL
  const ProbeLog log = [&progress](const std::string& line) {
    if (progress) progress(line);
  };
  if (peer.nodes < 2 || peer.node < 0 || peer.node >= peer.nodes || peer.gpus_per_node < 1) {
    return Status::InvalidArgument(
        StrFormat("node %d of %d with %d GPUs each is not a probe across nodes", peer.node,
                  peer.nodes, peer.gpus_per_node));
  }
  if (options.collective_bytes.empty() || options.repetitions < 1 || options.warmup < 0) {
    return Status::InvalidArgument("probe sizes and repetitions must be positive");
  }
  LIBRA_ASSIGN_OR_RETURN(const int count, CountGpus());
  std::vector<int> gpus = options.gpus;
  if (gpus.empty()) {
    for (int i = 0; i < peer.gpus_per_node; ++i) gpus.push_back(i);
  }
  if (static_cast<int>(gpus.size()) != peer.gpus_per_node) {
    return Status::InvalidArgument(
        StrFormat("%zu GPUs given for %d per node", gpus.size(), peer.gpus_per_node));
  }
  for (int gpu : gpus) {
    if (gpu < 0 || gpu >= count) {
      return Status::InvalidArgument(
          StrFormat("gpu %d does not exist (this node has %d)", gpu, count));
    }
  }
  Membership member;
  member.first_rank = peer.node * peer.gpus_per_node;
  member.ranks = peer.nodes * peer.gpus_per_node;
  if (peer.node == 0) {
    if (!peer.unique_id.empty()) {
      return Status::InvalidArgument("node 0 makes the unique id; it must not be given one");
    }
    LIBRA_RETURN_IF_ERROR(Check(ncclGetUniqueId(&member.id), "ncclGetUniqueId"));
    if (on_unique_id)
      on_unique_id(HexEncode(std::string_view(member.id.internal, sizeof member.id.internal)));
  } else {
    auto bytes = HexDecode(peer.unique_id);
    if (!bytes.ok())
      return Status::InvalidArgument("the NCCL unique id: " + bytes.status().message());
    if (bytes->size() != sizeof member.id.internal) {
      return Status::InvalidArgument(StrFormat("the NCCL unique id has %zu bytes, not %zu",
                                               bytes->size(), sizeof member.id.internal));
    }
    std::memcpy(member.id.internal, bytes->data(), bytes->size());
  }
  log(StrFormat("node %d of %d: joining %d ranks", peer.node, peer.nodes, member.ranks));
  LIBRA_ASSIGN_OR_RETURN(std::vector<ProbeResult> results,
                         ProbeCollectives(gpus, options, log, &member));
  if (peer.node != 0) results.clear();
  return results;
#else
  (void)peer;
  (void)options;
  (void)on_unique_id;
  (void)progress;
  return Status::Backend("gpu", "built without NCCL (configure with -DLIBRA_WITH_NCCL=ON)");
#endif
}

}  // namespace libra::gpu
