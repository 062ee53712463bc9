#include "model/roofline_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace libra::model {
namespace {

constexpr double kGB = 1e9;

}  // namespace

Result<std::unique_ptr<CostModel>> RooflineCostModel::Create(const CostModelContext& context,
                                                             const recipe::OptionTable& options) {
  recipe::OptionReader r(options);
  RooflineParams p;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  p.gpu_memory_utilization = r.Double("gpu_memory_utilization", p.gpu_memory_utilization, 0.01, 1);
  p.reserve_bytes = r.Double("reserve_gb", p.reserve_bytes / kGB, 0, 1e4) * kGB;
  p.kv_fragmentation = r.Double("kv_fragmentation", p.kv_fragmentation, 0, 0.99);
  p.decode_bw_util = r.Double("decode_bw_util", p.decode_bw_util, 0.01, 1);
  p.prefill_mfu = r.Double("prefill_mfu", p.prefill_mfu, 0.01, 1);
  p.iteration_overhead_s =
      r.Double("iteration_overhead_ms", p.iteration_overhead_s * 1e3, 0, 1e4) / 1e3;
  p.sequence_overhead_s =
      r.Double("sequence_overhead_us", p.sequence_overhead_s * 1e6, 0, 1e6) / 1e6;
  p.prefill_chunk_tokens =
      r.Int("prefill_chunk_tokens", p.prefill_chunk_tokens, 1, int64_t{1} << 30);
  p.train_mfu = r.Double("train_mfu", p.train_mfu, 0.01, 1);
  p.train_tp_overlap = r.Double("train_tp_overlap", p.train_tp_overlap, 0, 1);
  p.train_dp_overlap = r.Double("train_dp_overlap", p.train_dp_overlap, 0, 1);
  p.train_dp_overlap_pp = r.Double("train_dp_overlap_pp", p.train_dp_overlap_pp, 0, 1);
  p.optimizer_bytes_per_param =
      r.Double("optimizer_bytes_per_param", p.optimizer_bytes_per_param, 0, 1e3);
  p.train_reserve_bytes = r.Double("train_reserve_gb", p.train_reserve_bytes / kGB, 0, 1e4) * kGB;
  p.load_tensor_overhead_s =
      r.Double("load_tensor_overhead_us", p.load_tensor_overhead_s * 1e6, 0, 1e9) / 1e6;
  p.disk_write_bandwidth =
      r.Double("disk_write_gbps", p.disk_write_bandwidth / kGB, 1e-6, kInf) * kGB;
  p.disk_read_bandwidth = r.Double("disk_read_gbps", p.disk_read_bandwidth / kGB, 1e-6, kInf) * kGB;
  p.engine_restart_s = r.Double("engine_restart_s", p.engine_restart_s, 0, 1e6);
  p.role_reinit_s = r.Double("role_reinit_s", p.role_reinit_s, 0, 1e6);
  LIBRA_RETURN_IF_ERROR(r.Finish());
  return std::unique_ptr<CostModel>(std::make_unique<RooflineCostModel>(context, p));
}

RooflineCostModel::RooflineCostModel(const CostModelContext& context, const RooflineParams& params)
    : gpu_(context.gpu),
      arch_(context.arch),
      gpus_per_node_(context.gpus_per_node),
      params_(params),
      active_params_(context.arch.ActiveMatmulParams()),
      total_params_(context.arch.TotalParams()),
      weight_bytes_(context.arch.WeightBytes()),
      kv_bytes_per_token_(context.arch.KvBytesPerToken()),
      expert_params_(context.arch.ExpertParams()) {}

double RooflineCostModel::KvBytesPerTokenPerGpu(int tp) const {
  // KV heads are split across TP ranks; beyond kv_heads ranks they are replicated.
  return kv_bytes_per_token_ / std::min(tp, arch_.kv_heads);
}

int64_t RooflineCostModel::KvCapacityTokens(int tp) const {
  const double per_gpu_pool =
      gpu_.hbm_bytes * params_.gpu_memory_utilization - params_.reserve_bytes - weight_bytes_ / tp;
  if (per_gpu_pool <= 0) return 0;
  return static_cast<int64_t>(per_gpu_pool / KvBytesPerTokenPerGpu(tp) *
                              (1 - params_.kv_fragmentation));
}

