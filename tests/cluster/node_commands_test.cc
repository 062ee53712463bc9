#include "cluster/node_commands.h"

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "support/private_sshd.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using std::chrono::milliseconds;

LauncherOptions LocalNodes(int n) {
  LauncherOptions options;
  options.hosts.resize(static_cast<size_t>(n));
  return options;
}

std::vector<std::string> Sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

TEST(NodeCommandsTest, RunsOnEveryNodeAndCollectsWhatEachPrinted) {
  test::ScopedTempDir dir;
  auto nodes = NodeCommands::Create(LocalNodes(2), dir.File("logs"));
  ASSERT_OK(nodes);
  EXPECT_EQ((*nodes)->nodes(), 2u);
  EXPECT_EQ((*nodes)->Describe(1), "node 1 (local)");
  ASSERT_OK((*nodes)->Start(0, "a", Sh("echo out $LIBRA_NODE; echo err >&2")));
  ASSERT_OK((*nodes)->Start(1, "b", Sh("echo node $LIBRA_NODE; exit 3")));
  auto outputs = (*nodes)->Wait(test::Deadline(milliseconds(60000)));
  ASSERT_OK(outputs);
  ASSERT_EQ(outputs->size(), 2u);
  EXPECT_EQ((*outputs)[0].node, 0u);
  EXPECT_EQ((*outputs)[0].name, "a");
  EXPECT_TRUE((*outputs)[0].exit.success());
  EXPECT_EQ((*outputs)[0].out, "out 0\n");
  EXPECT_EQ((*outputs)[0].err, "err\n");
  EXPECT_EQ((*outputs)[1].out, "node 1\n");
  EXPECT_EQ((*outputs)[1].exit.code, 3);
}

TEST(NodeCommandsTest, FirstLineReturnsWhileTheCommandGoesOn) {
  // The first line arrives before the command ends: what libra hands to the other nodes.
  test::ScopedTempDir dir;
  auto nodes = NodeCommands::Create(LocalNodes(1), dir.File("logs"));
  ASSERT_OK(nodes);
  const std::string go = dir.File("go");
  auto index = (*nodes)->Start(
      0, "id",
      Sh("echo first; while [ ! -e " + go + " ]; do sleep 0.05; done; echo got $(cat " + go + ")"));
  ASSERT_OK(index);
  auto line = (*nodes)->FirstLine(*index, test::Deadline(milliseconds(60000)));
  ASSERT_OK(line);
  EXPECT_EQ(*line, "first");
  // The command waits for the file until now.
  test::WriteFile(go + ".tmp", "second\n");
  std::filesystem::rename(go + ".tmp", go);
  auto outputs = (*nodes)->Wait(test::Deadline(milliseconds(60000)));
  ASSERT_OK(outputs);
  EXPECT_EQ((*outputs)[0].out, "first\ngot second\n");
}

TEST(NodeCommandsTest, FirstLineOfACommandThatDiesNamesTheNodeAndItsError) {
  test::ScopedTempDir dir;
  auto nodes = NodeCommands::Create(LocalNodes(1), dir.File("logs"));
  ASSERT_OK(nodes);
  auto index = (*nodes)->Start(0, "dies", Sh("printf partial; echo 'no GPU here' >&2; exit 1"));
  ASSERT_OK(index);
  auto line = (*nodes)->FirstLine(*index, test::Deadline(milliseconds(60000)));
  ASSERT_EQ(line.status().code(), StatusCode::kBackend);
  EXPECT_EQ(line.status().message(),
            "dies: node 0 (local) exited (exit code 1) before it printed a line: no GPU here");
}

TEST(NodeCommandsTest, TimeoutsStopWhatStillRuns) {
  test::ScopedTempDir dir;
  auto nodes = NodeCommands::Create(LocalNodes(1), dir.File("logs"));
  ASSERT_OK(nodes);
  auto index = (*nodes)->Start(0, "slow", Sh("exec sleep 100"));
  ASSERT_OK(index);
  auto line = (*nodes)->FirstLine(*index, milliseconds(100));
  ASSERT_EQ(line.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(line.status().message(), "slow: node 0 (local) printed nothing within 0.1 s");
  auto outputs = (*nodes)->Wait(milliseconds(100));
  ASSERT_OK(outputs);
  EXPECT_EQ((*outputs)[0].exit.signal, SIGTERM);
}

TEST(NodeCommandsTest, AFailureCanStopTheOthers) {
  // Commands that wait for each other (NCCL ranks) must not wait for a dead one until the timeout.
  test::ScopedTempDir dir;
  auto nodes = NodeCommands::Create(LocalNodes(2), dir.File("logs"));
  ASSERT_OK(nodes);
  ASSERT_OK((*nodes)->Start(0, "waits", Sh("exec sleep 100")));
  ASSERT_OK((*nodes)->Start(1, "dies", Sh("sleep 0.2; exit 1")));
  const auto started = EventLoop::Clock::now();
  auto outputs = (*nodes)->Wait(milliseconds(60000), /*stop_on_failure=*/true);
  ASSERT_OK(outputs);
  EXPECT_LT(EventLoop::Clock::now() - started, std::chrono::seconds(30));
  EXPECT_EQ((*outputs)[0].exit.signal, SIGTERM);
  EXPECT_EQ((*outputs)[1].exit.code, 1);
}

TEST(NodeCommandsTest, BadNodesAndNamesAreRefused) {
  test::ScopedTempDir dir;
  auto nodes = NodeCommands::Create(LocalNodes(1), dir.File("logs"));
  ASSERT_OK(nodes);
  EXPECT_EQ((*nodes)->Start(1, "x", Sh("true")).status().message(),
            "node 1 does not exist (there are 1)");
  EXPECT_EQ((*nodes)->Start(0, "a b", Sh("true")).status().code(), StatusCode::kInvalidArgument);
}

TEST(NodeCommandsTest, RunsOverSsh) {
  // Through the ssh launcher, as on a cluster: the output comes back over ssh.
  test::ScopedTempDir dir;
  auto sshd = test::PrivateSshd::Start(dir.File("sshd"));
  if (!sshd.ok()) GTEST_SKIP() << sshd.status().message();
  const test::SshdEndpoint& at = (*sshd)->endpoint();
  LauncherOptions options;
  options.kind = LauncherKind::kSsh;
  HostOptions host;
  host.ssh = SshTarget{at.host, at.user, at.port, at.identity_file};
  options.hosts = {host};
  options.ssh.known_hosts_file = at.known_hosts_file;
  auto nodes = NodeCommands::Create(options, dir.File("logs"));
  ASSERT_OK(nodes);
  ASSERT_OK((*nodes)->Start(0, "remote", Sh("echo on node $LIBRA_NODE")));
  auto outputs = (*nodes)->Wait(test::Deadline(milliseconds(60000)));
  ASSERT_OK(outputs);
  EXPECT_TRUE((*outputs)[0].exit.success()) << (*outputs)[0].err;
  EXPECT_EQ((*outputs)[0].out, "on node 0\n");
}

}  // namespace
}  // namespace libra::cluster
