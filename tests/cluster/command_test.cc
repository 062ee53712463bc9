#include "cluster/command.h"

#include <filesystem>
#include <string>
#include <vector>

#include "cluster/cluster_test_util.h"
#include "cluster/process.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using std::chrono::milliseconds;
using Args = std::vector<std::string>;

Args Expand(std::string_view text, const std::map<std::string, std::string>& values) {
  const auto parsed = CommandTemplate::Parse(text);
  EXPECT_OK(parsed);
  if (!parsed.ok()) return {};
  const auto argv = parsed->Expand(values);
  EXPECT_OK(argv);
  return argv.ok() ? *argv : Args{};
}

TEST(CommandTemplateTest, SubstitutesPlaceholdersInsideTheirWords) {
  // Placeholders are replaced in place, several per word, and a value is never split.
  EXPECT_EQ(Expand("vllm serve {model} --tensor-parallel-size {tp} --port={port}",
                   {{"model", "Qwen/Qwen3-8B"}, {"tp", "2"}, {"port", "8000"}}),
            (Args{"vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2", "--port=8000"}));
  EXPECT_EQ(Expand("--addr {host}:{port}", {{"host", "10.0.0.1"}, {"port", "1"}}),
            (Args{"--addr", "10.0.0.1:1"}));
  EXPECT_EQ(Expand("echo {v}", {{"v", "a  b\tc"}}), (Args{"echo", "a  b\tc"}));
  EXPECT_EQ(Expand("echo {v}", {{"v", ""}}), (Args{"echo", ""}));
}

TEST(CommandTemplateTest, QuotesAndEscapesGroupWords) {
  // Quotes and backslashes group words as in a shell, with no expansion at all.
  EXPECT_EQ(Expand(R"(run 'a b' "c {x} \"d\"" e\ f '' "$HOME" *)", {{"x", "X"}}),
            (Args{"run", "a b", "c X \"d\"", "e f", "", "$HOME", "*"}));
  EXPECT_EQ(Expand("  spaced\n\tout  ", {}), (Args{"spaced", "out"}));
}

TEST(CommandTemplateTest, DoubledBracesAreLiteral) {
  // {{ and }} write braces, so JSON arguments fit in a template.
  EXPECT_EQ(Expand(R"(serve --override '{{"tp": {tp}}}')", {{"tp", "4"}}),
            (Args{"serve", "--override", R"({"tp": 4})"}));
}

TEST(CommandTemplateTest, ListsItsPlaceholders) {
  // Placeholders() names each placeholder once, sorted.
  const auto parsed = CommandTemplate::Parse("x {port} {model} --p={port} '{gpus}'");
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->Placeholders(), (Args{"gpus", "model", "port"}));
  EXPECT_EQ(parsed->text(), "x {port} {model} --p={port} '{gpus}'");
}

TEST(CommandTemplateTest, SyntaxErrorsNameTheTemplateAndColumn) {
  // Each malformed template is refused with a message naming it and saying what is wrong.
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"run {model", "'{' at column 5 is never closed"},
      {"run model}", "'}' at column 10 has no '{'"},
      {"run {}", "bad placeholder {} at column 5"},
      {R"(run {"tp": 1})", "bad placeholder {\"tp\": 1} at column 5"},
      {"run 'model", "the quote at column 5 is never closed"},
      {"run \"model", "the quote at column 5 is never closed"},
      {"run \\", "a backslash ends the template"},
      {"   ", "empty command"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const auto parsed = CommandTemplate::Parse(c.text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("command template \"" + c.text + "\""),
              std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << parsed.status().message();
  }
}

TEST(CommandTemplateTest, UnknownPlaceholderSuggestsTheClosestName) {
  // A placeholder without a value names the template, suggests a fix and lists the known ones.
  const auto parsed = CommandTemplate::Parse("serve {modle}");
  ASSERT_OK(parsed);
  const auto argv = parsed->Expand({{"model", "m"}, {"port", "1"}});
  ASSERT_FALSE(argv.ok());
  EXPECT_EQ(argv.status().message(),
            "command template \"serve {modle}\": unknown placeholder {modle} (did you mean "
            "{model}?); known: {model}, {port}");
}

TEST(CommandShellQuoteTest, QuotesOnlyWhatAShellWouldInterpret) {
  // Plain words stay readable; anything else is single-quoted, with ' written '\''.
  struct Case {
    std::string word;
    std::string quoted;
  };
  const std::vector<Case> cases = {
      {"plain-word_1.0", "plain-word_1.0"},
      {"/path/to:x@y%z+,", "/path/to:x@y%z+,"},
      {"", "''"},
      {"a b", "'a b'"},
      {"it's", "'it'\\''s'"},
      {"$(x)", "'$(x)'"},
      {"A=b", "'A=b'"},
      {"~", "'~'"},
  };
  for (const Case& c : cases) EXPECT_EQ(ShellQuote(c.word), c.quoted) << c.word;
  EXPECT_EQ(ShellJoin({"printf", "%s", "a b"}), "printf %s 'a b'");
}

// Values that would do something if a shell ever interpreted them.
std::vector<std::string> HostileValues(const std::string& marker) {
  return {
      "$(touch " + marker + ")",
      "`touch " + marker + "`",
      "; touch " + marker,
      "&& touch " + marker + " #",
      "| touch " + marker,
      "'; touch " + marker + "; '",
      "\"; touch " + marker + "; \"",
      "$'\\n'touch " + marker,
      "line1\ntouch " + marker + "\n",
      "* ? [a-z] ~ $HOME ${PATH}",
      "  leading and trailing  ",
      "back\\slash\\",
      "tab\there",
      "{model}",
      "ünïcødé ✓",
      "",
  };
}

TEST(CommandTemplateTest, HostileValuesArriveByteExactAndRunNothing) {
  // Through posix_spawn directly and through `sh -c ShellJoin(argv)` (what ssh's remote shell
  // does), every hostile value arrives as one literal argument and nothing runs.
  test::ScopedTempDir dir;
  const std::string marker = dir.File("pwned");
  const auto parsed = CommandTemplate::Parse("printf %s {value}");
  ASSERT_OK(parsed);
  int n = 0;
  for (const std::string& value : HostileValues(marker)) {
    SCOPED_TRACE(value);
    const auto argv = parsed->Expand({{"value", value}});
    ASSERT_OK(argv);
    ASSERT_EQ(argv->size(), 3u);

    ProcessSpec direct;
    direct.name = "direct-" + std::to_string(n);
    direct.argv = *argv;
    direct.log_dir = dir.path();
    ProcessSpec shell = test::Shell("shell-" + std::to_string(n), ShellJoin(*argv), dir.path());
    ++n;
    for (const ProcessSpec& spec : {direct, shell}) {
      const auto status = RunToCompletion(spec, test::Deadline(milliseconds(60000)));
      ASSERT_OK(status);
      EXPECT_TRUE(status->success()) << status->ToString();
      EXPECT_EQ(test::ReadIfExists(dir.File(spec.name + ".out")), value) << spec.name;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

}  // namespace
}  // namespace libra::cluster
