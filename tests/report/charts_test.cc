#include "report/charts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_util.h"
#include "support/xml_wellformed.h"

namespace libra::report {
namespace {

using test::XmlWellFormed;

TEST(ChartsTest, XmlEscapeCoversTheFiveEntitiesAndDropsControlCharacters) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(XmlEscape("tab\tnewline\n"), "tab\tnewline\n");
}

TEST(ChartsTest, NiceTicksUseOneTwoFiveSteps) {
  struct Case {
    double lo, hi;
    std::vector<double> ticks;
  };
  const std::vector<Case> cases = {
      {0, 10, {0, 2, 4, 6, 8, 10}},
      {0.13, 0.87, {0, 0.2, 0.4, 0.6, 0.8, 1.0}},
      {-3, 7, {-4, -2, 0, 2, 4, 6, 8}},
      {17, 105.2, {0, 20, 40, 60, 80, 100, 120}},
      {5, 5, {5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.lo) + ".." + std::to_string(c.hi));
    const std::vector<double> ticks = NiceTicks(c.lo, c.hi, 6);
    ASSERT_EQ(ticks.size(), c.ticks.size());
    for (size_t i = 0; i < ticks.size(); ++i) EXPECT_NEAR(ticks[i], c.ticks[i], 1e-9);
    EXPECT_LE(ticks.front(), c.lo);
    EXPECT_GE(ticks.back(), c.hi);
  }
}

TEST(ChartsTest, AxisNumbersAreShort) {
  EXPECT_EQ(AxisNumber(0), "0");
  EXPECT_EQ(AxisNumber(-0.0), "0");
  EXPECT_EQ(AxisNumber(3), "3");
  EXPECT_EQ(AxisNumber(0.25), "0.25");
  EXPECT_EQ(AxisNumber(0.1 + 0.2), "0.3");
  EXPECT_EQ(AxisNumber(12000), "12k");
  EXPECT_EQ(AxisNumber(1.5e6), "1.5M");
}

TEST(ChartsTest, RolloutGpusByTpReadsLayoutStrings) {
  using Pairs = std::vector<std::pair<int, int>>;
  EXPECT_EQ(RolloutGpusByTp("train 8 (tp1 pp1 dp8 mb1) | rollout tp1x4+tp4x2"),
            (Pairs{{1, 4}, {4, 8}}));
  EXPECT_EQ(RolloutGpusByTp("train 16 (tp8 pp1 dp2 mb1) | rollout tp2x8 (colocated)"),
            (Pairs{{2, 16}}));
  EXPECT_TRUE(RolloutGpusByTp("train 8 (tp1 pp1 dp8 mb1) | rollout none").empty());
  EXPECT_TRUE(RolloutGpusByTp("something else").empty());
}

TEST(ChartsTest, TheXmlCheckerRejectsBrokenDocuments) {
  EXPECT_EQ(XmlWellFormed("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/>t &amp; u</a>\n"), "");
  EXPECT_NE(XmlWellFormed("<a><b></a></b>"), "");
  EXPECT_NE(XmlWellFormed("<a x=1/>"), "");
  EXPECT_NE(XmlWellFormed("<a x=\"1\" x=\"2\"/>"), "");
  EXPECT_NE(XmlWellFormed("<a>&nbsp;</a>"), "");
  EXPECT_NE(XmlWellFormed("<a>1 < 2</a>"), "");
  EXPECT_NE(XmlWellFormed("<a/><b/>"), "");
  EXPECT_NE(XmlWellFormed("<a>"), "");
  EXPECT_NE(XmlWellFormed("text"), "");
}

TEST(ChartsTest, EmptyChartsSayNoData) {
  for (const std::string& svg :
       {RenderLineChart(LineChart{"t", "", "x", "y", {}}),
        RenderHorizontalBars(HorizontalBars{"t", "", "x", {"a"}, {}, ""}),
        RenderStackedSteps(StackedSteps{"t", "", "x", "y", {"a"}, {0}, {}})}) {
    EXPECT_EQ(XmlWellFormed(svg), "") << svg;
    EXPECT_NE(svg.find(">no data</text>"), std::string::npos) << svg;
  }
}

records::StepRecord Step(int step, double start, double end, int train, int rollout,
                         double reward) {
  records::StepRecord s;
  s.step = step;
  s.start_s = start;
  s.end_s = end;
  s.rollout_s = (end - start) * 0.8;
  s.train_s = (end - start) * 0.4;
  s.sync_s = 0.5;
  s.wait_s = (end - start) * 0.1;
  s.trajectories = 8;
  s.generated_tokens = 8000;
  s.reward_mean = reward;
  s.train_gpus = train;
  s.rollout_gpus = rollout;
  s.idle_gpu_s = (end - start) * 2;  // two of the GPUs idle on average
  return s;
}

/// A fixed small comparison: a static split, and a planner that moves 4 GPUs to rollout at
/// step 1. One system name needs escaping.
std::vector<PlotRun> SmallComparison() {
  std::vector<PlotRun> runs(2);
  for (int r = 0; r < 2; ++r) {
    records::RunInfo& run = runs[r].view.run;
    run.id = r + 1;
    run.name = "small";
    run.system = r == 0 ? "split <8/8>" : "libra";
    run.backend = "sim";
    run.status = records::kRunOk;
    run.gpus = 16;
  }
  runs[0].view.steps = {Step(0, 0, 10, 8, 8, 0.2), Step(1, 10, 20, 8, 8, 0.3),
                        Step(2, 20, 30, 8, 8, 0.35)};
  runs[1].view.steps = {Step(0, 0, 9, 8, 8, 0.2), Step(1, 9, 16, 4, 12, 0.3),
                        Step(2, 16, 23, 4, 12, 0.4)};
  // Evaluation scores: the initial one, then every step.
  for (int r = 0; r < 2; ++r) {
    runs[r].view.run.eval_initial = 0.2;
    for (int step = 0; step < 3; ++step) {
      runs[r].view.steps[step].eval_score = 0.2 + 0.05 * (step + 1) * (r + 1);
    }
  }
  records::DecisionRecord initial;
  initial.applied = true;
  initial.layout = "train 8 (tp1 pp1 dp8 mb1) | rollout tp4x2";
  records::DecisionRecord move = initial;
  move.at_s = 9;
  move.step = 1;
  move.layout = "train 4 (tp1 pp1 dp4 mb1) | rollout tp4x2+tp2x2";
  runs[1].decisions = {initial, move};
  for (PlotRun& run : runs) {
    for (int step = 0; step < 3; ++step) {
      for (int i = 0; i < 8; ++i) {
        records::TrajectoryRecord t;
        t.id = step * 8 + i;
        t.step = step;
        t.generated_tokens = 500 * (i + 1) * (step + 1);
        // The batch starts during the previous step and ends in this one.
        t.start_s = run.view.steps[step].start_s - 4;
        t.end_s = run.view.steps[step].start_s + 0.25 * i;
        run.trajectories.push_back(t);
      }
    }
  }
  return runs;
}

TEST(ChartsTest, PlotsOfASmallComparisonAreWellFormedAndStable) {
  const std::vector<PlotFile> plots = BuildPlots(SmallComparison());
  std::vector<std::string> names;
  for (const PlotFile& plot : plots) {
    names.push_back(plot.name);
    EXPECT_EQ(XmlWellFormed(plot.svg), "") << plot.name;
    EXPECT_EQ(plot.svg.find("no data"), std::string::npos) << plot.name;
    test::ExpectGolden("report/plot_" + plot.name, "BuildPlots of a fixed two-run comparison",
                       plot.svg);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"eval.svg", "time-to-target.svg", "reward.svg",
                                             "throughput.svg", "breakdown.svg", "gpu-seconds.svg",
                                             "allocation-run1.svg", "lengths-run1.svg",
                                             "allocation-run2.svg", "lengths-run2.svg"}));
  // Simulated scores and rewards are labelled as modelled, the batch reward as such; the escaped
  // name is in the legend.
  EXPECT_NE(plots[0].svg.find("Evaluation score over wall-clock (modelled)"), std::string::npos);
  EXPECT_NE(plots[2].svg.find("Batch reward over wall-clock (modelled)"), std::string::npos);
  EXPECT_NE(plots[2].svg.find("split &lt;8/8&gt; (run 1)"), std::string::npos);
  // The move shows as rollout by TP size after step 0.
  EXPECT_NE(plots[8].svg.find("rollout TP2"), std::string::npos);
}

