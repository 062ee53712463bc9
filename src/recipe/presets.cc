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
      {.name = "libra",
       .summary =
           "Libra: grp planner (online re-planning, elastic pool), the cmlfq router, batches "
           "of the first groups to finish (as the authors' code forms them)",
       .router = "cmlfq",
       .planner = "grp",
       .batching = Batching::kStream},
      {.name = "libra-no-ehp",
       .summary = "Libra planned once at the start, never moved (ablation)",
       .router = "cmlfq",
       .planner = "no-ehp",
       .batching = Batching::kStream},
      {.name = "libra-ref",
       .summary = "Libra as the authors' code does it: their planner and C-MLFQ rules",
       .router = "cmlfq",
       .router_options = Options({{"reference", true}}),
       .planner = "libra-ref"},
      {.name = "libra-homogeneous",
       .summary = "Libra's planner with one rollout TP size and least-connections (the paper's "
                  "homogeneous-LB ablation)",
       .router = "least-conn",
       .planner = "grp",
       .planner_options = Options({{"homogeneous", true}}),
       .batching = Batching::kStream},
      {.name = "verl-sync",
       .summary = "verl's default: every GPU rolls out, then every GPU trains; synchronous",
       .router = "least-conn",
       .planner = "colocated",
       .staleness = 0},
      {.name = "disagg-static",
       .summary = "a fixed train/rollout split, one step of staleness (StreamRL-style)",
       .router = "least-conn",
       .planner = "static",
       .staleness = 1},
      {.name = "verl-dynamic",
       .summary = "verl's dynamic resource scheduling: a fixed split whose idle trainer GPUs roll "
                  "out while the trainer waits; one step off-policy",
       .router = "least-conn",
       .planner = "static",
       .planner_options = Options({{"lend_idle_trainer", true}}),
       .staleness = 1},
      {.name = "areal-async",
       .summary = "AReaL-style fully async: fixed split, staleness 2, batches of the first groups "
                  "to finish, interruptible rollouts",
       .router = "least-conn",
       .planner = "static",
       .staleness = 2,
       .batching = Batching::kStream,
       .partial_rollout = true,
       .objective = Objective::kDecoupled,
       .staleness_knob = true},
      {.name = "sortedrl",
       .summary = "SortedRL-style: colocated, shortest-first routing, early updates on the groups "
                  "that finish first (one step of staleness)",
       .router = "sorted",
       .planner = "colocated",
       .staleness = 1,
       .batching = Batching::kStream},
      {.name = "heddle",
       .summary = "Heddle-style: a fixed split whose rollout TP mix follows the length profile; "
                  "predicted-longest first, presorted-DP placement, KV migration at tool returns",
       .router = "heddle",
       .planner = "heddle"},
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
  s.batching = preset.batching;
  s.partial_rollout = preset.partial_rollout;
  s.objective = preset.objective;
  s.where = where;
  s.path = path;
  return s;
}

}  // namespace libra::recipe
