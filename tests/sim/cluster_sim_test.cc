#include "sim/cluster_sim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "model/catalog.h"
#include "model/partition.h"
#include "model/roofline_model.h"
#include "support/test_util.h"

namespace libra::sim {
namespace {

using ::testing::HasSubstr;

// ---- Fakes and builders ------------------------------------------------------------------------

/// A cost model with round numbers, so that expectations are hand computations: an iteration takes
/// (10 ms + 1 ms per sequence or chunk + 0.1 ms per prefilled token + 1 us per KV token read) / tp;
/// KV holds capacity_per_gpu * tp tokens; a train step takes 1 ms per token over the GPUs; a weight
/// sync 5 s (NCCL) or 30 s (disk); a role switch 2 s out of rollout and 3 s back. Decode spans are
/// the base class's sum of iterations.
class FakeCostModel : public model::CostModel {
 public:
  FakeCostModel() {
    gpu_.name = "fake-gpu";
    arch_.name = "fake-model";
  }
  std::string_view Name() const override { return "fake"; }
  const model::GpuSpec& gpu() const override { return gpu_; }
  const model::ModelArch& arch() const override { return arch_; }
  int64_t KvCapacityTokens(int tp) const override { return capacity_per_gpu * tp; }
  double IterationTime(int tp, const model::IterationLoad& load) const override {
    if (load.empty()) return 0;
    return (0.010 + 0.001 * static_cast<double>(load.decode_sequences + load.prefill_chunks) +
            1e-4 * static_cast<double>(load.prefill_tokens) +
            1e-6 * static_cast<double>(load.decode_context_tokens + load.prefill_kv_tokens)) /
           tp;
  }
  double PrefillTime(int tp, int64_t tokens, int64_t prior_tokens) const override {
    model::IterationLoad load;
    load.AddPrefill(tokens, prior_tokens);
    return IterationTime(tp, load);
  }
  double DecodeGpuSecondsLowerBound(int64_t, int64_t) const override { return 0; }
  double PrefillGpuSecondsLowerBound() const override { return 0; }
  double TrainGpuSecondsLowerBound(int64_t, const model::TrainPasses&) const override { return 0; }
  model::TrainEstimate TrainStep(const model::TrainLayout& layout, const model::TrainPasses&,
                                 std::span<const int64_t> sequence_tokens) const override {
    model::TrainEstimate e;
    const int64_t tokens =
        std::accumulate(sequence_tokens.begin(), sequence_tokens.end(), int64_t{0});
    e.step_s = 0.001 * static_cast<double>(tokens) / layout.gpus();
    e.memory_bytes = 1;
    e.memory_limit_bytes = 2;
    return e;
  }
  double WeightSyncTime(const model::SyncRequest& request) const override {
    last_sync = request;
    return request.path == model::SyncPath::kDisk ? 30 : 5;
  }
  double RoleSwitchTime(const model::SwitchRequest& request) const override {
    return request.direction == model::SwitchDirection::kRolloutToTrain ? 2 : 3;
  }

  int64_t capacity_per_gpu = 1'000'000;
  /// The last request WeightSyncTime saw.
  mutable model::SyncRequest last_sync;

 private:
  model::GpuSpec gpu_;
  model::ModelArch arch_;
};

/// Trajectories scripted by hand, looked up by prompt (the tests use the trajectory id).
class ScriptedWorkload : public workload::Workload {
 public:
  void Add(int64_t prompt, std::vector<workload::TurnScript> turns, double reward = 1) {
    workload::TrajectoryScript script;
    script.turns = std::move(turns);
    script.reward = reward;
    scripts_[prompt] = std::move(script);
  }
  std::string Describe() const override { return "scripted"; }
  workload::PromptInfo Prompt(int64_t index) const override { return {index, 0, 0.5}; }
  workload::TrajectoryScript Script(int64_t prompt, int, int, double) const override {
    auto it = scripts_.find(prompt);
    return it == scripts_.end() ? workload::TrajectoryScript{} : it->second;
  }
  const workload::SkillParams& skill_params() const override { return skill_; }

 private:
  std::map<int64_t, workload::TrajectoryScript> scripts_;
  workload::SkillParams skill_;
};

workload::TurnScript Stop(int64_t generated) {
  workload::TurnScript t;
  t.generated_tokens = generated;
  t.end = workload::TurnEnd::kStop;
  return t;
}

workload::TurnScript ToolCall(int64_t generated, double latency_s, int64_t output_tokens,
                              workload::ToolStatus status = workload::ToolStatus::kSuccess) {
  workload::TurnScript t;
  t.generated_tokens = generated;
  t.end = workload::TurnEnd::kToolCall;
  t.tool = "bash";
  t.tool_status = status;
  t.tool_output_tokens = output_tokens;
  t.tool_latency_s = latency_s;
  return t;
}

/// `instances` instances of TP `tp` side by side on node 0; the trainer on `train_gpus` GPUs (DP).
backend::Layout MakeLayout(int instances, int tp, int train_gpus = 0, bool colocated = false) {
  backend::Layout layout;
  for (int i = 0; i < instances; ++i) {
    layout.instances.push_back(backend::InstanceSpec{InstanceId(i), tp, 0, i * tp});
  }
  layout.train_gpus = train_gpus;
  layout.train.dp = train_gpus > 0 ? train_gpus : 1;
  layout.colocated = colocated;
  return layout;
}

backend::Action Turn(int64_t trajectory, int turn, int64_t instance, int64_t context_tokens) {
  backend::StartTurn s;
  s.trajectory = TrajectoryId(trajectory);
  s.prompt = trajectory;
  s.turn = turn;
  s.instance = InstanceId(instance);
  s.context_tokens = context_tokens;
  return s;
}

backend::Action Tool(int64_t trajectory) {
  return backend::RunTool{TrajectoryId(trajectory), "bash"};
}

backend::Action TrainStep(int step, std::vector<int64_t> tokens) {
  return backend::Train{step, std::move(tokens)};
}

model::RooflineCostModel Roofline(const std::string& gpu, const std::string& arch) {
  return model::RooflineCostModel(
      model::CostModelContext{model::FindGpu(gpu).value(), model::FindModel(arch).value(), 8},
      model::RooflineParams());
}

model::IterationLoad Prefills(int64_t chunks, int64_t tokens, int64_t prior_tokens) {
  model::IterationLoad load;
  for (int64_t i = 0; i < chunks; ++i) load.AddPrefill(tokens, prior_tokens);
  return load;
}

/// Relative tolerance of the closed-form comparisons.
double Tol(double expected) { return 1e-9 * std::abs(expected); }

const backend::TurnDone* AsTurn(const backend::Event& e) {
  return std::get_if<backend::TurnDone>(&e.what);
}

/// The next events; empty (and a test failure) on an error.
std::vector<backend::Event> Next(ClusterSim& sim) {
  auto events = sim.Wait();
  EXPECT_OK(events);
  return events.ok() ? events.value() : std::vector<backend::Event>{};
}

/// Every event until nothing is in flight.
std::vector<backend::Event> Drain(ClusterSim& sim) {
  std::vector<backend::Event> all;
  for (int guard = 0; guard < 10000; ++guard) {
    std::vector<backend::Event> events = Next(sim);
    if (events.empty()) return all;
    all.insert(all.end(), events.begin(), events.end());
  }
  ADD_FAILURE() << "the simulation does not drain";
  return all;
}

/// The TurnDone of `trajectory`'s `nth` finished turn among `events` (nullptr when absent).
const backend::Event* FindTurn(const std::vector<backend::Event>& events, int64_t trajectory,
                               int nth = 0) {
  for (const backend::Event& e : events) {
    const backend::TurnDone* done = AsTurn(e);
    if (done != nullptr && done->trajectory == TrajectoryId(trajectory) && nth-- == 0) return &e;
  }
  return nullptr;
}

/// Submits `actions`, then waits until nothing is in flight: the first error, or OK.
Status RunToError(ClusterSim& sim, const std::vector<backend::Action>& actions) {
  for (const backend::Action& a : actions) {
    Status s = sim.Submit(a);
    if (!s.ok()) return s;
  }
  for (int guard = 0; guard < 10000; ++guard) {
    auto events = sim.Wait();
    if (!events.ok()) return events.status();
    if (events.value().empty()) return Status();
  }
  return Status::Internal("the simulation does not drain");
}

/// One line per event, times at full precision.
std::string Describe(const backend::Event& e) {
  return std::visit(
      [&](const auto& w) -> std::string {
        using T = std::decay_t<decltype(w)>;
        if constexpr (std::is_same_v<T, backend::TurnDone>) {
          return StrFormat(
              "%.17g turn %lld inst %lld tokens %lld %s started %.17g", e.at,
              static_cast<long long>(w.trajectory.value), static_cast<long long>(w.instance.value),
              static_cast<long long>(w.generated_tokens), NameOf(w.end).c_str(), w.started_at);
        } else if constexpr (std::is_same_v<T, backend::ToolDone>) {
          return StrFormat("%.17g tool %lld %s out %lld started %.17g", e.at,
                           static_cast<long long>(w.trajectory.value), NameOf(w.status).c_str(),
                           static_cast<long long>(w.output_tokens), w.started_at);
        } else if constexpr (std::is_same_v<T, backend::TrainDone>) {
          return StrFormat("%.17g train %d started %.17g", e.at, w.step, w.started_at);
        } else if constexpr (std::is_same_v<T, backend::SyncDone>) {
          return StrFormat("%.17g sync %d started %.17g", e.at, w.version, w.started_at);
        } else {
          return StrFormat("%.17g layout", e.at);
        }
      },
      e.what);
}

class ClusterSimTest : public ::testing::Test {
 protected:
  /// A simulator on `layout` (the fake cost model unless `cost` is given), its layout applied.
  std::unique_ptr<ClusterSim> Start(const backend::Layout& layout,
                                    const model::CostModel* cost = nullptr) {
    auto sim = std::make_unique<ClusterSim>(spec_, workload_, cost != nullptr ? *cost : fake_);
    EXPECT_OK(sim->Submit(backend::ApplyLayout{layout}));
    const std::vector<backend::Event> applied = Next(*sim);
    EXPECT_EQ(applied.size(), 1u);
    if (!applied.empty()) {
      EXPECT_TRUE(std::holds_alternative<backend::LayoutApplied>(applied[0].what));
      EXPECT_EQ(applied[0].at, 0.0);
    }
    return sim;
  }

