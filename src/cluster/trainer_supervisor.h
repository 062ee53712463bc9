// TrainerSupervisor: the trainer's lifecycle. It makes the initial weights once when the recipe
// has a prepare_command, starts the trainer through its node's launcher from a checkpoint and
// waits for its health check, sets its data-parallel replicas (the planner lends the trainer's
// GPUs to rollout and takes them back), and watches it: a trainer that exits is restarted from
// the checkpoint of the version it held, up to [trainer] restarts times, takes its replicas again
// and is sent the job it was doing (a train step, a sync) again. Every fault and restart is an
// Incident of the run.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/async.h"
#include "cluster/runtime.h"
#include "cluster/trainer_client.h"

namespace libra::cluster {

class TrainerSupervisor {
 public:
  /// With `start_version` > 0 (a resumed run) the trainer starts from that version's checkpoint.
  /// REQUIRES: `runtime` outlives the supervisor.
  TrainerSupervisor(Runtime& runtime, int start_version);
  TrainerSupervisor(const TrainerSupervisor&) = delete;
  TrainerSupervisor& operator=(const TrainerSupervisor&) = delete;

  /// Runs the prepare_command when the initial weights are missing, then starts the trainer.
  /// Failures end the run.
  void Start();
  /// Runs `then` once the trainer serves (at once when it does). While a restarted trainer
  /// takes its replicas again, `then` is dropped: the restart sends the job again when it is done,
  /// and a second copy of the job's requests would race the first.
  void WhenReady(std::function<void()> then);
  bool ready() const { return ready_; }
  /// The client of the trainer running now. REQUIRES: Start() was called.
  const TrainerClient& client() const { return *client_; }

  /// Makes `replicas` data-parallel replicas ("replica-0" .. "replica-<n-1>") members, by joins
  /// or leaves, once the trainer serves; with `announce`, a change is a "switch" incident. A
  /// request that gets no reply fails (after a moment) unless the trainer has died meanwhile:
  /// then `done` never runs, and the job is sent again after the restart.
  void SetReplicas(int replicas, bool announce, Done done);
  int replicas() const { return replicas_; }
  /// The replicas a restarted trainer takes again: the current layout's.
  void set_layout_replicas(int replicas) {
    layout_replicas_ = replicas;
    layout_known_ = true;
  }

  /// The job the trainer is doing (a train step, a sync), sent again after a restart; cleared
  /// by EndJob once it is done.
  void SetJob(std::function<void()> job) { job_ = std::move(job); }
  void EndJob() { job_ = nullptr; }
  /// A request of the job got no reply: the run fails unless the trainer has died (then it is
  /// restarted and the job sent again).
  void RequestFailed(Status error);

  /// The version the trainer holds, and the checkpoint it holds it in.
  int version() const { return version_; }
  const std::string& checkpoint() const { return checkpoint_; }
  void Checkpointed(int version, std::string path) {
    version_ = version;
    checkpoint_ = std::move(path);
  }

  std::optional<pid_t> Pid() const;
  /// Called when the trainer dies (a weight-update group that holds it must be set up again).
  void set_on_lost(std::function<void()> on_lost) { on_lost_ = std::move(on_lost); }

 private:
  void Launch();
  /// SetReplicas' requests; `no_reply` is set when one got no reply at all.
  void Members(int replicas, bool announce, std::shared_ptr<bool> no_reply, Done done);
  /// SetReplicas on a trainer that serves now.
  void SendReplicas(int replicas, bool announce, Done done);
  void OnExit(const ExitStatus& status);
  std::string ProcessName() const;

  Runtime& runtime_;
  std::optional<TrainerClient> client_;
  std::optional<ProcessId> process_;
  bool ready_ = false;
  bool stopping_ = false;
  /// From the trainer's exit until its restart has sent the job again.
  bool restarting_ = false;
  int restarts_ = 0;
  int version_ = 0;
  std::string checkpoint_;
  /// Data-parallel replicas joined ("replica-0" is its own).
  int replicas_ = 1;
  int layout_replicas_ = 1;
  /// A layout has been applied (before, a change of replicas is no switch).
  bool layout_known_ = false;
  std::vector<std::function<void()>> on_ready_;
  std::function<void()> job_;
  std::function<void()> on_lost_;
};

}  // namespace libra::cluster
