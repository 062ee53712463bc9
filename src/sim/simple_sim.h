// SimpleSim: the deliberately simple simulator backend. Fixed costs, no cost model:
//
// * a turn on a TP-t instance takes (prefill_tokens * prefill_s_per_token + generated_tokens *
//   decode_s_per_token) / t, where prefill_tokens is the whole context on a new instance and only
//   the tokens added since the trajectory's last turn on the same instance (prefix caching);
// * an instance runs up to max_batch_per_gpu * t turns at once, each at full speed; more wait in
//   its FIFO queue;
// * a tool call takes the latency the workload scripts for it; a train step takes
//   train_gpu_s_per_token * tokens / train_gpus;
// * a weight sync takes sync_s and pauses every instance (running turns finish that much later);
//   in a colocated layout a train step pauses them too.
//
// It plays the trajectories of the workload's scripts. The discrete-event simulator with the cost
// model replaces it (issue 5) behind the same Backend interface.
#pragma once

#include <deque>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "recipe/recipe.h"
#include "sim/event_queue.h"
#include "workload/workload.h"

namespace libra::sim {

class SimpleSim : public backend::Backend {
 public:
  /// `workload` must outlive the simulator.
  SimpleSim(const recipe::SimSpec& spec, const workload::Workload& workload);
  SimpleSim(const SimpleSim&) = delete;
  SimpleSim& operator=(const SimpleSim&) = delete;

  std::string_view Name() const override { return "sim"; }
  Status Submit(const backend::Action& action) override;
  Result<std::vector<backend::Event>> Wait() override;

 private:
  struct Instance {
    backend::InstanceSpec spec;
    int running = 0;
    std::deque<backend::StartTurn> queue;
  };
  struct Trajectory {
    workload::TrajectoryScript script;
    InstanceId last_instance;
    int64_t context_after_last_turn = 0;
    /// Index of the next turn to start.
    int next_turn = 0;
    /// Bumped whenever the pending TurnDone is rescheduled; stale entries are dropped.
    uint64_t generation = 0;
    double turn_end = 0;
    double turn_start = 0;
    bool running = false;
    /// Its last turn called a tool that has not been run yet.
    bool awaiting_tool = false;
  };
  /// What the queue holds: an event to emit, tagged for staleness checks.
  struct Pending {
    backend::Event event;
    uint64_t generation = 0;
  };

  Status StartOrQueue(const backend::StartTurn& turn);
  void Begin(Instance& instance, const backend::StartTurn& turn, double at);
  /// Pauses every instance for [now, now + duration): running turns end that much later.
  void PauseInstances(double duration);
  /// Starts queued turns on instances with free slots.
  void Drain(Instance& instance);

  recipe::SimSpec spec_;
  const workload::Workload& workload_;
  backend::Layout layout_;
  std::vector<Instance> instances_;
  std::unordered_map<TrajectoryId, Trajectory> trajectories_;
  EventQueue<Pending> queue_;
  double paused_until_ = 0;
};

}  // namespace libra::sim
