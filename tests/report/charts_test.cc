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
        RenderStackedBars(StackedBars{"t", "", "y", {"a"}, {}, {}}),
        RenderStackedSteps(StackedSteps{"t", "", "x", "y", {"a"}, {0}, {}})}) {
    EXPECT_EQ(XmlWellFormed(svg), "") << svg;
    EXPECT_NE(svg.find(">no data</text>"), std::string::npos) << svg;
  }
}

store::StepRecord Step(int step, double start, double end, int train, int rollout, double reward) {
  store::StepRecord s;
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
  return s;
}

/// A fixed small comparison: a static split, and a planner that moves 4 GPUs to rollout at
/// step 1. One system name needs escaping.
std::vector<PlotRun> SmallComparison() {
  std::vector<PlotRun> runs(2);
  for (int r = 0; r < 2; ++r) {
    store::RunInfo& run = runs[r].view.run;
    run.id = r + 1;
    run.name = "small";
    run.system = r == 0 ? "split <8/8>" : "libra";
    run.backend = "sim";
    run.status = store::kRunOk;
  }
  runs[0].view.steps = {Step(0, 0, 10, 8, 8, 0.2), Step(1, 10, 20, 8, 8, 0.3),
                        Step(2, 20, 30, 8, 8, 0.35)};
  runs[1].view.steps = {Step(0, 0, 9, 8, 8, 0.2), Step(1, 9, 16, 4, 12, 0.3),
                        Step(2, 16, 23, 4, 12, 0.4)};
  store::DecisionRecord initial;
  initial.applied = true;
  initial.layout = "train 8 (tp1 pp1 dp8 mb1) | rollout tp4x2";
  store::DecisionRecord move = initial;
  move.at_s = 9;
  move.step = 1;
  move.layout = "train 4 (tp1 pp1 dp4 mb1) | rollout tp4x2+tp2x2";
  runs[1].decisions = {initial, move};
  for (PlotRun& run : runs) {
    for (int step = 0; step < 3; ++step) {
      for (int i = 0; i < 8; ++i) {
        store::TrajectoryRecord t;
        t.id = step * 8 + i;
        t.step = step;
        t.generated_tokens = 500 * (i + 1) * (step + 1);
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
  EXPECT_EQ(names, (std::vector<std::string>{"reward.svg", "throughput.svg", "breakdown.svg",
                                             "allocation-run1.svg", "lengths-run1.svg",
                                             "allocation-run2.svg", "lengths-run2.svg"}));
  // Simulated rewards are labelled as modelled; the escaped name is in the legend.
  EXPECT_NE(plots[0].svg.find("Reward over wall-clock (modelled)"), std::string::npos);
  EXPECT_NE(plots[0].svg.find("split &lt;8/8&gt; (run 1)"), std::string::npos);
  // The move shows as rollout by TP size after step 0.
  EXPECT_NE(plots[5].svg.find("rollout TP2"), std::string::npos);
}

}  // namespace
}  // namespace libra::report
