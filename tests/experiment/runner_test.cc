#include "experiment/runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>

#include "recipe/presets.h"
#include "recipe/recipe_parser.h"
#include "sim/cluster_sim.h"
#include "support/components.h"
#include "support/test_util.h"

namespace libra::experiment {
namespace {

constexpr const char* kRecipe = R"(name = "r"
steps = 3

[cluster]
nodes = 1
gpus_per_node = 8

[model]
name = "Qwen3-0.6B"

[rl]
prompts_per_step = 2
group_size = 2
staleness = 1

[system]
name = "main"
[system.planner_options]
train_gpus = 4

[[baselines]]
name = "colo"
planner = "colocated"
staleness = 0
)";

recipe::Recipe Parse(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto parsed = recipe::ParseRecipe(text, "r.toml", sets);
  EXPECT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty());
  return parsed->recipe;
}

Components Sim() { return test::OnSimulator(); }

/// The recipe's perfect-balance bound.
Result<double> BoundOf(const recipe::Recipe& r) {
  LIBRA_ASSIGN_OR_RETURN(auto cost, model::MakeCostModel(r));
  LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(r.workload, r.seed));
  return PerfectBalanceBound(r, *cost, *workload);
}

/// Runs the recipe's [system] on the simulator, recorded in a scratch database.
Result<RunOutcome> RunInScratch(const recipe::Recipe& r) {
  test::ScopedTempDir dir;
  LIBRA_ASSIGN_OR_RETURN(auto store, store::Store::Open(dir.File("r.db")));
  RunRequest request;
  request.recipe = &r;
  request.system = &r.system;
  return RunSystem(*store, request, Sim());
}

std::vector<std::string> Validate(const std::vector<std::string>& sets) {
  const recipe::Recipe r = Parse(kRecipe, sets);
  std::vector<recipe::Diagnostic> d;
  ValidateWithRegistries(r, Sim(), &d);
  std::vector<std::string> out;
  for (const recipe::Diagnostic& x : d) out.push_back(x.ToString());
  return out;
}

TEST(RunnerTest, ValidRecipeHasNoSystemProblems) {
  // The test recipe's systems exist, take their options and fit the cluster.
  EXPECT_TRUE(Validate({}).empty());
}

TEST(RunnerTest, ValidateWithRegistriesReportsPolicyProblems) {
  // Unknown policies, bad options and a plan that does not fit: each is one diagnostic at the
  // right place.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"system.router=fastest",
       "--set system.router=fastest: system.router: unknown router 'fastest' (known: cmlfq, "
       "heddle, la-mlfq, least-conn, length-aware, oracle-length, round-robin, sorted)"},
      {"baselines[0].planner=gpr",
       "--set baselines[0].planner=gpr: baselines[0].planner: unknown planner 'gpr' (known: "
       "colocated, grp, heddle, libra-ref, no-ehp, static); did you mean 'grp'?"},
      {"system.planner_options.train_gpu=3",
       "--set system.planner_options.train_gpu=3: system.planner_options.train_gpu: unknown "
       "option; did you mean 'train_gpus'? (known: lend_idle_trainer, reclaim_at, rollout_tp, "
       "rollout_tps, train_gpus)"},
      {"system.planner_options.train_gpus=8",
       "r.toml:18:1: system.planner_options: no plan fits the cluster: train_gpus = 8 leaves "
       "no GPU for rollout (the cluster has 8)"},
  };
  for (const auto& [set, expected] : cases) {
    SCOPED_TRACE(set);
    const std::vector<std::string> d = Validate({set});
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0], expected);
  }
}

TEST(RunnerTest, RunSystemRecordsARun) {
  // A run is recorded with its recipe, its steps and status ok.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("r.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse(kRecipe);
  RunRequest request;
  request.recipe = &r;
  request.system = &r.system;
  int progress_calls = 0;
  request.progress = [&](const Progress& p) {
    ++progress_calls;
    EXPECT_EQ(p.steps_total, 3);
  };
  auto outcome = RunSystem(**store, request, Sim());
  ASSERT_OK(outcome);
  EXPECT_OK(outcome->status);
  EXPECT_EQ(progress_calls, 3);
  auto run = (*store)->GetRun(outcome->run_id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, records::kRunOk);
  EXPECT_EQ(run->system, "main");
  EXPECT_EQ(run->recipe_toml, r.effective_toml);
  EXPECT_EQ(run->gpus, 8);
  EXPECT_FALSE(run->ended_at.empty());
  auto steps = (*store)->Steps(outcome->run_id);
  ASSERT_OK(steps);
  EXPECT_EQ(steps->size(), 3u);
}

