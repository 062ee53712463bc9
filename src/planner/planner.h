// Planner: decides how the GPUs are used: how many train, and which rollout instances (TP sizes)
// run on the rest. Planners are pure policies: no I/O, no clock; they see the cluster and the
// pipeline settings and return a plan, or say why none fits.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/registry.h"
#include "recipe/options.h"

namespace libra::planner {

/// What a planner plans for.
struct PlanContext {
  int nodes = 1;
  int gpus_per_node = 8;
  /// Samples per step (prompts x group size).
  int batch_trajectories = 0;
  /// The staleness bound in force (0 = synchronous).
  int staleness = 0;
  /// The cost model, for planners that predict (and to pick a training layout that fits).
  /// Must outlive the planner's calls.
  const model::CostModel* cost = nullptr;
  /// A typical trajectory's total tokens (prompt, generated and tool output): what a training
  /// sequence is sized as when comparing layouts.
  int64_t typical_sequence_tokens = 8192;
  /// The longest trajectory to expect (tokens): training memory must hold it.
  int64_t max_sequence_tokens = 8192;

  int total_gpus() const { return nodes * gpus_per_node; }
};

/// A planner's answer.
struct Plan {
  backend::Layout layout;
  /// Why this plan, in words.
  std::string reason;
  /// The planner's predicted time per step, when it has a model.
  std::optional<double> predicted_step_s;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string_view Name() const = 0;
  /// The plan to start with. kUnschedulable (with the reason) when nothing fits this cluster.
  virtual Result<Plan> Initial(const PlanContext& context) = 0;
  /// Whether the plans need every sample to be on-policy (staleness 0): true for time-sharing
  /// planners, whose rollout and training cannot overlap.
  virtual bool RequiresSynchronous() const { return false; }
};

using PlannerRegistry = Registry<Planner, const recipe::OptionTable&>;

/// Registers every built-in planner (static, colocated, ...).
Status RegisterBuiltinPlanners(PlannerRegistry& registry);

/// A registry with the built-ins, built once.
const PlannerRegistry& BuiltinPlanners();

/// Reads the rollout TP sizes: `rollout_tp` (one size for every instance; default 1) or
/// `rollout_tps` (a pattern repeated on every node, e.g. [1, 1, 2, 4]); each 1, 2, 4 or 8.
/// Problems are reported on `reader`.
std::vector<int> ReadRolloutTps(recipe::OptionReader& reader);

/// kUnschedulable unless every TP of `pattern` fits a node.
Status CheckRolloutTps(const std::vector<int>& pattern, int gpus_per_node);

/// Every training layout of `gpus` GPUs: TP 1/2/4/8 within a node, PP 1/2/4, the rest data
/// parallel, micro-batch 1; by TP, then PP, ascending.
std::vector<model::TrainLayout> TrainLayoutCandidates(int gpus, int gpus_per_node);

/// The training layout of `gpus` GPUs (TP 1/2/4/8 within a node, PP 1/2/4, the rest data
/// parallel, micro-batch 1) with the shortest predicted step for `context`'s batch (typical
/// sequences and one of the longest) among those that fit in memory; kUnschedulable when none fits.
/// Without a cost model: the largest TP that divides both, no PP.
Result<model::TrainLayout> ChooseTrainLayout(const PlanContext& context, int gpus);

/// Packs rollout instances onto the GPUs [first_gpu, first_gpu + gpus) of the cluster
/// (node-major numbering), never across a node boundary: each node repeats `pattern` (TP sizes)
/// from its start until its GPUs are used. kUnschedulable when an instance does not fit.
Result<std::vector<backend::InstanceSpec>> PackInstances(int gpus_per_node, int first_gpu, int gpus,
                                                         const std::vector<int>& pattern);

}  // namespace libra::planner
