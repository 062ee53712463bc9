// ReferenceCostModel ("libra-ref"): the Libra authors' analytic cost model, reproduced exactly,
// errors included, so that our planner and simulator can be cross-checked against theirs.
//
// Source: NetX-lab/Libra @ c51bf84, infra/cost_model/model.py (RolloutCostModel,
// TrainingCostModel, CostModel), infra/cost_model/memory_budget.py and config.py (defaults);
// described in shared/reference/libra-reference.md §3.1-§3.4 and §3.10. Formulas, parameters and
// known errors: docs/cost-model-reference.md.
//
// What it must not do: improve on the reference. Places where the authors' formulas are wrong
// (KV capacity growing ~quadratically with TP, decode time falling as 1/tp^2, training op times
// that ignore the model's size, the intra-node DP bandwidth branch, the bubble-free 1F1B formula)
// are marked "reference behaviour" in the implementation and stay as they are; libra's own model
// is "roofline" (roofline_model.h).
//
// The CostModel interface is mapped onto the reference functions as follows:
//   * KvCapacityTokens(tp)  = KvCapacityTokens(tp), the reference N_max.
//   * IterationTime(tp, l)  = DecodeStep(l.decode_context_tokens, tp) if l has decode sequences,
//                             plus PrefillStep(1, l.prefill_tokens, tp) if it has prefill chunks
//                             (one chunk of all the new tokens; prior context is not modelled).
//   * PrefillTime(tp, n, p) = (n / prefill_chunk_size) * PrefillStep(1, prefill_chunk_size, tp),
//                             the prefill term of the reference instance makespan; `p` is ignored.
//   * TrainStep(layout, passes, seqs): B = number of sequences, L = int(mean length) (1024 when
//     there are none, as the reference's L_avg); ReferenceTrainConfig{tp, pp, dp, micro_batch,
//     zero_level}; step_s = TrainIterationTime; memory_bytes = TrainMemory; memory_limit_bytes =
//     TrainMemoryLimit(). `passes` is ignored: the reference has no notion of them (it always
//     charges one recomputed attention forward in backward, and budgets the recompute-logprobs
//     logits only in memory). Parts: compute_s and tp_comm_s are the micro-batches' op and TP
//     all-reduce times, pp_bubble_s what the pipeline formula adds on top (a bubble only when
//     n_micro < pp - 1) plus the pipeline sends, dp_comm_s the exposed DP exchange; they add up
//     to step_s. flops = 0 (the model is not FLOP based), optimizer_s = 0, imbalance = 1.
//   * WeightSyncTime        = 0: the reference planner charges no weight synchronisation.
//   * RoleSwitchTime        = reconfiguration_cost_s, flat: the planner's transition cost.
// A cost model is const, does no I/O and is safe to share.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/cost_model.h"

namespace libra::model {

inline constexpr std::string_view kLibraRefName = "libra-ref";

/// Every number the reference model uses, under the reference's own names (config.py
/// HardwareConfig, ModelArchConfig, ProfilingConfig, GlobalResourcePlannerConfig, AsyncRLConfig).
/// Defaults are the reference defaults (HardwareConfig: an A100-80G; ModelArchConfig: about
/// Qwen2.5-3B). Each field can be set by the cost model's option of the same name.
struct ReferenceParams {
  // ---- Hardware (HardwareConfig) --------------------------------------------------------------

  /// Peak FLOP/s of one GPU (flops_peak). Default: 312e12.
  double flops_peak = 312e12;
  /// HBM bandwidth of one GPU, bytes/s (mem_bw). Default: 2.0e12.
  double mem_bw = 2.0e12;
  /// HBM capacity of one GPU, bytes (mem_capacity). Default: 80e9.
  double mem_capacity = 80e9;
  /// Intra-node bandwidth, bytes/s, used for TP all-reduces and (wrongly) for DP when a replica
  /// spans nodes (bw_intra_node). Their YAMLs give the bidirectional NVLink total. Default: 400e9.
  double bw_intra_node = 400e9;
  /// Inter-node bandwidth, bytes/s, used for PP sends and DP gradients (bw_inter_node).
  /// Default: 200e9.
  double bw_inter_node = 200e9;
  /// GPUs per node (gpus_per_node). Default: 8.
  int gpus_per_node = 8;
  /// Latency of one TP collective, seconds; the whole TP communication cost of a rollout step
  /// (tp_comm_overhead). Default: 5e-6.
  double tp_comm_overhead = 5e-6;
  /// Latency of one pipeline send between nodes, seconds (latency_inter_node). Default: 5e-6.
  double latency_inter_node = 5e-6;

