// End to end: the command line itself: help texts and usage errors.
#include "cli/cli_fixture.h"

namespace libra::test {
namespace {

class AppTest : public CliFixture {};

TEST_F(AppTest, HelpOfEverySubcommand) {
  // `libra --help` and `libra <cmd> --help` exit 0 and show what a user learns from.
  for (const std::string cmd :
       {"", "run", "compare", "report", "plan", "validate", "version", "probe", "calibrate"}) {
    SCOPED_TRACE(cmd);
    std::vector<std::string> args;
    if (!cmd.empty()) args.push_back(cmd);
    args.push_back("--help");
    const CommandResult r = Libra(args);
    EXPECT_EQ(r.exit_code, 0);
    ExpectGolden("cli/help_" + (cmd.empty() ? std::string("libra") : cmd) + ".txt",
                 cmd.empty() ? "libra --help" : "libra " + cmd + " --help", r.out);
  }
}

TEST_F(AppTest, UsageErrorsExitTwo) {
  // No subcommand, an unknown one, a missing recipe argument, a bad --steps: exit 2.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"fly"}, {"run"}, {"run", "--steps", "many", "x.toml"}}) {
    const CommandResult r = Libra(args);
    EXPECT_EQ(r.exit_code, 2) << (args.empty() ? "" : args[0]);
    EXPECT_FALSE(r.err.empty());
  }
}

}  // namespace
}  // namespace libra::test
