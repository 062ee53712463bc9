#include "cluster/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/cluster_test_util.h"
#include "common/strings.h"
#include "support/private_sshd.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using std::chrono::milliseconds;
using test::Eventually;
using test::IsAlive;
using test::ReadIfExists;
using Clock = EventLoop::Clock;

bool Contains(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

TEST(LauncherLocalTest, RunsTheCommandItself) {
  // The local launcher hands the spec back as it is, after checking it.
  LocalLauncher local;
  ProcessSpec spec = test::Shell("job", "true");
  spec.env["A"] = "b";
  const auto wrapped = local.Wrap(spec);
  ASSERT_OK(wrapped);
  EXPECT_EQ(*wrapped, spec);
  EXPECT_EQ(local.Describe(), "local");
  spec.env["1A"] = "b";
  EXPECT_EQ(local.Wrap(spec).status().code(), StatusCode::kInvalidArgument);
}

TEST(LauncherSshArgvTest, BuildsABatchModeMultiplexedCommand) {
  // The wrapped process is ssh in batch mode over a private control socket, with the target's
  // user, port and key, stopped by closing its stdin; the remote line holds the quoted argv.
  SshTarget target{.host = "node-1", .user = "alice", .port = 2222, .identity_file = "/k/id"};
  SshOptions options;
  options.strict_host_key_checking = HostKeyChecking::kAcceptNew;
  options.known_hosts_file = "/k/known_hosts";
  auto launcher = SshLauncher::Create(target, options);
  ASSERT_OK(launcher);
  EXPECT_EQ((*launcher)->Describe(), "ssh://alice@node-1:2222");
  const std::string control_dir = (*launcher)->control_dir();
  EXPECT_TRUE(std::filesystem::is_directory(control_dir));

  ProcessSpec spec = test::Shell("engine-0", "echo it's $HOME", "/logs");
  spec.env["CUDA_VISIBLE_DEVICES"] = "0,1";
  const auto wrapped = (*launcher)->Wrap(spec);
  ASSERT_OK(wrapped);
  const std::vector<std::string>& argv = wrapped->argv;
  EXPECT_EQ(argv[0], "ssh");
  for (const std::string& word :
       {std::string("BatchMode=yes"), std::string("ControlMaster=auto"),
        "ControlPath=" + control_dir + "/master", std::string("StrictHostKeyChecking=accept-new"),
        std::string("UserKnownHostsFile=/k/known_hosts"), std::string("IdentitiesOnly=yes")}) {
    EXPECT_TRUE(Contains(argv, word)) << word;
  }
  EXPECT_TRUE(Contains(argv, "-T"));
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "-p") + 1), "2222");
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "-l") + 1), "alice");
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "-i") + 1), "/k/id");
  EXPECT_EQ(argv[argv.size() - 3], "--");
  EXPECT_EQ(argv[argv.size() - 2], "node-1");
  const std::string& remote = argv.back();
  EXPECT_TRUE(remote.starts_with("exec sh -c '")) << remote;
  EXPECT_TRUE(remote.ends_with(" 'CUDA_VISIBLE_DEVICES=0,1' -- sh -c 'echo it'\\''s $HOME'"))
      << remote;
  EXPECT_EQ(wrapped->stop_by, StopBy::kCloseStdin);
  EXPECT_EQ(wrapped->name, "engine-0");
  EXPECT_EQ(wrapped->log_dir, "/logs");
  EXPECT_FALSE(wrapped->env.contains("CUDA_VISIBLE_DEVICES"));

  launcher->reset();
  EXPECT_FALSE(std::filesystem::exists(control_dir));
}

