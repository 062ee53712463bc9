// Document: what one command prints, as named tables and notes, rendered whole in any Format.
// Every subcommand builds one, so that `--format json|csv` (and `--json`) carry every table the
// text shows, under stable names (docs/reports.md lists them with their fields):
//
//   text      the title, then each table under its heading, and the notes, in order
//   markdown  the same with "##" / "###" headings and GitHub tables
//   json      {"title": ..., <fields>, "tables": {"<name>": [rows...], ...}, "notes": [...]}
//   csv       one table: plain CSV; several: each after a "# <name>" line, a blank line between
//
// A table can be hidden from reading formats when it is empty, or be for data formats only; the
// data formats always carry every table, so that a script sees the same keys every time.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "report/table.h"

namespace libra::report {

class Document {
 public:
  explicit Document(std::string title = "") : title_(std::move(title)) {}

  /// Where a table shows: always; in text and Markdown only when it has rows; in CSV and JSON
  /// only (a detail the text summarises); in text and Markdown only (the text's grouping of rows
  /// that a data table also carries).
  enum class Shown { kAlways, kWhenNotEmpty, kDataOnly, kReadingOnly };

  /// A table under `name` (its JSON key and CSV section; unique) and `heading` (text; may be
  /// empty).
  void AddTable(std::string name, std::string heading, Table table, Shown shown = Shown::kAlways);
  /// A paragraph (one or more lines) after the blocks so far: text and Markdown show it, JSON
  /// lists it under "notes", CSV leaves it out.
  void AddNote(std::string text);
  /// A value only the JSON form carries, before "tables" (ids, paths, counts).
  void AddField(std::string key, JsonValue value);

  const std::string& title() const { return title_; }
  void set_title(std::string title) { title_ = std::move(title); }
  bool HasTable(const std::string& name) const;
  std::vector<std::string> TableNames() const;

  /// The whole document, ending in a newline.
  std::string Render(Format format) const;
  /// Only the table `name`, as Table::Render gives it (no heading); kInvalidArgument naming the
  /// tables there are when there is none of that name.
  Result<std::string> RenderTable(Format format, const std::string& name) const;

 private:
  struct Block {
    std::string name;  // empty for a note
    std::string heading;
    Table table{{}};
    Shown shown = Shown::kAlways;
    std::string note;
  };
  std::string RenderReading(bool markdown) const;
  std::string RenderJson() const;
  std::string RenderCsv() const;

  std::string title_;
  std::vector<Block> blocks_;
  std::vector<std::pair<std::string, JsonValue>> fields_;
};

}  // namespace libra::report
