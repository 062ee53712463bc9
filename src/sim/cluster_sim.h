// ClusterSim: the discrete-event digital twin of a GPU cluster running agentic RL post-training
// (the default backend, "sim"). The coordinator, routers and planners run unchanged on it.
//
// * Rollout instances of TP t batch continuously: every iteration runs the decode set plus
//   prefill chunks within a token budget, timed by the cost model. Admission is by KV capacity
//   (with a one-iteration growth reserve); when growth runs out of KV, the most recently admitted
//   sequence is preempted and later recomputed (its whole context prefilled again). A trajectory's
//   next turn on the same instance prefills only its new tokens while its KV is cached; on another
//   instance, or after eviction, its whole context. While a trajectory waits for a tool its KV is
//   cached (evicted least recently used first under pressure) or freed ([sim] kv_policy).
// * Between events an instance advances in closed form: with a fixed decode set contexts grow
//   linearly, so a span of iterations up to the next finishing sequence is one cost-model call
//   (CostModel::DecodeSpanTime), cut short at the next iteration boundary when new work arrives.
// * The layout can change during a run (the elastic hybrid pool): instances that keep their GPUs
//   keep their state; leaving instances must be drained; GPUs moving between roles pay the cost
//   model's role-switch time before they serve (new instances) or train (the trainer waits).
// * Tools take the latency the workload scripts (timeouts included), with an optional limit on
//   calls in flight. Train steps are timed by the cost model for the actual batch and the
//   layout's training parallelism (a colocated layout also switches roles both ways); weight syncs
//   by the cost model. Both pause exactly the instances they touch.
// * A router's scheduling hints (backend::StartTurn): waiting turns are admitted by priority
//   (higher first; first come, first served without one) and a higher-priority turn that cannot
//   be admitted preempts the lowest-priority running one, whose KV stays cached; a turn that moves
//   its trajectory's KV from another instance skips re-prefilling it, and a turn cannot start
//   before its preceding tool call's start plus the router's setup and that transfer.
// docs/simulator.md explains the model, its assumptions and its limits.
#pragma once

#include <deque>
#include <limits>
#include <map>
#include <vector>

#include "backend/backend.h"
#include "common/id_table.h"
#include "model/cost_model.h"
#include "recipe/recipe.h"
#include "sim/event_queue.h"
#include "workload/workload.h"

namespace libra::sim {

/// Counters of a simulation, for tests and benchmarks.
struct SimStats {
  int64_t events = 0;                // entries popped from the event queue
  int64_t iterations = 0;            // engine iterations simulated (inside spans too)
  int64_t spans = 0;                 // closed-form decode spans
  int64_t mixed_iterations = 0;      // iterations with prefill, simulated one by one
  int64_t preemptions = 0;           // sequences preempted for KV (recomputed later)
  int64_t priority_preemptions = 0;  // sequences preempted for a higher-priority turn
  int64_t kv_moves = 0;              // turns that moved their KV from another instance
  int64_t evictions = 0;             // cached contexts evicted for KV
  int64_t prefix_hits = 0;           // turns that reused their cached context
  double rollout_busy_gpu_s = 0;     // GPU-seconds instances spent iterating
};

class ClusterSim : public backend::Backend {
 public:
  /// The priority of a turn without one (below every priority a router gives).
  static constexpr double kNoPriority = -std::numeric_limits<double>::infinity();

  /// `workload` and `cost` must outlive the simulator.
  ClusterSim(const recipe::SimSpec& spec, const workload::Workload& workload,
             const model::CostModel& cost);
  ClusterSim(const ClusterSim&) = delete;
  ClusterSim& operator=(const ClusterSim&) = delete;