  recipe::SimSpec spec_;
  FakeCostModel fake_;
  ScriptedWorkload workload_;
};

// ---- Decode against the cost model -------------------------------------------------------------

TEST_F(ClusterSimTest, LoneTurnTakesOnePrefillIterationPlusOneDecodeSpan) {
  // One sequence alone on a roofline instance: its turn lasts the mixed iteration that prefills the
  // prompt as one chunk (sampling the first token) plus the closed-form span of the other tokens,
  // which is also the sum of those iterations one by one.
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-8B");
  struct Case {
    std::string name;
    int tp;
    int64_t context;
    int64_t generated;
  };
  const std::vector<Case> cases = {
      {"tp1", 1, 1000, 500},
      {"tp2 long context", 2, 6000, 3000},
      {"tp4 one token", 4, 8000, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    workload_.Add(1, {Stop(c.generated)}, 0.75);
    auto sim = Start(MakeLayout(1, c.tp), &cost);
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, c.context)));
    const std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    const backend::TurnDone* done = AsTurn(events[0]);
    ASSERT_NE(done, nullptr);

    const double prefill = cost.IterationTime(c.tp, Prefills(1, c.context, 0));
    const double closed = prefill + cost.DecodeSpanTime(c.tp, 1, c.context + 1, c.generated - 1);
    EXPECT_NEAR(events[0].at, closed, Tol(closed));
    double stepwise = prefill;
    for (int64_t i = 0; i + 1 < c.generated; ++i) {
      model::IterationLoad decode;
      decode.AddDecode(c.context + 1 + i);
      stepwise += cost.IterationTime(c.tp, decode);
    }
    EXPECT_NEAR(events[0].at, stepwise, Tol(stepwise));

    EXPECT_EQ(done->trajectory, TrajectoryId(1));
    EXPECT_EQ(done->instance, InstanceId(0));
    EXPECT_EQ(done->generated_tokens, c.generated);
    EXPECT_EQ(done->end, workload::TurnEnd::kStop);
    EXPECT_EQ(done->reward, 0.75);
    EXPECT_EQ(done->started_at, 0.0);
    EXPECT_EQ(sim->stats().mixed_iterations, 1);
    EXPECT_EQ(sim->stats().spans, c.generated > 1 ? 1 : 0);
    EXPECT_EQ(sim->stats().iterations, c.generated);
    EXPECT_EQ(sim->stats().preemptions, 0);
    EXPECT_TRUE(Next(*sim).empty());
  }
}

TEST_F(ClusterSimTest, WaitIntoReplacesTheVectorWithWhatWaitReturns) {
  // The coordinator waits into one vector for the whole run: each wait replaces its contents
  // with exactly the events Wait returns.
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-8B");
  workload_.Add(1, {Stop(300)}, 0.75);
  workload_.Add(2, {Stop(40)}, 0.75);
  auto by_value = Start(MakeLayout(1, 1), &cost);
  auto into = Start(MakeLayout(1, 1), &cost);
  for (ClusterSim* sim : {by_value.get(), into.get()}) {
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 500)));
    ASSERT_OK(sim->Submit(Turn(2, 0, 0, 200)));
  }
  std::vector<backend::Event> events = {backend::Event{-1, backend::LayoutApplied{}}};
  for (int wait = 0; wait < 3; ++wait) {
    SCOPED_TRACE(wait);
    const std::vector<backend::Event> expected = Next(*by_value);
    ASSERT_OK(into->WaitInto(&events));
    ASSERT_EQ(events.size(), expected.size());
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].at, expected[i].at);
      ASSERT_NE(AsTurn(events[i]), nullptr);
      EXPECT_EQ(AsTurn(events[i])->trajectory, AsTurn(expected[i])->trajectory);
    }
    if (expected.empty()) break;
  }
  EXPECT_TRUE(events.empty());  // nothing left in flight
}

TEST_F(ClusterSimTest, IdenticalSequencesDecodeAtTheCostModelsThroughput) {
  // N identical sequences started together: one mixed iteration prefills every prompt, one span
  // decodes the rest, so the batch's tokens per second are the cost model's.
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-8B");
  struct Case {
    std::string name;
    int64_t sequences;
    int64_t context;
    int64_t generated;
  };
  const std::vector<Case> cases = {
      {"one", 1, 2000, 300},
      {"sixteen", 16, 500, 1000},
      {"sixty-four", 64, 128, 400},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (int64_t id = 0; id < c.sequences; ++id) workload_.Add(id, {Stop(c.generated)});
    auto sim = Start(MakeLayout(1, 1), &cost);
    for (int64_t id = 0; id < c.sequences; ++id) ASSERT_OK(sim->Submit(Turn(id, 0, 0, c.context)));
    const std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(static_cast<int64_t>(events.size()), c.sequences);  // all finish together

    const double expected =
        cost.IterationTime(1, Prefills(c.sequences, c.context, 0)) +
        cost.DecodeSpanTime(1, c.sequences, c.sequences * (c.context + 1), c.generated - 1);
    EXPECT_NEAR(events[0].at, expected, Tol(expected));
    const double tokens = static_cast<double>(c.sequences * c.generated);
    EXPECT_NEAR(tokens / events[0].at, tokens / expected, Tol(tokens / expected));
    EXPECT_EQ(sim->stats().mixed_iterations, 1);
    EXPECT_EQ(sim->stats().spans, 1);
    EXPECT_EQ(sim->stats().preemptions, 0);
  }
}

// ---- Continuous batching -----------------------------------------------------------------------

