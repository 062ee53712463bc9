#include "recipe/recipe_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "common/strings.h"

namespace libra::recipe {
namespace {

std::string Quote(const std::string& text) {
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
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += StrFormat("\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  std::string text(buffer, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

OptionValue Str(const std::string& s) {
  OptionValue v;
  v.kind = OptionValue::Kind::kString;
  v.string_value = s;
  return v;
}

/// `given` with the values `read` for the same keys put over them (read order for new keys).
std::vector<OptionEntry> Overlay(const OptionTable& given, const std::vector<OptionEntry>& read) {
  std::vector<OptionEntry> out = given.entries;
  for (const OptionEntry& r : read) {
    bool found = false;
    for (OptionEntry& e : out) {
      if (e.key == r.key) {
        e.value = r.value;
        found = true;
      }
    }
    if (!found) out.push_back(r);
  }
  // By key: the same recipe is written the same way whatever order its options were read in.
  std::stable_sort(out.begin(), out.end(),
                   [](const OptionEntry& a, const OptionEntry& b) { return a.key < b.key; });
  return out;
}

/// Every string under `value` with "{recipe_dir}" replaced by `dir`.
void ReplaceRecipeDir(OptionValue* value, const std::string& dir) {
  if (value->kind == OptionValue::Kind::kString) {
    std::string& s = value->string_value;
    for (size_t at = s.find("{recipe_dir}"); at != std::string::npos;
         at = s.find("{recipe_dir}", at + dir.size())) {
      s.replace(at, 12, dir);
    }
  }
  for (OptionValue& e : value->array) ReplaceRecipeDir(&e, dir);
  for (OptionEntry& e : value->table) ReplaceRecipeDir(&e.value, dir);
}

class Writer {
 public:
  void Key(const std::string& key, const std::string& value) {
    out_ += TomlKey(key) + " = " + value + "\n";
  }
  void Key(const std::string& key, const OptionValue& value) { Key(key, TomlValue(value)); }
  void Table(const std::string& name) { out_ += "\n[" + name + "]\n"; }
  /// A table's entries; nested tables become sub-tables [name.key] after the plain keys.
  void Entries(const std::string& name, const std::vector<OptionEntry>& entries) {
    for (const OptionEntry& e : entries) {
      if (e.value.kind != OptionValue::Kind::kTable) Key(e.key, e.value);
    }
    for (const OptionEntry& e : entries) {
      if (e.value.kind != OptionValue::Kind::kTable) continue;
      Table(name + "." + TomlKey(e.key));
      Entries(name + "." + TomlKey(e.key), e.value.table);
    }
  }
  /// [name] with `entries`, written only when there are some (or `always`).
  void Section(const std::string& name, const std::vector<OptionEntry>& entries,
               bool always = false) {
    if (entries.empty() && !always) return;
    Table(name);
    Entries(name, entries);
  }
  std::string Finish() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::string TomlKey(const std::string& key) {
  const bool bare = !key.empty() && key.find_first_not_of(
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_-") == std::string::npos;
  return bare ? key : Quote(key);
}

std::string TomlValue(const OptionValue& value) {
  switch (value.kind) {
    case OptionValue::Kind::kBool:
      return value.bool_value ? "true" : "false";
    case OptionValue::Kind::kInt:
      return std::to_string(value.int_value);
    case OptionValue::Kind::kDouble:
      return Double(value.double_value);
    case OptionValue::Kind::kString:
      return Quote(value.string_value);
    case OptionValue::Kind::kArray: {
      std::vector<std::string> items;
      for (const OptionValue& e : value.array) items.push_back(TomlValue(e));
      return "[" + StrJoin(items, ", ") + "]";
    }
    case OptionValue::Kind::kTable: {
      std::vector<std::string> items;
      for (const OptionEntry& e : value.table)
        items.push_back(TomlKey(e.key) + " = " + TomlValue(e.value));
      return "{" + StrJoin(items, ", ") + "}";
    }
  }
  return "\"\"";
}

namespace {

/// [rl] and [sim], every field.
void WriteRlAndSim(const Recipe& recipe, Writer& w) {
  w.Table("rl");
  w.Key("prompts_per_step", std::to_string(recipe.rl.prompts_per_step));
  w.Key("group_size", std::to_string(recipe.rl.group_size));
  w.Key("staleness", std::to_string(recipe.rl.staleness));
  w.Key("sync_interval", std::to_string(recipe.rl.sync_interval));
  w.Key("batching", Quote(NameOf(recipe.rl.batching)));
  w.Key("partial_rollout", recipe.rl.partial_rollout ? "true" : "false");
  w.Key("objective", Quote(NameOf(recipe.rl.objective)));

  w.Table("sim");
  w.Key("max_num_seqs", std::to_string(recipe.sim.max_num_seqs));
  w.Key("max_batched_tokens", std::to_string(recipe.sim.max_batched_tokens));
  w.Key("kv_policy", Quote(NameOf(recipe.sim.kv_policy)));
  w.Key("sync_path", Quote(NameOf(recipe.sim.sync_path)));
  w.Key("tool_concurrency", std::to_string(recipe.sim.tool_concurrency));
  w.Key("record_events", recipe.sim.record_events ? "true" : "false");
}

}  // namespace

std::string WriteResolvedRecipe(const Recipe& recipe, const SystemSpec& system,
                                const OptionLog& log) {
  std::error_code ec;
  const std::string base =
      std::filesystem::absolute(recipe.cluster_backend.base_dir.empty()
                                    ? std::filesystem::current_path(ec)
                                    : std::filesystem::path(recipe.cluster_backend.base_dir),
                                ec)
          .lexically_normal()
          .string();
  Writer w;
  auto table = [&](const recipe::OptionTable& given) {
    return Overlay(given, log.Read(given.path));
  };
  w.Key("name", Quote(recipe.name));
  w.Key("seed", std::to_string(recipe.seed));
  w.Key("steps", std::to_string(recipe.steps));
  w.Key("backend", Quote(NameOf(recipe.backend)));

  w.Table("cluster");
  w.Key("gpu", Quote(recipe.cluster.gpu));
  w.Key("nodes", std::to_string(recipe.cluster.nodes));
  w.Key("gpus_per_node", std::to_string(recipe.cluster.gpus_per_node));
  w.Section("cluster.gpu_spec", table(recipe.cluster.gpu_spec));

  w.Table("model");
  w.Key("name", Quote(recipe.model.name));
  w.Section("model.arch", table(recipe.model.arch));

  std::vector<OptionEntry> cost = {{"name", Str(recipe.cost_model.name)}};
  for (OptionEntry& e : table(recipe.cost_model.options)) cost.push_back(std::move(e));
  w.Section("cost_model", cost);

  std::vector<OptionEntry> workload = {{"kind", Str(NameOf(recipe.workload.kind))},
                                       {"preset", Str(recipe.workload.preset)}};
  if (!recipe.workload.trace.empty()) {
    std::filesystem::path trace(recipe.workload.trace);
    if (trace.is_relative()) trace = std::filesystem::path(recipe.workload.base_dir) / trace;
    workload.push_back(
        {"trace", Str(std::filesystem::absolute(trace, ec).lexically_normal().string())});
  }
  for (OptionEntry& e : table(recipe.workload.options)) workload.push_back(std::move(e));
  w.Section("workload", workload);

  WriteRlAndSim(recipe, w);

  const ClusterBackendSpec& cb = recipe.cluster_backend;
  for (const auto& [name, given] :
       {std::pair<const char*, const recipe::OptionTable*>{"launcher", &cb.launcher},
        {"engine", &cb.engine},
        {"trainer", &cb.trainer},
        {"agent", &cb.agent}}) {
    std::vector<OptionEntry> entries = table(*given);
    for (OptionEntry& e : entries) ReplaceRecipeDir(&e.value, base);
    w.Section(name, entries);
  }

  w.Table("system");
  w.Key("name", Quote(system.name));
  w.Key("router", Quote(system.router));
  w.Key("planner", Quote(system.planner));
  w.Key("staleness", std::to_string(recipe.StalenessFor(system)));
  w.Key("batching", Quote(NameOf(recipe.BatchingFor(system))));
  w.Key("partial_rollout", recipe.PartialRolloutFor(system) ? "true" : "false");
  w.Key("objective", Quote(NameOf(recipe.ObjectiveFor(system))));
  w.Section("system.router_options", table(system.router_options));
  w.Section("system.planner_options", table(system.planner_options));

  return "# The resolved recipe of one libra run: every default filled in, its own system as\n"
         "# [system]. `libra run` on this file repeats the run.\n" +
         w.Finish();
}

}  // namespace libra::recipe
