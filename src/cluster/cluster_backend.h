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
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cluster/cluster_options.h"
#include "cluster/event_loop.h"
#include "cluster/http_transport.h"
#include "cluster/launcher.h"
#include "cluster/process.h"
#include "cluster/sandbox.h"
#include "cluster/trainer_client.h"
#include "recipe/recipe.h"

namespace libra::cluster {

class ClusterBackend final : public backend::Backend {
 public:
  /// Sets up the loop, the launchers (ssh connections open lazily) and `run_dir` (logs/,
  /// weights/); starts nothing yet (the first ApplyLayout does). With `start_version`
  /// > 0 (a resumed run) the trainer starts from that version's checkpoint in `run_dir`.
  static Result<std::unique_ptr<ClusterBackend>> Create(const recipe::Recipe& recipe,
                                                        ClusterOptions options, std::string run_dir,
                                                        int start_version = 0);
  /// Stops every process it started, on every host.
  ~ClusterBackend() override;
  ClusterBackend(const ClusterBackend&) = delete;
  ClusterBackend& operator=(const ClusterBackend&) = delete;

  std::string_view Name() const override { return "cluster"; }
  Status Submit(const backend::Action& action) override;
  Result<std::vector<backend::Event>> Wait() override;

  /// The engine process serving `instance`, for tests that kill it; nullopt when none runs.
  std::optional<pid_t> EnginePid(InstanceId instance) const;
  std::optional<pid_t> TrainerPid() const;
  const std::string& run_dir() const { return run_dir_; }

 private:
  enum class EngineState { kStarting, kReady, kSleeping, kDead };
  struct Engine {
    int64_t key = 0;
    std::string name;
    /// Its process's name and logs: `name`, or `name`-r<k> after k restarts.
    std::string log_name;
    /// Its GPUs and TP; spec.id is its instance while in the layout.
    backend::InstanceSpec spec;
    bool in_layout = false;
    EngineState state = EngineState::kStarting;
    std::optional<EngineClient> client;
    std::optional<ProcessId> process;
    /// The weights' version it holds; -1 before it has loaded any.
    int weights = -1;
    int restarts = 0;
    /// Stopped on purpose: its exit is not a fault.
    bool stopping = false;
    /// Being started again after it died.
    bool restarting = false;
    /// Takes no new turn (a colocated train step is about to take its memory).
    bool paused = false;
    /// Turns that arrived while it was starting, waking or paused.
    std::vector<backend::StartTurn> queued;
    /// Continuations waiting for its last turn in flight to end.
    std::vector<std::function<void()>> on_idle;
    /// Turns in flight: trajectory -> attempt.
    std::map<TrajectoryId, uint64_t> turns;
    /// Continuations waiting for it to serve (OK) or to be dropped (the error).
    std::vector<std::function<void(Status)>> on_ready;
  };
  struct Trajectory {
    int64_t prompt = 0;
    int sample = 0;
    int turns = 0;
    std::vector<TokenId> prompt_ids;
    std::vector<TokenId> completion;
    std::vector<double> logprobs;
    std::vector<uint8_t> mask;
    /// The tokens of its last model turn (the tool call, or the answer).
    std::vector<TokenId> last_turn;
  };
  struct Prompt {
    bool loaded = false;
    std::vector<TokenId> ids;
    std::vector<std::function<void()>> waiters;
  };
  struct Trainer {
    std::optional<ProcessId> process;
    bool ready = false;
    bool stopping = false;
    int restarts = 0;
    /// The version it holds, and the checkpoint it holds it in.
    int version = 0;
    std::string checkpoint;
    /// Data-parallel replicas joined ("replica-0" is its own).
    int replicas = 1;
    std::vector<std::function<void()>> on_ready;
  };

  ClusterBackend(const recipe::Recipe& recipe, ClusterOptions options, std::string run_dir,
                 int start_version);

  double Now() const;
  /// Queues an event; `completes` ends one action in flight.
  void Emit(backend::EventWhat what, bool completes);
  /// Ends the run with `error` (the first one wins).
  void Fail(Status error);
  /// The values of every command template, plus `extra`.
  std::map<std::string, std::string> Values(std::map<std::string, std::string> extra) const;
  Result<ProcessSpec> MakeSpec(int node, const std::string& name, const CommandTemplate& command,
                               const std::map<std::string, std::string>& values,
                               std::map<std::string, std::string> env) const;
  std::string LogHint(const std::string& name) const;
  /// Runs `calls` at once; `then` gets the first error, or OK once all have answered.
  void All(std::vector<std::function<void(std::function<void(Status)>)>> calls,
           std::function<void(Status)> then);
  /// Sends `request`, parses the reply with `parse`; `done` gets the result.
  void Control(const HttpRequest& request, std::function<Status(const HttpResponse&)> parse,
               std::function<void(Status)> done);

