// GrpPlanner ("grp"): Libra's global resource planner. Decides how many GPUs train and how many
// roll out, with which training parallelism and which mix of rollout TP sizes, and changes that
// while the run goes on, through the elastic hybrid pool. "no-ehp" is the same planner without
// online re-planning (plan once at the start): the ablation.
//
// Assumptions: the cost model ranks layouts correctly up to a factor per side (rollout,
// training) that calibration learns from measured steps; the recent trajectories predict the
// next steps' lengths; a worker moves between rollout and training at a step boundary, in whole
// training replicas, and costs a role switch (cost model) plus the re-prefill of the
// trajectories its instance held.
//
// Algorithm:
//  1. Initial plan: Search (Algorithm 1: training tree x rollout DP, search.h) over the startup
//     length profile; the best predicted steady-state step time wins.
//  2. After each step (online only): the step's trajectories join the length history (FIFO);
//     calibration compares the measured rollout and training times with the model's prediction
//     for the layout in force (EWMA with change-point reset, calibrator.h).
//  3. Triggers, in order: a transition under way, warmup or cooldown -> no look; every
//     `interval` steps ("interval"); asynchronous pipelines whose trainer waited for rollout more
//     than (`imbalance` - 1) x its train + sync time over the last three steps ("imbalance"),
//     unless a decision already kept the layout under that imbalance (it asks again once the
//     imbalance has cleared, or after a move; the interval trigger still looks);
//     waiting turns per trajectory in flight
//     >= `queue_pressure` ("queue_pressure"); `rejected_delta` more stale rejections
//     ("rejected"); the step's mean trajectory length off the history mean by more than `drift`
//     ("drift"). No trigger: no decision.
//  4. Candidates: the search's best (training TP and PP fixed to the current ones unless
//     `reshard`, so training changes by whole replicas), and the elastic moves: the current
//     layout with k = 1..`max_replica_moves` replicas moved from rollout to training (the last
//     instances leave) or back (new instances at the end).
//  5. Transition rule: a candidate is applied only when its net gain, (current - candidate
//     predicted step time) x remaining steps - transition cost, is positive and the per-step gain
//     is at least `min_gain` of the current step time. The best net gain wins.
// Knobs: see GrpOptions; every decision is recorded with its trigger and predicted times.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/calibrator.h"
#include "planner/planner.h"
#include "planner/search.h"

namespace libra::planner {

inline constexpr std::string_view kGrpName = "grp";
inline constexpr std::string_view kNoEhpName = "no-ehp";

struct GrpOptions {
  SearchMode mode = SearchMode::kTreeDp;
  /// Re-plan while the run goes on (false: "no-ehp", plan once).
  bool online = true;
  int interval = 5;
  int warmup = 1;
  int cooldown = 2;
  double imbalance = 1.25;
  double queue_pressure = 0.75;
  int rejected_delta = 8;
  double drift = 0.25;
  /// Above the model's own error: `libra plan --check` finds step predictions off by up to 10%
  /// between layouts, and moves made on 2.7-3.6% predicted gains lost (docs/planner.md).
  double min_gain = 0.05;
  int max_replica_moves = 4;
  bool reshard = false;
  bool calibrate = true;
  int history = 4096;
  /// The search space's constraints (search.h): allowed rollout TPs, an optional per-node
  /// pattern, bounds and granularity of the training side.
  std::vector<int> rollout_tps = {1, 2, 4, 8};
  std::vector<int> rollout_pattern;
  /// Every rollout instance has one TP size: the initial plan searches each allowed size alone
  /// and ranks their plans together (RankPlans); re-planning keeps that size
  /// ("libra-homogeneous").
  bool homogeneous = false;
  /// Consider the time-shared layout (every GPU rolls out, then trains) at the start.
  bool time_shared = true;
  /// Consider lending the waiting trainer's GPUs to rollout (the hybrid layout) at the start.
  bool hybrid = true;
  int min_train_gpus = 1;
  int max_train_gpus = 0;
  int min_rollout_gpus = 1;
  int granularity = 1;
  std::optional<int> train_gpus;
  /// Requests of the history the rollout model samples (search.h; at most 10 for "exhaustive").
  int max_requests = 64;
};

/// The backend layout of a searched plan (time-shared when the plan is).
Result<backend::Layout> LayoutOf(const CandidatePlan& plan, int gpus_per_node);

class GrpPlanner : public Planner {
 public:
  static Result<std::unique_ptr<Planner>> Create(const recipe::OptionTable& options);
  static Result<std::unique_ptr<Planner>> CreateNoEhp(const recipe::OptionTable& options);
  GrpPlanner(GrpOptions options, std::string_view name);

  std::string_view Name() const override { return name_; }
  Result<Plan> Initial(const PlanContext& context) override;
  std::optional<PlanDecision> OnStep(const StepObservation& observation) override;
  /// When the plan is hybrid: the training GPUs as instances of the largest rollout TP.
  std::optional<backend::Layout> IdleTrainerLayout(const backend::Layout& current) const override;