double RooflineCostModel::IterationTime(int tp, const IterationLoad& load) const {
  if (load.empty()) return 0;
  const double t = tp;
  const double b = arch_.dtype_bytes;
  const double tokens = static_cast<double>(load.decode_sequences + load.prefill_tokens);
  const double kv_tokens = static_cast<double>(load.decode_context_tokens + load.prefill_kv_tokens);
  const double bytes = b * WeightParamsRead(tokens) / t + kv_tokens * KvBytesPerTokenPerGpu(tp);
  const double attention = static_cast<double>(load.decode_context_tokens) + load.prefill_attention;
  const double flops = (2 * active_params_ * tokens +
                        4.0 * arch_.layers * arch_.heads * arch_.head_dim * attention) /
                       t;
  const double memory_s = bytes / (params_.decode_bw_util * gpu_.hbm_bandwidth);
  const double compute_s = flops / (params_.prefill_mfu * gpu_.bf16_flops);
  double comm_s = 0;
  if (tp > 1) {
    // Two all-reduces of the hidden states per layer (attention and MLP outputs).
    comm_s = 2.0 * arch_.layers *
             (gpu_.allreduce_latency_s +
              2 * (t - 1) / t * tokens * arch_.hidden * b / gpu_.allreduce_bandwidth);
  }
  return std::max(memory_s, compute_s) + comm_s + params_.iteration_overhead_s +
         params_.sequence_overhead_s *
             static_cast<double>(load.decode_sequences + load.prefill_chunks);
}

double RooflineCostModel::WeightParamsRead(double tokens) const {
  // Weights are read once per iteration; a MoE layer reads only the experts its tokens touch.
  double params = active_params_;
  if (arch_.moe()) {
    const double active_experts =
        arch_.layers * 3.0 * arch_.hidden * arch_.expert_ffn * arch_.experts_per_token;
    const double touched =
        1 - std::pow(1 - static_cast<double>(arch_.experts_per_token) / arch_.experts, tokens);
    params = params - active_experts + expert_params_ * touched;
  }
  return params;
}

double RooflineCostModel::DecodeSpanTime(int tp, int64_t sequences, int64_t context_tokens,
                                         int64_t iterations) const {
  if (iterations <= 0 || sequences <= 0) return 0;
  // With a fixed decode set, both the memory time and the compute time are affine in the context
  // sum S, which grows by `sequences` per iteration: sum max(affine, affine) over the span in
  // closed form, split where the two lines cross.
  const double t = tp;
  const double n = static_cast<double>(sequences);
  const double b = arch_.dtype_bytes;
  const double bw = params_.decode_bw_util * gpu_.hbm_bandwidth;
  const double flops = params_.prefill_mfu * gpu_.bf16_flops;
  const double mem_a = b * WeightParamsRead(n) / t / bw;
  const double mem_b = KvBytesPerTokenPerGpu(tp) / bw;
  const double comp_a = 2 * active_params_ * n / t / flops;
  const double comp_b = 4.0 * arch_.layers * arch_.heads * arch_.head_dim / t / flops;
  double fixed = params_.iteration_overhead_s + params_.sequence_overhead_s * n;
  if (tp > 1) {
    fixed += 2.0 * arch_.layers *
             (gpu_.allreduce_latency_s +
              2 * (t - 1) / t * n * arch_.hidden * b / gpu_.allreduce_bandwidth);
  }
  const double s0 = static_cast<double>(context_tokens);
  // Sum over iterations [j0, j1) of a + slope * (s0 + j * n).
  auto sum = [&](double a, double slope, double j0, double j1) {
    const double count = j1 - j0;
    return count * (a + slope * s0) + slope * n * (j0 + j1 - 1) * count / 2;
  };
  const double k = static_cast<double>(iterations);
  // Memory minus compute at iteration j is d0 + d1 * j.
  const double d0 = (mem_a - comp_a) + (mem_b - comp_b) * s0;
  const double d1 = (mem_b - comp_b) * n;
  const bool memory_first = d0 > 0 || (d0 == 0 && d1 >= 0);
  // Iterations before the dominant term changes: only when the difference moves towards the
  // other sign.
  double split = k;
  if ((memory_first && d1 < 0) || (!memory_first && d1 > 0)) {
    split = std::clamp(std::ceil(-d0 / d1), 0.0, k);
  }
  double total = fixed * k;
  if (memory_first) {
    total += sum(mem_a, mem_b, 0, split) + sum(comp_a, comp_b, split, k);
  } else {
    total += sum(comp_a, comp_b, 0, split) + sum(mem_a, mem_b, split, k);
  }
  return total;
}

