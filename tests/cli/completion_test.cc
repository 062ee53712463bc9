#include <gtest/gtest.h>

#include "cli/commands.h"

namespace libra::cli {
namespace {

CompletionSpec Small() {
  CompletionSpec spec;
  CompletionSpec::Command report;
  report.name = "report";
  report.help = "Show [recorded] runs: it's here";
  CompletionSpec::Option format;
  format.names = {"--format"};
  format.help = "Output format";
  format.takes_value = true;
  format.values = {"text", "json"};
  CompletionSpec::Option quiet;
  quiet.names = {"-q", "--quiet"};
  quiet.help = "Quiet";
  report.options = {format, quiet};
  report.positional_files = "*.toml";
  spec.commands = {report};
  CompletionSpec::Option version;
  version.names = {"--version"};
  spec.global = {version};
  return spec;
}

TEST(CompletionTest, BashCasesPerCommand) {
  auto script = CompletionScript(Small(), "bash");
  ASSERT_TRUE(script.ok());
  EXPECT_NE(script->find("COMPREPLY=($(compgen -W 'report --version' -- \"$cur\"))"),
            std::string::npos)
      << *script;
  EXPECT_NE(script->find("--format) COMPREPLY=($(compgen -W 'text json' -- \"$cur\")); return ;;"),
            std::string::npos)
      << *script;
  EXPECT_NE(script->find("compgen -f -X '!*.toml'"), std::string::npos) << *script;
  EXPECT_NE(script->find("complete -F _libra libra"), std::string::npos);
}

TEST(CompletionTest, ZshEscapesDescriptions) {
  // Brackets and colons would break _arguments; a quote would end the string.
  auto script = CompletionScript(Small(), "zsh");
  ASSERT_TRUE(script.ok());
  EXPECT_NE(script->find("'report:Show recorded runs  it`s here'"), std::string::npos) << *script;
  EXPECT_NE(script->find("'--format[Output format]:format:(text json)'"), std::string::npos)
      << *script;
  EXPECT_NE(script->find("'(-q --quiet)'{-q,--quiet}'[Quiet]'"), std::string::npos) << *script;
}

TEST(CompletionTest, OtherShellsAreRefused) {
  EXPECT_FALSE(CompletionScript(Small(), "fish").ok());
}

}  // namespace
}  // namespace libra::cli
