#include "recipe/recipe_parser.h"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "common/files.h"
#include "common/strings.h"
#include "recipe/limits.h"
#include "recipe/presets.h"

namespace libra::recipe {
namespace {

std::string TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time:
      return "a date/time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string Position(const std::string& source, const toml::source_position& p) {
  return StrFormat("%s:%u:%u", source.c_str(), p.line, p.column);
}

/// The lexer behind CheckTomlShape: it tells keys from values and skips strings and comments,
/// and over-counts rather than under-counts (a quoted key with dots in it counts as one
/// segment, as it should).
class TomlShapeScanner {
 public:
  TomlShapeScanner(std::string_view text, const std::string& source, int max_nesting)
      : text_(text), source_(source), max_nesting_(max_nesting) {}

  Status Scan() {
    for (size_t i = 0; i < text_.size(); ++i) {
      const char c = text_[i];
      if (c == '\n') {
        NewLine(i + 1);
        if (open_.empty()) {
          mode_ = Mode::kKey;
          key_segments_ = 0;
        }
      } else if (c == '#') {
        while (i + 1 < text_.size() && text_[i + 1] != '\n') ++i;
      } else if (c == '"' || c == '\'') {
        i = SkipString(i);
        if (mode_ != Mode::kValue && key_segments_ == 0) key_segments_ = 1;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        continue;
      } else if (mode_ == Mode::kKey && open_.empty() && key_segments_ == 0 && c == '[') {
        mode_ = Mode::kHeader;
        if (i + 1 < text_.size() && text_[i + 1] == '[') ++i;
      } else if (mode_ == Mode::kKey || mode_ == Mode::kHeader) {
        LIBRA_RETURN_IF_ERROR(KeyChar(c, i));
      } else {
        LIBRA_RETURN_IF_ERROR(ValueChar(c, i));
      }
    }
    return Status();
  }

 private:
  enum class Mode { kKey, kHeader, kValue };
  struct Open {
    char bracket;
    int depth;
  };

  void NewLine(size_t start) {
    ++line_;
    line_start_ = start;
  }
  int Base() const { return open_.empty() ? header_depth_ : open_.back().depth; }
  Status TooDeep(size_t at) const {
    return Status::InvalidRecipe(
        StrFormat("%s:%u:%zu", source_.c_str(), line_, at - line_start_ + 1),
        StrFormat("nested deeper than libra's limit of %d levels (tables, arrays and dotted "
                  "keys together)",
                  kMaxNesting));
  }

  /// The index of the last character of the string that opens at `i` (basic or literal,
  /// single-line or multi-line).
  size_t SkipString(size_t i) {
    const char c = text_[i];
    const bool triple = text_.substr(i, 3) == std::string(3, c);
    const std::string_view end = triple ? text_.substr(i, 3) : text_.substr(i, 1);
    size_t j = i + end.size();
    for (; j < text_.size(); ++j) {
      if (c == '"' && text_[j] == '\\') {
        ++j;
      } else if (text_.substr(j, end.size()) == end) {
        break;
      } else if (text_[j] == '\n') {
        NewLine(j + 1);
      }
    }
    return std::min(text_.size(), j + end.size()) - 1;
  }

  /// A character of a key or a [table] header.
  Status KeyChar(char c, size_t& i) {
    if (c == '.') {
      ++key_segments_;
    } else if (mode_ == Mode::kHeader && c == ']') {
      header_depth_ = key_segments_;
      key_segments_ = 0;
      mode_ = Mode::kValue;  // the rest of the line is not a key
      if (i + 1 < text_.size() && text_[i + 1] == ']') ++i;
    } else if (mode_ == Mode::kKey && c == '=') {
      value_depth_ = Base() + key_segments_;
      key_segments_ = 0;
      mode_ = Mode::kValue;
    } else if (mode_ == Mode::kKey && c == '}' && !open_.empty()) {
      open_.pop_back();  // an empty inline table
      mode_ = Mode::kValue;
      value_depth_ = Base();
    } else if (key_segments_ == 0) {
      key_segments_ = 1;
    }
    const int depth = mode_ == Mode::kHeader ? key_segments_ : Base() + key_segments_;
    if (depth > max_nesting_) return TooDeep(i);
    return Status();
  }

