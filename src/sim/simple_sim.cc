#include "sim/simple_sim.h"

#include <algorithm>

#include "common/strings.h"

namespace libra::sim {
namespace {

// Ranks order simultaneous events: layout first, then completions of the trainer, then turns,
// then tools. Changing them changes every recorded run.
constexpr int kRankLayout = 0;
constexpr int kRankTrain = 1;
constexpr int kRankSync = 2;
constexpr int kRankTurn = 3;
constexpr int kRankTool = 4;

}  // namespace

SimpleSim::SimpleSim(const recipe::SimSpec& spec, const workload::Workload& workload)
    : spec_(spec), workload_(workload) {}

Status SimpleSim::Submit(const backend::Action& action) {
  const double now = queue_.now();
  if (const auto* a = std::get_if<backend::ApplyLayout>(&action)) {
    if (!trajectories_.empty()) {
      return Status::Backend("sim", "changing the layout during a run is not supported yet");
    }
    layout_ = a->layout;
    instances_.clear();
    for (size_t i = 0; i < layout_.instances.size(); ++i) {
      if (layout_.instances[i].id.value != static_cast<int64_t>(i)) {
        return Status::Backend("sim", "instance ids must be 0..n-1 in order");
      }
      instances_.push_back(Instance{layout_.instances[i], 0, {}});
    }
    queue_.Push(now, kRankLayout, Pending{backend::Event{now, backend::LayoutApplied{}}, 0});
    return Status();
  }
  if (const auto* turn = std::get_if<backend::StartTurn>(&action)) {
    return StartOrQueue(*turn);
  }
  if (const auto* tool = std::get_if<backend::RunTool>(&action)) {
    auto it = trajectories_.find(tool->trajectory);
    if (it == trajectories_.end() || !it->second.awaiting_tool) {
      return Status::Backend("sim", "RunTool for trajectory " + tool->trajectory.ToString() +
                                        " that is not waiting for a tool");
    }
    // The tool belongs to the last turn that ran.
    const Trajectory& t = it->second;
    const workload::TurnScript* called =
        t.next_turn > 0 ? &t.script.turns[static_cast<size_t>(t.next_turn - 1)] : nullptr;
    if (called == nullptr || called->end != workload::TurnEnd::kToolCall) {
      return Status::Backend("sim",
                             "trajectory " + tool->trajectory.ToString() + " called no tool");
    }
    it->second.awaiting_tool = false;
    backend::ToolDone done{tool->trajectory, called->tool_status, called->tool_output_tokens, now};
    const double end = now + called->tool_latency_s;
    queue_.Push(end, kRankTool, Pending{backend::Event{end, done}, 0});
    return Status();
  }
  if (const auto* train = std::get_if<backend::Train>(&action)) {
    if (layout_.train_gpus <= 0) return Status::Backend("sim", "Train with no training GPUs");
    int64_t tokens = 0;
    for (int64_t n : train->sequence_tokens) tokens += n;
    const double duration =
        spec_.train_gpu_s_per_token * static_cast<double>(tokens) / layout_.train_gpus;
    if (layout_.colocated) PauseInstances(duration);
    queue_.Push(now + duration, kRankTrain,
                Pending{backend::Event{now + duration, backend::TrainDone{train->step, now}}, 0});
    return Status();
  }
  if (const auto* sync = std::get_if<backend::SyncWeights>(&action)) {
    PauseInstances(spec_.sync_s);
    queue_.Push(
        now + spec_.sync_s, kRankSync,
        Pending{backend::Event{now + spec_.sync_s, backend::SyncDone{sync->version, now}}, 0});
    return Status();
  }
  return Status::Internal("sim: unhandled action");
}

Status SimpleSim::StartOrQueue(const backend::StartTurn& turn) {
  const int64_t index = turn.instance.value;
  if (index < 0 || index >= static_cast<int64_t>(instances_.size())) {
    return Status::Backend("sim", "StartTurn on unknown instance " + turn.instance.ToString());
  }
  auto it = trajectories_.find(turn.trajectory);
  Trajectory fresh;
  if (it == trajectories_.end()) {
    fresh.script = workload_.Script(turn.prompt, turn.sample, turn.policy_version, turn.skill);
  }
  const Trajectory& current = it == trajectories_.end() ? fresh : it->second;
  if (current.running || current.awaiting_tool || turn.turn != current.next_turn ||
      turn.turn >= static_cast<int>(current.script.turns.size())) {
    return Status::Backend("sim",
                           StrFormat("trajectory %lld: unexpected turn %d",
                                     static_cast<long long>(turn.trajectory.value), turn.turn));
  }
  if (it == trajectories_.end())
    it = trajectories_.emplace(turn.trajectory, std::move(fresh)).first;
  Trajectory& t = it->second;
  t.running = true;
  Instance& instance = instances_[static_cast<size_t>(index)];
  if (instance.running < spec_.max_batch_per_gpu * instance.spec.tp) {
    Begin(instance, turn, queue_.now());
  } else {
    instance.queue.push_back(turn);
  }
  return Status();
}

void SimpleSim::Begin(Instance& instance, const backend::StartTurn& turn, double at) {
  Trajectory& t = trajectories_.at(turn.trajectory);
  const workload::TurnScript& script = t.script.turns[static_cast<size_t>(turn.turn)];
  const int64_t prefill = t.last_instance == instance.spec.id
                              ? turn.context_tokens - t.context_after_last_turn
                              : turn.context_tokens;
  const double duration =
      (static_cast<double>(prefill) * spec_.prefill_s_per_token +
       static_cast<double>(script.generated_tokens) * spec_.decode_s_per_token) /
      instance.spec.tp;
  ++instance.running;
  t.turn_start = std::max(at, paused_until_);
  t.turn_end = t.turn_start + duration;
  t.last_instance = instance.spec.id;
  t.context_after_last_turn = turn.context_tokens + script.generated_tokens;
  ++t.next_turn;

  backend::TurnDone done;
  done.trajectory = turn.trajectory;
  done.instance = instance.spec.id;
  done.generated_tokens = script.generated_tokens;
  done.end = script.end;
  done.tool = script.tool;
  done.reward = script.end == workload::TurnEnd::kToolCall ? 0 : t.script.reward;
  done.started_at = t.turn_start;
  queue_.Push(t.turn_end, kRankTurn, Pending{backend::Event{t.turn_end, done}, ++t.generation});
}

void SimpleSim::PauseInstances(double duration) {
  const double now = queue_.now();
  const double until = std::max(paused_until_, now + duration);
  const double extra = until - std::max(paused_until_, now);
  paused_until_ = until;
  if (extra <= 0) return;
  // Iterate in id order so that the re-pushed events get a deterministic sequence.
  std::vector<TrajectoryId> running;
  for (const auto& [id, t] : trajectories_) {
    if (t.running && t.turn_end > now) running.push_back(id);
  }
  std::sort(running.begin(), running.end());
  for (TrajectoryId id : running) {
    Trajectory& t = trajectories_.at(id);
    if (t.next_turn == 0 || t.turn_end <= now) continue;
    t.turn_end += extra;
    const workload::TurnScript& script = t.script.turns[static_cast<size_t>(t.next_turn - 1)];
    backend::TurnDone done;
    done.trajectory = id;
    done.instance = t.last_instance;
    done.generated_tokens = script.generated_tokens;
    done.end = script.end;
    done.tool = script.tool;
    done.reward = script.end == workload::TurnEnd::kToolCall ? 0 : t.script.reward;
    done.started_at = t.turn_start;
    queue_.Push(t.turn_end, kRankTurn, Pending{backend::Event{t.turn_end, done}, ++t.generation});
  }
}

void SimpleSim::Drain(Instance& instance) {
  while (!instance.queue.empty() && instance.running < spec_.max_batch_per_gpu * instance.spec.tp) {
    const backend::StartTurn turn = instance.queue.front();
    instance.queue.pop_front();
    Begin(instance, turn, queue_.now());
  }
}

Result<std::vector<backend::Event>> SimpleSim::Wait() {
  std::vector<backend::Event> events;
  while (!queue_.empty() && (events.empty() || queue_.next_time() == queue_.now())) {
    auto entry = queue_.Pop();
    if (auto* done = std::get_if<backend::TurnDone>(&entry.payload.event.what)) {
      auto it = trajectories_.find(done->trajectory);
      if (it == trajectories_.end() || entry.payload.generation != it->second.generation) {
        continue;  // rescheduled by a pause
      }
      Trajectory& t = it->second;
      t.running = false;
      t.awaiting_tool = done->end == workload::TurnEnd::kToolCall;
      Instance& instance = instances_[static_cast<size_t>(done->instance.value)];
      --instance.running;
      if (done->end != workload::TurnEnd::kToolCall) trajectories_.erase(it);
      Drain(instance);
    }
    events.push_back(std::move(entry.payload.event));
  }
  return events;
}

}  // namespace libra::sim
