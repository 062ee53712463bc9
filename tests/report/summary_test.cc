#include "report/summary.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/strings.h"

namespace libra::report {
namespace {

records::StepRecord Step(int step, double end_s, int trajectories, int64_t tokens, double reward) {
  records::StepRecord s;
  s.step = step;
  s.end_s = end_s;
  s.trajectories = trajectories;
  s.generated_tokens = tokens;
  s.reward_mean = reward;
  return s;
}

records::RunInfo MakeRun(int64_t id, const std::string& system, int gpus) {
  records::RunInfo run;
  run.id = id;
  run.name = "quickstart";
  run.system = system;
  run.router = "least-conn";
  run.planner = "static";
  run.backend = "sim";
  run.seed = 1;
  run.gpus = gpus;
  run.status = records::kRunOk;
  return run;
}

// Two steps on 4 GPUs: 16 trajectories and 3000 tokens in 30 s.
RunView TwoSteps(int64_t id, const std::string& system) {
  RunView view;
  view.run = MakeRun(id, system, 4);
  records::StepRecord a = Step(0, 10, 8, 1000, 0.25);
  a.rollout_s = 6;
  a.train_s = 3;
  a.sync_s = 1;
  a.wait_s = 2;
  records::StepRecord b = Step(1, 30, 8, 2000, 0.75);
  b.rollout_s = 10;
  b.train_s = 5;
  b.sync_s = 1;
  b.wait_s = 0;
  view.steps = {a, b};
  return view;
}

TEST(SummaryTest, ComputeMetricsOnHandMadeSteps) {
  // Totals are sums, rates divide by the last step's end, per-step times are means, and the
  // reward is the last step's.
  const RunMetrics m = ComputeMetrics(TwoSteps(1, "baseline"));
  EXPECT_EQ(m.steps, 2);
  EXPECT_EQ(m.trajectories, 16);
  EXPECT_EQ(m.generated_tokens, 3000);
  EXPECT_EQ(m.elapsed_s, 30.0);
  ASSERT_TRUE(m.trajectories_per_s.has_value());
  EXPECT_DOUBLE_EQ(*m.trajectories_per_s, 16.0 / 30);
  EXPECT_EQ(m.tokens_per_s, 100.0);
  EXPECT_EQ(m.tokens_per_s_per_gpu, 25.0);
  EXPECT_EQ(m.step_s, 15.0);
  EXPECT_EQ(m.rollout_s, 8.0);
  EXPECT_EQ(m.train_s, 4.0);
  EXPECT_EQ(m.sync_s, 1.0);
  EXPECT_EQ(m.wait_s, 1.0);
  EXPECT_EQ(m.final_reward, 0.75);
}

TEST(SummaryTest, NoStepsGivesMissingValuesNotZeros) {
  // A run that recorded no step has no times, rates or reward: they are missing, not 0.
  RunView view;
  view.run = MakeRun(3, "broken", 8);
  const RunMetrics m = ComputeMetrics(view);
  EXPECT_EQ(m.steps, 0);
  EXPECT_EQ(m.trajectories, 0);
  for (const std::optional<double>& v :
       {m.elapsed_s, m.trajectories_per_s, m.tokens_per_s, m.tokens_per_s_per_gpu, m.step_s,
        m.rollout_s, m.train_s, m.sync_s, m.wait_s, m.final_reward}) {
    EXPECT_FALSE(v.has_value());
  }
}

TEST(SummaryTest, ZeroElapsedOrGpusLeavesRatesMissing) {
  // Rates need elapsed time (and a GPU count for the per-GPU rate); without them they are
  // missing rather than infinite or 0.
  RunView instant;
  instant.run = MakeRun(1, "s", 4);
  instant.steps = {Step(0, 0, 4, 100, 0.5)};
  const RunMetrics a = ComputeMetrics(instant);
  EXPECT_FALSE(a.trajectories_per_s.has_value());
  EXPECT_FALSE(a.tokens_per_s.has_value());
  EXPECT_FALSE(a.tokens_per_s_per_gpu.has_value());
  EXPECT_EQ(a.elapsed_s, 0.0);

  RunView no_gpus;
  no_gpus.run = MakeRun(2, "s", 0);
  no_gpus.steps = {Step(0, 10, 4, 100, 0.5)};
  const RunMetrics b = ComputeMetrics(no_gpus);
  EXPECT_EQ(b.tokens_per_s, 10.0);
  EXPECT_FALSE(b.tokens_per_s_per_gpu.has_value());
}

TEST(SummaryTest, RunWithoutStepsRendersDashAndNull) {
  // In the summary table a run with no steps shows "-" in text and null in JSON for every
  // metric; only its step count is a real 0.
  RunView empty;
  empty.run = MakeRun(3, "broken", 8);
  empty.run.status = records::kRunFailed;
  const Table table = SummaryTable({empty}, std::nullopt);
  EXPECT_EQ(
      table.Render(Format::kText),
      "                                                  gen     GPU          rollout   train  "
      "                 batch              to      of\n"
      "run  system  status  steps  time s  traj/s  tok/s/GPU    util  step s        s       s  "
      "sync s  wait s  reward  eval  target s   bound\n"
      "---  ------  ------  -----  ------  ------  ---------  ------  ------  -------  ------  "
      "------  ------  ------  ----  --------  ------\n"
      "  3  broken  failed      0       -       -          -       -       -        -       -  "
      "     -       -       -     -         -       -\n"
      "    as written: -\n");
  EXPECT_EQ(table.Render(Format::kJson),
            "[\n  {\"run\": 3, \"name\": \"quickstart\", \"system\": \"broken\", \"seed\": 1, "
            "\"status\": \"failed\", \"steps\": 0, \"elapsed_s\": null, \"trajectories\": 0, "
            "\"generated_tokens\": 0, \"trajectories_per_s\": null, "
            "\"generated_tokens_per_s_per_gpu\": null, \"gpu_util\": null, \"step_s\": null, "
            "\"rollout_s\": null, \"train_s\": null, \"sync_s\": null, \"wait_s\": null, "
            "\"final_reward\": null, \"final_eval\": null, \"eval_target\": null, "
            "\"time_to_target_s\": null, \"of_bound\": null, \"throughput_bound\": null, "
            "\"configured_by\": \"as written\", \"configuration\": \"-\"}\n]\n");
}

TEST(SummaryTest, SpeedupIsRelativeToTheChosenBaseline) {
  // The speedup column divides each run's trajectories/s by the baseline's; a run without
  // throughput has no speedup; without a (valid) baseline there is no column.
  RunView fast = TwoSteps(2, "fast");
  for (records::StepRecord& s : fast.steps) s.trajectories *= 2;  // twice the throughput
  RunView empty;
  empty.run = MakeRun(3, "empty", 4);
  const std::vector<RunView> runs = {TwoSteps(1, "slow"), fast, empty};

  struct Case {
    std::string name;
    std::optional<size_t> baseline;
    std::string csv_tail;  // the speedup values, one per run, or "" when there is no column
  };
  const std::vector<Case> cases = {
      {"baseline slow", 0, "1.0|2.0|"},    {"baseline fast", 1, "0.5|1.0|"},
      {"baseline without steps", 2, "||"}, {"no baseline", std::nullopt, ""},
      {"baseline out of range", 3, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string csv = SummaryTable(runs, c.baseline).Render(Format::kCsv);
    const std::string header = csv.substr(0, csv.find('\n'));
    const bool has_column = EndsWith(header, ",speedup");
    EXPECT_EQ(has_column, !c.csv_tail.empty()) << header;
    if (!has_column) continue;
    std::vector<std::string> lines = StrSplit(csv, '\n');
    std::vector<std::string> speedups;
    for (size_t i = 1; i + 1 < lines.size(); ++i) {
      speedups.push_back(lines[i].substr(lines[i].rfind(',') + 1));
    }
    const std::string tail = StrJoin(speedups, "|");
    EXPECT_EQ(tail, c.csv_tail);
  }
}

TEST(SummaryTest, SummaryRowValues) {
  // A full row, at full precision for scripts (the text rounds to the documented decimals).
  const Table table = SummaryTable({TwoSteps(1, "baseline")}, 0);
  EXPECT_EQ(table.Render(Format::kCsv),
            "run,name,system,seed,status,steps,elapsed_s,trajectories,generated_tokens,"
            "trajectories_per_s,generated_tokens_per_s_per_gpu,gpu_util,step_s,rollout_s,train_s,"
            "sync_s,wait_s,final_reward,final_eval,eval_target,time_to_target_s,of_bound,"
            "throughput_bound,configured_by,configuration,speedup\n"
            "1,quickstart,baseline,1,ok,2,30.0,16,3000,0.5333333333333333,25.0,,15.0,8.0,4.0,1.0,"
            "1.0,0.75,,,,,,as written,-,1.0\n");
  EXPECT_NE(table.Render(Format::kText).find("  0.533  "), std::string::npos);
}

TEST(SummaryTest, TargetChoosesWhatTimeToTargetTimes) {
  // Evaluation 0.2 at the start, 0.4 at 10 s, 0.6 at 30 s. By default the target is 0.8 of the
  // way to the best final score (0.2 + 0.8 * 0.4 = 0.52, reached at 22 s); a given target is
  // timed as given, and one never reached is missing.
  RunView view = TwoSteps(1, "baseline");
  view.run.eval_initial = 0.2;
  view.steps[0].eval_score = 0.4;
  view.steps[1].eval_score = 0.6;
  auto time_to_target = [&](std::optional<double> target) {
    const std::string csv = SummaryTable({view}, 0, Convergence{target, 0.8}).Render(Format::kCsv);
    const std::vector<std::string> header = StrSplit(StrSplit(csv, '\n')[0], ',');
    const std::vector<std::string> cells = StrSplit(StrSplit(csv, '\n')[1], ',');
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == "time_to_target_s") return cells[i];
    }
    return std::string("no column");
  };
  EXPECT_EQ(time_to_target(std::nullopt), "22.0");
  EXPECT_NEAR(std::stod(time_to_target(0.3)), 5.0, 1e-9);  // full precision in CSV
  EXPECT_EQ(time_to_target(0.1), "0.0");
  EXPECT_EQ(time_to_target(0.9), "");
}

TEST(SummaryTest, BatchRewardDoesNotCountAsConvergence) {
  // A run whose first batches are easy groups (batch reward 0.9 at once) but whose policy has
  // not learned more than another's converges no sooner: time to target reads the evaluation.
  RunView biased = TwoSteps(1, "first-finished");
  RunView fair = TwoSteps(2, "ordered");
  biased.steps[0].reward_mean = 0.9;
  biased.steps[1].reward_mean = 0.9;
  for (RunView* v : {&biased, &fair}) {
    v->run.eval_initial = 0.2;
    v->steps[0].eval_score = 0.3;
    v->steps[1].eval_score = 0.5;
  }
  const std::map<uint64_t, double> targets = EvalTargets({biased, fair}, Convergence{});
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_DOUBLE_EQ(targets.at(1), 0.2 + 0.8 * 0.3);
  EXPECT_EQ(TimeToTarget(biased, targets.at(1)), TimeToTarget(fair, targets.at(1)));
}

TEST(SummaryTest, TargetsArePerSeed) {
  // Each seed's target comes from its own runs' initial and best final scores.
  RunView a = TwoSteps(1, "a");
  RunView b = TwoSteps(2, "a");
  b.run.seed = 2;
  a.run.eval_initial = 0.1;
  a.steps[1].eval_score = 0.5;
  b.run.eval_initial = 0.3;
  b.steps[1].eval_score = 0.4;
  const std::map<uint64_t, double> targets = EvalTargets({a, b}, Convergence{std::nullopt, 0.5});
  EXPECT_DOUBLE_EQ(targets.at(1), 0.3);
  EXPECT_DOUBLE_EQ(targets.at(2), 0.35);
  EXPECT_EQ(EvalCurve(a), (std::vector<std::pair<double, double>>{{0, 0.1}, {30, 0.5}}));
}

TEST(SummaryTest, RouterActivityShowsFinalAndLargestValues) {
  const std::vector<std::tuple<int, std::string, double>> metrics = {{0, "moves/tree", 2},
                                                                     {0, "episodes_in_flight", 40},
                                                                     {1, "moves/tree", 5},
                                                                     {1, "episodes_in_flight", 12}};
  EXPECT_EQ(RouterActivityTable(metrics).Render(Format::kCsv),
            "metric,final,max\nepisodes_in_flight,12.0,40.0\nmoves/tree,5.0,5.0\n");
  EXPECT_EQ(RouterActivityTable({}).rows(), 0u);
}

TEST(SummaryTest, PlannerActivityPutsMeasuredNextToPredicted) {
  // The applied move at 10 s governs steps 1 and 2 (10 s and 14 s long): measured 12 s; a kept
  // decision has no measurement; missing predictions stay missing.
  std::vector<records::StepRecord> steps = {Step(0, 10, 8, 1000, 0.2), Step(1, 20, 8, 1000, 0.2),
                                            Step(2, 34, 8, 1000, 0.2)};
  steps[1].start_s = 10;
  steps[2].start_s = 20;
  records::DecisionRecord initial;
  initial.trigger = "initial";
  initial.applied = true;
  initial.layout = "train 8 | rollout tp1x8";
  initial.predicted_step_s = 9.5;
  initial.reason = "initial plan";
  records::DecisionRecord move;
  move.step = 1;
  move.at_s = 10;
  move.trigger = "imbalance";
  move.applied = true;
  move.layout = "train 4 | rollout tp1x12";
  move.predicted_step_s = 8;
  move.current_step_s = 10;
  move.gain_s = 12.5;
  move.transition_s = 3.5;
  move.reason = "gain 12.5 s over 8 steps";
  records::DecisionRecord kept = move;
  kept.step = 2;
  kept.at_s = 20;
  kept.trigger = "interval";
  kept.applied = false;
  kept.reason = "no better candidate";
  EXPECT_EQ(PlannerActivityTable({initial, move, kept}, steps).Render(Format::kCsv),
            "step,at_s,trigger,applied,layout,predicted_step_s,current_step_s,gain_s,"
            "transition_s,measured_step_s,reason\n"
            "0,0.0,initial,yes,train 8 | rollout tp1x8,9.5,,,,10.0,initial plan\n"
            "1,10.0,imbalance,yes,train 4 | rollout tp1x12,8.0,10.0,12.5,3.5,12.0,"
            "gain 12.5 s over 8 steps\n"
            "2,20.0,interval,no,train 4 | rollout tp1x12,8.0,10.0,12.5,3.5,,no better candidate\n");
}

TEST(SummaryTest, StepTableHasOneRowPerStep) {
  // Each step's record: the layout as train/rollout GPUs for reading, two numbers for scripts.
  RunView view = TwoSteps(1, "baseline");
  view.steps[0].turns = 20;
  view.steps[0].max_lag = 1;
  view.steps[0].train_gpus = 4;
  view.steps[0].rollout_gpus = 12;
  const Table table = StepTable(view);
  EXPECT_EQ(table.rows(), 2u);
  const std::string csv = table.Render(Format::kCsv);
  EXPECT_EQ(csv.substr(0, csv.find('\n', csv.find('\n') + 1) + 1),
            "step,start_s,end_s,step_s,rollout_s,train_s,sync_s,wait_s,trajectories,turns,"
            "tool_calls,prompt_tokens,generated_tokens,reward_mean,eval_score,policy_version,"
            "max_lag,train_gpus,rollout_gpus,gpu_util,idle_gpu_s,predicted_step_s\n"
            "0,0.0,10.0,10.0,6.0,3.0,1.0,2.0,8,20,0,0,1000,0.25,,0,1,4,12,,,\n");
  EXPECT_NE(table.Render(Format::kText).find("   4/12\n"), std::string::npos)
      << table.Render(Format::kText);
  EXPECT_EQ(StepTable(RunView()).rows(), 0u);
}

TEST(SummaryTest, ListTableShowsStepsDoneAndComparisonOrMissing) {
  // One row per run with the steps it recorded out of those planned (not the plan alone); a run
  // outside any comparison has a missing comparison id.
  records::RunInfo a = MakeRun(1, "baseline", 8);
  a.started_at = "2024-01-02T03:04:05Z";
  a.steps_planned = 5;
  a.status = records::kRunInterrupted;
  records::RunInfo b = MakeRun(2, "libra", 8);
  b.comparison_id = 7;
  b.steps_planned = 2;
  const Table table = ListTable({a, b}, {{1, 3}, {2, 2}});
  EXPECT_EQ(table.Render(Format::kCsv),
            "run,name,system,backend,seed,started_at,ended_at,steps_done,steps_planned,status,"
            "comparison,error\n"
            "1,quickstart,baseline,sim,1,2024-01-02T03:04:05Z,,3,5,interrupted,,\n"
            "2,quickstart,libra,sim,1,,,2,2,ok,7,\n");
  const std::string text = table.Render(Format::kText);
  EXPECT_NE(text.find("  3/5  interrupted"), std::string::npos) << text;
}

TEST(SummaryTest, RunHeadline) {
  // One line naming the run, its system and policies, backend, seed, GPUs and outcome.
  records::RunInfo run = MakeRun(3, "baseline", 16);
  EXPECT_EQ(RunHeadline(run),
            "run 3: quickstart, system 'baseline' (least-conn / static), sim, seed 1, 16 GPUs: ok");
  run.status = records::kRunFailed;
  run.error = "backend error: sim: boom";
  EXPECT_EQ(RunHeadline(run),
            "run 3: quickstart, system 'baseline' (least-conn / static), sim, seed 1, 16 GPUs: "
            "failed (backend error: sim: boom)");
}

}  // namespace
}  // namespace libra::report

