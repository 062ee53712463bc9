// End to end: `libra workload`.
#include "cli/cli_fixture.h"

namespace libra::test {
namespace {

class CmdWorkloadTest : public CliFixture {};

TEST_F(CmdWorkloadTest, QuickstartDistribution) {
  // The quickstart workload's lengths, tools and outcomes for versions 0..steps by quarters.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"workload", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/workload_quickstart.txt", "libra workload quickstart.toml", r.out);
}

TEST_F(CmdWorkloadTest, EveryPresetSummarises) {
  // Each preset of the agentic model can be checked the same way.
  CopyRecipe("quickstart.toml");
  for (const char* preset : {"r2e-gym", "search-r1", "dapo-math", "swe-long"}) {
    SCOPED_TRACE(preset);
    const CommandResult r = Libra({"workload", "--versions", "0", "--prompts", "8", "--set",
                                   std::string("workload.preset=") + preset, "quickstart.toml"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(preset, 0), 0u) << r.out;
  }
}

TEST_F(CmdWorkloadTest, BadOverrideIsARecipeError) {
  // An unknown model parameter fails like any recipe error.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"workload", "--set", "workload.max_turnz=3", "quickstart.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("workload.max_turnz: unknown option; did you mean 'max_turns'?"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace libra::test
