#include "sim/cluster_sim.h"

#include <algorithm>

#include "common/strings.h"
#include "model/partition.h"

namespace libra::sim {
namespace {

// Ranks order simultaneous events: the layout, then the trainer, then engine iteration
// boundaries, then tools. Changing them changes every recorded run.
constexpr int kRankLayout = 0;
constexpr int kRankTrain = 1;
constexpr int kRankSync = 2;
constexpr int kRankBoundary = 3;
constexpr int kRankTool = 4;
constexpr int kRankArrive = 5;

}  // namespace

ClusterSim::ClusterSim(const recipe::SimSpec& spec, const workload::Workload& workload,
                       const model::CostModel& cost)
    : spec_(spec), workload_(workload), cost_(cost) {}

Status ClusterSim::Submit(const backend::Action& action) {
  return std::visit(
      [&](const auto& a) -> Status {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, backend::ApplyLayout>) {
          return ApplyLayout(a.layout);
        } else if constexpr (std::is_same_v<T, backend::StartTurn>) {
          return StartTurn(a);
        } else if constexpr (std::is_same_v<T, backend::RunTool>) {
          return RunTool(a);
        } else if constexpr (std::is_same_v<T, backend::Train>) {
          return Train(a);
        } else if constexpr (std::is_same_v<T, backend::SyncWeights>) {
          return Sync(a);
        } else {
          return Status::Internal(
              "the simulator does not run evaluations (its skill model scores)");
        }
      },
      action);
}

Result<std::vector<bool>> ClusterSim::KeptBy(const backend::Layout& layout) const {
  // An instance that keeps its id, GPUs and TP keeps its state (running turns, cache).
  std::vector<bool> kept(instances_.size(), false);
  for (size_t i = 0; i < layout.instances.size(); ++i) {
    const backend::InstanceSpec& spec = layout.instances[i];
    if (spec.id.value != static_cast<int64_t>(i)) {
      return Status::Backend("sim", "instance ids must be 0..n-1 in order");
    }
    if (cost_.KvCapacityTokens(spec.tp) <= 0) {
      return Status::Backend(
          "sim", StrFormat("%s does not fit a TP-%d instance of %s with room for KV cache",
                           cost_.arch().name.c_str(), spec.tp, cost_.gpu().name.c_str()));
    }
    if (i < instances_.size() && instances_[i].spec == spec) kept[i] = true;
  }
  // Instances that leave must have nothing in flight (checked before anything changes).
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Instance& old = instances_[i];
    if (!kept[i] && (!old.running.empty() || !old.waiting.empty())) {
      return Status::Backend(
          "sim", StrFormat("instance %zu still has %zu turn(s) in flight: drain it before it "
                           "leaves the layout",
                           i, old.running.size() + old.waiting.size()));
    }
  }
  for (const auto& [arrival, to] : arrivals_) {
    if (to.first >= kept.size() || !kept[to.first]) {
      return Status::Backend("sim", StrFormat("instance %zu still has a turn on its way: drain "
                                              "it before it leaves the layout",
                                              to.first));
    }
  }
  return kept;
}

void ClusterSim::DropCachesOfLeaving(const std::vector<bool>& kept) {
  for (size_t i = 0; i < instances_.size(); ++i) {
    if (kept[i]) continue;
    for (Trajectory* t = instances_[i].lru_first; t != nullptr;) {
      Trajectory* next = t->lru_next;
      t->cached_on = -1;
      t->lru_prev = t->lru_next = nullptr;
      t = next;
    }
  }
}

