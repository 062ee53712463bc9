// End to end: `libra plan`.
#include "cli/cli_fixture.h"
#include "common/json.h"

namespace libra::test {
namespace {

class CmdPlanTest : public CliFixture {};

TEST_F(CmdPlanTest, PlansEverySystem) {
  // One row per system: its split, layout and reason.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"plan", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/plan_quickstart.txt", "libra plan quickstart.toml", r.out);
}

TEST_F(CmdPlanTest, OverridesChangeThePlan) {
  // --set reaches the planner's options; --systems filters.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"plan", "--systems", "async-split", "--set",
                                 "system.planner_options.rollout_tp=4", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| rollout tp4x2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("sync-colocated"), std::string::npos);
}

TEST_F(CmdPlanTest, SearchingPlannersShowTheirCandidatesAndSearch) {
  // grp prints its best candidates with predicted times and what it pruned; --explain adds a
  // line per training budget.
  WriteFile(dir_.File("paper.toml"), ReadFile(SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml")));
  const CommandResult r = Libra({"plan", "--systems", "libra", "paper.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/plan_paper_grp.txt",
               "libra plan --systems libra recipes/paper/r2e-gym-qwen3-14b.toml", r.out);
  const CommandResult e = Libra({"plan", "--explain", "--systems", "libra", "paper.toml"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  ExpectGolden("cli/plan_paper_grp_explain.txt",
               "libra plan --explain --systems libra recipes/paper/r2e-gym-qwen3-14b.toml", e.out);
}

TEST_F(CmdPlanTest, OrderedBatchesArePredictedByTheOrderedModel) {
  // libra forms stream batches by default, and its plan and candidates are predicted by the
  // stream replay (plan_paper_grp.txt); asked for ordered batches, the same search predicts them
  // as ordered: more training, less rollout (docs/planner.md, "Stream batches").
  WriteFile(dir_.File("paper.toml"), ReadFile(SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml")));
  const CommandResult r =
      Libra({"plan", "--systems", "libra", "--set", "system.batching=ordered", "paper.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/plan_paper_grp_ordered.txt",
               "libra plan --systems libra --set system.batching=ordered "
               "recipes/paper/r2e-gym-qwen3-14b.toml",
               r.out);
}

TEST_F(CmdPlanTest, CheckSimulatesThePlanAndComparesEveryPhase) {
  // --check: predicted against measured per phase for each predicting planner, a summary line,
  // exit 0 when every phase is within its limit; planners without a model say so.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"plan", "--check", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/plan_check_quickstart.txt", "libra plan --check quickstart.toml", r.out);
  // The same as data: every phase of every checked system, and the count outside the limits.
  const CommandResult json = Libra({"plan", "--check", "--json", "quickstart.toml"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto doc = ParseJson(json.out);
  ASSERT_TRUE(doc.ok()) << json.out;
  EXPECT_EQ(doc->Find("phases_outside_limits")->as_int(), 0);
  EXPECT_EQ(doc->Find("tables")->Find("check")->as_array().size() % 4, 0u);
  ASSERT_GT(doc->Find("tables")->Find("check")->as_array().size(), 0u);
  // Errors and limits as numbers (fractions), not as the text's percentages.
  const JsonValue& row = doc->Find("tables")->Find("check")->as_array().front();
  EXPECT_EQ(row.Find("error")->type(), JsonValue::Type::kDouble);
  EXPECT_EQ(row.Find("limit")->type(), JsonValue::Type::kDouble);
  EXPECT_DOUBLE_EQ(row.Find("limit")->as_double(), 0.15);
}

TEST_F(CmdPlanTest, SystemsThatSearchAlikeShareOneTable) {
  // Two systems of the ablation recipe plan the same: one candidates table names both (not two
  // identical tables); grp-least-conn (its router moves returning turns) and libra-homogeneous
  // (one TP size as well) search otherwise and have their own. --json lists each system's
  // candidates.
  WriteFile(dir_.File("paper.toml"), ReadFile(SourcePath("recipes/paper/r2e-gym-ablations.toml")));
  const CommandResult r = Libra({"plan", "paper.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t tables = 0;
  for (size_t at = r.out.find("best candidates"); at != std::string::npos;
       at = r.out.find("best candidates", at + 1)) {
    ++tables;
  }
  EXPECT_EQ(tables, 3u) << r.out;
  EXPECT_NE(r.out.find("grp-cmlfq, no-ehp-cmlfq (grp, no-ehp): best candidates"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("grp-least-conn (grp): best candidates"), std::string::npos) << r.out;
  const CommandResult json = Libra({"plan", "--json", "paper.toml"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto doc = ParseJson(json.out);
  ASSERT_TRUE(doc.ok()) << json.out;
  EXPECT_EQ(doc->Find("tables")->Find("plans")->as_array().size(), 8u);
  EXPECT_EQ(doc->Find("tables")->Find("candidates")->as_array().size(), 20u);
}

}  // namespace
}  // namespace libra::test