namespace libra::report {
namespace {

// One step of `trajectories` in `seconds`, for system and seed.
RunView Rate(const std::string& system, uint64_t seed, int trajectories, double seconds) {
  RunView view;
  view.run = MakeRun(static_cast<int64_t>(seed), system, 4);
  view.run.seed = seed;
  view.steps = {Step(0, seconds, trajectories, 100, 0.5)};
  return view;
}

TEST(SummaryTest, GpuUtilisationIsTimeWeightedOverTheStepsThatRecordedIt) {
  // 10 s at 50% and 20 s at 80% -> 70%; a step without a figure does not count.
  RunView view = Rate("a", 1, 10, 10);
  view.steps[0].gpu_util = 0.5;
  records::StepRecord b = Step(1, 30, 10, 100, 0.5);
  b.start_s = 10;
  b.gpu_util = 0.8;
  records::StepRecord c = Step(2, 40, 10, 100, 0.5);
  c.start_s = 30;
  view.steps.push_back(b);
  view.steps.push_back(c);
  ASSERT_TRUE(ComputeMetrics(view).gpu_util.has_value());
  EXPECT_NEAR(*ComputeMetrics(view).gpu_util, 0.7, 1e-12);
  EXPECT_FALSE(ComputeMetrics(Rate("a", 1, 10, 10)).gpu_util.has_value());
}

TEST(SummaryTest, RepeatTableAveragesSeedsAndPairsSpeedupsBySeed) {
  // a: 1 and 3 traj/s (mean 2, sd sqrt(2)); b: 1 and 1; speedup of a over b per seed: 1 and 3.
  // c ran once (no sd); d never finished a step (all missing, 0 runs).
  std::vector<RunView> runs = {Rate("a", 1, 10, 10), Rate("b", 1, 10, 10), Rate("a", 2, 30, 10),
                               Rate("b", 2, 10, 10), Rate("c", 1, 20, 10)};
  RunView failed = Rate("d", 1, 10, 10);
  failed.run.status = records::kRunFailed;
  runs.push_back(failed);
  const Table t = RepeatTable(runs, {"a", "b", "c", "d"}, std::string("b"));
  EXPECT_EQ(t.Render(Format::kCsv),
            "system,runs,trajectories_per_s,trajectories_per_s_sd,trajectories_per_s_min,"
            "trajectories_per_s_max,speedup,generated_tokens_per_s_per_gpu,"
            "generated_tokens_per_trajectory,final_eval,time_to_target_s,time_to_target_s_sd,"
            "reached_target,evaluated,configured_by,configuration\n"
            "a,2,2.0,1.4142135623730951,1.0,3.0,2.0,2.5,6.666666666666667,,,,0,0,as written,-\n"
            "b,2,1.0,0.0,1.0,1.0,1.0,2.5,10.0,,,,0,0,as written,-\n"
            "c,1,2.0,,2.0,2.0,2.0,2.5,5.0,,,,0,0,as written,-\n"
            "d,0,,,,,,,,,,,0,0,as written,-\n");
}

TEST(SummaryTest, RepeatTableShowsWhatTheTrajectoriesTrainedWeigh) {
  // "short" trains twice the trajectories a second, each a third of the tokens: fewer tokens a
  // second, which its trajectories/s alone would hide. 4 GPUs, 10 s.
  RunView short_batches = Rate("short", 1, 20, 10);
  short_batches.steps[0].generated_tokens = 20 * 50;
  RunView long_batches = Rate("long", 1, 10, 10);
  long_batches.steps[0].generated_tokens = 10 * 150;
  const Table t = RepeatTable({short_batches, long_batches}, {"short", "long"}, std::nullopt);
  const std::string csv = t.Render(Format::kCsv);
  EXPECT_NE(csv.find("short,1,2.0,,2.0,2.0,25.0,50.0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("long,1,1.0,,1.0,1.0,37.5,150.0,"), std::string::npos) << csv;
}

}  // namespace
}  // namespace libra::report
