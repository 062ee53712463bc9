// End to end: `libra validate` and `libra version`.
#include "cli/cli_fixture.h"
#include "common/json.h"
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

TEST_F(CmdValidateTest, ADirectoryIsNotARecipe) {
  // Not six "required field is missing" errors: the path is a directory.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"validate", "."});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "libra: error: . is a directory, not a recipe file (recipes in it: quickstart.toml)\n");
}

TEST_F(CmdValidateTest, JsonForScripts) {
  // --json: whether the recipe is valid, its systems, or each problem; the same exit codes.
  CopyRecipe("quickstart.toml");
  const CommandResult ok = Libra({"validate", "--json", "quickstart.toml"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  auto doc = ParseJson(ok.out);
  ASSERT_TRUE(doc.ok()) << ok.out;
  EXPECT_TRUE(doc->Find("ok")->as_bool());
  EXPECT_EQ(doc->Find("tables")->Find("systems")->as_array().size(), 4u);
  WriteFile(dir_.File("bad.toml"), "name = \"b\"\nstesp = 3\n");
  const CommandResult bad = Libra({"validate", "--json", "bad.toml"});
  EXPECT_EQ(bad.exit_code, 2);
  auto errors = ParseJson(bad.out);
  ASSERT_TRUE(errors.ok()) << bad.out;
  EXPECT_FALSE(errors->Find("ok")->as_bool());
  const JsonValue::Array& rows = errors->Find("tables")->Find("errors")->as_array();
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().Find("error")->as_string(),
            "bad.toml:2:9: stesp: unknown key; did you mean 'steps'?");
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
