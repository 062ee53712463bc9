#include "cluster/process.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cluster/cluster_test_util.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using std::chrono::milliseconds;
using test::Eventually;
using test::IsAlive;
using test::ReadIfExists;
using test::Shell;
using Clock = EventLoop::Clock;

class ProcessSetTest : public ::testing::Test {
 protected:
  ProcessSetTest() {
    auto loop = EventLoop::Create();
    EXPECT_OK(loop);
    loop_ = std::move(loop).value();
    processes_ = std::make_unique<ProcessSet>(loop_.get());
  }

  // Starts `spec` and returns its id; its exit status lands in exits_[id].
  ProcessId Start(const ProcessSpec& spec) {
    auto id =
        processes_->Spawn(spec, [this, n = exits_.size()](const ExitStatus& s) { exits_[n] = s; });
    EXPECT_OK(id);
    exits_.emplace_back();
    return id.ok() ? *id : ProcessId();
  }

  // Runs the loop until process `id` has exited.
  ExitStatus RunToExit(ProcessId id) {
    const size_t n = static_cast<size_t>(id.value);
    EXPECT_OK(loop_->RunUntil([&] { return exits_[n].has_value(); },
                              Clock::now() + std::chrono::seconds(4)));
    return exits_[n].value_or(ExitStatus{});
  }

  std::string Log(const std::string& name, const std::string& suffix) {
    return ReadIfExists(dir_.File(name + suffix));
  }

  test::ScopedTempDir dir_;
  std::unique_ptr<EventLoop> loop_;
  std::vector<std::optional<ExitStatus>> exits_;
  std::unique_ptr<ProcessSet> processes_;
};

TEST_F(ProcessSetTest, WritesLogsAndReportsTheExit) {
  // stdout and stderr land in <log_dir>/<name>.out and .err; the exit code comes back.
  const ProcessId id = Start(Shell("job", "echo out; echo err >&2; exit 3", dir_.path()));
  EXPECT_EQ(processes_->running(), 1u);
  EXPECT_EQ(RunToExit(id), (ExitStatus{.code = 3, .signal = 0}));
  EXPECT_EQ(Log("job", ".out"), "out\n");
  EXPECT_EQ(Log("job", ".err"), "err\n");
  EXPECT_EQ(processes_->running(), 0u);
  EXPECT_FALSE(processes_->pid(id).has_value());
}

TEST_F(ProcessSetTest, EnvironmentIsOnlyTheAllowListAndTheGivenVariables) {
  // A variable of libra's outside the allow-list (a secret) never reaches the child.
  setenv("LIBRA_TEST_SECRET", "hunter2", 1);
  ProcessSpec spec;
  spec.name = "env";
  spec.argv = {"env"};
  spec.env = {{"GIVEN", "a value; with $(stuff)"}, {"LANG", "C.UTF-8"}};
  spec.log_dir = dir_.path();
  const ProcessId id = Start(spec);
  unsetenv("LIBRA_TEST_SECRET");
  EXPECT_TRUE(RunToExit(id).success());
  const std::string env = Log("env", ".out");
  EXPECT_NE(env.find("GIVEN=a value; with $(stuff)\n"), std::string::npos) << env;
  EXPECT_NE(env.find("LANG=C.UTF-8\n"), std::string::npos) << env;
  EXPECT_NE(env.find("PATH="), std::string::npos) << env;
  EXPECT_EQ(env.find("LIBRA_TEST_SECRET"), std::string::npos) << env;
}

TEST_F(ProcessSetTest, ChildLeadsItsOwnProcessGroupInItsWorkingDirectory) {
  // The child's process group is its own pid, and it starts in spec.cwd.
  ProcessSpec spec = Shell("group", "echo $(ps -o pgid= -p $$) $(pwd); exec sleep 30", dir_.path());
  spec.cwd = "/";
  const ProcessId id = Start(spec);
  const pid_t pid = processes_->pid(id).value();
  EXPECT_EQ(getpgid(pid), pid);
  EXPECT_TRUE(Eventually([&] { return !Log("group", ".out").empty(); }));
  EXPECT_EQ(Log("group", ".out"), std::to_string(pid) + " /\n");
  processes_->Stop(id, milliseconds(2000));
  EXPECT_EQ(RunToExit(id).signal, SIGTERM);
}

TEST_F(ProcessSetTest, StopTerminatesTheWholeProcessGroup) {
  // Stop sends SIGTERM to the group: the child and what it started are gone.
  const ProcessId id = Start(
      Shell("tree", "sleep 100 & echo $! > " + dir_.File("grandchild") + "; wait", dir_.path()));
  EXPECT_TRUE(Eventually([&] { return !ReadIfExists(dir_.File("grandchild")).empty(); }));
  const pid_t grandchild = std::stoi(ReadIfExists(dir_.File("grandchild")));
  EXPECT_TRUE(IsAlive(grandchild));
  processes_->Stop(id, milliseconds(2000));
  EXPECT_EQ(RunToExit(id).signal, SIGTERM);
  EXPECT_TRUE(Eventually([&] { return !IsAlive(grandchild); }));
}

TEST_F(ProcessSetTest, StopEscalatesToSigkillAfterTheGrace) {
  // A child that ignores SIGTERM is SIGKILLed once the grace period is over.
  const ProcessId id = Start(
      Shell("stubborn", "trap '' TERM; echo ready; while :; do sleep 0.01; done", dir_.path()));
  EXPECT_TRUE(Eventually([&] { return Log("stubborn", ".out") == "ready\n"; }));
  const Clock::time_point start = Clock::now();
  processes_->Stop(id, milliseconds(100));
  EXPECT_EQ(RunToExit(id), (ExitStatus{.code = -1, .signal = SIGKILL}));
  EXPECT_GE(Clock::now() - start, milliseconds(100));
}

