#include "model/reference_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>

namespace libra::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One overridable field of ReferenceParams: its option name, where it lives, and its range.
struct ParamField {
  const char* name;
  std::variant<double ReferenceParams::*, int ReferenceParams::*, int64_t ReferenceParams::*,
               bool ReferenceParams::*>
      member;
  double min = 0;
  double max = kInf;
};

// Ranges keep every division of the formulas finite; they are no stricter than that.
const std::vector<ParamField>& ParamFields() {
  constexpr double kTiny = 1e-300;
  constexpr double kIntMax = std::numeric_limits<int>::max();
  using P = ReferenceParams;
  static const std::vector<ParamField> kFields = {
      {"flops_peak", &P::flops_peak, kTiny},
      {"mem_bw", &P::mem_bw, kTiny},
      {"mem_capacity", &P::mem_capacity},
      {"bw_intra_node", &P::bw_intra_node, kTiny},
      {"bw_inter_node", &P::bw_inter_node, kTiny},
      {"gpus_per_node", &P::gpus_per_node, 1, kIntMax},
      {"tp_comm_overhead", &P::tp_comm_overhead},
      {"latency_inter_node", &P::latency_inter_node},
      {"num_params", &P::num_params},
      {"is_moe", &P::is_moe},
      {"active_num_params", &P::active_num_params},
      {"num_experts", &P::num_experts, 1, kIntMax},
      {"num_activated_experts", &P::num_activated_experts, 1, kIntMax},
      {"d_model", &P::d_model, 1, kIntMax},
      {"n_layers", &P::n_layers, 1, kIntMax},
      {"n_heads", &P::n_heads, 1, kIntMax},
      {"n_kv_heads", &P::n_kv_heads, 1, kIntMax},
      {"head_dim", &P::head_dim, 0, kIntMax},
      {"vocab_size", &P::vocab_size, 1, kIntMax},
      {"dtype_bytes", &P::dtype_bytes, 1, 8},
      {"alpha_mlp_fwd", &P::alpha_mlp_fwd},
      {"beta_mlp_fwd", &P::beta_mlp_fwd},
      {"alpha_mlp_bwd", &P::alpha_mlp_bwd},
      {"beta_mlp_bwd", &P::beta_mlp_bwd},
      {"alpha_attn_fwd", &P::alpha_attn_fwd},
      {"beta_attn_fwd", &P::beta_attn_fwd},
      {"gamma_attn_fwd", &P::gamma_attn_fwd},
      {"alpha_attn_bwd", &P::alpha_attn_bwd},
      {"beta_attn_bwd", &P::beta_attn_bwd},
      {"gamma_attn_bwd", &P::gamma_attn_bwd},
      {"rho_compute_bound", &P::rho_compute_bound},
      {"rho_memory_bound", &P::rho_memory_bound},
      {"theta_slowdown", &P::theta_slowdown},
      {"prefill_mfu", &P::prefill_mfu, 0, 1},
      {"decode_bw_util", &P::decode_bw_util, 0, 1},
      {"prefill_chunk_size", &P::prefill_chunk_size, 1, kIntMax},
      {"kv_frag_rate", &P::kv_frag_rate, 0, 1},
      {"act_workspace_bytes", &P::act_workspace_bytes},
      {"train_mem_frag_rate", &P::train_mem_frag_rate, 0, 1},
      {"train_workspace_bytes", &P::train_workspace_bytes},
      {"max_queue_limit", &P::max_queue_limit, 1, kIntMax},
      {"memory_budget_safety_margin_bytes", &P::memory_budget_safety_margin_bytes},
      {"zero_level", &P::zero_level, 0, 3},
      {"recompute_logprobs", &P::recompute_logprobs},
      {"max_seq_length", &P::max_seq_length, 1, kIntMax},
      {"recompute_micro_batch_size", &P::recompute_micro_batch_size, 1, kIntMax},
      {"memory_budget_logits_dtype_bytes", &P::memory_budget_logits_dtype_bytes, 1, 8},
      {"memory_budget_workspace_factor", &P::memory_budget_workspace_factor, 1},
      {"reconfiguration_cost_s", &P::reconfiguration_cost_s},
  };
  return kFields;
}

