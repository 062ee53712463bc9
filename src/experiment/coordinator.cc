#include "experiment/coordinator.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/strings.h"

namespace libra::experiment {

int64_t HeldOutPrompt(int index) {
  // Far beyond any prompt a run trains on (and the planner's startup profile).
  constexpr int64_t kFirstHeldOut = int64_t{1} << 41;
  return kFirstHeldOut + index;
}

std::vector<double> HeldOutDifficulties(const workload::Workload& workload, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(workload.Prompt(HeldOutPrompt(i)).difficulty);
  return out;
}

std::vector<double> GroupAdvantages(const std::vector<double>& rewards, int group_size) {
  LIBRA_CHECK(group_size >= 1 && rewards.size() % static_cast<size_t>(group_size) == 0)
      << rewards.size() << " rewards in groups of " << group_size;
  std::vector<double> advantages(rewards.size());
  const auto n = static_cast<size_t>(group_size);
  for (size_t first = 0; first < rewards.size(); first += n) {
    double mean = 0;
    for (size_t i = first; i < first + n; ++i) mean += rewards[i];
    mean /= static_cast<double>(n);
    double variance = 0;
    for (size_t i = first; i < first + n; ++i)
      variance += (rewards[i] - mean) * (rewards[i] - mean);
    const double sd = std::sqrt(variance / static_cast<double>(n));
    for (size_t i = first; i < first + n; ++i) advantages[i] = (rewards[i] - mean) / (sd + 1e-6);
  }
  return advantages;
}

void Coordinator::Batch::Reserve(size_t trajectories, size_t turn_records, size_t tool_calls) {
  done.reserve(trajectories);
  turns.reserve(turn_records);
  tool_latencies_s.reserve(tool_calls);
  sequence_tokens.reserve(trajectories);
  sizes.reserve(trajectories);
  mean_versions.reserve(trajectories);
}

void Coordinator::Batch::Append(Batch&& group) {
  oldest_version = std::min(oldest_version, group.oldest_version);
  auto move = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  move(done, group.done);
  move(turns, group.turns);
  move(tool_latencies_s, group.tool_latencies_s);
  move(sequence_tokens, group.sequence_tokens);
  move(sizes, group.sizes);
  move(mean_versions, group.mean_versions);
  rollout_start = std::min(rollout_start, group.rollout_start);
  rollout_end = std::max(rollout_end, group.rollout_end);
}

Coordinator::Coordinator(const CoordinatorConfig& config, const workload::Workload& workload,
                         sched::Router& router, planner::Planner& planner,
                         backend::Backend& backend, Recorder& recorder)
    : config_(config),
      workload_(workload),
      router_(router),
      planner_(planner),
      backend_(backend),
      recorder_(recorder),
      skill_(workload.skill_params()),
      heldout_(HeldOutDifficulties(workload, config.eval_prompts)) {}

Result<RunSummary> Coordinator::Run(const std::function<bool()>& interrupted,
                                    const std::function<void(const Progress&)>& progress) {
  progress_ = progress;
  if (config_.resume) {
    const ResumeState& r = *config_.resume;
    steps_done_ = r.steps_done;
    next_train_step_ = r.steps_done;
    rollout_version_ = r.steps_done;
    summary_.steps = r.steps_done;
    summary_.trajectories = r.trajectories;
    next_prompt_ = r.next_prompt;
    next_trajectory_ = r.next_trajectory;
    event_seq_ = r.next_event_seq;
    decision_seq_ = r.next_decision_seq;
    time_offset_ = r.elapsed_s;
    step_start_ = trainer_free_since_ = r.elapsed_s;
    // The modelled skill drives simulated rewards only; a backend resumed from a checkpoint
    // measures its rewards, so the skipped steps add no modelled samples.
    for (int step = 0; step < r.steps_done; ++step) {
      skill_.RecordStep(step, {}, config_.staleness);
    }
  }
  LIBRA_ASSIGN_OR_RETURN(planner::Plan plan, planner_.Initial(config_.plan));
  if (plan.layout.instances.empty()) {
    return Status::Unschedulable("the plan has no rollout instance: " + plan.layout.ToString());
  }
  if (plan.layout.train_gpus <= 0) {
    return Status::Unschedulable("the plan has no training GPU: " + plan.layout.ToString());
  }
  layout_ = plan.layout;
  records::DecisionRecord decision;
  decision.seq = decision_seq_++;
  decision.planner = std::string(planner_.Name());
  decision.reason = (config_.resume ? "resumed, initial plan: " : "initial plan: ") + plan.reason;
  decision.trigger = config_.resume ? "resume" : "initial";
  decision.at_s = time_offset_;
  decision.train_gpus = layout_.train_gpus;
  decision.rollout_gpus = layout_.rollout_gpus();
  decision.layout = layout_.ToString();
  decision.predicted_step_s = plan.predicted_step_s;
  decision.applied = true;
  decisions_.push_back(decision);
  predicted_step_s_ = plan.predicted_step_s;
  pool_.emplace(layout_);
  LIBRA_RETURN_IF_ERROR(backend_.Submit(backend::ApplyLayout{layout_}));
  // The initial score, measured: a resumed run has it (or evaluates where it resumes).
  if (backend_.ScoresEvaluations() && !config_.resume) LIBRA_RETURN_IF_ERROR(SubmitEvaluation(0));

  // After the last step only its evaluation is awaited: the turns still in flight are left.
  std::vector<backend::Event> events;  // one vector for every wait
  while (steps_done_ < config_.steps || evals_pending_ > 0) {
    if (interrupted && interrupted()) {
      return Status::Interrupted(
          steps_done_ < config_.steps
              ? StrFormat("interrupted after %d of %d steps", steps_done_, config_.steps)
              : StrFormat("interrupted after %d steps, while evaluating", steps_done_));
    }
    LIBRA_RETURN_IF_ERROR(backend_.WaitInto(&events));
    if (events.empty()) {
      return Status::Internal(StrFormat(
          "the pipeline stalled after %d of %d steps: nothing is in flight and no step can "
          "start (%zu trajectories waiting for an instance, %d evaluations pending)",
          steps_done_, config_.steps, waiting_.size(), evals_pending_));
    }
    for (const backend::Event& event : events) {
      if (steps_done_ >= config_.steps && !std::holds_alternative<backend::EvalDone>(event.what)) {
        continue;
      }
      LIBRA_RETURN_IF_ERROR(Handle(event));
    }
  }
  return summary_;
}

Status Coordinator::Handle(const backend::Event& event) {
  const double now = event.at + time_offset_;
  LIBRA_RETURN_IF_ERROR(std::visit(
      [&](const auto& what) -> Status {
        using T = std::decay_t<decltype(what)>;
        if constexpr (std::is_same_v<T, backend::LayoutApplied>) {
          return OnLayout(now);
        } else if constexpr (std::is_same_v<T, backend::TurnDone>) {
          return OnTurnDone(now, what);
        } else if constexpr (std::is_same_v<T, backend::ToolDone>) {
          return OnToolDone(now, what);
        } else if constexpr (std::is_same_v<T, backend::TrainDone>) {
          return OnTrainDone(now, what);
        } else if constexpr (std::is_same_v<T, backend::SyncDone>) {
          return OnSyncDone(now, what);
        } else if constexpr (std::is_same_v<T, backend::TurnFailed>) {
          return OnTurnFailed(now, what);
        } else if constexpr (std::is_same_v<T, backend::InstanceHealth>) {
          return OnInstanceHealth(now, what);
        } else if constexpr (std::is_same_v<T, backend::EvalDone>) {
          return OnEvalDone(now, what);
        } else {
          AddEvent(what.kind.c_str(), Shifted(what.started_at), now, what.resource, std::nullopt,
                   next_train_step_, what.detail);
          return Status();
        }
      },
      event.what));
  return AdvanceTransition(now);
}

Status Coordinator::OnLayout(double now) {
  // After a transition, the kept instances keep their unfinished turns.
  std::vector<bool> kept;
  if (pool_ && pool_->phase() == planner::PoolPhase::kSwitching) {
    kept = planner::KeptInstances(pool_->current(), layout_);
    pool_->Applied();
    AddEvent("relayout", relayout_start_, now, "cluster", std::nullopt, next_train_step_,
             layout_.ToString());
  }
  std::vector<sched::InstanceState> instances;
  for (size_t i = 0; i < layout_.instances.size(); ++i) {
    sched::InstanceState state;
    state.id = layout_.instances[i].id;
    state.tp = layout_.instances[i].tp;
    if (i < kept.size() && kept[i]) state.active = instances_[i].active;
    instances.push_back(state);
  }
  instances_ = std::move(instances);
  index_.Reset(instances_);
  if (reclaiming_ && layout_.train_gpus > 0) {
    lent_from_.reset();
    reclaiming_ = false;
  }
  Launch();
  LIBRA_RETURN_IF_ERROR(RouteWaiting(now));
  return TryTrain(now);
}

void Coordinator::Changed(const sched::InstanceState& instance) {
  index_.Update(instances_, static_cast<size_t>(&instance - instances_.data()));
}

sched::InstanceState* Coordinator::FindInstance(InstanceId id) {
  // Layouts number their instances 0..n-1.
  if (id.value < 0 || id.value >= static_cast<int64_t>(instances_.size())) return nullptr;
  sched::InstanceState& instance = instances_[static_cast<size_t>(id.value)];
  return instance.id == id ? &instance : nullptr;
}

void Coordinator::Launch() {
  // The weights of version v allow the groups of steps up to v + staleness; rejected groups are
  // replaced.
  const int64_t per_step = config_.prompts_per_step;
  const int64_t steps = std::min<int64_t>(config_.steps, rollout_version_ + config_.staleness + 1);
  const int64_t allowed = steps * per_step + summary_.rejected_groups;
  for (; next_prompt_ < allowed; ++next_prompt_) {
    const int64_t prompt = next_prompt_;
    const workload::PromptInfo info = workload_.Prompt(prompt);
    Batch& group = groups_.Insert(PromptId(prompt), Batch());
    group.Reserve(static_cast<size_t>(config_.group_size), 0, 0);
    for (int s = 0; s < config_.group_size; ++s) {
      Trajectory t;
      t.id = TrajectoryId(next_trajectory_++);
      t.prompt = prompt;
      t.sample = s;
      t.step = static_cast<int>(prompt / per_step);
      t.prompt_tokens = info.prompt_tokens;
      t.context_tokens = info.prompt_tokens;
      waiting_.push_back(t.id);
      live_.Insert(t.id, std::move(t));
      ++group.remaining;
    }
  }
}

Status Coordinator::RouteWaiting(double now) {
  if (instances_.empty()) return Status();
  // Each waiting turn once, in order; those the router defers go back, in order, behind them.
  for (size_t n = waiting_.size(); n > 0; --n) {
    const TrajectoryId id = waiting_.front();
    waiting_.pop_front();
    Trajectory* waiting = live_.Find(id);
    LIBRA_CHECK(waiting != nullptr) << "waiting trajectory " << id.value << " is not live";
    Trajectory& t = *waiting;
    sched::RouteRequest request;
    request.trajectory = t.id;
    request.prompt = PromptId(t.prompt);
    request.turn = t.turns;
    request.prompt_tokens = t.prompt_tokens;
    request.context_tokens = t.context_tokens;
    request.generated_tokens = t.generated_tokens;
    request.previous = t.instance;
    request.last_tool = t.last_tool;
    request.index = &index_;
    if (router_.WantsOracle()) {
      if (!t.oracle_tokens) {
        backend::StartTurn probe;
        probe.prompt = t.prompt;
        probe.sample = t.sample;
        probe.policy_version = t.turns == 0 ? rollout_version_ : t.version;
        probe.skill = skill_.Skill(probe.policy_version);
        t.oracle_tokens = backend_.OracleTrajectoryTokens(probe);
      }
      if (t.oracle_tokens) request.oracle_remaining_tokens = *t.oracle_tokens - t.generated_tokens;
    }
    const sched::RouteDecision decision = router_.Route(request, instances_);
    if (!decision.instance) {
      waiting_.push_back(id);
      continue;
    }
    sched::InstanceState* chosen = FindInstance(*decision.instance);
    if (chosen == nullptr) {
      return Status::Internal(std::string(router_.Name()) + " routed to unknown instance " +
                              decision.instance->ToString());
    }
    ++chosen->active;
    Changed(*chosen);
    if (t.turns == 0) {
      t.version = rollout_version_;
      t.start_s = now;
      Batch& group = GroupOf(t.prompt);
      group.rollout_start = std::min(group.rollout_start, now);
      group.oldest_version = std::min(group.oldest_version, t.version);
    }
    t.turn_version = config_.partial_rollout ? rollout_version_ : t.version;
    t.instance = *decision.instance;
    t.path.push_back(t.instance.value);
    backend::StartTurn turn;
    turn.trajectory = t.id;
    turn.prompt = t.prompt;
    turn.sample = t.sample;
    turn.turn = t.turns;
    turn.instance = t.instance;
    turn.policy_version = t.turn_version;
    turn.context_tokens = t.context_tokens;
    turn.skill = skill_.Skill(t.turn_version);
    turn.priority = decision.priority;
    turn.move_kv = decision.move_kv;
    turn.setup_s = decision.setup_s;
    LIBRA_RETURN_IF_ERROR(backend_.Submit(turn));
  }
  return Status();
}

Status Coordinator::OnTurnDone(double now, const backend::TurnDone& done) {
  Trajectory* found = live_.Find(done.trajectory);
  if (found == nullptr) {
    return Status::Backend(std::string(backend_.Name()),
                           "turn done for unknown trajectory " + done.trajectory.ToString());
  }
  Trajectory& t = *found;
  if (sched::InstanceState* instance = FindInstance(done.instance)) {
    instance->active = std::max(0, instance->active - 1);
    Changed(*instance);
  }
  if (t.turns == 0 && done.prompt_tokens) {
    t.context_tokens += *done.prompt_tokens - t.prompt_tokens;
    t.prompt_tokens = *done.prompt_tokens;
  }
  ++t.turns;
  t.generated_tokens += done.generated_tokens;
  t.version_tokens +=
      static_cast<double>(t.turn_version) * static_cast<double>(done.generated_tokens);
  t.context_tokens += done.generated_tokens;
  ++summary_.turns;
  summary_.generated_tokens += done.generated_tokens;
  router_.OnTurnDone(sched::TurnObservation{t.id, PromptId(t.prompt), done.instance, t.turns - 1,
                                            done.generated_tokens, done.end});
  if (config_.record_events) {
    AddEvent("turn", Shifted(done.started_at), now, "instance " + done.instance.ToString(),
             t.id.value, t.step,
             StrFormat("turn %d: %lld tokens, %s", t.turns - 1,
                       static_cast<long long>(done.generated_tokens), NameOf(done.end).c_str()));
  }

  Turn turn;
  turn.instance = done.instance.value;
  turn.start_s = Shifted(done.started_at);
  turn.end_s = now;
  turn.generated_tokens = done.generated_tokens;
  turn.end = done.end;
  if (done.end == workload::TurnEnd::kToolCall) turn.tool = done.tool;
  t.turns_done.push_back(std::move(turn));

  if (done.end == workload::TurnEnd::kToolCall) {
    ++t.tool_calls;
    LIBRA_RETURN_IF_ERROR(backend_.Submit(backend::RunTool{t.id, done.tool}));
    return RouteWaiting(now);
  }

  return OnTrajectoryDone(now, t, done);
}

Status Coordinator::OnTrajectoryDone(double now, Trajectory& t, const backend::TurnDone& done) {
  Batch& group = GroupOf(t.prompt);
  records::TrajectoryRecord record = RecordOf(t, now, done);
  router_.OnTrajectoryDone(ObservationOf(t, record.truncated));
  group.done.push_back(std::move(record));
  planner::TrajectorySize size{t.prompt_tokens, t.generated_tokens,
                               t.context_tokens - t.prompt_tokens - t.generated_tokens};
  size.turns = t.turns;
  const bool rows = recorder_.KeepsTurns();
  for (size_t i = 0; i < t.turns_done.size(); ++i) {
    Turn& turn = t.turns_done[i];
    size.tool_s += turn.tool_latency_s;
    if (!turn.tool.empty()) group.tool_latencies_s.push_back(turn.tool_latency_s);
    if (rows) group.turns.push_back(RowOf(t.id.value, static_cast<int>(i), turn));  // t goes below
  }
  group.sizes.push_back(size);
  group.sequence_tokens.push_back(t.context_tokens);
  group.mean_versions.push_back(t.generated_tokens > 0
                                    ? t.version_tokens / static_cast<double>(t.generated_tokens)
                                    : t.version);
  group.rollout_end = std::max(group.rollout_end, now);
  if (--group.remaining == 0) {
    if (config_.stream_batches) {
      complete_.push_back(t.prompt);
    } else {
      const auto step = static_cast<size_t>(t.prompt / config_.prompts_per_step);
      if (step >= complete_in_step_.size()) complete_in_step_.resize(step + 1, 0);
      ++complete_in_step_[step];
    }
  }
  const TrajectoryId id = t.id;
  live_.Erase(id);
  LIBRA_RETURN_IF_ERROR(RouteWaiting(now));
  return TryTrain(now);
}

records::TrajectoryRecord Coordinator::RecordOf(const Trajectory& t, double now,
                                                const backend::TurnDone& done) {
  records::TrajectoryRecord record;
  record.id = t.id.value;
  record.prompt = t.prompt;
  record.sample = t.sample;
  record.step = t.step;
  record.version = t.version;
  record.turns = t.turns;
  record.tool_calls = t.tool_calls;
  record.prompt_tokens = t.prompt_tokens;
  record.generated_tokens = t.generated_tokens;
  record.start_s = t.start_s;
  record.end_s = now;
  record.reward = done.reward;
  record.truncated = done.end == workload::TurnEnd::kTruncated;
  for (size_t i = 0; i < t.path.size(); ++i) {
    if (i > 0) record.instances += ',';
    record.instances += std::to_string(t.path[i]);
    if (i > 0 && t.path[i] != t.path[i - 1]) ++record.migrations;
  }
  return record;
}

records::TurnRecord Coordinator::RowOf(int64_t trajectory, int index, Turn& turn) {
  records::TurnRecord row;
  row.trajectory = trajectory;
  row.turn = index;
  row.instance = turn.instance;
  row.start_s = turn.start_s;
  row.end_s = turn.end_s;
  row.generated_tokens = turn.generated_tokens;
  row.end = NameOf(turn.end);
  row.tool = std::move(turn.tool);
  if (turn.tool_status) row.tool_status = NameOf(*turn.tool_status);
  row.tool_output_tokens = turn.tool_output_tokens;
  row.tool_latency_s = turn.tool_latency_s;
  return row;
}

sched::TrajectoryObservation Coordinator::ObservationOf(const Trajectory& t, bool truncated) {
  sched::TrajectoryObservation observation;
  observation.trajectory = t.id;
  observation.prompt = PromptId(t.prompt);
  observation.prompt_tokens = t.prompt_tokens;
  observation.truncated = truncated;
  observation.turn_tokens.reserve(t.turns_done.size());
  observation.tools.reserve(static_cast<size_t>(t.tool_calls));
  for (const Turn& turn : t.turns_done) {
    observation.turn_tokens.push_back(turn.generated_tokens);
    if (turn.end == workload::TurnEnd::kToolCall) {
      observation.tools.push_back(sched::ToolObservation{
          turn.tool, turn.tool_status.value_or(workload::ToolStatus::kSuccess),
          turn.tool_output_tokens});
    }
  }
  return observation;
}

Status Coordinator::OnTurnFailed(double now, const backend::TurnFailed& failed) {
  Trajectory* found = live_.Find(failed.trajectory);
  if (found == nullptr) {
    return Status::Backend(std::string(backend_.Name()),
                           "failed turn of unknown trajectory " + failed.trajectory.ToString());
  }
  Trajectory& t = *found;
  if (sched::InstanceState* instance = FindInstance(failed.instance)) {
    instance->active = std::max(0, instance->active - 1);
    Changed(*instance);
  }
  if (failed.dropped) {
    // Its sample is drawn again as a new trajectory; the group waits for that one instead.
    Trajectory again;
    again.id = TrajectoryId(next_trajectory_++);
    again.prompt = t.prompt;
    again.sample = t.sample;
    again.step = t.step;
    again.prompt_tokens = again.context_tokens = workload_.Prompt(t.prompt).prompt_tokens;
    AddEvent("fault", now, now, "instance " + failed.instance.ToString(), t.id.value, t.step,
             StrFormat("trajectory dropped: %s; prompt %lld sample %d drawn again as trajectory "
                       "%lld",
                       failed.reason.c_str(), static_cast<long long>(t.prompt), t.sample,
                       static_cast<long long>(again.id.value)));
    live_.Erase(t.id);
    waiting_.push_back(again.id);
    live_.Insert(again.id, std::move(again));
    return RouteWaiting(now);
  }
  if (!t.path.empty()) t.path.pop_back();
  t.instance = t.path.empty() ? InstanceId() : InstanceId(t.path.back());
  AddEvent("retry", now, now, "instance " + failed.instance.ToString(), t.id.value, t.step,
           StrFormat("turn %d routed again: %s", t.turns, failed.reason.c_str()));
  // Back to the router, ahead of turns that have not started.
  waiting_.push_front(t.id);
  return RouteWaiting(now);
}

Status Coordinator::OnInstanceHealth(double now, const backend::InstanceHealth& health) {
  sched::InstanceState* instance = FindInstance(health.instance);
  if (instance == nullptr) return Status();  // it has left the layout since
  const bool leaving = pool_ && std::count(pool_->leaving().begin(), pool_->leaving().end(),
                                           static_cast<size_t>(health.instance.value)) > 0;
  instance->available = health.up && !leaving;
  Changed(*instance);
  AddEvent(health.up ? "instance-up" : "instance-down", now, now,
           "instance " + health.instance.ToString(), std::nullopt, next_train_step_, health.reason);
  return health.up ? RouteWaiting(now) : Status();
}

Status Coordinator::OnToolDone(double now, const backend::ToolDone& done) {
  Trajectory* found = live_.Find(done.trajectory);
  if (found == nullptr) {
    return Status::Backend(std::string(backend_.Name()),
                           "tool done for unknown trajectory " + done.trajectory.ToString());
  }
  Trajectory& t = *found;
  t.context_tokens += done.output_tokens;
  Turn& called = t.turns_done.back();
  called.tool_status = done.status;
  called.tool_output_tokens = done.output_tokens;
  called.tool_latency_s = now - Shifted(done.started_at);
  t.last_tool = sched::ToolObservation{called.tool, done.status, done.output_tokens};
  if (config_.record_events) {
    AddEvent("tool", Shifted(done.started_at), now, "tools", t.id.value, t.step,
             StrFormat("%s, %lld tokens", NameOf(done.status).c_str(),
                       static_cast<long long>(done.output_tokens)));
  }
  waiting_.push_back(t.id);
  return RouteWaiting(now);
}

Status Coordinator::RejectStale(double now) {
  if (!config_.stream_batches) return Status();
  const int step = next_train_step_;
  // A complete group's versions no longer change, so the groups found fresh at this step stay so
  // until the trainer's step advances: only those completed since are checked (TryTrain asks after
  // every trajectory, and 8,192 GPUs hold thousands of complete groups).
  if (fresh_step_ != step) {
    fresh_groups_ = 0;
    fresh_step_ = step;
  }
  const int64_t rejected = summary_.rejected_groups;
  for (auto it = complete_.begin() + static_cast<ptrdiff_t>(fresh_groups_);
       it != complete_.end();) {
    Batch& group = GroupOf(*it);
    const int lag = step - group.oldest_version;
    if (lag <= config_.staleness) {
      ++it;
      continue;
    }
    AddEvent("reject", now, now, "trainer", std::nullopt, step,
             StrFormat("prompt %lld: lag %d > staleness %d, %zu samples dropped",
                       static_cast<long long>(*it), lag, config_.staleness, group.done.size()));
    rejected_sizes_.insert(rejected_sizes_.end(), group.sizes.begin(), group.sizes.end());
    groups_.Erase(PromptId(*it));
    it = complete_.erase(it);
    ++summary_.rejected_groups;
  }
  fresh_groups_ = complete_.size();
  if (summary_.rejected_groups == rejected) return Status();
  // Replace the rejected groups.
  Launch();
  return RouteWaiting(now);
}

Coordinator::Batch& Coordinator::GroupOf(int64_t prompt) {
  return const_cast<Batch&>(std::as_const(*this).GroupOf(prompt));
}

const Coordinator::Batch& Coordinator::GroupOf(int64_t prompt) const {
  const Batch* group = groups_.Find(PromptId(prompt));
  LIBRA_CHECK(group != nullptr) << "prompt " << prompt << " has no group in flight";
  return *group;
}

std::optional<Coordinator::Batch> Coordinator::TakeBatch() {
  const int step = next_train_step_;
  const auto per_step = static_cast<size_t>(config_.prompts_per_step);
  std::vector<int64_t> prompts;
  if (config_.stream_batches) {
    if (complete_.size() < per_step) return std::nullopt;
    prompts.assign(complete_.begin(), complete_.begin() + static_cast<ptrdiff_t>(per_step));
    complete_.erase(complete_.begin(), complete_.begin() + static_cast<ptrdiff_t>(per_step));
    fresh_groups_ -= std::min(fresh_groups_, per_step);
  } else {
    // A step's prompts complete once each; TryTrain asks after every trajectory, so count them
    // instead of looking each prompt up again.
    if (CompleteInStep(step) < per_step) return std::nullopt;
    for (size_t p = 0; p < per_step; ++p) {
      prompts.push_back(static_cast<int64_t>(step * per_step + p));
    }
  }
  Batch batch;
  size_t trajectories = 0, turns = 0, tool_calls = 0;
  for (int64_t prompt : prompts) {
    const Batch& group = GroupOf(prompt);
    trajectories += group.done.size();
    turns += group.turns.size();
    tool_calls += group.tool_latencies_s.size();
  }
  batch.Reserve(trajectories, turns, tool_calls);  // each record moves once
  for (int64_t prompt : prompts) {
    batch.Append(std::move(GroupOf(prompt)));
    groups_.Erase(PromptId(prompt));
  }
  for (records::TrajectoryRecord& t : batch.done) t.step = step;
  return batch;
}

size_t Coordinator::CompleteInStep(int step) const {
  const auto at = static_cast<size_t>(step);
  return at < complete_in_step_.size() ? static_cast<size_t>(complete_in_step_[at]) : 0;
}

double Coordinator::BatchComplete() const {
  const auto per_step = static_cast<size_t>(config_.prompts_per_step);
  size_t complete = 0;
  if (config_.stream_batches) {
    // Those RejectStale found fresh at this step are not looked up again.
    complete = fresh_step_ == next_train_step_ ? fresh_groups_ : 0;
    for (auto it = complete_.begin() + static_cast<ptrdiff_t>(complete); it != complete_.end();
         ++it) {
      complete += next_train_step_ - GroupOf(*it).oldest_version <= config_.staleness;
    }
  } else {
    complete = CompleteInStep(next_train_step_);
  }
  return std::min(1.0, static_cast<double>(complete) / static_cast<double>(per_step));
}

Status Coordinator::Lend(double now) {
  if (pool_->phase() != planner::PoolPhase::kIdle) return Status();
  // Taken back early (reclaim_at < 1) for this step: the GPUs wait for its batch.
  if (reclaimed_step_ == next_train_step_) return Status();
  std::optional<backend::Layout> lent = planner_.IdleTrainerLayout(layout_);
  if (!lent) return Status();
  const Status begun = pool_->Begin(*lent);
  if (!begun.ok()) {
    return Status::Internal(std::string(planner_.Name()) +
                            " lent an invalid layout: " + begun.message());
  }
  lent_from_ = layout_;
  AddEvent("lend", now, now, "trainer", std::nullopt, next_train_step_, lent->ToString());
  return AdvanceTransition(now);
}

Status Coordinator::Reclaim(double now) {
  if (pool_->phase() != planner::PoolPhase::kIdle) return Status();  // still lending
  const Status begun = pool_->Begin(*lent_from_);
  if (!begun.ok()) return Status::Internal("cannot take the lent GPUs back: " + begun.message());
  reclaiming_ = true;
  reclaimed_step_ = next_train_step_;
  for (size_t i : pool_->leaving()) {
    instances_[i].available = false;
    Changed(instances_[i]);
  }
  AddEvent("reclaim", now, now, "trainer", std::nullopt, next_train_step_, lent_from_->ToString());
  return AdvanceTransition(now);
}

Status Coordinator::TryTrain(double now) {
  if (trainer_busy_ || step_open_ || next_train_step_ >= config_.steps) return Status();
  // Stale groups go (and are replaced) whether or not the trainer's GPUs are lent: a lent
  // trainer waiting for a batch they block would wait for ever once the last step's groups
  // have all launched.
  LIBRA_RETURN_IF_ERROR(RejectStale(now));
  if (lent_from_) {
    // The trainer's GPUs roll out: take them back once the batch is ready.
    return !reclaiming_ && BatchComplete() >= planner_.ReclaimAt() ? Reclaim(now) : Status();
  }
  training_ = TakeBatch();
  if (!training_) return Lend(now);
  trainer_busy_ = true;
  train_start_ = now;
  router_.OnStep(next_train_step_);
  backend::Train train{next_train_step_, training_->sequence_tokens, {}, {}};
  for (const records::TrajectoryRecord& t : training_->done) {
    train.trajectories.push_back(TrajectoryId(t.id));
  }
  std::vector<double> rewards;
  for (const records::TrajectoryRecord& t : training_->done) rewards.push_back(t.reward);
  train.advantages = GroupAdvantages(rewards, config_.group_size);
  return backend_.Submit(train);
}

Status Coordinator::OnTrainDone(double now, const backend::TrainDone& done) {
  if (!trainer_busy_ || done.step != next_train_step_) {
    return Status::Backend(std::string(backend_.Name()),
                           StrFormat("unexpected train done for step %d", done.step));
  }
  trainer_busy_ = false;
  train_s_ = now - train_start_;
  logprob_diff_ = done.logprob_diff;
  clip_fraction_ = done.clip_fraction;
  // Samples of a group whose rewards are all equal carry no learning signal (zero advantage);
  // truncated samples are masked from the loss (DAPO's overlong filtering).
  std::vector<double> lags;
  std::vector<double> batch_difficulty;
  const Batch& batch = *training_;
  const auto n = static_cast<size_t>(config_.group_size);
  for (size_t first = 0; first < batch.done.size(); first += n) {
    batch_difficulty.push_back(workload_.Prompt(batch.done[first].prompt).difficulty);
    bool signal = false;
    for (size_t i = first + 1; i < first + n; ++i) {
      signal = signal || batch.done[i].reward != batch.done[first].reward;
    }
    for (size_t i = first; signal && i < first + n; ++i) {
      if (!batch.done[i].truncated) lags.push_back(done.step - batch.mean_versions[i]);
    }
  }
  // A batch out of dataset order teaches less about the prompts it stands for (selection bias).
  std::vector<double> population;
  const int64_t per_step = config_.prompts_per_step;
  for (int64_t p = done.step * per_step; p < (done.step + 1) * per_step; ++p) {
    population.push_back(workload_.Prompt(p).difficulty);
  }
  skill_.RecordStep(done.step, lags, config_.staleness, config_.objective,
                    workload::SelectionEfficiency(batch_difficulty, population));
  AddEvent("train", train_start_, now, "trainer", std::nullopt, done.step,
           StrFormat("step %d", done.step));
  const int version = done.step + 1;
  step_open_ = true;
  if (!done.halt.empty()) {
    // The step is recorded, then the run stops (no sync: its weights are not to be used).
    LIBRA_RETURN_IF_ERROR(FinishStep(now, 0));
    return Status::Backend(std::string(backend_.Name()), done.halt);
  }
  if (version < config_.steps && version % config_.sync_interval == 0) {
    return backend_.Submit(backend::SyncWeights{version});
  }
  return FinishStep(now, 0);
}

Status Coordinator::OnSyncDone(double now, const backend::SyncDone& done) {
  if (!step_open_ || done.version != next_train_step_ + 1) {
    return Status::Backend(std::string(backend_.Name()),
                           StrFormat("unexpected sync done for version %d", done.version));
  }
  rollout_version_ = done.version;
  AddEvent("sync", Shifted(done.started_at), now, "trainer", std::nullopt, next_train_step_,
           StrFormat("weights v%d", done.version));
  LIBRA_RETURN_IF_ERROR(FinishStep(now, now - Shifted(done.started_at)));
  Launch();
  return RouteWaiting(now);
}

Status Coordinator::SubmitEvaluation(int version) {
  backend::Evaluate evaluate{version, {}};
  evaluate.prompts.reserve(static_cast<size_t>(config_.eval_prompts));
  for (int i = 0; i < config_.eval_prompts; ++i) evaluate.prompts.push_back(HeldOutPrompt(i));
  ++evals_pending_;
  return backend_.Submit(evaluate);
}

Status Coordinator::OnEvalDone(double now, const backend::EvalDone& done) {
  --evals_pending_;
  AddEvent("eval", Shifted(done.started_at), now, "rollout", std::nullopt, next_train_step_,
           done.score ? StrFormat("v%d: %.4f", done.version, *done.score)
                      : StrFormat("v%d not evaluated: %s", done.version, done.why.c_str()));
  if (!done.score) return Status();
  return recorder_.RecordEval(done.version, *done.score);
}

records::StepRecord Coordinator::TakeStepRecord(const Batch& batch, double now, double sync_s) {
  const int step = next_train_step_;
  records::StepRecord record;
  record.step = step;
  record.start_s = step_start_;
  record.end_s = now;
  record.rollout_s = batch.rollout_end - batch.rollout_start;
  record.train_s = train_s_;
  record.sync_s = sync_s;
  record.wait_s = train_start_ - trainer_free_since_;
  record.trajectories = static_cast<int>(batch.done.size());
  double reward = 0;
  for (const records::TrajectoryRecord& t : batch.done) {
    record.turns += t.turns;
    record.tool_calls += t.tool_calls;
    record.prompt_tokens += t.prompt_tokens;
    record.generated_tokens += t.generated_tokens;
    reward += t.reward;
    record.max_lag = std::max(record.max_lag, step - t.version);
  }
  record.reward_mean = batch.done.empty() ? 0 : reward / static_cast<double>(batch.done.size());
  record.policy_version = step;
  record.rollout_gpus = layout_.rollout_gpus();
  record.train_gpus = layout_.train_gpus;
  record.predicted_step_s = predicted_step_s_;
  record.logprob_diff = std::exchange(logprob_diff_, std::nullopt);
  record.clip_fraction = std::exchange(clip_fraction_, std::nullopt);
  // The trained version's modelled evaluation score, every eval interval and at the last step
  // (a backend that measures scores records them when measured: SubmitEvaluation).
  if (!backend_.ScoresEvaluations() &&
      ((step + 1) % config_.eval_interval == 0 || step + 1 == config_.steps)) {
    record.eval_score = skill_.EvalScore(step + 1, heldout_);
  }
  // Utilisation: GPU-time generating or training over the cluster's GPU-time in the step.
  const std::optional<double> busy = backend_.RolloutBusyGpuSeconds();
  const double window = now - step_start_;
  const double cluster_gpu_s =
      window *
      (layout_.colocated ? layout_.train_gpus : layout_.train_gpus + layout_.rollout_gpus());
  if (busy && cluster_gpu_s > 0) {
    const double used = *busy - rollout_busy_mark_.value_or(0) + train_s_ * layout_.train_gpus;
    record.gpu_util = std::min(1.0, used / cluster_gpu_s);
    record.idle_gpu_s = std::max(0.0, cluster_gpu_s - used);
    rollout_busy_mark_ = busy;
  }
  return record;
}

Status Coordinator::FinishStep(double now, double sync_s) {
  const int step = next_train_step_;
  Batch& batch = *training_;
  records::StepRecord record = TakeStepRecord(batch, now, sync_s);
  summary_.trajectories += record.trajectories;
  // Fidelity: the trained trajectories cannot need more GPU-seconds than the cluster has had.
  if (config_.trajectory_floor_gpu_s) {
    for (const planner::TrajectorySize& size : batch.sizes) {
      trained_floor_gpu_s_ += config_.trajectory_floor_gpu_s(size);
    }
    const double had_gpu_s = (now - time_offset_) * config_.plan.nodes * config_.plan.gpus_per_node;
    if (trained_floor_gpu_s_ > had_gpu_s * (1 + 1e-9)) {
      return Status::Internal(StrFormat(
          "fidelity check failed at step %d: the trajectories trained so far need at least %.1f "
          "GPU-seconds at the cost model's best efficiency, more than the %.1f the cluster has "
          "had; the simulator or the cost model is wrong",
          step, trained_floor_gpu_s_, had_gpu_s));
    }
  }
  LIBRA_RETURN_IF_ERROR(recorder_.RecordStep(
      records::StepBatch{record, std::move(batch.done), std::move(batch.turns), std::move(events_),
                         std::move(decisions_), router_.Metrics().values}));
  events_.clear();
  decisions_.clear();
  std::vector<planner::TrajectorySize> sizes = std::move(batch.sizes);
  std::vector<double> tool_latencies_s = std::move(batch.tool_latencies_s);
  training_.reset();
  // Measured: versions the engines hold (synced) at each eval interval, and the last, which the
  // engines load for it.
  const int version = step + 1;
  if (backend_.ScoresEvaluations() &&
      ((version % config_.eval_interval == 0 && rollout_version_ == version) ||
       version == config_.steps)) {
    LIBRA_RETURN_IF_ERROR(SubmitEvaluation(version));
  }

  step_open_ = false;
  trainer_free_since_ = now;
  step_start_ = now;
  ++next_train_step_;
  ++steps_done_;
  summary_.steps = steps_done_;
  summary_.elapsed_s = now;
  if (progress_) {
    progress_(Progress{steps_done_, config_.steps, now, summary_.trajectories,
                       summary_.generated_tokens, &record});
  }
  if (steps_done_ < config_.steps) {
    LIBRA_RETURN_IF_ERROR(Replan(now, record, std::move(sizes), std::move(tool_latencies_s)));
    LIBRA_RETURN_IF_ERROR(AdvanceTransition(now));
  }
  return TryTrain(now);
}

Status Coordinator::Replan(double now, const records::StepRecord& step,
                           std::vector<planner::TrajectorySize> sizes,
                           std::vector<double> tool_latencies_s) {
  planner::StepObservation observation;
  observation.step = step.step;
  observation.now_s = now;
  observation.step_s = step.end_s - step.start_s;
  observation.rollout_s = step.rollout_s;
  observation.train_s = step.train_s;
  observation.sync_s = step.sync_s;
  observation.wait_s = step.wait_s;
  observation.trajectories = std::move(sizes);
  observation.tool_latencies_s = std::move(tool_latencies_s);
  observation.rejected_trajectories = std::exchange(rejected_sizes_, {});
  observation.waiting_turns = static_cast<int>(waiting_.size());
  observation.in_flight = static_cast<int>(live_.size());
  observation.rejected = summary_.rejected_groups * config_.group_size;
  observation.layout = layout_;
  observation.transition_in_flight = pool_->phase() != planner::PoolPhase::kIdle;
  std::optional<planner::PlanDecision> decision = planner_.OnStep(observation);
  if (!decision) return Status();
  if (decision->next_step_s) predicted_step_s_ = decision->next_step_s;
  records::DecisionRecord record;
  record.seq = decision_seq_++;
  record.at_s = now;
  record.step = next_train_step_;
  record.planner = std::string(planner_.Name());
  record.trigger = decision->trigger;
  record.reason = decision->reason;
  record.current_step_s = decision->current_step_s;
  record.gain_s = decision->gain_s;
  record.transition_s = decision->transition_s;
  const backend::Layout& target = decision->layout ? *decision->layout : layout_;
  record.train_gpus = target.train_gpus;
  record.rollout_gpus = target.rollout_gpus();
  record.layout = target.ToString();
  record.predicted_step_s =
      decision->layout ? decision->candidate_step_s : decision->current_step_s;
  if (decision->layout) {
    const Status begun = pool_->Begin(*decision->layout);
    if (begun.ok()) {
      record.applied = true;
      for (size_t i : pool_->leaving()) {
        instances_[i].available = false;
        Changed(instances_[i]);
      }
    } else {
      record.reason += " (not applied: " + begun.message() + ")";
    }
  }
  decisions_.push_back(std::move(record));
  return Status();
}

Status Coordinator::AdvanceTransition(double now) {
  if (!pool_ || pool_->phase() != planner::PoolPhase::kDraining) return Status();
  std::vector<int> active;
  active.reserve(instances_.size());
  for (const sched::InstanceState& instance : instances_) active.push_back(instance.active);
  std::optional<backend::Layout> layout = pool_->Ready(active, !trainer_busy_ && !step_open_);
  if (!layout) return Status();
  layout_ = std::move(*layout);
  relayout_start_ = now;
  return backend_.Submit(backend::ApplyLayout{layout_});
}

void Coordinator::AddEvent(const char* kind, double start, double end, const std::string& resource,
                           std::optional<int64_t> trajectory, int step, const std::string& detail) {
  records::EventRecord e;
  e.seq = event_seq_++;
  e.kind = kind;
  e.start_s = start;
  e.end_s = end;
  e.resource = resource;
  e.trajectory = trajectory;
  e.step = step;
  e.detail = detail;
  events_.push_back(std::move(e));
}

}  // namespace libra::experiment
