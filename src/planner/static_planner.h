// StaticPlanner ("static"): a fixed split, disaggregated. The last `train_gpus` GPUs train; the
// first ones run rollout instances of TP `rollout_tp` (or a pattern of TPs). Never re-plans.
//
// Assumptions: the user knows a good split (the usual practice in verl / slime / AReaL recipes).
// Algorithm: 1. pack TP-`rollout_tp` instances on GPUs [0, total - train_gpus), node by node,
// never across a node boundary. 2. train on the rest. (Rollout first, so that a planner moving
// GPUs between the two sides changes only the last instances and the others keep their ids.)
// Knobs: `train_gpus` (default: half the cluster, in whole nodes when there are several),
// `rollout_tp` (1, 2, 4 or 8, dividing gpus_per_node; default 1) or `rollout_tps`, a pattern of
// TP sizes each node repeats (e.g. [1, 1, 2, 4] for C-MLFQ's buckets); `lend_idle_trainer`
// (default false): while the trainer waits for a batch its GPUs roll out (verl's dynamic resource
// scheduling), and are drained and taken back when the batch is ready; `reclaim_at` (default 1,
// in (0, 1]): the fraction of the batch's groups complete at which the drain starts, so that a
// lower value overlaps the drain with the batch's last groups.
#pragma once

#include <optional>
#include <vector>

#include "planner/planner.h"

namespace libra::planner {

inline constexpr std::string_view kStaticName = "static";

class StaticPlanner : public Planner {
 public:
  static Result<std::unique_ptr<Planner>> Create(const recipe::OptionTable& options);
  StaticPlanner(std::optional<int> train_gpus, std::vector<int> rollout_tps,
                bool lend_idle_trainer = false, double reclaim_at = 1.0)
      : train_gpus_(train_gpus),
        rollout_tps_(std::move(rollout_tps)),
        lend_idle_trainer_(lend_idle_trainer),
        reclaim_at_(reclaim_at) {}

  std::string_view Name() const override { return kStaticName; }
  Result<Plan> Initial(const PlanContext& context) override;
  /// With `lend_idle_trainer`: the training GPUs as instances of the last instance's TP.
  std::optional<backend::Layout> IdleTrainerLayout(const backend::Layout& current) const override;
  double ReclaimAt() const override { return reclaim_at_; }

 private:
  std::optional<int> train_gpus_;
  std::vector<int> rollout_tps_;
  bool lend_idle_trainer_ = false;
  double reclaim_at_ = 1.0;
  int gpus_per_node_ = 0;
};

}  // namespace libra::planner
