// The hardware and model catalog: the numbers every cost estimate rests on, each entry with its
// source. A recipe names an entry, or gives the numbers itself in a custom table decoded here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "recipe/options.h"

namespace libra::model {

/// One GPU type. All values in SI base units (FLOP/s, bytes/s, bytes, seconds).
struct GpuSpec {
  std::string name;
  /// Dense BF16 tensor throughput, no sparsity.
  double bf16_flops = 0;
  /// HBM bandwidth.
  double hbm_bandwidth = 0;
  /// HBM capacity.
  double hbm_bytes = 0;
  /// NVLink bandwidth per GPU, one direction.
  double nvlink_bandwidth = 0;
  /// All-reduce bus bandwidth within a node (what nccl-tests calls busbw), measured or assumed.
  double allreduce_bandwidth = 0;
  /// Latency of one collective within a node.
  double allreduce_latency_s = 0;
  /// Network bandwidth between nodes, per node.
  double inter_node_bandwidth = 0;
  /// Host-to-device and device-to-host bandwidth per GPU.
  double h2d_bandwidth = 0;
  double d2h_bandwidth = 0;

  bool operator==(const GpuSpec&) const = default;
};

/// One model architecture (a decoder-only transformer with GQA and SwiGLU; optionally MoE).
struct ModelArch {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  /// Intermediate size of the dense MLP (unused when experts > 0).
  int ffn = 0;
  int64_t vocab = 0;
  bool tied_embeddings = false;
  /// Routed experts per layer (0 = dense), experts a token uses, and their intermediate size.
  int experts = 0;
  int experts_per_token = 0;
  int expert_ffn = 0;
  /// Bytes per parameter and per KV element (2 = bf16).
  int dtype_bytes = 2;

  bool moe() const { return experts > 0; }
  /// Attention projection parameters of one layer (q, k, v, o).
  double AttentionParamsPerLayer() const;
  /// MLP parameters of one layer: the dense MLP, or every expert plus the router.
  double MlpParamsPerLayer() const;
  /// All parameters, embeddings included (what the weights take in memory).
  double TotalParams() const;
  /// Parameters of the experts alone (0 for a dense model).
  double ExpertParams() const;
  /// Parameters a token multiplies by (N_mm): layers with only its experts, plus the LM head;
  /// not the embedding lookup.
  double ActiveMatmulParams() const;
  /// KV cache bytes per token, all layers, unsharded: 2 * layers * kv_heads * head_dim * dtype.
  double KvBytesPerToken() const;
  /// Bytes of the weights: TotalParams() * dtype_bytes.
  double WeightBytes() const { return TotalParams() * dtype_bytes; }

  bool operator==(const ModelArch&) const = default;
};

/// Every GPU and model of the catalog, in a fixed order.
const std::vector<GpuSpec>& GpuCatalog();
const std::vector<ModelArch>& ModelCatalog();

/// Looks an entry up by name (exact). kNotFound lists the known names and suggests the closest.
Result<GpuSpec> FindGpu(const std::string& name);
Result<ModelArch> FindModel(const std::string& name);

/// Decodes a custom GPU table (recipe [cluster.gpu_spec]); units are the human ones documented in
/// docs/cost-model.md (TFLOP/s, GB/s, GB, microseconds). Without `base`, missing fields are
/// errors; with it (the catalog entry the recipe names), the table overrides some of its numbers
/// and the rest are `base`'s.
Result<GpuSpec> GpuFromOptions(const std::string& name, const recipe::OptionTable& table,
                               const GpuSpec* base = nullptr);
/// Decodes a custom model table (recipe [model.arch]).
Result<ModelArch> ModelFromOptions(const std::string& name, const recipe::OptionTable& table);

}  // namespace libra::model