// Sets every field named in `options`; the reader collects the problems.
void ApplyOptions(recipe::OptionReader& reader, ReferenceParams& params) {
  for (const ParamField& field : ParamFields()) {
    const std::string name = field.name;
    if (auto* d = std::get_if<double ReferenceParams::*>(&field.member)) {
      params.*(*d) = reader.Double(name, params.*(*d), field.min, field.max);
    } else if (auto* i = std::get_if<int ReferenceParams::*>(&field.member)) {
      params.*(*i) = static_cast<int>(reader.Int(
          name, params.*(*i), static_cast<int64_t>(field.min), static_cast<int64_t>(field.max)));
    } else if (auto* l = std::get_if<int64_t ReferenceParams::*>(&field.member)) {
      params.*(*l) = reader.Int(name, params.*(*l), static_cast<int64_t>(field.min),
                                static_cast<int64_t>(field.max));
    } else if (auto* b = std::get_if<bool ReferenceParams::*>(&field.member)) {
      params.*(*b) = reader.Bool(name, params.*(*b));
    }
  }
}

// A GPU and a model that describe `params`, for a model built from params alone.
CostModelContext ContextOf(const ReferenceParams& params) {
  CostModelContext context;
  context.gpu.name = std::string(kLibraRefName);
  context.gpu.bf16_flops = params.flops_peak;
  context.gpu.hbm_bandwidth = params.mem_bw;
  context.gpu.hbm_bytes = params.mem_capacity;
  context.gpu.nvlink_bandwidth = params.bw_intra_node / 2;
  context.gpu.allreduce_latency_s = params.tp_comm_overhead;
  context.gpu.inter_node_bandwidth = params.bw_inter_node;
  context.arch.name = std::string(kLibraRefName);
  context.arch.layers = params.n_layers;
  context.arch.hidden = params.d_model;
  context.arch.heads = params.n_heads;
  context.arch.kv_heads = params.n_kv_heads;
  context.arch.head_dim = params.HeadDim();
  context.arch.vocab = params.vocab_size;
  context.arch.experts = params.is_moe ? params.num_experts : 0;
  context.arch.experts_per_token = params.is_moe ? params.num_activated_experts : 0;
  context.arch.dtype_bytes = params.dtype_bytes;
  context.gpus_per_node = params.gpus_per_node;
  return context;
}

// P_active: the effective parameters, or P when they come out as 0 (the reference's
// `effective_num_params or num_params`).
double ActiveParams(const ReferenceParams& params) {
  const double effective = params.EffectiveNumParams();
  return effective != 0 ? effective : params.num_params;
}

// Python's int(x) for a finite non-negative double: truncation.
int64_t Trunc(double x) { return static_cast<int64_t>(x); }

// b_micro * L * d_model * dtype_bytes, exact as Python's integers (for any realistic size).
double ActivationBytes(int64_t b_micro, int64_t L, int d_model, int dtype_bytes) {
  return static_cast<double>(b_micro * L * d_model * dtype_bytes);
}

}  // namespace

double ReferenceParams::EffectiveNumParams() const {
  if (!is_moe) return num_params;
  if (active_num_params > 0) return active_num_params;
  const double ratio =
      num_experts <= 1
          ? 1.0
          : std::min(1.0, static_cast<double>(num_activated_experts) / std::max(num_experts, 1));
  return num_params * ratio;
}

int ReferenceParams::HeadDim() const {
  return head_dim > 0 ? head_dim : d_model / std::max(n_heads, 1);
}

ReferenceParams ReferenceParamsFrom(const CostModelContext& context) {
  ReferenceParams p;
  p.flops_peak = context.gpu.bf16_flops;
  p.mem_bw = context.gpu.hbm_bandwidth;
  p.mem_capacity = context.gpu.hbm_bytes;
  p.bw_intra_node = 2 * context.gpu.nvlink_bandwidth;
  p.bw_inter_node = context.gpu.inter_node_bandwidth;
  p.gpus_per_node = context.gpus_per_node;
  p.tp_comm_overhead = context.gpu.allreduce_latency_s;
  const ModelArch& arch = context.arch;
  p.num_params = arch.TotalParams();
  p.is_moe = arch.moe();
  p.active_num_params = arch.moe() ? arch.ActiveMatmulParams() : 0;
  p.num_experts = std::max(arch.experts, 1);
  p.num_activated_experts = std::max(arch.experts_per_token, 1);
  p.d_model = arch.hidden;
  p.n_layers = arch.layers;
  p.n_heads = arch.heads;
  p.n_kv_heads = arch.kv_heads;
  p.head_dim = arch.head_dim;
  p.vocab_size = arch.vocab;
  p.dtype_bytes = arch.dtype_bytes;
  return p;
}