Status ClusterSim::ApplyLayout(const backend::Layout& layout) {
  const double now = queue_.now();
  const bool first = layout_.instances.empty() && layout_.train_gpus == 0;
  LIBRA_ASSIGN_OR_RETURN(const std::vector<bool> kept, KeptBy(layout));
  double done_at = now;
  // GPUs of leaving instances join training after switching role.
  if (!first && layout.train_gpus > layout_.train_gpus) {
    for (size_t i = 0; i < instances_.size(); ++i) {
      if (kept[i]) continue;
      trainer_ready_at_ = std::max(
          trainer_ready_at_, now + cost_.RoleSwitchTime({model::SwitchDirection::kRolloutToTrain,
                                                         instances_[i].spec.tp, layout.train}));
      done_at = std::max(done_at, trainer_ready_at_);
    }
  }
  // Reserved: growing the vector would copy instances (their move may throw), and a copied
  // cache index points into the old instance's LRU list.
  std::vector<Instance> instances;
  instances.reserve(layout.instances.size());
  for (size_t i = 0; i < layout.instances.size(); ++i) {
    if (i < kept.size() && kept[i]) {
      instances.push_back(std::move(instances_[i]));
      continue;
    }
    Instance instance;
    instance.spec = layout.instances[i];
    instance.capacity = cost_.KvCapacityTokens(instance.spec.tp);
    if (!first) {
      // Its GPUs come from training or from another instance: they switch role first.
      instance.ready_at = now + cost_.RoleSwitchTime({model::SwitchDirection::kTrainToRollout,
                                                      instance.spec.tp, layout_.train});
      instance.phase = Phase::kPaused;
      instance.phase_start = now;
      done_at = std::max(done_at, instance.ready_at);
    }
    instances.push_back(std::move(instance));
  }
  DropCachesOfLeaving(kept);  // contexts cached on instances that left are gone
  layout_ = layout;
  instances_ = std::move(instances);
  for (Instance& instance : instances_) {
    if (instance.phase == Phase::kPaused && instance.ready_at > now) {
      Schedule(instance, instance.ready_at);
    }
  }
  Deliver(Kind::kLayout, kRankLayout, backend::Event{done_at, backend::LayoutApplied{}});
  return Status();
}

Status ClusterSim::StartTurn(const backend::StartTurn& turn) {
  const int64_t index = turn.instance.value;
  if (index < 0 || index >= static_cast<int64_t>(instances_.size())) {
    return Status::Backend("sim", "StartTurn on unknown instance " + turn.instance.ToString());
  }
  Trajectory* found = trajectories_.Find(turn.trajectory);
  Trajectory fresh;
  if (found == nullptr) {
    fresh.script = workload_.Script(turn.prompt, turn.sample, turn.policy_version, turn.skill);
  }
  const Trajectory& current = found == nullptr ? fresh : *found;
  if (current.running || current.awaiting_tool || turn.turn != current.next_turn ||
      turn.turn >= static_cast<int>(current.script.turns.size())) {
    return Status::Backend("sim",
                           StrFormat("trajectory %lld: unexpected turn %d",
                                     static_cast<long long>(turn.trajectory.value), turn.turn));
  }
  if (found == nullptr) {
    found = &trajectories_.Insert(turn.trajectory, std::move(fresh));
    found->id = turn.trajectory;
  }
  Trajectory& t = *found;
  t.running = true;
  ++t.next_turn;

  Instance& instance = instances_[static_cast<size_t>(index)];
  Seq seq;
  seq.id = turn.trajectory;
  seq.trajectory = &t;
  seq.script = &t.script.turns[static_cast<size_t>(turn.turn)];
  seq.context = turn.context_tokens;
  seq.prefill_left = turn.context_tokens;
  seq.decode_left = seq.script->generated_tokens;
  seq.priority = turn.priority.value_or(kNoPriority);
  const double now = queue_.now();
  // Router setup and a KV transfer run from the start of the tool call that preceded the turn.
  double ready = (turn.turn > 0 ? t.tool_called_at : now) + turn.setup_s;
  if (t.cached_on == index) {
    seq.cached_prefix = true;  // its cached tokens are claimed at admission
  } else {
    if (turn.move_kv && t.cached_on >= 0) {
      const Instance& from = instances_[static_cast<size_t>(t.cached_on)];
      seq.moved = std::min(t.cached_tokens, seq.context);
      ready += model::KvTransferTime(cost_, seq.moved, from.spec.node == instance.spec.node);
      ++stats_.kv_moves;
    }
    DropCache(t);  // a copy on another instance is of no use now (or moved)
  }
  if (ready > now) {
    const uint64_t arrival = next_arrival_++;
    arrivals_.emplace(arrival, std::make_pair(static_cast<size_t>(index), seq));
    Pending p;
    p.kind = Kind::kArrive;
    p.generation = arrival;
    queue_.Push(ready, kRankArrive, p);
    return Status();
  }
  Enqueue(instance, seq, false);
  return Kick(instance, now);
}

