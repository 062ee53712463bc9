// Named systems: presets of router + planner + pipeline settings (DESIGN §3), which a recipe's
// [system] or [[baselines]] entry names with `preset = "..."` (its own keys override the preset's;
// its option tables are merged over the preset's, key by key) and which `libra compare --systems`
// accepts even when the recipe does not list them. Pure data: the policies are looked up by name
// later, like any system's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "recipe/recipe.h"

namespace libra::recipe {

struct Preset {
  std::string name{};
  /// What it stands for, in a line (`libra validate`, docs).
  std::string summary{};
  std::string router{};
  OptionTable router_options{};
  std::string planner{};
  OptionTable planner_options{};
  /// The pipeline settings the preset fixes (e.g. staleness 0 for a synchronous system); unset
  /// ones come from the recipe's [rl].
  std::optional<int> staleness{};
  std::optional<Batching> batching{};
  std::optional<bool> partial_rollout{};
  std::optional<Objective> objective{};
  /// Whether its real system lets its users set the staleness bound (AReaL's
  /// max_head_offpolicyness): `libra tune` then searches it, up to the recipe's rl.staleness.
  bool staleness_knob = false;
};

/// Every preset, by name.
const std::vector<Preset>& Presets();

/// The preset of that name; nullptr when there is none.
const Preset* FindPreset(const std::string& name);

/// A system that is exactly the preset, named after it, for `path` ("baselines[3]").
SystemSpec SystemFromPreset(const Preset& preset, const std::string& path,
                            const std::string& where);

}  // namespace libra::recipe
