// Turning TOML text into a Recipe. This is the only part of libra that includes toml++.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "recipe/recipe.h"

namespace libra::recipe {

/// A recipe plus everything wrong with it. A recipe with diagnostics must not be run.
struct ParsedRecipe {
  Recipe recipe;
  std::vector<Diagnostic> diagnostics;
};

/// Parses `text` (named `source` in messages), merges the files of its top-level
/// `include = [...]` under it (paths relative to `source`'s folder; the recipe's own keys win, a
/// later include wins over an earlier one, an included file cannot include others), applies
/// `overrides` ("key.path=value", as given to --set; the value is read as a TOML value, or as a
/// string when it is not one), converts it strictly (unknown keys, wrong types, missing required
/// fields) and runs ValidateRecipe. Returns an error only when the text or an included file is
/// not TOML at all, an include cannot be read, or an override is malformed; every other problem
/// is a diagnostic, so that all of them are reported at once.
Result<ParsedRecipe> ParseRecipe(const std::string& text, const std::string& source,
                                 const std::vector<std::string>& overrides = {});

/// Reads the file at `path` and calls ParseRecipe. kNotFound when it cannot be read.
Result<ParsedRecipe> ParseRecipeFile(const std::string& path,
                                     const std::vector<std::string>& overrides = {});

}  // namespace libra::recipe