TEST_F(ClusterSimTest, LateTurnJoinsTheBatchAtTheNextIterationBoundary) {
  // A decodes alone; B arrives at 1 s (when a train step ends), mid-span. A's span is cut at its
  // next iteration boundary, B's prefill rides along A's decode in one mixed iteration, both decode
  // together until B ends, then A alone: A ends later than alone, at the hand-computed time, and
  // the instance advanced by spans, not per iteration.
  workload_.Add(1, {Stop(200)});
  workload_.Add(2, {Stop(20)});
  auto sim = Start(MakeLayout(1, 1, /*train_gpus=*/1));
  ASSERT_OK(sim->Submit(Turn(1, 0, 0, 100)));
  ASSERT_OK(sim->Submit(TrainStep(0, {1000})));  // a 1 s timer
  std::vector<backend::Event> events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<backend::TrainDone>(events[0].what));
  ASSERT_EQ(events[0].at, 1.0);
  ASSERT_OK(sim->Submit(Turn(2, 0, 0, 50)));

  const FakeCostModel& c = fake_;
  const double p = c.PrefillTime(1, 100, 0);
  const int64_t k = model::DecodeIterationsWithin(c, 1, 1, 101, 199, 1.0 - p);
  ASSERT_GT(k, 0);
  ASSERT_LT(k, 150);
  ASSERT_LT(p + c.DecodeSpanTime(1, 1, 101, k), 1.0);  // 1 s falls strictly inside iteration k+1
  ASSERT_GT(p + c.DecodeSpanTime(1, 1, 101, k + 1), 1.0);
  const double cut = p + c.DecodeSpanTime(1, 1, 101, k + 1);
  model::IterationLoad mixed;
  mixed.AddDecode(102 + k);
  mixed.AddPrefill(50, 0);
  const double joined = cut + c.IterationTime(1, mixed);
  const double b_done = joined + c.DecodeSpanTime(1, 2, (103 + k) + 51, 19);
  const double a_done = b_done + c.DecodeSpanTime(1, 1, 103 + k + 19, 178 - k);
  const double a_alone = p + c.DecodeSpanTime(1, 1, 101, 199);

  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const backend::TurnDone* b = AsTurn(events[0]);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->trajectory, TrajectoryId(2));
  EXPECT_NEAR(events[0].at, b_done, Tol(b_done));
  EXPECT_NEAR(b->started_at, cut, Tol(cut));

  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const backend::TurnDone* a = AsTurn(events[0]);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->trajectory, TrajectoryId(1));
  EXPECT_EQ(a->generated_tokens, 200);
  EXPECT_NEAR(events[0].at, a_done, Tol(a_done));
  EXPECT_GT(events[0].at, a_alone + 0.001);
  EXPECT_EQ(a->started_at, 0.0);

  const SimStats& s = sim->stats();
  EXPECT_EQ(s.mixed_iterations, 2);  // A's prefill, then B's alongside A's decode
  EXPECT_EQ(s.spans, 3);             // A alone (cut), A and B, A alone
  EXPECT_EQ(s.iterations, 200);      // every token of A is one iteration of the instance
  EXPECT_GT(s.iterations, 10 * s.events);
  EXPECT_TRUE(Next(*sim).empty());
}

// ---- KV admission and preemption ---------------------------------------------------------------

TEST_F(ClusterSimTest, OverflowingBatchPreemptsTheLastAdmittedAndRecomputesIt) {
  // KV holds 100 tokens; three turns of 20-token prompts generating 30 each need 150. All three are
  // admitted; after 13 tokens each KV is full, the last admitted is preempted; the other two finish
  // and it is readmitted, prefilling its whole 33-token context again.
  fake_.capacity_per_gpu = 100;
  for (int64_t id = 1; id <= 3; ++id) workload_.Add(id, {Stop(30)});
  auto sim = Start(MakeLayout(1, 1));
  for (int64_t id = 1; id <= 3; ++id) ASSERT_OK(sim->Submit(Turn(id, 0, 0, 20)));

  const FakeCostModel& c = fake_;
  const double full = c.IterationTime(1, Prefills(3, 20, 0)) + c.DecodeSpanTime(1, 3, 63, 12);
  const double two_done = full + c.DecodeSpanTime(1, 2, 66, 17);
  const double third_done = two_done + c.PrefillTime(1, 33, 0) + c.DecodeSpanTime(1, 1, 34, 16);

  std::vector<backend::Event> events = Next(*sim);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(AsTurn(events[0])->trajectory, TrajectoryId(1));
  EXPECT_EQ(AsTurn(events[1])->trajectory, TrajectoryId(2));
  EXPECT_NEAR(events[0].at, two_done, Tol(two_done));
  EXPECT_EQ(sim->stats().preemptions, 1);

  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const backend::TurnDone* third = AsTurn(events[0]);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->trajectory, TrajectoryId(3));
  EXPECT_EQ(third->generated_tokens, 30);
  EXPECT_EQ(third->started_at, 0.0);
  EXPECT_NEAR(events[0].at, third_done, Tol(third_done));
  EXPECT_EQ(sim->stats().preemptions, 1);
  EXPECT_EQ(sim->stats().mixed_iterations, 2);  // the first prefill and the recompute
  EXPECT_TRUE(Next(*sim).empty());
}

TEST_F(ClusterSimTest, TurnThatCanNeverFitInKvIsABackendError) {
  // KV holds 100 tokens. A turn whose context, or context plus generation, exceeds it fails the run
  // with a backend error naming the trajectory, on an idle or a busy instance; one that fills KV
  // exactly completes.
  fake_.capacity_per_gpu = 100;
  struct Case {
    std::string name;
    bool busy;  // another turn runs on the instance first
    int64_t context;
    int64_t generated;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"context too large, idle instance", false, 150, 10, false},
      {"context too large, busy instance", true, 150, 10, false},
      {"generation outgrows KV", false, 90, 20, false},
      {"generation outgrows KV, busy instance", true, 90, 20, false},
      {"context and generation fill KV exactly", false, 90, 10, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    workload_.Add(1, {Stop(5)});
    workload_.Add(7, {Stop(c.generated)});
    auto sim = Start(MakeLayout(1, 1));
    std::vector<backend::Action> actions;
    if (c.busy) actions.push_back(Turn(1, 0, 0, 5));
    actions.push_back(Turn(7, 0, 0, c.context));
    const Status s = RunToError(*sim, actions);
    if (c.ok) {
      EXPECT_OK(s);
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kBackend) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("trajectory 7"));
    EXPECT_THAT(s.message(), HasSubstr("KV cache"));
  }
}

// ---- Prefix caching ----------------------------------------------------------------------------

TEST_F(ClusterSimTest, NextTurnReusesItsCachedContextOnlyOnTheSameInstance) {
  // Turn 0 (2,000-token prompt, 300 generated) calls a tool that returns 500 tokens. Turn 1 on the
  // same instance prefills only those 500 (a prefix hit); on another instance, or with KV freed
  // during tools, it prefills the whole 2,800-token context: slower by exactly the re-prefill.
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-8B");
  struct Case {
    std::string name;
    recipe::KvPolicy kv_policy;
    int64_t instance;
    bool hit;
  };
  const std::vector<Case> cases = {
      {"same instance", recipe::KvPolicy::kCache, 0, true},
      {"other instance", recipe::KvPolicy::kCache, 1, false},
      {"same instance, KV freed", recipe::KvPolicy::kFree, 0, false},
  };
  std::map<std::string, double> durations;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    spec_.kv_policy = c.kv_policy;
    workload_.Add(1, {ToolCall(300, 1.0, 500), Stop(200)});
    auto sim = Start(MakeLayout(2, 1), &cost);
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 2000)));
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_NE(AsTurn(events[0]), nullptr);
    EXPECT_EQ(AsTurn(events[0])->end, workload::TurnEnd::kToolCall);
    ASSERT_OK(sim->Submit(Tool(1)));
    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    const double tool_done = events[0].at;
    ASSERT_OK(sim->Submit(Turn(1, 1, c.instance, 2800)));
    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_NE(AsTurn(events[0]), nullptr);
    EXPECT_EQ(AsTurn(events[0])->instance, InstanceId(c.instance));
    const double duration = events[0].at - tool_done;
    durations[c.name] = duration;

    const double prefill =
        c.hit ? cost.IterationTime(1, Prefills(1, 500, 2300)) : cost.PrefillTime(1, 2800, 0);
    const double expected = prefill + cost.DecodeSpanTime(1, 1, 2801, 199);
    EXPECT_NEAR(duration, expected, 1e-8 * expected);  // a difference of two event times
    EXPECT_EQ(sim->stats().prefix_hits, c.hit ? 1 : 0);
    EXPECT_EQ(sim->stats().evictions, 0);
  }
  const double reprefill =
      cost.PrefillTime(1, 2800, 0) - cost.IterationTime(1, Prefills(1, 500, 2300));
  EXPECT_GT(reprefill, 0.01);
  EXPECT_NEAR(durations["other instance"] - durations["same instance"], reprefill, 1e-6);
  EXPECT_NEAR(durations["same instance, KV freed"], durations["other instance"], 1e-9);
}

