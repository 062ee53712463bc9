#include "calibrate/measurements.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/roofline_model.h"
#include "support/test_util.h"

namespace libra::calibrate {
namespace {

records::TurnRecord Turn(int64_t trajectory, int turn, int64_t instance, double start, double end,
                         int64_t generated, int64_t tool_output) {
  records::TurnRecord t;
  t.trajectory = trajectory;
  t.turn = turn;
  t.instance = instance;
  t.start_s = start;
  t.end_s = end;
  t.generated_tokens = generated;
  t.tool_output_tokens = tool_output;
  return t;
}

records::TrajectoryRecord Trajectory(int64_t id, int step, int64_t prompt_tokens,
                                     int64_t generated) {
  records::TrajectoryRecord t;
  t.id = id;
  t.step = step;
  t.prompt_tokens = prompt_tokens;
  t.generated_tokens = generated;
  return t;
}

/// A run of the quickstart recipe on a split layout: two steps, each ending with a train step
/// and a weight sync; three trajectories on one TP-1 instance.
RunRecords SplitRun() {
  RunRecords r;
  r.run.id = 3;
  r.run.system = "async-split";
  r.run.recipe_toml = test::ReadFile(test::SourcePath("recipes/quickstart.toml"));
  records::DecisionRecord d;
  d.step = 0;
  d.applied = true;
  d.layout = "train 8 (tp1 pp1 dp8 mb1) | rollout tp1x8";
  r.decisions = {d};
  records::StepRecord s0;
  s0.step = 0;
  s0.end_s = 10;
  s0.train_s = 3;
  s0.sync_s = 0.5;
  records::StepRecord s1 = s0;
  s1.step = 1;
  s1.start_s = 10;
  s1.end_s = 20;
  r.steps = {s0, s1};
  r.trajectories = {Trajectory(1, 0, 100, 180), Trajectory(2, 0, 100, 60),
                    Trajectory(3, 1, 100, 205)};
  r.turns = {
      Turn(1, 0, 0, 0, 2, 100, 50),       // prefills the prompt
      Turn(2, 0, 0, 1, 3, 60, 0),         // shares the instance with the first turn
      Turn(1, 1, 0, 3, 5, 80, 0),         // prefills the tool output after its context
      Turn(3, 0, 0, 11, 11.5, 5, 0),      // too short to measure decoding
      Turn(3, 1, 0, 19.6, 19.9, 200, 0),  // overlaps step 1's weight sync [19.5, 20]
  };
  return r;
}

TEST(MeasurementsTest, SplitRunGivesTrainSyncAndRolloutMeasurements) {
  // One train step per step with trajectories, one sync per step, one rollout measurement per
  // long-enough turn outside the pauses, each with its source and what was left out.
  auto set = MeasurementsFromRun(SplitRun());
  ASSERT_OK(set);
  EXPECT_EQ(set->source, "run 3 (async-split)");
  EXPECT_EQ(set->gpu, "A800-80G");
  EXPECT_EQ(set->arch.name, "Qwen3-1.7B");
  EXPECT_EQ(set->gpus_per_node, 8);

  std::vector<std::string> sources;
  for (const Measurement& m : set->measurements) sources.push_back(m.source);
  EXPECT_EQ(sources,
            (std::vector<std::string>{"run 3 step 0", "run 3 step 0 sync", "run 3 step 1",
                                      "run 3 step 1 sync", "run 3 trajectory 1 turn 0",
                                      "run 3 trajectory 2 turn 0", "run 3 trajectory 1 turn 1"}));
  EXPECT_EQ(
      set->notes,
      (std::vector<std::string>{"run 3: 1 turn left out: it overlaps a pause (weight sync)"}));

  // The train step of step 0 trains its two trajectories: prompt + generated + tool output.
  const auto& train = std::get<TrainStep>(set->measurements[0].what);
  EXPECT_EQ(train.layout, (model::TrainLayout{1, 1, 8, 1}));
  EXPECT_EQ(train.sequence_tokens, (std::vector<int64_t>{100 + 180 + 50, 100 + 60}));
  EXPECT_FALSE(train.colocated);
  EXPECT_DOUBLE_EQ(set->measurements[0].measured_s, 3);
  const auto& sync = std::get<WeightSync>(set->measurements[1].what);
  EXPECT_EQ(sync.request.path, model::SyncPath::kNccl);
  EXPECT_TRUE(sync.request.cross_node);
  EXPECT_EQ(sync.request.rollout_tp, 1);
  EXPECT_DOUBLE_EQ(set->measurements[1].measured_s, 0.5);

  // The first turn: decoded mostly alone (the second turn shared 30 of its 100 iterations), and
  // both prompts were prefilled while it ran.
  const auto& first = std::get<DecodeTurn>(set->measurements[4].what);
  EXPECT_EQ(first.tp, 1);
  EXPECT_EQ(first.tokens, 100);
  EXPECT_EQ(first.sequences, 1);
  EXPECT_EQ(first.prefills, (std::vector<PrefillChunk>{{100, 0}, {100, 0}}));
  EXPECT_DOUBLE_EQ(set->measurements[4].measured_s, 2);
  // The next turn on the same instance prefills only the tool output after its context.
  const auto& next = std::get<DecodeTurn>(set->measurements[6].what);
  EXPECT_EQ(next.prefills, (std::vector<PrefillChunk>{{50, 200}}));
  EXPECT_EQ(next.context_tokens, 250 + 80 / 2);
}

TEST(MeasurementsTest, TurnsAreThinnedEvenlyAndTheRolloutTermNeedsOneTpDegree) {
  // max_turns keeps every n-th turn and says so; instances of two TP degrees leave the rollout
  // term out.
  ExtractOptions options;
  options.max_turns = 2;
  auto thinned = MeasurementsFromRun(SplitRun(), options);
  ASSERT_OK(thinned);
  EXPECT_EQ(thinned->measurements.size(), 4u + 2u);
  EXPECT_EQ(thinned->notes.back(), "run 3: one turn in 2 used (3 turns)");

  RunRecords mixed = SplitRun();
  mixed.decisions[0].layout = "train 8 (tp1 pp1 dp8 mb1) | rollout tp1x4+tp2x2";
  auto set = MeasurementsFromRun(mixed);
  ASSERT_OK(set);
  EXPECT_EQ(set->measurements.size(), 4u);
  EXPECT_EQ(set->notes.back(),
            "run 3: instances of several TP degrees; the rollout term is left out (the records "
            "do not say which instance had which)");
}

TEST(MeasurementsTest, ColocatedRunsPauseRolloutForTrainingAndIncludeTheSwitches) {
  // A colocated layout: the train step includes the role switches, turns during training are
  // left out, and the sync stays on the node.
  RunRecords r = SplitRun();
  r.decisions[0].layout = "train 16 (tp1 pp1 dp16 mb1) | rollout tp1x16 (colocated)";
  r.turns.push_back(Turn(3, 2, 0, 7, 8, 100, 0));  // during step 0's train step [6.5, 9.5]
  auto set = MeasurementsFromRun(r);
  ASSERT_OK(set);
  const auto& train = std::get<TrainStep>(set->measurements[0].what);
  EXPECT_TRUE(train.colocated);
  EXPECT_FALSE(std::get<WeightSync>(set->measurements[1].what).request.cross_node);
  EXPECT_EQ(set->notes.front(),
            "run 3: 2 turns left out: they overlap a pause (weight sync or train step)");
}

TEST(MeasurementsTest, UnreadableRecordsAreErrorsOrNotes) {
  // A recipe that does not parse is an error; a layout that is not in the recorded form is a
  // note, and its steps are left out.
  RunRecords bad_recipe = SplitRun();
  bad_recipe.run.recipe_toml = "name = \"x\"\n";
  auto error = MeasurementsFromRun(bad_recipe);
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error.status().message().rfind("run 3: its recorded recipe does not parse: ", 0), 0u)
      << error.status().message();