Result<std::unique_ptr<CostModel>> ReferenceCostModel::Create(const CostModelContext& context,
                                                              const recipe::OptionTable& options) {
  ReferenceParams params = ReferenceParamsFrom(context);
  recipe::OptionReader reader(options);
  ApplyOptions(reader, params);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<CostModel>(std::make_unique<ReferenceCostModel>(context, params));
}

ReferenceCostModel::ReferenceCostModel(const ReferenceParams& params)
    : ReferenceCostModel(ContextOf(params), params) {}

ReferenceCostModel::ReferenceCostModel(const CostModelContext& context,
                                       const ReferenceParams& params)
    : gpu_(context.gpu), arch_(context.arch), params_(params) {}

// ---- Rollout (RolloutCostModel)
// ------------------------------------------------------------------

double ReferenceCostModel::KvBytesPerTokenPerGpu(int tp) const {
  LIBRA_CHECK(tp >= 1) << "tp = " << tp;
  const int kv_heads_per_gpu = std::max(1, params_.n_kv_heads / tp);
  return 2.0 * params_.n_layers * kv_heads_per_gpu * params_.HeadDim() * params_.dtype_bytes;
}

double ReferenceCostModel::KvPool(int tp) const {
  LIBRA_CHECK(tp >= 1) << "tp = " << tp;
  // Reference behaviour: the weights are counted once across the TP group, and vLLM's
  // gpu_memory_utilization is not applied.
  const double total_mem = tp * params_.mem_capacity;
  const double weights_total = params_.num_params * params_.dtype_bytes;
  return std::max(total_mem - weights_total - params_.act_workspace_bytes, 0.0);
}

int64_t ReferenceCostModel::KvCapacityTokens(int tp) const {
  // Reference behaviour: the whole instance's pool divided by the per-GPU bytes per token, so the
  // capacity is overstated by a factor of tp (it grows ~quadratically with TP).
  const double pool = KvPool(tp);
  const double s_token_kv = KvBytesPerTokenPerGpu(tp);
  if (s_token_kv <= 0) return 0;
  return Trunc(pool / s_token_kv * (1.0 - params_.kv_frag_rate));
}

double ReferenceCostModel::PrefillStep(int64_t batch, int64_t chunk_len, int tp) const {
  LIBRA_CHECK(tp >= 1) << "tp = " << tp;
  const double b = static_cast<double>(batch);
  const double len = static_cast<double>(chunk_len);
  const double d = params_.d_model;
  const double p_active = ActiveParams(params_);
  // Reference behaviour: a dense model's linear FLOPs are 24 * d^2 per token per layer, which
  // undercounts GQA + SwiGLU models; a MoE model (P_active != P) uses 2 * P_active / n_layers.
  double linear_flops_per_layer;
  if (p_active != params_.num_params) {
    linear_flops_per_layer = 2.0 * p_active / std::max(params_.n_layers, 1) * b * len;
  } else {
    linear_flops_per_layer =
        24.0 * b * len * static_cast<double>(int64_t{params_.d_model} * params_.d_model);
  }
  const double attn_flops_per_layer = 4.0 * b * static_cast<double>(chunk_len * chunk_len) * d;
  const double total_flops = params_.n_layers * (linear_flops_per_layer + attn_flops_per_layer);
  const double effective_flops = tp * params_.flops_peak * std::max(params_.prefill_mfu, 1e-6);
  // Reference behaviour: TP communication is a fixed latency per layer, whatever the message.
  const double t_comm = tp > 1 ? 2.0 * params_.n_layers * params_.tp_comm_overhead : 0.0;
  return total_flops / effective_flops + t_comm;
}