  // ---- Model (ModelArchConfig) ----------------------------------------------------------------

  /// All parameters P (num_params). Default: 3e9.
  double num_params = 3e9;
  /// Whether the model is a mixture of experts (is_moe). Default: false.
  bool is_moe = false;
  /// Parameters a token uses, for a MoE model; 0 = P * num_activated_experts / num_experts
  /// (active_num_params). Ignored for a dense model. Default: 0.
  double active_num_params = 0;
  /// Routed experts and experts per token, for a MoE model without active_num_params
  /// (num_experts, num_activated_experts). Default: 1 and 1.
  int num_experts = 1;
  int num_activated_experts = 1;
  /// Hidden size (d_model). Default: 2048.
  int d_model = 2048;
  /// Transformer layers (n_layers). Default: 36.
  int n_layers = 36;
  /// Attention heads; only used to derive head_dim (n_heads). Default: 16.
  int n_heads = 16;
  /// KV heads (n_kv_heads). Default: 2.
  int n_kv_heads = 2;
  /// Head dimension; 0 = d_model / n_heads (head_dim). Default: 0.
  int head_dim = 0;
  /// Vocabulary size, for the recompute-logprobs logits budget (vocab_size). Default: 151936.
  int64_t vocab_size = 151936;
  /// Bytes per parameter, activation and KV element (dtype_bytes). Default: 2.
  int dtype_bytes = 2;

  // ---- Profiling (ProfilingConfig) ------------------------------------------------------------

  /// Training MLP time per layer = (alpha * L + beta) * b_micro / tp, seconds, forward and
  /// backward (alpha_mlp_fwd, beta_mlp_fwd, alpha_mlp_bwd, beta_mlp_bwd).
  /// Defaults: 3.5e-8, 1e-5, 7e-8, 2e-5.
  double alpha_mlp_fwd = 3.5e-8;
  double beta_mlp_fwd = 1.0e-5;
  double alpha_mlp_bwd = 7.0e-8;
  double beta_mlp_bwd = 2.0e-5;
  /// Training attention time per layer = (alpha * L^2 + beta * L + gamma) * b_micro / tp,
  /// seconds (alpha_attn_fwd, beta_attn_fwd, gamma_attn_fwd, and the _bwd three).
  /// Defaults: 1.5e-12, 2.5e-8, 8e-6; 3e-12, 5e-8, 1.5e-5.
  double alpha_attn_fwd = 1.5e-12;
  double beta_attn_fwd = 2.5e-8;
  double gamma_attn_fwd = 8.0e-6;
  double alpha_attn_bwd = 3.0e-12;
  double beta_attn_bwd = 5.0e-8;
  double gamma_attn_bwd = 1.5e-5;
  /// Interference slowdown 1 + rho * r^theta of an op sharing the GPU with background traffic of
  /// ratio r (rho_compute_bound, rho_memory_bound, theta_slowdown). Every op is treated as
  /// compute bound, so rho_memory_bound is never used. Defaults: 0.08, 0.45, 1.0.
  double rho_compute_bound = 0.08;
  double rho_memory_bound = 0.45;
  double theta_slowdown = 1.0;
  /// Achieved fraction of peak FLOP/s in prefill (prefill_mfu). Default: 0.55.
  double prefill_mfu = 0.55;
  /// Achieved fraction of HBM bandwidth in decode (decode_bw_util). Default: 0.85.
  double decode_bw_util = 0.85;
  /// Tokens per prefill chunk (prefill_chunk_size). Default: 1024.
  int prefill_chunk_size = 1024;
  /// Fraction of the KV pool lost to fragmentation (kv_frag_rate). Default: 0.04.
  double kv_frag_rate = 0.04;
  /// Bytes per rollout instance kept for activations (act_workspace_bytes). Default: 1e9.
  double act_workspace_bytes = 1.0e9;
  /// Fraction of a training GPU's memory lost to fragmentation (train_mem_frag_rate).
  /// Default: 0.08.
  double train_mem_frag_rate = 0.08;
  /// Bytes per training GPU kept as workspace (train_workspace_bytes). Default: 0.5e9.
  double train_workspace_bytes = 0.5e9;
  /// Upper bound of the steady-state decode batch (RolloutCostModel max_queue_limit; the
  /// reference CostModel never sets it). Default: 256.
  int max_queue_limit = 256;

