// CostModel: how long things take on a GPU cluster, and how much memory they need. The planner
// predicts with it and the simulator executes with it, so both rest on the same numbers.
//
// Two models implement it: "roofline" (ours, from first principles: docs/cost-model.md) and
// "libra-ref" (the Libra authors' analytic formulas exactly, errors included, for cross-checks).
// A cost model is a value-like service: const, no I/O, no clock, safe to share.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/registry.h"
#include "model/catalog.h"
#include "model/train_layout.h"
#include "recipe/options.h"
#include "recipe/recipe.h"

namespace libra::model {

/// What one continuous-batching iteration of a rollout instance processes, as the sums the cost
/// depends on (so a simulator can keep them incrementally).
struct IterationLoad {
  /// Decoding sequences |D| and the sum of their contexts (tokens already in the KV cache).
  int64_t decode_sequences = 0;
  int64_t decode_context_tokens = 0;
  /// Prefill chunks: their number, new tokens sum(q), KV tokens touched sum(p + q), and the
  /// attention work sum(q * (p + q / 2)) for prior context p.
  int64_t prefill_chunks = 0;
  int64_t prefill_tokens = 0;
  int64_t prefill_kv_tokens = 0;
  double prefill_attention = 0;

  // Inline: a simulator adds every running sequence of every iteration.
  void AddDecode(int64_t context_tokens) {
    ++decode_sequences;
    decode_context_tokens += context_tokens;
  }
  void AddPrefill(int64_t new_tokens, int64_t prior_tokens) {
    ++prefill_chunks;
    prefill_tokens += new_tokens;
    prefill_kv_tokens += prior_tokens + new_tokens;
    prefill_attention +=
        static_cast<double>(new_tokens) * (static_cast<double>(prior_tokens) + new_tokens / 2.0);
  }
  bool empty() const { return decode_sequences == 0 && prefill_chunks == 0; }
};

/// Which passes a training step runs besides forward and backward.
struct TrainPasses {
  /// Full activation recomputation (one more forward per micro-batch).
  bool activation_recompute = true;
  /// Old-policy log-probabilities recomputed by a forward pass (verl, Libra).
  bool old_logprob = true;
  /// A reference-model forward for the KL penalty.
  bool reference = true;
};

/// One training step, with its parts.
struct TrainEstimate {
  double step_s = 0;
  double compute_s = 0;
  double tp_comm_s = 0;
  double pp_bubble_s = 0;
  double dp_comm_s = 0;
  double optimizer_s = 0;
  /// Total FLOPs of the step and the load imbalance across data-parallel ranks (>= 1).
  double flops = 0;
  double imbalance = 1;
  /// Peak memory per GPU, and what a GPU can hold.
  double memory_bytes = 0;
  double memory_limit_bytes = 0;

  bool oom() const { return memory_bytes > memory_limit_bytes; }
};

/// How weights reach the rollout engines (the recipe's sim.sync_path).
using SyncPath = recipe::SyncPath;

struct SyncRequest {
  SyncPath path = SyncPath::kNccl;
  TrainLayout train;
  int rollout_tp = 1;
  /// Whether the broadcast crosses nodes (disaggregated placement).
  bool cross_node = true;
};

/// Which way a worker changes role.
enum class SwitchDirection { kRolloutToTrain, kTrainToRollout };

struct SwitchRequest {
  SwitchDirection direction = SwitchDirection::kRolloutToTrain;
  /// TP of the rollout instance the worker leaves or joins.
  int rollout_tp = 1;
  /// The training layout the worker joins or leaves.
  TrainLayout train;
};

/// TrainStep's answers for one batch under many layouts (a planner's training tree asks for
/// thousands). Made by CostModel::ForTrainBatch; must not outlive that model.
class TrainBatchCosts {
 public:
  virtual ~TrainBatchCosts() = default;
  /// What the model's TrainStep(layout, passes, sequence_tokens) answers for this batch.
  virtual TrainEstimate TrainStep(const TrainLayout& layout) = 0;
  /// Whether TrainStep(layout) surely runs out of memory, answered for less than TrainStep costs:
  /// true only if TrainStep(layout).oom() is; false when that is not known cheaply (the default).
  virtual bool SurelyOutOfMemory(const TrainLayout& /*layout*/) { return false; }
  /// TrainStep(layout).oom(), which a model may answer for less than TrainStep costs.
  virtual bool OutOfMemory(const TrainLayout& layout) { return TrainStep(layout).oom(); }
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  /// "roofline", "libra-ref".
  virtual std::string_view Name() const = 0;
  virtual const GpuSpec& gpu() const = 0;
  virtual const ModelArch& arch() const = 0;

  // ---- Rollout ---------------------------------------------------------------------------------

