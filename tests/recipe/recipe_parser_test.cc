#include "recipe/recipe_parser.h"

#include <gtest/gtest.h>

#include "common/strings.h"
#include "support/test_util.h"

namespace libra::recipe {
namespace {

// A minimal valid recipe; cases append to it or replace lines of it.
constexpr const char* kMinimal = R"(name = "t"

[cluster]
nodes = 2
gpus_per_node = 8

[model]
name = "Qwen3-8B"

[rl]
prompts_per_step = 4
group_size = 8
)";

std::vector<std::string> Messages(const ParsedRecipe& parsed) {
  std::vector<std::string> out;
  for (const Diagnostic& d : parsed.diagnostics) out.push_back(d.ToString());
  return out;
}

TEST(RecipeParserTest, MinimalRecipeGetsDefaults) {
  // Only the required fields: everything else takes its documented default.
  auto parsed = ParseRecipe(kMinimal, "t.toml");
  ASSERT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty()) << Messages(*parsed).front();
  const Recipe& r = parsed->recipe;
  EXPECT_EQ(r.name, "t");
  EXPECT_EQ(r.seed, 1u);
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(r.backend, Backend::kSim);
  EXPECT_EQ(r.cluster.total_gpus(), 16);
  EXPECT_EQ(r.cluster.gpu, "A800-80G");
  EXPECT_EQ(r.rl.staleness, 0);
  EXPECT_EQ(r.rl.sync_interval, 1);
  EXPECT_EQ(r.workload.kind, WorkloadKind::kAgentic);
  EXPECT_EQ(r.workload.preset, "r2e-gym");
  EXPECT_TRUE(r.workload.options.entries.empty());
  EXPECT_EQ(r.workload.base_dir, "");
  EXPECT_EQ(r.cost_model.name, "roofline");
  EXPECT_EQ(r.sim, SimSpec());
  EXPECT_EQ(r.system.name, "system");
  EXPECT_EQ(r.system.router, "least-conn");
  EXPECT_EQ(r.system.planner, "static");
  EXPECT_TRUE(r.baselines.empty());
}

TEST(RecipeParserTest, ReadsEverySection) {
  // Each section's fields land in the value types, options tables keep order and locations.
  const std::string text = std::string(kMinimal) + R"(
[workload]
preset = "search-r1"
max_turns = 3

[sim]
max_num_seqs = 128
kv_policy = "free"
record_events = true

[system]
name = "mine"
router = "round-robin"
[system.router_options]
max_active = 4
ratio = 0.5
tps = [1, 2]

[[baselines]]
name = "b1"
staleness = 1
batching = "stream"
partial_rollout = true
)";
  auto parsed = ParseRecipe(text, "t.toml");
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty()) << Messages(*parsed).front();
  const Recipe& r = parsed->recipe;
  EXPECT_EQ(r.workload.preset, "search-r1");
  ASSERT_EQ(r.workload.options.entries.size(), 1u);  // the model's own keys, for it to decode
  EXPECT_EQ(r.workload.options.entries[0].key, "max_turns");
  EXPECT_EQ(r.workload.options.path, "workload");
  EXPECT_EQ(r.sim.max_num_seqs, 128);
  EXPECT_EQ(r.sim.kv_policy, KvPolicy::kFree);
  EXPECT_TRUE(r.sim.record_events);
  EXPECT_EQ(r.system.name, "mine");
  ASSERT_EQ(r.system.router_options.entries.size(), 3u);
  EXPECT_EQ(r.system.router_options.entries[0].key, "max_active");
  EXPECT_EQ(r.system.router_options.entries[0].value.int_value, 4);
  EXPECT_EQ(r.system.router_options.entries[0].value.where, "t.toml:27:14");
  EXPECT_EQ(r.system.router_options.entries[2].value.kind, OptionValue::Kind::kArray);
  EXPECT_EQ(r.system.router_options.path, "system.router_options");
  ASSERT_EQ(r.baselines.size(), 1u);
  EXPECT_EQ(r.baselines[0].name, "b1");
  EXPECT_EQ(r.baselines[0].path, "baselines[0]");
  EXPECT_EQ(r.StalenessFor(r.baselines[0]), 1);
  EXPECT_EQ(r.BatchingFor(r.baselines[0]), Batching::kStream);
  EXPECT_TRUE(r.PartialRolloutFor(r.baselines[0]));
  EXPECT_EQ(r.BatchingFor(r.system), Batching::kOrdered);
  EXPECT_FALSE(r.PartialRolloutFor(r.system));
  EXPECT_EQ(r.StalenessFor(r.system), 0);
  EXPECT_EQ(r.Where("workload.preset"), "t.toml:15:10");
}

