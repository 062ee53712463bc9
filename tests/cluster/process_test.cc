#include "cluster/process.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
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
                              Clock::now() + test::Deadline(std::chrono::seconds(60))));
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

TEST_F(ProcessSetTest, StdinComesFromTheStdinFile) {
  // The child reads spec.stdin_file; without one it reads an empty /dev/null.
  test::WriteFile(dir_.File("in"), "line one\nline two\n");
  ProcessSpec spec;
  spec.name = "cat";
  spec.argv = {"cat"};
  spec.stdin_file = dir_.File("in");
  spec.log_dir = dir_.path();
  EXPECT_TRUE(RunToExit(Start(spec)).success());
  EXPECT_EQ(Log("cat", ".out"), "line one\nline two\n");

  spec.name = "cat-null";
  spec.stdin_file.clear();
  EXPECT_TRUE(RunToExit(Start(spec)).success());
  EXPECT_EQ(Log("cat-null", ".out"), "");
}

TEST_F(ProcessSetTest, AStdioFdIsTheChildsStdinAndStdout) {
  // The child reads and writes the caller's socket; its stderr still goes to its log, and no
  // .out log is made.
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  const UniqueFd ours(fds[0]);
  UniqueFd theirs(fds[1]);
  ProcessSpec spec = Shell("echo", "read line; echo \"got $line\"; echo note >&2", dir_.path());
  spec.stdio_fd = theirs.get();
  const ProcessId id = Start(spec);
  theirs.reset();
  ASSERT_EQ(write(ours.get(), "ping\n", 5), 5);
  EXPECT_TRUE(RunToExit(id).success());
  char reply[64] = {};
  EXPECT_EQ(read(ours.get(), reply, sizeof(reply) - 1), 9);
  EXPECT_STREQ(reply, "got ping\n");
  EXPECT_EQ(Log("echo", ".err"), "note\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("echo.out")));
}

TEST_F(ProcessSetTest, MissingStdinFileIsAClearError) {
  // A stdin file that cannot be opened fails at Spawn, naming the file.
  ProcessSpec spec = Shell("reader", "cat");
  spec.stdin_file = dir_.File("absent");
  const auto id = processes_->Spawn(spec, [](const ExitStatus&) {});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kBackend);
  EXPECT_NE(id.status().message().find("reader: cannot start 'sh': cannot open the stdin file " +
                                       dir_.File("absent")),
            std::string::npos)
      << id.status().ToString();
}

TEST_F(ProcessSetTest, LimitsApplyToTheChildFromItsFirstInstruction) {
  // The limits are in force when the program starts (the shell reads them back) and are the
  // child's alone: libra's own stay as they were.
  rlimit before{};
  getrlimit(RLIMIT_NOFILE, &before);
  ProcessSpec spec =
      Shell("limited",
            "ulimit -t; ulimit -H -t; ulimit -v; ulimit -n; ulimit -f; echo $(ps -o pgid= -p $$)",
            dir_.path());
  spec.limits = {.cpu_seconds = 7,
                 .address_space_bytes = 512 << 20,
                 .open_files = 32,
                 .file_size_bytes = 1 << 20};
  const ProcessId id = Start(spec);
  const pid_t pid = processes_->pid(id).value();
  EXPECT_TRUE(RunToExit(id).success()) << Log("limited", ".err");
  // The shell's own view: SIGKILL a second after SIGXCPU, -v in KiB, -f in 512-byte blocks; and
  // the child still leads its own process group.
  EXPECT_EQ(Log("limited", ".out"), "7\n8\n524288\n32\n2048\n" + std::to_string(pid) + "\n");
  rlimit after{};
  getrlimit(RLIMIT_NOFILE, &after);
  EXPECT_EQ(after.rlim_cur, before.rlim_cur);
}

