// EngineSupervisor: the rollout engines' lifecycle. It starts each engine through its node's
// launcher and waits for its health check, loads the current weights into an engine that holds
// older ones before it serves, puts engines to sleep and wakes them (role switches), and watches
// them: an engine that exits, or fails a health check after a request got no reply, is a fault;
// its turns in flight fail back to the coordinator, and it is restarted up to [engine] restarts
// times (loading the current weights), then dropped. It also knows which engine serves each
// instance of the current layout (layout_assignment.h decides it).
//
// It runs turns' bookkeeping, not turns: the turn runner asks it whether an engine serves, waits
// for one that is starting or waking (WhenServing), and records its turns in flight
// (BeginTurn / EndTurn) so that a dying engine's turns can be failed and a drain can wait for
// them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cluster/async.h"
#include "cluster/engine_client.h"
#include "cluster/runtime.h"

namespace libra::cluster {

/// The weights' versions engines are held to.
struct WeightVersions {
  /// The version in policy.pt (what an engine loads from disk).
  int policy = 0;
  /// The version every serving engine must hold before it takes a turn.
  int synced = 0;
};

enum class EngineState { kStarting, kReady, kSleeping, kDead };

struct Engine {
  int64_t key = 0;
  /// "engine-<key>".
  std::string name;
  /// Its process's name and logs: `name`, or `name`-r<k> after k restarts.
  std::string log_name;
  /// Its GPUs and TP; spec.id is its instance while in the layout.
  backend::InstanceSpec spec;
  bool in_layout = false;
  EngineState state = EngineState::kStarting;
  std::optional<EngineClient> client;
  std::optional<ProcessId> process;
  /// The port its process listens on, held from its launch until its process is gone; 0 when
  /// it holds none.
  int port = 0;
  /// The weights' version it holds; -1 before it has loaded any.
  int weights = -1;
  int restarts = 0;
  /// Stopped on purpose: its exit is not a fault.
  bool stopping = false;
  /// Being started again after it died.
  bool restarting = false;
  /// Takes no new turn (a colocated train step is about to take its memory).
  bool paused = false;
  /// Waiting for it to serve (OK) or to be dropped (the error): turns that arrived while it was
  /// starting, waking or paused.
  std::vector<Done> waiting;
  /// Continuations waiting for its last turn in flight to end.
  std::vector<std::function<void()>> on_idle;
  /// Turns in flight: trajectory -> attempt.
  std::map<TrajectoryId, uint64_t> turns;
  /// Waiting for it to be started, woken or restarted (OK) or dropped (the error).
  std::vector<Done> on_ready;
  /// Waiting for its process to exit after it was stopped on purpose.
  std::vector<Done> on_stopped;
  /// Stopped because it could not release its memory; started again when its GPUs serve.
  bool stopped_to_free = false;
};

class EngineSupervisor {
 public:
  /// REQUIRES: `runtime` and `weights` outlive the supervisor.
  EngineSupervisor(Runtime& runtime, const WeightVersions& weights);
  EngineSupervisor(const EngineSupervisor&) = delete;
  EngineSupervisor& operator=(const EngineSupervisor&) = delete;

  /// A new engine on `spec`'s GPUs, not started.
  Engine& Add(const backend::InstanceSpec& spec);
  /// Starts engine `key`; `ready` gets OK once it serves the current weights, or the error once
  /// it has been dropped (after its restarts).
  void Launch(int64_t key, Done ready);
  /// Releases its GPU memory: it is then asleep, or, when it refused (or did not answer) three
  /// times, stopped (a fault on record; its instance, if any, down). Either way its memory is
  /// free when `done` runs, with OK; its state tells which.
  void Sleep(int64_t key, Done done);
  /// Takes its memory back and loads the current weights; `done` once it serves.
  void Wake(int64_t key, Done done);
  /// Stops it for good; its exit is no fault.
  void Stop(int64_t key);
  /// Stops it for good; `done` once its process has exited.
  void StopAndWait(int64_t key, Done done);
  /// Stops it and starts it again (on policy.pt: weight_sync = "restart"); its turns in flight
  /// go back to the coordinator. `done` once it serves again. No fault, no restart counted.
  void Restart(int64_t key, Done done);
  /// Takes no new turn; `done` once its turns in flight have ended.
  void Drain(int64_t key, std::function<void()> done);
  /// Takes turns again after a Drain; its waiting turns run once it serves.
  void Resume(int64_t key);
  /// `then(OK)` once engine `key` serves (at once when it does), `then(error)` once it has been
  /// dropped.
  void WhenServing(int64_t key, Done then);
  /// Records a turn of `trajectory` in flight on `key`; returns its attempt number.
  uint64_t BeginTurn(int64_t key, TrajectoryId trajectory);
  /// Ends the turn: false when it had already failed (the engine died meanwhile).
  bool EndTurn(int64_t key, TrajectoryId trajectory, uint64_t attempt);
  /// A request to engine `key` got no reply: it is stopped (and restarted) unless it answers its
  /// health check.
  void Check(int64_t key);

  /// Which engine serves each instance of the current layout.
  void SetInstances(std::vector<int64_t> keys) { instances_ = std::move(keys); }
  const std::vector<int64_t>& instances() const { return instances_; }
  /// The live engine serving `instance`; null when none does.
  Engine* Serving(InstanceId instance);
  Engine& at(int64_t key) { return engines_.at(key); }
  const std::map<int64_t, Engine>& engines() const { return engines_; }
  /// Engines being restarted after a fault.
  int restarting() const { return restarting_; }
  /// The engine process serving `instance`; nullopt when none runs.
  std::optional<pid_t> Pid(InstanceId instance) const;

  /// Called when an engine dies (a weight-update group that holds it must be set up again).
  void set_on_lost(std::function<void()> on_lost) { on_lost_ = std::move(on_lost); }

 private:
  void OnHealthy(int64_t key, Status status);
  void OnExit(int64_t key, const ExitStatus& status);
  /// Gives `engine`'s port back (its process is gone, or never started).
  void ReleasePort(Engine& engine);
  /// Loads the synced weights into an engine that holds older ones, then marks it ready.
  void CatchUp(Engine& engine);
  void Ready(Engine& engine, Status status);
  /// Runs the turns waiting for it (it serves) or fails them (it was dropped).
  void FlushWaiting(Engine& engine);
  void Relaunch(Engine& engine);
  void TrySleep(int64_t key, int attempt, Done done);

  Runtime& runtime_;
  const WeightVersions& weights_;
  std::map<int64_t, Engine> engines_;
  std::vector<int64_t> instances_;
  int64_t next_engine_ = 0;
  /// Ports held by engines whose process may still run: a launch takes the lowest free one from
  /// base_port on, so the engines of a long run with restarts and layout changes stay within
  /// base_port .. base_port + (most engines alive at once) - 1.
  std::set<int> ports_in_use_;
  uint64_t next_attempt_ = 0;
  int restarting_ = 0;
  std::function<void()> on_lost_;
};

}  // namespace libra::cluster
