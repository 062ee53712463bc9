#include "cluster/cluster_backend.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "cluster/engine_probe.h"
#include "cluster/layout_assignment.h"
#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr std::chrono::milliseconds kStopGrace{8000};

// The trainer's data-parallel replicas in `layout`; with every training GPU lent to rollout it
// keeps one, idle (the protocol has no trainer without a replica).
int ReplicasOf(const backend::Layout& layout) {
  return layout.train_gpus > 0 ? std::max(1, layout.train.dp) : 1;
}

}  // namespace

Result<std::unique_ptr<ClusterBackend>> ClusterBackend::Create(const recipe::Recipe& recipe,
                                                               ClusterOptions options,
                                                               std::string run_dir,
                                                               int start_version) {
  return Create(recipe, std::move(options), std::move(run_dir), start_version, Overrides{});
}

Result<std::unique_ptr<ClusterBackend>> ClusterBackend::Create(const recipe::Recipe& recipe,
                                                               ClusterOptions options,
                                                               std::string run_dir,
                                                               int start_version,
                                                               Overrides overrides) {
  std::unique_ptr<ClusterBackend> backend(
      new ClusterBackend(recipe, std::move(options), std::move(run_dir), start_version));
  Runtime& runtime = backend->runtime_;
  if (start_version > 0 && !std::filesystem::exists(runtime.CheckpointPath(start_version))) {
    return Status::Backend("cluster", "cannot resume at version " + std::to_string(start_version) +
                                          ": its checkpoint " +
                                          runtime.CheckpointPath(start_version) + " is missing");
  }
  std::error_code error;
  for (const char* sub : {"logs", "weights"}) {
    std::filesystem::create_directories(std::filesystem::path(runtime.run_dir) / sub, error);
    if (error) {
      return Status::Backend(
          "cluster", "cannot create " + runtime.run_dir + "/" + sub + ": " + error.message());
    }
  }
  if (overrides.launchers.empty()) {
    LIBRA_ASSIGN_OR_RETURN(overrides.launchers, MakeLaunchers(backend->options_.launcher));
  }
  if (overrides.launchers.size() != backend->options_.launcher.hosts.size()) {
    return Status::Internal(StrFormat("%zu launchers for %zu nodes", overrides.launchers.size(),
                                      backend->options_.launcher.hosts.size()));
  }
  backend->launchers_ = std::move(overrides.launchers);
  backend->loop_ = std::move(overrides.loop);
  if (!backend->loop_) {
    LIBRA_ASSIGN_OR_RETURN(backend->loop_, EventLoop::Create());
  }
  backend->processes_ = std::make_unique<ProcessSet>(backend->loop_.get());
  (void)RaiseOpenFileLimit();
  HttpTransportOptions transport;
  transport.max_host_connections = backend->options_.engine.max_connections;
  LIBRA_ASSIGN_OR_RETURN(backend->transport_,
                         HttpTransport::Create(backend->loop_.get(), transport));
  // Every tool call makes and removes a folder and a few files: on tmpfs that is memory, on
  // ext4 it was half the controller's cost per turn (inode allocation). The scratch folder is
  // named after this process, so that a later libra removes it, and the carried supervisor in
  // it (sandbox.h), if this one dies without cleaning up.
  RemoveFoldersOfDeadLibras("/dev/shm", "libra-scratch-");
  std::string scratch_template =
      StrFormat("/dev/shm/libra-scratch-%d-XXXXXX", static_cast<int>(getpid()));
  if (access("/dev/shm", W_OK) == 0 && mkdtemp(scratch_template.data()) != nullptr) {
    backend->scratch_dir_ = scratch_template;
  } else {
    backend->scratch_dir_ = runtime.run_dir + "/scratch";
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
  runtime.loop = backend->loop_.get();
  runtime.processes = backend->processes_.get();
  runtime.transport = backend->transport_.get();
  for (const auto& launcher : backend->launchers_) runtime.launchers.push_back(launcher.get());
  backend->engines_ = std::make_unique<EngineSupervisor>(runtime, backend->versions_);
  backend->trainer_ = std::make_unique<TrainerSupervisor>(runtime, start_version);
  backend->sync_ = std::make_unique<WeightSync>(runtime, *backend->engines_, *backend->trainer_,
                                                backend->versions_);
  backend->turns_ =
      std::make_unique<TurnRunner>(runtime, *backend->engines_, *backend->sandbox_, recipe.seed);
  EventSink& next = *backend;
  backend->evaluator_ =
      std::make_unique<Evaluator>(runtime, *backend->engines_, *backend->turns_, next);
  runtime.sink = backend->evaluator_.get();  // it passes on every event that is not its own
  WeightSync* sync = backend->sync_.get();
  backend->engines_->set_on_lost([sync] { sync->Invalidate(); });
  backend->trainer_->set_on_lost([sync] { sync->Invalidate(); });
  return backend;
}

ClusterBackend::ClusterBackend(const recipe::Recipe& recipe, ClusterOptions options,
                               std::string run_dir, int start_version)
    : recipe_(recipe), options_(std::move(options)), start_version_(start_version) {
  runtime_.options = &options_;
  runtime_.run_dir = std::filesystem::absolute(run_dir).lexically_normal().string();
  runtime_.sink = this;
}

ClusterBackend::~ClusterBackend() {
  runtime_.shutting_down = true;
  sandbox_.reset();
  if (!scratch_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_, ignored);
  }
  transport_.reset();
  // Longer than the ssh launcher's remote grace, so remote process groups end in order.
  if (processes_) processes_->StopAll(kStopGrace);
}

