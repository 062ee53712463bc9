// RooflineCostModel ("roofline"): libra's own cost model, from first principles.
//
// Rollout: an iteration reads the weights and the KV cache it attends over and does the matmul
// and attention FLOPs of its tokens; it takes the longer of the memory time (bytes over achieved
// HBM bandwidth) and the compute time (FLOPs over achieved FLOP/s), plus the TP all-reduces and a
// fixed overhead per iteration and per sequence. KV capacity is what the GPUs' memory holds after
// the weights and a reserve, with KV heads replicated when TP exceeds them. Training: FLOPs (6N per
// token plus recompute, old-log-prob and reference passes, plus attention) at an MFU, with TP, DP
// and pipeline costs and a memory verdict. Formulas, defaults and sources: docs/cost-model.md.
// Unlike the authors' model it scales decode time as 1/tp (not 1/tp^2), keeps KV capacity per
// GPU, and makes training time depend on the model's size.
#pragma once

#include "model/cost_model.h"
#include "model/packing.h"

namespace libra::model {

inline constexpr std::string_view kRooflineName = "roofline";

/// The efficiency factors and engine settings; every one can be set in the recipe's
/// [cost_model] table and replaced by a calibration.
struct RooflineParams {
  /// Fraction of HBM the rollout engine may use (vLLM gpu_memory_utilization). Default: 0.90.
  double gpu_memory_utilization = 0.90;
  /// Bytes per GPU kept for activations and CUDA graphs. Default: 2 GB.
  double reserve_bytes = 2e9;
  /// KV pool lost to fragmentation. Default: 0.04 (the authors' kv_frag_rate).
  double kv_fragmentation = 0.04;
  /// Achieved fraction of HBM bandwidth in decode. Default: 0.80 (assumption, between measured
  /// memcopy efficiency ~0.75 and the authors' 0.85).
  double decode_bw_util = 0.80;
  /// Achieved fraction of peak FLOP/s in rollout compute (prefill). Default: 0.55 (the authors').
  double prefill_mfu = 0.55;
  /// Fixed time per iteration (scheduling, sampling launch). Default: 3 ms (assumption).
  double iteration_overhead_s = 0.003;
  /// Time per sequence per iteration (sampling, detokenisation). Default: 10 us (assumption).
  double sequence_overhead_s = 10e-6;
  /// Tokens per prefill chunk when a context is built alone. Default: 8192 (assumption: the
  /// engines' chunked-prefill budget on 80 GB GPUs).
  int64_t prefill_chunk_tokens = 8192;
  /// Achieved fraction of peak FLOP/s in training. Default: 0.40 (assumption; Megatron-LM
  /// reports 0.52 at scale, variable-length RL batches do worse).
  double train_mfu = 0.40;
  /// Fraction of TP communication in training hidden behind compute. Default: 0.
  double train_tp_overlap = 0;
  /// Fraction of the DP gradient all-reduce hidden behind backward: 0.3 without pipeline
  /// parallelism, 0.5 with it (the authors' values).
  double train_dp_overlap = 0.3;
  double train_dp_overlap_pp = 0.5;
  /// Optimizer bytes touched per parameter per step (Adam: fp32 master, m, v, bf16 param and
  /// grad). Default: 16.
  double optimizer_bytes_per_param = 16;
  /// Bytes per GPU kept free in training (allocator, NCCL buffers). Default: 2 GB.
  double train_reserve_bytes = 2e9;
  /// Per-tensor overhead when engines load weights. Default: 50 us (assumption).
  double load_tensor_overhead_s = 50e-6;
  /// Shared-storage bandwidth for the disk sync path. Default: 2 GB/s each way (assumption).
  double disk_write_bandwidth = 2e9;
  double disk_read_bandwidth = 2e9;
  /// Engine restart on the disk path. Default: 30 s (vLLM cold reload takes 30-100+ s).
  double engine_restart_s = 30;
  /// NCCL communicator creation and warm-up when a worker changes role. Default: 2 s
  /// (assumption).
  double role_reinit_s = 2;
};

class RooflineCostModel : public CostModel {
 public:
  /// Decodes RooflineParams from `options` (keys as the field names; GB values as *_gb, us as
  /// *_us: see docs/cost-model.md).
  static Result<std::unique_ptr<CostModel>> Create(const CostModelContext& context,
                                                   const recipe::OptionTable& options);
  RooflineCostModel(const CostModelContext& context, const RooflineParams& params);

