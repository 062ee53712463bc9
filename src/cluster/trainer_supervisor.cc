#include "cluster/trainer_supervisor.h"

#include <filesystem>

#include "common/strings.h"

namespace libra::cluster {
namespace {

// A request may fail before the trainer's exit is seen: decide this much later.
constexpr std::chrono::milliseconds kExitSettle{1500};

}  // namespace

TrainerSupervisor::TrainerSupervisor(Runtime& runtime, int start_version) : runtime_(runtime) {
  checkpoint_ = runtime_.options->trainer.initial_weights;
  if (start_version > 0) {
    checkpoint_ = runtime_.CheckpointPath(start_version);
    version_ = start_version;
  }
}

void TrainerSupervisor::Start() {
  const TrainerOptions& t = runtime_.options->trainer;
  if (version_ > 0 || !t.has_prepare_command || std::filesystem::exists(t.initial_weights)) {
    return Launch();
  }
  Result<ProcessSpec> spec =
      runtime_.MakeSpec(t.node, "prepare", t.prepare_command,
                        runtime_.Values({{"weights", t.initial_weights},
                                         {"node", std::to_string(t.node)},
                                         {"host", runtime_.Address(t.node)}}),
                        t.env);
  if (!spec.ok()) return runtime_.Fail(spec.status());
  Result<ProcessId> prepare = runtime_.processes->Spawn(*spec, [this](const ExitStatus& e) {
    if (!e.success()) {
      return runtime_.Fail(Status::Backend("trainer", "prepare_command failed (" + e.ToString() +
                                                          "); " + runtime_.LogHint("prepare")));
    }
    Launch();
  });
  if (!prepare.ok()) return runtime_.Fail(prepare.status());
}

std::string TrainerSupervisor::ProcessName() const {
  return restarts_ > 0 ? StrFormat("trainer-r%d", restarts_) : "trainer";
}

void TrainerSupervisor::Launch() {
  const TrainerOptions& t = runtime_.options->trainer;
  const std::string& address = runtime_.Address(t.node);
  client_.emplace(StrFormat("http://%s:%d", address.c_str(), t.port));
  ready_ = false;
  stopping_ = false;
  replicas_ = 1;
  const std::string name = ProcessName();
  Result<ProcessSpec> spec =
      runtime_.MakeSpec(t.node, name, t.command,
                        runtime_.Values({{"port", std::to_string(t.port)},
                                         {"node", std::to_string(t.node)},
                                         {"host", address},
                                         {"weights", checkpoint_},
                                         {"version", std::to_string(version_)},
                                         {"replica", "replica-0"}}),
                        t.env);
  if (!spec.ok()) return runtime_.Fail(spec.status());
  Result<ProcessId> process =
      runtime_.processes->Spawn(*spec, [this](const ExitStatus& status) { OnExit(status); });
  if (!process.ok()) return runtime_.Fail(process.status());
  process_ = *process;
  runtime_.transport->WaitHealthy(
      client_->base_url() + "/health", t.health_timeout, [this, name](Status healthy) {
        if (!healthy.ok()) {
          return runtime_.Fail(
              Status::Backend("trainer", healthy.message() + "; " + runtime_.LogHint(name)));
        }
        ready_ = true;
        for (auto& then : std::exchange(on_ready_, {})) then();
      });
}

void TrainerSupervisor::WhenReady(std::function<void()> then) {
  if (restarting_) return;
  if (ready_) return then();
  on_ready_.push_back(std::move(then));
}

void TrainerSupervisor::SetReplicas(int replicas, bool announce, Done done) {
  // Sent to the trainer that serves (a restarted one included); a request that gets no reply
  // goes the way of every trainer request: if the trainer died, its restart sends the job again.
  const int asked_at = restarts_;
  WhenReady([this, asked_at, replicas, announce, done = std::move(done)]() mutable {
    // Restarted while it waited: the restart sets the replicas and sends the job again.
    if (restarts_ != asked_at) return;
    SendReplicas(replicas, announce, std::move(done));
  });
}

void TrainerSupervisor::SendReplicas(int replicas, bool announce, Done done) {
  const int restarts = restarts_;
  auto no_reply = std::make_shared<bool>(false);
  Members(replicas, announce, no_reply,
          [this, restarts, no_reply, done = std::move(done)](Status s) {
            if (s.ok() || !*no_reply) return done(s);
            runtime_.loop->AddTimer(kExitSettle, [this, restarts, s, done] {
              if (restarts_ != restarts || !ready_) return;  // restarted: sent again
              done(s);
            });
          });
}

void TrainerSupervisor::Members(int replicas, bool announce, std::shared_ptr<bool> no_reply,
                                Done done) {
  std::vector<AsyncStep> steps;
  const double started = runtime_.Now();
  const int from = replicas_;
  auto member = [this, no_reply](HttpRequest request) -> AsyncStep {
    return [this, request, no_reply](Done d) {
      runtime_.transport->Send(request,
                               [this, request, no_reply, d = std::move(d)](Result<HttpResponse> r) {
                                 if (!r.ok()) {
                                   *no_reply = true;
                                   return d(r.status());
                                 }
                                 d(client_->ParseMembership(request, *r).status());
                               });
    };
  };
  for (int i = from; i < replicas; ++i) {
    steps.push_back(member(client_->Join(StrFormat("replica-%d", i))));
  }
  for (int i = from - 1; i >= replicas; --i) {
    steps.push_back(member(client_->Leave(StrFormat("replica-%d", i))));
  }
  if (replicas == from) return RunAll(*runtime_.loop, std::move(steps), std::move(done));
  RunAll(*runtime_.loop, std::move(steps),
         [this, replicas, from, started, announce, done = std::move(done)](Status s) {
           if (s.ok()) {
             replicas_ = replicas;
             if (announce) {
               runtime_.Emit(
                   backend::Incident{
                       "switch", "trainer",
                       StrFormat("data parallelism %d -> %d replicas", from, replicas), started},
                   false);
             }
           }
           done(s);
         });
}

void TrainerSupervisor::RequestFailed(Status error) {
  const int restarts = restarts_;
  runtime_.loop->AddTimer(kExitSettle, [this, restarts, error] {
    if (restarts_ != restarts || !ready_) return;  // restarted: sent again
    runtime_.Fail(error);
  });
}

std::optional<pid_t> TrainerSupervisor::Pid() const {
  if (!process_) return std::nullopt;
  return runtime_.processes->pid(*process_);
}

void TrainerSupervisor::OnExit(const ExitStatus& status) {
  process_.reset();
  ready_ = false;
  if (stopping_ || runtime_.shutting_down) return;
  const std::string name = ProcessName();
  runtime_.Emit(backend::Incident{"fault", "trainer",
                                  "exited (" + status.ToString() + "); " + runtime_.LogHint(name),
                                  runtime_.Now()},
                false);
  if (restarts_ >= runtime_.options->trainer.restarts) {
    return runtime_.Fail(Status::Backend("trainer", "exited (" + status.ToString() + ") after " +
                                                        std::to_string(restarts_) +
                                                        " restart(s); " + runtime_.LogHint(name)));
  }
  ++restarts_;
  restarting_ = true;
  if (on_lost_) on_lost_();
  const double started = runtime_.Now();
  const int replicas = layout_replicas_;
  Launch();
  // Not through WhenReady, which holds everything else back until the job is sent again.
  on_ready_.push_back([this, started, replicas, restarts = restarts_] {
    if (restarts_ != restarts) return;  // died again: that restart goes on
    SendReplicas(replicas, layout_known_, [this, started](Status s) {
      if (!s.ok()) return runtime_.Fail(s);
      restarting_ = false;
      runtime_.Emit(
          backend::Incident{
              "restart", "trainer",
              StrFormat("restarted from %s (version %d)", checkpoint_.c_str(), version_), started},
          false);
      // The step or sync it was working on, again. A copy runs: the job may set the next job,
      // which would destroy the running one (and what it captured) under it.
      if (const std::function<void()> job = job_) job();
    });
  });
}

}  // namespace libra::cluster