  const GrpOptions& options() const { return options_; }
  /// After Initial: the search over the current history (every budget's best in `top`), and the
  /// model's calibrated prediction of any layout (nullopt when infeasible). For `libra plan
  /// --check` and the regret benchmark.
  Result<SearchResult> SearchNow() const;
  /// `lend_trainer`: whether the waiting trainer's GPUs roll out (default: as the plan does).
  std::optional<CandidatePlan> Predict(const backend::Layout& layout,
                                       std::optional<bool> lend_trainer = std::nullopt) const;
  double rollout_factor() const { return rollout_cal_.factor(); }
  double train_factor() const { return train_cal_.factor(); }

 private:
  struct RecentStep {
    double step_s = 0;
    double wait_s = 0;
    double train_s = 0;
    double sync_s = 0;
  };
  SearchSpace Space(bool online, const model::TrainLayout* current) const;
  PipelineShape Shape() const;
  std::vector<RequestSample> History() const;
  /// Calibrated prediction of a layout on the history; nullopt when infeasible.
  /// `credit_pace` false: without the unsaturated regime at the trainer's pace (a move's target).
  /// `stream`: with the stream replay (stream_groups_; the plan's own prediction only).
  std::optional<CandidatePlan> Predict(const backend::Layout& layout,
                                       std::span<const RequestSample> history,
                                       std::optional<bool> lend_trainer = std::nullopt,
                                       bool credit_pace = true, bool stream = false) const;
  double TransitionSeconds(const backend::Layout& from, const backend::Layout& to,
                           std::span<const RequestSample> history) const;
  /// Stream batches: the search's best and the candidates shown beside it (the first
  /// kShownCandidates of `top`, in the search's order) predicted again with the stream replay
  /// (stream_model.h). The search, and the online decisions, rank layouts by the ordered model:
  /// ranking or moving by the replay gained nothing beyond the seeds' spread, and online it moved
  /// the drift recipe back and forth (docs/planner.md, "Stream batches").
  void StreamPredictions(std::span<const RequestSample> history, SearchResult& result) const;
  /// `imbalanced`: the trainer waited for rollout beyond the imbalance trigger's bound.
  std::optional<std::string> Trigger(const StepObservation& observation, bool imbalanced);
  /// Whether, over recent_, the trainer waited for rollout beyond the imbalance trigger's bound.
  bool Imbalanced() const;
  /// Whether the last three steps (recent_) all came after the pipeline filled: after the first
  /// staleness + 1, whose batches start together and end close together.
  bool Filled(const StepObservation& o) const;
  /// The mean of `field` over recent_.
  double MeanRecent(double RecentStep::*field) const;
  /// Folds a step's measured train and rollout times into the calibration factors.
  void Calibrate(const StepObservation& observation, std::span<const RequestSample> step);
  /// Adds the lengths of what the step generated (trained or rejected) and its tool latencies to
  /// the history; whether those lengths drifted (the history then starts again from them).
  bool ObserveLengths(const StepObservation& observation);
  PlanDecision Decide(const StepObservation& observation, std::string trigger);
  /// A layout to move to, its net gain over the remaining steps, predicted step and transition.
  struct Move {
    backend::Layout layout;
    double gain_s = 0;
    double step_s = 0;
    double transition_s = 0;
  };
  /// The candidate (an elastic move or the search's best) with the largest net gain; nullopt when
  /// none is feasible. `note` gets why the search failed, when it did.
  std::optional<Move> BestMove(const backend::Layout& layout, const CandidatePlan& current,
                               std::span<const RequestSample> history, int remaining,
                               std::string* note) const;
  std::vector<backend::Layout> ElasticMoves(const backend::Layout& current) const;

  GrpOptions options_;
  std::string_view name_;
  PlanContext context_;
  std::deque<RequestSample> history_;
  /// The latencies of recent tool calls (the startup profile's, then the run's), at most
  /// kToolLatencies.
  static constexpr int kToolLatencies = 4096;
  mutable ToolLatencyWindow tool_latencies_{kToolLatencies};
  Calibrator rollout_cal_;
  Calibrator train_cal_;
  int last_change_step_ = -1000000;
  /// Whether the plan lends the waiting trainer's GPUs to rollout.
  bool lend_trainer_ = false;
  /// The homogeneous plan's TP size, once chosen.
  std::optional<int> homogeneous_tp_;
  /// Stream batches: the startup profile's whole groups, for the plan's own prediction
  /// (PipelineShape::stream_groups).
  std::shared_ptr<const std::vector<TrajectorySize>> stream_groups_;
  std::deque<RecentStep> recent_;  // the last three steps
  int64_t last_rejected_ = 0;
  /// A decision kept the layout while the trainer waited for rollout, and it has waited since.
  bool imbalance_answered_ = false;
  /// A look on the rejected trigger kept the layout: rejections ask again only after a move.
  bool rejections_answered_ = false;
};

}  // namespace libra::planner