double ReferenceCostModel::DecodeStep(int64_t active_tokens, int tp) const {
  const double p_active = ActiveParams(params_);
  const double weights_per_gpu = p_active * params_.dtype_bytes / tp;
  const double kv_read_per_gpu = static_cast<double>(active_tokens) * KvBytesPerTokenPerGpu(tp);
  // Reference behaviour: per-GPU bytes over the whole group's bandwidth (tp * mem_bw), so decode
  // time falls as 1/tp^2 instead of 1/tp.
  const double effective_bw = tp * params_.mem_bw * std::max(params_.decode_bw_util, 1e-6);
  const double t_comm = tp > 1 ? 2.0 * params_.n_layers * params_.tp_comm_overhead : 0.0;
  return (weights_per_gpu + kv_read_per_gpu) / effective_bw + t_comm;
}

double ReferenceCostModel::DecodeSpanTime(int tp, int64_t sequences, int64_t context_tokens,
                                          int64_t iterations) const {
  if (iterations <= 0 || sequences <= 0) return 0;
  const int64_t last = context_tokens + (iterations - 1) * sequences;
  return static_cast<double>(iterations) * (DecodeStep(context_tokens, tp) + DecodeStep(last, tp)) /
         2;
}

double ReferenceCostModel::DecodeGpuSecondsLowerBound(int64_t context, int64_t max_batch) const {
  const double bw = params_.mem_bw * std::max(params_.decode_bw_util, 1e-6);
  const double batch = static_cast<double>(std::max<int64_t>(1, max_batch));
  double best = std::numeric_limits<double>::infinity();
  for (int tp : {1, 2, 4, 8}) {
    // GPU-seconds of a step are tp * DecodeStep; a token's share of it, without communication.
    const double weights = ActiveParams(params_) * params_.dtype_bytes / tp / (tp * bw) * tp;
    const double kv = static_cast<double>(context) * KvBytesPerTokenPerGpu(tp) / (tp * bw) * tp;
    best = std::min(best, weights / batch + kv);
  }
  return best;
}

double ReferenceCostModel::PrefillGpuSecondsLowerBound() const {
  const double p_active = ActiveParams(params_);
  const double linear = p_active != params_.num_params
                            ? 2.0 * p_active
                            : 24.0 * params_.n_layers *
                                  static_cast<double>(int64_t{params_.d_model} * params_.d_model);
  return linear / (params_.flops_peak * std::max(params_.prefill_mfu, 1e-6));
}

double ReferenceCostModel::TrainGpuSecondsLowerBound(int64_t /*tokens*/,
                                                     const TrainPasses& /*passes*/) const {
  return 0;
}

double ReferenceCostModel::SteadyBatch(int tp, double avg_prompt, double avg_gen) const {
  const double n_max = static_cast<double>(KvCapacityTokens(tp));
  const double avg_occupancy = avg_prompt + avg_gen / 2.0;
  if (avg_occupancy <= 0) return 1.0;
  // Reference behaviour: not bounded by the number of requests the instance actually has.
  return std::max(1.0,
                  std::min(static_cast<double>(params_.max_queue_limit), n_max / avg_occupancy));
}

double ReferenceCostModel::Throughput(int tp, double avg_prompt, double avg_gen) const {
  const double b_bar = SteadyBatch(tp, avg_prompt, avg_gen);
  const double avg_active_tokens = b_bar * (avg_prompt + avg_gen / 2.0);
  const double t_step = DecodeStep(Trunc(avg_active_tokens), tp);
  if (t_step <= 0) return kInf;
  return b_bar / t_step;
}

namespace {

// The mean prompt and generation lengths (np.mean over integers: exact sums, one division).
std::pair<double, double> MeanLengths(std::span<const RequestInfo> requests) {
  int64_t prompt = 0;
  int64_t gen = 0;
  for (const RequestInfo& r : requests) {
    prompt += r.prompt;
    gen += r.gen;
  }
  const double n = static_cast<double>(requests.size());
  return {static_cast<double>(prompt) / n, static_cast<double>(gen) / n};
}

}  // namespace

