#include "report/table.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
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
  return Cell{StrFormat("%.*f", decimals, *value), false, true};
}

Cell Cell::Integer(std::optional<long long> value) {
  if (!value) return Missing();
  return Cell{StrFormat("%lld", *value), false, true};
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

namespace {

std::string Shown(const Cell& cell) { return cell.missing ? "-" : cell.text; }

std::string Pad(const std::string& text, size_t width, bool right) {
  const std::string space(width > text.size() ? width - text.size() : 0, ' ');
  return right ? space + text : text + space;
}

}  // namespace

std::string Table::RenderText() const {
  std::vector<size_t> widths;
  for (const Column& c : columns_) widths.push_back(c.header.size());
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Shown(row[i]).size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += "  ";
      out += Pad(cells[i], widths[i], columns_[i].right_align);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> headers;
  std::vector<std::string> rules;
  for (size_t i = 0; i < columns_.size(); ++i) {
    headers.push_back(columns_[i].header);
    rules.push_back(std::string(widths[i], '-'));
  }
  std::string out = line(headers) + line(rules);
  for (const auto& row : rows_) {
    std::vector<std::string> cells;
    for (const Cell& c : row) cells.push_back(Shown(c));
    out += line(cells);
  }
  return out;
}

std::string Table::RenderMarkdown() const {
  auto escape = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '|') out += '\\';
      out += c;
    }
    return out;
  };
  std::string out = "|";
  std::string rule = "|";
  for (const Column& c : columns_) {
    out += " " + escape(c.header) + " |";
    rule += c.right_align ? " ---: |" : " --- |";
  }
  out += "\n" + rule + "\n";
  for (const auto& row : rows_) {
    out += "|";
    for (const Cell& c : row) out += " " + escape(Shown(c)) + " |";
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
  for (const Column& c : columns_) keys.push_back(field(c.key));
  std::string out = StrJoin(keys, ",") + "\n";
  for (const auto& row : rows_) {
    std::vector<std::string> cells;
    for (const Cell& c : row) cells.push_back(c.missing ? "" : field(c.text));
    out += StrJoin(cells, ",") + "\n";
  }
  return out;
}

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += StrFormat("\\u%04x", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Table::RenderJson() const {
  std::string out = "[";
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += r == 0 ? "\n  {" : ",\n  {";
    for (size_t i = 0; i < columns_.size(); ++i) {
      const Cell& c = rows_[r][i];
      if (i > 0) out += ", ";
      out += JsonQuote(columns_[i].key) + ": ";
      out += c.missing ? "null" : c.number ? c.text : JsonQuote(c.text);
    }
    out += "}";
  }
  out += rows_.empty() ? "]\n" : "\n]\n";
  return out;
}

}  // namespace libra::report
