#include "support/fake_backend.h"

namespace libra::test {

Status FakeBackend::Submit(const backend::Action& action) {
  const double now = queue_.now();
  if (const auto* a = std::get_if<backend::ApplyLayout>(&action)) {
    layout_ = a->layout;
    queue_.Push(now, 0, backend::Event{now, backend::LayoutApplied{}});
  } else if (const auto* turn = std::get_if<backend::StartTurn>(&action)) {
    turns_started.push_back(*turn);
    auto [it, fresh] = trajectories_.try_emplace(turn->trajectory);
    if (fresh) {
      it->second.script =
          workload_.Script(turn->prompt, turn->sample, turn->policy_version, turn->skill);
    }
    it->second.last_turn = turn->turn;
    const workload::TurnScript& s = it->second.script.turns.at(static_cast<size_t>(turn->turn));
    backend::TurnDone done;
    done.trajectory = turn->trajectory;
    done.instance = turn->instance;
    done.generated_tokens = s.generated_tokens;
    done.end = s.end;
    done.tool = s.tool;
    done.reward = s.end == workload::TurnEnd::kToolCall ? 0 : it->second.script.reward;
    done.started_at = now;
    const double end = now + costs_.seconds_per_token * static_cast<double>(s.generated_tokens);
    queue_.Push(end, 2, backend::Event{end, done});
  } else if (const auto* tool = std::get_if<backend::RunTool>(&action)) {
    const Trajectory& t = trajectories_.at(tool->trajectory);
    const workload::TurnScript& s = t.script.turns.at(static_cast<size_t>(t.last_turn));
    const double end = now + s.tool_latency_s;
    queue_.Push(end, 3,
                backend::Event{end, backend::ToolDone{tool->trajectory, s.tool_status,
                                                      s.tool_output_tokens, now}});
  } else if (const auto* train = std::get_if<backend::Train>(&action)) {
    trains.push_back(*train);
    double tokens = 0;
    for (int64_t n : train->sequence_tokens) tokens += static_cast<double>(n);
    const double end = now + costs_.train_gpu_s_per_token * tokens / layout_.train_gpus;
    queue_.Push(end, 1, backend::Event{end, backend::TrainDone{train->step, now}});
  } else if (const auto* sync = std::get_if<backend::SyncWeights>(&action)) {
    const double end = now + costs_.sync_s;
    queue_.Push(end, 1, backend::Event{end, backend::SyncDone{sync->version, now}});
  }
  return Status();
}

Result<std::vector<backend::Event>> FakeBackend::Wait() {
  std::vector<backend::Event> events;
  while (!queue_.empty() && (events.empty() || queue_.next_time() == queue_.now())) {
    events.push_back(queue_.Pop().payload);
  }
  return events;
}

}  // namespace libra::test