  /// A character of a value: brackets and braces open and close, commas separate.
  Status ValueChar(char c, size_t i) {
    if (c == '[' || c == '{') {
      open_.push_back(Open{c, value_depth_ + 1});
      if (open_.back().depth > max_nesting_) return TooDeep(i);
      value_depth_ = open_.back().depth;
      if (c == '{') mode_ = Mode::kKey;
    } else if ((c == ']' || c == '}') && !open_.empty()) {
      open_.pop_back();
      value_depth_ = Base();
    } else if (c == ',' && !open_.empty()) {
      value_depth_ = Base();
      if (open_.back().bracket == '{') mode_ = Mode::kKey;
    }
    return Status();
  }

  std::string_view text_;
  const std::string& source_;
  int max_nesting_;
  std::vector<Open> open_;
  int header_depth_ = 0;  // segments of the last [table] header
  int key_segments_ = 0;  // segments of the key being read
  int value_depth_ = 0;   // depth of a value that starts here
  Mode mode_ = Mode::kKey;
  unsigned line_ = 1;
  size_t line_start_ = 0;
};

/// Checks, before toml++ sees it, that `text` is no larger than kMaxRecipeBytes and nests no
/// deeper than kMaxNesting (tables, arrays and dotted-key segments together): toml++ recurses
/// over the nesting, so a few kilobytes of dots or brackets would overflow the stack.
Status CheckTomlShape(std::string_view text, const std::string& source,
                      int max_nesting = kMaxNesting) {
  if (text.size() > kMaxRecipeBytes) {
    return Status::InvalidRecipe(
        source, StrFormat("the file is larger than libra's limit of %zu bytes", kMaxRecipeBytes));
  }
  return TomlShapeScanner(text, source, max_nesting).Scan();
}

/// "baselines[1].router" -> {"baselines", "1", "router"}.
std::vector<std::string> SplitKeyPath(const std::string& path) {
  std::string normal;
  for (char c : path) {
    if (c == '[') {
      normal += '.';
    } else if (c != ']') {
      normal += c;
    }
  }
  return StrSplit(normal, '.');
}

bool ParseIndex(const std::string& text, size_t* index) {
  if (text.empty() || text.size() > 9) return false;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *index = static_cast<size_t>(std::stoul(text));
  return true;
}

/// Reads an override value as TOML ("8", "0.5", "true", "[1, 2]", "'x'"); anything else is a
/// string, so that --set workload.generator=simple needs no quotes. kInvalidArgument when the
/// value nests deeper than `max_nesting`.
Result<toml::table> ParseOverrideValue(const std::string& spec, const std::string& value,
                                       int max_nesting) {
  const std::string text = "v = " + value;
  if (Status shape = CheckTomlShape(text, "--set " + spec, max_nesting + 1); !shape.ok()) {
    return Status::InvalidArgument(
        StrFormat("--set %s: the value nests deeper than libra's limit "
                  "of %d levels with its key",
                  spec.c_str(), kMaxNesting));
  }
  try {
    toml::table t = toml::parse(text);
    if (t.size() == 1 && t.contains("v")) return t;
  } catch (const toml::parse_error&) {
  }
  toml::table t;
  t.insert("v", value);
  return t;
}

/// Applies one "key.path=value" to `root`. Records the override's location by key path.
Status ApplyOverride(toml::table& root, const std::string& spec,
                     std::map<std::string, std::string>* override_where) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument("--set expects key.path=value, got '" + spec + "'");
  }
  if (spec.size() > kMaxOverrideBytes) {
    return Status::InvalidArgument(StrFormat("--set %s...: longer than libra's limit of %zu bytes",
                                             spec.substr(0, 40).c_str(), kMaxOverrideBytes));
  }
  const std::string key = spec.substr(0, eq);
  const std::vector<std::string> segments = SplitKeyPath(key);
  if (std::any_of(segments.begin(), segments.end(), [](const auto& s) { return s.empty(); })) {
    return Status::InvalidArgument("--set " + spec + ": malformed key path '" + key + "'");
  }
  if (segments.size() > static_cast<size_t>(kMaxNesting)) {
    return Status::InvalidArgument(
        StrFormat("--set %s: the key path has %zu parts, more than "
                  "libra's limit of %d",
                  key.c_str(), segments.size(), kMaxNesting));
  }
  const std::string where = "--set " + spec;
  const int max_value_nesting = kMaxNesting - static_cast<int>(segments.size());
  toml::node* current = &root;
  std::string path;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    const bool is_index = current->is_array();
    path += is_index ? "[" + segment + "]" : (path.empty() ? "" : ".") + segment;
    if (toml::table* table = current->as_table()) {
      if (last) {
        LIBRA_ASSIGN_OR_RETURN(toml::table parsed,
                               ParseOverrideValue(spec, spec.substr(eq + 1), max_value_nesting));
        parsed.get("v")->visit([&](auto& node) { table->insert_or_assign(segment, node); });
      } else if (table->get(segment) == nullptr) {
        table->insert(segment, toml::table{});
      }
      current = table->get(segment);
    } else if (toml::array* array = current->as_array()) {
      size_t index = 0;
      if (!ParseIndex(segment, &index) || index >= array->size()) {
        return Status::InvalidArgument(
            StrFormat("--set %s: '%s' is not an index of the array (it has %zu element%s)",
                      spec.c_str(), segment.c_str(), array->size(), array->size() == 1 ? "" : "s"));
      }
      if (last) {
        LIBRA_ASSIGN_OR_RETURN(toml::table parsed,
                               ParseOverrideValue(spec, spec.substr(eq + 1), max_value_nesting));
        parsed.get("v")->visit([&](auto& node) { array->replace(array->cbegin() + index, node); });
      }
      current = array->get(index);
    } else {
      return Status::InvalidArgument("--set " + spec + ": '" +
                                     path.substr(0, path.size() - segment.size() - 1) +
                                     "' is not a table");
    }
  }
  (*override_where)[path] = where;
  return Status();
}

