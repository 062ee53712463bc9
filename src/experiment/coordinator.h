// Coordinator: the RL pipeline as an event-driven state machine. It samples prompts in GRPO groups,
// asks the router where every turn goes, runs tools, forms each step's batch from complete groups,
// trains, syncs weights and records every step; all by submitting actions to a Backend and reacting
// to its events. It never reads a clock (time arrives with the events), so the same code runs in
// virtual time under the simulator and in real time on a cluster.
//
// Pipeline rules:
// * prompts are launched in dataset order, each as a GRPO group of n samples; with P prompts per
//   step, at most (v + staleness + 1) * P groups are launched (not counting rejected ones) while
//   the rollout instances hold weights of version v (staleness 0: synchronous, rollout then
//   train);
// * step k's batch is P complete groups: with "ordered" batching the prompts k*P .. k*P+P-1
//   (no sample can then lag more than the bound); with "stream" batching the first P groups to
//   complete, whatever their prompts, and a group whose oldest sample would lag more than the
//   bound is rejected (dropped untrained, logged as a "reject" event) and replaced by a new one;
// * a sample's lag is the training step minus the version of its first turn; with partial
//   rollout, turns after a weight sync run on the new weights, and the modelled learning value
//   weights each turn's tokens by their own lag;
// * advantages are group-normalised, (r - mean) / (std + eps) within each group; a group whose
//   rewards are all equal has no learning signal, and the skill model counts its samples as 0;
// * step k trains when its batch is complete and step k-1 has finished (its sync too);
// * after train step k the trainer holds version k+1; it is synced to the rollout instances every
//   sync_interval steps (and not after the last step);
// * the modelled skill of version k+1 (workload::SkillModel) grows with the samples step k
//   consumed, discounted by their policy lag; simulated backends draw rewards from it;
// * after every step the planner may ask for another layout: the instances that leave rollout
//   stop taking turns (their trajectories' next turns go elsewhere), and once they are idle the
//   new layout is applied between training steps (planner::ElasticPool); no trajectory is lost;
// * when the trainer has to wait for its batch, a planner may lend its GPUs to rollout
//   (Planner::IdleTrainerLayout, "lend" event); once the batch is ready they are drained and
//   taken back ("reclaim" event) before the step trains.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "common/id_table.h"
#include "planner/elastic_pool.h"
#include "planner/planner.h"
#include "records/records.h"
#include "sched/instance_index.h"
#include "sched/router.h"
#include "workload/skill.h"
#include "workload/workload.h"