  std::string_view Name() const override { return "sim"; }
  Status Submit(const backend::Action& action) override;
  Result<std::vector<backend::Event>> Wait() override;
  Status WaitInto(std::vector<backend::Event>* events) override;
  std::optional<int64_t> OracleTrajectoryTokens(const backend::StartTurn& turn) const override {
    return workload_.Script(turn.prompt, turn.sample, turn.policy_version, turn.skill)
        .generated_tokens();
  }
  std::optional<double> RolloutBusyGpuSeconds() const override { return stats_.rollout_busy_gpu_s; }

  const SimStats& stats() const { return stats_; }

 private:
  struct Trajectory;
  /// One turn on (or waiting for) an instance.
  struct Seq {
    TrajectoryId id;
    Trajectory* trajectory = nullptr;              // its entry in trajectories_ (never moves)
    const workload::TurnScript* script = nullptr;  // its turn in the trajectory's script
    int64_t context = 0;       // tokens in KV once prefilled (reserved at admission)
    int64_t prefill_left = 0;  // tokens still to prefill
    int64_t decode_left = 0;   // tokens still to generate
    double started_at = -1;    // first iteration that worked on it
    uint64_t order = 0;        // admission order (the last admitted is preempted first)
    bool cached_prefix = false;
    double priority = kNoPriority;  // higher first (StartTurn::priority)
    int64_t moved = 0;              // context tokens whose KV arrived from another instance
  };
  enum class Phase { kIdle, kIteration, kSpan, kPaused };
  struct Instance {
    backend::InstanceSpec spec;
    int64_t capacity = 0;
    /// When its GPUs finish switching to rollout (a later layout); 0 from the start.
    double ready_at = 0;
    std::vector<Seq> running;
    std::deque<Seq> waiting;
    int64_t used = 0;  // KV tokens reserved: running contexts and cached prefixes
    // The trajectories whose prefix is cached here, least recently used first (linked through
    // Trajectory::lru_prev / lru_next).
    Trajectory* lru_first = nullptr;
    Trajectory* lru_last = nullptr;
    size_t cached = 0;
    Phase phase = Phase::kIdle;
    double phase_start = 0;
    uint64_t generation = 0;  // of the boundary event that ends the current phase
    // kIteration: the prefill chunk of each running sequence (0 for decoders), by position.
    std::vector<int64_t> chunks;
    // kSpan: the span's shape.
    int64_t span_sequences = 0;
    int64_t span_context = 0;
    int64_t span_iterations = 0;
  };
  struct Trajectory {
    TrajectoryId id;
    workload::TrajectoryScript script;
    int next_turn = 0;
    bool running = false;
    bool awaiting_tool = false;
    int64_t cached_on = -1;     // instance holding its cached prefix
    int64_t cached_tokens = 0;  // of that prefix
    Trajectory* lru_prev = nullptr;
    Trajectory* lru_next = nullptr;
    double tool_called_at = 0;  // when its last tool call was submitted
  };
  enum class Kind { kBoundary, kTool, kTrain, kSync, kLayout, kArrive };
  /// A queue entry, kept small: the events it will deliver wait in parked_ (kArrive: the turn
  /// waits in arrivals_ under the number in `generation`).
  struct Pending {
    Kind kind = Kind::kBoundary;
    uint32_t index = 0;       // kBoundary: the instance; otherwise the parked event's slot
    uint64_t generation = 0;  // kBoundary: of the phase it ends
  };

  Status StartTurn(const backend::StartTurn& turn);
  Status RunTool(const backend::RunTool& tool);
  /// Runs the tool the trajectory's last turn called, taking `latency` from `now`.
  void StartTool(const Trajectory& t, double latency, double now);
  Status Train(const backend::Train& train);
  Status Sync(const backend::SyncWeights& sync);
  Status ApplyLayout(const backend::Layout& layout);
  /// For each current instance, whether `layout` keeps it (same id, GPUs and TP); an error when
  /// the layout's ids are not 0..n-1, an instance has no room for KV cache, or an instance that
  /// leaves still has a turn in flight or on its way.
  Result<std::vector<bool>> KeptBy(const backend::Layout& layout) const;
  /// Forgets the contexts cached on the instances `kept` does not keep.
  void DropCachesOfLeaving(const std::vector<bool>& kept);