TEST(RunnerTest, FailuresAndInterruptsAreRecorded) {
  // A backend that cannot be built fails the run; an interrupt marks it interrupted.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("r.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse(kRecipe);
  RunRequest request;
  request.recipe = &r;
  request.system = &r.system;
  const Components broken = test::WithBackend(
      [](const recipe::Recipe&, const workload::Workload&, const model::CostModel&,
         const BackendContext&) -> Result<std::unique_ptr<backend::Backend>> {
        return Status::Backend("test", "no backend today");
      });
  auto failed = RunSystem(**store, request, broken);
  ASSERT_OK(failed);
  EXPECT_EQ(failed->status.code(), StatusCode::kBackend);
  auto run = (*store)->GetRun(failed->run_id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, records::kRunFailed);
  EXPECT_EQ(run->error, "test: no backend today");

  request.interrupted = [] { return true; };
  auto interrupted = RunSystem(**store, request, Sim());
  ASSERT_OK(interrupted);
  EXPECT_EQ(interrupted->status.code(), StatusCode::kInterrupted);
  run = (*store)->GetRun(interrupted->run_id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, records::kRunInterrupted);
}

TEST(RunnerTest, AnInterruptedSimRunResumesToTheSameRecord) {
  // Interrupted after 4 of 8 steps and resumed, a run records what an uninterrupted one does:
  // the simulator replays the recorded steps (checked) and records the rest.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("r.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse(kRecipe, {"steps=8"});
  RunRequest request;
  request.recipe = &r;
  request.system = &r.system;
  auto whole = RunSystem(**store, request, Sim());
  ASSERT_OK(whole);
  ASSERT_OK(whole->status);

  int done = 0;
  request.progress = [&](const Progress& p) { done = p.steps_done; };
  request.interrupted = [&] { return done >= 4; };
  auto cut = RunSystem(**store, request, Sim());
  ASSERT_OK(cut);
  ASSERT_EQ(cut->status.code(), StatusCode::kInterrupted);
  ASSERT_EQ((*store)->Steps(cut->run_id)->size(), 4u);

  request.interrupted = nullptr;
  request.resume_run = cut->run_id;
  auto resumed = RunSystem(**store, request, Sim());
  ASSERT_OK(resumed);
  ASSERT_OK(resumed->status);
  EXPECT_EQ(resumed->run_id, cut->run_id);
  EXPECT_EQ((*store)->GetRun(cut->run_id)->status, records::kRunOk);
  EXPECT_EQ(*(*store)->Steps(cut->run_id), *(*store)->Steps(whole->run_id));
  EXPECT_EQ((*store)->Trajectories(cut->run_id)->size(),
            (*store)->Trajectories(whole->run_id)->size());

  // A complete run cannot be resumed.
  auto again = RunSystem(**store, request, Sim());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
}

TEST(RunnerTest, ComparisonRunsShareTheWorkload) {
  // Every system of a comparison sees the same trajectories (same seed), so the per-step
  // rewards and token counts agree, while the times differ.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("r.db"));
  ASSERT_OK(store);
  const recipe::Recipe r = Parse(kRecipe);
  auto comparison = (*store)->CreateComparison("r", NowIso8601());
  ASSERT_OK(comparison);
  std::vector<int64_t> ids;
  for (const recipe::SystemSpec* s : AllSystems(r)) {
    RunRequest request;
    request.recipe = &r;
    request.system = s;
    request.comparison_id = *comparison;
    auto outcome = RunSystem(**store, request, Sim());
    ASSERT_OK(outcome);
    ASSERT_OK(outcome->status);
    ids.push_back(outcome->run_id);
  }
  auto info = (*store)->GetComparison(*comparison);
  ASSERT_OK(info);
  EXPECT_EQ(info->run_ids, ids);
  auto a = (*store)->Steps(ids[0]);
  auto b = (*store)->Steps(ids[1]);
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].generated_tokens, (*b)[i].generated_tokens);
    EXPECT_EQ((*a)[i].reward_mean, (*b)[i].reward_mean);
  }
  EXPECT_NE(a->back().end_s, b->back().end_s);
}