/// Moves every key of `from` that `into` lacks into `into`; tables present in both merge key by
/// key, and any other value already in `into` wins. Moved nodes keep their source positions, so
/// messages name the file a value came from.
void MergeMissing(toml::table& into, toml::table&& from) {
  for (auto&& [key, node] : from) {
    toml::node* mine = into.get(key);
    if (mine == nullptr) {
      into.insert(key, std::move(node));
    } else if (mine->is_table() && node.is_table()) {
      MergeMissing(*mine->as_table(), std::move(*node.as_table()));
    }
  }
}

/// Applies the top-level `include = ["file.toml", ...]`: each file (relative to the recipe's
/// folder) is merged under the recipe, whose own keys win; a later include wins over an earlier
/// one. An included file cannot include others. The key itself is removed, so that the effective
/// recipe is self-contained. kInvalidRecipe naming the include entry and the file.
Status ApplyIncludes(toml::table& root, const std::string& source) {
  const toml::node* node = root.get("include");
  if (node == nullptr) return Status();
  const std::string where = Position(source, node->source().begin);
  const toml::array* list = node->as_array();
  if (list == nullptr) {
    return Status::InvalidRecipe(
        where, "include: expected an array of file names, got " + TypeName(*node));
  }
  if (list->size() > static_cast<size_t>(kMaxIncludes)) {
    return Status::InvalidRecipe(where, StrFormat("include: %zu files, more than libra's limit of "
                                                  "%d",
                                                  list->size(), kMaxIncludes));
  }
  const std::filesystem::path folder = std::filesystem::path(source).parent_path();
  std::vector<toml::table> included;
  for (size_t i = 0; i < list->size(); ++i) {
    const toml::node& entry = *list->get(i);
    const std::string entry_where =
        entry.source().begin.line > 0 ? Position(source, entry.source().begin) : where;
    const std::string key = StrFormat("include[%zu]", i);
    const std::optional<std::string> name = entry.value_exact<std::string>();
    if (!name || name->empty()) {
      return Status::InvalidRecipe(entry_where,
                                   key + ": expected a file name, got " + TypeName(entry));
    }
    const std::string path = (folder / *name).string();
    Result<std::string> text = ReadFileBounded(path, kMaxRecipeBytes, "included file");
    if (!text.ok()) {
      return Status::InvalidRecipe(entry_where, key + ": " + text.status().message());
    }
    LIBRA_RETURN_IF_ERROR(CheckTomlShape(*text, path));
    try {
      included.push_back(toml::parse(*text, path));
    } catch (const toml::parse_error& e) {
      return Status::InvalidRecipe(Position(path, e.source().begin),
                                   "not valid TOML: " + std::string(e.description()) +
                                       " (included by " + entry_where + " " + key + ")");
    }
    if (const toml::node* nested = included.back().get("include"); nested != nullptr) {
      return Status::InvalidRecipe(Position(path, nested->source().begin),
                                   "include: an included file cannot include others (included by " +
                                       entry_where + " " + key + ")");
    }
  }
  root.erase("include");
  for (auto it = included.rbegin(); it != included.rend(); ++it) MergeMissing(root, std::move(*it));
  return Status();
}