/// `seeds` runs of one system: seed k's score rises from 0.2 by 0.1 x (k + 1) per 10 s step.
std::vector<PlotRun> Seeds(const std::string& system, int seeds, int first_id) {
  std::vector<PlotRun> runs(static_cast<size_t>(seeds));
  for (int k = 0; k < seeds; ++k) {
    records::RunInfo& run = runs[static_cast<size_t>(k)].view.run;
    run.id = first_id + k;
    run.name = "seeds";
    run.system = system;
    run.seed = static_cast<uint64_t>(k + 1);
    run.backend = "cluster";
    run.eval_initial = 0.2;
    for (int step = 0; step < 3; ++step) {
      records::StepRecord s = Step(step, 10 * step, 10 * (step + 1), 8, 8, 0.3);
      s.eval_score = 0.2 + 0.1 * (k + 1) * (step + 1);
      runs[static_cast<size_t>(k)].view.steps.push_back(s);
    }
  }
  return runs;
}

TEST(ChartsTest, EvalChartDrawsTheMeanOfTheSeedsInsideTheirRange) {
  // Issue 19: one line per system, the mean over its seeds, the band their range; a system with
  // one run is drawn as its evaluations.
  std::vector<PlotRun> runs = Seeds("libra", 3, 1);
  std::vector<PlotRun> one = Seeds("verl-sync", 1, 4);
  runs.insert(runs.end(), one.begin(), one.end());
  const LineChart chart = EvalChart(runs);
  EXPECT_EQ(chart.title, "Evaluation score over wall-clock");  // measured, not modelled
  ASSERT_EQ(chart.series.size(), 2u);
  EXPECT_EQ(chart.series[0].label, "libra (3 seeds)");
  EXPECT_EQ(chart.series[1].label, "verl-sync (run 4)");
  // At 20 s the seeds stand at 0.4, 0.6 and 0.8.
  ASSERT_EQ(chart.series[0].points.size(), 4u);
  EXPECT_DOUBLE_EQ(chart.series[0].points[2].first, 20);
  EXPECT_DOUBLE_EQ(chart.series[0].points[2].second, 0.6);
  ASSERT_EQ(chart.series[0].band.size(), 4u);
  EXPECT_DOUBLE_EQ(chart.series[0].band[2].low, 0.4);
  EXPECT_DOUBLE_EQ(chart.series[0].band[2].high, 0.8);
  EXPECT_TRUE(chart.series[1].band.empty());
  const std::string svg = RenderLineChart(chart);
  EXPECT_EQ(XmlWellFormed(svg), "");
  EXPECT_NE(svg.find("fill-opacity"), std::string::npos);  // the band
}