namespace libra::experiment {

/// Receives what a run produces, as it goes (the store, or memory in tests).
class Recorder {
 public:
  virtual ~Recorder() = default;
  /// One finished step with the trajectories it trained on (and their turns), the events since
  /// the last step and the planner decisions since the last step.
  virtual Status RecordStep(const records::StepBatch& batch) = 0;
  /// Whether RecordStep reads StepBatch::turns. One that does not spares the run a row for every
  /// turn (a simulation whose outcome is only its summary: tuning trials, plan checks).
  virtual bool KeepsTurns() const { return true; }
  /// A measured evaluation score of policy `version` (a backend that ScoresEvaluations), which
  /// arrives after its step was recorded: version 0 is the run's initial score. Recorders that
  /// keep no evaluations ignore it.
  virtual Status RecordEval(int /*version*/, double /*score*/) { return Status(); }
};

/// Where a run is, reported after every step.
struct Progress {
  int steps_done = 0;
  int steps_total = 0;
  double now_s = 0;
  int64_t trajectories = 0;  // trained so far
  int64_t generated_tokens = 0;
  /// The step that just finished, as recorded; valid during the call.
  const records::StepRecord* step = nullptr;
  /// The run being recorded (set by RunSystem).
  int64_t run_id = 0;
};

/// Where a resumed run continues (a backend that restarts from a checkpoint, not by replaying):
/// the steps already recorded, and the counters that keep its records unique and in order.
struct ResumeState {
  int steps_done = 0;
  /// When the last recorded step ended; the resumed run's times continue from there.
  double elapsed_s = 0;
  /// Trajectories those steps trained (the run's count continues from there).
  int64_t trajectories = 0;
  /// The first prompt not yet launched, and the next trajectory, event and decision ids.
  int64_t next_prompt = 0;
  int64_t next_trajectory = 0;
  int64_t next_event_seq = 0;
  int64_t next_decision_seq = 0;
};

struct CoordinatorConfig {
  int steps = 1;
  int prompts_per_step = 1;
  int group_size = 1;
  int staleness = 0;
  int sync_interval = 1;
  /// Batches of the first P groups to complete ("stream") instead of prompts in order.
  bool stream_batches = false;
  /// Turns after a weight sync run on the new weights.
  bool partial_rollout = false;
  /// The trainer's loss: what a stale sample is worth to the modelled skill.
  workload::Objective objective = workload::Objective::kPpo;
  /// Evaluate every this many versions on this many held-out prompts (StepRecord::eval_score).
  int eval_interval = 1;
  int eval_prompts = 256;
  /// What the planner plans for.
  planner::PlanContext plan;
  /// Record a span per turn and per tool call (the timeline's detail). Default: false.
  bool record_events = false;
  /// The fewest GPU-seconds a trajectory of this size can cost to generate and train on this
  /// cluster and model (TrajectoryFloorGpuSeconds in runner.h). When set, a run whose trained
  /// trajectories need more GPU-seconds than the cluster has had since the run (or its
  /// resumption) began fails: the simulator or the cost model is wrong. Priced trajectory by
  /// trajectory, the check holds whichever trajectories a batch takes (a stream batch trains the
  /// first, shortest, to finish) and however the workload drifts.
  std::function<double(const planner::TrajectorySize&)> trajectory_floor_gpu_s;
  /// Continue a recorded run at step resume->steps_done with the weights of that version.
  std::optional<ResumeState> resume;
};

/// Totals of a finished run.
struct RunSummary {
  int steps = 0;
  double elapsed_s = 0;
  /// Trained (a group dropped for lag, or finished after the last step, is not).
  int64_t trajectories = 0;
  int64_t turns = 0;
  int64_t generated_tokens = 0;
  /// Groups dropped for exceeding the staleness bound (stream batching only).
  int64_t rejected_groups = 0;
};

/// The id of held-out evaluation prompt `index` (from 0): 2^41 + index, a prompt no run trains on
/// (a real backend's prompt command gets it as {prompt}).
int64_t HeldOutPrompt(int index);
/// The difficulties of the held-out evaluation prompts: `count` prompts no run trains on.
std::vector<double> HeldOutDifficulties(const workload::Workload& workload, int count);

/// Group-normalised advantages: (r - mean) / (std + 1e-6) within each run of `group_size`
/// consecutive rewards (population std). REQUIRES: rewards.size() is a multiple of group_size.
std::vector<double> GroupAdvantages(const std::vector<double>& rewards, int group_size);

class Coordinator {
 public:
  /// Everything passed in must outlive the coordinator.
  Coordinator(const CoordinatorConfig& config, const workload::Workload& workload,
              sched::Router& router, planner::Planner& planner, backend::Backend& backend,
              Recorder& recorder);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  /// Runs every step. `interrupted` is polled between events (kInterrupted when it returns
  /// true); `progress` is called after every recorded step. Either may be empty.
  Result<RunSummary> Run(const std::function<bool()>& interrupted,
                         const std::function<void(const Progress&)>& progress);