  RunRecords bad_layout = SplitRun();
  bad_layout.decisions[0].layout = "train 8 | rollout tp1x8";
  auto set = MeasurementsFromRun(bad_layout);
  ASSERT_OK(set);
  EXPECT_TRUE(set->measurements.empty());
  EXPECT_EQ(set->notes.front(),
            "run 3: layout 'train 8 | rollout tp1x8' is not 'train N (tpT ppP dpD mbM) | rollout "
            "...'; step 0 left out");
}

TEST(MeasurementsTest, ParseRecordedLayout) {
  // The forms backend::Layout::ToString writes, and the ones it does not.
  struct Case {
    std::string text;
    bool ok = false;
    RecordedLayout expected{};
  };
  const std::vector<Case> cases = {
      {"train 8 (tp4 pp1 dp2 mb1) | rollout tp1x8+tp2x4 (colocated)",
       true,
       {{4, 1, 2, 1}, {{1, 8}, {2, 4}}, true}},
      {"train 8 (tp1 pp4 dp2 mb1) | rollout tp1x8", true, {{1, 4, 2, 1}, {{1, 8}}, false}},
      {"train 16 (tp8 pp1 dp2 mb2) | rollout none", true, {{8, 1, 2, 2}, {}, false}},
      {"train 8 | rollout tp1x8", false, {}},
      {"train 8 (tp1 pp1 dp8 mb1) | rollout tp1", false, {}},
      {"train 8 (tp1 pp1 dp8 mb1) | rollout tp0x8", false, {}},
      {"train 8 (tp1 pp1 dp8 mb1) | rollout tp1x8x", false, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto layout = ParseRecordedLayout(c.text);
    EXPECT_EQ(layout.ok(), c.ok) << layout.status().ToString();
    if (c.ok && layout.ok()) {
      EXPECT_EQ(*layout, c.expected);
    }
  }
}

TEST(MeasurementsTest, PredictUsesTheTermsOfTheCostModel) {
  // A train step is the model's train step (plus both switches when colocated); a sync is the
  // model's sync; a turn alone without prefills is its decode span.
  const model::RooflineCostModel cost(
      {*model::FindGpu("A800-80G"), *model::FindModel("Qwen3-1.7B"), 8}, model::RooflineParams());
  TrainStep step;
  step.layout = {1, 1, 8, 1};
  step.sequence_tokens = {4000, 8000};
  const double train =
      cost.TrainStep(step.layout, model::TrainPasses(), step.sequence_tokens).step_s;
  EXPECT_DOUBLE_EQ(Predict(cost, {step, 0, ""}), train);
  step.colocated = true;
  EXPECT_GT(Predict(cost, {step, 0, ""}), train);
  EXPECT_EQ(TermOf({step, 0, ""}), Term::kTrain);

  WeightSync sync;
  sync.request.train = {1, 1, 8, 1};
  EXPECT_DOUBLE_EQ(Predict(cost, {sync, 0, ""}), cost.WeightSyncTime(sync.request));
  EXPECT_EQ(TermOf({sync, 0, ""}), Term::kSync);

  DecodeTurn turn;
  turn.tokens = 101;
  turn.context_tokens = 1000 + 50;  // the mean context of 101 iterations from 1000
  EXPECT_DOUBLE_EQ(Predict(cost, {turn, 0, ""}), cost.DecodeSpanTime(1, 1, 1000, 101));
  EXPECT_EQ(TermOf({turn, 0, ""}), Term::kRollout);
  EXPECT_EQ(NameOf(Term::kRollout), "rollout");
}

}  // namespace
}  // namespace libra::calibrate