  std::string_view Name() const override { return kRooflineName; }
  const GpuSpec& gpu() const override { return gpu_; }
  const ModelArch& arch() const override { return arch_; }
  const RooflineParams& params() const { return params_; }

  int64_t KvCapacityTokens(int tp) const override;
  double IterationTime(int tp, const IterationLoad& load) const override;
  double PrefillTime(int tp, int64_t tokens, int64_t prior_tokens) const override;
  TrainEstimate TrainStep(const TrainLayout& layout, const TrainPasses& passes,
                          std::span<const int64_t> sequence_tokens) const override;
  std::unique_ptr<TrainBatchCosts> ForTrainBatch(
      const TrainPasses& passes, std::vector<int64_t> sequence_tokens) const override;
  double DecodeSpanTime(int tp, int64_t sequences, int64_t context_tokens,
                        int64_t iterations) const override;
  double DecodeGpuSecondsLowerBound(int64_t context, int64_t max_batch) const override;
  double PrefillGpuSecondsLowerBound() const override;
  double TrainGpuSecondsLowerBound(int64_t tokens, const TrainPasses& passes) const override;
  double WeightSyncTime(const SyncRequest& request) const override;
  double RoleSwitchTime(const SwitchRequest& request) const override;

  /// FLOPs of training one sequence of `tokens` tokens (forward, backward and the extra passes).
  double TrainFlops(int64_t tokens, const TrainPasses& passes) const;
  /// KV bytes per token on one GPU of a TP-`tp` instance.
  double KvBytesPerTokenPerGpu(int tp) const;
  /// Parameters whose weights an iteration of `tokens` tokens reads (MoE: touched experts only).
  double WeightParamsRead(double tokens) const;
  /// Peak training memory per GPU for micro-batches of `micro_tokens` tokens.
  double TrainMemoryPerGpu(const TrainLayout& layout, const TrainPasses& passes,
                           int64_t micro_tokens, int micro_batches) const;

  /// A batch sorted longest first as runs of equal sequences, with their TrainFlops.
  std::vector<SequenceRun> SequenceRuns(const TrainPasses& passes,
                                        std::span<const int64_t> longest_first) const;
  /// TrainStep in two parts: first how the batch spreads over the `dp` ranks
  /// (PackLongestFirst), then the step of `layout` (whose dp that share is for) on the batch.
  TrainEstimate Estimate(const TrainLayout& layout, const TrainPasses& passes,
                         std::span<const int64_t> longest_first, const RankShare& share) const;
  /// Whether Estimate(layout, passes, longest_first, share) runs out of memory for any share:
  /// with one micro-batch in flight, the least that any packing holds.
  bool OutOfMemoryWithAnyShare(const TrainLayout& layout, const TrainPasses& passes,
                               std::span<const int64_t> longest_first) const;

 private:
  /// Bytes a training GPU may hold.
  double TrainMemoryLimit() const { return gpu_.hbm_bytes - params_.train_reserve_bytes; }

  GpuSpec gpu_;
  ModelArch arch_;
  int gpus_per_node_;
  RooflineParams params_;
  // The architecture's derived sizes, computed once: every cost-model call reads them.
  double active_params_;
  double total_params_;
  double weight_bytes_;
  double kv_bytes_per_token_;
  double expert_params_;
};

}  // namespace libra::model