Status ClusterSim::Arrive(uint64_t arrival, double now) {
  auto it = arrivals_.find(arrival);
  if (it == arrivals_.end()) return Status::Internal("sim: unknown arrival");
  Instance& instance = instances_[it->second.first];
  Enqueue(instance, it->second.second, false);
  arrivals_.erase(it);
  return Kick(instance, now);
}

void ClusterSim::Enqueue(Instance& instance, const Seq& seq, bool front) {
  std::deque<Seq>& waiting = instance.waiting;
  if (front) {
    auto it = waiting.begin();
    while (it != waiting.end() && it->priority > seq.priority) ++it;
    waiting.insert(it, seq);
  } else {
    auto it = waiting.end();
    while (it != waiting.begin() && std::prev(it)->priority < seq.priority) --it;
    waiting.insert(it, seq);
  }
}

Status ClusterSim::RunTool(const backend::RunTool& tool) {
  Trajectory* found = trajectories_.Find(tool.trajectory);
  if (found == nullptr || !found->awaiting_tool) {
    return Status::Backend("sim", "RunTool for trajectory " + tool.trajectory.ToString() +
                                      " that is not waiting for a tool");
  }
  Trajectory& t = *found;
  t.awaiting_tool = false;
  t.tool_called_at = queue_.now();
  const double latency = t.script.turns[static_cast<size_t>(t.next_turn - 1)].tool_latency_s;
  if (spec_.tool_concurrency > 0 && tools_running_ >= spec_.tool_concurrency) {
    tool_queue_.emplace_back(&t, latency);
    return Status();
  }
  StartTool(t, latency, queue_.now());
  return Status();
}

void ClusterSim::StartTool(const Trajectory& t, double latency, double now) {
  ++tools_running_;
  const TrajectoryId id = t.id;
  const workload::TurnScript& called = t.script.turns[static_cast<size_t>(t.next_turn - 1)];
  Deliver(Kind::kTool, kRankTool,
          backend::Event{now + latency, backend::ToolDone{id, called.tool_status,
                                                          called.tool_output_tokens, now}});
}

Status ClusterSim::Train(const backend::Train& train) {
  if (layout_.train_gpus <= 0) return Status::Backend("sim", "Train with no training GPUs");
  const model::TrainEstimate e =
      cost_.TrainStep(layout_.train, model::TrainPasses(), train.sequence_tokens);
  if (e.oom()) {
    return Status::Backend(
        "sim", StrFormat("train step %d runs out of memory with %s: %.1f GB per GPU of %.1f",
                         train.step, layout_.train.ToString().c_str(), e.memory_bytes / 1e9,
                         e.memory_limit_bytes / 1e9));
  }
  double duration = e.step_s;
  if (layout_.colocated) {
    // Every GPU leaves rollout for training and comes back (offload / onload).
    const int tp = layout_.instances.empty() ? 1 : layout_.instances.front().tp;
    duration += cost_.RoleSwitchTime({model::SwitchDirection::kRolloutToTrain, tp, layout_.train}) +
                cost_.RoleSwitchTime({model::SwitchDirection::kTrainToRollout, tp, layout_.train});
    LIBRA_RETURN_IF_ERROR(PauseAll(duration));
  }
  // GPUs that just joined training start once their role switch is done.
  const double start = std::max(queue_.now(), trainer_ready_at_);
  Deliver(Kind::kTrain, kRankTrain,
          backend::Event{start + duration, backend::TrainDone{train.step, start}});
  return Status();
}

Status ClusterSim::Sync(const backend::SyncWeights& sync) {
  model::SyncRequest request;
  request.path = spec_.sync_path;
  request.train = layout_.train;
  request.rollout_tp = 1;
  for (const Instance& i : instances_) request.rollout_tp = std::max(request.rollout_tp, i.spec.tp);
  request.cross_node = !layout_.colocated;
  const double duration = cost_.WeightSyncTime(request);
  LIBRA_RETURN_IF_ERROR(PauseAll(duration));
  const double now = queue_.now();
  Deliver(Kind::kSync, kRankSync,
          backend::Event{now + duration, backend::SyncDone{sync.version, now}});
  return Status();
}

