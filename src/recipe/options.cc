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

namespace {

thread_local OptionLog* g_option_log = nullptr;

OptionValue IntValue(int64_t v) {
  OptionValue value;
  value.kind = OptionValue::Kind::kInt;
  value.int_value = v;
  return value;
}

}  // namespace

OptionLog::OptionLog() : outer_(g_option_log) { g_option_log = this; }

OptionLog::~OptionLog() { g_option_log = outer_; }

OptionLog* OptionLog::Current() { return g_option_log; }

void OptionLog::Record(const std::string& path, const std::string& key, OptionValue value) {
  value.where.clear();
  auto table =
      std::find_if(tables_.begin(), tables_.end(), [&](const auto& t) { return t.first == path; });
  if (table == tables_.end()) {
    tables_.emplace_back(path, std::vector<OptionEntry>());
    table = std::prev(tables_.end());
  }
  for (OptionEntry& e : table->second) {
    if (e.key == key) {
      e.value = std::move(value);
      return;
    }
  }
  table->second.push_back(OptionEntry{key, std::move(value)});
}

std::vector<OptionEntry> OptionLog::Read(const std::string& path) const {
  for (const auto& [table, entries] : tables_) {
    if (table == path) return entries;
  }
  return {};
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
  if (v == nullptr) {
    if (OptionLog* log = OptionLog::Current();
        log && default_value >= min && default_value <= max) {
      log->Record(table_.path, key, IntValue(default_value));
    }
    return default_value;
  }
  if (v->int_value < min || v->int_value > max) {
    Error(key, StrFormat("must be in [%lld, %lld] (got %lld)", static_cast<long long>(min),
                         static_cast<long long>(max), static_cast<long long>(v->int_value)));
    return default_value;
  }
  if (OptionLog* log = OptionLog::Current()) log->Record(table_.path, key, *v);
  return v->int_value;
}

double OptionReader::Double(const std::string& key, double default_value, double min, double max) {
  const OptionValue* v = Lookup(key, "a number", [](const OptionValue& x) {
    return x.kind == OptionValue::Kind::kDouble || x.kind == OptionValue::Kind::kInt;
  });
  if (v == nullptr) {
    if (OptionLog* log = OptionLog::Current();
        log && default_value >= min && default_value <= max) {
      OptionValue value;
      value.kind = OptionValue::Kind::kDouble;
      value.double_value = default_value;
      log->Record(table_.path, key, std::move(value));
    }
    return default_value;
  }
  const double d =
      v->kind == OptionValue::Kind::kInt ? static_cast<double>(v->int_value) : v->double_value;
  if (!(d >= min && d <= max)) {
    Error(key, StrFormat("must be in [%g, %g] (got %g)", min, max, d));
    return default_value;
  }
  if (OptionLog* log = OptionLog::Current()) log->Record(table_.path, key, *v);
  return d;
}

bool OptionReader::Bool(const std::string& key, bool default_value) {
  const OptionValue* v = Lookup(
      key, "a boolean", [](const OptionValue& x) { return x.kind == OptionValue::Kind::kBool; });
  if (OptionLog* log = OptionLog::Current()) {
    OptionValue value;
    value.kind = OptionValue::Kind::kBool;
    value.bool_value = v == nullptr ? default_value : v->bool_value;
    log->Record(table_.path, key, std::move(value));
  }
  return v == nullptr ? default_value : v->bool_value;
}

std::string OptionReader::String(const std::string& key, const std::string& default_value,
                                 const std::vector<std::string>& allowed) {
  const OptionValue* v = Lookup(
      key, "a string", [](const OptionValue& x) { return x.kind == OptionValue::Kind::kString; });
  if (v == nullptr) {
    if (OptionLog* log = OptionLog::Current();
        log && (allowed.empty() ||
                std::find(allowed.begin(), allowed.end(), default_value) != allowed.end())) {
      OptionValue value;
      value.kind = OptionValue::Kind::kString;
      value.string_value = default_value;
      log->Record(table_.path, key, std::move(value));
    }
    return default_value;
  }
  if (!allowed.empty() &&
      std::find(allowed.begin(), allowed.end(), v->string_value) == allowed.end()) {
    Error(key, NotOneOf(v->string_value, allowed));
    return default_value;
  }
  if (OptionLog* log = OptionLog::Current()) log->Record(table_.path, key, *v);
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
  if (v == nullptr) {
    OptionLog* log = OptionLog::Current();
    if (log && std::all_of(default_value.begin(), default_value.end(),
                           [&](int64_t e) { return e >= min && e <= max; })) {
      OptionValue value;
      value.kind = OptionValue::Kind::kArray;
      for (int64_t e : default_value) value.array.push_back(IntValue(e));
      log->Record(table_.path, key, std::move(value));
    }
    return default_value;
  }
  if (OptionLog* log = OptionLog::Current()) log->Record(table_.path, key, *v);
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