/// Converts the TOML document into a Recipe, collecting every problem as a Diagnostic.
class Converter {
 public:
  Converter(const std::string& source, const std::map<std::string, std::string>& override_where,
            Recipe* recipe, std::vector<Diagnostic>* diagnostics)
      : source_(source),
        override_where_(override_where),
        recipe_(recipe),
        diagnostics_(diagnostics) {}

  /// Location of a node: the override that set it (or a parent), else its source position,
  /// else `fallback`.
  std::string Where(const toml::node* node, const std::string& path,
                    const std::string& fallback) const {
    for (std::string p = path; !p.empty();) {
      auto it = override_where_.find(p);
      if (it != override_where_.end()) return it->second;
      const size_t cut = p.find_last_of(".[");
      p = cut == std::string::npos ? "" : p.substr(0, cut);
    }
    if (node != nullptr && node->source().begin.line > 0) {
      // A node from an included file carries that file's path.
      const auto& file = node->source().path;
      return Position(file != nullptr ? *file : source_, node->source().begin);
    }
    // A table an override made on its way to its key: blame the override, not the file.
    for (auto it = override_where_.lower_bound(path);
         !path.empty() && it != override_where_.end() && StartsWith(it->first, path); ++it) {
      const char next = it->first.size() > path.size() ? it->first[path.size()] : '\0';
      if (next == '.' || next == '[') return it->second;
    }
    return fallback;
  }

  void Error(const std::string& where, const std::string& path, const std::string& what) {
    diagnostics_->push_back(Diagnostic{where, path.empty() ? what : path + ": " + what});
  }

  Recipe* recipe() { return recipe_; }

  /// Walks one TOML table, reading known keys and reporting unknown ones at Finish().
  class Table {
   public:
    Table(Converter* c, const toml::table* table, std::string path, std::string where)
        : c_(c), table_(table), path_(std::move(path)), where_(std::move(where)) {
      if (!path_.empty()) c_->recipe_->locations[path_] = where_;
    }

    const std::string& where() const { return where_; }
    const std::string& path() const { return path_; }

    std::string KeyPath(const std::string& key) const {
      return path_.empty() ? key : path_ + "." + key;
    }

    /// The node for `key`, marking it known; null when absent (reports it when required).
    const toml::node* Node(const std::string& key, bool required) {
      known_.push_back(key);
      const toml::node* node = table_ == nullptr ? nullptr : table_->get(key);
      if (node == nullptr) {
        if (required) c_->Error(where_, KeyPath(key), "required field is missing");
        return nullptr;
      }
      c_->recipe_->locations[KeyPath(key)] = c_->Where(node, KeyPath(key), where_);
      return node;
    }