Status ClusterSim::PauseAll(double duration) {
  const double now = queue_.now();
  paused_until_ = std::max(paused_until_, now + duration);
  for (Instance& instance : instances_) {
    switch (instance.phase) {
      case Phase::kSpan:
        Cut(instance, now);
        break;
      case Phase::kIdle:
      case Phase::kPaused:
        instance.phase = Phase::kPaused;
        instance.phase_start = now;
        Schedule(instance, paused_until_);
        break;
      case Phase::kIteration:
        break;  // the iteration finishes; the next one waits
    }
  }
  return Status();
}

void ClusterSim::Schedule(Instance& instance, double at) {
  Pending p;
  p.kind = Kind::kBoundary;
  p.index = static_cast<uint32_t>(instance.spec.id.value);
  p.generation = ++instance.generation;
  queue_.Push(at, kRankBoundary, p);
}

void ClusterSim::Deliver(Kind kind, int rank, backend::Event event) {
  Pending p;
  p.kind = kind;
  const double at = event.at;
  if (free_slots_.empty()) {
    p.index = static_cast<uint32_t>(parked_.size());
    parked_.push_back(std::move(event));
  } else {
    p.index = free_slots_.back();
    free_slots_.pop_back();
    parked_[p.index] = std::move(event);
  }
  queue_.Push(at, rank, p);
}

Status ClusterSim::Kick(Instance& instance, double now) {
  if (instance.phase == Phase::kIdle) {
    // Start at a boundary now, after every action submitted at this time: turns that arrive
    // together share the first iteration, as in an engine's scheduler step.
    instance.phase = Phase::kPaused;
    instance.phase_start = now;
    Schedule(instance, std::max({now, paused_until_, instance.ready_at}));
    return Status();
  }
  if (instance.phase == Phase::kSpan) Cut(instance, now);
  return Status();
}

void ClusterSim::Cut(Instance& instance, double now) {
  const int tp = instance.spec.tp;
  const int64_t done =
      model::DecodeIterationsWithin(cost_, tp, instance.span_sequences, instance.span_context,
                                    instance.span_iterations, now - instance.phase_start);
  if (done + 1 >= instance.span_iterations) return;  // the span ends at the next boundary anyway
  instance.span_iterations = done + 1;
  Schedule(instance, instance.phase_start + cost_.DecodeSpanTime(tp, instance.span_sequences,
                                                                 instance.span_context, done + 1));
}

void ClusterSim::Cache(Instance& instance, Trajectory& t, int64_t tokens) {
  t.cached_on = instance.spec.id.value;
  t.cached_tokens = tokens;
  t.lru_prev = instance.lru_last;
  t.lru_next = nullptr;
  (instance.lru_last != nullptr ? instance.lru_last->lru_next : instance.lru_first) = &t;
  instance.lru_last = &t;
  ++instance.cached;
}

void ClusterSim::Uncache(Trajectory& t) {
  Instance& instance = instances_[static_cast<size_t>(t.cached_on)];
  (t.lru_prev != nullptr ? t.lru_prev->lru_next : instance.lru_first) = t.lru_next;
  (t.lru_next != nullptr ? t.lru_next->lru_prev : instance.lru_last) = t.lru_prev;
  t.lru_prev = t.lru_next = nullptr;
  --instance.cached;
  t.cached_on = -1;
}

void ClusterSim::DropCache(Trajectory& t) {
  if (t.cached_on < 0) return;
  instances_[static_cast<size_t>(t.cached_on)].used -= t.cached_tokens;
  Uncache(t);
}