 private:
  /// One finished turn of a trajectory in flight, as typed values; it becomes a row
  /// (records::TurnRecord) when its trajectory joins its batch.
  struct Turn {
    int64_t instance = 0;
    double start_s = 0;
    double end_s = 0;
    int64_t generated_tokens = 0;
    workload::TurnEnd end = workload::TurnEnd::kStop;
    std::string tool;                                 // "" unless end is kToolCall
    std::optional<workload::ToolStatus> tool_status;  // once its tool returned
    int64_t tool_output_tokens = 0;
    double tool_latency_s = 0;
  };
  struct Trajectory {
    TrajectoryId id;
    int64_t prompt = 0;
    int sample = 0;
    int step = 0;               // the step its prompt belongs to in dataset order
    int version = -1;           // of its first turn
    int turn_version = -1;      // of the turn in flight
    double version_tokens = 0;  // sum over turns of version x generated tokens
    int turns = 0;
    int tool_calls = 0;
    int64_t prompt_tokens = 0;
    int64_t context_tokens = 0;
    int64_t generated_tokens = 0;
    double start_s = -1;
    InstanceId instance;
    std::vector<int64_t> path;
    std::optional<sched::ToolObservation> last_tool;
    std::vector<Turn> turns_done;
    /// All the tokens it will generate, when the router wants the backend's oracle.
    std::optional<int64_t> oracle_tokens;
  };
  /// The samples of one prompt, and then a step's batch (its groups, appended).
  struct Batch {
    int remaining = 0;
    int oldest_version = std::numeric_limits<int>::max();
    std::vector<records::TrajectoryRecord> done;
    std::vector<records::TurnRecord> turns;  // empty unless the recorder keeps turns
    std::vector<double> tool_latencies_s;    // of the turns that called a tool, in order
    std::vector<int64_t> sequence_tokens;
    std::vector<planner::TrajectorySize> sizes;
    std::vector<double> mean_versions;  // per sample, token-weighted
    double rollout_start = std::numeric_limits<double>::infinity();
    double rollout_end = 0;

    void Reserve(size_t trajectories, size_t turn_records, size_t tool_calls);
    void Append(Batch&& group);
  };

  Status Handle(const backend::Event& event);
  Status OnLayout(double now);
  Status OnTurnDone(double now, const backend::TurnDone& done);
  /// `t`'s last turn is done: it joins its group (and leaves live_).
  Status OnTrajectoryDone(double now, Trajectory& t, const backend::TurnDone& done);
  static records::TrajectoryRecord RecordOf(const Trajectory& t, double now,
                                            const backend::TurnDone& done);
  static sched::TrajectoryObservation ObservationOf(const Trajectory& t, bool truncated);
  /// The row of turn `index` of trajectory `trajectory` (its tool name moved out of `turn`).
  static records::TurnRecord RowOf(int64_t trajectory, int index, Turn& turn);
  Status OnToolDone(double now, const backend::ToolDone& done);
  Status OnTurnFailed(double now, const backend::TurnFailed& failed);
  Status OnInstanceHealth(double now, const backend::InstanceHealth& health);
  Status OnTrainDone(double now, const backend::TrainDone& done);
  Status OnSyncDone(double now, const backend::SyncDone& done);
  Status OnEvalDone(double now, const backend::EvalDone& done);
  /// On a backend that ScoresEvaluations: evaluates `version` when it is due (every eval
  /// interval among the versions the engines hold, and the last).
  Status SubmitEvaluation(int version);
  /// The instance with this id; null when the layout has none.
  sched::InstanceState* FindInstance(InstanceId id);
  /// Tells index_ that `instance` (an element of instances_) changed.
  void Changed(const sched::InstanceState& instance);
  /// Launches the rollouts of every step the weights allow.
  void Launch();
  /// Routes waiting turns, in order; those the router defers stay waiting.
  Status RouteWaiting(double now);
  /// Stream batching: drops the complete groups too stale for step `next_train_step_` and
  /// launches their replacements.
  Status RejectStale(double now);
  /// The batch of step `next_train_step_` when its groups are complete (stream batching: after
  /// RejectStale).
  std::optional<Batch> TakeBatch();
  /// The fraction of the next batch's groups that are complete (fresh enough to train), in [0, 1].
  double BatchComplete() const;
  /// The groups of `step` every trajectory of which is done (ordered batching).
  size_t CompleteInStep(int step) const;
  /// Lends the waiting trainer's GPUs to rollout, when the planner wants it.
  Status Lend(double now);
  /// Starts taking the lent GPUs back (the batch is ready).
  Status Reclaim(double now);
  Status TryTrain(double now);
  /// Asks the planner after a step and starts the transition it wants.
  Status Replan(double now, const records::StepRecord& step,
                std::vector<planner::TrajectorySize> sizes, std::vector<double> tool_latencies_s);
  /// Applies a draining transition once its instances are idle at a step boundary.
  Status AdvanceTransition(double now);
  Status FinishStep(double now, double sync_s);
  /// The record of the step that ends now (its logprob and clip statistics are taken; the
  /// utilisation mark moves on).
  records::StepRecord TakeStepRecord(const Batch& batch, double now, double sync_s);
  /// The group of `prompt`. REQUIRES: launched and not yet trained or rejected.
  Batch& GroupOf(int64_t prompt);
  const Batch& GroupOf(int64_t prompt) const;
  /// A time the backend reported (an event's started_at) on the run's clock: a resumed run's
  /// backend counts from its own start.
  double Shifted(double backend_time) const { return backend_time + time_offset_; }
  void AddEvent(const char* kind, double start, double end, const std::string& resource,
                std::optional<int64_t> trajectory, int step, const std::string& detail);