TEST_F(ClusterSimTest, LeastRecentlyUsedCachedContextIsEvictedUnderPressure) {
  // KV holds 200 tokens. Trajectories 1 and 2 call tools, caching 55 and 60 tokens (1 first). A
  // third turn needing 100 tokens evicts 1's context (the least recently used) but not 2's: 1's
  // next turn prefills everything, 2's hits its cache. Without the third turn both hit.
  fake_.capacity_per_gpu = 200;
  for (const bool pressure : {true, false}) {
    SCOPED_TRACE(pressure ? "under pressure" : "no pressure");
    workload_.Add(1, {ToolCall(5, 1.0, 5), Stop(5)});
    workload_.Add(2, {ToolCall(10, 1.0, 5), Stop(5)});
    workload_.Add(3, {Stop(10)});
    auto sim = Start(MakeLayout(1, 1));
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 50)));
    ASSERT_OK(sim->Submit(Turn(2, 0, 0, 50)));
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_NE(FindTurn(events, 1), nullptr);
    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_NE(FindTurn(events, 2), nullptr);
    if (pressure) {
      ASSERT_OK(sim->Submit(Turn(3, 0, 0, 100)));
      events = Next(*sim);
      ASSERT_NE(FindTurn(events, 3), nullptr);
    }
    ASSERT_OK(sim->Submit(Tool(1)));
    ASSERT_OK(sim->Submit(Tool(2)));
    events = Next(*sim);
    ASSERT_EQ(events.size(), 2u);
    ASSERT_OK(sim->Submit(Turn(1, 1, 0, 60)));
    ASSERT_OK(sim->Submit(Turn(2, 1, 0, 65)));
    events = Drain(*sim);
    EXPECT_NE(FindTurn(events, 1), nullptr);
    EXPECT_NE(FindTurn(events, 2), nullptr);
    EXPECT_EQ(sim->stats().evictions, pressure ? 1 : 0);
    EXPECT_EQ(sim->stats().prefix_hits, pressure ? 1 : 2);
    EXPECT_EQ(sim->stats().preemptions, 0);
  }
}

TEST_F(ClusterSimTest, GrowingBatchEvictsCachedContextsBeforePreempting) {
  // KV holds 200 tokens; trajectory 1 waits for its tool with 105 tokens cached. Trajectory 2 (a
  // 50-token prompt generating 100) fits at admission but outgrows the free KV while decoding: the
  // cached context is evicted (as engines reuse free cached blocks first), nothing is preempted,
  // and 2 ends when it would alone.
  fake_.capacity_per_gpu = 200;
  workload_.Add(1, {ToolCall(5, 1.0, 0), Stop(5)});
  workload_.Add(2, {Stop(100)});
  auto sim = Start(MakeLayout(1, 1));
  ASSERT_OK(sim->Submit(Turn(1, 0, 0, 100)));
  std::vector<backend::Event> events = Next(*sim);
  ASSERT_NE(FindTurn(events, 1), nullptr);
  const double start = events[0].at;
  ASSERT_OK(sim->Submit(Turn(2, 0, 0, 50)));
  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_NE(FindTurn(events, 2), nullptr);
  const double alone = fake_.PrefillTime(1, 50, 0) + fake_.DecodeSpanTime(1, 1, 51, 99);
  EXPECT_NEAR(events[0].at - start, alone, 1e-9);
  EXPECT_EQ(sim->stats().evictions, 1);
  EXPECT_EQ(sim->stats().preemptions, 0);

  ASSERT_OK(sim->Submit(Tool(1)));
  ASSERT_EQ(Next(*sim).size(), 1u);
  ASSERT_OK(sim->Submit(Turn(1, 1, 0, 105)));
  events = Drain(*sim);
  EXPECT_NE(FindTurn(events, 1), nullptr);
  EXPECT_EQ(sim->stats().prefix_hits, 0);  // evicted
}

// ---- Engine limits -----------------------------------------------------------------------------

TEST_F(ClusterSimTest, MaxNumSeqsMakesTheRestWait) {
  // max_num_seqs 2: of three identical turns two run; the third starts when they finish.
  spec_.max_num_seqs = 2;
  for (int64_t id = 1; id <= 3; ++id) workload_.Add(id, {Stop(10)});
  auto sim = Start(MakeLayout(1, 1));
  for (int64_t id = 1; id <= 3; ++id) ASSERT_OK(sim->Submit(Turn(id, 0, 0, 10)));

  const FakeCostModel& c = fake_;
  const double first = c.IterationTime(1, Prefills(2, 10, 0)) + c.DecodeSpanTime(1, 2, 22, 9);
  const double third = first + c.PrefillTime(1, 10, 0) + c.DecodeSpanTime(1, 1, 11, 9);
  std::vector<backend::Event> events = Next(*sim);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NEAR(events[0].at, first, Tol(first));
  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const backend::TurnDone* done = AsTurn(events[0]);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->trajectory, TrajectoryId(3));
  EXPECT_NEAR(done->started_at, first, Tol(first));
  EXPECT_NEAR(events[0].at, third, Tol(third));
}

TEST_F(ClusterSimTest, MaxBatchedTokensChunksALongPrefill) {
  // A 250-token prompt is prefilled in chunks of at most max_batched_tokens, one iteration each,
  // every chunk attending over the ones before it.
  struct Case {
    std::string name;
    int budget;
    std::vector<int64_t> chunks;
  };
  const std::vector<Case> cases = {
      {"three chunks", 100, {100, 100, 50}},
      {"one token short", 249, {249, 1}},
      {"exact fit", 250, {250}},
      {"default budget", 8192, {250}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    spec_.max_batched_tokens = c.budget;
    workload_.Add(1, {Stop(5)});
    auto sim = Start(MakeLayout(1, 1));
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 250)));
    const std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    double expected = 0;
    int64_t prior = 0;
    for (const int64_t chunk : c.chunks) {
      expected += fake_.IterationTime(1, Prefills(1, chunk, prior));
      prior += chunk;
    }
    expected += fake_.DecodeSpanTime(1, 1, 251, 4);
    EXPECT_NEAR(events[0].at, expected, Tol(expected));
    EXPECT_EQ(sim->stats().mixed_iterations, static_cast<int64_t>(c.chunks.size()));
  }
}

// ---- Router hints: priority, KV moves, setup ---------------------------------------------------

/// A turn with the router's hints.
backend::Action HintedTurn(int64_t trajectory, int turn, int64_t instance, int64_t context_tokens,
                           std::optional<double> priority, bool move_kv = false,
                           double setup_s = 0) {
  backend::Action action = Turn(trajectory, turn, instance, context_tokens);
  auto& s = std::get<backend::StartTurn>(action);
  s.priority = priority;
  s.move_kv = move_kv;
  s.setup_s = setup_s;
  return action;
}

/// The trajectories of the TurnDone events, in order.
std::vector<int64_t> FinishOrder(const std::vector<backend::Event>& events) {
  std::vector<int64_t> order;
  for (const backend::Event& e : events) {
    if (const backend::TurnDone* done = AsTurn(e)) order.push_back(done->trajectory.value);
  }
  return order;
}

TEST_F(ClusterSimTest, WaitingTurnsAreAdmittedByPriority) {
  // One sequence at a time; four turns arrive together. With priorities the highest runs first,
  // equal priorities in arrival order; without, arrival order (first come, first served).
  spec_.max_num_seqs = 1;
  for (int64_t id = 1; id <= 4; ++id) workload_.Add(id, {Stop(10)});
  const std::vector<std::optional<double>> priorities = {1.0, 3.0, 2.0, 3.0};
  for (const bool hinted : {true, false}) {
    SCOPED_TRACE(hinted ? "priorities" : "none");
    auto sim = Start(MakeLayout(1, 1));
    for (int64_t id = 1; id <= 4; ++id) {
      const std::optional<double> p =
          hinted ? priorities[static_cast<size_t>(id - 1)] : std::nullopt;
      ASSERT_OK(sim->Submit(HintedTurn(id, 0, 0, 10, p)));
    }
    EXPECT_EQ(FinishOrder(Drain(*sim)),
              hinted ? (std::vector<int64_t>{2, 4, 3, 1}) : (std::vector<int64_t>{1, 2, 3, 4}));
    EXPECT_EQ(sim->stats().priority_preemptions, 0);
  }
}

