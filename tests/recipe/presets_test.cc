#include "recipe/presets.h"

#include <gtest/gtest.h>

#include <set>

namespace libra::recipe {
namespace {

TEST(PresetsTest, EveryPresetIsUniqueAndComplete) {
  std::set<std::string> names;
  for (const Preset& p : Presets()) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(names.insert(p.name).second);
    EXPECT_FALSE(p.summary.empty());
    EXPECT_FALSE(p.router.empty());
    EXPECT_FALSE(p.planner.empty());
    EXPECT_EQ(FindPreset(p.name), &p);
  }
  EXPECT_EQ(FindPreset("nope"), nullptr);
  // The synchronous ones say so; the time-sharing planner needs it.
  EXPECT_EQ(FindPreset("verl-sync")->staleness, 0);
  EXPECT_EQ(FindPreset("verl-sync")->planner, "colocated");
  EXPECT_EQ(FindPreset("libra")->planner, "grp");
  EXPECT_EQ(FindPreset("libra")->router, "cmlfq");
  // Libra's pipelines train the first groups to finish, as the authors' runtime collects them.
  for (const char* libra : {"libra", "libra-no-ehp", "libra-homogeneous"}) {
    EXPECT_EQ(FindPreset(libra)->batching, Batching::kStream) << libra;
  }
}

TEST(PresetsTest, SystemFromPresetIsNamedAndPlaced) {
  const SystemSpec s = SystemFromPreset(*FindPreset("libra-ref"), "baselines[2]", "--systems");
  EXPECT_EQ(s.name, "libra-ref");
  EXPECT_EQ(s.preset, "libra-ref");
  EXPECT_EQ(s.path, "baselines[2]");
  EXPECT_EQ(s.router_options.path, "baselines[2].router_options");
  ASSERT_EQ(s.router_options.entries.size(), 1u);
  EXPECT_EQ(s.router_options.entries[0].key, "reference");
  EXPECT_TRUE(s.router_options.entries[0].value.bool_value);
  EXPECT_EQ(s.planner_options.path, "baselines[2].planner_options");
}

}  // namespace
}  // namespace libra::recipe