double RooflineCostModel::DecodeGpuSecondsLowerBound(int64_t context, int64_t max_batch) const {
  // Per token, at least its share of the weight read of a full batch and its own KV read (heads
  // at best split evenly), at the achieved bandwidth; compute, communication and overheads only
  // add to it.
  const double bw = params_.decode_bw_util * gpu_.hbm_bandwidth;
  return (arch_.dtype_bytes * WeightParamsRead(1) /
              static_cast<double>(std::max<int64_t>(1, max_batch)) +
          static_cast<double>(context) * kv_bytes_per_token_) /
         bw;
}

double RooflineCostModel::PrefillGpuSecondsLowerBound() const {
  return 2 * active_params_ / (params_.prefill_mfu * gpu_.bf16_flops);
}

double RooflineCostModel::TrainGpuSecondsLowerBound(int64_t tokens,
                                                    const TrainPasses& passes) const {
  return TrainFlops(tokens, passes) / (params_.train_mfu * gpu_.bf16_flops);
}

double RooflineCostModel::PrefillTime(int tp, int64_t tokens, int64_t prior_tokens) const {
  double total = 0;
  for (int64_t done = 0; done < tokens; done += params_.prefill_chunk_tokens) {
    IterationLoad load;
    load.AddPrefill(std::min(params_.prefill_chunk_tokens, tokens - done), prior_tokens + done);
    total += IterationTime(tp, load);
  }
  return total;
}

double RooflineCostModel::TrainFlops(int64_t tokens, const TrainPasses& passes) const {
  const double extra = (passes.activation_recompute ? 1 : 0) + (passes.old_logprob ? 1 : 0) +
                       (passes.reference ? 1 : 0);
  const double s = static_cast<double>(tokens);
  return (6 + 2 * extra) * active_params_ * s +
         (3 + extra) * 2.0 * arch_.layers * arch_.heads * arch_.head_dim * s * s;
}

double RooflineCostModel::TrainMemoryPerGpu(const TrainLayout& layout, const TrainPasses& passes,
                                            int64_t micro_tokens, int micro_batches) const {
  const double n = total_params_;
  const double shard = static_cast<double>(layout.tp) * layout.pp;
  // bf16 weights, fp32 gradients, Adam state (fp32 master, m, v) sharded over DP (distributed
  // optimizer), and the reference model's bf16 weights when a KL term needs them.
  const double states =
      (2 + 4) * n / shard + 12 * n / (shard * layout.dp) + (passes.reference ? 2 * n / shard : 0);
  // Activations (Korthikanti et al. 2022, sequence parallel, flash attention): 34*s*d bytes per
  // layer; with full recompute only each layer's input (2*s*d) is kept, plus one layer's working
  // set. The first pipeline stage holds up to pp micro-batches (1F1B).
  const double s = static_cast<double>(micro_tokens);
  const double d = arch_.hidden;
  const double stage_layers = std::ceil(static_cast<double>(arch_.layers) / layout.pp);
  const double in_flight = std::min(layout.pp, std::max(1, micro_batches));
  const double activations = passes.activation_recompute
                                 ? (2 * s * d * stage_layers * in_flight + 34 * s * d) / layout.tp
                                 : 34 * s * d * stage_layers * in_flight / layout.tp;
  // fp32 logits and their gradient for the log-probabilities (vocabulary split over TP),
  // computed in chunks of at most kLogitChunkTokens tokens as RL trainers do.
  constexpr double kLogitChunkTokens = 4096;
  const double logits =
      6 * std::min(s, kLogitChunkTokens) * static_cast<double>(arch_.vocab) / layout.tp;
  return states + activations + logits;
}

std::vector<SequenceRun> RooflineCostModel::SequenceRuns(
    const TrainPasses& passes, std::span<const int64_t> longest_first) const {
  std::vector<SequenceRun> runs;
  for (const int64_t tokens : longest_first) {
    if (runs.empty() || runs.back().tokens != tokens) {
      runs.push_back({tokens, TrainFlops(tokens, passes), 0});
    }
    ++runs.back().count;
  }
  return runs;
}

