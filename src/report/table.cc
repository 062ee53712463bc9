#include "report/table.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "common/json.h"
#include "common/strings.h"

namespace libra::report {

std::optional<Format> ParseFormat(const std::string& name) {
  if (name == "text") return Format::kText;
  if (name == "md" || name == "markdown") return Format::kMarkdown;
  if (name == "csv") return Format::kCsv;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

Cell Cell::Number(std::optional<double> value, int decimals) {
  if (!value || !std::isfinite(*value)) return Missing();
  Cell cell{StrFormat("%.*f", decimals, *value)};
  cell.number = true;
  cell.value = *value;
  return cell;
}

Cell Cell::Integer(std::optional<long long> value) {
  if (!value) return Missing();
  Cell cell{StrFormat("%lld", *value)};
  cell.number = true;
  cell.integer = true;
  cell.value = static_cast<double>(*value);
  return cell;
}

Cell Cell::Percent(std::optional<double> fraction, int decimals) {
  Cell cell = Number(fraction, decimals);
  if (!cell.missing) cell.text = StrFormat("%.*f%%", decimals, 100 * *fraction);
  return cell;
}

std::string Cell::DataText() const {
  if (missing) return "";
  if (!number || integer) return text;
  return ToJson(JsonValue(value));
}

void Table::AddRow(std::vector<Cell> cells) {
  LIBRA_CHECK(cells.size() == columns_.size())
      << cells.size() << " cells for " << columns_.size() << " columns";
  rows_.push_back(std::move(cells));
}

std::string Table::Render(Format format) const {
  switch (format) {
    case Format::kText:
      return RenderText();
    case Format::kMarkdown:
      return RenderMarkdown();
    case Format::kCsv:
      return RenderCsv();
    case Format::kJson:
      return RenderJson();
  }
  return "";
}

std::vector<std::string> WrapText(const std::string& text, int width) {
  if (width <= 0 || static_cast<int>(text.size()) <= width) return {text};
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& word : StrSplit(text, ' ')) {
    if (word.empty()) continue;
    if (!line.empty() && static_cast<int>(line.size() + 1 + word.size()) > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

namespace {

std::string Shown(const Cell& cell) { return cell.missing ? "-" : cell.text; }

std::string Pad(const std::string& text, size_t width, bool right) {
  const std::string space(width > text.size() ? width - text.size() : 0, ' ');
  return right ? space + text : text + space;
}

// Headers up to this wide are never wrapped.
constexpr size_t kMinWidth = 6;

bool ForReading(const Column& c) { return c.shown != Column::Shown::kData; }
bool ForData(const Column& c) { return c.shown != Column::Shown::kReading; }

size_t LongestWord(const std::string& text) {
  size_t longest = 0;
  for (const std::string& word : StrSplit(text, ' ')) longest = std::max(longest, word.size());
  return longest;
}

}  // namespace

std::string Table::RenderText() const {
  // The columns drawn side by side, and those drawn under each row.
  std::vector<size_t> inline_columns;
  std::vector<size_t> below_columns;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (!ForReading(columns_[i])) continue;
    (columns_[i].below ? below_columns : inline_columns).push_back(i);
  }
  // Each cell as its lines; a column is as wide as its widest line, and its header wraps to
  // that width (but never splits a word).
  std::vector<std::vector<std::vector<std::string>>> lines(rows_.size());
  std::vector<size_t> widths;
  for (size_t c : inline_columns) {
    size_t width = 0;
    for (size_t r = 0; r < rows_.size(); ++r) {
      lines[r].push_back(WrapText(Shown(rows_[r][c]), columns_[c].wrap));
      for (const std::string& line : lines[r].back()) width = std::max(width, line.size());
    }
    // A short header (up to kMinWidth) stays on one line.
    widths.push_back(std::max(
        {width, LongestWord(columns_[c].header), std::min(columns_[c].header.size(), kMinWidth)}));
  }
  std::vector<std::vector<std::string>> headers;
  size_t header_height = 1;
  for (size_t k = 0; k < inline_columns.size(); ++k) {
    // At most two header lines: widen the column rather than stack a third.
    const std::string& header = columns_[inline_columns[k]].header;
    while (WrapText(header, static_cast<int>(widths[k])).size() > 2 && widths[k] < header.size()) {
      ++widths[k];
    }
    headers.push_back(WrapText(header, static_cast<int>(widths[k])));
    header_height = std::max(header_height, headers.back().size());
    for (const std::string& line : headers.back()) widths[k] = std::max(widths[k], line.size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t k = 0; k < cells.size(); ++k) {
      if (k > 0) out += "  ";
      out += Pad(cells[k], widths[k], columns_[inline_columns[k]].right_align);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out;
  // Headers are bottom-aligned, right-aligned over right-aligned columns.
  for (size_t h = 0; h < header_height; ++h) {
    std::vector<std::string> cells;
    for (const std::vector<std::string>& header : headers) {
      const size_t pad = header_height - header.size();
      cells.push_back(h >= pad ? header[h - pad] : "");
    }
    out += line(cells);
  }
  std::vector<std::string> rules;
  size_t table_width = 0;
  for (size_t w : widths) {
    rules.push_back(std::string(w, '-'));
    table_width += w + (table_width > 0 ? 2 : 0);
  }
  out += line(rules);
  const int below_width = static_cast<int>(std::max<size_t>(table_width, 60)) - 4;
  for (size_t r = 0; r < rows_.size(); ++r) {
    size_t height = 1;
    for (const auto& cell : lines[r]) height = std::max(height, cell.size());
    for (size_t h = 0; h < height; ++h) {
      std::vector<std::string> cells;
      for (const auto& cell : lines[r]) cells.push_back(h < cell.size() ? cell[h] : "");
      out += line(cells);
    }
    for (size_t c : below_columns) {
      if (rows_[r][c].missing || rows_[r][c].text.empty()) continue;
      for (const std::string& text : WrapText(rows_[r][c].text, below_width)) {
        out += "    " + text + "\n";
      }
    }
  }
  return out;
}

std::string Table::RenderMarkdown() const {
  auto escape = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '|') out += '\\';
      out += c == '\n' ? ' ' : c;
    }
    return out;
  };
  std::string out = "|";
  std::string rule = "|";
  for (const Column& c : columns_) {
    if (!ForReading(c)) continue;
    out += " " + escape(c.header) + " |";
    rule += c.right_align ? " ---: |" : " --- |";
  }
  out += "\n" + rule + "\n";
  for (const auto& row : rows_) {
    out += "|";
    for (size_t i = 0; i < row.size(); ++i) {
      if (ForReading(columns_[i])) out += " " + escape(Shown(row[i])) + " |";
    }
    out += "\n";
  }
  return out;
}

std::string Table::RenderCsv() const {
  auto field = [](const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
      if (c == '"') out += '"';
      out += c;
    }
    return out + "\"";
  };
  std::vector<std::string> keys;
  for (const Column& c : columns_) {
    if (ForData(c)) keys.push_back(field(c.key));
  }
  std::string out = StrJoin(keys, ",") + "\n";
  for (const auto& row : rows_) {
    std::vector<std::string> cells;
    for (size_t i = 0; i < row.size(); ++i) {
      if (ForData(columns_[i])) cells.push_back(field(row[i].DataText()));
    }
    out += StrJoin(cells, ",") + "\n";
  }
  return out;
}

std::string Table::RenderJson() const {
  std::string out = "[";
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += r == 0 ? "\n  {" : ",\n  {";
    bool first = true;
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (!ForData(columns_[i])) continue;
      const Cell& c = rows_[r][i];
      if (!first) out += ", ";
      first = false;
      out += JsonQuote(columns_[i].key) + ": ";
      out += c.missing ? "null" : c.number ? c.DataText() : JsonQuote(c.text);
    }
    out += "}";
  }
  out += rows_.empty() ? "]\n" : "\n]\n";
  return out;
}

}  // namespace libra::report
