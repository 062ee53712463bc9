#include "cluster/cluster_options.h"

#include <gtest/gtest.h>

#include "common/strings.h"
#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

Result<ClusterOptions> Decode(const std::vector<std::string>& sets) {
  auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/cpu-local.toml"), sets);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return DecodeClusterOptions(parsed->recipe);
}

TEST(ClusterOptionsTest, DecodesTheCpuRecipe) {
  auto options = Decode({});
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->launcher.kind, LauncherKind::kLocal);
  ASSERT_EQ(options->launcher.hosts.size(), 1u);
  EXPECT_EQ(options->launcher.hosts[0].address, "127.0.0.1");
  EXPECT_EQ(options->engine.dialect, EngineDialect::kSglang);
  EXPECT_EQ(options->engine.max_tokens_per_turn, 8);
  EXPECT_EQ(options->trainer.weight_sync, WeightSyncMode::kDisk);
  EXPECT_TRUE(options->trainer.has_prepare_command);
  // initial_weights is made absolute against the recipe's folder.
  EXPECT_TRUE(EndsWith(options->trainer.initial_weights, "/results/cache/toy-warm-start-s0.pt"));
  EXPECT_EQ(options->trainer.initial_weights.front(), '/');
  EXPECT_EQ(options->agent.stop_token_ids, (std::vector<TokenId>{2, 6}));
  EXPECT_EQ(options->agent.tool_call_token, 6);
  EXPECT_EQ(options->agent.tool_name, "lookup");
  EXPECT_EQ(options->values.at("seed"), "1");
  EXPECT_EQ(options->values.at("model"), "Qwen3-0.6B");
  EXPECT_TRUE(EndsWith(options->values.at("recipe_dir"), "/recipes"));
  // Every placeholder of the engine's command has a value once the backend adds its own.
  std::map<std::string, std::string> values = options->values;
  for (const char* key :
       {"run_dir", "port", "tp", "gpus", "node", "host", "weights", "dialect", "instance"}) {
    values[key] = "x";
  }
  EXPECT_TRUE(options->engine.command.Expand(values).ok());
}

TEST(ClusterOptionsTest, EveryProblemIsReportedWithItsPlace) {
  auto options = Decode({"engine.command=\"serve --port {prot}\"", "engine.dialect=\"trtllm\"",
                         "trainer.weight_sync=\"rsync\"", "agent.tool_call_token=-1",
                         "agent.max_turnz=3", "engine.env.CUDA=1"});
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kInvalidRecipe);
  const std::string m = options.status().message();
  EXPECT_NE(m.find("engine.command: unknown placeholder {prot}"), std::string::npos) << m;
  EXPECT_NE(m.find("engine.dialect"), std::string::npos) << m;
  EXPECT_NE(m.find("trainer.weight_sync"), std::string::npos) << m;
  EXPECT_NE(m.find("agent.tool_call_token"), std::string::npos) << m;
  EXPECT_NE(m.find("agent.max_turnz: unknown option; did you mean 'max_turns'?"), std::string::npos)
      << m;
  EXPECT_NE(m.find("engine.env: CUDA: expected a string"), std::string::npos) << m;
  // Each problem on its own line, located in the recipe or at its --set.
  EXPECT_GE(StrSplit(m, '\n').size(), 6u);
}

TEST(ClusterOptionsTest, RequiredKeysAndHostsPerNode) {
  auto missing = Decode({"trainer.initial_weights=\"\"", "launcher.kind=\"ssh\""});
  ASSERT_FALSE(missing.ok());
  const std::string m = missing.status().message();
  EXPECT_NE(m.find("trainer.initial_weights: is required"), std::string::npos) << m;
  EXPECT_NE(m.find("the ssh launcher needs one [[launcher.hosts]] per node: 0 given"),
            std::string::npos)
      << m;
}

TEST(ClusterOptionsTest, SshHostsResolveTheirAddressAndIdentity) {
  auto parsed = recipe::ParseRecipeFile(test::SourcePath("recipes/cpu-ssh.toml"),
                                        {"launcher.hosts[0].identity_file=\"keys/id\""});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto options = DecodeClusterOptions(parsed->recipe);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->launcher.kind, LauncherKind::kSsh);
  EXPECT_EQ(options->launcher.ssh.strict_host_key_checking, HostKeyChecking::kAcceptNew);
  ASSERT_EQ(options->launcher.hosts.size(), 1u);
  EXPECT_EQ(options->launcher.hosts[0].ssh.host, "localhost");
  EXPECT_EQ(options->launcher.hosts[0].address, "localhost");
  EXPECT_TRUE(EndsWith(options->launcher.hosts[0].ssh.identity_file, "recipes/keys/id"));
}

}  // namespace
}  // namespace libra::cluster