double ReferenceCostModel::InstanceMakespan(int tp, std::span<const RequestInfo> requests) const {
  if (requests.empty()) return 0.0;
  const auto [avg_prompt, avg_gen] = MeanLengths(requests);
  int64_t total_prompt_tokens = 0;
  int64_t total_gen_tokens = 0;
  for (const RequestInfo& r : requests) {
    total_prompt_tokens += r.prompt;
    total_gen_tokens += r.gen;
  }
  const double b_bar = SteadyBatch(tp, avg_prompt, avg_gen);
  // Reference behaviour: a throughput model; the drain (long-tail) phase is not modelled.
  const int chunk = params_.prefill_chunk_size;
  const double t_prefill_step = PrefillStep(1, chunk, tp);
  const double n_prefill_steps =
      static_cast<double>(total_prompt_tokens) / static_cast<double>(std::max(chunk, 1));
  const double total_prefill_time = n_prefill_steps * t_prefill_step;
  const int64_t total_active_tokens = Trunc(b_bar * (avg_prompt + avg_gen / 2.0));
  const double t_decode_step = DecodeStep(total_active_tokens, tp);
  const double n_decode_steps = static_cast<double>(total_gen_tokens) / std::max(b_bar, 1.0);
  return total_prefill_time + n_decode_steps * t_decode_step;
}

std::vector<std::vector<RequestInfo>> ReferenceCostModel::AssignRequests(
    std::span<const int> tp_list, std::span<const RequestInfo> requests) const {
  std::vector<std::vector<RequestInfo>> assigned(tp_list.size());
  if (requests.empty() || tp_list.empty()) return assigned;
  std::vector<RequestInfo> sorted(requests.begin(), requests.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const RequestInfo& a, const RequestInfo& b) {
    return a.total() > b.total();
  });
  const auto [avg_prompt, avg_gen] = MeanLengths(requests);
  std::vector<double> throughputs;
  for (int tp : tp_list) throughputs.push_back(Throughput(tp, avg_prompt, avg_gen));
  std::vector<double> workloads(tp_list.size(), 0.0);
  for (const RequestInfo& req : sorted) {
    // Reference behaviour: when no instance gives a finite finish time, Python's index -1 sends
    // the request to the last instance.
    size_t best = tp_list.size() - 1;
    double best_finish = kInf;
    for (size_t i = 0; i < tp_list.size(); ++i) {
      const double new_workload = workloads[i] + static_cast<double>(req.gen) + req.prompt;
      const double finish = throughputs[i] > 0 ? new_workload / throughputs[i] : kInf;
      if (finish < best_finish) {
        best_finish = finish;
        best = i;
      }
    }
    assigned[best].push_back(req);
    workloads[best] += static_cast<double>(req.gen + req.prompt);
  }
  return assigned;
}

ReferenceRolloutEvaluation ReferenceCostModel::EvaluateRollout(
    std::span<const int> tp_list, std::span<const RequestInfo> requests) const {
  ReferenceRolloutEvaluation out;
  if (tp_list.empty()) {
    out.makespan = kInf;
    return out;
  }
  if (!requests.empty()) {
    int64_t max_seq = 0;
    for (const RequestInfo& r : requests) max_seq = std::max(max_seq, r.total());
    const int max_tp = *std::max_element(tp_list.begin(), tp_list.end());
    if (max_seq > KvCapacityTokens(max_tp)) {
      out.makespan = kInf;
      out.oom = true;
      return out;
    }
  }
  const std::vector<std::vector<RequestInfo>> assigned = AssignRequests(tp_list, requests);
  for (size_t i = 0; i < tp_list.size(); ++i) {
    out.instance_times.push_back(InstanceMakespan(tp_list[i], assigned[i]));
    out.requests_per_instance.push_back(static_cast<int>(assigned[i].size()));
    out.token_capacities.push_back(KvCapacityTokens(tp_list[i]));
  }
  out.makespan = *std::max_element(out.instance_times.begin(), out.instance_times.end());
  return out;
}

// ---- Training (TrainingCostModel)
// ----------------------------------------------------------------

ReferenceRecomputeMemory ReferenceCostModel::RecomputeLogprobsMemory(int64_t batch, int64_t seq,
                                                                     int64_t vocab, int tp) const {
  const int64_t b = std::max<int64_t>(1, batch);
  const int64_t length = std::max<int64_t>(1, seq - 1);
  const int64_t v = std::max<int64_t>(1, vocab);
  const int64_t t = std::max(1, tp);
  const int64_t dtype = std::max(1, params_.memory_budget_logits_dtype_bytes);
  const double factor = std::max(1.0, params_.memory_budget_workspace_factor);
  ReferenceRecomputeMemory out;
  out.local_vocab = (v + t - 1) / t;
  out.logits_bytes = b * length * out.local_vocab * dtype;
  out.total_bytes = Trunc(static_cast<double>(out.logits_bytes) * factor);
  return out;
}

