#include "sim/simple_sim.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/strings.h"
#include "support/test_util.h"

namespace libra::sim {
namespace {

using backend::Event;
using workload::TrajectoryScript;
using workload::TurnEnd;
using workload::TurnScript;

// Costs that are exact in binary floating point, so event times can be compared exactly.
recipe::SimSpec Spec() {
  recipe::SimSpec spec;
  spec.decode_s_per_token = 0.25;
  spec.prefill_s_per_token = 0.0625;
  spec.max_batch_per_gpu = 4;
  spec.train_gpu_s_per_token = 0.5;
  spec.sync_s = 5;
  return spec;
}

TurnScript Stop(int64_t tokens) {
  TurnScript t;
  t.generated_tokens = tokens;
  t.end = TurnEnd::kStop;
  return t;
}

TurnScript Tool(int64_t tokens, int64_t output_tokens) {
  TurnScript t;
  t.generated_tokens = tokens;
  t.end = TurnEnd::kToolCall;
  t.tool = "search";
  t.tool_status = workload::ToolStatus::kFailure;
  t.tool_output_tokens = output_tokens;
  t.tool_latency_s = 2;  // as scripted by the workload
  return t;
}

// A workload whose trajectory for prompt p is whatever the test set; samples and versions do not
// matter.
class FixedWorkload : public workload::Workload {
 public:
  void Set(int64_t prompt, std::vector<TurnScript> turns, double reward) {
    TrajectoryScript script;
    script.turns = std::move(turns);
    script.reward = reward;
    scripts_[prompt] = script;
  }
  std::string Describe() const override { return "fixed"; }
  workload::PromptInfo Prompt(int64_t index) const override { return {index, 64, 0.5}; }
  TrajectoryScript Script(int64_t prompt, int /*sample*/, int /*version*/,
                          double /*skill*/) const override {
    return scripts_.at(prompt);
  }
  const workload::SkillParams& skill_params() const override { return skill_; }

 private:
  std::map<int64_t, TrajectoryScript> scripts_;
  workload::SkillParams skill_;
};

backend::Layout MakeLayout(int train_gpus, const std::vector<int>& tps, bool colocated = false) {
  backend::Layout layout;
  layout.train_gpus = train_gpus;
  layout.colocated = colocated;
  for (size_t i = 0; i < tps.size(); ++i) {
    backend::InstanceSpec spec;
    spec.id = InstanceId(static_cast<int64_t>(i));
    spec.tp = tps[i];
    layout.instances.push_back(spec);
  }
  return layout;
}

// Trajectory `prompt` (its id is the prompt index), turn `turn` on instance `instance`.
backend::StartTurn Turn(int64_t prompt, int turn, int64_t instance, int64_t context) {
  backend::StartTurn s;
  s.trajectory = TrajectoryId(prompt);
  s.prompt = prompt;
  s.turn = turn;
  s.instance = InstanceId(instance);
  s.context_tokens = context;
  return s;
}

backend::RunTool RunToolFor(int64_t prompt) {
  return backend::RunTool{TrajectoryId(prompt), "search"};
}

backend::Train TrainOn(int step, std::vector<int64_t> tokens) {
  return backend::Train{step, std::move(tokens)};
}

std::string Describe(const Event& e) {
  if (const auto* t = std::get_if<backend::TurnDone>(&e.what)) {
    return StrFormat("%g turn traj=%lld inst=%lld start=%g tokens=%lld %s%s%s reward=%g", e.at,
                     static_cast<long long>(t->trajectory.value),
                     static_cast<long long>(t->instance.value), t->started_at,
                     static_cast<long long>(t->generated_tokens), workload::TurnEndName(t->end),
                     t->tool.empty() ? "" : " ", t->tool.c_str(), t->reward);
  }
  if (const auto* t = std::get_if<backend::ToolDone>(&e.what)) {
    return StrFormat("%g tool traj=%lld start=%g out=%lld %s", e.at,
                     static_cast<long long>(t->trajectory.value), t->started_at,
                     static_cast<long long>(t->output_tokens), workload::ToolStatusName(t->status));
  }
  if (const auto* t = std::get_if<backend::TrainDone>(&e.what)) {
    return StrFormat("%g train step=%d start=%g", e.at, t->step, t->started_at);
  }
  if (const auto* t = std::get_if<backend::SyncDone>(&e.what)) {
    return StrFormat("%g sync version=%d start=%g", e.at, t->version, t->started_at);
  }
  return StrFormat("%g layout", e.at);
}

// The events of one Wait(), described.
std::vector<std::string> Next(SimpleSim& sim) {
  auto events = sim.Wait();
  EXPECT_OK(events);
  std::vector<std::string> out;
  if (!events.ok()) return out;
  for (const Event& e : *events) out.push_back(Describe(e));
  return out;
}

// Every remaining Wait() batch, until nothing is in flight.
std::vector<std::vector<std::string>> RunToEnd(SimpleSim& sim) {
  std::vector<std::vector<std::string>> batches;
  for (int i = 0; i < 100; ++i) {
    std::vector<std::string> batch = Next(sim);
    if (batch.empty()) return batches;
    batches.push_back(batch);
  }
  ADD_FAILURE() << "the simulation did not finish";
  return batches;
}

using Batches = std::vector<std::vector<std::string>>;

class SimpleSimTest : public ::testing::Test {
 protected:
  // Applies the layout and consumes its LayoutApplied event.
  void Start(SimpleSim& sim, const backend::Layout& layout) {
    ASSERT_OK(sim.Submit(backend::ApplyLayout{layout}));
    ASSERT_EQ(Next(sim), (std::vector<std::string>{"0 layout"}));
  }

