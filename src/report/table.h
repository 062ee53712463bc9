// Table: one renderer for every tabular output of libra, in four formats: aligned text for the
// terminal, Markdown, CSV and JSON. A missing value is shown as missing ("-", an empty CSV field,
// JSON null), never as 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace libra::report {

enum class Format { kText, kMarkdown, kCsv, kJson };

/// "text", "md", "csv", "json" -> Format; nullopt for anything else.
std::optional<Format> ParseFormat(const std::string& name);

/// One cell: text, or missing. `number` marks text that is a JSON number.
struct Cell {
  std::string text;
  bool missing = false;
  bool number = false;

  static Cell Text(std::string s) { return Cell{std::move(s), false, false}; }
  static Cell Missing() { return Cell{"", true, false}; }
  /// `value` with `decimals` digits after the point; missing when nullopt, NaN or infinite.
  static Cell Number(std::optional<double> value, int decimals);
  static Cell Integer(std::optional<long long> value);
};

struct Column {
  /// Machine name for CSV / JSON ("throughput_traj_s").
  std::string key;
  /// Human header with the unit for text / Markdown ("traj/s").
  std::string header;
  bool right_align = false;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  /// REQUIRES: one cell per column.
  void AddRow(std::vector<Cell> cells);
  size_t rows() const { return rows_.size(); }

  /// The whole table, ending in a newline. JSON is an array of objects keyed by Column::key.
  std::string Render(Format format) const;

 private:
  std::string RenderText() const;
  std::string RenderMarkdown() const;
  std::string RenderCsv() const;
  std::string RenderJson() const;

  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

/// JSON string literal with escapes.
std::string JsonQuote(const std::string& text);

}  // namespace libra::report
