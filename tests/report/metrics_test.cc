#include "report/metrics.h"

#include <gtest/gtest.h>

#include <set>

namespace libra::report {
namespace {

size_t Index(const std::string& name) {
  const std::vector<MetricDef>& metrics = ExportedMetrics();
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (metrics[i].name == name) return i;
  }
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

TEST(MetricsTest, NamesAreUniqueAndDocumented) {
  std::set<std::string> names;
  for (const MetricDef& m : ExportedMetrics()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.meaning.empty()) << m.name;
  }
}

TEST(MetricsTest, VerlNamesCountTokensAsVerlDoes) {
  // Two steps of two trajectories on 4 GPUs. verl's perf/throughput counts prompt and response
  // tokens (a multi-turn response holds its tool outputs) over every GPU; libra's generated
  // tokens per second per GPU counts generated tokens only.
  RunView view;
  view.run.gpus = 4;
  records::StepRecord s0;
  s0.step = 0;
  s0.end_s = 10;
  s0.rollout_s = 8;
  s0.train_s = 2;
  s0.wait_s = 5;
  s0.trajectories = 2;
  s0.prompt_tokens = 100;
  s0.generated_tokens = 300;
  s0.reward_mean = 0.5;
  records::StepRecord s1 = s0;
  s1.step = 1;
  s1.start_s = 10;
  s1.end_s = 15;
  s1.wait_s = 0;
  view.steps = {s0, s1};
  std::vector<records::TrajectoryRecord> trajectories(4);
  for (int i = 0; i < 4; ++i) {
    trajectories[i].id = i;
    trajectories[i].step = i / 2;
    trajectories[i].version = i == 3 ? 0 : i / 2;  // trajectory 3 trained one version late
  }
  std::vector<records::TurnRecord> turns(2);
  turns[0].trajectory = 0;
  turns[0].tool_output_tokens = 40;
  turns[1].trajectory = 3;
  turns[1].tool_output_tokens = 60;
  const std::vector<StepMetrics> m = MetricsPerStep(view, trajectories, turns);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].values[Index("training/global_step")], 1);
  EXPECT_EQ(m[0].values[Index("timing_s/step")], 10);
  EXPECT_EQ(m[1].values[Index("timing_s/step")], 5);
  EXPECT_EQ(m[0].values[Index("timing_s/gen")], 8);
  EXPECT_EQ(m[0].values[Index("timing_s/update_actor")], 2);
  EXPECT_EQ(m[0].values[Index("perf/total_num_tokens")], 100 + 300 + 40);
  EXPECT_EQ(m[1].values[Index("perf/total_num_tokens")], 100 + 300 + 60);
  EXPECT_EQ(m[0].values[Index("perf/throughput")], 440.0 / 10 / 4);
  EXPECT_EQ(m[0].values[Index("libra/generated_tokens_per_s_per_gpu")], 300.0 / 10 / 4);
  EXPECT_EQ(m[0].values[Index("response_length/mean")], (300.0 + 40) / 2);
  EXPECT_EQ(m[0].values[Index("prompt_length/mean")], 50);
  EXPECT_EQ(m[0].values[Index("trainer/idle_ratio")], 0.5);
  EXPECT_EQ(m[0].values[Index("critic/score/mean")], 0.5);
  EXPECT_EQ(m[0].values[Index("fully_async/count/stale_trajectory_processed")], 0);
  EXPECT_EQ(m[1].values[Index("fully_async/count/stale_trajectory_processed")], 1);
  EXPECT_FALSE(m[0].values[Index("libra/gpu_util")]);  // not recorded: missing, not 0
}

TEST(MetricsTest, WholeSequencesNeedTheTurns) {
  // Without turn records (an old database), the tokens of whole sequences are unknown.
  RunView view;
  view.run.gpus = 4;
  records::StepRecord s;
  s.end_s = 10;
  s.trajectories = 1;
  s.generated_tokens = 10;
  view.steps = {s};
  records::TrajectoryRecord t;
  const std::vector<StepMetrics> m = MetricsPerStep(view, {t}, {});
  EXPECT_FALSE(m[0].values[Index("perf/total_num_tokens")]);
  EXPECT_FALSE(m[0].values[Index("perf/throughput")]);
  EXPECT_TRUE(m[0].values[Index("libra/generated_tokens_per_s_per_gpu")]);
}

TEST(MetricsTest, EpochSeconds) {
  EXPECT_EQ(EpochSeconds("1970-01-01T00:00:00Z"), 0.0);
  EXPECT_EQ(EpochSeconds("2026-12-02T15:04:05Z"), 1796223845.0);
  EXPECT_FALSE(EpochSeconds("yesterday"));
  EXPECT_FALSE(EpochSeconds("2026-12-02T15:04:05Z trailing"));
}

}  // namespace
}  // namespace libra::report
