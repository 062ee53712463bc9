#include "cluster/cluster_backend.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr std::chrono::milliseconds kStopGrace{8000};
constexpr std::chrono::milliseconds kCheckTimeout{5000};

std::string GpuList(const backend::InstanceSpec& spec) {
  std::vector<std::string> gpus;
  for (int g = 0; g < spec.tp; ++g) gpus.push_back(std::to_string(spec.first_gpu + g));
  return StrJoin(gpus, ",");
}

bool SameGpus(const backend::InstanceSpec& a, const backend::InstanceSpec& b) {
  return a.node == b.node && a.first_gpu == b.first_gpu && a.tp == b.tp;
}

// The trainer's data-parallel replicas in `layout`; with every training GPU lent to rollout it
// keeps one, idle (the protocol has no trainer without a replica).
int ReplicasOf(const backend::Layout& layout) {
  return layout.train_gpus > 0 ? std::max(1, layout.train.dp) : 1;
}

bool Overlap(const backend::InstanceSpec& a, const backend::InstanceSpec& b) {
  return a.node == b.node && a.first_gpu < b.first_gpu + b.tp && b.first_gpu < a.first_gpu + a.tp;
}

// {"tokens": [...]} (and the optional "status") of a task command's output.
Result<JsonValue> ParseTaskOutput(const std::string& what, const std::string& output) {
  Result<JsonValue> json = ParseJson(output);
  if (!json.ok() || !json->is_object()) {
    std::string shown = output.substr(0, 200);
    return Status::Backend(what, "expected one JSON object on stdout, got '" + shown + "'");
  }
  return json;
}

Result<std::vector<TokenId>> TokensOf(const std::string& what, const JsonValue& object) {
  ReplyReader reader(what);
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* tokens, reader.Member(object, "", "tokens"));
  return reader.TokenIds(*tokens, "tokens");
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  return x & 0x7FFFFFFFFFFFULL;
}

}  // namespace

Result<std::unique_ptr<ClusterBackend>> ClusterBackend::Create(const recipe::Recipe& recipe,
                                                               ClusterOptions options,
                                                               std::string run_dir,
                                                               int start_version) {
  std::unique_ptr<ClusterBackend> backend(
      new ClusterBackend(recipe, std::move(options), std::move(run_dir), start_version));
  if (start_version > 0 && !std::filesystem::exists(backend->CheckpointPath(start_version))) {
    return Status::Backend("cluster", "cannot resume at version " + std::to_string(start_version) +
                                          ": its checkpoint " +
                                          backend->CheckpointPath(start_version) + " is missing");
  }
  std::error_code error;
  for (const char* sub : {"logs", "weights"}) {
    std::filesystem::create_directories(std::filesystem::path(backend->run_dir_) / sub, error);
    if (error) {
      return Status::Backend(
          "cluster", "cannot create " + backend->run_dir_ + "/" + sub + ": " + error.message());
    }
  }
  LIBRA_ASSIGN_OR_RETURN(backend->loop_, EventLoop::Create());
  LIBRA_ASSIGN_OR_RETURN(backend->launchers_, MakeLaunchers(backend->options_.launcher));
  backend->processes_ = std::make_unique<ProcessSet>(backend->loop_.get());
  (void)RaiseOpenFileLimit();
  HttpTransportOptions transport;
  transport.max_host_connections = backend->options_.engine.max_connections;
  LIBRA_ASSIGN_OR_RETURN(backend->transport_,
                         HttpTransport::Create(backend->loop_.get(), transport));
  // Every tool call makes and removes a folder and a few files: on tmpfs that is memory, on
  // ext4 it was half the controller's cost per turn (inode allocation).
  std::string scratch_template = "/dev/shm/libra-scratch-XXXXXX";
  if (access("/dev/shm", W_OK) == 0 && mkdtemp(scratch_template.data()) != nullptr) {
    backend->scratch_dir_ = scratch_template;
  } else {
    backend->scratch_dir_ = backend->run_dir_ + "/scratch";
  }
  int parallel = backend->options_.agent.max_parallel_calls;
  if (parallel == 0)
    parallel = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  backend->sandbox_ = std::make_unique<Sandbox>(backend->loop_.get(), backend->processes_.get(),
                                                backend->scratch_dir_, parallel);
  ClusterBackend* self = backend.get();
  LIBRA_ASSIGN_OR_RETURN(backend->signals_,
                         ShutdownSignals::Install(backend->loop_.get(), [self](int signo) {
                           self->signal_ = signo;
                           self->loop_->Stop();
                         }));
  return backend;
}

ClusterBackend::ClusterBackend(const recipe::Recipe& recipe, ClusterOptions options,
                               std::string run_dir, int start_version)
    : recipe_(recipe),
      options_(std::move(options)),
      run_dir_(std::filesystem::absolute(run_dir).lexically_normal().string()),
      policy_path_(run_dir_ + "/weights/" + options_.trainer.policy_name),
      start_version_(start_version),
      start_(EventLoop::Clock::now()) {
  options_.values["run_dir"] = run_dir_;
}

ClusterBackend::~ClusterBackend() {
  shutting_down_ = true;
  sandbox_.reset();
  if (!scratch_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_, ignored);
  }
  transport_.reset();
  // Longer than the ssh launcher's remote grace, so remote process groups end in order.
  if (processes_) processes_->StopAll(kStopGrace);
}

double ClusterBackend::Now() const {
  return std::chrono::duration<double>(EventLoop::Clock::now() - start_).count();
}

void ClusterBackend::Emit(backend::EventWhat what, bool completes) {
  ready_.push_back(backend::Event{Now(), std::move(what)});
  if (completes) --in_flight_;
}

void ClusterBackend::Fail(Status error) {
  if (fatal_.ok()) fatal_ = std::move(error);
  loop_->Stop();
}

std::map<std::string, std::string> ClusterBackend::Values(
    std::map<std::string, std::string> extra) const {
  for (const auto& [key, value] : options_.values) extra.emplace(key, value);
  return extra;
}

Result<ProcessSpec> ClusterBackend::MakeSpec(int node, const std::string& name,
                                             const CommandTemplate& command,
                                             const std::map<std::string, std::string>& values,
                                             std::map<std::string, std::string> env) const {
  ProcessSpec spec;
  spec.name = name;
  LIBRA_ASSIGN_OR_RETURN(spec.argv, command.Expand(values));
  spec.env = std::move(env);
  spec.log_dir = run_dir_ + "/logs";
  LIBRA_ASSIGN_OR_RETURN(ProcessSpec wrapped, launchers_.at(static_cast<size_t>(node))->Wrap(spec));
  // Even if libra crashes, no engine or trainer outlives it (over ssh: the ssh client, whose
  // end stops the remote process group).
  wrapped.die_with_libra = true;
  return wrapped;
}