TEST(LauncherSshArgvTest, RefusesTargetsThatCouldBeReadAsOptions) {
  // A host or user starting with '-' (an ssh option) or a bad port is refused.
  struct Case {
    std::string name;
    SshTarget target;
  };
  auto host = [](std::string name, std::string user, int port) {
    return SshTarget{.host = name, .user = user, .port = port, .identity_file = ""};
  };
  const std::vector<Case> cases = {
      {"empty host", host("", "", 0)},    {"host option", host("-oProxyCommand=touch x", "", 0)},
      {"host blank", host("a b", "", 0)}, {"user option", host("h", "-x", 0)},
      {"port", host("h", "", 70000)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SshOptions options;
    EXPECT_EQ(SshLauncher::Create(c.target, options).status().code(), StatusCode::kInvalidArgument);
  }
}

// A private sshd (support/private_sshd.h) for the suite, logging in as the current user. Tests
// are skipped (with the reason) when sshd is not installed or cannot start here.
class LauncherSshTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::ScopedTempDir>();
    auto sshd = test::PrivateSshd::Start(dir_->File("sshd"));
    if (sshd.ok()) {
      sshd_ = std::move(sshd).value();
      skip_reason_.clear();
    } else {
      skip_reason_ = sshd.status().ToString();
      TearDownTestSuite();
    }
  }

  static void TearDownTestSuite() {
    sshd_.reset();
    dir_.reset();
  }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    loop_ = std::move(EventLoop::Create()).value();
    processes_ = std::make_unique<ProcessSet>(loop_.get());
    logs_ = std::make_unique<test::ScopedTempDir>();
  }

  void TearDown() override {
    processes_.reset();
    logs_.reset();
  }

  static SshTarget Target() { return sshd_->Target(); }

  static SshOptions Options() { return sshd_->Options(); }

  static std::unique_ptr<SshLauncher> MakeLauncher(SshOptions options = Options()) {
    auto launcher = SshLauncher::Create(Target(), options);
    EXPECT_OK(launcher);
    return launcher.ok() ? std::move(launcher).value() : nullptr;
  }

  // Runs `spec` through `launcher` and waits for its end.
  ExitStatus Run(const Launcher& launcher, const ProcessSpec& spec) {
    const auto wrapped = launcher.Wrap(spec);
    EXPECT_OK(wrapped);
    std::optional<ExitStatus> exit;
    EXPECT_OK(processes_->Spawn(*wrapped, [&](const ExitStatus& s) { exit = s; }));
    EXPECT_OK(loop_->RunUntil([&] { return exit.has_value(); },
                              Clock::now() + test::Deadline(std::chrono::seconds(60))));
    return exit.value_or(ExitStatus{});
  }

  std::string Log(const std::string& name, const std::string& suffix) const {
    return ReadIfExists(logs_->File(name + suffix));
  }

  // Logins sshd has accepted so far.
  static int Logins() { return sshd_->AcceptedLogins(); }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<ProcessSet> processes_;
  std::unique_ptr<test::ScopedTempDir> logs_;

 private:
  static inline std::string skip_reason_;
  static inline std::unique_ptr<test::ScopedTempDir> dir_;
  static inline std::unique_ptr<test::PrivateSshd> sshd_;
};

