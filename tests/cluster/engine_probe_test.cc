// Engine capabilities: probed against fake engines (one that stops at token ids, one that does
// not, one without reload), and the refusals CheckCapabilities makes of them.
#include "cluster/engine_probe.h"

#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

using cluster::Capability;
using cluster::EngineCapabilities;

class EngineProbeTest : public ::testing::Test {
 protected:
  EngineProbeTest() : engines_(f_.loop.get(), f_.options.engine.base_port, 1) {}

  cluster::EngineClient Client() const {
    cluster::EngineClientOptions options;
    options.model_path = f_.runtime.PolicyPath();
    return cluster::EngineClient(cluster::EngineDialect::kSglang,
                                 StrFormat("http://127.0.0.1:%d", f_.options.engine.base_port),
                                 options);
  }

  EngineCapabilities Probe(const cluster::ProbePlan& plan) {
    std::optional<EngineCapabilities> found;
    cluster::ProbeEngine(f_.runtime, Client(), plan, [&](EngineCapabilities c) { found = c; });
    EXPECT_TRUE(f_.RunUntil([&] { return found.has_value(); }));
    return found.value_or(EngineCapabilities{});
  }

  FakeRuntime f_;
  FakeEngines engines_;
};

TEST_F(EngineProbeTest, AnEngineThatStopsAtTokenIdsHasEverything) {
  cluster::ProbePlan plan;
  plan.prompt_token = 1;
  plan.reload = true;
  plan.sleep = true;
  // Greedy: 7, 20; asked to stop at 20 it returns 7, 20.
  const EngineCapabilities found = Probe(plan);
  EXPECT_EQ(found.ToString(),
            "token ids: yes, stop at token ids: yes, reload from disk: yes, sleep / wake: yes");
  EXPECT_EQ(engines_.Count("/release_memory_occupation"), 1);
  EXPECT_EQ(engines_.Count("/resume_memory_occupation"), 1);
  const JsonValue* params = engines_.received.front().body.Find("sampling_params");
  EXPECT_EQ(params->Find("temperature")->as_double(), 0.0);
}

TEST_F(EngineProbeTest, AnEngineThatRunsPastStopTokensIsFound) {
  // It always generates 7, 20, 9, 11 whatever it is asked to stop at.
  engines_.generate = [](int, const std::vector<int64_t>& prompt) {
    return FakeEngines::Reply(prompt, {7, 20, 9, 11}, "length");
  };
  cluster::ProbePlan plan;
  plan.prompt_token = 1;
  const EngineCapabilities found = Probe(plan);
  EXPECT_EQ(found.token_ids.present, true);
  EXPECT_EQ(found.stop_at_token_ids.present, false);
  EXPECT_EQ(found.stop_at_token_ids.error, "generated 2 tokens past it");
  EXPECT_EQ(found.reload_from_disk.present, std::nullopt);  // not asked
}

TEST_F(EngineProbeTest, AnEngineWithoutReloadIsFound) {
  engines_.control = [](int, const std::string& path) -> std::optional<TestHttpReply> {
    if (path != "/update_weights_from_disk") return std::nullopt;
    return FakeEngines::NotFound();
  };
  cluster::ProbePlan plan;
  plan.reload = true;
  const EngineCapabilities found = Probe(plan);
  EXPECT_EQ(found.reload_from_disk.present, false);
  EXPECT_NE(found.reload_from_disk.error.find("Not Found"), std::string::npos);
}

TEST(CheckCapabilitiesTest, RefusesOnlyWhatTheRecipeNeeds) {
  const cluster::EngineClient client(cluster::EngineDialect::kVllm, "http://10.0.0.5:8000");
  cluster::ClusterOptions options;
  EngineCapabilities all;
  all.token_ids = {true, ""};
  EXPECT_TRUE(cluster::CheckCapabilities("engine-0", client, all, options, true).ok());

  EngineCapabilities no_ids = all;
  no_ids.token_ids = {false, "choices[0].token_ids is missing"};
  const Status ids = cluster::CheckCapabilities("engine-0", client, no_ids, options, false);
  EXPECT_EQ(ids.code(), StatusCode::kInvalidRecipe);
  EXPECT_NE(ids.message().find("engine-0 (vllm engine at http://10.0.0.5:8000): POST "
                               "/v1/completions does not return the token ids"),
            std::string::npos)
      << ids.message();
  EXPECT_NE(ids.message().find("[engine] dialect = \"vllm\""), std::string::npos);

  EngineCapabilities no_sleep = all;
  no_sleep.sleep_wake = {false, "HTTP 404: Not Found"};
  EXPECT_TRUE(cluster::CheckCapabilities("engine-0", client, no_sleep, options, false).ok());
  const Status sleep = cluster::CheckCapabilities("engine-0", client, no_sleep, options, true);
  EXPECT_NE(sleep.message().find("POST /sleep, /wake_up failed (HTTP 404: Not Found)"),
            std::string::npos)
      << sleep.message();

  EngineCapabilities no_reload = all;
  no_reload.reload_from_disk = {false, "HTTP 404"};
  const Status reload = cluster::CheckCapabilities("engine-0", client, no_reload, options, false);
  EXPECT_NE(reload.message().find("POST /collective_rpc (reload_weights) failed"),
            std::string::npos);
  EXPECT_NE(reload.message().find("[trainer] weight_sync = \"disk\""), std::string::npos);

  // A missing stop at token ids is no refusal: libra cuts the overshoot.
  EngineCapabilities no_stop = all;
  no_stop.stop_at_token_ids = {false, "generated 3 tokens past it"};
  EXPECT_TRUE(cluster::CheckCapabilities("engine-0", client, no_stop, options, true).ok());
}

}  // namespace
}  // namespace libra::test