std::string ClusterBackend::LogHint(const std::string& name) const {
  return "its log: " + run_dir_ + "/logs/" + name + ".err";
}

void ClusterBackend::All(std::vector<std::function<void(std::function<void(Status)>)>> calls,
                         std::function<void(Status)> then) {
  struct Join {
    size_t left = 0;
    Status first;
    std::function<void(Status)> then;
  };
  auto join = std::make_shared<Join>();
  join->left = calls.size();
  join->then = std::move(then);
  if (calls.empty()) {
    loop_->AddTimer(EventLoop::Clock::duration::zero(), [join] { join->then(Status()); });
    return;
  }
  for (auto& call : calls) {
    call([join](Status status) {
      if (!status.ok() && join->first.ok()) join->first = std::move(status);
      if (--join->left == 0) join->then(join->first);
    });
  }
}

void ClusterBackend::Control(const HttpRequest& request,
                             std::function<Status(const HttpResponse&)> parse,
                             std::function<void(Status)> done) {
  transport_->Send(
      request, [parse = std::move(parse), done = std::move(done)](Result<HttpResponse> response) {
        if (!response.ok()) {
          done(response.status());
          return;
        }
        done(parse(*response));
      });
}

// ---- Actions -----------------------------------------------------------------------------------

Status ClusterBackend::Submit(const backend::Action& action) {
  if (!fatal_.ok()) return fatal_;
  ++in_flight_;
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, backend::ApplyLayout>) {
          ApplyLayout(a.layout);
        } else if constexpr (std::is_same_v<T, backend::StartTurn>) {
          StartTurn(a);
        } else if constexpr (std::is_same_v<T, backend::RunTool>) {
          RunTool(a);
        } else if constexpr (std::is_same_v<T, backend::Train>) {
          Train(a);
        } else {
          Sync(a);
        }
      },
      action);
  return Status();
}

Result<std::vector<backend::Event>> ClusterBackend::Wait() {
  if (ready_.empty() && fatal_.ok() && (in_flight_ > 0 || restarting_ > 0)) {
    LIBRA_RETURN_IF_ERROR(
        loop_->RunUntil([this] { return !ready_.empty() || !fatal_.ok() || signal_ != 0; }));
  }
  if (signal_ != 0) {
    return Status::Interrupted(StrFormat("interrupted by %s; stopping every process",
                                         signal_ == SIGINT ? "SIGINT" : "SIGTERM"));
  }
  if (!fatal_.ok()) return fatal_;
  return std::exchange(ready_, {});
}

std::optional<pid_t> ClusterBackend::EnginePid(InstanceId instance) const {
  if (instance.value < 0 || instance.value >= static_cast<int64_t>(instance_engine_.size())) {
    return std::nullopt;
  }
  const Engine& engine = engines_.at(instance_engine_[static_cast<size_t>(instance.value)]);
  if (!engine.process) return std::nullopt;
  return processes_->pid(*engine.process);
}

std::optional<pid_t> ClusterBackend::TrainerPid() const {
  if (!trainer_.process) return std::nullopt;
  return processes_->pid(*trainer_.process);
}

// ---- Layout ------------------------------------------------------------------------------------

void ClusterBackend::ApplyLayout(const backend::Layout& layout) {
  if (!started_) {
    started_ = true;
    if (layout.train.gpus() != layout.train_gpus) {
      Fail(Status::Backend("cluster", "the layout's trainer does not use its GPUs"));
      return;
    }
    trainer_.checkpoint = options_.trainer.initial_weights;
    if (start_version_ > 0) {
      trainer_.checkpoint = CheckpointPath(start_version_);
      trainer_.version = start_version_;
    }
    auto launch = [this] { LaunchTrainer(); };
    if (start_version_ == 0 && options_.trainer.has_prepare_command &&
        !std::filesystem::exists(options_.trainer.initial_weights)) {
      const int node = options_.trainer.node;
      const std::string& address = options_.launcher.hosts.at(static_cast<size_t>(node)).address;
      Result<ProcessSpec> spec = MakeSpec(node, "prepare", options_.trainer.prepare_command,
                                          Values({{"weights", options_.trainer.initial_weights},
                                                  {"node", std::to_string(node)},
                                                  {"host", address}}),
                                          options_.trainer.env);
      if (!spec.ok()) return Fail(spec.status());
      Result<ProcessId> prepare = processes_->Spawn(*spec, [this, launch](const ExitStatus& e) {
        if (!e.success()) {
          return Fail(Status::Backend(
              "trainer", "prepare_command failed (" + e.ToString() + "); " + LogHint("prepare")));
        }
        launch();
      });
      if (!prepare.ok()) return Fail(prepare.status());
    } else {
      launch();
    }
    WhenTrainerReady([this, layout] {
      // The start version on disk: what every engine starts from.
      Control(
          trainer_client_->SaveWeights(policy_path_, start_version_),
          [this](const HttpResponse& r) {
            return trainer_client_->ParseSaveWeights(policy_path_, r).status();
          },
          [this, layout](Status saved) {
            if (!saved.ok()) return Fail(saved);
            policy_version_ = synced_ = start_version_;
            if (start_version_ == 0) {
              std::error_code ignored;
              std::filesystem::copy_file(policy_path_, CheckpointPath(0),
                                         std::filesystem::copy_options::overwrite_existing,
                                         ignored);
            }
            SetReplicas(ReplicasOf(layout), [this, layout](Status joined) {
              if (!joined.ok()) return Fail(joined);
              ApplyEngines(layout);
            });
          });
    });
    return;
  }
  SetReplicas(ReplicasOf(layout), [this, layout](Status joined) {
    if (!joined.ok()) return Fail(joined);
    ApplyEngines(layout);
  });
}