    void TypeError(const std::string& key, const toml::node& node, const char* expected) {
      c_->Error(c_->Where(&node, KeyPath(key), where_), KeyPath(key),
                std::string("expected ") + expected + ", got " + TypeName(node));
    }

    void Read(const std::string& key, std::string* out, bool required = false) {
      const toml::node* node = Node(key, required);
      if (node == nullptr) return;
      if (auto v = node->value_exact<std::string>()) {
        *out = *v;
      } else {
        TypeError(key, *node, "a string");
      }
    }

    void Read(const std::string& key, int64_t* out, bool required = false) {
      const toml::node* node = Node(key, required);
      if (node == nullptr) return;
      if (auto v = node->value_exact<int64_t>()) {
        *out = *v;
      } else {
        TypeError(key, *node, "an integer");
      }
    }

    void Read(const std::string& key, int* out, bool required = false) {
      int64_t wide = *out;
      const toml::node* node = Node(key, required);
      if (node == nullptr) return;
      if (auto v = node->value_exact<int64_t>()) {
        wide = *v;
      } else {
        TypeError(key, *node, "an integer");
        return;
      }
      if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
        c_->Error(c_->Where(node, KeyPath(key), where_), KeyPath(key),
                  StrFormat("%lld is out of range", static_cast<long long>(wide)));
        return;
      }
      *out = static_cast<int>(wide);
    }

    /// One of an enum's names (EnumNames), as a string.
    template <typename E>
    requires std::is_enum_v<E>
    void Read(const std::string& key, E* out) {
      const toml::node* node = Node(key, false);
      if (node == nullptr) return;
      const std::optional<std::string> name = node->value_exact<std::string>();
      if (!name) {
        TypeError(key, *node, "a string");
        return;
      }
      Result<E> value = EnumNames<E>::Parse(*name);
      if (!value.ok()) {
        c_->Error(c_->Where(node, KeyPath(key), where_), KeyPath(key), value.status().message());
        return;
      }
      *out = *value;
    }

    /// An optional key: set only when given (and well typed).
    template <typename T>
    void Read(const std::string& key, std::optional<T>* out) {
      if (table_ == nullptr || table_->get(key) == nullptr) {
        known_.push_back(key);
        return;
      }
      T value{};
      const size_t errors = c_->diagnostics_->size();
      Read(key, &value);
      if (c_->diagnostics_->size() == errors) *out = std::move(value);
    }

    void Read(const std::string& key, uint64_t* out) {
      int64_t wide = static_cast<int64_t>(*out);
      const toml::node* node = Node(key, false);
      if (node == nullptr) return;
      if (auto v = node->value_exact<int64_t>()) {
        wide = *v;
      } else {
        TypeError(key, *node, "an integer");
        return;
      }
      if (wide < 0) {
        c_->Error(c_->Where(node, KeyPath(key), where_), KeyPath(key),
                  StrFormat("must not be negative (got %lld)", static_cast<long long>(wide)));
        return;
      }
      *out = static_cast<uint64_t>(wide);
    }

    /// Floats; integers are accepted and converted.
    void Read(const std::string& key, double* out, bool required = false) {
      const toml::node* node = Node(key, required);
      if (node == nullptr) return;
      if (auto v = node->value_exact<double>()) {
        *out = *v;
      } else if (auto i = node->value_exact<int64_t>()) {
        *out = static_cast<double>(*i);
      } else {
        TypeError(key, *node, "a number");
      }
    }

    void Read(const std::string& key, bool* out) {
      const toml::node* node = Node(key, false);
      if (node == nullptr) return;
      if (auto v = node->value_exact<bool>()) {
        *out = *v;
      } else {
        TypeError(key, *node, "a boolean");
      }
    }