TEST_F(ClusterSimTest, HigherPriorityPreemptsTheLowestRunningAndItKeepsItsKv) {
  // Instance 0 runs two sequences at most: 1 (priority 1) and 2 (priority 2). Trajectory 3's
  // second turn (priority 5) arrives while they decode: 1, the lowest, is preempted; its KV stays
  // cached, so when 3 finishes it resumes without prefilling again (a prefix hit). With KV freed
  // during waits it is recomputed; without priorities 3 waits and nothing is preempted.
  struct Case {
    std::string name;
    bool hinted;
    recipe::KvPolicy kv_policy;
  };
  for (const Case& c : std::vector<Case>{{"priorities, cache", true, recipe::KvPolicy::kCache},
                                         {"priorities, free", true, recipe::KvPolicy::kFree},
                                         {"none", false, recipe::KvPolicy::kCache}}) {
    SCOPED_TRACE(c.name);
    spec_.max_num_seqs = 2;
    spec_.kv_policy = c.kv_policy;
    workload_.Add(1, {Stop(400)});
    workload_.Add(2, {Stop(400)});
    workload_.Add(3, {ToolCall(1, 0.05, 0), Stop(10)});
    auto sim = Start(MakeLayout(2, 1));
    auto p = [&](double v) { return c.hinted ? std::optional<double>(v) : std::nullopt; };
    ASSERT_OK(sim->Submit(HintedTurn(1, 0, 0, 10, p(1))));
    ASSERT_OK(sim->Submit(HintedTurn(2, 0, 0, 10, p(2))));
    ASSERT_OK(sim->Submit(HintedTurn(3, 0, 1, 10, p(5))));
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_NE(FindTurn(events, 3), nullptr);
    ASSERT_OK(sim->Submit(Tool(3)));
    ASSERT_EQ(Next(*sim).size(), 1u);
    ASSERT_OK(sim->Submit(HintedTurn(3, 1, 0, 11, p(5))));
    events = Drain(*sim);
    const std::vector<int64_t> order = FinishOrder(events);
    EXPECT_EQ(order, c.hinted ? (std::vector<int64_t>{3, 2, 1}) : (std::vector<int64_t>{1, 2, 3}));
    EXPECT_EQ(sim->stats().priority_preemptions, c.hinted ? 1 : 0);
    EXPECT_EQ(sim->stats().preemptions, 0);
    const bool kept = c.hinted && c.kv_policy == recipe::KvPolicy::kCache;
    EXPECT_EQ(sim->stats().prefix_hits, kept ? 1 : 0);
    // The first prefill of the three, 3's second turn and, with KV freed, 1's recompute.
    EXPECT_EQ(sim->stats().mixed_iterations, c.hinted && !kept ? 4 : 3);
    EXPECT_EQ(AsTurn(*FindTurn(events, 1))->started_at, 0.0);  // it keeps its start
  }
}

TEST_F(ClusterSimTest, MovedKvSkipsThePrefillAndOverlapsTheTool) {
  // Turn 0 (2,000-token prompt, 300 generated) on instance 0 calls a tool returning 500 tokens;
  // turn 1 goes to instance 1 (same node, or another node) and moves the 2,300 cached tokens of
  // KV: it prefills only the 500 new ones. A long tool hides the transfer; a short one does not:
  // the turn starts at the tool's start plus the transfer (KV bytes over NVLink or the network).
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-8B");
  for (const bool same_node : {true, false}) {
    for (const double tool_s : {1.0, 1e-5}) {
      SCOPED_TRACE(StrFormat("%s, tool %g s", same_node ? "same node" : "other node", tool_s));
      workload_.Add(1, {ToolCall(300, tool_s, 500), Stop(200)});
      backend::Layout layout = MakeLayout(2, 1);
      if (!same_node) layout.instances[1] = backend::InstanceSpec{InstanceId(1), 1, 1, 0};
      auto sim = Start(layout, &cost);
      ASSERT_OK(sim->Submit(Turn(1, 0, 0, 2000)));
      std::vector<backend::Event> events = Next(*sim);
      ASSERT_EQ(events.size(), 1u);
      const double called = events[0].at;
      ASSERT_OK(sim->Submit(Tool(1)));
      events = Next(*sim);
      ASSERT_EQ(events.size(), 1u);
      const double tool_done = events[0].at;
      ASSERT_OK(sim->Submit(HintedTurn(1, 1, 1, 2800, std::nullopt, true)));
      events = Drain(*sim);
      ASSERT_EQ(events.size(), 1u);
      const backend::TurnDone* done = AsTurn(events[0]);
      ASSERT_NE(done, nullptr);
      const double transfer = model::KvTransferTime(cost, 2300, same_node);
      EXPECT_GT(transfer, 1e-4);
      const double start = std::max(tool_done, called + transfer);
      EXPECT_NEAR(done->started_at, start, 1e-12);
      const double expected = start + cost.IterationTime(1, Prefills(1, 500, 2300)) +
                              cost.DecodeSpanTime(1, 1, 2801, 199);
      EXPECT_NEAR(events[0].at, expected, 1e-9 * expected);
      EXPECT_EQ(sim->stats().kv_moves, 1);
      EXPECT_EQ(sim->stats().prefix_hits, 0);
    }
  }
}

TEST_F(ClusterSimTest, SetupRunsFromTheToolsStart) {
  // A router's 0.5 s setup (a length prediction) overlaps the preceding tool: hidden behind a
  // 1 s tool, it delays a turn after a 0.1 s tool to the tool's start + 0.5 s. A first turn
  // starts 0.5 s after it is submitted.
  for (const double tool_s : {1.0, 0.1}) {
    SCOPED_TRACE(StrFormat("tool %g s", tool_s));
    workload_.Add(1, {ToolCall(5, tool_s, 0), Stop(5)});
    auto sim = Start(MakeLayout(1, 1));
    ASSERT_OK(sim->Submit(HintedTurn(1, 0, 0, 10, std::nullopt, false, 0.5)));
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(AsTurn(events[0])->started_at, 0.5);
    const double called = events[0].at;
    ASSERT_OK(sim->Submit(Tool(1)));
    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    const double tool_done = events[0].at;
    ASSERT_OK(sim->Submit(HintedTurn(1, 1, 0, 15, std::nullopt, false, 0.5)));
    events = Drain(*sim);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_NEAR(AsTurn(events[0])->started_at, std::max(tool_done, called + 0.5), 1e-12);
  }
}

// ---- Tools -------------------------------------------------------------------------------------

TEST_F(ClusterSimTest, ToolTakesItsScriptedLatency) {
  // A tool call ends its turn (no reward yet); the tool takes the scripted 2.5 s and returns its
  // scripted status and output tokens.
  workload_.Add(1, {ToolCall(10, 2.5, 7, workload::ToolStatus::kTimeout), Stop(10)}, 1.0);
  auto sim = Start(MakeLayout(1, 1));
  ASSERT_OK(sim->Submit(Turn(1, 0, 0, 10)));
  std::vector<backend::Event> events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const backend::TurnDone* turn = AsTurn(events[0]);
  ASSERT_NE(turn, nullptr);
  EXPECT_EQ(turn->end, workload::TurnEnd::kToolCall);
  EXPECT_EQ(turn->tool, "bash");
  EXPECT_EQ(turn->reward, 0.0);
  const double called = events[0].at;

  ASSERT_OK(sim->Submit(Tool(1)));
  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const auto* tool = std::get_if<backend::ToolDone>(&events[0].what);
  ASSERT_NE(tool, nullptr);
  EXPECT_EQ(tool->trajectory, TrajectoryId(1));
  EXPECT_EQ(tool->status, workload::ToolStatus::kTimeout);
  EXPECT_EQ(tool->output_tokens, 7);
  EXPECT_EQ(tool->started_at, called);
  EXPECT_NEAR(events[0].at, called + 2.5, 1e-12);

  ASSERT_OK(sim->Submit(Turn(1, 1, 0, 27)));
  events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_NE(AsTurn(events[0]), nullptr);
  EXPECT_EQ(AsTurn(events[0])->reward, 1.0);
}

