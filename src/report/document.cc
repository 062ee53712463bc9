#include "report/document.h"

#include <algorithm>

#include "common/check.h"
#include "common/strings.h"

namespace libra::report {

void Document::AddTable(std::string name, std::string heading, Table table, Shown shown) {
  LIBRA_CHECK(!name.empty() && !HasTable(name)) << "table name '" << name << "' empty or taken";
  Block block;
  block.name = std::move(name);
  block.heading = std::move(heading);
  block.table = std::move(table);
  block.shown = shown;
  blocks_.push_back(std::move(block));
}

void Document::AddNote(std::string text) {
  Block block;
  block.note = std::move(text);
  blocks_.push_back(std::move(block));
}

void Document::AddField(std::string key, JsonValue value) {
  fields_.emplace_back(std::move(key), std::move(value));
}

bool Document::HasTable(const std::string& name) const {
  return std::any_of(blocks_.begin(), blocks_.end(),
                     [&](const Block& b) { return !b.name.empty() && b.name == name; });
}

std::vector<std::string> Document::TableNames() const {
  std::vector<std::string> names;
  for (const Block& b : blocks_) {
    if (!b.name.empty() && b.shown != Shown::kReadingOnly) names.push_back(b.name);
  }
  return names;
}

std::string Document::Render(Format format) const {
  switch (format) {
    case Format::kText:
      return RenderReading(false);
    case Format::kMarkdown:
      return RenderReading(true);
    case Format::kCsv:
      return RenderCsv();
    case Format::kJson:
      return RenderJson();
  }
  return "";
}

Result<std::string> Document::RenderTable(Format format, const std::string& name) const {
  for (const Block& b : blocks_) {
    if (!b.name.empty() && b.name == name && b.shown != Shown::kReadingOnly) {
      return b.table.Render(format);
    }
  }
  std::vector<std::string> names = TableNames();
  std::string what = "--table " + name + ": no such table here (tables: " +
                     (names.empty() ? std::string("none") : StrJoin(names, ", ")) + ")";
  const std::string hint = ClosestMatch(name, names);
  if (!hint.empty()) what += "; did you mean '" + hint + "'?";
  return Status::InvalidArgument(what);
}

std::string Document::RenderReading(bool markdown) const {
  std::vector<std::string> parts;
  if (!title_.empty()) parts.push_back((markdown ? "## " : "") + title_ + "\n");
  for (const Block& b : blocks_) {
    if (b.name.empty()) {
      parts.push_back(b.note + "\n");
      continue;
    }
    if (b.shown == Shown::kDataOnly || (b.table.rows() == 0 && b.shown == Shown::kWhenNotEmpty)) {
      continue;
    }
    std::string part;
    if (!b.heading.empty()) part = (markdown ? "### " : "") + b.heading + "\n\n";
    parts.push_back(part + b.table.Render(markdown ? Format::kMarkdown : Format::kText));
  }
  return StrJoin(parts, "\n");
}

std::string Document::RenderJson() const {
  std::string out = "{";
  bool first = true;
  auto member = [&](const std::string& key, const std::string& json) {
    out += (first ? "\n  " : ",\n  ") + JsonQuote(key) + ": " + json;
    first = false;
  };
  if (!title_.empty()) member("title", JsonQuote(title_));
  for (const auto& [key, value] : fields_) member(key, ToJson(value));
  std::string tables = "{";
  bool first_table = true;
  std::vector<std::string> notes;
  for (const Block& b : blocks_) {
    if (b.name.empty()) {
      notes.push_back(JsonQuote(b.note));
      continue;
    }
    if (b.shown == Shown::kReadingOnly) continue;
    // The table's own JSON, one row per line, indented under its key.
    std::string rows = b.table.Render(Format::kJson);
    rows.pop_back();  // the final newline
    std::string indented;
    for (char c : rows) indented += c == '\n' ? std::string("\n    ") : std::string(1, c);
    tables += (first_table ? "\n    " : ",\n    ") + JsonQuote(b.name) + ": " + indented;
    first_table = false;
  }
  tables += first_table ? "}" : "\n  }";
  member("tables", tables);
  if (!notes.empty()) member("notes", "[" + StrJoin(notes, ", ") + "]");
  return out + "\n}\n";
}

std::string Document::RenderCsv() const {
  std::vector<const Block*> tables;
  for (const Block& b : blocks_) {
    if (!b.name.empty() && b.shown != Shown::kReadingOnly) tables.push_back(&b);
  }
  if (tables.size() == 1) return tables.front()->table.Render(Format::kCsv);
  std::vector<std::string> parts;
  for (const Block* b : tables)
    parts.push_back("# " + b->name + "\n" + b->table.Render(Format::kCsv));
  return StrJoin(parts, "\n");
}

}  // namespace libra::report