TEST(RunnerTest, SynchronousColocatedBaselineIsRolloutBound) {
  // The paper's setting (Qwen3-14B, 48 A800, r2e-gym; the ablation recipe's colocated-sync, TP1
  // instances): the synchronous colocated baseline spends
  // 70-90% of each step in rollout, the share real synchronous systems report (performance.md
  // §3.4), with default parameters; GPU utilisation is recorded and below 1.
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("r.db"));
  ASSERT_OK(store);
  auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/paper/r2e-gym-ablations.toml"),
                                        {"steps=6"});
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty());
  const recipe::Recipe& r = parsed->recipe;
  const recipe::SystemSpec* colocated = nullptr;
  for (const recipe::SystemSpec* s : AllSystems(r)) {
    if (s->planner == "colocated") colocated = s;
  }
  ASSERT_NE(colocated, nullptr);
  RunRequest request;
  request.recipe = &r;
  request.system = colocated;
  auto outcome = RunSystem(**store, request, Sim());
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->status);
  auto steps = (*store)->Steps(outcome->run_id);
  ASSERT_OK(steps);
  double rollout = 0;
  double total = 0;
  for (const records::StepRecord& s : *steps) {
    rollout += s.rollout_s;
    total += s.end_s - s.start_s;
    ASSERT_TRUE(s.gpu_util.has_value());
    EXPECT_GT(*s.gpu_util, 0);
    EXPECT_LT(*s.gpu_util, 1);
    EXPECT_GT(*s.idle_gpu_s, 0);
  }
  EXPECT_GE(rollout / total, 0.70);
  EXPECT_LE(rollout / total, 0.90);
}

TEST(RunnerTest, ThroughputStaysUnderThePerfectBalanceBound) {
  // The bound is above what the best system achieves, and not absurdly far above it.
  auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml"),
                                        {"steps=6"});
  ASSERT_OK(parsed);
  const recipe::Recipe& r = parsed->recipe;
  auto bound = BoundOf(r);
  ASSERT_OK(bound);
  auto outcome = RunInScratch(r);
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->status);
  const double throughput =
      static_cast<double>(outcome->summary.trajectories) / outcome->summary.elapsed_s;
  EXPECT_LT(throughput, *bound);
  EXPECT_GT(throughput, 0.05 * *bound);
}

TEST(RunnerTest, ThePerfectBalanceBoundHoldsAcrossSeeds) {
  // A yardstick that moves with the seed is no yardstick: sampled from the first 32 prompts, the
  // drift recipe's bound ranged 2.7-5.1 traj/s over seeds 1-6 while every system's throughput
  // stayed within 2%.
  double low = std::numeric_limits<double>::infinity();
  double high = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    auto parsed =
        recipe::ParseRecipeFile(test::SourcePath("recipes/paper/dapo-math-drift-qwen3-14b.toml"),
                                {"seed=" + std::to_string(seed)});
    ASSERT_OK(parsed);
    auto bound = BoundOf(parsed->recipe);
    ASSERT_OK(bound);
    low = std::min(low, *bound);
    high = std::max(high, *bound);
  }
  EXPECT_LT(high / low, 1.15) << low << " - " << high;
}

TEST(RunnerTest, TheTrajectoryFloorIsBelowEveryTokensOwn) {
  // The floor prices decode by a trapezoid over the contexts; summed token by token it can only
  // be more (equal for the roofline's affine decode floor). A group shares its prompt's prefill.
  auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml"));
  ASSERT_OK(parsed);
  const recipe::Recipe& r = parsed->recipe;
  auto cost = model::MakeCostModel(r);
  ASSERT_OK(cost);
  planner::TrajectorySize size{1000, 7000, 500};
  double token_by_token = (1000.0 / 8 + 500) * (*cost)->PrefillGpuSecondsLowerBound() +
                          (*cost)->TrainGpuSecondsLowerBound(size.total(), model::TrainPasses{});
  for (int64_t k = 0; k < size.generated_tokens; ++k) {
    token_by_token += (*cost)->DecodeGpuSecondsLowerBound(1000 + k, r.sim.max_num_seqs);
  }
  const double floor = TrajectoryFloorGpuSeconds(**cost, size, 8, r.sim.max_num_seqs);
  EXPECT_LE(floor, token_by_token * (1 + 1e-9));
  EXPECT_GE(floor, token_by_token * (1 - 1e-9));
  EXPECT_LT(floor, TrajectoryFloorGpuSeconds(**cost, size, 1, r.sim.max_num_seqs));
}