double ReferenceCostModel::TrainMemory(const ReferenceTrainConfig& config, int b_micro,
                                       int64_t L) const {
  const int tp = config.tp;
  const int pp = config.pp;
  const int dp = config.dp;
  const double P = params_.num_params;
  const double tp_pp = std::max(tp * pp, 1);
  double m_weight;
  double m_opt;
  double m_grad;
  double m_fsdp_transient;
  // Reference behaviour: `cp` plays no part, and the formula always uses the total P.
  if (config.zero_level >= 2) {
    const double shard = std::max(tp * pp * dp, 1);
    m_weight = 2.0 * P / shard;
    m_opt = 2.0 * P / shard;
    m_grad = 2.0 * P / shard;
    m_fsdp_transient = 0.3 * 2.0 * P / tp_pp;
    if (P >= 20.0e9) m_fsdp_transient += 12.0e9;
  } else {
    m_weight = 2.0 * P / tp_pp;
    m_opt = config.zero_level >= 1 ? 12.0 * P / std::max(tp * pp * dp, 1) : 12.0 * P / tp_pp;
    m_grad = 2.0 * P / tp_pp;
    m_fsdp_transient = 0.0;
  }
  const double layers_per_pp = static_cast<double>(params_.n_layers) / std::max(pp, 1);
  const double m_act =
      ActivationBytes(b_micro, L, params_.d_model, params_.dtype_bytes) * layers_per_pp / tp;
  double total =
      m_weight + m_opt + m_grad + m_fsdp_transient + m_act + params_.train_workspace_bytes;
  if (params_.recompute_logprobs) {
    const ReferenceRecomputeMemory recompute = RecomputeLogprobsMemory(
        std::min(b_micro, std::max(1, params_.recompute_micro_batch_size)),
        std::max<int64_t>(L, std::max(1, params_.max_seq_length)), params_.vocab_size, tp);
    total += static_cast<double>(recompute.total_bytes);
  }
  return total;
}

double ReferenceCostModel::TrainMemoryLimit() const {
  return params_.mem_capacity * (1.0 - params_.train_mem_frag_rate) -
         std::max(0.0, params_.memory_budget_safety_margin_bytes);
}

bool ReferenceCostModel::TrainOom(const ReferenceTrainConfig& config, int64_t L) const {
  return TrainMemory(config, config.b_micro, L) > TrainMemoryLimit();
}