namespace {

/// Tokens of the largest micro-batch: the longest sequences together.
int64_t LargestMicroBatch(std::span<const int64_t> longest_first, int micro_batch) {
  int64_t tokens = 0;
  for (size_t i = 0; i < longest_first.size() && i < static_cast<size_t>(micro_batch); ++i) {
    tokens += longest_first[i];
  }
  return tokens;
}

}  // namespace

bool RooflineCostModel::OutOfMemoryWithAnyShare(const TrainLayout& layout,
                                                const TrainPasses& passes,
                                                std::span<const int64_t> longest_first) const {
  // Memory grows with the micro-batches in flight, the only part that needs the packing.
  const int micro_batch = std::max(1, layout.micro_batch);
  return TrainMemoryPerGpu(layout, passes, LargestMicroBatch(longest_first, micro_batch), 1) >
         TrainMemoryLimit();
}

TrainEstimate RooflineCostModel::Estimate(const TrainLayout& layout, const TrainPasses& passes,
                                          std::span<const int64_t> longest_first,
                                          const RankShare& share) const {
  TrainEstimate e;
  e.memory_limit_bytes = TrainMemoryLimit();
  const int dp = std::max(1, layout.dp);
  const int micro_batch = std::max(1, layout.micro_batch);
  e.flops = share.flops;
  e.imbalance = e.flops > 0 ? share.busiest_flops / (e.flops / dp) : 1;

  const int micro_batches = (share.busiest_sequences + micro_batch - 1) / micro_batch;
  e.memory_bytes = TrainMemoryPerGpu(layout, passes, LargestMicroBatch(longest_first, micro_batch),
                                     micro_batches);
  if (longest_first.empty()) return e;

  const double shard = static_cast<double>(layout.tp) * layout.pp;
  const double b = arch_.dtype_bytes;
  const double d = arch_.hidden;
  e.compute_s = share.busiest_flops / (shard * params_.train_mfu * gpu_.bf16_flops);
  if (layout.tp > 1) {
    // Two all-reduces per layer for every forward (forward, recompute, old log-probs,
    // reference) and two for the backward.
    const double forwards = 1 + (passes.activation_recompute ? 1 : 0) +
                            (passes.old_logprob ? 1 : 0) + (passes.reference ? 1 : 0);
    const double collectives = (2 * forwards + 2) * std::ceil(double(arch_.layers) / layout.pp);
    const double t = layout.tp;
    e.tp_comm_s = collectives *
                  (micro_batches * gpu_.allreduce_latency_s +
                   2 * (t - 1) / t * share.busiest_tokens * d * b / gpu_.allreduce_bandwidth) *
                  (1 - params_.train_tp_overlap);
  }
  const bool spans_nodes = layout.gpus() > gpus_per_node_;
  const double inter_per_gpu = gpu_.inter_node_bandwidth / gpus_per_node_;
  if (layout.pp > 1) {
    // 1F1B bubble, plus activations and their gradients crossing each stage boundary.
    const double link = spans_nodes ? inter_per_gpu : gpu_.nvlink_bandwidth;
    e.pp_bubble_s = (layout.pp - 1.0) / (micro_batches + layout.pp - 1.0) * e.compute_s +
                    2.0 * (layout.pp - 1) * share.busiest_tokens * d * b / layout.tp / link;
  }
  if (dp > 1) {
    const double bandwidth = spans_nodes ? inter_per_gpu : gpu_.allreduce_bandwidth;
    const double overlap = layout.pp > 1 ? params_.train_dp_overlap_pp : params_.train_dp_overlap;
    e.dp_comm_s = 2.0 * (dp - 1) / dp * b * total_params_ / shard / bandwidth * (1 - overlap);
  }
  e.optimizer_s = params_.optimizer_bytes_per_param * total_params_ / (shard * dp) /
                  (params_.decode_bw_util * gpu_.hbm_bandwidth);
  e.step_s = e.compute_s + e.tp_comm_s + e.pp_bubble_s + e.dp_comm_s + e.optimizer_s;
  return e;
}