    void Read(const std::string& key, OptionTable* out) {
      const toml::node* node = Node(key, false);
      out->path = KeyPath(key);
      out->where = where_;
      if (node == nullptr) return;
      const toml::table* table = node->as_table();
      if (table == nullptr) {
        TypeError(key, *node, "a table");
        return;
      }
      out->where = c_->Where(node, out->path, where_);
      for (const auto& [k, v] : *table) {
        out->entries.push_back(
            OptionEntry{std::string(k.str()),
                        c_->ToOption(v, out->path + "." + std::string(k.str()), out->where)});
      }
    }

    /// Every key not read so far, as an option table (marks them known).
    void Rest(OptionTable* out) {
      out->path = path_;
      out->where = where_;
      if (table_ == nullptr) return;
      for (const auto& [k, v] : *table_) {
        const std::string key(k.str());
        if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
        known_.push_back(key);
        out->entries.push_back(OptionEntry{key, c_->ToOption(v, KeyPath(key), where_)});
      }
    }

    /// A sub-table: calls `fill(Table&)` when present (or when required, with an empty table so
    /// that its required fields are reported).
    template <typename Fill>
    void Sub(const std::string& key, bool required, Fill fill) {
      const toml::node* node = Node(key, false);
      if (node == nullptr) {
        if (required) {
          Table missing(c_, nullptr, KeyPath(key), where_);
          fill(missing);
        }
        return;
      }
      const toml::table* table = node->as_table();
      if (table == nullptr) {
        TypeError(key, *node, "a table");
        return;
      }
      Table sub(c_, table, KeyPath(key), c_->Where(node, KeyPath(key), where_));
      fill(sub);
      sub.Finish();
    }

    /// An array of tables ([[key]]): calls `fill(Table&, index)` for each.
    template <typename Fill>
    void Array(const std::string& key, Fill fill) {
      const toml::node* node = Node(key, false);
      if (node == nullptr) return;
      const toml::array* array = node->as_array();
      if (array == nullptr || !array->is_array_of_tables()) {
        const std::string expected = "an array of tables ([[" + KeyPath(key) + "]])";
        TypeError(key, *node, expected.c_str());
        return;
      }
      for (size_t i = 0; i < array->size(); ++i) {
        const std::string path = KeyPath(key) + StrFormat("[%zu]", i);
        const toml::node* element = array->get(i);
        Table sub(c_, element->as_table(), path, c_->Where(element, path, where_));
        fill(sub, i);
        sub.Finish();
      }
    }

    void Finish() {
      if (table_ == nullptr) return;
      for (const auto& [k, v] : *table_) {
        const std::string key(k.str());
        if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
        std::string what = "unknown key";
        const std::string hint = ClosestMatch(key, known_);
        if (!hint.empty()) what += "; did you mean '" + hint + "'?";
        c_->Error(c_->Where(&v, KeyPath(key), where_), KeyPath(key), what);
      }
    }