void ClusterBackend::SetReplicas(int replicas, std::function<void(Status)> done) {
  std::vector<std::function<void(std::function<void(Status)>)>> calls;
  const double started = Now();
  const int from = trainer_.replicas;
  for (int i = from; i < replicas; ++i) {
    const HttpRequest join = trainer_client_->Join(StrFormat("replica-%d", i));
    calls.push_back([this, join](std::function<void(Status)> d) {
      Control(
          join,
          [this, join](const HttpResponse& r) {
            return trainer_client_->ParseMembership(join, r).status();
          },
          std::move(d));
    });
  }
  for (int i = from - 1; i >= replicas; --i) {
    const HttpRequest leave = trainer_client_->Leave(StrFormat("replica-%d", i));
    calls.push_back([this, leave](std::function<void(Status)> d) {
      Control(
          leave,
          [this, leave](const HttpResponse& r) {
            return trainer_client_->ParseMembership(leave, r).status();
          },
          std::move(d));
    });
  }
  if (replicas != from && from > 0 && started_) {
    All(std::move(calls), [this, replicas, from, started, done = std::move(done)](Status s) {
      if (s.ok()) {
        trainer_.replicas = replicas;
        if (!instance_engine_.empty()) {  // not the first layout
          Emit(backend::Incident{"switch", "trainer",
                                 StrFormat("data parallelism %d -> %d replicas", from, replicas),
                                 started},
               false);
        }
      }
      done(s);
    });
    return;
  }
  All(std::move(calls), std::move(done));
}

void ClusterBackend::ApplyEngines(const backend::Layout& layout) {
  const double started = Now();
  const bool first = instance_engine_.empty();
  // Which engine serves each new instance: the one at the same index with the same GPUs (it may
  // have turns in flight), else any engine of the old layout on the same GPUs (drained), else a
  // sleeping one on the same GPUs, else a new one.
  std::vector<std::optional<int64_t>> assigned(layout.instances.size());
  std::set<int64_t> taken;
  for (size_t i = 0; i < layout.instances.size() && i < instance_engine_.size(); ++i) {
    const Engine& e = engines_.at(instance_engine_[i]);
    if (SameGpus(e.spec, layout.instances[i])) {
      assigned[i] = e.key;
      taken.insert(e.key);
    }
  }
  for (size_t i = 0; i < layout.instances.size(); ++i) {
    if (assigned[i]) continue;
    for (auto& [key, e] : engines_) {
      if (taken.count(key) || e.state == EngineState::kDead) continue;
      if (SameGpus(e.spec, layout.instances[i]) &&
          (e.in_layout || e.state == EngineState::kSleeping)) {
        assigned[i] = key;
        taken.insert(key);
        break;
      }
    }
  }
  std::vector<std::function<void(std::function<void(Status)>)>> calls;
  std::vector<std::string> changes;
  // Engines of the old layout that serve no new instance go to sleep.
  for (int64_t key : instance_engine_) {
    Engine& e = engines_.at(key);
    e.in_layout = false;
    if (taken.count(key) || e.state == EngineState::kDead) continue;
    changes.push_back(e.name + " sleeps");
    calls.push_back(
        [this, key](std::function<void(Status)> d) { Sleep(engines_.at(key), std::move(d)); });
  }
  std::vector<int64_t> next(layout.instances.size());
  for (size_t i = 0; i < layout.instances.size(); ++i) {
    backend::InstanceSpec spec = layout.instances[i];
    if (assigned[i]) {
      Engine& e = engines_.at(*assigned[i]);
      e.spec = spec;
      e.in_layout = true;
      next[i] = e.key;
      if (e.state == EngineState::kSleeping) {
        changes.push_back(e.name + " wakes");
        calls.push_back([this, key = e.key](std::function<void(Status)> d) {
          Wake(engines_.at(key), std::move(d));
        });
      }
      continue;
    }
    // Sleeping engines on these GPUs give them up for good.
    for (auto& [key, e] : engines_) {
      if (e.state == EngineState::kSleeping && !taken.count(key) && Overlap(e.spec, spec)) {
        changes.push_back(e.name + " stops");
        StopEngine(e);
      }
    }
    Engine& e = NewEngine(spec);
    e.in_layout = true;
    next[i] = e.key;
    changes.push_back(e.name + StrFormat(" starts (tp %d)", spec.tp));
    calls.push_back([this, key = e.key](std::function<void(Status)> d) {
      Engine& engine = engines_.at(key);
      engine.on_ready.push_back(std::move(d));
      LaunchEngine(engine);
    });
  }
  instance_engine_ = std::move(next);
  layout_ = layout;
  group_members_.clear();  // the serving set may have changed: a new group at the next sync
  All(std::move(calls), [this, first, started, changes = std::move(changes)](Status s) {
    if (!s.ok() && first) return Fail(s);
    if (!first) {
      Emit(backend::Incident{"switch", "cluster", StrJoin(changes, ", "), started}, false);
    }
    Emit(backend::LayoutApplied{}, true);
    // Instances whose engine was dropped while starting are down from the start.
    for (size_t i = 0; i < instance_engine_.size(); ++i) {
      const Engine& e = engines_.at(instance_engine_[i]);
      if (e.state == EngineState::kDead) {
        Emit(backend::InstanceHealth{InstanceId(static_cast<int64_t>(i)), false,
                                     e.name + " could not be started"},
             false);
      }
    }
  });
}

// ---- Engines -----------------------------------------------------------------------------------

ClusterBackend::Engine& ClusterBackend::NewEngine(const backend::InstanceSpec& spec) {
  const int64_t key = next_engine_++;
  Engine& e = engines_[key];
  e.key = key;
  e.name = StrFormat("engine-%lld", static_cast<long long>(key));
  e.spec = spec;
  return e;
}

void ClusterBackend::LaunchEngine(Engine& e) {
  e.state = EngineState::kStarting;
  e.stopping = false;
  e.weights = -1;
  const int port = options_.engine.base_port + next_port_++;
  const std::string& address = options_.launcher.hosts.at(static_cast<size_t>(e.spec.node)).address;
  const std::string url = StrFormat("http://%s:%d", address.c_str(), port);
  EngineClientOptions client = options_.engine.client;
  client.model_path = policy_path_;
  e.client.emplace(options_.engine.dialect, url, client);
  std::map<std::string, std::string> env = options_.engine.env;
  env["CUDA_VISIBLE_DEVICES"] = GpuList(e.spec);
  e.log_name = e.restarts > 0 ? StrFormat("%s-r%d", e.name.c_str(), e.restarts) : e.name;
  Result<ProcessSpec> spec =
      MakeSpec(e.spec.node, e.log_name, options_.engine.command,
               Values({{"port", std::to_string(port)},
                       {"tp", std::to_string(e.spec.tp)},
                       {"gpus", GpuList(e.spec)},
                       {"node", std::to_string(e.spec.node)},
                       {"host", address},
                       {"weights", policy_path_},
                       {"dialect", std::string(EngineDialectName(options_.engine.dialect))},
                       {"instance", e.name}}),
               env);
  if (!spec.ok()) return EngineReady(e, spec.status());
  const int64_t key = e.key;
  const int loaded = policy_version_;
  Result<ProcessId> process = processes_->Spawn(
      *spec, [this, key](const ExitStatus& status) { OnEngineExit(key, status); });
  if (!process.ok()) return EngineReady(e, process.status());
  e.process = *process;
  transport_->WaitHealthy(e.client->base_url() + "/health", options_.engine.health_timeout,
                          [this, key, loaded](Status healthy) {
                            Engine& engine = engines_.at(key);
                            if (healthy.ok()) engine.weights = loaded;
                            OnEngineHealthy(key, healthy);
                          });
}

