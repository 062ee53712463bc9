// End to end: `libra validate` and `libra version`.
#include "cli/cli_fixture.h"
#include "common/strings.h"

namespace libra::test {
namespace {

class CmdValidateTest : public CliFixture {};

TEST_F(CmdValidateTest, ValidRecipe) {
  // A valid recipe: one line saying so, exit 0.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"validate", "quickstart.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "quickstart.toml: ok (quickstart, 10 steps, 16 GPUs, systems: async-split, "
            "sync-colocated, sync-split, libra)\n");
}

TEST_F(CmdValidateTest, EveryErrorAtOnce) {
  // Structural and policy errors of one file come out together, in file order.
  WriteFile(dir_.File("bad.toml"), R"(name = "bad"
seed = -1

[cluster]
nodes = "two"
gpus_per_node = 8

[model]

[rl]
prompts_per_step = 4
group_size = 0
sync_interval = 2

[system]
router = "least-con"
[system.planner_options]
rollout_tp = 3
train_gpu = 4
)");
  const CommandResult r = Libra({"validate", "bad.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  ExpectGolden("cli/validate_errors.txt", "libra validate on a recipe with eight errors", r.err);
}

TEST_F(CmdValidateTest, Version) {
  // Version, build features and the registries' names; the revision varies, so it is masked.
  const CommandResult r = Libra({"version"});
  ASSERT_EQ(r.exit_code, 0);
  std::string out = r.out;
  const size_t open = out.find('(');
  const size_t close = out.find(')');
  ASSERT_TRUE(open != std::string::npos && close > open);
  out.replace(open + 1, close - open - 1, "REVISION");
  ExpectGolden("cli/version.txt", "libra version (revision masked)", out);
}

}  // namespace
}  // namespace libra::test