TEST_F(ClusterSimTest, ToolConcurrencyLimitQueuesCalls) {
  // Two tools of 2 s called at once: unlimited or two slots run them together; one slot runs them
  // one after the other.
  struct Case {
    std::string name;
    int concurrency;
    std::vector<double> finish;  // after the call
  };
  const std::vector<Case> cases = {
      {"unlimited", 0, {2, 2}},
      {"two slots", 2, {2, 2}},
      {"one slot", 1, {2, 4}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    spec_.tool_concurrency = c.concurrency;
    workload_.Add(1, {ToolCall(10, 2.0, 0), Stop(1)});
    workload_.Add(2, {ToolCall(10, 2.0, 0), Stop(1)});
    auto sim = Start(MakeLayout(1, 1));
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 10)));
    ASSERT_OK(sim->Submit(Turn(2, 0, 0, 10)));
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 2u);
    const double called = events[0].at;
    ASSERT_OK(sim->Submit(Tool(1)));
    ASSERT_OK(sim->Submit(Tool(2)));
    events = Drain(*sim);
    ASSERT_EQ(events.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const auto* tool = std::get_if<backend::ToolDone>(&events[i].what);
      ASSERT_NE(tool, nullptr);
      EXPECT_EQ(tool->trajectory, TrajectoryId(static_cast<int64_t>(i) + 1));
      EXPECT_NEAR(events[i].at, called + c.finish[i], 1e-12);
      EXPECT_NEAR(tool->started_at, called + c.finish[i] - 2.0, 1e-12);
    }
  }
}

// ---- Trainer and weight sync -------------------------------------------------------------------

TEST_F(ClusterSimTest, TrainStepTakesTheCostModelsTime) {
  // A train step on a disaggregated trainer lasts the cost model's step time for its batch.
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-0.6B");
  const backend::Layout layout = MakeLayout(1, 1, /*train_gpus=*/4);
  const std::vector<int64_t> batch = {1000, 2000, 3000, 4000, 500, 600, 700, 800};
  const model::TrainEstimate e = cost.TrainStep(layout.train, model::TrainPasses(), batch);
  ASSERT_FALSE(e.oom());
  ASSERT_GT(e.step_s, 0);
  auto sim = Start(layout, &cost);
  ASSERT_OK(sim->Submit(TrainStep(3, batch)));
  const std::vector<backend::Event> events = Next(*sim);
  ASSERT_EQ(events.size(), 1u);
  const auto* done = std::get_if<backend::TrainDone>(&events[0].what);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->step, 3);
  EXPECT_EQ(done->started_at, 0.0);
  EXPECT_EQ(events[0].at, e.step_s);
}

TEST_F(ClusterSimTest, OutOfMemoryTrainingLayoutIsABackendError) {
  // Qwen3-14B does not train on one 80 GB GPU: the train step is refused with the layout and the
  // memory it would need.
  const model::RooflineCostModel cost = Roofline("H100-80G", "Qwen3-14B");
  const backend::Layout layout = MakeLayout(1, 4, /*train_gpus=*/1);
  const std::vector<int64_t> batch = {4000, 4000};
  ASSERT_TRUE(cost.TrainStep(layout.train, model::TrainPasses(), batch).oom());
  auto sim = Start(layout, &cost);
  const Status s = sim->Submit(TrainStep(3, batch));
  EXPECT_EQ(s.code(), StatusCode::kBackend);
  EXPECT_THAT(s.message(), HasSubstr("train step 3 runs out of memory"));
  EXPECT_THAT(s.message(), HasSubstr("tp1 pp1 dp1 mb1"));
}

TEST_F(ClusterSimTest, ColocatedTrainingSwitchesRolesAndPausesRollout) {
  // A 1 s train step is submitted while a turn decodes (when a 0.5 s tool ends). Disaggregated, it
  // takes 1 s and the turn runs on. Colocated, it also switches roles (2 s out, 3 s back): the step
  // takes 6 s, the turn's span is cut at its next iteration boundary and resumes when the GPUs
  // return, ending later; the pause is not rollout work.
  for (const bool colocated : {false, true}) {
    SCOPED_TRACE(colocated ? "colocated" : "disaggregated");
    workload_.Add(1, {Stop(200)});
    workload_.Add(2, {ToolCall(1, 0.5, 0), Stop(1)});
    auto sim = Start(MakeLayout(1, 1, /*train_gpus=*/1, colocated));
    ASSERT_OK(sim->Submit(Turn(2, 0, 0, 10)));
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_NE(FindTurn(events, 2), nullptr);
    const double t0 = events[0].at;
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 100)));
    ASSERT_OK(sim->Submit(Tool(2)));  // a 0.5 s timer
    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_TRUE(std::holds_alternative<backend::ToolDone>(events[0].what));
    const double now = events[0].at;
    ASSERT_OK(sim->Submit(TrainStep(0, {1000})));

    const FakeCostModel& f = fake_;
    const double span_start = t0 + f.PrefillTime(1, 100, 0);
    const int64_t k = model::DecodeIterationsWithin(f, 1, 1, 101, 199, now - span_start);
    ASSERT_GT(k, 0);
    ASSERT_LT(k, 150);
    ASSERT_LT(span_start + f.DecodeSpanTime(1, 1, 101, k), now);
    const double cut = f.DecodeSpanTime(1, 1, 101, k + 1);
    const double rest = f.DecodeSpanTime(1, 1, 102 + k, 198 - k);
    const double alone = f.DecodeSpanTime(1, 1, 101, 199);
    const double train_done = now + (colocated ? 6.0 : 1.0);
    const double turn_done = colocated ? train_done + rest : span_start + alone;

    events = Drain(*sim);
    ASSERT_EQ(events.size(), 2u);
    const auto* train = std::get_if<backend::TrainDone>(&events[0].what);
    ASSERT_NE(train, nullptr);
    EXPECT_EQ(train->started_at, now);
    EXPECT_NEAR(events[0].at, train_done, 1e-12);
    ASSERT_NE(AsTurn(events[1]), nullptr);
    EXPECT_NEAR(events[1].at, turn_done, Tol(turn_done));
    EXPECT_EQ(AsTurn(events[1])->started_at, t0);
    const double busy =
        f.PrefillTime(1, 10, 0) + f.PrefillTime(1, 100, 0) + (colocated ? cut + rest : alone);
    EXPECT_NEAR(sim->stats().rollout_busy_gpu_s, busy, 1e-9);
  }
}

TEST_F(ClusterSimTest, TurnSubmittedWithAColocatedTrainStepWaitsForTheGpus) {
  // A turn and a colocated 1 s train step submitted together: the GPUs leave rollout at once, so
  // the turn starts when they return (after 2 + 1 + 3 s) and then takes its usual time.
  workload_.Add(1, {Stop(200)});
  auto sim = Start(MakeLayout(1, 1, /*train_gpus=*/1, /*colocated=*/true));
  ASSERT_OK(sim->Submit(Turn(1, 0, 0, 100)));
  ASSERT_OK(sim->Submit(TrainStep(0, {1000})));
  const std::vector<backend::Event> events = Drain(*sim);
  ASSERT_EQ(events.size(), 2u);
  ASSERT_TRUE(std::holds_alternative<backend::TrainDone>(events[0].what));
  EXPECT_EQ(events[0].at, 6.0);
  ASSERT_NE(AsTurn(events[1]), nullptr);
  EXPECT_EQ(AsTurn(events[1])->started_at, 6.0);
  const double turn = fake_.PrefillTime(1, 100, 0) + fake_.DecodeSpanTime(1, 1, 101, 199);
  EXPECT_NEAR(events[1].at, 6.0 + turn, Tol(6.0 + turn));
}