TEST(RunnerTest, AStreamBatchOfTheShortestTrajectoriesPassesTheFidelityCheck) {
  // The drift recipe's responses grow four-fold over 200 steps; a stream batch at step 0 trains
  // the first, shortest, trajectories to finish. Checked against a bound averaged over the whole
  // run, this sound run failed at step 0; priced trajectory by trajectory it passes.
  auto parsed = recipe::ParseRecipeFile(
      test::SourcePath("recipes/paper/dapo-math-drift-qwen3-14b.toml"),
      {"seed=2", "system.preset=areal-async", "system.name=areal-tuned",
       "system.planner_options.train_gpus=24", "system.planner_options.rollout_tp=8"});
  ASSERT_OK(parsed);
  auto outcome = RunInScratch(parsed->recipe);
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->status);
  EXPECT_EQ(outcome->summary.steps, 200);
}

// Mean throughput ratio of the ablation recipe's cmlfq-buckets over least-conn-buckets (same
// heterogeneous layout: per node 2 x TP1, TP2, TP4) over seeds 1..3, 6 steps each.
double CmlfqOverLeastConn(double causal_strength, const std::string& cmlfq_option = "") {
  std::vector<std::string> sets = {"steps=6",
                                   "workload.causal_strength=" + std::to_string(causal_strength)};
  if (!cmlfq_option.empty()) sets.push_back("baselines[1].router_options." + cmlfq_option);
  double ratio = 0;
  for (int seed = 1; seed <= 3; ++seed) {
    sets.push_back("seed=" + std::to_string(seed));
    auto parsed =
        recipe::ParseRecipeFile(test::SourcePath("recipes/paper/r2e-gym-ablations.toml"), sets);
    sets.pop_back();
    EXPECT_OK(parsed);
    if (!parsed.ok()) return 0;
    const recipe::Recipe& r = parsed->recipe;
    test::ScopedTempDir dir;
    auto store = store::Store::Open(dir.File("r.db"));
    EXPECT_OK(store);
    if (!store.ok()) return 0;
    double throughput[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const recipe::SystemSpec& system = r.baselines[static_cast<size_t>(i + 1)];
      EXPECT_EQ(system.router, i == 0 ? "cmlfq" : "least-conn");
      RunRequest request;
      request.recipe = &r;
      request.system = &system;
      auto outcome = RunSystem(**store, request, Sim());
      EXPECT_OK(outcome);
      if (!outcome.ok()) return 0;
      EXPECT_OK(outcome->status);
      throughput[i] =
          static_cast<double>(outcome->summary.trajectories) / outcome->summary.elapsed_s;
    }
    ratio += throughput[0] / throughput[1] / 3;
  }
  return ratio;
}

TEST(RunnerTest, CmlfqBeatsLeastConnOnTheR2eGymLayout) {
  // docs/policies.md: on the paper's heterogeneous layout C-MLFQ beats least-connections by about
  // 10%, and by as much at causal strength 0 as at 1. In r2e-gym 90% of validations fail with
  // small outputs, so the tool state says little beyond how many turns a trajectory has survived;
  // the win comes from that (lognormal work: survivors have more left) and from counting load
  // per GPU (least-conn gives a TP1 instance as many trajectories as a TP4 one).
  const double strong = CmlfqOverLeastConn(1.0);
  const double none = CmlfqOverLeastConn(0.0);
  RecordProperty("cmlfq_over_least_conn_causal_1", std::to_string(strong));
  RecordProperty("cmlfq_over_least_conn_causal_0", std::to_string(none));
  std::printf("cmlfq / least-conn throughput: %.3f at causal strength 1, %.3f at 0\n", strong,
              none);
  EXPECT_GT(strong, 1.03);
  EXPECT_GT(none, 1.0);
  // Without tree evidence (every node below min_samples) only the per-GPU load is left: it wins
  // clearly less, so the tree's predictions are a cause of the win, not a bystander.
  const double blind = CmlfqOverLeastConn(1.0, "min_samples=1e9");
  std::printf("cmlfq without tree evidence / least-conn: %.3f\n", blind);
  EXPECT_LT(blind, strong - 0.03);
}

