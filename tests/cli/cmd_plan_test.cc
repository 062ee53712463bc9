// End to end: `libra plan`.
#include "cli/cli_fixture.h"

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
               "libra plan --explain --systems libra recipes/paper/r2e-gym-qwen3-14b.toml",
               e.out);
}

TEST_F(CmdPlanTest, CheckSimulatesThePlanAndComparesEveryPhase) {
  // --check: predicted against measured per phase for each predicting planner, a summary line,
  // exit 0 when every phase is within its limit; planners without a model say so.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"plan", "--check", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/plan_check_quickstart.txt", "libra plan --check quickstart.toml", r.out);
}

}  // namespace
}  // namespace libra::test