void ClusterBackend::OnEngineHealthy(int64_t key, Status status) {
  Engine& e = engines_.at(key);
  if (e.state != EngineState::kStarting) return;  // it died meanwhile
  if (!status.ok()) {
    // Not serving in time: stop it; its exit counts as a failed start.
    Emit(backend::Incident{"fault", e.name, status.message() + "; " + LogHint(e.log_name), Now()},
         false);
    if (e.process) processes_->Stop(*e.process, std::chrono::milliseconds(2000));
    return;
  }
  CatchUp(e);
}

void ClusterBackend::CatchUp(Engine& e) {
  if (e.weights >= synced_) return EngineReady(e, Status());
  const int64_t key = e.key;
  Result<HttpRequest> update = e.client->UpdateWeightsFromDisk(policy_path_, policy_version_);
  if (!update.ok()) return EngineReady(e, update.status());
  const int version = policy_version_;
  Control(
      *update,
      [this, key, request = *update](const HttpResponse& r) {
        return engines_.at(key).client->ParseAck(request, r);
      },
      [this, key, version](Status s) {
        Engine& engine = engines_.at(key);
        if (s.ok()) engine.weights = version;
        EngineReady(engine, s);
      });
}

void ClusterBackend::EngineReady(Engine& e, Status status) {
  if (status.ok()) {
    e.state = EngineState::kReady;
  } else if (e.process && processes_->pid(*e.process)) {
    // It runs but cannot serve: stop it, and let its exit decide (restart or drop).
    Emit(backend::Incident{"fault", e.name, status.message(), Now()}, false);
    processes_->Stop(*e.process, std::chrono::milliseconds(2000));
    return;
  } else {
    e.state = EngineState::kDead;
  }
  auto waiters = std::exchange(e.on_ready, {});
  for (auto& waiter : waiters) waiter(status);
  FlushQueued(e);
}

void ClusterBackend::FlushQueued(Engine& e) {
  if (e.state == EngineState::kStarting || e.state == EngineState::kSleeping || e.paused) return;
  for (const backend::StartTurn& turn : std::exchange(e.queued, {})) {
    if (e.state == EngineState::kReady) {
      Generate(turn);
    } else {
      Emit(backend::TurnFailed{turn.trajectory, turn.instance, e.name + " was dropped"}, true);
    }
  }
}

void ClusterBackend::Drain(Engine& e, std::function<void()> done) {
  e.paused = true;
  if (e.turns.empty()) return done();
  e.on_idle.push_back(std::move(done));
}

void ClusterBackend::Sleep(Engine& e, std::function<void(Status)> done) {
  const int64_t key = e.key;
  const HttpRequest release = e.client->ReleaseMemory();
  Control(
      release,
      [this, key, release](const HttpResponse& r) {
        return engines_.at(key).client->ParseAck(release, r);
      },
      [this, key, done = std::move(done)](Status s) {
        Engine& engine = engines_.at(key);
        if (s.ok()) engine.state = EngineState::kSleeping;
        done(s);
      });
}

void ClusterBackend::Wake(Engine& e, std::function<void(Status)> done) {
  const int64_t key = e.key;
  const HttpRequest resume = e.client->ResumeMemory();
  e.state = EngineState::kStarting;
  e.on_ready.push_back(std::move(done));
  Control(
      resume,
      [this, key, resume](const HttpResponse& r) {
        return engines_.at(key).client->ParseAck(resume, r);
      },
      [this, key](Status s) {
        Engine& engine = engines_.at(key);
        if (!s.ok()) return EngineReady(engine, s);
        CatchUp(engine);
      });
}

void ClusterBackend::StopEngine(Engine& e) {
  e.stopping = true;
  e.state = EngineState::kDead;
  if (e.process) processes_->Stop(*e.process, std::chrono::milliseconds(3000));
}

void ClusterBackend::OnEngineExit(int64_t key, const ExitStatus& status) {
  Engine& e = engines_.at(key);
  e.process.reset();
  if (e.stopping || shutting_down_) return;
  const bool was_starting = e.state == EngineState::kStarting;
  e.state = EngineState::kDead;
  const std::optional<InstanceId> instance =
      e.in_layout ? std::optional<InstanceId>(e.spec.id) : std::nullopt;
  Emit(backend::Incident{"fault", e.name,
                         "exited (" + status.ToString() + "); " + LogHint(e.log_name), Now()},
       false);
  if (instance && !was_starting) {
    Emit(backend::InstanceHealth{*instance, false, e.name + " " + status.ToString()}, false);
  }
  // Its turns in flight go back to the coordinator, to be routed again.
  for (const auto& [trajectory, attempt] : std::exchange(e.turns, {})) {
    Emit(backend::TurnFailed{trajectory, e.spec.id, e.name + " died"}, true);
  }
  group_members_.clear();
  for (auto& then : std::exchange(e.on_idle, {})) then();
  if (e.restarts >= options_.engine.restarts) {
    Emit(backend::Incident{"drop", e.name, StrFormat("dropped after %d restart(s)", e.restarts),
                           Now()},
         false);
    EngineReady(e, Status::Backend(e.name, "exited (" + status.ToString() +
                                               ") and was dropped "
                                               "after " +
                                               std::to_string(e.restarts) + " restart(s); " +
                                               LogHint(e.log_name)));
    return;
  }
  ++e.restarts;
  if (e.restarting) return LaunchEngine(e);  // died again while restarting
  e.restarting = true;
  ++restarting_;
  const double started = Now();
  e.on_ready.push_back([this, key, instance, was_starting, started](Status s) {
    --restarting_;
    Engine& engine = engines_.at(key);
    engine.restarting = false;
    if (!s.ok()) return;
    Emit(backend::Incident{"restart", engine.name,
                           StrFormat("restarted (attempt %d)", engine.restarts), started},
         false);
    if (instance && !was_starting && engine.in_layout) {
      Emit(backend::InstanceHealth{engine.spec.id, true, engine.name + " restarted"}, false);
    }
  });
  // Its ready waiters (a layout waiting for it) are kept for the new process.
  LaunchEngine(e);
}