TEST(RunnerTest, VerlSyncNeverOverlapsRolloutAndTraining) {
  // The verl-sync named system (colocated, staleness 0): from the recorded spans, no turn runs
  // while the trainer trains, and every sample is on-policy.
  auto parsed = recipe::ParseRecipeFile(
      test::SourcePath("recipes/quickstart.toml"),
      {"steps=4", "sim.record_events=true", "baselines[0].preset=\"verl-sync\""});
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty()) << parsed->diagnostics[0].ToString();
  const recipe::Recipe& r = parsed->recipe;
  ASSERT_EQ(r.baselines[0].planner, "colocated");
  test::ScopedTempDir dir;
  auto store = store::Store::Open(dir.File("r.db"));
  ASSERT_OK(store);
  RunRequest request;
  request.recipe = &r;
  request.system = &r.baselines[0];
  auto outcome = RunSystem(**store, request, Sim());
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->status);
  auto events = (*store)->Events(outcome->run_id);
  ASSERT_OK(events);
  std::vector<std::pair<double, double>> trains;
  for (const records::EventRecord& e : *events) {
    if (e.kind == "train") trains.emplace_back(e.start_s, e.end_s);
  }
  ASSERT_EQ(trains.size(), 4u);
  int turns = 0;
  for (const records::EventRecord& e : *events) {
    if (e.kind != "turn") continue;
    ++turns;
    for (const auto& [start, end] : trains) {
      EXPECT_FALSE(e.start_s < end && e.end_s > start)
          << "turn " << e.start_s << ".." << e.end_s << " overlaps training " << start << ".."
          << end;
    }
  }
  EXPECT_GT(turns, 0);
  auto steps = (*store)->Steps(outcome->run_id);
  ASSERT_OK(steps);
  for (const records::StepRecord& s : *steps) EXPECT_EQ(s.max_lag, 0);
}

/// A named system run on the quickstart recipe (in place of its `preset = "libra"` baseline,
/// the one entry without keys of its own), recorded in a temporary store.
struct NamedRun {
  test::ScopedTempDir dir;
  std::unique_ptr<store::Store> store;
  int64_t run = 0;
  std::vector<records::StepRecord> steps;
  std::vector<records::TrajectoryRecord> trajectories;
  std::vector<records::DecisionRecord> decisions;
  std::vector<records::EventRecord> events;
};

std::unique_ptr<NamedRun> RunNamed(const std::string& preset, std::vector<std::string> sets) {
  sets.push_back("baselines[2].preset=\"" + preset + "\"");
  auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/quickstart.toml"), sets);
  EXPECT_OK(parsed);
  if (!parsed.ok()) return nullptr;
  EXPECT_TRUE(parsed->diagnostics.empty()) << parsed->diagnostics[0].ToString();
  const recipe::Recipe& r = parsed->recipe;
  auto out = std::make_unique<NamedRun>();
  auto store = store::Store::Open(out->dir.File("r.db"));
  EXPECT_OK(store);
  if (!store.ok()) return nullptr;
  out->store = std::move(*store);
  RunRequest request;
  request.recipe = &r;
  request.system = &r.baselines[2];
  EXPECT_EQ(request.system->preset, preset);
  auto outcome = RunSystem(*out->store, request, Sim());
  EXPECT_OK(outcome);
  if (!outcome.ok()) return nullptr;
  EXPECT_OK(outcome->status);
  out->run = outcome->run_id;
  out->steps = *out->store->Steps(out->run);
  out->trajectories = *out->store->Trajectories(out->run);
  out->decisions = *out->store->Decisions(out->run);
  out->events = *out->store->Events(out->run);
  return out;
}

/// Every batch is `prompts` whole groups of `group_size` samples.
void ExpectCompleteGroups(const NamedRun& run, int prompts, int group_size) {
  std::map<int, std::map<int64_t, int>> samples;  // step -> prompt -> samples
  for (const records::TrajectoryRecord& t : run.trajectories) ++samples[t.step][t.prompt];
  for (const auto& [step, groups] : samples) {
    EXPECT_EQ(static_cast<int>(groups.size()), prompts) << "step " << step;
    for (const auto& [prompt, n] : groups) EXPECT_EQ(n, group_size) << "prompt " << prompt;
  }
}