void ClusterBackend::Emit(backend::EventWhat what, bool completes) {
  ready_.push_back(backend::Event{runtime_.Now(), std::move(what)});
  if (completes) --in_flight_;
}

void ClusterBackend::Fail(Status error) {
  if (fatal_.ok()) fatal_ = std::move(error);
  loop_->Stop();
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
          turns_->StartTurn(a);
        } else if constexpr (std::is_same_v<T, backend::RunTool>) {
          turns_->RunTool(a);
        } else if constexpr (std::is_same_v<T, backend::Train>) {
          Train(a);
        } else if constexpr (std::is_same_v<T, backend::SyncWeights>) {
          Sync(a);
        } else {
          Evaluate(a);
        }
      },
      action);
  return Status();
}

Result<std::vector<backend::Event>> ClusterBackend::Wait() {
  if (ready_.empty() && fatal_.ok() && (in_flight_ > 0 || engines_->restarting() > 0)) {
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
  return engines_->Pid(instance);
}

std::optional<pid_t> ClusterBackend::TrainerPid() const { return trainer_->Pid(); }

// ---- Layout ------------------------------------------------------------------------------------

void ClusterBackend::ApplyLayout(const backend::Layout& layout) {
  if (started_) return Relayout(layout);
  started_ = true;
  if (layout.train.gpus() != layout.train_gpus) {
    return Fail(Status::Backend("cluster", "the layout's trainer does not use its GPUs"));
  }
  trainer_->Start();
  trainer_->WhenReady([this, layout] {
    // The start version on disk: what every engine starts from.
    sync_->SaveInitial(start_version_, [this, layout](Status saved) {
      if (!saved.ok()) return Fail(saved);
      Relayout(layout);
    });
  });
}

void ClusterBackend::Relayout(const backend::Layout& layout) {
  // GPUs change hands in order: the trainer's replicas that leave go first, then the engines
  // that leave release their memory (they sleep, or stop), then engines start or wake, and only
  // then do joining replicas take their GPUs. A trainer restart in between sends it all again
  // (the parts already done are no-ops the second time).
  const uint64_t attempt = ++layout_attempt_;
  trainer_->SetJob([this, layout] { Relayout(layout); });
  const int replicas = ReplicasOf(layout);
  const bool announce = !engines_->instances().empty();
  auto current = [this, attempt] { return attempt == layout_attempt_; };
  auto finish = [this, current, layout, replicas, announce] {
    trainer_->SetReplicas(replicas, announce, [this, current](Status joined) {
      if (!current()) return;
      if (!joined.ok()) return Fail(joined);
      trainer_->EndJob();
      LayoutDone();
    });
  };
  if (replicas >= trainer_->replicas()) {
    return ApplyEngines(layout, [current, finish](Status) {
      if (current()) finish();
    });
  }
  trainer_->SetReplicas(replicas, announce, [this, current, layout, finish](Status left) {
    if (!current()) return;
    if (!left.ok()) return Fail(left);
    ApplyEngines(layout, [current, finish](Status) {
      if (current()) finish();
    });
  });
}

void ClusterBackend::ProbeCapabilities(Done done) {
  const Engine* e = engines_->Serving(InstanceId(0));
  if (e == nullptr) return done(Status());
  ProbePlan plan;
  plan.prompt_token = options_.agent.tool_call_token;
  plan.reload = options_.trainer.weight_sync == WeightSyncMode::kDisk;
  plan.version = versions_.policy;
  plan.sleep = layout_.colocated;
  const std::string name = e->name;
  const EngineClient client = *e->client;
  const double started = runtime_.Now();
  ProbeEngine(
      runtime_, client, plan, [this, name, client, started, done](EngineCapabilities found) {
        const Status refused = CheckCapabilities(name, client, found, options_, layout_.colocated);
        if (!refused.ok()) return Fail(refused);
        Emit(backend::Incident{"capabilities", name, found.ToString(), started}, false);
        done(Status());
      });
}

void ClusterBackend::LayoutDone() {
  Emit(backend::LayoutApplied{}, true);
  if (!layout_applied_) {
    layout_applied_ = true;
    AfterEvaluation();  // evaluations submitted before the engines served
  }
  // Instances whose engine was dropped while starting are down from the start.
  const std::vector<int64_t>& serving = engines_->instances();
  for (size_t i = 0; i < serving.size(); ++i) {
    const Engine& e = engines_->at(serving[i]);
    if (e.state == EngineState::kDead) {
      Emit(backend::InstanceHealth{InstanceId(static_cast<int64_t>(i)), false,
                                   e.name + " could not be started"},
           false);
    }
  }
}

void ClusterBackend::ApplyEngines(const backend::Layout& layout, Done done) {
  const double started = runtime_.Now();
  const bool first = engines_->instances().empty();
  std::vector<EngineView> views;
  for (const auto& [key, e] : engines_->engines()) {
    views.push_back(EngineView{key, e.spec, e.in_layout, e.state == EngineState::kSleeping,
                               e.state == EngineState::kDead});
  }
  const LayoutAssignment assignment = AssignEngines(engines_->instances(), views, layout.instances);
  for (int64_t key : engines_->instances()) engines_->at(key).in_layout = false;
  // Releasing steps (sleeps, stops) end before acquiring ones (wakes, starts) begin, so that no
  // two processes hold one GPU's memory at once.
  std::vector<AsyncStep> release, acquire;
  // What happened to each engine, in the order decided; written as the steps end.
  auto changes = std::make_shared<std::vector<std::string>>();
  std::vector<int64_t> next(layout.instances.size());
  for (size_t i = 0; i < layout.instances.size(); ++i) {
    if (!assignment.serving[i]) continue;
    Engine& e = engines_->at(*assignment.serving[i]);
    e.spec = layout.instances[i];
    e.in_layout = true;
    next[i] = e.key;
  }
  for (const EngineChange& change : assignment.changes) {
    const size_t slot = changes->size();
    switch (change.kind) {
      case EngineChange::Kind::kSleep:
        changes->push_back(engines_->at(change.engine).name + " sleeps");
        release.push_back([this, key = change.engine, changes, slot](Done d) {
          engines_->Sleep(key, [this, key, changes, slot, d = std::move(d)](Status s) {
            if (engines_->at(key).state != EngineState::kSleeping) {
              (*changes)[slot] = engines_->at(key).name + " stops (it could not sleep)";
            }
            d(s);
          });
        });
        break;
      case EngineChange::Kind::kWake:
        changes->push_back(engines_->at(change.engine).name + " wakes");
        acquire.push_back(
            [this, key = change.engine](Done d) { engines_->Wake(key, std::move(d)); });
        break;
      case EngineChange::Kind::kStop:
        changes->push_back(engines_->at(change.engine).name + " stops");
        release.push_back(
            [this, key = change.engine](Done d) { engines_->StopAndWait(key, std::move(d)); });
        break;
      case EngineChange::Kind::kStart: {
        const backend::InstanceSpec& spec = layout.instances[static_cast<size_t>(change.instance)];
        Engine& e = engines_->Add(spec);
        e.in_layout = true;
        next[static_cast<size_t>(change.instance)] = e.key;
        changes->push_back(e.name + StrFormat(" starts (tp %d)", spec.tp));
        acquire.push_back([this, key = e.key](Done d) { engines_->Launch(key, std::move(d)); });
        break;
      }
    }
  }
  engines_->SetInstances(std::move(next));
  layout_ = layout;
  trainer_->set_layout_replicas(ReplicasOf(layout));
  sync_->Invalidate();  // the serving set may have changed: a new group at the next sync
  auto acquired = [this, first, started, changes, done](Status s) {
    if (!s.ok() && first) return Fail(s);
    if (first) return ProbeCapabilities(done);
    Emit(backend::Incident{"switch", "cluster", StrJoin(*changes, ", "), started}, false);
    done(Status());
  };
  RunAll(*loop_, std::move(release),
         [this, acquire = std::move(acquire), acquired = std::move(acquired)](Status) mutable {
           RunAll(*loop_, std::move(acquire), std::move(acquired));
         });
}

// ---- Training and sync -------------------------------------------------------------------------

void ClusterBackend::Train(const backend::Train& train) {
  auto request = std::make_shared<TrainStepRequest>();
  request->step = train.step;
  request->timeout_s = options_.trainer.step_timeout_s;
  Result<std::vector<TrainSequence>> sequences =
      turns_->TakeSequences(train.trajectories, train.advantages);
  if (!sequences.ok()) {
    return Fail(Status::Internal("train step " + std::to_string(train.step) + ": " +
                                 sequences.status().message()));
  }
  request->sequences = std::move(*sequences);
  if (std::optional<backend::Incident> overshoot = turns_->TakeOvershoot()) {
    Emit(std::move(*overshoot), false);
  }
  const double started = runtime_.Now();
  if (!layout_.colocated) return SendTrainStep(request, started);
  // Colocated: the engines give their memory to training for the step.
  std::vector<AsyncStep> steps;
  for (int64_t key : engines_->instances()) {
    if (engines_->at(key).state != EngineState::kReady) continue;
    steps.push_back([this, key](Done d) {
      engines_->Drain(key, [this, key, d = std::move(d)] { engines_->Sleep(key, d); });
    });
  }
  RunAll(*loop_, std::move(steps), [this, request, started](Status s) {
    if (!s.ok()) return Fail(s);
    SendTrainStep(request, started);
  });
}

void ClusterBackend::SendTrainStep(std::shared_ptr<TrainStepRequest> request, double started_at) {
  trainer_->SetJob([this, request, started_at] { SendTrainStep(request, started_at); });
  trainer_->WhenReady([this, request, started_at] {
    const TrainerClient& client = trainer_->client();
    Result<HttpRequest> http = client.TrainStep(*request);
    if (!http.ok()) return Fail(http.status());
    transport_->Send(*http, [this, request, started_at](Result<HttpResponse> response) {
      if (!response.ok()) return trainer_->RequestFailed(response.status());
      Result<TrainStepResult> result = trainer_->client().ParseTrainStep(*request, *response);
      if (!result.ok()) return Fail(result.status());
      const int version = result->version;
      const TrainStepResult step_result = *result;
      // A checkpoint of every version: a restarted trainer resumes from it.
      const std::string path = runtime_.CheckpointPath(version);
      runtime_.Control(
          trainer_->client().SaveWeights(path, version),
          [this, path](const HttpResponse& r) {
            return trainer_->client().ParseSaveWeights(path, r).status();
          },
          [this, request, started_at, version, path, step_result](Status saved) {
            if (!saved.ok()) return trainer_->RequestFailed(saved);
            trainer_->Checkpointed(version, path);
            trainer_->EndJob();
            backend::TrainDone train_done{request->step, started_at, step_result.logprob_diff,
                                          step_result.clip_fraction, Diverged(step_result)};
            auto done = [this, train_done] { Emit(train_done, true); };
            if (!layout_.colocated) return done();
            WakeColocated([this, done](Status s) {
              if (!s.ok()) return Fail(s);
              done();
            });
          });
    });
  });
}

std::string ClusterBackend::Diverged(const TrainStepResult& result) const {
  const TrainerOptions& t = options_.trainer;
  const char* why =
      "the engines do not sample from the weights the trainer trains (a weight sync that did "
      "not load, other sampling settings than the trainer assumes, or numerics that differ)";
  if (t.max_logprob_diff > 0 && result.logprob_diff && *result.logprob_diff > t.max_logprob_diff) {
    return StrFormat(
        "train step %d: the trainer's log-probabilities of the trained tokens differ from the "
        "engines' by %.3g on average, more than [trainer] max_logprob_diff = %g allows: %s",
        result.step, *result.logprob_diff, t.max_logprob_diff, why);
  }
  if (t.max_clip_fraction > 0 && result.clip_fraction &&
      *result.clip_fraction > t.max_clip_fraction) {
    return StrFormat(
        "train step %d: the trainer clipped %.1f%% of the trained tokens, more than [trainer] "
        "max_clip_fraction = %g allows: %s",
        result.step, 100 * *result.clip_fraction, t.max_clip_fraction, why);
  }
  return "";
}

void ClusterBackend::WakeColocated(Done done) {
  std::vector<AsyncStep> steps;
  for (int64_t key : engines_->instances()) {
    engines_->Resume(key);
    Engine& e = engines_->at(key);
    if (e.stopped_to_free) {
      // It could not sleep and was stopped: its GPUs serve again, so it starts again.
      e.stopped_to_free = false;
      steps.push_back([this, key](Done d) {
        engines_->Launch(key, [this, key, d = std::move(d)](Status s) {
          const Engine& engine = engines_->at(key);
          if (s.ok()) {
            Emit(backend::InstanceHealth{engine.spec.id, true, engine.name + " started again"},
                 false);
          }
          d(s);
        });
      });
      continue;
    }
    if (e.state != EngineState::kSleeping) continue;
    steps.push_back([this, key](Done d) { engines_->Wake(key, std::move(d)); });
  }
  RunAll(*loop_, std::move(steps), std::move(done));
}

void ClusterBackend::Sync(const backend::SyncWeights& sync) {
  const double started = runtime_.Now();
  const int version = sync.version;
  if (options_.trainer.weight_sync == WeightSyncMode::kNone) {
    // Rollout or evaluation only: the engines keep the weights they started with.
    if (version == start_version_ + 1 || !warned_no_sync_) {
      warned_no_sync_ = true;
      Emit(backend::Incident{"sync", "trainer",
                             "weight_sync = \"none\": the engines keep the weights they started "
                             "with; trained versions stay in weights/ only",
                             started},
           false);
    }
    Emit(backend::SyncDone{version, started}, true);
    return;
  }
  if (evaluator_->busy() || !queued_evals_.empty()) {
    // The engines keep the version being evaluated until its score is in.
    waiting_syncs_.push_back(sync);
    return;
  }
  LoadVersion(version, [this, version, started] {
    Emit(backend::SyncDone{version, started}, true);
  });
}

void ClusterBackend::LoadVersion(int version, std::function<void()> then) {
  trainer_->SetJob([this, version, then] { LoadVersion(version, then); });
  trainer_->WhenReady([this, version, then] {
    sync_->Sync(version, [this, version, then](Status s) {
      if (!s.ok()) return trainer_->RequestFailed(s);
      trainer_->EndJob();
      versions_.synced = version;
      then();
    });
  });
}

void ClusterBackend::Evaluate(const backend::Evaluate& evaluate) {
  if (!layout_applied_ || evaluator_->busy()) {
    queued_evals_.push_back(evaluate);
    return;
  }
  const double started = runtime_.Now();
  const int version = evaluate.version;
  if (version > start_version_ && options_.trainer.weight_sync == WeightSyncMode::kNone) {
    Emit(backend::EvalDone{version, std::nullopt,
                           "weight_sync = \"none\": the engines never load a trained version",
                           started},
         true);
    return AfterEvaluation();
  }
  auto run = [this, evaluate, started] {
    evaluator_->Run(evaluate, [this, version = evaluate.version, started](double score) {
      Emit(backend::EvalDone{version, score, "", started}, true);
      AfterEvaluation();
    });
  };
  // The last version is never synced for rollout: the engines load it for its evaluation.
  if (versions_.synced == version) return run();
  LoadVersion(version, run);
}

void ClusterBackend::AfterEvaluation() {
  if (!queued_evals_.empty()) {
    const backend::Evaluate next = std::move(queued_evals_.front());
    queued_evals_.pop_front();
    return Evaluate(next);
  }
  for (const backend::SyncWeights& sync : std::exchange(waiting_syncs_, {})) Sync(sync);
}

}  // namespace libra::cluster