void ClusterBackend::CheckEngine(int64_t key) {
  Engine& e = engines_.at(key);
  if (e.state != EngineState::kReady || !e.process) return;
  HttpRequest health = e.client->Health();
  health.timeout_s = std::chrono::duration<double>(kCheckTimeout).count();
  transport_->Send(health, [this, key](Result<HttpResponse> r) {
    Engine& engine = engines_.at(key);
    if (r.ok() && r->status == 200) return;
    if (engine.state == EngineState::kReady && engine.process) {
      Emit(backend::Incident{"fault", engine.name, "failed its health check; stopping it", Now()},
           false);
      processes_->Stop(*engine.process, std::chrono::milliseconds(2000));
    }
  });
}

ClusterBackend::Engine* ClusterBackend::ServingEngine(InstanceId instance) {
  if (instance.value < 0 || instance.value >= static_cast<int64_t>(instance_engine_.size())) {
    return nullptr;
  }
  Engine& e = engines_.at(instance_engine_[static_cast<size_t>(instance.value)]);
  return e.state == EngineState::kDead ? nullptr : &e;
}

// ---- Trainer -----------------------------------------------------------------------------------

std::string ClusterBackend::CheckpointPath(int version) const {
  const std::string extension =
      std::filesystem::path(options_.trainer.policy_name).extension().string();
  return StrFormat("%s/weights/v%d%s", run_dir_.c_str(), version, extension.c_str());
}

void ClusterBackend::LaunchTrainer() {
  const TrainerOptions& t = options_.trainer;
  const std::string& address = options_.launcher.hosts.at(static_cast<size_t>(t.node)).address;
  trainer_client_.emplace(StrFormat("http://%s:%d", address.c_str(), t.port));
  trainer_.ready = false;
  trainer_.stopping = false;
  trainer_.replicas = 1;
  const std::string name =
      trainer_.restarts > 0 ? StrFormat("trainer-r%d", trainer_.restarts) : "trainer";
  Result<ProcessSpec> spec = MakeSpec(t.node, name, t.command,
                                      Values({{"port", std::to_string(t.port)},
                                              {"node", std::to_string(t.node)},
                                              {"host", address},
                                              {"weights", trainer_.checkpoint},
                                              {"version", std::to_string(trainer_.version)},
                                              {"replica", "replica-0"}}),
                                      t.env);
  if (!spec.ok()) return Fail(spec.status());
  Result<ProcessId> process =
      processes_->Spawn(*spec, [this](const ExitStatus& status) { OnTrainerExit(status); });
  if (!process.ok()) return Fail(process.status());
  trainer_.process = *process;
  transport_->WaitHealthy(
      trainer_client_->base_url() + "/health", t.health_timeout, [this, name](Status healthy) {
        if (!healthy.ok()) {
          return Fail(Status::Backend("trainer", healthy.message() + "; " + LogHint(name)));
        }
        trainer_.ready = true;
        for (auto& then : std::exchange(trainer_.on_ready, {})) then();
      });
}

void ClusterBackend::TrainerRequestFailed(Status error) {
  // The reply may fail before the trainer's exit is seen: decide a moment later.
  const int restarts = trainer_.restarts;
  loop_->AddTimer(std::chrono::milliseconds(1500), [this, restarts, error] {
    if (trainer_.restarts != restarts || !trainer_.ready) return;  // restarted: sent again
    Fail(error);
  });
}

void ClusterBackend::WhenTrainerReady(std::function<void()> then) {
  if (trainer_.ready) return then();
  trainer_.on_ready.push_back(std::move(then));
}

void ClusterBackend::OnTrainerExit(const ExitStatus& status) {
  trainer_.process.reset();
  trainer_.ready = false;
  if (trainer_.stopping || shutting_down_) return;
  const std::string name =
      trainer_.restarts > 0 ? StrFormat("trainer-r%d", trainer_.restarts) : "trainer";
  Emit(backend::Incident{"fault", "trainer", "exited (" + status.ToString() + "); " + LogHint(name),
                         Now()},
       false);
  if (trainer_.restarts >= options_.trainer.restarts) {
    return Fail(Status::Backend("trainer", "exited (" + status.ToString() + ") after " +
                                               std::to_string(trainer_.restarts) + " restart(s); " +
                                               LogHint(name)));
  }
  ++trainer_.restarts;
  group_members_.clear();
  const double started = Now();
  const int replicas = ReplicasOf(layout_);
  LaunchTrainer();
  WhenTrainerReady([this, started, replicas] {
    SetReplicas(replicas, [this, started](Status s) {
      if (!s.ok()) return Fail(s);
      Emit(backend::Incident{"restart", "trainer",
                             StrFormat("restarted from %s (version %d)",
                                       trainer_.checkpoint.c_str(), trainer_.version),
                             started},
           false);
      // The step or sync it was working on, again.
      if (trainer_job_) trainer_job_();
    });
  });
}

// ---- Turns and tools ---------------------------------------------------------------------------

void ClusterBackend::WithPrompt(int64_t prompt, std::function<void()> then) {
  Prompt& p = prompts_[prompt];
  if (p.loaded) return then();
  p.waiters.push_back(std::move(then));
  if (p.waiters.size() > 1) return;  // already being loaded
  SandboxCall call;
  call.name = StrFormat("prompt-%lld", static_cast<long long>(prompt));
  Result<std::vector<std::string>> argv =
      options_.agent.prompt_command.Expand(Values({{"prompt", std::to_string(prompt)}}));
  if (!argv.ok()) return Fail(argv.status());
  call.argv = *argv;
  call.input = "{}";
  call.env = options_.agent.env;
  call.limits = options_.agent.limits;
  sandbox_->Run(call, [this, prompt, name = call.name](Result<std::string> out) {
    if (!out.ok()) return Fail(out.status());
    Result<JsonValue> json = ParseTaskOutput(name, *out);
    if (!json.ok()) return Fail(json.status());
    Result<std::vector<TokenId>> ids = TokensOf(name, *json);
    if (!ids.ok()) return Fail(ids.status());
    if (ids->empty()) return Fail(Status::Backend(name, "the prompt has no tokens"));
    Prompt& loaded = prompts_[prompt];
    loaded.loaded = true;
    loaded.ids = std::move(*ids);
    for (auto& waiter : std::exchange(loaded.waiters, {})) waiter();
  });
}

void ClusterBackend::StartTurn(const backend::StartTurn& turn) {
  Trajectory& t = trajectories_[turn.trajectory];
  if (turn.turn == 0 && t.turns == 0) {
    t.prompt = turn.prompt;
    t.sample = turn.sample;
  }
  WithPrompt(turn.prompt, [this, turn] {
    Trajectory& loaded = trajectories_[turn.trajectory];
    if (loaded.prompt_ids.empty()) loaded.prompt_ids = prompts_[turn.prompt].ids;
    Generate(turn);
  });
}