  // ---- Planner facade (HybridSimulatorCostModel, GlobalResourcePlannerConfig) -----------------

  /// Bytes kept free on a training GPU on top of the fragmentation
  /// (memory_budget_safety_margin_bytes; the bare CostModel's default is 0, the planner passes
  /// this). Default: 2e9.
  double memory_budget_safety_margin_bytes = 2e9;
  /// ZeRO level of TrainStep's configurations (TrainParallelConfig zero_level). Default: 2.
  int zero_level = 2;
  /// Whether training memory includes the recompute-logprobs logits budget (recompute_logprobs
  /// and memory_budget_check_enabled). Default: true.
  bool recompute_logprobs = true;
  /// Sequence length the logits budget is sized for, at least L (max_seq_length).
  /// Default: 2048.
  int max_seq_length = 2048;
  /// Sequences per recompute-logprobs micro-batch, at most b_micro
  /// (recompute_micro_batch_size). Default: 1.
  int recompute_micro_batch_size = 1;
  /// Bytes per logit (memory_budget_logits_dtype_bytes; MCore normalises in FP32). Default: 4.
  int memory_budget_logits_dtype_bytes = 4;
  /// Factor on the logits for the FP32 cast and shifted copies (memory_budget_workspace_factor).
  /// Default: 1.5.
  double memory_budget_workspace_factor = 1.5;
  /// Seconds charged for a plan change (reconfiguration_cost_s). Default: 15.
  double reconfiguration_cost_s = 15.0;

  /// The reference's effective_num_params: P for a dense model; else active_num_params, or
  /// P * min(1, num_activated_experts / num_experts) when that is 0.
  double EffectiveNumParams() const;
  /// head_dim, or d_model / n_heads (integer division) when head_dim is 0.
  int HeadDim() const;

  bool operator==(const ReferenceParams&) const = default;
};

/// The reference parameters for a catalog GPU and model: flops_peak = bf16_flops, mem_bw =
/// hbm_bandwidth, mem_capacity = hbm_bytes, bw_intra_node = 2 * nvlink_bandwidth (their YAMLs
/// give the bidirectional NVLink total), bw_inter_node = inter_node_bandwidth, tp_comm_overhead =
/// allreduce_latency_s, gpus_per_node from the context; num_params = TotalParams(), MoE:
/// is_moe and active_num_params = ActiveMatmulParams(); shapes from the architecture, head_dim
/// explicit. Everything else keeps its default.
///
/// The authors' own YAMLs round some numbers (Qwen3-14B num_params 14.0e9 against 14.77e9 here,
/// A100 mem_bw 2.0e12 against 2.039e12) and derive head_dim as d_model / n_heads (80 for Qwen3-4B,
/// whose real head_dim is 128); to reproduce their exact configuration, override the fields by
/// options (e.g. num_params = 14.0e9, mem_bw = 2.0e12).
ReferenceParams ReferenceParamsFrom(const CostModelContext& context);

/// One request of the reference rollout model (RequestInfo): prompt and generated tokens.
struct RequestInfo {
  int64_t prompt = 0;
  int64_t gen = 0;

  int64_t total() const { return prompt + gen; }
  bool operator==(const RequestInfo&) const = default;
};

/// A training configuration of the reference (TrainParallelConfig). `cp` only counts GPUs: no
/// formula uses it.
struct ReferenceTrainConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int b_micro = 4;
  int zero_level = 2;
  int cp = 1;

  int gpus() const { return tp * pp * cp * dp; }
  bool operator==(const ReferenceTrainConfig&) const = default;
};

