#include "cluster/engine_supervisor.h"

#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr std::chrono::milliseconds kCheckTimeout{5000};
constexpr std::chrono::milliseconds kStopGrace{3000};
constexpr std::chrono::milliseconds kFaultStopGrace{2000};
// A sleep that fails is tried this often, waiting kSleepBackoff x attempt between tries.
constexpr int kSleepAttempts = 3;
constexpr std::chrono::milliseconds kSleepBackoff{1000};

std::string GpuList(const backend::InstanceSpec& spec) {
  std::vector<std::string> gpus;
  for (int g = 0; g < spec.tp; ++g) gpus.push_back(std::to_string(spec.first_gpu + g));
  return StrJoin(gpus, ",");
}

}  // namespace

EngineSupervisor::EngineSupervisor(Runtime& runtime, const WeightVersions& weights)
    : runtime_(runtime), weights_(weights) {}

Engine& EngineSupervisor::Add(const backend::InstanceSpec& spec) {
  const int64_t key = next_engine_++;
  Engine& e = engines_[key];
  e.key = key;
  e.name = StrFormat("engine-%lld", static_cast<long long>(key));
  e.spec = spec;
  return e;
}

void EngineSupervisor::Launch(int64_t key, Done ready) {
  Engine& e = engines_.at(key);
  e.on_ready.push_back(std::move(ready));
  Relaunch(e);
}

void EngineSupervisor::Relaunch(Engine& e) {
  const EngineOptions& options = runtime_.options->engine;
  e.state = EngineState::kStarting;
  e.stopping = false;
  e.weights = -1;
  ReleasePort(e);
  int port = options.base_port;
  while (ports_in_use_.count(port) > 0) ++port;
  ports_in_use_.insert(port);
  e.port = port;
  const std::string& address = runtime_.Address(e.spec.node);
  const std::string url = StrFormat("http://%s:%d", address.c_str(), port);
  EngineClientOptions client = options.client;
  client.model_path = runtime_.PolicyPath();
  e.client.emplace(options.dialect, url, client);
  std::map<std::string, std::string> env = options.env;
  env["CUDA_VISIBLE_DEVICES"] = GpuList(e.spec);
  e.log_name = e.restarts > 0 ? StrFormat("%s-r%d", e.name.c_str(), e.restarts) : e.name;
  Result<ProcessSpec> spec =
      runtime_.MakeSpec(e.spec.node, e.log_name, options.command,
                        runtime_.Values({{"port", std::to_string(port)},
                                         {"tp", std::to_string(e.spec.tp)},
                                         {"gpus", GpuList(e.spec)},
                                         {"node", std::to_string(e.spec.node)},
                                         {"host", address},
                                         {"weights", runtime_.PolicyPath()},
                                         {"dialect", NameOf(options.dialect)},
                                         {"instance", e.name}}),
                        env);
  if (!spec.ok()) {
    ReleasePort(e);
    return Ready(e, spec.status());
  }
  const int64_t key = e.key;
  const int loaded = weights_.policy;
  Result<ProcessId> process = runtime_.processes->Spawn(
      *spec, [this, key](const ExitStatus& status) { OnExit(key, status); });
  if (!process.ok()) {
    ReleasePort(e);
    return Ready(e, process.status());
  }
  e.process = *process;
  runtime_.transport->WaitHealthy(e.client->base_url() + "/health", options.health_timeout,
                                  [this, key, loaded](Status healthy) {
                                    Engine& engine = engines_.at(key);
                                    if (healthy.ok()) engine.weights = loaded;
                                    OnHealthy(key, healthy);
                                  });
}

void EngineSupervisor::OnHealthy(int64_t key, Status status) {
  Engine& e = engines_.at(key);
  if (e.state != EngineState::kStarting) return;  // it died meanwhile
  if (!status.ok()) {
    // Not serving in time: stop it; its exit counts as a failed start.
    runtime_.Emit(
        backend::Incident{"fault", e.name, status.message() + "; " + runtime_.LogHint(e.log_name),
                          runtime_.Now()},
        false);
    if (e.process) runtime_.processes->Stop(*e.process, kFaultStopGrace);
    return;
  }
  CatchUp(e);
}

void EngineSupervisor::CatchUp(Engine& e) {
  if (e.weights >= weights_.synced) return Ready(e, Status());
  const int64_t key = e.key;
  Result<HttpRequest> update =
      e.client->UpdateWeightsFromDisk(runtime_.PolicyPath(), weights_.policy);
  if (!update.ok()) return Ready(e, update.status());
  const int version = weights_.policy;
  runtime_.Control(
      *update,
      [this, key, request = *update](const HttpResponse& r) {
        return engines_.at(key).client->ParseAck(request, r);
      },
      [this, key, version](Status s) {
        Engine& engine = engines_.at(key);
        if (s.ok()) engine.weights = version;
        Ready(engine, s);
      });
}