void ClusterBackend::Generate(const backend::StartTurn& turn) {
  Trajectory& t = trajectories_.at(turn.trajectory);
  Engine* e = ServingEngine(turn.instance);
  if (e == nullptr) {
    Emit(backend::TurnFailed{turn.trajectory, turn.instance,
                             "instance " + turn.instance.ToString() + " is not serving"},
         true);
    return;
  }
  if (e->state != EngineState::kReady || e->paused) {
    e->queued.push_back(turn);  // it serves them once started, woken or resumed
    return;
  }
  const int64_t context = static_cast<int64_t>(t.prompt_ids.size() + t.completion.size());
  const int64_t room = options_.engine.max_context_tokens - context;
  if (room <= 0) {
    FinishTrajectory(turn, 0, workload::TurnEnd::kTruncated, Now());
    return;
  }
  GenerateRequest request;
  request.prompt = t.prompt_ids;
  request.prompt.insert(request.prompt.end(), t.completion.begin(), t.completion.end());
  request.max_tokens =
      static_cast<int>(std::min<int64_t>(options_.engine.max_tokens_per_turn, room));
  request.temperature = options_.engine.temperature;
  request.top_p = options_.engine.top_p;
  request.stop_token_ids = options_.agent.stop_token_ids;
  request.seed = static_cast<int64_t>(
      Mix(Mix(recipe_.seed, static_cast<uint64_t>(turn.trajectory.value)), turn.turn));
  const uint64_t attempt = ++next_attempt_;
  request.request_id =
      StrFormat("libra-t%lld-%d-a%llu", static_cast<long long>(turn.trajectory.value), turn.turn,
                static_cast<unsigned long long>(attempt));
  request.timeout_s = options_.engine.turn_timeout_s;
  e->turns[turn.trajectory] = attempt;
  const double started = Now();
  transport_->Send(e->client->Generate(request),
                   [this, turn, key = e->key, attempt, started, request](Result<HttpResponse> r) {
                     OnGenerated(turn, key, attempt, started, request, std::move(r));
                   });
}

void ClusterBackend::OnGenerated(const backend::StartTurn& turn, int64_t engine_key,
                                 uint64_t attempt, double started_at,
                                 const GenerateRequest& request, Result<HttpResponse> response) {
  Engine& e = engines_.at(engine_key);
  auto it = e.turns.find(turn.trajectory);
  if (it == e.turns.end() || it->second != attempt) return;  // already failed (engine died)
  e.turns.erase(it);
  if (e.turns.empty()) {
    for (auto& then : std::exchange(e.on_idle, {})) then();
  }
  auto retry = [&](const std::string& why) {
    Emit(backend::TurnFailed{turn.trajectory, turn.instance, why}, true);
  };
  if (!response.ok()) {
    retry(response.status().message());
    CheckEngine(engine_key);
    return;
  }
  if (response->status >= 500) {
    retry(StrFormat("%s answered HTTP %ld: %s", e.name.c_str(), response->status,
                    ErrorMessageOf(response->body).c_str()));
    CheckEngine(engine_key);
    return;
  }
  Result<GenerateResult> result = e.client->ParseGenerate(request, *response);
  if (!result.ok()) return Fail(result.status());
  if (result->finish_reason == FinishReason::kAbort) return retry(e.name + " aborted the turn");
  Trajectory& t = trajectories_.at(turn.trajectory);
  t.completion.insert(t.completion.end(), result->token_ids.begin(), result->token_ids.end());
  t.logprobs.insert(t.logprobs.end(), result->logprobs.begin(), result->logprobs.end());
  t.mask.insert(t.mask.end(), result->token_ids.size(), 1);
  t.last_turn = result->token_ids;
  ++t.turns;
  const auto generated = static_cast<int64_t>(result->token_ids.size());
  const bool called = result->finish_reason == FinishReason::kStop && !t.last_turn.empty() &&
                      t.last_turn.back() == options_.agent.tool_call_token;
  if (called && t.turns < options_.agent.max_turns) {
    backend::TurnDone done;
    done.trajectory = turn.trajectory;
    done.instance = turn.instance;
    done.generated_tokens = generated;
    done.end = workload::TurnEnd::kToolCall;
    done.tool = options_.agent.tool_name;
    done.started_at = started_at;
    if (turn.turn == 0) done.prompt_tokens = static_cast<int64_t>(t.prompt_ids.size());
    Emit(std::move(done), true);
    return;
  }
  const workload::TurnEnd end = result->finish_reason == FinishReason::kStop && !called
                                    ? workload::TurnEnd::kStop
                                    : workload::TurnEnd::kTruncated;
  FinishTrajectory(turn, generated, end, started_at);
}

JsonValue ClusterBackend::TaskInput(TrajectoryId id) const {
  const Trajectory& t = trajectories_.at(id);
  std::vector<TokenId> completion(t.completion.begin(), t.completion.end());
  return JsonValue::MakeObject()
      .Set("seed", static_cast<int64_t>(recipe_.seed))
      .Set("prompt", t.prompt)
      .Set("sample", t.sample)
      .Set("turn", t.turns)
      .Set("prompt_ids", TokenIdsToJson(t.prompt_ids))
      .Set("completion_ids", TokenIdsToJson(completion))
      .Set("call", TokenIdsToJson(t.last_turn))
      .Set("answer", TokenIdsToJson(t.last_turn));
}

void ClusterBackend::FinishTrajectory(const backend::StartTurn& turn, int64_t generated,
                                      workload::TurnEnd end, double started_at) {
  SandboxCall call;
  call.name = StrFormat("reward-t%lld", static_cast<long long>(turn.trajectory.value));
  Result<std::vector<std::string>> argv = options_.agent.reward_command.Expand(Values({}));
  if (!argv.ok()) return Fail(argv.status());
  call.argv = *argv;
  call.input = ToJson(TaskInput(turn.trajectory));
  call.env = options_.agent.env;
  call.limits = options_.agent.limits;
  sandbox_->Run(
      call, [this, turn, generated, end, started_at, name = call.name](Result<std::string> out) {
        if (!out.ok()) return Fail(out.status());
        Result<JsonValue> json = ParseTaskOutput(name, *out);
        if (!json.ok()) return Fail(json.status());
        Result<double> reward = ReplyReader(name).Number(*json, "", "reward");
        if (!reward.ok()) return Fail(reward.status());
        backend::TurnDone done;
        done.trajectory = turn.trajectory;
        done.instance = turn.instance;
        done.generated_tokens = generated;
        done.end = end;
        done.reward = *reward;
        done.started_at = started_at;
        if (turn.turn == 0) {
          done.prompt_tokens =
              static_cast<int64_t>(trajectories_.at(turn.trajectory).prompt_ids.size());
        }
        Emit(std::move(done), true);
      });
}