TEST_F(ProcessSetTest, CpuLimitKillsABusyLoop) {
  // Past cpu_seconds of CPU time the kernel stops the child: SIGXCPU, then SIGKILL.
  ProcessSpec spec = Shell("busy", "while :; do :; done", dir_.path());
  spec.limits.cpu_seconds = 1;
  const ProcessId id = Start(spec);
  const size_t n = static_cast<size_t>(id.value);
  ASSERT_OK(loop_->RunUntil([&] { return exits_[n].has_value(); },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_TRUE(exits_[n]->signal == SIGXCPU || exits_[n]->signal == SIGKILL)
      << exits_[n]->ToString();
}

TEST_F(ProcessSetTest, FileSizeLimitStopsAWriter) {
  // Writing past file_size_bytes, into the stdout log too, kills the child with SIGXFSZ.
  ProcessSpec spec = Shell("writer", "exec yes", dir_.path());
  spec.limits.file_size_bytes = 64 << 10;
  EXPECT_EQ(RunToExit(Start(spec)).signal, SIGXFSZ);
  EXPECT_EQ(Log("writer", ".out").size(), 64u << 10);
}

TEST_F(ProcessSetTest, LimitFailuresAndExecFailuresAreClearErrors) {
  // With limits the child is forked: a failure before or at its exec is still Spawn's error.
  // More open files than the kernel allows anyone (fs.nr_open): refused even to root.
  ProcessSpec too_high = Shell("greedy", "true");
  too_high.limits.open_files = int64_t{1} << 40;
  const auto refused = processes_->Spawn(too_high, [](const ExitStatus&) {});
  ASSERT_FALSE(refused.ok());
  const std::string message = refused.status().message();
  EXPECT_EQ(message.find("greedy: cannot start '"), 0u) << message;
  EXPECT_NE(message.find("sh': cannot set its resource limits: "), std::string::npos) << message;

  test::WriteFile(dir_.File("not-executable"), "#!/bin/sh\n");
  ProcessSpec spec;
  spec.name = "noexec";
  spec.argv = {dir_.File("not-executable")};
  spec.limits.cpu_seconds = 5;
  const auto failed = processes_->Spawn(spec, [](const ExitStatus&) {});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("noexec: cannot start '" + dir_.File("not-executable") +
                                           "': Permission denied"),
            std::string::npos)
      << failed.status().ToString();
  EXPECT_EQ(processes_->running(), 0u);
}

TEST_F(ProcessSetTest, LimitedChildGetsOnlyItsStdioAndDefaultSignals) {
  // The forked path matches posix_spawn's: no fd of ours beyond 0-2, SIGPIPE at its default even
  // though libra ignores it, and no signal blocked.
  const sighandler_t previous = signal(SIGPIPE, SIG_IGN);
  ProcessSpec spec =
      Shell("clean", "ls /proc/self/fd; grep -E '^Sig(Blk|Ign)' /proc/self/status", dir_.path());
  spec.limits.cpu_seconds = 5;
  EXPECT_TRUE(RunToExit(Start(spec)).success());
  signal(SIGPIPE, previous);
  // ls's own fd on /proc/self/fd is 3.
  EXPECT_EQ(Log("clean", ".out"),
            "0\n1\n2\n3\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_F(ProcessSetTest, KillStopsOneChildAtOnceWithoutItsCallback) {
  // Kill SIGKILLs the group and returns once it is gone; on_exit never runs, others keep going.
  const ProcessId doomed = Start(Shell("doomed", "trap '' TERM; exec sleep 100"));
  const ProcessId other = Start(Shell("other", "exec sleep 100"));
  const pid_t pid = processes_->pid(doomed).value();
  processes_->Kill(doomed);
  EXPECT_FALSE(IsAlive(pid));
  EXPECT_FALSE(processes_->pid(doomed).has_value());
  EXPECT_EQ(processes_->running(), 1u);
  processes_->Stop(other, milliseconds(2000));
  EXPECT_EQ(RunToExit(other).signal, SIGTERM);
  EXPECT_FALSE(exits_[static_cast<size_t>(doomed.value)].has_value());
}

TEST(ProcessDieWithLibraTest, AChildOfACrashedLibraIsTerminated) {
  // A "libra" (a forked copy of this test) starts `sleep 300` with die_with_libra and dies
  // without stopping it, as a crash would: the kernel sends the child SIGTERM.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t libra = fork();
  ASSERT_GE(libra, 0);
  if (libra == 0) {
    close(fds[0]);
    auto loop = EventLoop::Create();
    if (!loop.ok()) _exit(2);
    auto* processes = new ProcessSet(loop->get());  // never destroyed: a crash
    ProcessSpec spec;
    spec.name = "orphan";
    spec.argv = {"sleep", "300"};
    spec.die_with_libra = true;
    Result<ProcessId> id = processes->Spawn(spec, [](const ExitStatus&) {});
    const pid_t child = id.ok() ? processes->pid(*id).value_or(0) : 0;
    if (write(fds[1], &child, sizeof child) != sizeof child) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  pid_t child = 0;
  ASSERT_EQ(read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(libra, &status, 0), libra);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(test::Eventually([&] { return !test::IsAlive(child); }))
      << "pid " << child << " outlived its libra";
  if (test::IsAlive(child)) kill(child, SIGKILL);
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
  ProcessSpec negative_limit = Shell("x", "true");
  negative_limit.limits.cpu_seconds = -1;
  ProcessSpec stdin_twice = Shell("x", "true");
  stdin_twice.stdin_file = "/dev/null";
  stdin_twice.stop_by = StopBy::kCloseStdin;
  ProcessSpec stdio_and_file = Shell("x", "true");
  stdio_and_file.stdin_file = "/dev/null";
  stdio_and_file.stdio_fd = 0;
  const std::vector<Case> cases = {{"bad name", bad_name},
                                   {"empty argv", empty_argv},
                                   {"bad env", bad_env},
                                   {"nul in argument", nul_arg},
                                   {"negative limit", negative_limit},
                                   {"stdin file and kCloseStdin", stdin_twice},
                                   {"stdio fd and stdin file", stdio_and_file}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto id = processes_->Spawn(c.spec, [](const ExitStatus&) {});
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ProcessRunToCompletionTest, ReturnsTheExitStatus) {
  // A short command runs to its end.
  const auto status =
      RunToCompletion(Shell("short", "exit 4"), test::Deadline(milliseconds(60000)));
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
                                Clock::now() + test::Deadline(std::chrono::seconds(60))));
    EXPECT_EQ(received, (std::vector<int>{SIGTERM, SIGINT}));

    // Handlers are process-wide: a second instance is refused.
    const auto second = ShutdownSignals::Install(loop->get(), [](int) {});
    EXPECT_EQ(second.status().code(), StatusCode::kInternal);
  }
  struct sigaction after {};
  sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(RemoveFoldersOfDeadLibrasTest, RemovesOnlyTheFoldersOfPidsThatNoLongerRun) {
  // A child that has exited and been reaped: its pid runs no more (until reused, which a test
  // this short does not meet).
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  test::ScopedTempDir parent;
  const std::string gone = parent.File("libra-x-" + std::to_string(dead) + "-a1b2c3");
  const std::string alive = parent.File("libra-x-" + std::to_string(getpid()) + "-d4e5f6");
  const std::string other = parent.File("libra-x-notapid-123");
  const std::string file = parent.File("libra-x-" + std::to_string(dead) + "-file");
  for (const std::string& dir : {gone, alive, other}) {
    std::filesystem::create_directories(dir + "/inside");
  }
  test::WriteFile(file, "not a folder");
  RemoveFoldersOfDeadLibras(parent.path().string(), "libra-x-");
  EXPECT_FALSE(std::filesystem::exists(gone));
  EXPECT_TRUE(std::filesystem::exists(alive + "/inside"));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(file));
}

}  // namespace
}  // namespace libra::cluster