void EngineSupervisor::Ready(Engine& e, Status status) {
  if (status.ok()) {
    e.state = EngineState::kReady;
  } else if (e.process && runtime_.processes->pid(*e.process)) {
    // It runs but cannot serve: stop it, and let its exit decide (restart or drop).
    runtime_.Emit(backend::Incident{"fault", e.name, status.message(), runtime_.Now()}, false);
    runtime_.processes->Stop(*e.process, kFaultStopGrace);
    return;
  } else {
    e.state = EngineState::kDead;
  }
  for (Done& waiter : std::exchange(e.on_ready, {})) waiter(status);
  FlushWaiting(e);
}

void EngineSupervisor::FlushWaiting(Engine& e) {
  if (e.state == EngineState::kStarting || e.state == EngineState::kSleeping || e.paused) return;
  const Status serving = e.state == EngineState::kReady
                             ? Status()
                             : Status(StatusCode::kBackend, e.name + " was dropped");
  for (Done& waiter : std::exchange(e.waiting, {})) waiter(serving);
}

void EngineSupervisor::WhenServing(int64_t key, Done then) {
  Engine& e = engines_.at(key);
  if (e.state == EngineState::kReady && !e.paused) return then(Status());
  e.waiting.push_back(std::move(then));  // it serves them once started, woken or resumed
}

uint64_t EngineSupervisor::BeginTurn(int64_t key, TrajectoryId trajectory) {
  const uint64_t attempt = ++next_attempt_;
  engines_.at(key).turns[trajectory] = attempt;
  return attempt;
}

bool EngineSupervisor::EndTurn(int64_t key, TrajectoryId trajectory, uint64_t attempt) {
  Engine& e = engines_.at(key);
  auto it = e.turns.find(trajectory);
  if (it == e.turns.end() || it->second != attempt) return false;  // already failed
  e.turns.erase(it);
  if (e.turns.empty()) {
    for (auto& then : std::exchange(e.on_idle, {})) then();
  }
  return true;
}

void EngineSupervisor::Drain(int64_t key, std::function<void()> done) {
  Engine& e = engines_.at(key);
  e.paused = true;
  if (e.turns.empty()) return done();
  e.on_idle.push_back(std::move(done));
}

void EngineSupervisor::Resume(int64_t key) { engines_.at(key).paused = false; }

void EngineSupervisor::Sleep(int64_t key, Done done) { TrySleep(key, 1, std::move(done)); }

void EngineSupervisor::TrySleep(int64_t key, int attempt, Done done) {
  Engine& e = engines_.at(key);
  if (e.state == EngineState::kDead) return done(Status());  // no process, no memory
  const HttpRequest release = e.client->ReleaseMemory();
  runtime_.Control(
      release,
      [this, key, release](const HttpResponse& r) {
        return engines_.at(key).client->ParseAck(release, r);
      },
      [this, key, attempt, done = std::move(done)](Status s) mutable {
        Engine& engine = engines_.at(key);
        if (s.ok()) {
          engine.state = EngineState::kSleeping;
          return done(s);
        }
        if (engine.state == EngineState::kDead) return done(Status());  // it died meanwhile
        if (attempt < kSleepAttempts) {
          runtime_.loop->AddTimer(kSleepBackoff * attempt,
                                  [this, key, attempt, done] { TrySleep(key, attempt + 1, done); });
          return;
        }
        // It keeps its memory: stop it, so that whoever takes its GPUs finds them free.
        runtime_.Emit(backend::Incident{"fault", engine.name,
                                        StrFormat("could not release its memory (%s) after %d "
                                                  "attempts; stopping it",
                                                  s.message().c_str(), attempt),
                                        runtime_.Now()},
                      false);
        if (engine.in_layout) {
          runtime_.Emit(backend::InstanceHealth{engine.spec.id, false,
                                                engine.name + " could not release its memory"},
                        false);
        }
        engine.stopped_to_free = true;
        StopAndWait(key, std::move(done));
      });
}

void EngineSupervisor::Wake(int64_t key, Done done) {
  Engine& e = engines_.at(key);
  const HttpRequest resume = e.client->ResumeMemory();
  e.state = EngineState::kStarting;
  e.on_ready.push_back(std::move(done));
  runtime_.Control(
      resume,
      [this, key, resume](const HttpResponse& r) {
        return engines_.at(key).client->ParseAck(resume, r);
      },
      [this, key](Status s) {
        Engine& engine = engines_.at(key);
        if (!s.ok()) return Ready(engine, s);
        CatchUp(engine);
      });
}

void EngineSupervisor::Stop(int64_t key) {
  Engine& e = engines_.at(key);
  e.stopping = true;
  e.state = EngineState::kDead;
  if (e.process) runtime_.processes->Stop(*e.process, kStopGrace);
}

void EngineSupervisor::Restart(int64_t key, Done done) {
  StopAndWait(
      key, [this, key, done = std::move(done)](Status) mutable { Launch(key, std::move(done)); });
}