struct ErrorCase {
  std::string name;
  std::string text;  // the whole recipe
  std::vector<std::string> overrides;
  std::string expected;  // one diagnostic, exactly
};

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(RecipeParserTest, EachErrorKindNamesPositionKeyAndProblem) {
  // One case per kind of error; each must produce exactly the expected message.
  const std::string base = kMinimal;
  const std::vector<ErrorCase> cases = {
      {"unknown top-level key",
       "stesp = 3\n" + base,
       {},
       "t.toml:1:9: stesp: unknown key; did you mean 'steps'?"},
      {"unknown nested key",
       Replace(base, "group_size = 8", "group_size = 8\ngroupsize = 2"),
       {},
       "t.toml:13:13: rl.groupsize: unknown key; did you mean 'group_size'?"},
      {"unknown section",
       base + "[trainr]\nlr = 1\n",
       {},
       "t.toml:13:1: trainr: unknown key; did you mean 'trainer'?"},
      {"wrong type",
       Replace(base, "nodes = 2", "nodes = \"two\""),
       {},
       "t.toml:4:9: cluster.nodes: expected an integer, got a string"},
      {"wrong type float for int",
       Replace(base, "nodes = 2", "nodes = 2.5"),
       {},
       "t.toml:4:9: cluster.nodes: expected an integer, got a float"},
      {"missing required field",
       Replace(base, "name = \"Qwen3-8B\"", ""),
       {},
       "t.toml:7:1: model.name: required field is missing"},
      {"missing required table",
       Replace(base, "[model]\nname = \"Qwen3-8B\"", ""),
       {},
       "t.toml:1:1: model.name: required field is missing"},
      {"missing top-level field",
       Replace(base, "name = \"t\"", ""),
       {},
       "t.toml:1:1: name: required field is missing"},
      {"zero group size",
       Replace(base, "group_size = 8", "group_size = 0"),
       {},
       "t.toml:12:14: rl.group_size: must be at least 1 (got 0)"},
      {"negative seed",
       "seed = -4\n" + base,
       {},
       "t.toml:1:8: seed: must not be negative (got -4)"},
      {"out of range int",
       Replace(base, "nodes = 2", "nodes = 9999999999"),
       {},
       "t.toml:4:9: cluster.nodes: 9999999999 is out of range"},
      {"too many gpus per node",
       Replace(base, "gpus_per_node = 8", "gpus_per_node = 65"),
       {},
       "t.toml:5:17: cluster.gpus_per_node: must be at most 64, libra's limit (got 65)"},
      {"unknown workload kind",
       base + "[workload]\nkind = \"replay\"\n",
       {},
       "t.toml:14:8: workload.kind: must be one of agentic, trace (got 'replay')"},
      {"trace without a file",
       base + "[workload]\nkind = \"trace\"\n",
       {},
       "t.toml:13:1: workload.trace: required when workload.kind = \"trace\""},
      {"unknown backend",
       "backend = \"slurm\"\n" + base,
       {},
       "t.toml:1:11: backend: must be one of sim, cluster (got 'slurm')"},
      {"an enum's name misspelt",
       Replace(base, "group_size = 8", "group_size = 8\nbatching = \"strem\""),
       {},
       "t.toml:13:12: rl.batching: must be one of ordered, stream (got 'strem'); did you mean "
       "'stream'?"},
      {"a system's enum override unknown",
       base + "[[baselines]]\nname = \"b\"\nobjective = \"reinforce\"\n",
       {},
       "t.toml:15:13: baselines[0].objective: must be one of ppo, decoupled (got 'reinforce')"},
      {"an enum given as another type",
       base + "[sim]\nkv_policy = 1\n",
       {},
       "t.toml:14:13: sim.kv_policy: expected a string, got an integer"},
      {"sync interval beyond staleness",
       Replace(base, "group_size = 8", "group_size = 8\nsync_interval = 3"),
       {},
       "t.toml:13:17: rl.sync_interval: sync_interval 3 needs a staleness bound of at least 2 "
       "(system 'system' has 0): rollouts for step k need the weights of step k - staleness"},
      {"duplicate system name",
       base + "[system]\nname = \"a\"\n[[baselines]]\nname = \"a\"\n",
       {},
       "t.toml:16:8: baselines[0].name: 'a' names another system of this recipe already"},
      {"baseline without name",
       base + "[[baselines]]\nrouter = \"round-robin\"\n",
       {},
       "t.toml:13:1: baselines[0].name: required field is missing"},
      {"baselines not an array of tables",
       "baselines = 3\n" + base,
       {},
       "t.toml:1:13: baselines: expected an array of tables ([[baselines]]), got an integer"},
      {"options not a table",
       base + "[system]\nrouter_options = 1\n",
       {},
       "t.toml:14:18: system.router_options: expected a table, got an integer"},
      {"override with a wrong type",
       base,
       {"rl.group_size=many"},
       "--set rl.group_size=many: rl.group_size: expected an integer, got a string"},
      {"override of an unknown key",
       base,
       {"rl.groupsize=4"},
       "--set rl.groupsize=4: rl.groupsize: unknown key; did you mean 'group_size'?"},
      {"override with an impossible value",
       base,
       {"rl.prompts_per_step=0"},
       "--set rl.prompts_per_step=0: rl.prompts_per_step: must be at least 1 (got 0)"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto parsed = ParseRecipe(c.text, "t.toml", c.overrides);
    ASSERT_OK(parsed);
    ASSERT_EQ(parsed->diagnostics.size(), 1u)
        << (parsed->diagnostics.empty() ? "no diagnostic" : Messages(*parsed)[1]);
    EXPECT_EQ(parsed->diagnostics[0].ToString(), c.expected);
  }
}

TEST(RecipeParserTest, ReportsEveryErrorAtOnce) {
  // Three independent problems in one file: all three are reported.
  std::string text = Replace(kMinimal, "nodes = 2", "nodes = 0");
  text = Replace(text, "group_size = 8", "group_size = \"x\"");
  text += "extra = 1\n";
  auto parsed = ParseRecipe(text, "t.toml");
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->diagnostics.size(), 3u);
}

