// ClusterBackend: the coordinator's actions carried out by real processes (backend = "cluster").
// Rollout engines (vLLM or SGLang, or workers/rollout_server.py on CPU) and a trainer speaking
// libra's trainer protocol are started through the recipe's launcher (local or ssh) from command
// templates; turns are generated over the engines' HTTP APIs, tools and rewards run as sandboxed
// subprocesses, training steps and weight syncs go to the trainer. Everything runs on one event
// loop (cluster/event_loop.h): child processes, timers and every HTTP request in one epoll wait,
// no thread per request.
//
// * Token ids travel end to end: each trajectory's transcript (prompt ids, then the engine's
//   tokens with their logprobs and the tool's tokens, with a loss mask) is kept here, sent as is
//   to the next turn and to the trainer; nothing is re-tokenised.
// * Layouts are applied for real: an instance that leaves rollout is put to sleep (its engine
//   releases its GPU memory) and a trainer replica joins; the reverse wakes the engine (or starts
//   one of the new TP size) and loads the current weights before it serves.
// * Weight sync: "disk" (the trainer saves, every engine reloads) or "distributed" (the trainer
//   broadcasts to the engines in a process group libra sets up; ranks as in ecosystem.md §3).
//   The synced weights are also kept on disk (weights/policy.pt) for engines that start or wake
//   later, and the trainer checkpoints every version (weights/v<k>.pt) so it can be restarted.
// * Faults: an engine that dies fails its turns in flight back to the coordinator (which routes
//   them again: nothing of a failed turn is kept), is reported down, and is restarted up to
//   [engine] restarts times, then dropped. A trainer that dies is restarted from its last
//   checkpoint and the step in flight is sent again. Every fault is an Incident in the record.
// * SIGINT / SIGTERM end Wait() with kInterrupted; the destructor stops every process it
//   started, on every host.
//
// It is the composition of its parts, each in its own file: EngineSupervisor (engines'
// lifecycle, health, restarts), TrainerSupervisor (the trainer's), AssignEngines (which engine
// serves each instance of a new layout; pure), TurnRunner (turns, tools, rewards), Evaluator
// (held-out prompts scored on the engines) and WeightSync.
// What stays here: the actions' order (a layout: replicas, then engines; a colocated step: the
// engines sleep, the trainer trains, the engines wake).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cluster/cluster_options.h"
#include "cluster/engine_supervisor.h"
#include "cluster/evaluator.h"
#include "cluster/event_loop.h"
#include "cluster/http_transport.h"
#include "cluster/launcher.h"
#include "cluster/process.h"
#include "cluster/runtime.h"
#include "cluster/sandbox.h"
#include "cluster/trainer_supervisor.h"
#include "cluster/turn_runner.h"
#include "cluster/weight_sync.h"
#include "recipe/recipe.h"

namespace libra::cluster {

class ClusterBackend final : public backend::Backend, private EventSink {
 public:
  /// Sets up the loop, the launchers (ssh connections open lazily) and `run_dir` (logs/,
  /// weights/); starts nothing yet (the first ApplyLayout does). With `start_version`
  /// > 0 (a resumed run) the trainer starts from that version's checkpoint in `run_dir`.
  static Result<std::unique_ptr<ClusterBackend>> Create(const recipe::Recipe& recipe,
                                                        ClusterOptions options, std::string run_dir,
                                                        int start_version = 0);
  /// What tests may give instead of what the recipe says: the launchers (one per node), and the
  /// loop (on which a test runs servers of its own). Empty members are made as usual.
  struct Overrides {
    std::vector<std::unique_ptr<Launcher>> launchers;
    std::unique_ptr<EventLoop> loop;
  };
  static Result<std::unique_ptr<ClusterBackend>> Create(const recipe::Recipe& recipe,
                                                        ClusterOptions options, std::string run_dir,
                                                        int start_version, Overrides overrides);
  /// Stops every process it started, on every host.
  ~ClusterBackend() override;
  ClusterBackend(const ClusterBackend&) = delete;
  ClusterBackend& operator=(const ClusterBackend&) = delete;