   private:
    Converter* c_;
    const toml::table* table_;
    std::string path_;
    std::string where_;
    std::vector<std::string> known_;
  };

  OptionValue ToOption(const toml::node& node, const std::string& path,
                       const std::string& fallback) {
    OptionValue out;
    out.where = Where(&node, path, fallback);
    if (auto v = node.value_exact<bool>()) {
      out.kind = OptionValue::Kind::kBool;
      out.bool_value = *v;
    } else if (auto integer = node.value_exact<int64_t>()) {
      out.kind = OptionValue::Kind::kInt;
      out.int_value = *integer;
    } else if (auto d = node.value_exact<double>()) {
      out.kind = OptionValue::Kind::kDouble;
      out.double_value = *d;
    } else if (auto s = node.value_exact<std::string>()) {
      out.kind = OptionValue::Kind::kString;
      out.string_value = *s;
    } else if (const toml::array* array = node.as_array()) {
      out.kind = OptionValue::Kind::kArray;
      for (size_t i = 0; i < array->size(); ++i) {
        out.array.push_back(ToOption(*array->get(i), path + StrFormat("[%zu]", i), out.where));
      }
    } else if (const toml::table* table = node.as_table()) {
      out.kind = OptionValue::Kind::kTable;
      for (const auto& [k, value] : *table) {
        const std::string key(k.str());
        out.table.push_back(OptionEntry{key, ToOption(value, path + "." + key, out.where)});
      }
    } else {
      Error(out.where, path, "dates and times are not valid option values");
    }
    return out;
  }

  void ReadSystem(Table& t, SystemSpec* system, bool name_required) {
    std::string preset;
    t.Read("preset", &preset);
    if (!preset.empty()) {
      const Preset* p = FindPreset(preset);
      if (p == nullptr) {
        std::vector<std::string> names;
        for (const Preset& known : Presets()) names.push_back(known.name);
        std::string what = "unknown preset '" + preset + "' (known: " + StrJoin(names, ", ") + ")";
        const std::string hint = ClosestMatch(preset, names);
        if (!hint.empty()) what += "; did you mean '" + hint + "'?";
        Error(t.where(), t.path() + ".preset", what);
      } else {
        *system = SystemFromPreset(*p, t.path(), t.where());
        name_required = false;
      }
    }
    system->where = t.where();
    system->path = t.path();
    t.Read("name", &system->name, name_required);
    t.Read("router", &system->router);
    ReadMerged(t, "router_options", &system->router_options);
    t.Read("planner", &system->planner);
    ReadMerged(t, "planner_options", &system->planner_options);
    t.Read("staleness", &system->staleness);
    t.Read("batching", &system->batching);
    t.Read("partial_rollout", &system->partial_rollout);
    t.Read("objective", &system->objective);
    t.Read("tune", &system->tune);
  }

  /// Reads an option table over `out`'s entries: a key given in the file replaces the preset's.
  static void ReadMerged(Table& t, const std::string& key, OptionTable* out) {
    OptionTable given;
    t.Read(key, &given);
    std::vector<OptionEntry> merged;
    for (const OptionEntry& e : out->entries) {
      bool replaced = false;
      for (const OptionEntry& g : given.entries) replaced = replaced || g.key == e.key;
      if (!replaced) merged.push_back(e);
    }
    for (OptionEntry& g : given.entries) merged.push_back(std::move(g));
    given.entries = std::move(merged);
    *out = std::move(given);
  }

  void Convert(const toml::table& root) {
    Recipe& r = *recipe_;
    Table top(this, &root, "", source_ + ":1:1");
    top.Read("name", &r.name, true);
    top.Read("seed", &r.seed);
    top.Read("steps", &r.steps);
    top.Read("backend", &r.backend);
    top.Sub("cluster", true, [&](Table& t) {
      t.Read("gpu", &r.cluster.gpu);
      t.Read("gpu_spec", &r.cluster.gpu_spec);
      t.Read("nodes", &r.cluster.nodes, true);
      t.Read("gpus_per_node", &r.cluster.gpus_per_node, true);
    });
    top.Sub("model", true, [&](Table& t) {
      t.Read("name", &r.model.name, true);
      t.Read("arch", &r.model.arch);
    });
    r.cost_model.options.path = "cost_model";
    r.cost_model.options.where = source_ + ":1:1";
    top.Sub("cost_model", false, [&](Table& t) {
      t.Read("name", &r.cost_model.name);
      t.Rest(&r.cost_model.options);
    });
    r.workload.options.path = "workload";
    r.workload.options.where = source_ + ":1:1";
    top.Sub("workload", false, [&](Table& t) {
      t.Read("kind", &r.workload.kind);
      t.Read("preset", &r.workload.preset);
      t.Read("trace", &r.workload.trace);
      t.Rest(&r.workload.options);
    });
    top.Sub("rl", true, [&](Table& t) {
      t.Read("prompts_per_step", &r.rl.prompts_per_step, true);
      t.Read("group_size", &r.rl.group_size, true);
      t.Read("staleness", &r.rl.staleness);
      t.Read("sync_interval", &r.rl.sync_interval);
      t.Read("batching", &r.rl.batching);
      t.Read("partial_rollout", &r.rl.partial_rollout);
      t.Read("objective", &r.rl.objective);
    });
    top.Sub("eval", false, [&](Table& t) {
      t.Read("interval", &r.eval.interval);
      t.Read("prompts", &r.eval.prompts);
      t.Read("target_fraction", &r.eval.target_fraction);
    });
    top.Sub("sim", false, [&](Table& t) {
      SimSpec& s = r.sim;
      t.Read("max_num_seqs", &s.max_num_seqs);
      t.Read("max_batched_tokens", &s.max_batched_tokens);
      t.Read("kv_policy", &s.kv_policy);
      t.Read("sync_path", &s.sync_path);
      t.Read("tool_concurrency", &s.tool_concurrency);
      t.Read("record_events", &s.record_events);
    });
    top.Sub("tuning", false, [&](Table& t) {
      t.Read("compare_tuned", &r.tuning.compare_tuned);
      t.Read("budget_runs", &r.tuning.budget_runs);
      t.Read("steps", &r.tuning.steps);
    });
    top.Read("launcher", &r.cluster_backend.launcher);
    top.Read("engine", &r.cluster_backend.engine);
    top.Read("trainer", &r.cluster_backend.trainer);
    top.Read("agent", &r.cluster_backend.agent);
    r.system.name = "system";
    r.system.path = "system";
    r.system.where = source_ + ":1:1";
    r.system.router_options.path = "system.router_options";
    r.system.planner_options.path = "system.planner_options";
    top.Sub("system", false, [&](Table& t) { ReadSystem(t, &r.system, false); });
    top.Array("baselines", [&](Table& t, size_t) {
      r.baselines.emplace_back();
      ReadSystem(t, &r.baselines.back(), true);
    });
    top.Finish();
  }

 private:
  const std::string& source_;
  const std::map<std::string, std::string>& override_where_;
  Recipe* recipe_;
  std::vector<Diagnostic>* diagnostics_;
};

}  // namespace