TEST(RecipeParserTest, SyntaxErrorNamesLineAndColumn) {
  // Text that is not TOML fails as a whole with the parser's position.
  auto parsed = ParseRecipe("name = \"t\"\nsteps = = 3\n", "t.toml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidRecipe);
  EXPECT_TRUE(StartsWith(parsed.status().message(), "t.toml:2:9: not valid TOML: "))
      << parsed.status().message();
}

TEST(RecipeParserTest, OverridesSetAnyField) {
  // --set reaches top-level, nested, array-of-table and new option fields, read as TOML values.
  const std::string text = std::string(kMinimal) + "[[baselines]]\nname = \"b\"\n";
  auto parsed = ParseRecipe(text, "t.toml",
                            {"steps=3", "workload.preset=dapo-math", "system.router=round-robin",
                             "baselines[0].staleness=2", "baselines.0.router=round-robin",
                             "system.planner_options.rollout_tp=2", "model.name=Qwen3-0.6B"});
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty()) << Messages(*parsed).front();
  const Recipe& r = parsed->recipe;
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.workload.preset, "dapo-math");
  EXPECT_EQ(r.system.router, "round-robin");
  EXPECT_EQ(r.baselines[0].staleness, 2);
  EXPECT_EQ(r.baselines[0].router, "round-robin");
  ASSERT_NE(r.system.planner_options.Find("rollout_tp"), nullptr);
  EXPECT_EQ(r.system.planner_options.Find("rollout_tp")->int_value, 2);
  EXPECT_EQ(r.system.planner_options.Find("rollout_tp")->where,
            "--set system.planner_options.rollout_tp=2");
  EXPECT_EQ(r.model.name, "Qwen3-0.6B");
  // The effective recipe holds the overrides, so a recorded run can be repeated.
  auto again = ParseRecipe(r.effective_toml, "effective.toml");
  ASSERT_OK(again);
  ASSERT_TRUE(again->diagnostics.empty());
  EXPECT_EQ(again->recipe.steps, 3);
  EXPECT_EQ(again->recipe.baselines[0].staleness, 2);
}

