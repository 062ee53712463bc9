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

}  // namespace
}  // namespace libra::test