TEST(RunnerTest, ArealAsyncNeverExceedsItsStalenessBound) {
  // areal-async (staleness 2, stream batches, partial rollout): no trained sample lags more
  // than 2 versions, although batches take groups out of dataset order and some lag; groups
  // that would exceed the bound are rejected and replaced, so every batch stays whole.
  auto run = RunNamed("areal-async", {"steps=8"});
  ASSERT_NE(run, nullptr);
  ASSERT_EQ(run->steps.size(), 8u);
  int max_lag = 0;
  bool out_of_order = false;
  for (const records::TrajectoryRecord& t : run->trajectories) {
    EXPECT_LE(t.step - t.version, 2) << "trajectory " << t.id;
    max_lag = std::max(max_lag, t.step - t.version);
    out_of_order = out_of_order || t.prompt / 16 != t.step;
  }
  for (const records::StepRecord& s : run->steps) EXPECT_LE(s.max_lag, 2);
  EXPECT_GE(max_lag, 1);
  EXPECT_TRUE(out_of_order);
  ExpectCompleteGroups(*run, 16, 8);
  int rejected = 0;
  for (const records::EventRecord& e : run->events) rejected += e.kind == "reject";
  EXPECT_GT(rejected, 0) << "quickstart's long groups should be overtaken and rejected";
}

TEST(RunnerTest, OrderedBatchesNeverReject) {
  // disagg-static (staleness 1, ordered batches): step k trains the prompts of step k, so no
  // group can exceed the bound and none is rejected.
  auto run = RunNamed("disagg-static", {"steps=6"});
  ASSERT_NE(run, nullptr);
  for (const records::TrajectoryRecord& t : run->trajectories) {
    EXPECT_EQ(t.prompt / 16, t.step);
    EXPECT_LE(t.step - t.version, 1);
  }
  for (const records::EventRecord& e : run->events) EXPECT_NE(e.kind, "reject");
  ExpectCompleteGroups(*run, 16, 8);
}

TEST(RunnerTest, SortedRlUpdatesEarlyOnTheGroupsThatFinishFirst) {
  // sortedrl: colocated (every GPU rolls out and trains), shortest-first, and a step trains the
  // first groups to finish: some batches hold prompts of later steps, at most one version old.
  auto run = RunNamed("sortedrl", {"steps=6"});
  ASSERT_NE(run, nullptr);
  bool early = false;
  for (const records::TrajectoryRecord& t : run->trajectories) {
    early = early || t.prompt / 16 > t.step;
    EXPECT_LE(t.step - t.version, 1);
  }
  EXPECT_TRUE(early);
  for (const records::StepRecord& s : run->steps) EXPECT_EQ(s.train_gpus, 16);
  ExpectCompleteGroups(*run, 16, 8);
}

TEST(RunnerTest, VerlDynamicLendsIdleTrainerGpusToRollout) {
  // verl-dynamic (a fixed 8 + 8 split, staleness 1): while the trainer waits for a batch its 8
  // GPUs run rollout instances 8..15; they are taken back before every training step, so no turn
  // on them overlaps training.
  auto run = RunNamed("verl-dynamic", {"steps=6", "sim.record_events=true"});
  ASSERT_NE(run, nullptr);
  std::vector<std::pair<double, double>> trains;
  int lends = 0;
  int reclaims = 0;
  for (const records::EventRecord& e : run->events) {
    if (e.kind == "train") trains.emplace_back(e.start_s, e.end_s);
    lends += e.kind == "lend";
    reclaims += e.kind == "reclaim";
  }
  EXPECT_GT(lends, 0);
  EXPECT_EQ(lends, reclaims);
  int lent_turns = 0;
  for (const records::EventRecord& e : run->events) {
    if (e.kind != "turn") continue;
    const int instance = std::stoi(e.resource.substr(std::string("instance ").size()));
    if (instance < 8) continue;
    ++lent_turns;
    for (const auto& [start, end] : trains) {
      EXPECT_FALSE(e.start_s < end && e.end_s > start)
          << "turn on lent instance " << instance << " overlaps training " << start << ".." << end;
    }
  }
  EXPECT_GT(lent_turns, 0);
  for (const records::StepRecord& s : run->steps) EXPECT_EQ(s.train_gpus, 8);
  ExpectCompleteGroups(*run, 16, 8);
}