  // Layout.
  void ApplyLayout(const backend::Layout& layout);
  void ApplyEngines(const backend::Layout& layout);
  void SetReplicas(int replicas, std::function<void(Status)> done);

  // Engines.
  Engine& NewEngine(const backend::InstanceSpec& spec);
  void LaunchEngine(Engine& engine);
  void OnEngineHealthy(int64_t key, Status status);
  void OnEngineExit(int64_t key, const ExitStatus& status);
  /// Loads the synced weights into an engine that holds older ones, then marks it ready.
  void CatchUp(Engine& engine);
  void EngineReady(Engine& engine, Status status);
  void Sleep(Engine& engine, std::function<void(Status)> done);
  void Wake(Engine& engine, std::function<void(Status)> done);
  void StopEngine(Engine& engine);
  /// Stops new turns on it and calls `done` once its turns in flight have ended.
  void Drain(Engine& engine, std::function<void()> done);
  /// Runs its queued turns (it serves again) or fails them (it was dropped).
  void FlushQueued(Engine& engine);
  /// A trainer request that got no reply: the run fails unless the trainer has died (then it is
  /// restarted and the request sent again).
  void TrainerRequestFailed(Status error);
  /// An engine whose request got no reply: dead unless it answers its health check.
  void CheckEngine(int64_t key);
  Engine* ServingEngine(InstanceId instance);

  // Trainer.
  void LaunchTrainer();
  void OnTrainerExit(const ExitStatus& status);
  void WhenTrainerReady(std::function<void()> then);
  std::string CheckpointPath(int version) const;

  // Turns and tools.
  void WithPrompt(int64_t prompt, std::function<void()> then);
  void StartTurn(const backend::StartTurn& turn);
  void Generate(const backend::StartTurn& turn);
  void OnGenerated(const backend::StartTurn& turn, int64_t engine_key, uint64_t attempt,
                   double started_at, const GenerateRequest& request,
                   Result<HttpResponse> response);
  void FinishTrajectory(const backend::StartTurn& turn, int64_t generated, workload::TurnEnd end,
                        double started_at);
  void RunTool(const backend::RunTool& tool);
  void RunHttpTool(const backend::RunTool& tool, double started);
  /// Appends a tool's output (its stdout or HTTP reply) to its trajectory, masked out, and
  /// reports the call; a call that could not run is a failed (or timed-out) one.
  void ToolFinished(TrajectoryId id, double started, const std::string& name,
                    Result<std::string> output, bool timed_out);
  JsonValue TaskInput(TrajectoryId id) const;

  // Training and sync.
  void Train(const backend::Train& train);
  void SendTrainStep(std::shared_ptr<TrainStepRequest> request, double started_at);
  void Sync(const backend::SyncWeights& sync);
  void SyncDistributed(int version, std::function<void(Status)> done);

  recipe::Recipe recipe_;
  ClusterOptions options_;
  std::string run_dir_;
  std::string policy_path_;
  int start_version_ = 0;
  /// The sandboxes' working folders (on tmpfs when there is one); removed at the end.
  std::string scratch_dir_;
  EventLoop::Clock::time_point start_;

  std::unique_ptr<EventLoop> loop_;
  std::vector<std::unique_ptr<Launcher>> launchers_;
  std::unique_ptr<ProcessSet> processes_;
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<ShutdownSignals> signals_;

  backend::Layout layout_;
  bool started_ = false;
  std::map<int64_t, Engine> engines_;
  /// Layout instance -> engine key.
  std::vector<int64_t> instance_engine_;
  int64_t next_engine_ = 0;
  int next_port_ = 0;
  uint64_t next_attempt_ = 0;
  Trainer trainer_;
  std::optional<TrainerClient> trainer_client_;
  /// The version in policy.pt, and the version every serving engine must hold.
  int policy_version_ = 0;
  int synced_ = 0;
  /// Distributed sync: the engines in the current group and its tensors; reset when the set
  /// of serving engines changes.
  std::set<int64_t> group_members_;
  std::vector<TensorSpec> group_tensors_;
  int group_generation_ = 0;
  std::optional<WeightUpdateGroup> group_;
  /// The step being trained and the sync in flight, to send again after a trainer restart.
  std::function<void()> trainer_job_;

  std::map<TrajectoryId, Trajectory> trajectories_;
  std::map<int64_t, Prompt> prompts_;
  std::vector<backend::Event> ready_;
  /// Actions submitted and not yet completed, and restarts in progress.
  int64_t in_flight_ = 0;
  int restarting_ = 0;
  Status fatal_;
  int signal_ = 0;
  bool shutting_down_ = false;
};

}  // namespace libra::cluster
