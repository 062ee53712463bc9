// The fidelity gate: on every recipe the simulator runs, `libra plan --check` simulates the plan of
// each system that plans with a model and routes with C-MLFQ (Libra's router, which keeps a
// returning turn where its context is cached), least-conn or a length-based router (which place
// it by load) or round-robin (in rotation; with any of these, the model counts the turns moved
// as prefilled again), and requires the step time within 10% of the simulation and each phase
// (rollout, train, sync) within 15%. The simulator is the reference. heddle is left out: its own
// planner predicts no phases (docs/planner.md, "Routers without turn affinity").
#include <filesystem>

#include "common/strings.h"
#include "experiment/runner.h"
#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

TEST(PlanFidelityTest, EveryRecipesPlanMatchesItsSimulation) {
  std::vector<std::string> recipes;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(SourcePath("recipes"))) {
    if (entry.is_regular_file() && entry.path().extension() == ".toml") {
      recipes.push_back(entry.path().string());
    }
  }
  std::sort(recipes.begin(), recipes.end());
  int checked = 0;
  for (const std::string& recipe : recipes) {
    SCOPED_TRACE(recipe);
    auto parsed = recipe::ParseRecipeFile(recipe, {});
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    if (parsed->recipe.backend == recipe::Backend::kCluster) continue;
    std::string systems;
    for (const recipe::SystemSpec* s : experiment::AllSystems(parsed->recipe)) {
      const bool models = s->planner == "grp" || s->planner == "no-ehp";
      if (!models || s->router == "heddle") continue;
      systems += (systems.empty() ? "" : ",") + s->name;
    }
    if (systems.empty()) continue;
    const CommandResult r = RunLibra({"plan", "--check", "--systems", systems, recipe});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(" 0 phases outside the limits"), std::string::npos) << r.out;
    ++checked;
  }
  // quickstart and the five paper recipes.
  EXPECT_GE(checked, 6);
}

TEST(PlanFidelityTest, LibraWithTheOtherRoutersMatchesItsSimulation) {
  // No recipe plans with round-robin or a length-based router, so Libra's planner is checked
  // with each on the two multi-turn paper recipes: in rotation a returning turn lands on its
  // previous instance 1 time in K; the length-based routers place it by load, as least-conn does.
  for (const char* router : {"round-robin", "sorted", "length-aware", "oracle-length", "la-mlfq"}) {
    for (const char* recipe :
         {"recipes/paper/r2e-gym-qwen3-14b.toml", "recipes/paper/search-r1-qwen3-14b.toml"}) {
      SCOPED_TRACE(StrFormat("%s, %s", router, recipe));
      const CommandResult r =
          RunLibra({"plan", "--check", "--systems", "libra", "--set",
                    std::string("system.router=") + router, SourcePath(recipe)});
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      EXPECT_NE(r.out.find(" 0 phases outside the limits"), std::string::npos) << r.out;
    }
  }
}

}  // namespace
}  // namespace libra::test