TEST(ChartsTest, TimeToTargetShowsTheMeanTheRangeAndTheSeedsThatReachedIt) {
  // Targets per seed: 80% of the way from 0.2 to the seed's best final score. libra's seeds
  // reach theirs; verl-sync (the slowest, 0.1 per step) never reaches seed 2's or 3's.
  std::vector<PlotRun> runs = Seeds("libra", 3, 1);
  std::vector<PlotRun> slow = Seeds("verl-sync", 3, 4);
  for (PlotRun& run : slow) {
    for (size_t step = 0; step < run.view.steps.size(); ++step) {
      run.view.steps[step].eval_score = 0.2 + 0.1 * static_cast<double>(step + 1);
    }
  }
  runs.insert(runs.end(), slow.begin(), slow.end());
  const HorizontalBars chart = TimeToTargetChart(runs, Convergence{});
  ASSERT_EQ(chart.rows.size(), 2u);
  EXPECT_EQ(chart.rows[0].label, "libra");
  ASSERT_EQ(chart.rows[0].lanes.size(), 2u);
  // Each libra seed is the best of its seed and rises linearly, so it reaches 80% of its own
  // rise at 24 s: the range is a point.
  EXPECT_NEAR(chart.rows[0].lanes[0][0].to, 24, 1e-9);
  EXPECT_EQ(chart.rows[0].note, "24.0 s, 3 of 3 seeds");
  // verl-sync reaches seed 1's target (the best final score of seed 1 is its own and libra's
  // 0.5) at 24 s, and none other.
  EXPECT_EQ(chart.rows[1].note, "24.0 s, 1 of 3 seeds");
  ASSERT_EQ(chart.rows[1].lanes.size(), 1u);
  Convergence absolute;
  absolute.target = 5;
  const HorizontalBars never = TimeToTargetChart(runs, absolute);
  EXPECT_TRUE(never.rows[0].lanes.empty());
  EXPECT_EQ(never.rows[0].note, "not reached, 0 of 3 seeds");
  EXPECT_EQ(XmlWellFormed(RenderHorizontalBars(chart)), "");
}