  /// Tokens of KV cache a TP-`tp` instance holds; 0 when the weights do not fit.
  virtual int64_t KvCapacityTokens(int tp) const = 0;
  /// Seconds of one continuous-batching iteration of a TP-`tp` instance. REQUIRES: tp >= 1.
  virtual double IterationTime(int tp, const IterationLoad& load) const = 0;
  /// Seconds to prefill `tokens` new tokens after `prior_tokens` cached ones on an otherwise idle
  /// TP-`tp` instance (re-building a context on another instance).
  virtual double PrefillTime(int tp, int64_t tokens, int64_t prior_tokens) const = 0;
  /// Seconds of `iterations` consecutive decode-only iterations of a TP-`tp` instance whose
  /// `sequences` sequences start with contexts summing to `context_tokens`; every iteration adds
  /// one token to each. The base class sums IterationTime; models give closed forms, so that a
  /// simulator advances between events without a step per token.
  virtual double DecodeSpanTime(int tp, int64_t sequences, int64_t context_tokens,
                                int64_t iterations) const;

  // ---- Lower bounds (the perfect-balance throughput bound) -------------------------------------

  /// GPU-seconds that generating one token at `context` tokens of context costs at least, on any
  /// instance of any TP running at most `max_batch` sequences. Non-decreasing and concave in
  /// `context` (the planner sums it over trajectories of different contexts to bound a batch).
  virtual double DecodeGpuSecondsLowerBound(int64_t context, int64_t max_batch) const = 0;
  /// GPU-seconds that prefilling one token costs at least.
  virtual double PrefillGpuSecondsLowerBound() const = 0;
  /// GPU-seconds that training one sequence of `tokens` tokens costs at least.
  virtual double TrainGpuSecondsLowerBound(int64_t tokens, const TrainPasses& passes) const = 0;

  // ---- Training --------------------------------------------------------------------------------

  /// One optimizer step over sequences of the given total lengths (tokens).
  virtual TrainEstimate TrainStep(const TrainLayout& layout, const TrainPasses& passes,
                                  std::span<const int64_t> sequence_tokens) const = 0;
  /// TrainStep for one batch under many layouts, each answer the same as TrainStep's. A model
  /// may remember there what depends on the batch alone; the base class asks TrainStep each time.
  virtual std::unique_ptr<TrainBatchCosts> ForTrainBatch(
      const TrainPasses& passes, std::vector<int64_t> sequence_tokens) const;

  // ---- Transitions -----------------------------------------------------------------------------

  /// Seconds to push the trainer's weights to the rollout engines.
  virtual double WeightSyncTime(const SyncRequest& request) const = 0;
  /// Seconds for a worker to change role (not counting the drain of its in-flight work).
  virtual double RoleSwitchTime(const SwitchRequest& request) const = 0;
};

/// What a cost model is built for: the hardware, the model and the node size.
struct CostModelContext {
  GpuSpec gpu;
  ModelArch arch;
  int gpus_per_node = 8;
};

using CostModelRegistry = Registry<CostModel, const CostModelContext&, const recipe::OptionTable&>;

/// Registers "roofline" and "libra-ref".
Status RegisterBuiltinCostModels(CostModelRegistry& registry);
/// A registry with the built-ins, built once.
const CostModelRegistry& BuiltinCostModels();

/// The GPU and model a recipe names (catalog entries, or its custom [cluster.gpu_spec] and
/// [model.arch] tables). kInvalidRecipe with the recipe position when unknown or invalid.
Result<CostModelContext> ContextFor(const recipe::Recipe& recipe);

/// The cost model a recipe asks for ([cost_model]), built for its GPU, model and nodes.
Result<std::unique_ptr<CostModel>> MakeCostModel(const recipe::Recipe& recipe);

// ---- Derived figures, the same for every cost model ----------------------------------------

/// Tokens per second of one sequence decoding alone at `context` tokens on a TP-`tp` instance.
double SingleSequenceDecodeRate(const CostModel& model, int tp, int64_t context);

/// Decode tokens per second per GPU of a TP-`tp` instance full of sequences at `context` tokens:
/// as many as the KV cache holds, at most `max_sequences`. 0 when none fits.
double SaturatedDecodeRatePerGpu(const CostModel& model, int tp, int64_t context,
                                 int64_t max_sequences);

/// The most decode iterations (at most `max_iterations`) that fit in `seconds` from the start of
/// a span (see CostModel::DecodeSpanTime); 0 when not even one does.
int64_t DecodeIterationsWithin(const CostModel& model, int tp, int64_t sequences,
                               int64_t context_tokens, int64_t max_iterations, double seconds);

/// Prefill tokens per second of a TP-`tp` instance for one prompt of `tokens` tokens.
double PrefillRate(const CostModel& model, int tp, int64_t tokens);

}  // namespace libra::model
