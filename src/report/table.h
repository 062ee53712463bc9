// Table: one renderer for every tabular output of libra, in four formats: aligned text for the
// terminal, Markdown, CSV and JSON. A missing value is shown as missing ("-", an empty CSV field,
// JSON null), never as 0. Text and Markdown show numbers rounded for reading; CSV and JSON carry
// them at full precision (the shortest form that parses back to the same double), so that a
// script reads what was recorded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace libra::report {

enum class Format { kText, kMarkdown, kCsv, kJson };

/// "text", "md", "csv", "json" -> Format; nullopt for anything else.
std::optional<Format> ParseFormat(const std::string& name);

/// Whether a format is for scripts (CSV, JSON) rather than for reading.
inline bool IsDataFormat(Format format) {
  return format == Format::kCsv || format == Format::kJson;
}

/// One cell: text, a number, or missing.
struct Cell {
  /// As shown in text and Markdown.
  std::string text;
  bool missing = false;
  /// A number: JSON writes it unquoted.
  bool number = false;
  /// A number's value, at full precision (CSV and JSON); integers are exact in `text`.
  double value = 0;
  bool integer = false;

  static Cell Text(std::string s) { return Cell{std::move(s)}; }
  static Cell Missing() { return Cell{"", true}; }
  /// `value` shown with `decimals` digits after the point; missing when nullopt, NaN or infinite.
  static Cell Number(std::optional<double> value, int decimals);
  static Cell Integer(std::optional<long long> value);
  /// A fraction shown as a percentage ("4.3%" for 0.0431 with 1 decimal); CSV and JSON carry the
  /// fraction itself.
  static Cell Percent(std::optional<double> fraction, int decimals);
  /// As shown in CSV: the number at full precision, the text, or "" when missing.
  std::string DataText() const;
};

struct Column {
  /// Machine name for CSV / JSON ("throughput_traj_s"); documented in docs/reports.md.
  std::string key;
  /// Human header with the unit for text / Markdown ("traj/s"). In text, a header wider than its
  /// column's values wraps at its spaces.
  std::string header;
  bool right_align = false;
  /// Where the column appears.
  enum class Shown { kEverywhere, kReading, kData };
  /// kReading: text and Markdown only (e.g. "8/8" for two numbers that the data formats carry as
  /// two columns); kData: CSV and JSON only.
  Shown shown = Shown::kEverywhere;
  /// Text: values wider than this wrap at their spaces onto more lines (0: never).
  int wrap = 0;
  /// Text: the value goes on its own indented line(s) under the row instead of into a column
  /// (long prose such as a reason); Markdown keeps it as a column.
  bool below = false;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  /// REQUIRES: one cell per column.
  void AddRow(std::vector<Cell> cells);
  size_t rows() const { return rows_.size(); }
  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::vector<Cell>>& cells() const { return rows_; }

  /// The whole table, ending in a newline. JSON is an array of objects keyed by Column::key, one
  /// row per line.
  std::string Render(Format format) const;

 private:
  std::string RenderText() const;
  std::string RenderMarkdown() const;
  std::string RenderCsv() const;
  std::string RenderJson() const;

  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

/// `text` split into lines of at most `width` characters at its spaces (a word longer than
/// `width` gets a line of its own); one line when width <= 0. Never empty.
std::vector<std::string> WrapText(const std::string& text, int width);

}  // namespace libra::report