  CoordinatorConfig config_;
  const workload::Workload& workload_;
  sched::Router& router_;
  planner::Planner& planner_;
  backend::Backend& backend_;
  Recorder& recorder_;

  backend::Layout layout_;
  std::optional<planner::ElasticPool> pool_;
  std::optional<double> predicted_step_s_;  // the planner's prediction for the running step
  double relayout_start_ = 0;               // when the transition being applied was submitted
  std::vector<sched::InstanceState> instances_;
  sched::InstanceIndex index_;  // over instances_, for the router
  IdTable<TrajectoryIdTag, Trajectory> live_;
  std::deque<TrajectoryId> waiting_;
  IdTable<PromptIdTag, Batch> groups_;  // by prompt, until trained or rejected
  std::deque<int64_t> complete_;        // complete groups in completion order (stream batching)
  size_t fresh_groups_ = 0;             // the first of complete_, within staleness at fresh_step_
  int fresh_step_ = -1;
  std::vector<int> complete_in_step_;         // complete groups per step (ordered batching)
  std::optional<Batch> training_;             // the batch of the step in training
  std::optional<backend::Layout> lent_from_;  // the layout to return to while GPUs are lent
  bool reclaiming_ = false;
  int reclaimed_step_ = -1;  // the step whose batch the lent GPUs were last taken back for
  int64_t next_trajectory_ = 0;
  int64_t next_prompt_ = 0;
  int next_train_step_ = 0;
  int rollout_version_ = 0;
  bool trainer_busy_ = false;
  bool step_open_ = false;  // trained, waiting for its sync
  double trainer_free_since_ = 0;
  double step_start_ = 0;
  double train_start_ = 0;
  double train_s_ = 0;
  std::optional<double> logprob_diff_;  // of the step in training, from its TrainDone
  std::optional<double> clip_fraction_;
  double trained_floor_gpu_s_ = 0;           // trajectory_floor_gpu_s of those trained so far
  std::optional<double> rollout_busy_mark_;  // backend's rollout GPU-seconds at the last step
  int steps_done_ = 0;
  /// Added to the backend's event times (a resumed run continues its clock).
  double time_offset_ = 0;
  int64_t event_seq_ = 0;
  int64_t decision_seq_ = 0;
  /// The sizes of the groups rejected since the last observation: the planner's length history
  /// holds what was generated, not only what was trained.
  std::vector<planner::TrajectorySize> rejected_sizes_;
  std::vector<records::EventRecord> events_;
  std::vector<records::DecisionRecord> decisions_;
  /// Evaluations submitted and not yet done (a backend that ScoresEvaluations).
  int evals_pending_ = 0;
  workload::SkillModel skill_;
  std::vector<double> heldout_;  // difficulties of the held-out evaluation prompts
  RunSummary summary_;
  std::function<void(const Progress&)> progress_;
};

}  // namespace libra::experiment
