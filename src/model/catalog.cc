#include "model/catalog.h"

#include <limits>

#include "common/strings.h"

namespace libra::model {
namespace {

constexpr double kGB = 1e9;
constexpr double kTera = 1e12;

}  // namespace

double ModelArch::AttentionParamsPerLayer() const {
  const double q = static_cast<double>(heads) * head_dim;
  const double kv = static_cast<double>(kv_heads) * head_dim;
  return hidden * (q + 2 * kv) + q * hidden;
}

double ModelArch::MlpParamsPerLayer() const {
  if (!moe()) return 3.0 * hidden * ffn;
  return 3.0 * hidden * expert_ffn * experts + static_cast<double>(hidden) * experts;
}

double ModelArch::TotalParams() const {
  const double embeddings = static_cast<double>(vocab) * hidden * (tied_embeddings ? 1 : 2);
  const double norms = 2.0 * hidden * layers + hidden;
  return layers * (AttentionParamsPerLayer() + MlpParamsPerLayer()) + embeddings + norms;
}

double ModelArch::ExpertParams() const {
  return moe() ? layers * 3.0 * hidden * expert_ffn * experts : 0;
}

double ModelArch::ActiveMatmulParams() const {
  const double mlp =
      moe() ? 3.0 * hidden * expert_ffn * experts_per_token + static_cast<double>(hidden) * experts
            : MlpParamsPerLayer();
  return layers * (AttentionParamsPerLayer() + mlp) + static_cast<double>(vocab) * hidden;
}

double ModelArch::KvBytesPerToken() const {
  return 2.0 * layers * kv_heads * head_dim * dtype_bytes;
}

const std::vector<GpuSpec>& GpuCatalog() {
  // Sources: shared/reference/performance.md §2.1, which cites each figure. "Assumed" marks a
  // number no public measurement gives; docs/cost-model.md lists them.
  static const std::vector<GpuSpec> kGpus = {
      // NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s bf16, 2,039 GB/s, 600 GB/s NVLink
      // (300 per direction). All-reduce busbw 200 GB/s: NVIDIA/nccl-tests #149 (8x A100).
      // Inter-node 200 GB/s per node and 5 us: the Libra authors' a100_80g.yaml. H2D 25.1 GB/s:
      // NVIDIA/nvbandwidth #42 (D2H assumed equal).
      {"A100-80G", 312 * kTera, 2039 * kGB, 80 * kGB, 300 * kGB, 200 * kGB, 5e-6, 200 * kGB,
       25.1 * kGB, 25.1 * kGB},
      // A800 SXM4 80GB: an A100 with NVLink cut to 400 GB/s (200 per direction) (heise.de,
      // tweakers.net). No public nccl-tests figure: busbw assumed 150 GB/s (0.75 x 200).
      // Inter-node 100 GB/s and 8 us: the Libra authors' a800_80g.yaml. Host link as A100.
      {"A800-80G", 312 * kTera, 2039 * kGB, 80 * kGB, 200 * kGB, 150 * kGB, 8e-6, 100 * kGB,
       25.1 * kGB, 25.1 * kGB},
      // H100 SXM5 80GB datasheet: 989.4 TFLOP/s, 3.35 TB/s, 900 GB/s NVLink (450 per direction).
      // busbw assumed 340 GB/s (0.75 x 450; NVLS reaches 480: NVIDIA/nccl #1374). Inter-node
      // 400 GB/s and 3 us: the Libra authors' h100_80g.yaml. H2D 35, D2H 53 GB/s:
      // NVIDIA/nvbandwidth #24.
      {"H100-80G", 989.4 * kTera, 3350 * kGB, 80 * kGB, 450 * kGB, 340 * kGB, 3e-6, 400 * kGB,
       35 * kGB, 53 * kGB},
      // H800 SXM: H100 compute and memory, NVLink 400 GB/s (200 per direction); busbw 215 GB/s
      // measured on 8x H800 (NVIDIA/nccl #1374). Inter-node 400 GB/s and 3 us assumed as H100.
      {"H800", 989 * kTera, 3350 * kGB, 80 * kGB, 200 * kGB, 215 * kGB, 3e-6, 400 * kGB, 35 * kGB,
       53 * kGB},
      // H200 SXM 141GB: H100 die, 4.8 TB/s HBM3e, 900 GB/s NVLink (MLCommons inference v4.1
      // system description). busbw, inter-node and host link assumed as H100.
      {"H200", 989 * kTera, 4800 * kGB, 141 * kGB, 450 * kGB, 340 * kGB, 3e-6, 400 * kGB, 35 * kGB,
       53 * kGB},
  };
  return kGpus;
}

const std::vector<ModelArch>& ModelCatalog() {
  // Shapes from each model's Hugging Face config.json (cited per entry in
  // shared/reference/performance.md §2.2); parameter counts are computed from them.
  static const std::vector<ModelArch> kModels = {
      // Qwen/Qwen3-0.6B config.json: 28 layers, 1024 hidden, 16/8 heads, head_dim 128, 3072 ffn,
      // tied embeddings.
      {"Qwen3-0.6B", 28, 1024, 16, 8, 128, 3072, 151936, true, 0, 0, 0, 2},
      // Qwen/Qwen3-1.7B config.json: 28 layers, 2048 hidden, 16/8 heads, 6144 ffn, tied.
      {"Qwen3-1.7B", 28, 2048, 16, 8, 128, 6144, 151936, true, 0, 0, 0, 2},
      // Qwen/Qwen3-4B config.json: 36 layers, 2560 hidden, 32/8 heads, 9728 ffn, tied.
      {"Qwen3-4B", 36, 2560, 32, 8, 128, 9728, 151936, true, 0, 0, 0, 2},
      // Qwen/Qwen3-8B config.json: 36 layers, 4096 hidden, 32/8 heads, 12288 ffn.
      {"Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, false, 0, 0, 0, 2},
      // Qwen/Qwen3-14B config.json and model card (14.8 B, 40 layers, GQA 40/8): 5120 hidden,
      // 17408 ffn.
      {"Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, false, 0, 0, 0, 2},
      // Qwen/Qwen3-32B config.json: 64 layers, 5120 hidden, 64/8 heads, 25600 ffn.
      {"Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, false, 0, 0, 0, 2},
      // Qwen/Qwen3-30B-A3B config.json: 48 layers, 2048 hidden, 32/4 heads, head_dim 128,
      // 128 experts, 8 per token, expert ffn 768, no shared expert.
      {"Qwen3-30B-A3B", 48, 2048, 32, 4, 128, 0, 151936, false, 128, 8, 768, 2},
      // Qwen/Qwen2.5-7B config.json: 28 layers, 3584 hidden, 28/4 heads, 18944 ffn, vocab 152064.
      {"Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, false, 0, 0, 0, 2},
      // meta-llama/Meta-Llama-3-8B config.json: 32 layers, 4096 hidden, 32/8 heads, 14336 ffn,
      // vocab 128256.
      {"Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, false, 0, 0, 0, 2},
  };
  return kModels;
}

namespace {

template <typename T>
Result<T> Find(const std::vector<T>& catalog, const std::string& name, const char* family) {
  std::vector<std::string> names;
  for (const T& entry : catalog) {
    if (entry.name == name) return entry;
    names.push_back(entry.name);
  }
  std::string message = std::string("unknown ") + family + " '" + name +
                        "' (known: " + StrJoin(names, ", ") + "; or describe it in a custom table)";
  const std::string hint = ClosestMatch(name, names);
  if (!hint.empty()) message += "; did you mean '" + hint + "'?";
  return Status::NotFound(message);
}

}  // namespace

Result<GpuSpec> FindGpu(const std::string& name) { return Find(GpuCatalog(), name, "GPU"); }

Result<ModelArch> FindModel(const std::string& name) { return Find(ModelCatalog(), name, "model"); }

Result<GpuSpec> GpuFromOptions(const std::string& name, const recipe::OptionTable& table,
                               const GpuSpec* base) {
  recipe::OptionReader r(table);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // A field of `base` (in the key's units), or required when there is no base.
  auto field = [&](const std::string& key, double scale, const double* from_base) {
    if (from_base == nullptr && !r.Has(key)) r.Error(key, "required field is missing");
    return r.Double(key, from_base != nullptr ? *from_base / scale : 0, 1e-9, kInf) * scale;
  };
  auto of = [&](const double GpuSpec::*member) {
    return base != nullptr ? &(base->*member) : nullptr;
  };
  GpuSpec gpu;
  gpu.name = name;
  gpu.bf16_flops = field("bf16_tflops", kTera, of(&GpuSpec::bf16_flops));
  gpu.hbm_bandwidth = field("hbm_gbps", kGB, of(&GpuSpec::hbm_bandwidth));
  gpu.hbm_bytes = field("hbm_gb", kGB, of(&GpuSpec::hbm_bytes));
  gpu.nvlink_bandwidth = field("nvlink_gbps", kGB, of(&GpuSpec::nvlink_bandwidth));
  gpu.allreduce_bandwidth = field("allreduce_gbps", kGB, of(&GpuSpec::allreduce_bandwidth));
  gpu.allreduce_latency_s =
      r.Double("allreduce_latency_us", base != nullptr ? base->allreduce_latency_s * 1e6 : 5, 0,
               1e6) *
      1e-6;
  gpu.inter_node_bandwidth = field("inter_node_gbps", kGB, of(&GpuSpec::inter_node_bandwidth));
  gpu.h2d_bandwidth = field("h2d_gbps", kGB, of(&GpuSpec::h2d_bandwidth));
  gpu.d2h_bandwidth = r.Has("d2h_gbps") || base != nullptr
                          ? field("d2h_gbps", kGB, of(&GpuSpec::d2h_bandwidth))
                          : gpu.h2d_bandwidth;
  LIBRA_RETURN_IF_ERROR(r.Finish());
  return gpu;
}

Result<ModelArch> ModelFromOptions(const std::string& name, const recipe::OptionTable& table) {
  recipe::OptionReader r(table);
  constexpr int64_t kMax = int64_t{1} << 30;
  auto required = [&](const std::string& key, int64_t min) {
    if (!r.Has(key)) r.Error(key, "required field is missing");
    return r.Int(key, min, min, kMax);
  };
  ModelArch m;
  m.name = name;
  m.layers = static_cast<int>(required("layers", 1));
  m.hidden = static_cast<int>(required("hidden", 1));
  m.heads = static_cast<int>(required("heads", 1));
  m.kv_heads = static_cast<int>(required("kv_heads", 1));
  m.head_dim = static_cast<int>(r.Int("head_dim", m.heads > 0 ? m.hidden / m.heads : 0, 1, kMax));
  m.vocab = required("vocab", 1);
  m.tied_embeddings = r.Bool("tied_embeddings", false);
  m.experts = static_cast<int>(r.Int("experts", 0, 0, kMax));
  m.experts_per_token = static_cast<int>(r.Int("experts_per_token", 0, 0, kMax));
  m.expert_ffn = static_cast<int>(r.Int("expert_ffn", 0, 0, kMax));
  m.ffn = static_cast<int>(r.Int("ffn", 0, 0, kMax));
  m.dtype_bytes = static_cast<int>(r.Int("dtype_bytes", 2, 1, 8));
  if (m.experts == 0 && m.ffn == 0) r.Error("ffn", "required for a dense model");
  if (m.experts > 0 && (m.experts_per_token < 1 || m.experts_per_token > m.experts)) {
    r.Error("experts_per_token", "must be in [1, experts] for a MoE model");
  }
  if (m.experts > 0 && m.expert_ffn < 1) r.Error("expert_ffn", "required for a MoE model");
  if (m.kv_heads > m.heads || (m.kv_heads > 0 && m.heads % m.kv_heads != 0)) {
    r.Error("kv_heads", StrFormat("must divide heads = %d", m.heads));
  }
  LIBRA_RETURN_IF_ERROR(r.Finish());
  return m;
}

}  // namespace libra::model
