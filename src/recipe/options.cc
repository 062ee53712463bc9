#include "recipe/options.h"

#include <algorithm>

#include "common/strings.h"

namespace libra::recipe {

std::string OptionValue::KindName() const {
  switch (kind) {
    case Kind::kBool:
      return "a boolean";
    case Kind::kInt:
      return "an integer";
    case Kind::kDouble:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kArray:
      return "an array";
    case Kind::kTable:
      return "a table";
  }
  return "a value";
}

bool OptionValue::operator==(const OptionValue& other) const {
  return kind == other.kind && bool_value == other.bool_value && int_value == other.int_value &&
         double_value == other.double_value && string_value == other.string_value &&
         array == other.array && table == other.table;
}

const OptionValue* OptionTable::Find(const std::string& key) const {
  for (const OptionEntry& e : entries) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

std::string OptionReader::Where(const std::string& key) const {
  const OptionValue* v = table_.Find(key);
  const std::string& where = v != nullptr && !v->where.empty() ? v->where : table_.where;
  const std::string path = table_.path.empty() ? key : table_.path + "." + key;
  return where.empty() ? path : where + ": " + path;
}

void OptionReader::Error(const std::string& key, const std::string& what) {
  errors_.push_back(Where(key) + ": " + what);
}

const OptionValue* OptionReader::Lookup(const std::string& key, const char* expected,
                                        bool (*accepts)(const OptionValue&)) {
  known_.push_back(key);
  const OptionValue* v = table_.Find(key);
  if (v == nullptr) return nullptr;
  if (!accepts(*v)) {
    Error(key, std::string("expected ") + expected + ", got " + v->KindName());
    return nullptr;
  }
  return v;
}

int64_t OptionReader::Int(const std::string& key, int64_t default_value, int64_t min, int64_t max) {
  const OptionValue* v = Lookup(
      key, "an integer", [](const OptionValue& x) { return x.kind == OptionValue::Kind::kInt; });
  if (v == nullptr) return default_value;
  if (v->int_value < min || v->int_value > max) {
    Error(key, StrFormat("must be in [%lld, %lld] (got %lld)", static_cast<long long>(min),
                         static_cast<long long>(max), static_cast<long long>(v->int_value)));
    return default_value;
  }
  return v->int_value;
}

double OptionReader::Double(const std::string& key, double default_value, double min, double max) {
  const OptionValue* v = Lookup(key, "a number", [](const OptionValue& x) {
    return x.kind == OptionValue::Kind::kDouble || x.kind == OptionValue::Kind::kInt;
  });
  if (v == nullptr) return default_value;
  const double d =
      v->kind == OptionValue::Kind::kInt ? static_cast<double>(v->int_value) : v->double_value;
  if (!(d >= min && d <= max)) {
    Error(key, StrFormat("must be in [%g, %g] (got %g)", min, max, d));
    return default_value;
  }
  return d;
}

bool OptionReader::Bool(const std::string& key, bool default_value) {
  const OptionValue* v = Lookup(
      key, "a boolean", [](const OptionValue& x) { return x.kind == OptionValue::Kind::kBool; });
  return v == nullptr ? default_value : v->bool_value;
}

std::string OptionReader::String(const std::string& key, const std::string& default_value,
                                 const std::vector<std::string>& allowed) {
  const OptionValue* v = Lookup(
      key, "a string", [](const OptionValue& x) { return x.kind == OptionValue::Kind::kString; });
  if (v == nullptr) return default_value;
  if (!allowed.empty() &&
      std::find(allowed.begin(), allowed.end(), v->string_value) == allowed.end()) {
    Error(key, "must be one of " + StrJoin(allowed, ", ") + " (got '" + v->string_value + "')");
    return default_value;
  }
  return v->string_value;
}

std::vector<int64_t> OptionReader::IntList(const std::string& key,
                                           const std::vector<int64_t>& default_value, int64_t min,
                                           int64_t max) {
  const OptionValue* v = Lookup(key, "an array of integers", [](const OptionValue& x) {
    if (x.kind != OptionValue::Kind::kArray) return false;
    return std::all_of(x.array.begin(), x.array.end(),
                       [](const OptionValue& e) { return e.kind == OptionValue::Kind::kInt; });
  });
  if (v == nullptr) return default_value;
  std::vector<int64_t> out;
  for (const OptionValue& e : v->array) {
    if (e.int_value < min || e.int_value > max) {
      Error(key, StrFormat("every element must be in [%lld, %lld] (got %lld)",
                           static_cast<long long>(min), static_cast<long long>(max),
                           static_cast<long long>(e.int_value)));
      return default_value;
    }
    out.push_back(e.int_value);
  }
  return out;
}

std::vector<double> OptionReader::DoubleList(const std::string& key,
                                             const std::vector<double>& default_value, double min,
                                             double max) {
  const OptionValue* v = Lookup(key, "an array of numbers", [](const OptionValue& x) {
    if (x.kind != OptionValue::Kind::kArray) return false;
    return std::all_of(x.array.begin(), x.array.end(), [](const OptionValue& e) {
      return e.kind == OptionValue::Kind::kInt || e.kind == OptionValue::Kind::kDouble;
    });
  });
  if (v == nullptr) return default_value;
  std::vector<double> out;
  for (const OptionValue& e : v->array) {
    const double x =
        e.kind == OptionValue::Kind::kInt ? static_cast<double>(e.int_value) : e.double_value;
    if (!(x >= min && x <= max)) {
      Error(key, StrFormat("every element must be in [%g, %g] (got %g)", min, max, x));
      return default_value;
    }
    out.push_back(x);
  }
  return out;
}

bool OptionReader::Has(const std::string& key) {
  known_.push_back(key);
  return table_.Find(key) != nullptr;
}

Status OptionReader::Finish() {
  for (const OptionEntry& e : table_.entries) {
    if (std::find(known_.begin(), known_.end(), e.key) != known_.end()) continue;
    std::string what = "unknown option";
    const std::string hint = ClosestMatch(e.key, known_);
    if (!hint.empty()) what += "; did you mean '" + hint + "'?";
    if (!known_.empty()) {
      std::vector<std::string> sorted = known_;
      std::sort(sorted.begin(), sorted.end());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      what += " (known: " + StrJoin(sorted, ", ") + ")";
    } else {
      what += " (this policy takes no options)";
    }
    Error(e.key, what);
  }
  if (errors_.empty()) return Status();
  return Status(StatusCode::kInvalidRecipe, StrJoin(errors_, "\n"));
}

}  // namespace libra::recipe