TEST_F(LauncherSshTest, HostileArgumentsAndVariablesArriveByteExact) {
  // Arguments and variables full of shell syntax reach the remote command byte for byte, and
  // nothing in them runs.
  const std::string marker = logs_->File("pwned");
  const std::vector<std::string> values = {"$(touch " + marker + ")",
                                           "`touch " + marker + "`",
                                           "'; touch " + marker + "; '",
                                           "\"; touch " + marker + "\"",
                                           "a\nb",
                                           "* ~ $HOME",
                                           " spaced ",
                                           "back\\slash",
                                           ""};
  ProcessSpec spec;
  spec.name = "args";
  spec.log_dir = logs_->path();
  spec.argv = {"printf", "%s\\0"};
  spec.argv.insert(spec.argv.end(), values.begin(), values.end());
  auto launcher = MakeLauncher();
  ASSERT_TRUE(launcher);
  ASSERT_TRUE(Run(*launcher, spec).success()) << Log("args", ".err");
  std::string expected;
  for (const std::string& value : values) expected += value + '\0';
  EXPECT_EQ(Log("args", ".out"), expected);

  ProcessSpec env = test::Shell("env", "printf '%s|%s' \"$HOSTILE\" \"$(pwd)\"", logs_->path());
  env.env["HOSTILE"] = values[0] + values[2] + values[4];
  const std::string cwd = logs_->File("a dir 'with' $(quotes)");
  std::filesystem::create_directory(cwd);
  env.cwd = cwd;
  ASSERT_TRUE(Run(*launcher, env).success()) << Log("env", ".err");
  EXPECT_EQ(Log("env", ".out"), env.env["HOSTILE"] + "|" + cwd);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(LauncherSshTest, ExitCodesComeBack) {
  // The remote exit code is ssh's; ssh's own failure is 255.
  auto launcher = MakeLauncher();
  ASSERT_TRUE(launcher);
  EXPECT_EQ(Run(*launcher, test::Shell("seven", "exit 7", logs_->path())).code, 7);
  // Also when run to completion (its stdin stays open until it exits).
  const auto wrapped = launcher->Wrap(test::Shell("five", "sleep 0.1; exit 5", logs_->path()));
  ASSERT_OK(wrapped);
  const auto five = RunToCompletion(*wrapped, test::Deadline(milliseconds(60000)));
  ASSERT_OK(five);
  EXPECT_EQ(five->code, 5) << Log("five", ".err");

  SshTarget closed = Target();
  closed.port = 1;
  auto unreachable = SshLauncher::Create(closed, Options());
  ASSERT_OK(unreachable);
  EXPECT_EQ(Run(**unreachable, test::Shell("nowhere", "true", logs_->path())).code,
            kSshFailureExitCode);
}

TEST_F(LauncherSshTest, UnknownHostKeyIsRefused) {
  // With StrictHostKeyChecking=yes a host missing from known_hosts is refused, not trusted.
  SshOptions options = Options();
  options.known_hosts_file = logs_->File("empty_known_hosts");
  test::WriteFile(options.known_hosts_file, "");
  auto launcher = MakeLauncher(options);
  ASSERT_TRUE(launcher);
  EXPECT_EQ(Run(*launcher, test::Shell("strict", "true", logs_->path())).code, kSshFailureExitCode);
  EXPECT_NE(Log("strict", ".err").find("Host key verification failed"), std::string::npos)
      << Log("strict", ".err");
}

// The pids a remote `sh` wrote: two background sleeps and itself, in one process group.
std::vector<pid_t> RemotePids(const std::string& file) {
  std::vector<pid_t> pids;
  for (const std::string& line : StrSplit(ReadIfExists(file), '\n')) {
    if (!line.empty()) pids.push_back(std::stoi(line));
  }
  return pids;
}

constexpr const char* kRemoteTree =
    "sleep 1000 & echo $! >> pids; sleep 1000 & echo $! >> pids; echo $$ >> pids; wait";

TEST_F(LauncherSshTest, StopKillsTheRemoteProcessGroup) {
  // Stopping the ssh process (closing its stdin) stops the whole remote process group, and
  // the remote status (SIGTERM: 128 + 15) comes back.
  auto launcher = MakeLauncher();
  ASSERT_TRUE(launcher);
  ProcessSpec spec = test::Shell("tree", kRemoteTree, logs_->path());
  spec.cwd = logs_->path();
  const auto wrapped = launcher->Wrap(spec);
  ASSERT_OK(wrapped);
  std::optional<ExitStatus> exit;
  const auto id = processes_->Spawn(*wrapped, [&](const ExitStatus& s) { exit = s; });
  ASSERT_OK(id);
  ASSERT_TRUE(Eventually([&] { return RemotePids(logs_->File("pids")).size() == 3; },
                         std::chrono::seconds(60)))
      << Log("tree", ".err");
  const std::vector<pid_t> remote = RemotePids(logs_->File("pids"));
  for (const pid_t pid : remote) EXPECT_TRUE(IsAlive(pid)) << pid;

  processes_->Stop(*id, test::Deadline(milliseconds(60000)));
  ASSERT_OK(loop_->RunUntil([&] { return exit.has_value(); },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(exit->code, 128 + SIGTERM) << exit->ToString() << Log("tree", ".err");
  for (const pid_t pid : remote) EXPECT_TRUE(Eventually([&] { return !IsAlive(pid); })) << pid;
}

TEST_F(LauncherSshTest, LosingTheSshClientKillsTheRemoteProcessGroup) {
  // If the ssh client dies (libra killed, connection lost), the remote group goes too.
  auto launcher = MakeLauncher();
  ASSERT_TRUE(launcher);
  ProcessSpec spec = test::Shell("tree", kRemoteTree, logs_->path());
  spec.cwd = logs_->path();
  const auto wrapped = launcher->Wrap(spec);
  ASSERT_OK(wrapped);
  std::optional<ExitStatus> exit;
  const auto id = processes_->Spawn(*wrapped, [&](const ExitStatus& s) { exit = s; });
  ASSERT_OK(id);
  ASSERT_TRUE(Eventually([&] { return RemotePids(logs_->File("pids")).size() == 3; },
                         std::chrono::seconds(60)))
      << Log("tree", ".err");
  const std::vector<pid_t> remote = RemotePids(logs_->File("pids"));

  kill(-processes_->pid(*id).value(), SIGKILL);
  ASSERT_OK(loop_->RunUntil([&] { return exit.has_value(); },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(exit->signal, SIGKILL);
  for (const pid_t pid : remote) EXPECT_TRUE(Eventually([&] { return !IsAlive(pid); })) << pid;
}

TEST_F(LauncherSshTest, SessionsShareOneConnectionClosedOnDestruction) {
  // Three commands cost one login; destroying the launcher ends the shared connection.
  auto launcher = MakeLauncher();
  ASSERT_TRUE(launcher);
  const int before = Logins();
  for (const std::string name : {"one", "two", "three"}) {
    EXPECT_TRUE(Run(*launcher, test::Shell(name, "true", logs_->path())).success())
        << Log(name, ".err");
  }
  EXPECT_TRUE(Eventually([&] { return Logins() == before + 1; })) << Logins() - before;

  const std::string control_dir = launcher->control_dir();
  ProcessSpec pgrep;
  pgrep.name = "pgrep";
  pgrep.argv = {"pgrep", "-f", control_dir};
  const auto master = RunToCompletion(pgrep, test::Deadline(milliseconds(60000)));
  ASSERT_OK(master);
  EXPECT_TRUE(master->success()) << "no ssh master for " << control_dir;

  launcher.reset();
  EXPECT_FALSE(std::filesystem::exists(control_dir));
  EXPECT_TRUE(Eventually([&] {
    const auto found = RunToCompletion(pgrep, test::Deadline(milliseconds(60000)));
    return found.ok() && found->code == 1;
  }));
}

}  // namespace
}  // namespace libra::cluster