TEST(ChartsTest, BreakdownShowsOverlappingPhasesAsOverlap) {
  // A synchronous step of 17.5 s whose trainer waits 10.2 s for a 10.2 s rollout is 17.5 s wide,
  // not 27.7: the rollout runs under the wait. An asynchronous run's rollout starts before its
  // step.
  PlotRun sync;
  records::StepRecord s;
  s.start_s = 0;
  s.end_s = 17.5;
  s.rollout_s = 10.2;
  s.wait_s = 10.2;
  s.train_s = 7.3;
  s.trajectories = 1;
  sync.view.steps = {s};
  records::TrajectoryRecord t;
  t.start_s = 0;
  t.end_s = 10.2;
  sync.trajectories = {t};
  const HorizontalBars::Row row = BreakdownRow(sync);
  ASSERT_EQ(row.lanes.size(), 2u);
  EXPECT_DOUBLE_EQ(row.lanes[0].back().to, 17.5);  // the trainer's lane ends with the step
  EXPECT_DOUBLE_EQ(row.lanes[1][0].from, 0);
  EXPECT_DOUBLE_EQ(row.lanes[1][0].to, 10.2);  // under the wait, not after it

  PlotRun async = sync;
  async.view.steps[0].start_s = 5;
  async.view.steps[0].end_s = 14;
  async.view.steps[0].wait_s = 0;
  async.view.steps[0].train_s = 8.5;
  async.trajectories[0].start_s = 1;
  async.trajectories[0].end_s = 5;
  const HorizontalBars::Row overlapped = BreakdownRow(async);
  EXPECT_DOUBLE_EQ(overlapped.lanes[1][0].from, -4);  // during the step before
  EXPECT_DOUBLE_EQ(overlapped.lanes[1][0].to, 0);
  EXPECT_DOUBLE_EQ(overlapped.lanes[0].back().to, 9);
  const std::string svg = RenderHorizontalBars(
      HorizontalBars{"t", "", "s", {"a", "b", "c", "d", "e"}, {overlapped}, "earlier steps"});
  EXPECT_NE(svg.find("shaded: earlier steps"), std::string::npos) << svg;
}

/// An elastic run: 4 training and 4 rollout GPUs; the trainer's GPUs are lent to rollout from
/// 10 s (the switch takes 2 s) and taken back at 20 s.
PlotRun ElasticRun() {
  PlotRun run;
  run.view.run.id = 5;
  run.view.run.system = "verl-dynamic";
  run.view.run.gpus = 8;
  records::StepRecord s;
  s.end_s = 30;
  s.trajectories = 8;
  run.view.steps = {s};
  records::DecisionRecord initial;
  initial.applied = true;
  initial.layout = "train 4 (tp1 pp1 dp4 mb1) | rollout tp1x4";
  run.decisions = {initial};
  auto event = [](const char* kind, double a, double b, const char* detail) {
    records::EventRecord e;
    e.kind = kind;
    e.start_s = a;
    e.end_s = b;
    e.detail = detail;
    return e;
  };
  run.events = {event("lend", 10, 10, "train 0 (tp1 pp1 dp4 mb1) | rollout tp1x8"),
                event("relayout", 10, 12, "train 0 (tp1 pp1 dp4 mb1) | rollout tp1x8"),
                event("reclaim", 20, 20, "train 4 (tp1 pp1 dp4 mb1) | rollout tp1x4"),
                event("relayout", 20, 22, "train 4 (tp1 pp1 dp4 mb1) | rollout tp1x4")};
  return run;
}

TEST(ChartsTest, AllocationFollowsLendsAndReclaims) {
  // Drawn from the events, not from per-step columns: the lent GPUs roll out between the lend
  // and the reclaim, and switch roles during each layout change.
  const StackedSteps chart = AllocationOverTime(ElasticRun());
  EXPECT_EQ(chart.parts,
            (std::vector<std::string>{"training", "rollout TP1", "rollout", "switching"}));
  EXPECT_EQ(chart.x, (std::vector<double>{0, 10, 12, 20, 22, 30}));
  ASSERT_EQ(chart.values.size(), 5u);
  EXPECT_EQ(chart.values[0], (std::vector<double>{4, 4, 0, 0}));  // as planned
  EXPECT_EQ(chart.values[1], (std::vector<double>{0, 4, 0, 4}));  // lending: 4 switching
  EXPECT_EQ(chart.values[2], (std::vector<double>{0, 8, 0, 0}));  // all 8 roll out
  EXPECT_EQ(chart.values[3], (std::vector<double>{0, 4, 0, 4}));  // reclaiming
  EXPECT_EQ(chart.values[4], (std::vector<double>{4, 4, 0, 0}));
  EXPECT_NE(chart.subtitle.find("1 lend and 1 reclaim"), std::string::npos) << chart.subtitle;
}