/// One training iteration and its parts (compute_iteration_time's details).
struct ReferenceTrainTime {
  double seconds = 0;
  /// One micro-batch through one stage, forward and backward (backward includes the recomputed
  /// attention forward), TP communication included.
  double fwd_per_micro_s = 0;
  double bwd_per_micro_s = 0;
  /// The pipeline formula over all micro-batches.
  double pipeline_s = 0;
  /// Pipeline sends, all boundaries.
  double pp_comm_s = 0;
  /// The DP gradient exchange, and the part of it not overlapped.
  double dp_comm_s = 0;
  double dp_exposed_s = 0;
  /// The parts of the per-micro-batch stage times, per layer: compute (with the interference
  /// slowdown) forward and backward, and TP communication (charged once each way).
  double compute_fwd_per_layer_s = 0;
  double compute_bwd_per_layer_s = 0;
  double tp_comm_per_layer_s = 0;
  int64_t b_per_dp = 0;
  int64_t n_micro = 0;
  int layers_per_pp = 0;
};

/// The recompute-logprobs logits budget (RecomputeLogprobsMemoryEstimate).
struct ReferenceRecomputeMemory {
  int64_t local_vocab = 0;
  int64_t logits_bytes = 0;
  int64_t total_bytes = 0;
};

/// A rollout cluster's evaluation (evaluate_cluster and its details).
struct ReferenceRolloutEvaluation {
  /// The slowest instance's makespan; +inf for an empty cluster or an OOM.
  double makespan = 0;
  /// Whether the longest request exceeds N_max of the largest instance.
  bool oom = false;
  /// Per instance, in tp_list order (empty on OOM or an empty cluster).
  std::vector<double> instance_times;
  std::vector<int> requests_per_instance;
  std::vector<int64_t> token_capacities;
};

/// The combined evaluation (CostModel.evaluate).
struct ReferenceEvaluation {
  double t_train = 0;
  double t_rollout = 0;
  /// max(t_train, t_rollout); +inf on an OOM.
  double t_global = 0;
  /// "train", "rollout" or "" (no OOM).
  std::string oom_source;
  bool oom() const { return !oom_source.empty(); }
};

class ReferenceCostModel : public CostModel {
 public:
  /// ReferenceParamsFrom(context), with every field overridable by the option of its name.
  /// kInvalidRecipe for an unknown key, a wrong type or a value out of range.
  static Result<std::unique_ptr<CostModel>> Create(const CostModelContext& context,
                                                   const recipe::OptionTable& options);
  /// A model of exactly `params`; gpu() and arch() describe them as far as they can (a GPU and
  /// a model named "libra-ref" with the params' numbers).
  explicit ReferenceCostModel(const ReferenceParams& params);
  /// A model of `params` that reports `context`'s GPU and model.
  ReferenceCostModel(const CostModelContext& context, const ReferenceParams& params);

  std::string_view Name() const override { return kLibraRefName; }
  const GpuSpec& gpu() const override { return gpu_; }
  const ModelArch& arch() const override { return arch_; }
  const ReferenceParams& params() const { return params_; }

  // ---- CostModel (mapping: see the file comment) ----------------------------------------------

  /// N_max = int(KvPool / s_kv * (1 - kv_frag_rate)), 0 when s_kv <= 0 (compute_token_capacity).
  /// Reference behaviour: the instance's pool over per-GPU bytes, so it grows ~quadratically
  /// with tp.
  int64_t KvCapacityTokens(int tp) const override;
  double IterationTime(int tp, const IterationLoad& load) const override;
  double PrefillTime(int tp, int64_t tokens, int64_t prior_tokens) const override;
  TrainEstimate TrainStep(const TrainLayout& layout, const TrainPasses& passes,
                          std::span<const int64_t> sequence_tokens) const override;
  double WeightSyncTime(const SyncRequest& request) const override;
  double RoleSwitchTime(const SwitchRequest& request) const override;
  /// Exact in closed form: DecodeStep is affine in the cached tokens, so a span of k steps is k
  /// times the mean of its first and last step.
  double DecodeSpanTime(int tp, int64_t sequences, int64_t context_tokens,
                        int64_t iterations) const override;
  /// min over TP 1/2/4/8 of the weight share of a full batch plus the token's own KV read, as
  /// DecodeStep charges them (communication dropped).
  double DecodeGpuSecondsLowerBound(int64_t context, int64_t max_batch) const override;
  /// The linear FLOPs of PrefillStep per token at the prefill MFU (attention dropped).
  double PrefillGpuSecondsLowerBound() const override;
  /// 0: the authors' training model has no FLOP floor (its op times do not depend on the model).
  double TrainGpuSecondsLowerBound(int64_t tokens, const TrainPasses& passes) const override;

