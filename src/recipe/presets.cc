#include "recipe/presets.h"

namespace libra::recipe {
namespace {

OptionTable Options(std::vector<std::pair<std::string, bool>> flags) {
  OptionTable table;
  for (auto& [key, value] : flags) {
    OptionValue v;
    v.kind = OptionValue::Kind::kBool;
    v.bool_value = value;
    table.entries.push_back(OptionEntry{key, v});
  }
  return table;
}

}  // namespace

const std::vector<Preset>& Presets() {
  static const std::vector<Preset>* const presets = new std::vector<Preset>{
      {"libra",
       "Libra: grp planner (online re-planning, elastic pool) and the cmlfq router",
       "cmlfq",
       {},
       "grp",
       {},
       std::nullopt},
      {"libra-no-ehp",
       "Libra planned once at the start, never moved (ablation)",
       "cmlfq",
       {},
       "no-ehp",
       {},
       std::nullopt},
      {"libra-ref",
       "Libra as the authors' code does it: their planner and C-MLFQ rules",
       "cmlfq",
       Options({{"reference", true}}),
       "libra-ref",
       {},
       std::nullopt},
      {"verl-sync",
       "verl's default: every GPU rolls out, then every GPU trains; synchronous",
       "least-conn",
       {},
       "colocated",
       {},
       0},
      {"disagg-static",
       "a fixed train/rollout split, one step of staleness (StreamRL-style)",
       "least-conn",
       {},
       "static",
       {},
       1},
  };
  return *presets;
}

const Preset* FindPreset(const std::string& name) {
  for (const Preset& p : Presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

SystemSpec SystemFromPreset(const Preset& preset, const std::string& path,
                            const std::string& where) {
  SystemSpec s;
  s.name = preset.name;
  s.preset = preset.name;
  s.router = preset.router;
  s.router_options = preset.router_options;
  s.router_options.path = path + ".router_options";
  s.router_options.where = where;
  s.planner = preset.planner;
  s.planner_options = preset.planner_options;
  s.planner_options.path = path + ".planner_options";
  s.planner_options.where = where;
  s.staleness = preset.staleness;
  s.where = where;
  s.path = path;
  return s;
}

}  // namespace libra::recipe
