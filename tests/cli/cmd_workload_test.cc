// End to end: `libra workload`.
#include <algorithm>

#include "cli/cli_fixture.h"
#include "common/json.h"

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

TEST_F(CmdWorkloadTest, VersionsDifferOrShareARow) {
  // Not five identical rows: each version gets the skill the reward model gives it after its
  // on-policy steps (rising with the version; on quickstart it moves little, 0.250 to 0.252), and
  // versions with the same lengths share one row.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"workload", "--json", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const JsonValue::Array& lengths = doc->Find("tables")->Find("lengths")->as_array();
  ASSERT_EQ(lengths.size(), 1u);  // search-r1 does not drift
  EXPECT_EQ(lengths[0].Find("from_version")->as_int(), 0);
  EXPECT_EQ(lengths[0].Find("to_version")->as_int(), 10);
  const JsonValue::Array& tools = doc->Find("tables")->Find("tools")->as_array();
  ASSERT_EQ(tools.size(), 5u);
  for (size_t i = 1; i < tools.size(); ++i) {
    EXPECT_GT(tools[i].Find("skill")->as_double(), tools[i - 1].Find("skill")->as_double());
  }
  // A drifting workload has a row per version.
  const CommandResult drift = Libra({"workload", "--format", "csv", "--table", "lengths", "--set",
                                     "workload.drift=growth", "quickstart.toml"});
  ASSERT_EQ(drift.exit_code, 0) << drift.err;
  EXPECT_EQ(std::count(drift.out.begin(), drift.out.end(), '\n'), 6) << drift.out;
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
