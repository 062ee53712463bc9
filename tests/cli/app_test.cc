// End to end: the command line itself: help texts and usage errors.
#include <filesystem>

#include "cli/cli_fixture.h"
#include "libra/config.h"

namespace libra::test {
namespace {

class AppTest : public CliFixture {};

TEST_F(AppTest, HelpOfEverySubcommand) {
  // `libra --help` and `libra <cmd> --help` exit 0 and show what a user learns from.
  for (const std::string cmd :
       {"", "run", "compare", "report", "export", "plan", "validate", "cost", "workload", "version",
        "probe", "calibrate", "help", "completion"}) {
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

TEST_F(AppTest, VersionHelpAndDidYouMean) {
  // --version, `help [COMMAND]` and a suggestion for a mistyped command, instead of "A
  // subcommand is required".
  const CommandResult version = Libra({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("libra " LIBRA_VERSION, 0), 0u) << version.out;
  const CommandResult help = Libra({"help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out, Libra({"--help"}).out);
  const CommandResult help_report = Libra({"help", "report"});
  EXPECT_EQ(help_report.exit_code, 0);
  EXPECT_EQ(help_report.out, Libra({"report", "--help"}).out);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"runn"}, {"help", "runn"}}) {
    const CommandResult typo = Libra(args);
    EXPECT_EQ(typo.exit_code, 2);
    EXPECT_NE(typo.err.find("libra: 'runn' is not a libra command; did you mean 'run'?"),
              std::string::npos)
        << typo.err;
  }
}

TEST_F(AppTest, HelpShowsNoInternals) {
  // No validator descriptions ("K:INT in [1 - 1000]", ":POSITIVE") and no "Excludes:" lists.
  for (const std::string cmd : {"run", "compare", "report", "export", "plan", "validate", "cost",
                                "workload", "probe", "calibrate", "completion"}) {
    SCOPED_TRACE(cmd);
    const CommandResult r = Libra({cmd, "--help"});
    for (const char* internal :
         {":INT", ":POSITIVE", ":NONNEGATIVE", " in [", "Excludes", ":FLOAT", ":{"}) {
      EXPECT_EQ(r.out.find(internal), std::string::npos) << internal << "\n" << r.out;
    }
  }
}

TEST_F(AppTest, ListValuesAreTrimmed) {
  // "libra, sync-split" is two systems; an item of spaces alone is an error.
  CopyRecipe("quickstart.toml");
  const CommandResult ok = Libra({"compare", "--steps", "1", "--systems", "libra, sync-split",
                                  "--format", "csv", "quickstart.toml"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find(",libra,"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find(",sync-split,"), std::string::npos) << ok.out;
  const CommandResult empty =
      Libra({"compare", "--systems", "libra, ,sync-split", "quickstart.toml"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("an empty item in the list"), std::string::npos) << empty.err;
}

TEST_F(AppTest, ConflictingFlagsAreUsageErrorsNamingBoth) {
  // Each pair used to be accepted in silence (exit 0, nothing written, or one flag ignored).
  struct Case {
    std::vector<std::string> args;
    std::string first;
    std::string second;
  };
  const std::vector<Case> cases = {
      {{"report", "--list", "--markdown", "x.md"}, "--list", "--markdown"},
      {{"report", "--list", "--timeline", "t.json"}, "--list", "--timeline"},
      {{"report", "--list", "--steps"}, "--list", "--steps"},
      {{"report", "--plots", "p", "--format", "json"}, "--plots", "--format"},
      {{"report", "--recipe", "--steps", "1"}, "--recipe", "--steps"},
      {{"report", "--json", "--format", "csv"}, "--json", "--format"},
      {{"run", "--resume", "1", "--seed", "2"}, "--resume", "--seed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.first + " " + c.second);
    const CommandResult r = Libra(c.args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(c.first), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.second), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.File("x.md")));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("t.json")));
}

TEST_F(AppTest, CompletionScripts) {
  // The scripts are generated from the command line; bash completes commands, options and
  // their values; zsh parses the script.
  const CommandResult bash = Libra({"completion", "bash"});
  ASSERT_EQ(bash.exit_code, 0) << bash.err;
  ExpectGolden("cli/completion.bash", "libra completion bash", bash.out);
  const CommandResult zsh = Libra({"completion", "zsh"});
  ASSERT_EQ(zsh.exit_code, 0) << zsh.err;
  ExpectGolden("cli/completion.zsh", "libra completion zsh", zsh.out);
  WriteFile(dir_.File("libra.bash"), bash.out);
  WriteFile(dir_.File("_libra"), zsh.out);
  auto complete = [&](const std::string& words, int cword) {
    const CommandResult r = RunProgram(
        {"bash", "-c",
         "source " + dir_.File("libra.bash") + "; COMP_WORDS=(" + words +
             "); COMP_CWORD=" + std::to_string(cword) + "; _libra; echo \"${COMPREPLY[*]}\""},
        dir_.path().string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(complete("libra rep", 1), "report\n");
  EXPECT_EQ(complete("libra co", 1), "compare cost completion\n");
  EXPECT_EQ(complete("libra report --for", 2), "--format\n");
  EXPECT_EQ(complete("libra report --format ''", 3), "text md csv json\n");
  EXPECT_EQ(complete("libra export --format t", 3), "tensorboard\n");
  EXPECT_EQ(complete("libra completion ''", 2), "bash zsh\n");
  // A flag takes no value: the recipe after it is completed.
  WriteFile(dir_.File("quick.toml"), "");
  EXPECT_EQ(complete("libra plan --check qu", 3), "quick.toml\n");
  EXPECT_EQ(complete("libra run -q qu", 3), "quick.toml\n");
  const CommandResult parsed = RunProgram({"zsh", "-n", dir_.File("_libra")});
  EXPECT_EQ(parsed.exit_code, 0) << parsed.err;
  const CommandResult bad = Libra({"completion", "fish"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "libra: error: completion: no script for shell 'fish' (bash or zsh)\n");
}

}  // namespace
}  // namespace libra::test