TEST_F(ClusterSimTest, WeightSyncPausesRolloutFromTheNextIterationBoundary) {
  // At 1 s, mid-span, weights are synced (5 s over NCCL, 30 s from disk). The span is cut at its
  // next iteration boundary, the instance waits until the sync ends, then decodes the rest. The
  // cost model is asked for the largest rollout TP, across nodes (disaggregated).
  struct Case {
    std::string name;
    recipe::SyncPath path;
    double sync_s;
  };
  const std::vector<Case> cases = {{"nccl", recipe::SyncPath::kNccl, 5},
                                   {"disk", recipe::SyncPath::kDisk, 30}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    spec_.sync_path = c.path;
    workload_.Add(1, {Stop(200)});
    backend::Layout layout = MakeLayout(2, 1, /*train_gpus=*/2);
    layout.instances[1].tp = 2;
    auto sim = Start(layout);
    ASSERT_OK(sim->Submit(Turn(1, 0, 0, 100)));
    ASSERT_OK(sim->Submit(TrainStep(0, {2000})));  // a 1 s timer
    std::vector<backend::Event> events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_EQ(events[0].at, 1.0);
    ASSERT_OK(sim->Submit(backend::SyncWeights{4}));

    const FakeCostModel& f = fake_;
    const double p = f.PrefillTime(1, 100, 0);
    const int64_t k = model::DecodeIterationsWithin(f, 1, 1, 101, 199, 1.0 - p);
    ASSERT_GT(k, 0);
    ASSERT_LT(p + f.DecodeSpanTime(1, 1, 101, k), 1.0);
    const double cut = p + f.DecodeSpanTime(1, 1, 101, k + 1);
    ASSERT_GT(cut, 1.0);
    const double rest = f.DecodeSpanTime(1, 1, 102 + k, 198 - k);

    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    const auto* sync = std::get_if<backend::SyncDone>(&events[0].what);
    ASSERT_NE(sync, nullptr);
    EXPECT_EQ(sync->version, 4);
    EXPECT_EQ(sync->started_at, 1.0);
    EXPECT_EQ(events[0].at, 1.0 + c.sync_s);
    EXPECT_EQ(f.last_sync.path, c.path);
    EXPECT_EQ(f.last_sync.rollout_tp, 2);
    EXPECT_TRUE(f.last_sync.cross_node);
    EXPECT_EQ(f.last_sync.train, layout.train);

    events = Next(*sim);
    ASSERT_EQ(events.size(), 1u);
    ASSERT_NE(AsTurn(events[0]), nullptr);
    EXPECT_NEAR(events[0].at, 1.0 + c.sync_s + rest, Tol(1.0 + c.sync_s + rest));
    EXPECT_NEAR(sim->stats().rollout_busy_gpu_s, cut + rest, 1e-9);
    EXPECT_TRUE(Next(*sim).empty());
  }
}

// ---- Determinism -------------------------------------------------------------------------------

/// Plays a small coordinator on `sim`: six multi-turn trajectories on two instances (odd ones move
/// between instances), a train step after the third trajectory ends and a sync after it. Returns
/// the events, one line each.
std::vector<std::string> PlayScript(ClusterSim& sim) {
  std::vector<std::string> trace;
  std::map<int64_t, int64_t> context;
  std::map<int64_t, int> turn;
  std::map<int64_t, int64_t> instance;
  for (int64_t id = 1; id <= 6; ++id) {
    context[id] = 40 + 10 * id;
    instance[id] = id % 2;
    EXPECT_OK(sim.Submit(Turn(id, 0, instance[id], context[id])));
  }
  int ended = 0;
  for (int guard = 0; guard < 1000; ++guard) {
    std::vector<backend::Event> events = Next(sim);
    if (events.empty()) break;
    for (const backend::Event& e : events) {
      trace.push_back(Describe(e));
      if (const auto* t = std::get_if<backend::TurnDone>(&e.what)) {
        const int64_t id = t->trajectory.value;
        context[id] += t->generated_tokens;
        if (t->end == workload::TurnEnd::kToolCall) {
          EXPECT_OK(sim.Submit(Tool(id)));
        } else if (++ended == 3) {
          EXPECT_OK(sim.Submit(TrainStep(0, {context[1], context[2], context[3]})));
        }
      } else if (const auto* tool = std::get_if<backend::ToolDone>(&e.what)) {
        const int64_t id = tool->trajectory.value;
        context[id] += tool->output_tokens;
        if (id % 2 == 1) instance[id] = 1 - instance[id];
        EXPECT_OK(sim.Submit(Turn(id, ++turn[id], instance[id], context[id])));
      } else if (std::holds_alternative<backend::TrainDone>(e.what)) {
        EXPECT_OK(sim.Submit(backend::SyncWeights{1}));
      }
    }
  }
  return trace;
}

TEST_F(ClusterSimTest, SameActionScriptGivesIdenticalEvents) {
  // The same actions on two fresh simulators give the same events at the same times, bit for bit,
  // through batching, moves, evictions, prefix hits, tools, training and a sync.
  fake_.capacity_per_gpu = 600;
  for (int64_t id = 1; id <= 6; ++id) {
    workload_.Add(id,
                  {ToolCall(30 + 7 * id, 0.5 * static_cast<double>(id), 20),
                   ToolCall(25 + 3 * id, 1.5, 15), Stop(60 + 5 * id)},
                  0.1 * static_cast<double>(id));
  }
  auto first = Start(MakeLayout(2, 1, /*train_gpus=*/2));
  const std::vector<std::string> a = PlayScript(*first);
  auto second = Start(MakeLayout(2, 1, /*train_gpus=*/2));
  const std::vector<std::string> b = PlayScript(*second);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 6u * 3 + 6u * 2 + 2);  // turns, tools, train, sync
  EXPECT_EQ(first->stats().iterations, second->stats().iterations);
  EXPECT_EQ(first->stats().events, second->stats().events);
  EXPECT_EQ(first->stats().rollout_busy_gpu_s, second->stats().rollout_busy_gpu_s);
  EXPECT_GT(first->stats().evictions, 0);
  EXPECT_GT(first->stats().prefix_hits, 0);
}

// ---- Bad actions -------------------------------------------------------------------------------

TEST_F(ClusterSimTest, RejectsBadActionsWithClearMessages) {
  // Actions the simulator cannot honour are backend errors that say what is wrong.
  workload_.Add(1, {ToolCall(10, 1.0, 5), Stop(10)});
  workload_.Add(2, {Stop(10)});
  auto finish_turn = [](ClusterSim& sim) {
    for (int guard = 0; guard < 100; ++guard) {
      for (const backend::Event& e : Next(sim)) {
        if (AsTurn(e) != nullptr) return;
      }
    }
  };
  struct Case {
    std::string name;
    std::function<Status(ClusterSim&)> act;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown instance", [](ClusterSim& sim) { return sim.Submit(Turn(1, 0, 5, 10)); },
       "StartTurn on unknown instance 5"},
      {"negative instance", [](ClusterSim& sim) { return sim.Submit(Turn(1, 0, -1, 10)); },
       "unknown instance -1"},
      {"turn out of order", [](ClusterSim& sim) { return sim.Submit(Turn(1, 1, 0, 10)); },
       "trajectory 1: unexpected turn 1"},
      {"turn started twice",
       [](ClusterSim& sim) {
         EXPECT_OK(sim.Submit(Turn(1, 0, 0, 10)));
         return sim.Submit(Turn(1, 0, 1, 10));
       },
       "trajectory 1: unexpected turn 0"},
      {"next turn before the tool ran",
       [&](ClusterSim& sim) {
         EXPECT_OK(sim.Submit(Turn(1, 0, 0, 10)));
         finish_turn(sim);
         return sim.Submit(Turn(1, 1, 0, 25));
       },
       "trajectory 1: unexpected turn 1"},
      {"turn past the script",
       [&](ClusterSim& sim) {
         EXPECT_OK(sim.Submit(Turn(2, 0, 0, 10)));
         finish_turn(sim);
         return sim.Submit(Turn(2, 1, 0, 20));
       },
       "trajectory 2: unexpected turn 1"},
      {"tool of an unknown trajectory", [](ClusterSim& sim) { return sim.Submit(Tool(9)); },
       "RunTool for trajectory 9 that is not waiting for a tool"},
      {"tool while the turn runs",
       [](ClusterSim& sim) {
         EXPECT_OK(sim.Submit(Turn(1, 0, 0, 10)));
         return sim.Submit(Tool(1));
       },
       "RunTool for trajectory 1 that is not waiting for a tool"},
      {"tool run twice",
       [&](ClusterSim& sim) {
         EXPECT_OK(sim.Submit(Turn(1, 0, 0, 10)));
         finish_turn(sim);
         EXPECT_OK(sim.Submit(Tool(1)));
         return sim.Submit(Tool(1));
       },
       "RunTool for trajectory 1 that is not waiting for a tool"},
      {"busy instance leaving the layout",
       [](ClusterSim& sim) {
         EXPECT_OK(sim.Submit(Turn(1, 0, 0, 10)));
         return sim.Submit(backend::ApplyLayout{MakeLayout(1, 2)});
       },
       "instance 0 still has 1 turn(s) in flight: drain it before it leaves the layout"},
      {"instance ids out of order",
       [](ClusterSim& sim) {
         backend::Layout layout = MakeLayout(2, 1);
         layout.instances[0].id = InstanceId(1);
         layout.instances[1].id = InstanceId(0);
         return sim.Submit(backend::ApplyLayout{layout});
       },
       "instance ids must be 0..n-1"},
      {"train without training GPUs",
       [](ClusterSim& sim) { return sim.Submit(TrainStep(0, {100})); },
       "Train with no training GPUs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto sim = Start(MakeLayout(2, 1));
    const Status s = c.act(*sim);
    EXPECT_EQ(s.code(), StatusCode::kBackend) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_THAT(s.message(), testing::StartsWith("sim: "));
  }
}

