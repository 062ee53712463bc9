#include "report/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::report {
namespace {

// A small table with a missing value, a left-aligned text column, a right-aligned number column
// and a cell that needs Markdown escaping.
Table SmallTable() {
  Table table({
      {"system", "system", false},
      {"throughput_traj_s", "traj/s", true},
      {"steps", "steps", true},
      {"note", "note", false},
  });
  table.AddRow(
      {Cell::Text("baseline"), Cell::Number(1.23456, 3), Cell::Integer(10), Cell::Text("a|b")});
  table.AddRow({Cell::Text("libra"), Cell::Missing(), Cell::Integer(2), Cell::Text("")});
  return table;
}

TEST(TableTest, ParseFormat) {
  // Format names of the --format flag, and nothing else.
  struct Case {
    std::string name;
    std::optional<Format> format;
  };
  const std::vector<Case> cases = {
      {"text", Format::kText}, {"md", Format::kMarkdown}, {"markdown", Format::kMarkdown},
      {"csv", Format::kCsv},   {"json", Format::kJson},   {"TEXT", std::nullopt},
      {"", std::nullopt},      {"yaml", std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ParseFormat(c.name), c.format);
  }
}

TEST(TableTest, CellConstructors) {
  // Numbers are fixed-point with the given decimals; nullopt gives a missing cell, never 0.
  EXPECT_EQ(Cell::Number(2.0 / 3, 2).text, "0.67");
  EXPECT_TRUE(Cell::Number(2.0 / 3, 2).number);
  EXPECT_EQ(Cell::Number(-1.5, 0).text, "-2");
  EXPECT_EQ(Cell::Number(3.0, 1).text, "3.0");
  EXPECT_TRUE(Cell::Number(std::nullopt, 2).missing);
  EXPECT_TRUE(Cell::Number(std::nan(""), 2).missing);
  EXPECT_TRUE(Cell::Number(1.0 / 0.0, 2).missing);
  EXPECT_EQ(Cell::Integer(-42).text, "-42");
  EXPECT_TRUE(Cell::Integer(7).number);
  EXPECT_TRUE(Cell::Integer(std::nullopt).missing);
  EXPECT_FALSE(Cell::Text("7").number);
  EXPECT_TRUE(Cell::Missing().missing);
}

TEST(TableTest, TextRendering) {
  // Aligned columns with a rule under the headers, numbers right-aligned, "-" for the missing
  // value and no trailing spaces.
  const Table table = SmallTable();
  EXPECT_EQ(table.rows(), 2u);
  test::ExpectGolden("report/table_text.txt",
                     "A two-row table with a missing value, rendered as aligned text",
                     table.Render(Format::kText));
}

TEST(TableTest, MarkdownRendering) {
  // A GitHub table with alignment markers, "-" for the missing value and '|' escaped.
  test::ExpectGolden("report/table_markdown.txt",
                     "A two-row table with a missing value, rendered as Markdown",
                     SmallTable().Render(Format::kMarkdown));
}

TEST(TableTest, CsvUsesKeysAndEmptyFieldsForMissing) {
  // CSV has the machine keys as header and an empty field for a missing value.
  EXPECT_EQ(SmallTable().Render(Format::kCsv),
            "system,throughput_traj_s,steps,note\n"
            "baseline,1.235,10,a|b\n"
            "libra,,2,\n");
}

TEST(TableTest, CsvQuotesFieldsThatNeedIt) {
  // Fields with a comma, a double quote or a newline are quoted, quotes doubled; others are not.
  Table table({{"name", "name", false}, {"a,b", "a,b", false}});
  table.AddRow({Cell::Text("plain"), Cell::Text("x,y")});
  table.AddRow({Cell::Text("say \"hi\""), Cell::Text("two\nlines")});
  EXPECT_EQ(table.Render(Format::kCsv),
            "name,\"a,b\"\n"
            "plain,\"x,y\"\n"
            "\"say \"\"hi\"\"\",\"two\nlines\"\n");
}

TEST(TableTest, JsonUsesNullForMissingAndRawNumbers) {
  // JSON is an array of objects keyed by column key: numbers unquoted, text quoted, missing null.
  EXPECT_EQ(SmallTable().Render(Format::kJson),
            "[\n"
            "  {\"system\": \"baseline\", \"throughput_traj_s\": 1.235, \"steps\": 10, "
            "\"note\": \"a|b\"},\n"
            "  {\"system\": \"libra\", \"throughput_traj_s\": null, \"steps\": 2, \"note\": \"\"}\n"
            "]\n");
}

TEST(TableTest, JsonQuoteEscapes) {
  // Quotes, backslashes and control characters are escaped; other bytes (UTF-8) pass through.
  struct Case {
    std::string name;
    std::string text;
    std::string quoted;
  };
  const std::vector<Case> cases = {
      {"plain", "abc", "\"abc\""},
      {"empty", "", "\"\""},
      {"quote", "a\"b", "\"a\\\"b\""},
      {"backslash", "a\\b", "\"a\\\\b\""},
      {"newline and tab", "a\nb\tc", "\"a\\nb\\tc\""},
      {"other control", std::string("a\x01") + "\r", "\"a\\u0001\\u000d\""},
      {"utf-8", "\xc3\xa9t\xc3\xa9", "\"\xc3\xa9t\xc3\xa9\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(JsonQuote(c.text), c.quoted);
  }
}

TEST(TableTest, JsonEscapesKeysAndText) {
  // Text cells and keys go through the same escaping.
  Table table({{"k\"ey", "key", false}});
  table.AddRow({Cell::Text("line\nbreak")});
  EXPECT_EQ(table.Render(Format::kJson), "[\n  {\"k\\\"ey\": \"line\\nbreak\"}\n]\n");
}

TEST(TableTest, EmptyTableRendersHeadersOnly) {
  // A table without rows still shows its headers; JSON is an empty array.
  const Table table({{"run", "run", true}, {"name", "name", false}});
  EXPECT_EQ(table.Render(Format::kText), "run  name\n---  ----\n");
  EXPECT_EQ(table.Render(Format::kMarkdown), "| run | name |\n| ---: | --- |\n");
  EXPECT_EQ(table.Render(Format::kCsv), "run,name\n");
  EXPECT_EQ(table.Render(Format::kJson), "[]\n");
}

TEST(TableDeathTest, RowWithWrongCellCountAborts) {
  // A row must have one cell per column; anything else is a bug.
  Table table({{"a", "a", false}, {"b", "b", false}});
  EXPECT_DEATH(table.AddRow({Cell::Text("x")}), "1 cells for 2 columns");
}

}  // namespace
}  // namespace libra::report
