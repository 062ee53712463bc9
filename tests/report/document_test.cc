#include "report/document.h"

#include <gtest/gtest.h>

#include "common/json.h"

namespace libra::report {
namespace {

Table Small(double value) {
  Table t({{"name", "name", false}, {"x_s", "x s", true}});
  t.AddRow({Cell::Text("a"), Cell::Number(value, 1)});
  return t;
}

Document Sample() {
  Document doc("the title");
  doc.AddField("db", "results/libra.db");
  doc.AddTable("first", "", Small(1.25));
  doc.AddNote("a note");
  doc.AddTable("second", "the second table", Small(2.0 / 3));
  doc.AddTable("empty", "empty one", Table({{"k", "k", false}}), Document::Shown::kWhenNotEmpty);
  doc.AddTable("detail", "for scripts", Small(3), Document::Shown::kDataOnly);
  doc.AddTable("grouped", "for reading", Small(4), Document::Shown::kReadingOnly);
  return doc;
}

TEST(DocumentTest, TextShowsTitleTablesAndNotesInOrder) {
  EXPECT_EQ(Sample().Render(Format::kText),
            "the title\n"
            "\n"
            "name  x s\n"
            "----  ---\n"
            "a     1.2\n"
            "\n"
            "a note\n"
            "\n"
            "the second table\n"
            "\n"
            "name  x s\n"
            "----  ---\n"
            "a     0.7\n"
            "\n"
            "for reading\n"
            "\n"
            "name  x s\n"
            "----  ---\n"
            "a     4.0\n");
}

TEST(DocumentTest, MarkdownUsesHeadings) {
  const std::string md = Sample().Render(Format::kMarkdown);
  EXPECT_EQ(md.rfind("## the title\n\n| name | x s |", 0), 0u) << md;
  EXPECT_NE(md.find("### the second table\n\n| name | x s |"), std::string::npos) << md;
  EXPECT_EQ(md.find("for scripts"), std::string::npos) << md;
}

TEST(DocumentTest, JsonCarriesEveryDataTableAtFullPrecision) {
  // Every table but the reading-only one, empty ones included; numbers as recorded.
  const std::string json = Sample().Render(Format::kJson);
  auto parsed = ParseJson(json);
  ASSERT_TRUE(parsed.ok()) << json;
  EXPECT_EQ(parsed->Find("title")->as_string(), "the title");
  EXPECT_EQ(parsed->Find("db")->as_string(), "results/libra.db");
  const JsonValue* tables = parsed->Find("tables");
  ASSERT_NE(tables, nullptr);
  EXPECT_EQ(tables->as_object().size(), 4u);
  EXPECT_EQ(tables->Find("second")->as_array()[0].Find("x_s")->as_double(), 2.0 / 3);
  EXPECT_EQ(tables->Find("empty")->as_array().size(), 0u);
  EXPECT_NE(tables->Find("detail"), nullptr);
  EXPECT_EQ(tables->Find("grouped"), nullptr);
  EXPECT_EQ(parsed->Find("notes")->as_array()[0].as_string(), "a note");
}

TEST(DocumentTest, CsvSectionsOrPlainCsv) {
  EXPECT_EQ(Sample().Render(Format::kCsv),
            "# first\nname,x_s\na,1.25\n\n"
            "# second\nname,x_s\na,0.6666666666666666\n\n"
            "# empty\nk\n\n"
            "# detail\nname,x_s\na,3.0\n");
  Document one;
  one.AddTable("only", "", Small(1.5));
  EXPECT_EQ(one.Render(Format::kCsv), "name,x_s\na,1.5\n");
}

TEST(DocumentTest, OneTableByName) {
  const Document doc = Sample();
  auto csv = doc.RenderTable(Format::kCsv, "second");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv, "name,x_s\na,0.6666666666666666\n");
  auto missing = doc.RenderTable(Format::kJson, "secnd");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "--table secnd: no such table here (tables: first, second, empty, detail); did you "
            "mean 'second'?");
}

}  // namespace
}  // namespace libra::report
