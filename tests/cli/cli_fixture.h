// Shared by the CLI tests: a temporary working folder holding a copy of a recipe, in which the
// built libra runs (so that the default results/libra.db lands there, and printed paths are
// short and stable).
#pragma once

#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::test {

class CliFixture : public ::testing::Test {
 protected:
  /// Copies recipes/<name> into the working folder as <name>.
  void CopyRecipe(const std::string& name) {
    WriteFile(dir_.File(name), ReadFile(SourcePath("recipes/" + name)));
  }
  CommandResult Libra(const std::vector<std::string>& args) {
    return RunLibra(args, dir_.path().string());
  }
  ScopedTempDir dir_;
};

}  // namespace libra::test