  FixedWorkload workload_;
};

TEST_F(SimpleSimTest, LayoutIsAppliedAtOnceAndNothingElseIsInFlight) {
  // ApplyLayout answers LayoutApplied at time 0; then Wait has nothing to return.
  SimpleSim sim(Spec(), workload_);
  EXPECT_EQ(sim.Name(), "sim");
  EXPECT_TRUE(Next(sim).empty());
  Start(sim, MakeLayout(1, {1}));
  EXPECT_TRUE(Next(sim).empty());
}

TEST_F(SimpleSimTest, TurnTimeIsPrefillPlusDecodeDividedByTp) {
  // A first turn prefills its whole context: (160 * 1/16 + 100 * 1/4) / tp = 35 / tp seconds.
  struct Case {
    std::string name;
    int tp;
    std::string done;
  };
  const std::vector<Case> cases = {
      {"tp1", 1, "35 turn traj=0 inst=0 start=0 tokens=100 stop reward=1"},
      {"tp2", 2, "17.5 turn traj=0 inst=0 start=0 tokens=100 stop reward=1"},
      {"tp4", 4, "8.75 turn traj=0 inst=0 start=0 tokens=100 stop reward=1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    workload_.Set(0, {Stop(100)}, 1.0);
    SimpleSim sim(Spec(), workload_);
    Start(sim, MakeLayout(1, {c.tp}));
    ASSERT_OK(sim.Submit(Turn(0, 0, 0, 160)));
    EXPECT_EQ(RunToEnd(sim), (Batches{{c.done}}));
  }
}

TEST_F(SimpleSimTest, ToolCallThenSecondTurnWithPrefixCaching) {
  // Turn 0 (context 64, 40 tokens): 64/16 + 40/4 = 14 s, ends in a tool call (reward 0). The tool
  // takes 2 s. Turn 1 (context 64 + 40 + 32 = 136, 20 tokens) on the same instance prefills only
  // the 32 new tokens: 2 + 5 = 7 s; on another instance the whole context: 8.5 + 5 = 13.5 s.
  struct Case {
    std::string name;
    int64_t second_instance;
    std::string last;
  };
  const std::vector<Case> cases = {
      {"same instance", 0, "23 turn traj=3 inst=0 start=16 tokens=20 stop reward=1"},
      {"other instance", 1, "29.5 turn traj=3 inst=1 start=16 tokens=20 stop reward=1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    workload_.Set(3, {Tool(40, 32), Stop(20)}, 1.0);
    SimpleSim sim(Spec(), workload_);
    Start(sim, MakeLayout(1, {1, 1}));
    ASSERT_OK(sim.Submit(Turn(3, 0, 0, 64)));
    EXPECT_EQ(Next(sim), (std::vector<std::string>{
                             "14 turn traj=3 inst=0 start=0 tokens=40 tool_call search reward=0"}));
    ASSERT_OK(sim.Submit(RunToolFor(3)));
    EXPECT_EQ(Next(sim), (std::vector<std::string>{"16 tool traj=3 start=14 out=32 failure"}));
    ASSERT_OK(sim.Submit(Turn(3, 1, c.second_instance, 136)));
    EXPECT_EQ(RunToEnd(sim), (Batches{{c.last}}));
  }
}

TEST_F(SimpleSimTest, TurnsBeyondTheBatchLimitQueue) {
  // A TP-1 instance with max_batch_per_gpu = 2 runs two 10 s turns at once; the third waits in
  // its FIFO queue and starts when one finishes. A TP-2 instance runs all three at once.
  struct Case {
    std::string name;
    int tp;
    Batches batches;
  };
  const std::vector<Case> cases = {
      {"tp1 holds two",
       1,
       {{"10 turn traj=0 inst=0 start=0 tokens=40 stop reward=0",
         "10 turn traj=1 inst=0 start=0 tokens=40 stop reward=0"},
        {"20 turn traj=2 inst=0 start=10 tokens=40 stop reward=0"}}},
      {"tp2 holds four",
       2,
       {{"5 turn traj=0 inst=0 start=0 tokens=40 stop reward=0",
         "5 turn traj=1 inst=0 start=0 tokens=40 stop reward=0",
         "5 turn traj=2 inst=0 start=0 tokens=40 stop reward=0"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    recipe::SimSpec spec = Spec();
    spec.max_batch_per_gpu = 2;
    for (int64_t p = 0; p < 3; ++p) workload_.Set(p, {Stop(40)}, 0.0);
    SimpleSim sim(spec, workload_);
    Start(sim, MakeLayout(1, {c.tp}));
    for (int64_t p = 0; p < 3; ++p) ASSERT_OK(sim.Submit(Turn(p, 0, 0, 0)));
    EXPECT_EQ(RunToEnd(sim), c.batches);
  }
}

TEST_F(SimpleSimTest, SyncPausesRunningTurnsAndDelaysNewOnes) {
  // A 10 s turn starts at 0; a (disaggregated) train step of 8 tokens on 1 GPU ends at 4 without
  // pausing it. A sync at 4 takes 5 s: the running turn ends 5 s later (15), and a turn started
  // during the sync begins when it ends (9) and runs its 10 s (19).
  workload_.Set(0, {Stop(40)}, 1.0);
  workload_.Set(1, {Stop(40)}, 0.0);
  SimpleSim sim(Spec(), workload_);
  Start(sim, MakeLayout(1, {1}));
  ASSERT_OK(sim.Submit(Turn(0, 0, 0, 0)));
  ASSERT_OK(sim.Submit(TrainOn(0, {8})));
  EXPECT_EQ(Next(sim), (std::vector<std::string>{"4 train step=0 start=0"}));
  ASSERT_OK(sim.Submit(backend::SyncWeights{1}));
  ASSERT_OK(sim.Submit(Turn(1, 0, 0, 0)));
  EXPECT_EQ(RunToEnd(sim), (Batches{{"9 sync version=1 start=4"},
                                    {"15 turn traj=0 inst=0 start=0 tokens=40 stop reward=1"},
                                    {"19 turn traj=1 inst=0 start=9 tokens=40 stop reward=0"}}));
}

TEST_F(SimpleSimTest, ColocatedTrainingPausesRollout) {
  // In a colocated layout a train step (8 tokens * 1/2 s / 1 GPU = 4 s) pauses the instances, so
  // a 10 s turn running meanwhile ends at 14; disaggregated, it ends at 10.
  struct Case {
    std::string name;
    bool colocated;
    Batches batches;
  };
  const std::vector<Case> cases = {
      {"colocated",
       true,
       {{"4 train step=2 start=0"}, {"14 turn traj=0 inst=0 start=0 tokens=40 stop reward=1"}}},
      {"disaggregated",
       false,
       {{"4 train step=2 start=0"}, {"10 turn traj=0 inst=0 start=0 tokens=40 stop reward=1"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    workload_.Set(0, {Stop(40)}, 1.0);
    SimpleSim sim(Spec(), workload_);
    Start(sim, MakeLayout(1, {1}, c.colocated));
    ASSERT_OK(sim.Submit(Turn(0, 0, 0, 0)));
    ASSERT_OK(sim.Submit(TrainOn(2, {3, 5})));
    EXPECT_EQ(RunToEnd(sim), c.batches);
  }
}

TEST_F(SimpleSimTest, ConsecutivePausesAddUp) {
  // A colocated train step [0, 4) then a sync [4, 9): a 10 s turn started at 0 runs 10 s of the
  // 19 and ends at 19. Overlapping pauses count once: a sync [0, 5) and a train [0, 4) delay it
  // by 5 only.
  struct Case {
    std::string name;
    bool sync_first;
    Batches batches;
  };
  const std::vector<Case> cases = {
      {"train then sync",
       false,
       {{"4 train step=0 start=0"},
        {"9 sync version=1 start=4"},
        {"19 turn traj=0 inst=0 start=0 tokens=40 stop reward=1"}}},
      {"sync and train overlap",
       true,
       {{"4 train step=0 start=0"},
        {"5 sync version=1 start=0"},
        {"15 turn traj=0 inst=0 start=0 tokens=40 stop reward=1"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    workload_.Set(0, {Stop(40)}, 1.0);
    SimpleSim sim(Spec(), workload_);
    Start(sim, MakeLayout(1, {1}, /*colocated=*/true));
    ASSERT_OK(sim.Submit(Turn(0, 0, 0, 0)));
    if (c.sync_first) ASSERT_OK(sim.Submit(backend::SyncWeights{1}));
    ASSERT_OK(sim.Submit(TrainOn(0, {8})));
    Batches batches;
    batches.push_back(Next(sim));
    if (!c.sync_first) ASSERT_OK(sim.Submit(backend::SyncWeights{1}));
    for (const auto& b : RunToEnd(sim)) batches.push_back(b);
    EXPECT_EQ(batches, c.batches);
  }
}

TEST_F(SimpleSimTest, SimultaneousEventsComeInRankOrder) {
  // Events at one time come in one Wait, trainer completions before turns before tools,
  // whatever the submission order.
  workload_.Set(0, {Tool(8, 0), Stop(16)}, 1.0);
  workload_.Set(1, {Stop(8)}, 1.0);
  SimpleSim sim(Spec(), workload_);
  Start(sim, MakeLayout(2, {1}));
  ASSERT_OK(sim.Submit(Turn(0, 0, 0, 0)));  // 2 s
  EXPECT_EQ(Next(sim), (std::vector<std::string>{
                           "2 turn traj=0 inst=0 start=0 tokens=8 tool_call search reward=0"}));
  ASSERT_OK(sim.Submit(RunToolFor(0)));     // ends at 4
  ASSERT_OK(sim.Submit(Turn(1, 0, 0, 0)));  // ends at 4
  ASSERT_OK(sim.Submit(TrainOn(5, {8})));   // 8 * 1/2 / 2 GPUs = 2 s: ends at 4
  EXPECT_EQ(Next(sim), (std::vector<std::string>{
                           "4 train step=5 start=2",
                           "4 turn traj=1 inst=0 start=2 tokens=8 stop reward=1",
                           "4 tool traj=0 start=2 out=0 failure",
                       }));
}

TEST_F(SimpleSimTest, RejectsBadActions) {
  // Actions that make no sense in the current state are backend errors that say why.
  workload_.Set(0, {Tool(8, 4), Stop(8)}, 1.0);
  workload_.Set(1, {Stop(8)}, 1.0);
  struct Case {
    std::string name;
    std::vector<backend::Action> setup;
    backend::Action action;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown instance", {}, Turn(0, 0, 2, 0), "sim: StartTurn on unknown instance 2"},
      {"negative instance", {}, Turn(0, 0, -1, 0), "sim: StartTurn on unknown instance -1"},
      {"out-of-order turn", {}, Turn(0, 1, 0, 0), "sim: trajectory 0: unexpected turn 1"},
      {"turn while running",
       {Turn(0, 0, 0, 0)},
       Turn(0, 0, 0, 0),
       "sim: trajectory 0: unexpected turn 0"},
      {"turn beyond the script", {}, Turn(1, 1, 0, 0), "sim: trajectory 1: unexpected turn 1"},
      {"tool for unknown trajectory",
       {},
       RunToolFor(7),
       "sim: RunTool for trajectory 7 that is not waiting for a tool"},
      {"tool while the turn runs",
       {Turn(0, 0, 0, 0)},
       RunToolFor(0),
       "sim: RunTool for trajectory 0 that is not waiting for a tool"},
      {"layout during a run",
       {Turn(0, 0, 0, 0)},
       backend::ApplyLayout{MakeLayout(1, {1})},
       "sim: changing the layout during a run is not supported yet"},
      {"instance ids out of order",
       {},
       backend::ApplyLayout{[] {
         backend::Layout l = MakeLayout(1, {1, 1});
         l.instances[1].id = InstanceId(5);
         return l;
       }()},
       "sim: instance ids must be 0..n-1 in order"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SimpleSim sim(Spec(), workload_);
    Start(sim, MakeLayout(1, {1, 1}));
    for (const backend::Action& a : c.setup) ASSERT_OK(sim.Submit(a));
    EXPECT_EQ(sim.Submit(c.action), Status::Backend("sim", c.message.substr(5)));
  }
}

TEST_F(SimpleSimTest, RejectedActionsLeaveNoTrace) {
  // A rejected turn records nothing (the layout can still change), and a tool runs once only.
  workload_.Set(0, {Tool(8, 4), Stop(8)}, 1.0);
  SimpleSim sim(Spec(), workload_);
  Start(sim, MakeLayout(1, {1, 1}));
  EXPECT_EQ(sim.Submit(Turn(0, 1, 0, 0)).code(), StatusCode::kBackend);
  EXPECT_OK(sim.Submit(backend::ApplyLayout{MakeLayout(1, {1})}));
  ASSERT_EQ(Next(sim).size(), 1u);
  ASSERT_OK(sim.Submit(Turn(0, 0, 0, 0)));
  ASSERT_EQ(Next(sim).size(), 1u);
  ASSERT_OK(sim.Submit(RunToolFor(0)));
  EXPECT_EQ(sim.Submit(RunToolFor(0)),
            Status::Backend("sim", "RunTool for trajectory 0 that is not waiting for a tool"));
}

TEST_F(SimpleSimTest, TrainWithoutTrainingGpusFails) {
  // A layout without training GPUs cannot train.
  SimpleSim sim(Spec(), workload_);
  Start(sim, MakeLayout(0, {1}));
  EXPECT_EQ(sim.Submit(TrainOn(0, {8})), Status::Backend("sim", "Train with no training GPUs"));
}

TEST_F(SimpleSimTest, StartTurnBeforeLayoutFails) {
  // Before a layout there is no instance to run on.
  workload_.Set(0, {Stop(8)}, 1.0);
  SimpleSim sim(Spec(), workload_);
  EXPECT_EQ(sim.Submit(Turn(0, 0, 0, 0)),
            Status::Backend("sim", "StartTurn on unknown instance 0"));
}

TEST_F(SimpleSimTest, ToolAfterAFinalTurnFails) {
  // Once a trajectory's last turn is done it waits for no tool.
  workload_.Set(0, {Stop(8)}, 1.0);
  SimpleSim sim(Spec(), workload_);
  Start(sim, MakeLayout(1, {1}));
  ASSERT_OK(sim.Submit(Turn(0, 0, 0, 0)));
  ASSERT_EQ(Next(sim).size(), 1u);
  EXPECT_EQ(sim.Submit(RunToolFor(0)).code(), StatusCode::kBackend);
}

}  // namespace
}  // namespace libra::sim