  /// Handles one popped event; appends what the coordinator must see to `out`.
  Status Handle(const EventQueue<Pending>::Entry& entry, std::vector<backend::Event>* out);
  /// Applies the phase that ends now, emits finished turns, and starts the next phase.
  Status Boundary(Instance& instance, double now, std::vector<backend::Event>* out);
  /// Reports a sequence's finished turn and releases or caches its KV.
  void FinishTurn(Instance& instance, const Seq& s, double now, std::vector<backend::Event>* out);
  /// Starts the next phase of an instance at a boundary.
  Status StartPhase(Instance& instance, double now);
  /// KV for growth: cached contexts of trajectories waiting for tools go first (least recently
  /// used first, as engines reuse free cached blocks), running sequences only when none is left.
  /// False when there is nothing to free.
  bool MakeRoom(Instance& instance);
  /// A mixed iteration's load: the decode set plus prefill chunks within the token budget (noted
  /// in instance.chunks); `growing` gains the sequences that produce their first token in it.
  model::IterationLoad MixedLoad(Instance& instance, int64_t* growing);
  /// New work arrived: an idle instance starts; a span is cut at its next iteration boundary.
  Status Kick(Instance& instance, double now);
  /// Ends a span at the iteration boundary after `now`.
  void Cut(Instance& instance, double now);
  /// Admits waiting turns while KV and the sequence limit allow. Error when a turn can never fit.
  Status Admit(Instance& instance);
  /// Preempts the lowest-priority running sequence (the most recently admitted among equals);
  /// false when none runs.
  bool Preempt(Instance& instance);
  /// Caches the trajectory's context on `instance` (the most recently used).
  void Cache(Instance& instance, Trajectory& t, int64_t tokens);
  /// Takes the trajectory's cached prefix off its instance's list (`used` unchanged).
  void Uncache(Trajectory& t);
  /// Drops a trajectory's cached prefix from the instance holding it, freeing its KV.
  void DropCache(Trajectory& t);
  /// Queues a turn by priority: behind those of equal or higher priority, or (`front`, a
  /// preempted turn) ahead of those of equal or lower priority. Without priorities: FIFO.
  static void Enqueue(Instance& instance, const Seq& seq, bool front);
  /// Preempts the lowest-priority running sequence if the first waiting turn has a higher
  /// priority, keeping its KV cached (kv_policy "cache"); false when there is none.
  bool PreemptForPriority(Instance& instance);
  /// A turn whose setup or KV transfer outlasted its tool call reaches its instance.
  Status Arrive(uint64_t arrival, double now);
  void Schedule(Instance& instance, double at);
  /// Pauses every instance until now + duration.
  Status PauseAll(double duration);
  /// Queues `event` for delivery at its time, ordered by `rank` among simultaneous events.
  void Deliver(Kind kind, int rank, backend::Event event);

  recipe::SimSpec spec_;
  const workload::Workload& workload_;
  const model::CostModel& cost_;
  backend::Layout layout_;
  std::vector<Instance> instances_;
  IdTable<TrajectoryIdTag, Trajectory> trajectories_;
  EventQueue<Pending> queue_;
  std::vector<backend::Event> parked_;  // events in the queue, by slot
  std::vector<uint32_t> free_slots_;    // slots of parked_ not in use
  double paused_until_ = 0;
  /// When GPUs that joined training in a re-layout are ready for it.
  double trainer_ready_at_ = 0;
  uint64_t next_order_ = 0;
  int tools_running_ = 0;
  std::deque<std::pair<const Trajectory*, double>> tool_queue_;  // waiting for a sandbox slot
  /// Turns on their way to an instance (Arrive), by arrival number: instance index and turn.
  std::map<uint64_t, std::pair<size_t, Seq>> arrivals_;
  uint64_t next_arrival_ = 0;
  SimStats stats_;
};

}  // namespace libra::sim