void ClusterBackend::RunTool(const backend::RunTool& tool) {
  const double started = Now();
  if (!options_.agent.tool_url.empty()) return RunHttpTool(tool, started);
  SandboxCall call;
  call.name = StrFormat("tool-t%lld-%d", static_cast<long long>(tool.trajectory.value),
                        trajectories_.at(tool.trajectory).turns);
  Result<std::vector<std::string>> argv = options_.agent.tool_command.Expand(Values({}));
  if (!argv.ok()) return Fail(argv.status());
  call.argv = *argv;
  call.input = ToJson(TaskInput(tool.trajectory));
  call.env = options_.agent.env;
  call.limits = options_.agent.limits;
  sandbox_->Run(call,
                [this, id = tool.trajectory, started, name = call.name](Result<std::string> out) {
                  const bool timed_out = !out.ok() && out.status().code() == StatusCode::kTimeout;
                  ToolFinished(id, started, name, std::move(out), timed_out);
                });
}

void ClusterBackend::RunHttpTool(const backend::RunTool& tool, double started) {
  const std::string name = StrFormat("tool-t%lld-%d", static_cast<long long>(tool.trajectory.value),
                                     trajectories_.at(tool.trajectory).turns);
  const HttpRequest request = PostJson(options_.agent.tool_url, TaskInput(tool.trajectory),
                                       options_.agent.limits.timeout_s);
  transport_->Send(request, [this, id = tool.trajectory, started,
                             name](Result<HttpResponse> response) {
    if (!response.ok()) {
      // curl says "Timeout was reached" (or "timed out") when the tool took too long.
      const std::string& why = response.status().message();
      const bool timed_out =
          why.find("imeout") != std::string::npos || why.find("timed out") != std::string::npos;
      return ToolFinished(id, started, name, response.status(), timed_out);
    }
    if (response->status < 200 || response->status >= 300) {
      return ToolFinished(id, started, name,
                          Status::Backend(name, StrFormat("HTTP %ld: %s", response->status,
                                                          ErrorMessageOf(response->body).c_str())),
                          false);
    }
    ToolFinished(id, started, name, std::move(response->body), false);
  });
}

void ClusterBackend::ToolFinished(TrajectoryId id, double started, const std::string& name,
                                  Result<std::string> output, bool timed_out) {
  backend::ToolDone done;
  done.trajectory = id;
  done.started_at = started;
  std::vector<TokenId> tokens;
  Status failed = output.status();
  if (output.ok()) {
    // {"tokens": [...], "status": "success" | "failure" ("error") | "timeout"}.
    Result<JsonValue> json = ParseTaskOutput(name, *output);
    Result<std::vector<TokenId>> ids =
        json.ok() ? TokensOf(name, *json) : Result<std::vector<TokenId>>(json.status());
    if (ids.ok()) {
      tokens = std::move(*ids);
      const JsonValue* status = json->Find("status");
      std::string named =
          status != nullptr && status->is_string() ? status->as_string() : "success";
      if (named == "error") named = "failure";
      if (!workload::ParseToolStatus(named, &done.status))
        done.status = workload::ToolStatus::kFailure;
    } else {
      failed = ids.status();
    }
  }
  if (!failed.ok()) {
    // A tool that could not run is a failed call for the router, and an incident on record.
    done.status = timed_out ? workload::ToolStatus::kTimeout : workload::ToolStatus::kFailure;
    Emit(backend::Incident{"tool", name, failed.message(), started}, false);
  }
  Trajectory& t = trajectories_.at(id);
  t.completion.insert(t.completion.end(), tokens.begin(), tokens.end());
  t.logprobs.insert(t.logprobs.end(), tokens.size(), 0.0);
  t.mask.insert(t.mask.end(), tokens.size(), 0);
  done.output_tokens = static_cast<int64_t>(tokens.size());
  Emit(std::move(done), true);
}

// ---- Training and sync -------------------------------------------------------------------------

void ClusterBackend::Train(const backend::Train& train) {
  auto request = std::make_shared<TrainStepRequest>();
  request->step = train.step;
  request->timeout_s = options_.trainer.step_timeout_s;
  for (size_t i = 0; i < train.trajectories.size(); ++i) {
    auto it = trajectories_.find(train.trajectories[i]);
    if (it == trajectories_.end()) {
      return Fail(Status::Internal("train step " + std::to_string(train.step) +
                                   ": no transcript of trajectory " +
                                   train.trajectories[i].ToString()));
    }
    TrainSequence s;
    s.prompt_ids = it->second.prompt_ids;
    s.completion_ids = it->second.completion;
    s.logprobs = it->second.logprobs;
    s.loss_mask = it->second.mask;
    s.advantage = i < train.advantages.size() ? train.advantages[i] : 0.0;
    request->sequences.push_back(std::move(s));
    trajectories_.erase(it);
  }
  // Prompts of trained groups are not needed again.
  const double started = Now();
  if (!layout_.colocated) return SendTrainStep(request, started);
  // Colocated: the engines give their memory to training for the step.
  std::vector<std::function<void(std::function<void(Status)>)>> calls;
  for (int64_t key : instance_engine_) {
    if (engines_.at(key).state != EngineState::kReady) continue;
    calls.push_back([this, key](std::function<void(Status)> d) {
      Drain(engines_.at(key), [this, key, d = std::move(d)] { Sleep(engines_.at(key), d); });
    });
  }
  All(std::move(calls), [this, request, started](Status s) {
    if (!s.ok()) return Fail(s);
    SendTrainStep(request, started);
  });
}

