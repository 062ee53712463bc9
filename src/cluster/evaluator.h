// Evaluator: a policy version's evaluation score measured by the rollout engines
// (backend::Evaluate). Each held-out prompt runs as one whole trajectory (turns, tool calls, the
// reward command) through the run's TurnRunner, spread round-robin over the instances that
// serve; the score is the mean reward. Prompt i is sampled with the same seeds at every
// evaluation, so two versions (or two systems with the same seed) differ by their weights, not
// by their luck.
//
// It sits in front of the backend's event sink: the events of its own trajectories (ids from
// kFirstEvalTrajectory + the prompt's index) are its, everything else passes on. A turn that
// fails (its engine died, slept or was stopped, or it failed every retry) runs again on another
// instance after a backoff ([engine] retry_backoff_s, doubling), up to kMaxEvalTurnFailures
// times; after that, as when the reward command fails, the run fails: a missing score would bias
// the comparison it is for.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "cluster/engine_supervisor.h"
#include "cluster/runtime.h"
#include "cluster/turn_runner.h"

namespace libra::cluster {

/// Failed turns of one evaluation prompt before the run fails.
inline constexpr int kMaxEvalTurnFailures = 8;

class Evaluator final : public EventSink {
 public:
  /// `next` gets every event that is not an evaluation's. REQUIRES: everything passed in
  /// outlives the evaluator, and `turns` reports through a sink that leads here.
  Evaluator(Runtime& runtime, EngineSupervisor& engines, TurnRunner& turns, EventSink& next);
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  static bool Owns(TrajectoryId id) { return id.value >= kFirstEvalTrajectory; }

  /// Runs every prompt of `evaluate` on the engines as they are; `done` gets the mean reward.
  /// REQUIRES: !busy().
  void Run(const backend::Evaluate& evaluate, std::function<void(double score)> done);
  bool busy() const { return active_.has_value(); }

  // EventSink.
  void Emit(backend::EventWhat what, bool completes) override;
  void Fail(Status error) override;

 private:
  struct Active {
    int version = 0;
    std::vector<int64_t> prompts;
    std::vector<int> turn;  // per prompt: the next turn
    size_t remaining = 0;
    double reward_sum = 0;
    std::function<void(double)> done;
  };

  void StartTurn(size_t index, InstanceId instance);
  /// On NextInstance(); the run fails when no engine serves.
  void StartTurnAnywhere(size_t index);
  /// The next instance whose engine serves (ready ones first); nullopt when none does.
  std::optional<InstanceId> NextInstance();
  void OnTurnFailed(const backend::TurnFailed& failed);

  Runtime& runtime_;
  EngineSupervisor& engines_;
  TurnRunner& turns_;
  EventSink& next_;
  std::optional<Active> active_;
  std::vector<int> failures_;  // per prompt of the evaluation in flight
  size_t cursor_ = 0;          // round-robin over instances
};

}  // namespace libra::cluster
