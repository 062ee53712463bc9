#include "cluster/evaluator.h"

#include <algorithm>
#include <chrono>

#include "common/strings.h"

namespace libra::cluster {

Evaluator::Evaluator(Runtime& runtime, EngineSupervisor& engines, TurnRunner& turns,
                     EventSink& next)
    : runtime_(runtime), engines_(engines), turns_(turns), next_(next) {}

void Evaluator::StartTurnAnywhere(size_t index) {
  const std::optional<InstanceId> instance = NextInstance();
  if (!instance) {
    return next_.Fail(Status::Backend(
        "cluster",
        StrFormat("cannot evaluate version %d: no rollout engine serves", active_->version)));
  }
  StartTurn(index, *instance);
}

void Evaluator::Run(const backend::Evaluate& evaluate, std::function<void(double)> done) {
  Active active;
  active.version = evaluate.version;
  active.prompts = evaluate.prompts;
  active.turn.assign(evaluate.prompts.size(), 0);
  active.remaining = evaluate.prompts.size();
  active.done = std::move(done);
  failures_.assign(evaluate.prompts.size(), 0);
  if (active.prompts.empty()) return active.done(0.0);
  active_ = std::move(active);
  for (size_t i = 0; i < active_->prompts.size(); ++i) StartTurnAnywhere(i);
}

std::optional<InstanceId> Evaluator::NextInstance() {
  const size_t n = engines_.instances().size();
  std::optional<InstanceId> any;
  for (size_t k = 0; k < n; ++k) {
    const auto id = InstanceId(static_cast<int64_t>((cursor_ + k) % n));
    Engine* e = engines_.Serving(id);
    if (e == nullptr || e->state == EngineState::kDead) continue;
    if (e->state == EngineState::kReady && !e->paused) {
      cursor_ = (cursor_ + k + 1) % n;
      return id;
    }
    if (!any) any = id;  // it serves once started, woken or resumed
  }
  if (any) cursor_ = (static_cast<size_t>(any->value) + 1) % n;
  return any;
}

void Evaluator::StartTurn(size_t index, InstanceId instance) {
  backend::StartTurn turn;
  turn.trajectory = TrajectoryId(kFirstEvalTrajectory + static_cast<int64_t>(index));
  turn.prompt = active_->prompts[index];
  turn.turn = active_->turn[index];
  turn.instance = instance;
  turn.policy_version = active_->version;
  turns_.StartTurn(turn);
}

namespace {

/// The trajectory an event is about, for the events of trajectories.
std::optional<TrajectoryId> TrajectoryOf(const backend::EventWhat& what) {
  if (const auto* done = std::get_if<backend::TurnDone>(&what)) return done->trajectory;
  if (const auto* tool = std::get_if<backend::ToolDone>(&what)) return tool->trajectory;
  if (const auto* failed = std::get_if<backend::TurnFailed>(&what)) return failed->trajectory;
  return std::nullopt;
}

}  // namespace

void Evaluator::Emit(backend::EventWhat what, bool completes) {
  const std::optional<TrajectoryId> id = TrajectoryOf(what);
  if (!id || !Owns(*id)) return next_.Emit(std::move(what), completes);
  if (!active_) return;  // a late word on an evaluation that ended
  const auto index = static_cast<size_t>(id->value - kFirstEvalTrajectory);
  if (const auto* failed = std::get_if<backend::TurnFailed>(&what)) return OnTurnFailed(*failed);
  if (std::holds_alternative<backend::ToolDone>(what)) {
    ++active_->turn[index];
    return StartTurnAnywhere(index);
  }
  const auto& done = std::get<backend::TurnDone>(what);
  if (done.end == workload::TurnEnd::kToolCall) {
    return turns_.RunTool(backend::RunTool{done.trajectory, done.tool});
  }
  turns_.Forget(done.trajectory);
  active_->reward_sum += done.reward;
  if (--active_->remaining > 0) return;
  const double score = active_->reward_sum / static_cast<double>(active_->prompts.size());
  std::function<void(double)> finished = std::move(active_->done);
  active_.reset();
  finished(score);
}

void Evaluator::OnTurnFailed(const backend::TurnFailed& failed) {
  const auto index = static_cast<size_t>(failed.trajectory.value - kFirstEvalTrajectory);
  if (++failures_[index] > kMaxEvalTurnFailures) {
    return next_.Fail(Status::Backend(
        "cluster",
        StrFormat("evaluation of version %d: held-out prompt %lld failed %d times (last: %s); a "
                  "version without its score would bias the comparison, so the run stops",
                  active_->version, static_cast<long long>(active_->prompts[index]),
                  failures_[index], failed.reason.c_str())));
  }
  // A dropped trajectory lost its transcript: it starts again from its prompt.
  if (failed.dropped) active_->turn[index] = 0;
  // Elsewhere, after a pause that grows with the failures (an engine restarting, a layout
  // changing): [engine] retry_backoff_s, doubling up to 16 times it.
  const double pause_s = runtime_.options->engine.retry_backoff_s *
                         static_cast<double>(1 << std::min(failures_[index] - 1, 4));
  const auto pause = std::chrono::duration_cast<EventLoop::Clock::duration>(
      std::chrono::duration<double>(pause_s));
  runtime_.loop->AddTimer(pause, [this, index, version = active_->version] {
    if (active_ && active_->version == version) StartTurnAnywhere(index);
  });
}

void Evaluator::Fail(Status error) { next_.Fail(std::move(error)); }

}  // namespace libra::cluster
