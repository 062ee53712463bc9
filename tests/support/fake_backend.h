// FakeBackend: a backend with fixed, round costs for tests of the coordinator: a turn takes
// seconds_per_token per generated token, a tool its scripted latency, a train step
// train_gpu_s_per_token per token over the training GPUs, a sync sync_s. No batching, no KV, no
// pauses: the coordinator's own timing logic shows through exactly.
#pragma once

#include <unordered_map>

#include "backend/backend.h"
#include "sim/event_queue.h"
#include "workload/workload.h"

namespace libra::test {

class FakeBackend : public backend::Backend {
 public:
  struct Costs {
    double seconds_per_token = 0.01;
    double train_gpu_s_per_token = 0.01;
    double sync_s = 1;
  };
  FakeBackend(const workload::Workload& workload, Costs costs)
      : workload_(workload), costs_(costs) {}

  std::string_view Name() const override { return "fake"; }
  Status Submit(const backend::Action& action) override;
  Result<std::vector<backend::Event>> Wait() override;

  /// What was submitted, for tests to inspect.
  std::vector<backend::StartTurn> turns_started;
  std::vector<backend::Train> trains;

 private:
  struct Trajectory {
    workload::TrajectoryScript script;
    int last_turn = -1;
  };
  const workload::Workload& workload_;
  Costs costs_;
  backend::Layout layout_;
  std::unordered_map<TrajectoryId, Trajectory> trajectories_;
  sim::EventQueue<backend::Event> queue_;
};

}  // namespace libra::test