TEST(ChartsTest, ColocatedAllocationAlternates) {
  // A colocated run's GPUs roll out, train, then load weights: not one flat block.
  PlotRun run;
  run.view.run.gpus = 8;
  records::StepRecord s;
  s.end_s = 10;
  run.view.steps = {s};
  records::DecisionRecord initial;
  initial.applied = true;
  initial.layout = "train 8 (tp1 pp1 dp8 mb1) | rollout tp2x4 (colocated)";
  run.decisions = {initial};
  records::EventRecord train;
  train.kind = "train";
  train.start_s = 6;
  train.end_s = 9;
  records::EventRecord sync = train;
  sync.kind = "sync";
  sync.start_s = 9;
  sync.end_s = 10;
  run.events = {train, sync};
  const StackedSteps chart = AllocationOverTime(run);
  EXPECT_EQ(chart.x, (std::vector<double>{0, 6, 9, 10}));
  EXPECT_EQ(chart.values[0], (std::vector<double>{0, 8, 0, 0}));  // rollout TP2
  EXPECT_EQ(chart.values[1], (std::vector<double>{8, 0, 0, 0}));  // training
  EXPECT_EQ(chart.values[2], (std::vector<double>{0, 0, 0, 8}));  // loading weights
}

TEST(ChartsTest, GpuSecondsAddUpToTheCluster) {
  // 8 GPUs over 10 s: 4 train for 3 s (12), the rollout GPUs are busy 30 of their 40
  // GPU-seconds, the trainer's weight sync takes 0.5 s (2); the rest is idle.
  RunView view;
  view.run.gpus = 8;
  records::StepRecord s;
  s.end_s = 10;
  s.train_s = 3;
  s.sync_s = 0.5;
  s.train_gpus = 4;
  s.rollout_gpus = 4;
  s.trajectories = 10;
  s.idle_gpu_s = 80 - 12 - 30;
  view.steps = {s};
  const GpuSeconds g = AccountGpuSeconds(view, {});
  EXPECT_DOUBLE_EQ(g.total, 80);
  EXPECT_DOUBLE_EQ(g.training, 12);
  ASSERT_TRUE(g.rollout && g.idle);
  EXPECT_DOUBLE_EQ(*g.rollout, 30);
  EXPECT_DOUBLE_EQ(g.switching, 2);
  EXPECT_DOUBLE_EQ(*g.idle, 36);
  EXPECT_EQ(g.trajectories, 10);
  // Without recorded utilisation, generating and idle are unknown, not 0.
  view.steps[0].idle_gpu_s.reset();
  EXPECT_FALSE(AccountGpuSeconds(view, {}).rollout);
}

TEST(ChartsTest, XAxisEndsWithTheData) {
  // Data ending at 10.6k: the axis ends there, not at the next tick (15k).
  LineChart chart{"t", "", "wall-clock (s)", "y", {{"a", {{0, 1}, {5000, 2}, {10600, 3}}}}};
  const std::string svg = RenderLineChart(chart);
  EXPECT_EQ(svg.find(">15k<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">10k<"), std::string::npos) << svg;
}

TEST(ChartsTest, SmoothedLinesKeepTheRawSeriesFaint) {
  LineChart chart{"t", "", "x", "y", {{"a", {}}}};
  for (int i = 0; i < 40; ++i) chart.series[0].points.emplace_back(i, i % 3);
  chart.smooth = 3;
  const std::string svg = RenderLineChart(chart);
  EXPECT_NE(svg.find("stroke-opacity=\"0.3\""), std::string::npos);
  EXPECT_NE(svg.find("3-point moving mean"), std::string::npos);
}

TEST(ChartsTest, ManySeriesBecomeSmallMultiples) {
  // Beyond a handful of series, one panel each (titled by its label), the others in grey.
  LineChart chart{"t", "", "x", "y", {}};
  for (int s = 0; s < 7; ++s) {
    chart.series.push_back({"least-conn-buckets (run " + std::to_string(s) + ")", {}});
    for (int i = 0; i < 5; ++i) chart.series.back().points.emplace_back(i, s + i);
  }
  const std::string svg = RenderLineChart(chart);
  EXPECT_NE(svg.find("one panel per series"), std::string::npos);
  for (int s = 0; s < 7; ++s) {
    EXPECT_NE(svg.find(">least-conn-buckets (run " + std::to_string(s) + ")</text>"),
              std::string::npos);
  }
  EXPECT_EQ(XmlWellFormed(svg), "");
}

}  // namespace
}  // namespace libra::report
