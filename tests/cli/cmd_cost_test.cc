// End to end: `libra cost`.
#include "cli/cli_fixture.h"

namespace libra::test {
namespace {

class CmdCostTest : public CliFixture {};

TEST_F(CmdCostTest, PaperRecipe) {
  // The cost table for Qwen3-14B on 48 A800s: rollout per TP, training layouts, transitions.
  WriteFile(dir_.File("paper.toml"), ReadFile(SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml")));
  const CommandResult r = Libra({"cost", "paper.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/cost_paper.txt", "libra cost recipes/paper/r2e-gym-qwen3-14b.toml", r.out);
}

TEST_F(CmdCostTest, OptionsAndOverrides) {
  // --contexts, --train-gpus and --set cost_model.* change the table; the reference model runs.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"cost", "--contexts", "1024", "--train-gpus", "4", "--set",
                                 "cost_model.decode_bw_util=0.5", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 seq  full/GPU\n"), std::string::npos) << r.out;  // "1 seq @1k", wrapped
  EXPECT_NE(r.out.find("@1k"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Training on 4 GPUs"), std::string::npos) << r.out;
  const CommandResult ref =
      Libra({"cost", "--set", "cost_model.name=libra-ref", "quickstart.toml"});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_NE(ref.out.find("libra-ref cost model"), std::string::npos) << ref.out;
}

TEST_F(CmdCostTest, Errors) {
  // An unknown GPU or cost-model parameter is a recipe error; too many training GPUs a usage one.
  CopyRecipe("quickstart.toml");
  const CommandResult gpu = Libra({"cost", "--set", "cluster.gpu=B200", "quickstart.toml"});
  EXPECT_EQ(gpu.exit_code, 2);
  EXPECT_EQ(gpu.err,
            "--set cluster.gpu=B200: cluster.gpu: unknown GPU 'B200' (known: A100-80G, A800-80G, "
            "H100-80G, H800, H200; or describe it in a custom table); did you mean 'H200'?\n"
            "libra: the recipe has 1 error\n");
  const CommandResult param =
      Libra({"cost", "--set", "cost_model.decode_bw=0.5", "quickstart.toml"});
  EXPECT_EQ(param.exit_code, 2);
  EXPECT_NE(param.err.find("cost_model.decode_bw: unknown option; did you mean 'decode_bw_util'?"),
            std::string::npos)
      << param.err;
  const CommandResult gpus = Libra({"cost", "--train-gpus", "99", "quickstart.toml"});
  EXPECT_EQ(gpus.exit_code, 2);
  EXPECT_EQ(gpus.err, "libra: error: --train-gpus 99 is more than the cluster's 16 GPUs\n");
}

}  // namespace
}  // namespace libra::test
