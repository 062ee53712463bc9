// OptionTable: a policy's own options table from a recipe (for example [system.router_options]),
// as plain values that remember where in the recipe they came from. Policies decode their options
// with OptionReader, so each policy owns its option schema while the recipe module stays the only
// place that knows TOML.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/enum_names.h"
#include "common/status.h"

namespace libra::recipe {

struct OptionEntry;

/// One option value: a scalar, an array, or a nested table.
struct OptionValue {
  enum class Kind { kBool, kInt, kDouble, kString, kArray, kTable };

  Kind kind = Kind::kBool;
  bool bool_value = false;
  int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
  std::vector<OptionValue> array;
  std::vector<OptionEntry> table;
  /// "file:line:col" of the value in the recipe, or "--set key=value" for an override.
  std::string where;

  /// "a boolean", "an integer", ... for messages.
  std::string KindName() const;
  bool operator==(const OptionValue&) const;
};

struct OptionEntry {
  std::string key;
  OptionValue value;
  bool operator==(const OptionEntry&) const = default;
};

/// A policy's options: ordered as written in the recipe.
struct OptionTable {
  std::vector<OptionEntry> entries;
  /// Location of the table itself ("file:line:col"), used for messages about missing keys.
  std::string where;
  /// Dotted key path of the table in the recipe, e.g. "system.router_options".
  std::string path;

  const OptionValue* Find(const std::string& key) const;
  bool operator==(const OptionTable&) const = default;
};

/// While alive, records the value every OptionReader of this thread settles on for each key it
/// reads, given in the recipe or defaulted, by the path of the table read: what a fully resolved
/// recipe writes out (recipe_writer.h). A default outside the key's own range or choices (a
/// sentinel such as 0 for "automatic") is not recorded, since writing it would not read back.
/// Logs nest: the innermost one records.
class OptionLog {
 public:
  OptionLog();
  ~OptionLog();
  OptionLog(const OptionLog&) = delete;
  OptionLog& operator=(const OptionLog&) = delete;

  /// The values read from the table at `path` ("system.planner_options"), in first-read order.
  std::vector<OptionEntry> Read(const std::string& path) const;

  /// The log in force in this thread, or nullptr.
  static OptionLog* Current();
  void Record(const std::string& path, const std::string& key, OptionValue value);

 private:
  std::vector<std::pair<std::string, std::vector<OptionEntry>>> tables_;
  OptionLog* outer_;
};

/// Decodes an OptionTable with defaults and range checks, collecting every problem; Finish()
/// also reports keys that nothing asked for (typos must fail loudly).
class OptionReader {
 public:
  explicit OptionReader(const OptionTable& table) : table_(table) {}

  int64_t Int(const std::string& key, int64_t default_value,
              int64_t min = std::numeric_limits<int64_t>::min(),
              int64_t max = std::numeric_limits<int64_t>::max());
  /// Accepts integers too.
  double Double(const std::string& key, double default_value,
                double min = -std::numeric_limits<double>::infinity(),
                double max = std::numeric_limits<double>::infinity());
  bool Bool(const std::string& key, bool default_value);
  /// `allowed` empty means any string.
  std::string String(const std::string& key, const std::string& default_value,
                     const std::vector<std::string>& allowed = {});
  /// One of an enum's names (EnumNames); the default when absent or wrong.
  template <typename E>
  E Enum(const std::string& key, E default_value) {
    const std::string name = String(key, NameOf(default_value), EnumNames<E>::All());
    return EnumNames<E>::Find(name).value_or(default_value);
  }
  /// An array of integers, each within [min, max].
  std::vector<int64_t> IntList(const std::string& key, const std::vector<int64_t>& default_value,
                               int64_t min = std::numeric_limits<int64_t>::min(),
                               int64_t max = std::numeric_limits<int64_t>::max());
  /// An array of numbers (integers accepted), each within [min, max].
  std::vector<double> DoubleList(const std::string& key, const std::vector<double>& default_value,
                                 double min = -std::numeric_limits<double>::infinity(),
                                 double max = std::numeric_limits<double>::infinity());
  /// Whether the key is present (marks it as known).
  bool Has(const std::string& key);

  /// Records a problem found by the caller's own checks, located at `key` (or the table).
  void Error(const std::string& key, const std::string& what);

  /// OK, or kInvalidRecipe with one line per problem.
  Status Finish();

 private:
  const OptionValue* Lookup(const std::string& key, const char* expected,
                            bool (*accepts)(const OptionValue&));
  std::string Where(const std::string& key) const;

  const OptionTable& table_;
  std::vector<std::string> known_;
  std::vector<std::string> errors_;
};

}  // namespace libra::recipe
