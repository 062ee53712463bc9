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
  // CSV has the machine keys as header, numbers at full precision (not as shown) and an empty
  // field for a missing value.
  EXPECT_EQ(SmallTable().Render(Format::kCsv),
            "system,throughput_traj_s,steps,note\n"
            "baseline,1.23456,10,a|b\n"
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
            "  {\"system\": \"baseline\", \"throughput_traj_s\": 1.23456, \"steps\": 10, "
            "\"note\": \"a|b\"},\n"
            "  {\"system\": \"libra\", \"throughput_traj_s\": null, \"steps\": 2, \"note\": \"\"}\n"
            "]\n");
}

TEST(TableTest, DataFormatsCarryFullPrecision) {
  // What the text rounds (0.04 s shown as 0.0) reaches scripts exactly; integers stay integers;
  // a percentage is shown as one and carried as the fraction.
  Table table({{"sync_s", "sync s", true}, {"n", "n", true}, {"share", "share", true}});
  table.AddRow({Cell::Number(0.04, 1), Cell::Integer(3), Cell::Percent(0.0431, 1)});
  EXPECT_EQ(table.Render(Format::kText), "sync s  n  share\n------  -  -----\n   0.0  3   4.3%\n");
  EXPECT_EQ(table.Render(Format::kCsv), "sync_s,n,share\n0.04,3,0.0431\n");
  EXPECT_EQ(table.Render(Format::kJson),
            "[\n  {\"sync_s\": 0.04, \"n\": 3, \"share\": 0.0431}\n]\n");
}

TEST(TableTest, ColumnsForReadingOrForData) {
  // "8/8" for the reader; two numbers for scripts.
  using Shown = Column::Shown;
  Table table({{"step", "step", true},
               {.key = "gpus", .header = "GPUs", .right_align = true, .shown = Shown::kReading},
               {.key = "train_gpus", .header = "t", .right_align = true, .shown = Shown::kData},
               {.key = "rollout_gpus", .header = "r", .right_align = true, .shown = Shown::kData}});
  table.AddRow({Cell::Integer(0), Cell::Text("8/8"), Cell::Integer(8), Cell::Integer(8)});
  EXPECT_EQ(table.Render(Format::kText), "step  GPUs\n----  ----\n   0   8/8\n");
  EXPECT_EQ(table.Render(Format::kMarkdown), "| step | GPUs |\n| ---: | ---: |\n| 0 | 8/8 |\n");
  EXPECT_EQ(table.Render(Format::kCsv), "step,train_gpus,rollout_gpus\n0,8,8\n");
}

TEST(TableTest, LongHeadersWrapOverNarrowValues) {
  // A header wider than its values (and than 8 characters) wraps at its spaces, bottom-aligned.
  Table table({{"predicted_step_s", "predicted step s", true}, {"x", "x", true}});
  table.AddRow({Cell::Number(5.7, 1), Cell::Integer(1)});
  EXPECT_EQ(table.Render(Format::kText),
            "predicted\n"
            "   step s  x\n"
            "---------  -\n"
            "      5.7  1\n");
}

TEST(TableTest, WrappedAndBelowColumns) {
  // A wrapped column breaks long values at spaces; a "below" column goes under its row.
  Table table({{"step", "step", true},
               {.key = "layout", .header = "layout", .wrap = 12},
               {.key = "reason", .header = "reason", .below = true}});
  table.AddRow({Cell::Integer(4), Cell::Text("train 8 | rollout tp4x2"), Cell::Text("why not")});
  EXPECT_EQ(table.Render(Format::kText),
            "step  layout\n"
            "----  ---------\n"
            "   4  train 8 |\n"
            "      rollout\n"
            "      tp4x2\n"
            "    why not\n");
  EXPECT_EQ(table.Render(Format::kMarkdown),
            "| step | layout | reason |\n| ---: | --- | --- |\n"
            "| 4 | train 8 \\| rollout tp4x2 | why not |\n");
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