TEST(RecipeParserTest, MalformedOverridesAreRejected) {
  // Overrides that cannot be applied at all are usage errors naming the override.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"steps", "--set expects key.path=value, got 'steps'"},
      {"=3", "--set expects key.path=value, got '=3'"},
      {"rl..group_size=3", "--set rl..group_size=3: malformed key path 'rl..group_size'"},
      {"name.x=3", "--set name.x=3: 'name' is not a table"},
  };
  for (const auto& [spec, message] : cases) {
    SCOPED_TRACE(spec);
    auto parsed = ParseRecipe(kMinimal, "t.toml", {spec});
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), message);
  }
  const std::string with_baseline = std::string(kMinimal) + "[[baselines]]\nname = \"b\"\n";
  auto parsed = ParseRecipe(with_baseline, "t.toml", {"baselines[3].name=x"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "--set baselines[3].name=x: '3' is not an index of the array (it has 1 element)");
}

TEST(RecipeParserTest, PresetsFillASystemAndItsOwnKeysWin) {
  // A baseline named only by its preset takes the preset's name, policies and staleness; a
  // system's own keys override them and its option tables merge over the preset's, key by key.
  const std::string text = std::string(kMinimal) + R"(
[system]
preset = "libra-ref"
name = "ours"
planner = "grp"
[system.router_options]
max_episodes_per_instance = 5

[[baselines]]
preset = "verl-sync"
)";
  auto parsed = ParseRecipe(text, "t.toml");
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty()) << Messages(*parsed)[0];
  const SystemSpec& ours = parsed->recipe.system;
  EXPECT_EQ(ours.name, "ours");
  EXPECT_EQ(ours.preset, "libra-ref");
  EXPECT_EQ(ours.router, "cmlfq");
  EXPECT_EQ(ours.planner, "grp");
  ASSERT_EQ(ours.router_options.entries.size(), 2u);
  EXPECT_EQ(ours.router_options.entries[0].key, "reference");
  EXPECT_EQ(ours.router_options.entries[1].key, "max_episodes_per_instance");
  EXPECT_EQ(ours.router_options.path, "system.router_options");
  ASSERT_EQ(parsed->recipe.baselines.size(), 1u);
  const SystemSpec& verl = parsed->recipe.baselines[0];
  EXPECT_EQ(verl.name, "verl-sync");
  EXPECT_EQ(verl.planner, "colocated");
  EXPECT_EQ(verl.staleness, 0);
  EXPECT_EQ(verl.path, "baselines[0]");
}

TEST(RecipeParserTest, UnknownPresetSuggestsTheClosest) {
  const std::string text = std::string(kMinimal) + "[[baselines]]\npreset = \"verl_sync\"\n";
  auto parsed = ParseRecipe(text, "t.toml");
  ASSERT_OK(parsed);
  ASSERT_FALSE(parsed->diagnostics.empty());
  EXPECT_NE(Messages(*parsed)[0].find(
                "baselines[0].preset: unknown preset 'verl_sync' (known: "
                "libra, libra-no-ehp, libra-ref, libra-homogeneous, verl-sync, disagg-static, "
                "verl-dynamic, areal-async, sortedrl, heddle); "
                "did you mean 'verl-sync'?"),
            std::string::npos)
      << Messages(*parsed)[0];
}

TEST(RecipeParserTest, MissingFileIsNotFound) {
  // A path that cannot be read is kNotFound naming the path.
  auto parsed = ParseRecipeFile("/nonexistent/recipe.toml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parsed.status().message(),
            "/nonexistent/recipe.toml: cannot read the recipe file (No such file or directory)");
}

}  // namespace
}  // namespace libra::recipe