TEST(RunnerTest, HeddleIsDeterministicAndUsesItsMechanisms) {
  // heddle (its resource manager as planner, its scheduler as router): two runs of the same
  // seed record the same rows; the planner chose a TP mix by its group model, and the router
  // predicted every turn, placed first turns by rank and migrated some trajectories at tool
  // returns (the trajectory records show turns on another instance).
  const std::vector<std::string> sets = {"steps=6", "sim.record_events=true"};
  auto a = RunNamed("heddle", sets);
  auto b = RunNamed("heddle", sets);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->steps, b->steps);
  EXPECT_EQ(a->trajectories, b->trajectories);
  EXPECT_EQ(a->decisions, b->decisions);
  EXPECT_EQ(a->events, b->events);
  auto metrics = a->store->RouterMetrics(a->run);
  ASSERT_OK(metrics);
  EXPECT_EQ(*metrics, *b->store->RouterMetrics(b->run));

  ASSERT_FALSE(a->decisions.empty());
  EXPECT_EQ(a->decisions[0].planner, "heddle");
  EXPECT_NE(a->decisions[0].reason.find("TP mixes"), std::string::npos) << a->decisions[0].reason;
  std::map<std::string, double> last;
  for (const auto& [step, name, value] : *metrics) {
    if (step == 5) last[name] = value;
  }
  EXPECT_GT(last["routes"], 0);
  EXPECT_EQ(last["predictions"], last["routes"]);
  EXPECT_EQ(last["predictions/history"], 0);  // the simulator's truth plus noise
  EXPECT_GT(last["placements"], 0);
  EXPECT_GT(last["migrations"], 0);
  int migrated = 0;
  for (const records::TrajectoryRecord& t : a->trajectories) migrated += t.migrations > 0;
  EXPECT_GT(migrated, 0);
  ExpectCompleteGroups(*a, 16, 8);
}

TEST(RunnerTest, LibraHomogeneousUsesOneRolloutTpSize) {
  // libra-homogeneous: every layout it runs has rollout instances of a single TP size
  // ("rollout tp4x3", never "tp1x2+tp4x1").
  auto run = RunNamed("libra-homogeneous", {"steps=8"});
  ASSERT_NE(run, nullptr);
  ASSERT_FALSE(run->decisions.empty());
  for (const records::DecisionRecord& d : run->decisions) {
    const std::string rollout = d.layout.substr(d.layout.find("rollout"));
    EXPECT_EQ(rollout.find('+'), std::string::npos) << d.layout;
  }
}

TEST(RunnerTest, ThePlanContextSaysWhetherTheRouterKeepsReturningTurnsWhereCached) {
  // least-conn places a returning turn by load alone, round-robin in rotation; C-MLFQ keeps it
  // where its context is.
  const recipe::Recipe homogeneous = Parse(kRecipe, {"system.preset=libra-homogeneous"});
  EXPECT_EQ(MakePlanContext(homogeneous, homogeneous.system).returns,
            planner::ReturnPlacement::kLeastLoaded);
  const recipe::Recipe rotated =
      Parse(kRecipe, {"system.preset=libra", "system.router=round-robin"});
  EXPECT_EQ(MakePlanContext(rotated, rotated.system).returns, planner::ReturnPlacement::kRotated);
  // The length-based routers place a turn on the least loaded instance they admit it to.
  for (const char* router : {"sorted", "length-aware", "oracle-length", "la-mlfq"}) {
    const recipe::Recipe r =
        Parse(kRecipe, {"system.preset=libra", std::string("system.router=") + router});
    EXPECT_EQ(MakePlanContext(r, r.system).returns, planner::ReturnPlacement::kLeastLoaded)
        << router;
  }
  const recipe::Recipe libra = Parse(kRecipe, {"system.preset=libra"});
  EXPECT_EQ(MakePlanContext(libra, libra.system).returns, planner::ReturnPlacement::kKept);
}

TEST(RunnerTest, AStreamPipelinesPlanContextHoldsWholeGroups) {
  // Stream batches reject whole groups: a system that forms them gets 256 groups of the
  // profile's kind, every sample of one prompt after another (their lengths are correlated:
  // the samples of a group differ, the groups differ more); an ordered one gets none, and the
  // profile of one sample per prompt is the same either way.
  const recipe::Recipe ordered = Parse(kRecipe, {"system.preset=libra", "system.batching=ordered"});
  const recipe::Recipe stream = Parse(kRecipe, {"system.preset=libra"});  // the preset's default
  EXPECT_FALSE(AnyStreamBatches(ordered));
  EXPECT_TRUE(AnyStreamBatches(stream));
  auto workload = workload::MakeWorkload(stream.workload, stream.seed);
  ASSERT_OK(workload);
  const SequenceSizes without = SampleSequenceSizes(**workload, 2, 3);
  const SequenceSizes with = SampleSequenceSizes(**workload, 2, 3, /*groups=*/true);
  EXPECT_TRUE(without.group_profile.empty());
  ASSERT_EQ(with.group_profile.size(), 256u * 2);
  EXPECT_EQ(with.profile, without.profile);
  EXPECT_EQ(with.group_profile[0].prompt_tokens, with.group_profile[1].prompt_tokens);
  const planner::PlanContext streaming = MakePlanContext(stream, stream.system, nullptr, with);
  EXPECT_TRUE(streaming.stream_batches);
  EXPECT_EQ(streaming.group_size, 2);
  EXPECT_EQ(streaming.group_profile, with.group_profile);
  const planner::PlanContext plain = MakePlanContext(ordered, ordered.system, nullptr, with);
  EXPECT_FALSE(plain.stream_batches);
  EXPECT_TRUE(plain.group_profile.empty());
}