TEST_F(ClusterSimTest, InstanceThatCannotHoldTheModelIsRejected) {
  // On a 16 GB GPU, Qwen3-14B (28 GB of weights) leaves no room for KV at TP 1 or 2: the layout is
  // refused naming the model, the TP and the GPU. At TP 4 it fits.
  model::GpuSpec small = model::FindGpu("H100-80G").value();
  small.name = "H100-16G";
  small.hbm_bytes = 16e9;
  const model::RooflineCostModel cost(
      model::CostModelContext{small, model::FindModel("Qwen3-14B").value(), 8},
      model::RooflineParams());
  for (const int tp : {1, 2, 4}) {
    SCOPED_TRACE(tp);
    ClusterSim sim(spec_, workload_, cost);
    const Status s = sim.Submit(backend::ApplyLayout{MakeLayout(2, tp)});
    if (tp == 4) {
      EXPECT_GT(cost.KvCapacityTokens(tp), 0);
      EXPECT_OK(s);
      continue;
    }
    ASSERT_EQ(cost.KvCapacityTokens(tp), 0);
    EXPECT_EQ(s.code(), StatusCode::kBackend);
    EXPECT_THAT(s.message(),
                HasSubstr(StrFormat("Qwen3-14B does not fit a TP-%d instance of H100-16G", tp)));
    EXPECT_TRUE(Next(sim).empty());  // nothing applied
  }
}

// ---- Accounting --------------------------------------------------------------------------------

TEST_F(ClusterSimTest, RolloutBusyGpuSecondsIsIteratingTimeTimesTp) {
  // Two TP-2 instances: trajectory 1 runs two turns on instance 0 with a tool between (not busy),
  // trajectory 2 one turn on instance 1. Busy GPU-seconds grow with the work and end as the sum of
  // the iterating times, times 2.
  workload_.Add(1, {ToolCall(20, 1.0, 10), Stop(30)});
  workload_.Add(2, {Stop(50)});
  auto sim = Start(MakeLayout(2, 2));
  ASSERT_EQ(sim->RolloutBusyGpuSeconds(), std::optional<double>(0.0));
  ASSERT_OK(sim->Submit(Turn(1, 0, 0, 100)));
  ASSERT_OK(sim->Submit(Turn(2, 0, 1, 40)));

  const FakeCostModel& f = fake_;
  const double turn0 = f.PrefillTime(2, 100, 0) + f.DecodeSpanTime(2, 1, 101, 19);
  const double turn1 = f.IterationTime(2, Prefills(1, 10, 120)) + f.DecodeSpanTime(2, 1, 131, 29);
  const double other = f.PrefillTime(2, 40, 0) + f.DecodeSpanTime(2, 1, 41, 49);

  std::vector<backend::Event> events = Next(*sim);
  ASSERT_NE(FindTurn(events, 1), nullptr);
  const double after_first = sim->RolloutBusyGpuSeconds().value();
  EXPECT_GT(after_first, 0);
  EXPECT_LE(after_first, 2 * 2 * events[0].at + 1e-12);
  ASSERT_OK(sim->Submit(Tool(1)));
  double tool_done = -1;
  while (tool_done < 0) {
    events = Next(*sim);
    ASSERT_FALSE(events.empty());
    if (std::holds_alternative<backend::ToolDone>(events[0].what)) tool_done = events[0].at;
  }
  ASSERT_OK(sim->Submit(Turn(1, 1, 0, 130)));
  events = Drain(*sim);
  ASSERT_NE(FindTurn(events, 1), nullptr);
  EXPECT_NEAR(FindTurn(events, 1)->at - tool_done, turn1, 1e-9);

  const double busy = sim->RolloutBusyGpuSeconds().value();
  EXPECT_GT(busy, after_first);
  EXPECT_NEAR(busy, 2 * (turn0 + turn1 + other), 1e-9);
  EXPECT_EQ(sim->stats().prefix_hits, 1);
}

TEST(ClusterSimRelayoutTest, GpusThatChangeRolePayTheSwitchBeforeServing) {
  // Mid-run, an idle TP-1 instance becomes a TP-2 one: the kept instance keeps serving, the new
  // one takes turns only after its GPUs switched from training; LayoutApplied comes when every
  // switch is done.
  const model::CostModelContext context{*model::FindGpu("A800-80G"), *model::FindModel("Qwen3-8B"),
                                        8};
  const model::RooflineCostModel cost(context, model::RooflineParams());
  ScriptedWorkload workload;
  workload.Add(1, {Stop(50)});
  workload.Add(2, {Stop(50)});
  recipe::SimSpec spec;
  ClusterSim sim(spec, workload, cost);
  backend::Layout before = MakeLayout(2, 1, 4);
  ASSERT_OK(sim.Submit(backend::ApplyLayout{before}));
  ASSERT_OK(sim.Wait());
  ASSERT_OK(sim.Submit(Turn(1, 0, 0, 10)));
  backend::Layout after = before;
  after.instances[1].tp = 2;
  ASSERT_OK(sim.Submit(backend::ApplyLayout{after}));
  ASSERT_OK(sim.Submit(Turn(2, 0, 1, 10)));
  const double switch_s =
      cost.RoleSwitchTime({model::SwitchDirection::kTrainToRollout, 2, before.train});
  double layout_at = -1;
  double turn2_started = -1;
  double turn1_done = -1;
  for (int i = 0; i < 10 && (layout_at < 0 || turn2_started < 0); ++i) {
    auto events = sim.Wait();
    ASSERT_OK(events);
    for (const backend::Event& e : *events) {
      if (std::holds_alternative<backend::LayoutApplied>(e.what)) layout_at = e.at;
      if (const auto* done = std::get_if<backend::TurnDone>(&e.what)) {
        if (done->trajectory == TrajectoryId(2)) turn2_started = done->started_at;
        if (done->trajectory == TrajectoryId(1)) turn1_done = e.at;
      }
    }
  }
  EXPECT_NEAR(layout_at, switch_s, 1e-9);
  EXPECT_GE(turn2_started, switch_s);
  EXPECT_GT(turn1_done, 0);
  EXPECT_LT(turn1_done, switch_s);  // the kept instance went on serving meanwhile
}

TEST(ClusterSimRelayoutTest, TrainerWaitsForGpusJoiningIt) {
  // An instance leaves rollout and its GPUs join training: the next train step starts only
  // after their switch to training.
  const model::CostModelContext context{*model::FindGpu("A800-80G"), *model::FindModel("Qwen3-8B"),
                                        8};
  const model::RooflineCostModel cost(context, model::RooflineParams());
  ScriptedWorkload workload;
  recipe::SimSpec spec;
  ClusterSim sim(spec, workload, cost);
  backend::Layout before = MakeLayout(2, 1, 4);
  before.train = {4, 1, 1, 1};
  ASSERT_OK(sim.Submit(backend::ApplyLayout{before}));
  ASSERT_OK(sim.Wait());
  backend::Layout after = MakeLayout(1, 1, 5);
  after.train = {1, 5, 1, 1};  // five GPUs: one pipeline of five stages
  ASSERT_OK(sim.Submit(backend::ApplyLayout{after}));
  backend::Train train;
  train.step = 0;
  train.sequence_tokens = {1000};
  ASSERT_OK(sim.Submit(train));
  const double switch_s =
      cost.RoleSwitchTime({model::SwitchDirection::kRolloutToTrain, 1, after.train});
  bool trained = false;
  for (int i = 0; i < 5 && !trained; ++i) {
    auto events = sim.Wait();
    ASSERT_OK(events);
    for (const backend::Event& e : *events) {
      if (const auto* done = std::get_if<backend::TrainDone>(&e.what)) {
        trained = true;
        EXPECT_NEAR(done->started_at, switch_s, 1e-9);
      }
    }
  }
  EXPECT_TRUE(trained);
}

}  // namespace
}  // namespace libra::sim
