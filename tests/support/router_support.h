// Builders shared by the router tests: option tables as a recipe would give them, and instances.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "recipe/options.h"
#include "sched/router.h"

namespace libra::test {

/// [system.router_options] at r.toml:5:1 with the given entries.
inline recipe::OptionTable Options(
    const std::vector<std::pair<std::string, recipe::OptionValue>>& entries) {
  recipe::OptionTable table;
  table.path = "system.router_options";
  table.where = "r.toml:5:1";
  for (const auto& [key, value] : entries) table.entries.push_back({key, value});
  return table;
}

inline recipe::OptionValue Int(int64_t value) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kInt;
  v.int_value = value;
  v.where = "r.toml:6:1";
  return v;
}

inline recipe::OptionValue Bool(bool value) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kBool;
  v.bool_value = value;
  v.where = "r.toml:6:1";
  return v;
}

inline recipe::OptionValue Double(double value) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kDouble;
  v.double_value = value;
  v.where = "r.toml:6:1";
  return v;
}

inline recipe::OptionValue Ints(const std::vector<int64_t>& values) {
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kArray;
  for (int64_t x : values) v.array.push_back(Int(x));
  v.where = "r.toml:6:1";
  return v;
}

/// Idle instances with the given TP degrees, ids 0..n-1.
inline std::vector<sched::InstanceState> Cluster(const std::vector<int>& tps) {
  std::vector<sched::InstanceState> out;
  for (size_t i = 0; i < tps.size(); ++i) {
    sched::InstanceState s;
    s.id = InstanceId(static_cast<int64_t>(i));
    s.tp = tps[i];
    out.push_back(s);
  }
  return out;
}

}  // namespace libra::test