TEST(RunnerTest, LibraLooksAgainWhenTheWorkloadDriftsAndNeverLosesByIt) {
  // libra re-plans online: when trajectories get 4x longer (or a quarter as long) at step 3 it
  // looks again after the change, moves only on a predicted net gain, and is never more than 2%
  // slower than the same plan held (libra-no-ehp). On the quickstart the balanced split stays
  // the best one either way (the regret benchmark simulates the alternatives: docs/planner.md),
  // so keeping it is the right call.
  for (const std::string factor : {"4", "0.25"}) {
    SCOPED_TRACE(factor);
    const std::vector<std::string> sets = {"steps=12", "workload.drift=\"step\"",
                                           "workload.drift_step_at=3",
                                           "workload.drift_factor=" + factor};
    auto libra = RunNamed("libra", sets);
    auto held = RunNamed("libra-no-ehp", sets);
    ASSERT_NE(libra, nullptr);
    ASSERT_NE(held, nullptr);
    int looks = 0;
    for (const records::DecisionRecord& d : libra->decisions) {
      looks += d.step > 3 && !d.trigger.empty();
      if (d.applied && d.step > 0) {
        ASSERT_TRUE(d.gain_s.has_value());
        EXPECT_GT(*d.gain_s, 0) << d.reason;
      }
    }
    EXPECT_GE(looks, 1);
    EXPECT_LE(libra->steps.back().end_s, 1.02 * held->steps.back().end_s);
  }
}

TEST(RunnerTest, FirstFinishedBatchesBiasTheBatchRewardNotTheEvaluation) {
  // areal-async on the paper recipe trains first on the groups that finish first: its first
  // batch reward is far above an ordered system's, which the old "to reward" column read as
  // instant convergence. The evaluation score on held-out prompts shows no such jump: the
  // version it trained is no better than the ordered system's (a biased batch teaches less).
  const auto run = [](const std::string& preset) {
    auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml"),
                                          {"steps=2"});
    EXPECT_OK(parsed);
    const recipe::SystemSpec system =
        recipe::SystemFromPreset(*recipe::FindPreset(preset), "baselines[9]", "test");
    test::ScopedTempDir dir;
    auto store = store::Store::Open(dir.File("r.db"));
    EXPECT_OK(store);
    RunRequest request;
    request.recipe = &parsed->recipe;
    request.system = &system;
    auto outcome = RunSystem(**store, request, Sim());
    EXPECT_OK(outcome);
    EXPECT_OK(outcome->status);
    auto steps = (*store)->Steps(outcome->run_id);
    EXPECT_OK(steps);
    return std::make_pair(*steps, *(*store)->GetRun(outcome->run_id));
  };
  const auto [areal, areal_run] = run("areal-async");
  const auto [ordered, ordered_run] = run("disagg-static");
  ASSERT_FALSE(areal.empty());
  ASSERT_FALSE(ordered.empty());
  EXPECT_GT(areal[0].reward_mean, ordered[0].reward_mean + 0.1);
  ASSERT_TRUE(areal[0].eval_score && ordered[0].eval_score);
  EXPECT_LE(*areal[0].eval_score, *ordered[0].eval_score);
  // Both start from the same initial evaluation: the target is the same for both.
  EXPECT_EQ(areal_run.eval_initial, ordered_run.eval_initial);
}

TEST(RunnerTest, NowIso8601LooksLikeUtc) {
  // "YYYY-MM-DDTHH:MM:SSZ".
  const std::string now = NowIso8601();
  ASSERT_EQ(now.size(), 20u);
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

}  // namespace
}  // namespace libra::experiment