  // ---- The reference functions, one to one. REQUIRES: every tp, pp, dp, b_micro >= 1 -------

  /// s_kv: 2 * n_layers * max(1, n_kv_heads / tp) * head_dim * dtype_bytes
  /// (compute_token_kv_bytes).
  double KvBytesPerTokenPerGpu(int tp) const;
  /// max(0, tp * mem_capacity - P * dtype_bytes - act_workspace_bytes), the whole instance's pool
  /// (compute_kv_pool).
  double KvPool(int tp) const;
  /// Seconds of one decode step over `active_tokens` cached tokens (compute_decode_step_time).
  double DecodeStep(int64_t active_tokens, int tp) const;
  /// Seconds of one prefill step of `batch` chunks of `chunk_len` tokens
  /// (compute_prefill_step_time).
  double PrefillStep(int64_t batch, int64_t chunk_len, int tp) const;
  /// b_bar = clamp(N_max / (avg_prompt + avg_gen / 2), 1, max_queue_limit); 1 when the occupancy is
  /// not positive (compute_steady_state_batch).
  double SteadyBatch(int tp, double avg_prompt, double avg_gen) const;
  /// Tokens per second: b_bar / DecodeStep(int(b_bar * (avg_prompt + avg_gen / 2)))
  /// (compute_instance_throughput).
  double Throughput(int tp, double avg_prompt, double avg_gen) const;
  /// Seconds for one instance to prefill and decode `requests` (compute_instance_makespan);
  /// 0 for none.
  double InstanceMakespan(int tp, std::span<const RequestInfo> requests) const;
  /// The greedy assignment (greedy_throughput_allocation): requests, longest first (stable),
  /// each to the instance with the least (workload + its tokens) / throughput, throughputs from
  /// the global average lengths; first instance wins ties. Per instance, its requests in
  /// assignment order.
  std::vector<std::vector<RequestInfo>> AssignRequests(std::span<const int> tp_list,
                                                       std::span<const RequestInfo> requests) const;
  /// The cluster's makespan (evaluate_cluster): +inf for an empty tp_list, or with oom set when
  /// a request is longer than N_max of the largest TP; else the max instance makespan.
  ReferenceRolloutEvaluation EvaluateRollout(std::span<const int> tp_list,
                                             std::span<const RequestInfo> requests) const;

  /// Peak training memory per GPU in bytes for micro-batches of `b_micro` sequences of `L` tokens
  /// (estimate_memory_per_gpu), the recompute-logprobs budget included when enabled.
  double TrainMemory(const ReferenceTrainConfig& config, int b_micro, int64_t L) const;
  /// What a training GPU may hold: mem_capacity * (1 - train_mem_frag_rate) - safety margin.
  double TrainMemoryLimit() const;
  /// TrainMemory(config, config.b_micro, L) > TrainMemoryLimit() (check_memory_oom).
  bool TrainOom(const ReferenceTrainConfig& config, int64_t L) const;
  /// One iteration over a global batch of `B` sequences of `L` tokens
  /// (compute_iteration_time).
  ReferenceTrainTime TrainIterationTime(const ReferenceTrainConfig& config, int64_t B,
                                        int64_t L) const;
  /// The logits budget for recomputing log-probs (estimate_recompute_logprobs_memory), with the
  /// params' logits dtype and workspace factor.
  ReferenceRecomputeMemory RecomputeLogprobsMemory(int64_t batch, int64_t seq, int64_t vocab,
                                                   int tp) const;
  /// The planner's objective (CostModel.evaluate): L = int(mean total length) (1024 without
  /// requests); training OOM makes everything +inf ("train"); an infinite rollout makespan makes
  /// t_global +inf ("rollout"); else t_global = max(t_train, t_rollout).
  ReferenceEvaluation Evaluate(const ReferenceTrainConfig& train_config,
                               std::span<const int> tp_list, std::span<const RequestInfo> requests,
                               int64_t global_batch = 32) const;

 private:
  /// The per-layer and per-micro-batch compute and TP communication times of `times`
  /// (compute_iteration_time's first half), for sequences of `L` tokens; needs
  /// times->layers_per_pp.
  void LayerTimes(const ReferenceTrainConfig& config, int64_t L, ReferenceTrainTime* times) const;

  GpuSpec gpu_;
  ModelArch arch_;
  ReferenceParams params_;
};

}  // namespace libra::model