void ClusterBackend::SendTrainStep(std::shared_ptr<TrainStepRequest> request, double started_at) {
  trainer_job_ = [this, request, started_at] { SendTrainStep(request, started_at); };
  WhenTrainerReady([this, request, started_at] {
    Result<HttpRequest> http = trainer_client_->TrainStep(*request);
    if (!http.ok()) return Fail(http.status());
    transport_->Send(*http, [this, request, started_at](Result<HttpResponse> response) {
      if (!response.ok()) return TrainerRequestFailed(response.status());
      Result<TrainStepResult> result = trainer_client_->ParseTrainStep(*request, *response);
      if (!result.ok()) return Fail(result.status());
      const int version = result->version;
      // A checkpoint of every version: a restarted trainer resumes from it.
      const std::string path = CheckpointPath(version);
      Control(
          trainer_client_->SaveWeights(path, version),
          [this, path](const HttpResponse& r) {
            return trainer_client_->ParseSaveWeights(path, r).status();
          },
          [this, request, started_at, version, path](Status saved) {
            if (!saved.ok()) return TrainerRequestFailed(saved);
            trainer_.version = version;
            trainer_.checkpoint = path;
            trainer_job_ = nullptr;
            auto done = [this, request, started_at] {
              Emit(backend::TrainDone{request->step, started_at}, true);
            };
            if (!layout_.colocated) return done();
            std::vector<std::function<void(std::function<void(Status)>)>> calls;
            for (int64_t key : instance_engine_) {
              Engine& engine = engines_.at(key);
              engine.paused = false;
              if (engine.state != EngineState::kSleeping) continue;
              calls.push_back([this, key](std::function<void(Status)> d) {
                Wake(engines_.at(key), std::move(d));
              });
            }
            All(std::move(calls), [this, done](Status s) {
              if (!s.ok()) return Fail(s);
              done();
            });
          });
    });
  });
}

void ClusterBackend::Sync(const backend::SyncWeights& sync) {
  const double started = Now();
  const int version = sync.version;
  trainer_job_ = [this, sync] { Sync(sync); };
  WhenTrainerReady([this, version, started] {
    Control(
        trainer_client_->SaveWeights(policy_path_, version),
        [this](const HttpResponse& r) {
          return trainer_client_->ParseSaveWeights(policy_path_, r).status();
        },
        [this, version, started](Status saved) {
          if (!saved.ok()) return TrainerRequestFailed(saved);
          policy_version_ = version;
          auto finish = [this, version, started](Status s) {
            if (!s.ok()) return TrainerRequestFailed(s);
            trainer_job_ = nullptr;
            synced_ = version;
            Emit(backend::SyncDone{version, started}, true);
          };
          if (options_.trainer.weight_sync == "distributed") {
            return SyncDistributed(version, finish);
          }
          std::vector<std::function<void(std::function<void(Status)>)>> calls;
          for (auto& [key, e] : engines_) {
            if (e.state != EngineState::kReady) continue;
            Result<HttpRequest> update = e.client->UpdateWeightsFromDisk(policy_path_, version);
            if (!update.ok()) return Fail(update.status());
            calls.push_back(
                [this, key = key, update = *update, version](std::function<void(Status)> d) {
                  Control(
                      update,
                      [this, key, update](const HttpResponse& r) {
                        return engines_.at(key).client->ParseAck(update, r);
                      },
                      [this, key, version, d = std::move(d)](Status s) {
                        Engine& engine = engines_.at(key);
                        if (s.ok()) {
                          engine.weights = version;
                        } else if (engine.state != EngineState::kReady) {
                          s = Status();  // it died meanwhile: it loads policy.pt when restarted
                        }
                        d(s);
                      });
                });
          }
          All(std::move(calls), finish);
        });
  });
}

void ClusterBackend::SyncDistributed(int version, std::function<void(Status)> done) {
  std::vector<int64_t> members;
  std::vector<int> gpus;
  for (auto& [key, e] : engines_) {
    if (e.state != EngineState::kReady) continue;
    members.push_back(key);
    gpus.push_back(options_.engine.group_rank_per_gpu ? e.spec.tp : 1);
  }
  if (members.empty()) return done(Status());
  auto broadcast = [this, members, version, done]() {
    std::vector<std::function<void(std::function<void(Status)>)>> calls;
    const WeightUpdateGroup group = *group_;
    const HttpRequest send = trainer_client_->BroadcastWeights(group, version);
    calls.push_back([this, send](std::function<void(Status)> d) {
      Control(
          send,
          [this](const HttpResponse& r) {
            return trainer_client_->ParseBroadcastWeights(r).status();
          },
          std::move(d));
    });
    for (int64_t key : members) {
      const HttpRequest receive =
          engines_.at(key).client->UpdateWeightsFromDistributed(group, group_tensors_, version);
      calls.push_back([this, key, receive, version](std::function<void(Status)> d) {
        Control(
            receive,
            [this, key, receive](const HttpResponse& r) {
              return engines_.at(key).client->ParseAck(receive, r);
            },
            [this, key, version, d = std::move(d)](Status s) {
              if (s.ok()) engines_.at(key).weights = version;
              d(s);
            });
      });
    }
    All(std::move(calls), done);
  };
  const std::set<int64_t> wanted(members.begin(), members.end());
  if (group_ && wanted == group_members_) return broadcast();
  // A new group for the engines serving now.
  Result<WeightUpdateRanks> ranks = LayOutWeightUpdateRanks(gpus);
  if (!ranks.ok()) return done(ranks.status());
  WeightUpdateGroup group;
  group.master_address =
      options_.launcher.hosts.at(static_cast<size_t>(options_.trainer.node)).address;
  group.master_port = options_.trainer.master_port + (group_generation_ % 100);
  group.world_size = ranks->world_size;
  group.group_name = StrFormat("libra-weights-%d", group_generation_++);
  group.backend = options_.trainer.group_backend;
  group_ = group;
  group_members_.clear();
  auto tensors = std::make_shared<std::vector<TensorSpec>>();
  std::vector<std::function<void(std::function<void(Status)>)>> calls;
  const HttpRequest init = trainer_client_->InitWeightUpdateGroup(group);
  calls.push_back([this, init, tensors](std::function<void(Status)> d) {
    transport_->Send(init, [this, tensors, d = std::move(d)](Result<HttpResponse> r) {
      if (!r.ok()) return d(r.status());
      Result<std::vector<TensorSpec>> specs = trainer_client_->ParseInitWeightUpdateGroup(*r);
      if (!specs.ok()) return d(specs.status());
      *tensors = std::move(*specs);
      d(Status());
    });
  });
  for (size_t i = 0; i < members.size(); ++i) {
    const int64_t key = members[i];
    const HttpRequest join =
        engines_.at(key).client->InitWeightUpdateGroup(group, ranks->rank_offsets[i]);
    calls.push_back([this, key, join](std::function<void(Status)> d) {
      Control(
          join,
          [this, key, join](const HttpResponse& r) {
            return engines_.at(key).client->ParseAck(join, r);
          },
          std::move(d));
    });
  }
  All(std::move(calls), [this, wanted, tensors, broadcast, done](Status s) {
    if (!s.ok()) return done(s);
    group_members_ = wanted;
    group_tensors_ = *tensors;
    broadcast();
  });
}

}  // namespace libra::cluster