void ReferenceCostModel::LayerTimes(const ReferenceTrainConfig& config, int64_t L,
                                    ReferenceTrainTime* times) const {
  const ReferenceParams& p = params_;
  const int tp = config.tp;
  const int dp = config.dp;
  const int64_t b_micro = config.b_micro;
  const double len = static_cast<double>(L);
  ReferenceTrainTime& out = *times;
  // Background traffic ratio: ZeRO sharding with DP keeps the network busy during compute.
  double bg_ratio = 0.0;
  if (config.zero_level >= 2 && dp > 1) {
    bg_ratio = 0.4;
  } else if (config.zero_level >= 1 && dp > 1) {
    bg_ratio = 0.2;
  }
  const double bg_ratio_bwd = std::min(bg_ratio * 1.5, 0.8);
  // Reference behaviour: every op is treated as compute bound (rho_memory_bound is unused).
  auto slowed = [&](double t_pure, double ratio) {
    return t_pure * (1.0 + p.rho_compute_bound * std::pow(ratio, p.theta_slowdown));
  };
  // Reference behaviour: op times are absolute seconds per token that do not depend on the
  // model's size; only the communication terms see d_model and P.
  auto mlp = [&](double alpha, double beta) {
    return (alpha * len + beta) * static_cast<double>(b_micro) / tp;
  };
  auto attn = [&](double alpha, double beta, double gamma) {
    return (alpha * len * len + beta * len + gamma) * static_cast<double>(b_micro) / tp;
  };
  const double attn_fwd = attn(p.alpha_attn_fwd, p.beta_attn_fwd, p.gamma_attn_fwd);
  const double mlp_fwd = mlp(p.alpha_mlp_fwd, p.beta_mlp_fwd);
  const double attn_bwd = attn(p.alpha_attn_bwd, p.beta_attn_bwd, p.gamma_attn_bwd);
  const double mlp_bwd = mlp(p.alpha_mlp_bwd, p.beta_mlp_bwd);

  // TP: two ring all-reduces of the activations per layer, over bw_intra_node.
  if (tp > 1) {
    const double s_act = ActivationBytes(b_micro, L, p.d_model, p.dtype_bytes);
    const double allreduce_volume = 2.0 * (tp - 1) / tp * s_act;
    out.tp_comm_per_layer_s = 2.0 * allreduce_volume / p.bw_intra_node;
  }
  out.compute_fwd_per_layer_s = slowed(attn_fwd, bg_ratio) + slowed(mlp_fwd, bg_ratio);
  // Backward recomputes the attention forward (at the backward interference ratio).
  out.compute_bwd_per_layer_s = slowed(attn_fwd, bg_ratio_bwd) + slowed(attn_bwd, bg_ratio_bwd) +
                                slowed(mlp_bwd, bg_ratio_bwd);
  out.fwd_per_micro_s = out.layers_per_pp * (slowed(attn_fwd, bg_ratio) +
                                             slowed(mlp_fwd, bg_ratio) + out.tp_comm_per_layer_s);
  out.bwd_per_micro_s =
      out.layers_per_pp * (slowed(attn_fwd, bg_ratio_bwd) + slowed(attn_bwd, bg_ratio_bwd) +
                           slowed(mlp_bwd, bg_ratio_bwd) + out.tp_comm_per_layer_s);
}

ReferenceTrainTime ReferenceCostModel::TrainIterationTime(const ReferenceTrainConfig& config,
                                                          int64_t B, int64_t L) const {
  LIBRA_CHECK(config.tp >= 1 && config.pp >= 1 && config.dp >= 1 && config.b_micro >= 1)
      << "tp " << config.tp << " pp " << config.pp << " dp " << config.dp << " b_micro "
      << config.b_micro;
  const ReferenceParams& p = params_;
  const int tp = config.tp;
  const int pp = config.pp;
  const int dp = config.dp;
  const int64_t b_micro = config.b_micro;
  ReferenceTrainTime out;
  out.b_per_dp = std::max<int64_t>(1, B / dp);
  out.n_micro = std::max<int64_t>(1, out.b_per_dp / b_micro);
  out.layers_per_pp = p.n_layers / pp;

  LayerTimes(config, L, &out);

  const double t_f = out.fwd_per_micro_s;
  const double t_b = out.bwd_per_micro_s;
  const double n_micro = static_cast<double>(out.n_micro);
  if (pp <= 1) {
    out.pipeline_s = n_micro * (t_f + t_b);
  } else {
    // Reference behaviour: this "1F1B" formula sums to n_micro * (T_f + T_b) whenever
    // n_micro >= pp - 1, i.e. it charges no pipeline bubble.
    const double steady = static_cast<double>(std::max<int64_t>(0, out.n_micro - pp + 1));
    out.pipeline_s = (pp - 1) * t_f + steady * (t_f + t_b) + (pp - 1) * t_b;
  }

  if (pp > 1) {
    const double s_activation = ActivationBytes(b_micro, L, p.d_model, p.dtype_bytes);
    out.pp_comm_s = (pp - 1) * (s_activation / p.bw_inter_node + p.latency_inter_node);
  }

  if (dp > 1) {
    const double grad_per_rank = 2.0 * p.num_params / (tp * pp);
    // Reference behaviour: a replica within a node exchanges gradients over bw_inter_node, but
    // one that already spans nodes uses bw_intra_node (the branches look swapped).
    const double bw = tp * pp <= p.gpus_per_node ? p.bw_inter_node : p.bw_intra_node;
    out.dp_comm_s = static_cast<double>(dp - 1) / dp * grad_per_rank / bw;
  }
  const double overlap = pp > 1 ? 0.5 : 0.3;
  out.dp_exposed_s = out.dp_comm_s * (1.0 - overlap);

  out.seconds = out.pipeline_s + out.pp_comm_s + out.dp_exposed_s;
  return out;
}