Status ClusterSim::Admit(Instance& instance) {
  while (!instance.waiting.empty()) {
    if (static_cast<int>(instance.running.size()) >= spec_.max_num_seqs) {
      if (PreemptForPriority(instance)) continue;
      break;
    }
    Seq& seq = instance.waiting.front();
    int64_t claimed = 0;  // tokens of its cached prefix, already counted in `used`
    Trajectory& t = *seq.trajectory;
    if (seq.cached_prefix) {
      if (t.cached_on == instance.spec.id.value) {
        claimed = std::min(t.cached_tokens, seq.context);
      } else {
        seq.cached_prefix = false;  // evicted meanwhile
      }
    }
    if (seq.context + seq.decode_left > instance.capacity) {
      // Even alone it would run out of KV before its turn ends.
      return Status::Backend(
          "sim", StrFormat("trajectory %lld needs %lld tokens of KV cache (context %lld + %lld to "
                           "generate), more than a TP-%d instance of %s holds (%lld); raise TP "
                           "or lower max_new_tokens",
                           static_cast<long long>(seq.id.value),
                           static_cast<long long>(seq.context + seq.decode_left),
                           static_cast<long long>(seq.context),
                           static_cast<long long>(seq.decode_left), instance.spec.tp,
                           cost_.arch().name.c_str(), static_cast<long long>(instance.capacity)));
    }
    const int64_t needed = seq.context - claimed;
    // Room for the new tokens and one more iteration of growth for everyone.
    auto fits = [&] {
      return instance.used + needed + static_cast<int64_t>(instance.running.size()) + 1 <=
             instance.capacity;
    };
    while (!fits() && instance.lru_first != nullptr) {
      Trajectory* victim = instance.lru_first;
      if (victim == &t && instance.cached == 1) break;
      DropCache(victim == &t ? *victim->lru_next : *victim);
      ++stats_.evictions;
    }
    if (!fits()) {
      if (PreemptForPriority(instance)) continue;
      if (instance.running.empty() && instance.cached <= (seq.cached_prefix ? 1u : 0u)) {
        return Status::Backend(
            "sim", StrFormat("trajectory %lld needs %lld tokens of KV cache, more than a TP-%d "
                             "instance of %s holds (%lld); raise max_new_tokens' limit or TP",
                             static_cast<long long>(seq.id.value),
                             static_cast<long long>(seq.context), instance.spec.tp,
                             cost_.arch().name.c_str(), static_cast<long long>(instance.capacity)));
      }
      break;
    }
    if (claimed > 0) {
      Uncache(t);  // its tokens stay reserved, now for the running turn
      ++stats_.prefix_hits;
    }
    instance.used += needed;
    seq.prefill_left = needed - std::min(seq.moved, needed);  // moved KV is not prefilled
    seq.moved = 0;
    seq.order = next_order_++;
    instance.running.push_back(seq);
    instance.waiting.pop_front();
  }
  return Status();
}

bool ClusterSim::Preempt(Instance& instance) {
  if (instance.running.empty()) return false;
  // The lowest priority, then the most recently admitted (without priorities: the latter).
  auto last = std::max_element(instance.running.begin(), instance.running.end(),
                               [](const Seq& a, const Seq& b) {
                                 if (a.priority != b.priority) return a.priority > b.priority;
                                 return a.order < b.order;
                               });
  Seq seq = *last;
  instance.running.erase(last);
  instance.used -= seq.context;
  // Its KV is lost: it is recomputed from the whole context when readmitted.
  seq.cached_prefix = false;
  Enqueue(instance, seq, true);
  ++stats_.preemptions;
  return true;
}

bool ClusterSim::PreemptForPriority(Instance& instance) {
  const double head = instance.waiting.front().priority;
  auto victim = instance.running.end();
  for (auto it = instance.running.begin(); it != instance.running.end(); ++it) {
    if (it->priority >= head) continue;
    if (victim == instance.running.end() || it->priority < victim->priority ||
        (it->priority == victim->priority && it->order > victim->order)) {
      victim = it;
    }
  }
  if (victim == instance.running.end()) return false;
  Seq seq = *victim;
  instance.running.erase(victim);
  instance.used -= seq.context;
  // What it computed stays in the prefix cache (evicted least recently used first, like a
  // context waiting for a tool); readmitted, it prefills only what was evicted or not done.
  const int64_t computed = seq.context - seq.prefill_left;
  seq.cached_prefix = spec_.kv_policy == recipe::KvPolicy::kCache && computed > 0;
  if (seq.cached_prefix) {
    Cache(instance, *seq.trajectory, computed);
    instance.used += computed;
  }
  Enqueue(instance, seq, true);
  ++stats_.priority_preemptions;
  return true;
}