void EngineSupervisor::StopAndWait(int64_t key, Done done) {
  Engine& e = engines_.at(key);
  Stop(key);
  if (!e.process) return done(Status());
  e.on_stopped.push_back(std::move(done));
}

void EngineSupervisor::ReleasePort(Engine& e) {
  if (e.port != 0) ports_in_use_.erase(e.port);
  e.port = 0;
}

void EngineSupervisor::OnExit(int64_t key, const ExitStatus& status) {
  Engine& e = engines_.at(key);
  e.process.reset();
  ReleasePort(e);
  if (e.stopping) {
    // Its turns in flight go back to the coordinator (none, when it was drained).
    for (const auto& [trajectory, attempt] : std::exchange(e.turns, {})) {
      runtime_.Emit(backend::TurnFailed{trajectory, e.spec.id, e.name + " was stopped"}, true);
    }
    for (Done& then : std::exchange(e.on_stopped, {})) then(Status());
    return;
  }
  if (runtime_.shutting_down) return;
  const bool was_starting = e.state == EngineState::kStarting;
  e.state = EngineState::kDead;
  const std::optional<InstanceId> instance =
      e.in_layout ? std::optional<InstanceId>(e.spec.id) : std::nullopt;
  runtime_.Emit(
      backend::Incident{"fault", e.name,
                        "exited (" + status.ToString() + "); " + runtime_.LogHint(e.log_name),
                        runtime_.Now()},
      false);
  if (instance && !was_starting) {
    runtime_.Emit(backend::InstanceHealth{*instance, false, e.name + " " + status.ToString()},
                  false);
  }
  // Its turns in flight go back to the coordinator, to be routed again.
  for (const auto& [trajectory, attempt] : std::exchange(e.turns, {})) {
    runtime_.Emit(backend::TurnFailed{trajectory, e.spec.id, e.name + " died"}, true);
  }
  if (on_lost_) on_lost_();
  for (auto& then : std::exchange(e.on_idle, {})) then();
  if (e.restarts >= runtime_.options->engine.restarts) {
    runtime_.Emit(
        backend::Incident{"drop", e.name, StrFormat("dropped after %d restart(s)", e.restarts),
                          runtime_.Now()},
        false);
    Ready(e, Status::Backend(e.name, "exited (" + status.ToString() + ") and was dropped after " +
                                         std::to_string(e.restarts) + " restart(s); " +
                                         runtime_.LogHint(e.log_name)));
    return;
  }
  ++e.restarts;
  if (e.restarting) return Relaunch(e);  // died again while restarting
  e.restarting = true;
  ++restarting_;
  const double started = runtime_.Now();
  e.on_ready.push_back([this, key, instance, was_starting, started](Status s) {
    --restarting_;
    Engine& engine = engines_.at(key);
    engine.restarting = false;
    if (!s.ok()) return;
    runtime_.Emit(backend::Incident{"restart", engine.name,
                                    StrFormat("restarted (attempt %d)", engine.restarts), started},
                  false);
    if (instance && !was_starting && engine.in_layout) {
      runtime_.Emit(backend::InstanceHealth{engine.spec.id, true, engine.name + " restarted"},
                    false);
    }
  });
  // Its ready waiters (a layout waiting for it) are kept for the new process.
  Relaunch(e);
}

void EngineSupervisor::Check(int64_t key) {
  Engine& e = engines_.at(key);
  if (e.state != EngineState::kReady || !e.process) return;
  HttpRequest health = e.client->Health();
  health.timeout_s = std::chrono::duration<double>(kCheckTimeout).count();
  runtime_.transport->Send(health, [this, key](Result<HttpResponse> r) {
    Engine& engine = engines_.at(key);
    if (r.ok() && r->status == 200) return;
    if (engine.state == EngineState::kReady && engine.process) {
      runtime_.Emit(backend::Incident{"fault", engine.name, "failed its health check; stopping it",
                                      runtime_.Now()},
                    false);
      runtime_.processes->Stop(*engine.process, kFaultStopGrace);
    }
  });
}

Engine* EngineSupervisor::Serving(InstanceId instance) {
  if (instance.value < 0 || instance.value >= static_cast<int64_t>(instances_.size())) {
    return nullptr;
  }
  Engine& e = engines_.at(instances_[static_cast<size_t>(instance.value)]);
  return e.state == EngineState::kDead ? nullptr : &e;
}

std::optional<pid_t> EngineSupervisor::Pid(InstanceId instance) const {
  if (instance.value < 0 || instance.value >= static_cast<int64_t>(instances_.size())) {
    return std::nullopt;
  }
  const Engine& engine = engines_.at(instances_[static_cast<size_t>(instance.value)]);
  if (!engine.process) return std::nullopt;
  return runtime_.processes->pid(*engine.process);
}

}  // namespace libra::cluster