TEST_F(ProcessSetTest, LeftoversDieWithTheLeader) {
  // A child that exits leaving a background process behind takes it along.
  const ProcessId id =
      Start(Shell("leaver", "sleep 100 & echo $! > " + dir_.File("grandchild"), dir_.path()));
  EXPECT_TRUE(RunToExit(id).success());
  const pid_t grandchild = std::stoi(ReadIfExists(dir_.File("grandchild")));
  EXPECT_TRUE(Eventually([&] { return !IsAlive(grandchild); }));
}

TEST_F(ProcessSetTest, CloseStdinStopsAProcessThatWaitsForEndOfFile) {
  // StopBy::kCloseStdin closes the child's stdin instead of signalling it.
  ProcessSpec spec = Shell("reader", "cat >/dev/null; echo eof", dir_.path());
  spec.stop_by = StopBy::kCloseStdin;
  const ProcessId id = Start(spec);
  processes_->Stop(id, milliseconds(2000));
  EXPECT_TRUE(RunToExit(id).success());
  EXPECT_EQ(Log("reader", ".out"), "eof\n");
}

TEST_F(ProcessSetTest, StopAllWaitsForEveryChildWithoutCallbacks) {
  // StopAll blocks until every child is gone, even one ignoring SIGTERM; no on_exit runs.
  std::vector<pid_t> pids;
  for (const char* name : {"a", "b"}) {
    pids.push_back(processes_->pid(Start(Shell(name, "exec sleep 100"))).value());
  }
  pids.push_back(processes_->pid(Start(Shell("c", "trap '' TERM; exec sleep 100"))).value());
  processes_->StopAll(milliseconds(200));
  EXPECT_EQ(processes_->running(), 0u);
  for (const pid_t pid : pids) EXPECT_FALSE(IsAlive(pid)) << pid;
  for (const auto& exit : exits_) EXPECT_FALSE(exit.has_value());
}

TEST_F(ProcessSetTest, DestructorStopsEveryChild) {
  // Dropping the set stops its children: no orphans.
  const pid_t pid = processes_->pid(Start(Shell("orphan", "exec sleep 100"))).value();
  processes_.reset();
  EXPECT_FALSE(IsAlive(pid));
}

TEST_F(ProcessSetTest, MissingProgramIsAClearError) {
  // A program not on PATH fails at Spawn, naming the process and the program.
  ProcessSpec spec;
  spec.name = "engine-0";
  spec.argv = {"libra-no-such-program"};
  const auto id = processes_->Spawn(spec, [](const ExitStatus&) {});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kBackend);
  EXPECT_NE(id.status().message().find("engine-0: cannot start 'libra-no-such-program': not "
                                       "found on PATH"),
            std::string::npos)
      << id.status().ToString();
}

TEST_F(ProcessSetTest, InvalidSpecsAreRefused) {
  // Names that would escape the log folder, empty commands and bad variable names are refused.
  struct Case {
    std::string name;
    ProcessSpec spec;
  };
  ProcessSpec bad_name = Shell("../x", "true");
  ProcessSpec empty_argv = Shell("x", "true");
  empty_argv.argv.clear();
  ProcessSpec bad_env = Shell("x", "true");
  bad_env.env["1BAD"] = "v";
  ProcessSpec nul_arg = Shell("x", std::string("a\0b", 3));
  const std::vector<Case> cases = {{"bad name", bad_name},
                                   {"empty argv", empty_argv},
                                   {"bad env", bad_env},
                                   {"nul in argument", nul_arg}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto id = processes_->Spawn(c.spec, [](const ExitStatus&) {});
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ProcessRunToCompletionTest, ReturnsTheExitStatus) {
  // A short command runs to its end.
  const auto status = RunToCompletion(Shell("short", "exit 4"), milliseconds(3000));
  ASSERT_OK(status);
  EXPECT_EQ(*status, (ExitStatus{.code = 4, .signal = 0}));
}

TEST(ProcessRunToCompletionTest, KillsACommandThatOverstays) {
  // Past its timeout the command's group is killed and the call returns kTimeout.
  test::ScopedTempDir dir;
  const auto status = RunToCompletion(
      Shell("long", "echo $$ > " + dir.File("pid") + "; exec sleep 100", dir.path()),
      milliseconds(200));
  EXPECT_EQ(status.status().code(), StatusCode::kTimeout) << status.status().ToString();
  const std::string pid = ReadIfExists(dir.File("pid"));
  ASSERT_FALSE(pid.empty());
  EXPECT_FALSE(IsAlive(std::stoi(pid)));
}

TEST(ProcessShutdownSignalsTest, SignalsBecomeLoopCallbacks) {
  // SIGTERM and SIGINT no longer end the process: they run the callback on the loop, and the
  // previous handlers come back afterwards.
  auto loop = EventLoop::Create();
  ASSERT_OK(loop);
  struct sigaction before {};
  sigaction(SIGTERM, nullptr, &before);
  std::vector<int> received;
  {
    auto signals =
        ShutdownSignals::Install(loop->get(), [&](int signo) { received.push_back(signo); });
    ASSERT_OK(signals);
    kill(getpid(), SIGTERM);
    kill(getpid(), SIGINT);
    ASSERT_OK((*loop)->RunUntil([&] { return received.size() == 2; },
                                Clock::now() + std::chrono::seconds(3)));
    EXPECT_EQ(received, (std::vector<int>{SIGTERM, SIGINT}));

    // Handlers are process-wide: a second instance is refused.
    const auto second = ShutdownSignals::Install(loop->get(), [](int) {});
    EXPECT_EQ(second.status().code(), StatusCode::kInternal);
  }
  struct sigaction after {};
  sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

}  // namespace
}  // namespace libra::cluster