TrainEstimate RooflineCostModel::TrainStep(const TrainLayout& layout, const TrainPasses& passes,
                                           std::span<const int64_t> sequence_tokens) const {
  std::vector<int64_t> sorted(sequence_tokens.begin(), sequence_tokens.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  return Estimate(layout, passes, sorted,
                  PackLongestFirst(SequenceRuns(passes, sorted), std::max(1, layout.dp)));
}

namespace {

/// TrainStep for one batch: its packing depends on the data-parallel degree alone, so it is
/// remembered per degree and reused for every TP, PP and micro-batch of that degree.
class RooflineBatchCosts : public TrainBatchCosts {
 public:
  RooflineBatchCosts(const RooflineCostModel& model, const TrainPasses& passes,
                     std::vector<int64_t> tokens)
      : model_(model), passes_(passes), sorted_(std::move(tokens)) {
    std::sort(sorted_.begin(), sorted_.end(), std::greater<>());
    runs_ = model_.SequenceRuns(passes_, sorted_);
  }

  TrainEstimate TrainStep(const TrainLayout& layout) override {
    const int dp = std::max(1, layout.dp);
    auto it = shares_.find(dp);
    if (it == shares_.end()) it = shares_.emplace(dp, PackLongestFirst(runs_, dp)).first;
    return model_.Estimate(layout, passes_, sorted_, it->second);
  }
  bool SurelyOutOfMemory(const TrainLayout& layout) override {
    return model_.OutOfMemoryWithAnyShare(layout, passes_, sorted_);
  }
  bool OutOfMemory(const TrainLayout& layout) override {
    // One pipeline stage holds one micro-batch whatever the packing: no need to pack.
    if (layout.pp == 1) return model_.OutOfMemoryWithAnyShare(layout, passes_, sorted_);
    return TrainStep(layout).oom();
  }

 private:
  const RooflineCostModel& model_;
  TrainPasses passes_;
  std::vector<int64_t> sorted_;
  std::vector<SequenceRun> runs_;              // of sorted_, with their TrainFlops
  std::unordered_map<int, RankShare> shares_;  // by DP degree
};

}  // namespace

std::unique_ptr<TrainBatchCosts> RooflineCostModel::ForTrainBatch(
    const TrainPasses& passes, std::vector<int64_t> sequence_tokens) const {
  return std::make_unique<RooflineBatchCosts>(*this, passes, std::move(sequence_tokens));
}

double RooflineCostModel::WeightSyncTime(const SyncRequest& request) const {
  const double weights = weight_bytes_;
  const double shards = static_cast<double>(request.train.tp) * request.train.pp;
  // Re-assemble the TP/PP shards on the sending rank.
  const double gather = shards > 1 ? weights * (shards - 1) / shards / gpu_.allreduce_bandwidth : 0;
  // Every engine loads the full weights into its TP shards (attention 4, MLP 3 and 2 norm
  // tensors per layer, plus embeddings, final norm and head).
  const double tensors = 9.0 * arch_.layers + 3;
  const double load = weights / request.rollout_tp / (params_.decode_bw_util * gpu_.hbm_bandwidth) +
                      tensors * params_.load_tensor_overhead_s;
  if (request.path == SyncPath::kDisk) {
    return gather + weights / params_.disk_write_bandwidth + weights / params_.disk_read_bandwidth +
           params_.engine_restart_s + load;
  }
  // A pipelined, chunked broadcast runs at the slowest link on its path.
  const double link = request.cross_node
                          ? std::min(gpu_.inter_node_bandwidth, gpu_.nvlink_bandwidth)
                          : gpu_.nvlink_bandwidth;
  return gather + weights / link + load;
}

double RooflineCostModel::RoleSwitchTime(const SwitchRequest& request) const {
  // A rollout engine's weights on one GPU, and a trainer's state on one GPU (bf16 weights, fp32
  // gradients, Adam state sharded over DP).
  const double engine = weight_bytes_ / request.rollout_tp;
  const double n = total_params_;
  const double shard = static_cast<double>(request.train.tp) * request.train.pp;
  const double trainer = 6 * n / shard + 12 * n / (shard * std::max(1, request.train.dp));
  if (request.direction == SwitchDirection::kRolloutToTrain) {
    return engine / gpu_.d2h_bandwidth + trainer / gpu_.h2d_bandwidth + params_.role_reinit_s;
  }
  return trainer / gpu_.d2h_bandwidth + engine / gpu_.h2d_bandwidth + params_.role_reinit_s;
}

}  // namespace libra::model