bool ClusterSim::MakeRoom(Instance& instance) {
  if (instance.lru_first == nullptr) return Preempt(instance);
  DropCache(*instance.lru_first);
  ++stats_.evictions;
  return true;
}

model::IterationLoad ClusterSim::MixedLoad(Instance& instance, int64_t* growing) {
  model::IterationLoad load;
  int64_t budget = spec_.max_batched_tokens;
  instance.chunks.assign(instance.running.size(), 0);
  for (size_t i = 0; i < instance.running.size(); ++i) {
    const Seq& s = instance.running[i];
    if (s.prefill_left == 0 && s.decode_left > 0) {
      load.AddDecode(s.context);
      --budget;
    }
  }
  for (size_t i = 0; i < instance.running.size() && budget > 0; ++i) {
    const Seq& s = instance.running[i];
    if (s.prefill_left == 0) continue;
    const int64_t chunk = std::min(s.prefill_left, budget);
    load.AddPrefill(chunk, s.context - s.prefill_left);
    instance.chunks[i] = chunk;
    budget -= chunk;
    if (chunk == s.prefill_left && s.decode_left > 0) ++*growing;  // its first token
  }
  return load;
}

Status ClusterSim::StartPhase(Instance& instance, double now) {
  const double resume = std::max(paused_until_, instance.ready_at);
  if (now < resume) {
    instance.phase = Phase::kPaused;
    instance.phase_start = now;
    Schedule(instance, resume);
    return Status();
  }
  LIBRA_RETURN_IF_ERROR(Admit(instance));
  const int tp = instance.spec.tp;
  while (true) {
    if (instance.running.empty()) {
      instance.phase = Phase::kIdle;
      return Status();
    }
    // Every sequence that produces a token this iteration needs one more KV slot. For a span
    // (nothing to prefill), the contexts and the first sequence to finish, in the same pass.
    int64_t growing = 0;
    bool prefilling = false;
    int64_t context = 0;
    int64_t first_done = INT64_MAX;
    for (const Seq& s : instance.running) {
      if (s.prefill_left == 0 && s.decode_left > 0) ++growing;
      if (s.prefill_left > 0) prefilling = true;
      context += s.context;
      first_done = std::min(first_done, s.decode_left);
    }
    if (prefilling) {
      const model::IterationLoad load = MixedLoad(instance, &growing);
      if (instance.used + growing > instance.capacity) {
        if (!MakeRoom(instance)) return Status::Internal("sim: KV accounting went negative");
        continue;
      }
      instance.phase = Phase::kIteration;
      instance.phase_start = now;
      ++stats_.mixed_iterations;
      Schedule(instance, now + cost_.IterationTime(tp, load));
      return Status();
    }
    // Decode only: one closed-form span up to the first sequence to finish, or until KV runs out.
    const int64_t n = static_cast<int64_t>(instance.running.size());
    int64_t iterations = first_done;
    if (iterations > 0) {
      const int64_t room = (instance.capacity - instance.used) / n;
      if (room == 0) {
        if (!MakeRoom(instance)) return Status::Internal("sim: KV accounting went negative");
        continue;
      }
      iterations = std::min(iterations, room);
    }
    instance.phase = Phase::kSpan;
    instance.phase_start = now;
    instance.span_sequences = n;
    instance.span_context = context;
    instance.span_iterations = iterations;
    ++stats_.spans;
    Schedule(instance, now + cost_.DecodeSpanTime(tp, n, context, iterations));
    return Status();
  }
}

