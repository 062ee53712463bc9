// Writing a recipe back as TOML: the fully resolved recipe of one run, which every run records
// (runs.resolved_recipe) and `libra report RUN --recipe` prints. Parsing it gives a recipe that
// runs exactly like the run: every recipe field written out with its value or default, the run's
// own system as [system] (its preset expanded, its pipeline settings resolved, no baselines),
// each policy's options with the defaults it read (OptionLog), includes inlined, and paths made
// absolute (workload.trace, and {recipe_dir} in the cluster tables' command templates), so that
// the file works from any folder.
#pragma once

#include <string>

#include "recipe/options.h"
#include "recipe/recipe.h"

namespace libra::recipe {

/// The resolved TOML of `recipe` running `system` (one of its systems); `log` holds what the
/// policies read while they were built for this system (empty tables keep what the recipe gave).
std::string WriteResolvedRecipe(const Recipe& recipe, const SystemSpec& system,
                                const OptionLog& log);

/// A TOML value: strings quoted and escaped, doubles in the shortest form that reads back to the
/// same bits (with a '.' or an exponent, or inf / nan), arrays and tables inline.
std::string TomlValue(const OptionValue& value);

/// A bare key when it can be one, else a quoted key.
std::string TomlKey(const std::string& key);

}  // namespace libra::recipe