ReferenceEvaluation ReferenceCostModel::Evaluate(const ReferenceTrainConfig& train_config,
                                                 std::span<const int> tp_list,
                                                 std::span<const RequestInfo> requests,
                                                 int64_t global_batch) const {
  ReferenceEvaluation out;
  int64_t L_avg = 1024;
  if (!requests.empty()) {
    int64_t total = 0;
    for (const RequestInfo& r : requests) total += r.total();
    L_avg = Trunc(static_cast<double>(total) / static_cast<double>(requests.size()));
  }
  if (TrainOom(train_config, L_avg)) {
    out.t_train = out.t_rollout = out.t_global = kInf;
    out.oom_source = "train";
    return out;
  }
  out.t_train = TrainIterationTime(train_config, global_batch, L_avg).seconds;
  out.t_rollout = EvaluateRollout(tp_list, requests).makespan;
  if (std::isinf(out.t_rollout)) {
    out.oom_source = "rollout";
    out.t_global = kInf;
    return out;
  }
  // Reference behaviour: one training iteration against one rollout makespan over the whole
  // history window, ignoring the asynchronous overlap.
  out.t_global = std::max(out.t_train, out.t_rollout);
  return out;
}

// ---- The CostModel interface
// ---------------------------------------------------------------------

double ReferenceCostModel::IterationTime(int tp, const IterationLoad& load) const {
  double t = 0;
  if (load.decode_sequences > 0) t += DecodeStep(load.decode_context_tokens, tp);
  if (load.prefill_chunks > 0) t += PrefillStep(1, load.prefill_tokens, tp);
  return t;
}

double ReferenceCostModel::PrefillTime(int tp, int64_t tokens, int64_t /*prior_tokens*/) const {
  const int chunk = params_.prefill_chunk_size;
  return static_cast<double>(tokens) / static_cast<double>(std::max(chunk, 1)) *
         PrefillStep(1, chunk, tp);
}

TrainEstimate ReferenceCostModel::TrainStep(const TrainLayout& layout,
                                            const TrainPasses& /*passes*/,
                                            std::span<const int64_t> sequence_tokens) const {
  const int64_t B = static_cast<int64_t>(sequence_tokens.size());
  int64_t L = 1024;
  if (B > 0) {
    int64_t total = 0;
    for (int64_t tokens : sequence_tokens) total += tokens;
    L = Trunc(static_cast<double>(total) / static_cast<double>(B));
  }
  ReferenceTrainConfig config;
  config.tp = layout.tp;
  config.pp = layout.pp;
  config.dp = layout.dp;
  config.b_micro = layout.micro_batch;
  config.zero_level = params_.zero_level;
  const ReferenceTrainTime time = TrainIterationTime(config, B, L);

  TrainEstimate out;
  out.step_s = time.seconds;
  // The pipeline splits into the micro-batches' compute and TP communication; what is left over
  // (the bubble when n_micro < pp - 1) and the pipeline sends are the pipeline overhead.
  const double micro_layers = static_cast<double>(time.n_micro) * time.layers_per_pp;
  out.compute_s = micro_layers * (time.compute_fwd_per_layer_s + time.compute_bwd_per_layer_s);
  out.tp_comm_s = micro_layers * 2 * time.tp_comm_per_layer_s;
  const double bubble = time.pipeline_s - static_cast<double>(time.n_micro) *
                                              (time.fwd_per_micro_s + time.bwd_per_micro_s);
  out.pp_bubble_s = std::max(0.0, bubble) + time.pp_comm_s;
  out.dp_comm_s = time.dp_exposed_s;
  out.memory_bytes = TrainMemory(config, config.b_micro, L);
  out.memory_limit_bytes = TrainMemoryLimit();
  return out;
}

double ReferenceCostModel::WeightSyncTime(const SyncRequest& /*request*/) const {
  // The reference planner charges no weight synchronisation.
  return 0;
}

double ReferenceCostModel::RoleSwitchTime(const SwitchRequest& /*request*/) const {
  // The reference planner's flat transition cost, whatever the direction or the layouts.
  return params_.reconfiguration_cost_s;
}

}  // namespace libra::model