Result<ParsedRecipe> ParseRecipe(const std::string& text, const std::string& source,
                                 const std::vector<std::string>& overrides) {
  LIBRA_RETURN_IF_ERROR(CheckTomlShape(text, source));
  if (overrides.size() > static_cast<size_t>(kMaxOverrides)) {
    return Status::InvalidArgument(StrFormat("%zu --set overrides, more than libra's limit of %d",
                                             overrides.size(), kMaxOverrides));
  }
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidRecipe(Position(source, e.source().begin),
                                 "not valid TOML: " + std::string(e.description()));
  }
  LIBRA_RETURN_IF_ERROR(ApplyIncludes(root, source));
  std::map<std::string, std::string> override_where;
  for (const std::string& spec : overrides) {
    LIBRA_RETURN_IF_ERROR(ApplyOverride(root, spec, &override_where));
  }

  ParsedRecipe parsed;
  parsed.recipe.source = source;
  parsed.recipe.workload.base_dir = std::filesystem::path(source).parent_path().string();
  parsed.recipe.cluster_backend.base_dir = parsed.recipe.workload.base_dir;
  std::ostringstream effective;
  effective << root << "\n";
  parsed.recipe.effective_toml = effective.str();
  Converter converter(source, override_where, &parsed.recipe, &parsed.diagnostics);
  converter.Convert(root);
  ValidateRecipe(parsed.recipe, &parsed.diagnostics);
  return parsed;
}

Result<ParsedRecipe> ParseRecipeFile(const std::string& path,
                                     const std::vector<std::string>& overrides) {
  Result<std::string> text = ReadFileBounded(path, kMaxRecipeBytes, "recipe file");
  if (!text.ok() && text.status().code() == StatusCode::kInvalidArgument) {
    return Status::InvalidRecipe(path, text.status().message().substr(path.size() + 2));
  }
  LIBRA_RETURN_IF_ERROR(text.status());
  return ParseRecipe(*text, path, overrides);
}

}  // namespace libra::recipe