Status ClusterSim::Boundary(Instance& instance, double now, std::vector<backend::Event>* out) {
  const Phase phase = instance.phase;
  const int64_t k = phase == Phase::kSpan ? instance.span_iterations : 0;
  if (phase == Phase::kIteration || phase == Phase::kSpan) {
    stats_.rollout_busy_gpu_s += (now - instance.phase_start) * instance.spec.tp;
    stats_.iterations += phase == Phase::kSpan ? k : 1;
    instance.used += k * static_cast<int64_t>(instance.running.size());
  }
  // One pass over the running sequences: each does the phase's work and the finished turns leave;
  // the unfinished keep their order, each run of them between two finished ones moving as a block.
  std::vector<Seq>& running = instance.running;
  size_t kept = 0;
  size_t run = 0;                            // the first unfinished sequence not moved yet
  const auto keep_until = [&](size_t end) {  // moves [run, end) behind those kept
    if (kept != run) std::copy(running.data() + run, running.data() + end, running.data() + kept);
    kept += end - run;
  };
  for (size_t i = 0; i < running.size(); ++i) {
    Seq& s = running[i];
    if (phase == Phase::kIteration || phase == Phase::kSpan) {
      if (s.started_at < 0) s.started_at = instance.phase_start;
    }
    if (phase == Phase::kSpan) {
      s.context += k;
      s.decode_left -= k;
    } else if (phase == Phase::kIteration) {
      bool samples = s.prefill_left == 0;  // a decode step
      if (!samples && instance.chunks[i] > 0) {
        s.prefill_left -= instance.chunks[i];
        samples = s.prefill_left == 0;  // the last prefill chunk samples a token
      }
      if (samples && s.decode_left > 0) {
        ++s.context;
        --s.decode_left;
        ++instance.used;
      }
    }
    if (s.prefill_left > 0 || s.decode_left > 0) continue;
    FinishTurn(instance, s, now, out);
    keep_until(i);
    run = i + 1;
  }
  keep_until(running.size());
  running.resize(kept);
  return StartPhase(instance, now);
}

void ClusterSim::FinishTurn(Instance& instance, const Seq& s, double now,
                            std::vector<backend::Event>* out) {
  Trajectory& t = *s.trajectory;
  const workload::TurnScript& script = *s.script;
  backend::TurnDone done;
  done.trajectory = s.id;
  done.instance = instance.spec.id;
  done.generated_tokens = script.generated_tokens;
  done.end = script.end;
  done.tool = script.tool;
  done.reward = script.end == workload::TurnEnd::kToolCall ? 0 : t.script.reward;
  done.started_at = s.started_at < 0 ? now : s.started_at;
  out->push_back(backend::Event{now, std::move(done)});
  t.running = false;
  if (script.end == workload::TurnEnd::kToolCall) {
    t.awaiting_tool = true;
    // A tool call keeps the context cached (kv_policy "cache").
    if (spec_.kv_policy == recipe::KvPolicy::kCache) {
      Cache(instance, t, s.context);
      return;
    }
  } else {
    trajectories_.Erase(s.id);
  }
  instance.used -= s.context;
}

Status ClusterSim::Handle(const EventQueue<Pending>::Entry& entry,
                          std::vector<backend::Event>* out) {
  const Pending& p = entry.payload;
  if (p.kind == Kind::kBoundary) {
    Instance& instance = instances_[p.index];
    if (p.generation != instance.generation) return Status();  // superseded by a cut
    return Boundary(instance, entry.at, out);
  }
  if (p.kind == Kind::kArrive) return Arrive(p.generation, entry.at);
  out->push_back(std::move(parked_[p.index]));
  free_slots_.push_back(p.index);
  if (p.kind == Kind::kTool) {
    --tools_running_;
    if (!tool_queue_.empty()) {
      const auto [t, latency] = tool_queue_.front();
      tool_queue_.pop_front();
      StartTool(*t, latency, entry.at);
    }
  }
  return Status();
}

Result<std::vector<backend::Event>> ClusterSim::Wait() {
  std::vector<backend::Event> events;
  LIBRA_RETURN_IF_ERROR(WaitInto(&events));
  return events;
}

Status ClusterSim::WaitInto(std::vector<backend::Event>* events) {
  events->clear();
  while (!queue_.empty() && (events->empty() || queue_.next_time() == queue_.now())) {
    const auto entry = queue_.Pop();
    ++stats_.events;
    LIBRA_RETURN_IF_ERROR(Handle(entry, events));
  }
  return Status();
}

}  // namespace libra::sim