  std::string_view Name() const override { return "cluster"; }
  /// Evaluations run on the engines: held-out prompts through turns, tools and the reward
  /// command (cluster/evaluator.h). A sync waits for the evaluation in flight, so that every
  /// score is of the version it is recorded for.
  bool ScoresEvaluations() const override { return true; }
  Status Submit(const backend::Action& action) override;
  Result<std::vector<backend::Event>> Wait() override;

  /// The engine process serving `instance`, for tests that kill it; nullopt when none runs.
  std::optional<pid_t> EnginePid(InstanceId instance) const;
  std::optional<pid_t> TrainerPid() const;
  const std::string& run_dir() const { return runtime_.run_dir; }

 private:
  ClusterBackend(const recipe::Recipe& recipe, ClusterOptions options, std::string run_dir,
                 int start_version);

  // EventSink.
  void Emit(backend::EventWhat what, bool completes) override;
  void Fail(Status error) override;

  void ApplyLayout(const backend::Layout& layout);
  /// Applies `layout` once the trainer serves: replicas that leave, engines, replicas that join.
  void Relayout(const backend::Layout& layout);
  /// Which engine serves each instance, and the sleeps, stops, wakes and starts that takes.
  void ApplyEngines(const backend::Layout& layout, Done done);
  /// Probes the first engine's capabilities (engine_probe.h); the run stops when the recipe
  /// needs one it lacks.
  void ProbeCapabilities(Done done);
  /// The layout is in place: LayoutApplied, and instances without an engine are down.
  void LayoutDone();
  void Train(const backend::Train& train);
  void SendTrainStep(std::shared_ptr<TrainStepRequest> request, double started_at);
  /// After a colocated train step: every engine takes turns again, the sleeping ones woken.
  void WakeColocated(Done done);
  /// Why the run must stop after this train step (the trainer's and the engines'
  /// log-probabilities diverged past the recipe's thresholds), or "".
  std::string Diverged(const TrainStepResult& result) const;
  void Sync(const backend::SyncWeights& sync);
  /// Has every serving engine load `version` (from the trainer), then `then`.
  void LoadVersion(int version, std::function<void()> then);
  void Evaluate(const backend::Evaluate& evaluate);
  /// After an evaluation: the next queued one, else the syncs that waited for it.
  void AfterEvaluation();

  recipe::Recipe recipe_;
  ClusterOptions options_;
  int start_version_ = 0;
  /// The sandboxes' working folders (on tmpfs when there is one); removed at the end.
  std::string scratch_dir_;
  Runtime runtime_;

  std::unique_ptr<EventLoop> loop_;
  std::vector<std::unique_ptr<Launcher>> launchers_;
  std::unique_ptr<ProcessSet> processes_;
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<ShutdownSignals> signals_;
  WeightVersions versions_;
  std::unique_ptr<EngineSupervisor> engines_;
  std::unique_ptr<TrainerSupervisor> trainer_;
  std::unique_ptr<WeightSync> sync_;
  std::unique_ptr<TurnRunner> turns_;
  std::unique_ptr<Evaluator> evaluator_;
  /// Evaluations waiting for the first layout or for the one in flight, and the syncs waiting
  /// for them (in order).
  std::deque<backend::Evaluate> queued_evals_;
  std::vector<backend::SyncWeights> waiting_syncs_;
  bool layout_applied_ = false;

  backend::Layout layout_;
  bool started_ = false;
  /// Counts layout applications; a continuation of an older one (sent again after a trainer
  /// restart) stops.
  uint64_t layout_attempt_ = 0;
  /// weight_sync = "none" said so once.
  bool warned_no_sync_ = false;
  std::vector<backend::Event> ready_;
  /// Actions submitted and not yet completed.
  int64_t in_flight_ = 0;
  Status fatal_;
  int signal_ = 0;
};

}  // namespace libra::cluster
