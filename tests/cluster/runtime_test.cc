#include "cluster/runtime.h"

#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

TEST(RuntimeTest, PathsOfTheRunFolder) {
  FakeRuntime f;
  EXPECT_EQ(f.runtime.PolicyPath(), f.runtime.run_dir + "/weights/policy.pt");
  EXPECT_EQ(f.runtime.CheckpointPath(4), f.runtime.run_dir + "/weights/v4.pt");
  f.options.trainer.policy_name = "policy";
  EXPECT_EQ(f.runtime.CheckpointPath(4), f.runtime.run_dir + "/weights/v4");
  EXPECT_EQ(f.runtime.LogHint("engine-2"), "its log: " + f.runtime.run_dir + "/logs/engine-2.err");
}

TEST(RuntimeTest, SpecsGoThroughTheNodesLauncherAndDieWithLibra) {
  FakeRuntime f;
  f.options.values["seed"] = "7";
  auto command = cluster::CommandTemplate::Parse("run {seed} {run_dir} {port}");
  ASSERT_TRUE(command.ok());
  auto spec = f.runtime.MakeSpec(0, "x", *command, f.runtime.Values({{"port", "9"}}), {{"A", "b"}});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->die_with_libra);
  EXPECT_EQ(spec->log_dir, f.runtime.run_dir + "/logs");
  ASSERT_EQ(f.asked.size(), 1u);
  EXPECT_EQ(f.asked[0].argv, (std::vector<std::string>{"run", "7", f.runtime.run_dir, "9"}));
  EXPECT_EQ(f.asked[0].env.at("A"), "b");
  EXPECT_FALSE(f.runtime.MakeSpec(0, "x", *command, f.runtime.Values({}), {}).ok());
}

}  // namespace
}  // namespace libra::test
