#include "cluster/sandbox.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cluster/cluster_test_util.h"
#include "cluster/supervisor.h"
#include "common/strings.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using test::Eventually;
using test::IsAlive;
using test::ReadIfExists;
using Clock = EventLoop::Clock;
namespace fs = std::filesystem;

class SandboxTest : public ::testing::Test {
 protected:
  SandboxTest() {
    auto loop = EventLoop::Create();
    EXPECT_OK(loop);
    loop_ = std::move(loop).value();
    processes_ = std::make_unique<ProcessSet>(loop_.get());
    sandbox_ = std::make_unique<Sandbox>(loop_.get(), processes_.get(), scratch_.File("calls"));
  }

  // Runs `call` on the loop to its end and returns its result.
  Result<std::string> RunCall(const SandboxCall& call) {
    std::optional<Result<std::string>> result;
    sandbox_->Run(call, [&](Result<std::string> r) { result = std::move(r); });
    EXPECT_FALSE(result.has_value()) << "done ran inside Run";
    EXPECT_OK(loop_->RunUntil([&] { return result.has_value(); },
                              Clock::now() + test::Deadline(std::chrono::seconds(60))));
    if (!result.has_value()) return Status::Internal("the call did not finish");
    return *std::move(result);
  }

  static SandboxCall Call(const std::string& name, std::vector<std::string> argv) {
    SandboxCall call;
    call.name = name;
    call.argv = std::move(argv);
    return call;
  }

  static SandboxCall Shell(const std::string& name, const std::string& script) {
    return Call(name, {"sh", "-c", script});
  }

  // The program the calls' supervisors are: the carried one in the scratch folder, unless its
  // file system cannot run programs (noexec), where it is this program again.
  std::string ExpectedSupervisor() const {
    struct statvfs info {};
    const bool runs = statvfs(scratch_.path().c_str(), &info) == 0 && !(info.f_flag & ST_NOEXEC);
    return runs ? scratch_.File("calls") + "/" + kSupervisorFile
                : fs::read_symlink("/proc/self/exe").string();
  }

  // Whether the scratch folder holds nothing but the carried supervisor (every call's folder
  // removed).
  bool ScratchIsEmpty() const {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(scratch_.File("calls"), error)) {
      if (entry.path().filename() != kSupervisorFile) return false;
    }
    return true;
  }

  test::ScopedTempDir scratch_;
  test::ScopedTempDir dir_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<ProcessSet> processes_;
  std::unique_ptr<Sandbox> sandbox_;
};

TEST_F(SandboxTest, EchoesStdinToStdout) {
  // The input arrives on stdin; the result is stdout, byte for byte; done runs on the loop.
  SandboxCall call = Call("cat", {"/bin/cat"});
  call.input = std::string("hello\nworld\0!", 13);
  const auto result = RunCall(call);
  ASSERT_OK(result);
  EXPECT_EQ(*result, call.input);
  EXPECT_EQ(sandbox_->running(), 0u);
  EXPECT_EQ(processes_->running(), 1u);  // the sandbox server, kept for the next call
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxTest, AScratchFolderRemovedBetweenCallsIsMadeAgain) {
  // The scratch folder is made on first use; a call that finds it gone makes it again, and runs
  // under the same supervisor program (which runs on from its removed file).
  ASSERT_OK(RunCall(Call("first", {"/bin/true"})));
  EXPECT_TRUE(fs::is_directory(scratch_.File("calls")));
  fs::remove_all(scratch_.File("calls"));
  const auto result = RunCall(Shell("second", "pwd; readlink /proc/$PPID/exe"));
  ASSERT_OK(result);
  const std::vector<std::string> lines = StrSplit(*result, '\n');
  ASSERT_EQ(lines.size(), 3u) << *result;
  EXPECT_EQ(lines[0].rfind(scratch_.File("calls") + "/second.", 0), 0u) << *result;
  EXPECT_EQ(lines[1].rfind(ExpectedSupervisor(), 0), 0u) << *result;
  EXPECT_TRUE(ScratchIsEmpty());
  EXPECT_TRUE(fs::is_directory(scratch_.File("calls")));
}

TEST_F(SandboxTest, NonZeroExitGivesTheStderrTail) {
  // A failing tool's error names the call, its exit status and the last lines of its stderr.
  const auto result = RunCall(Shell("tool-t1", "echo first >&2; echo 'bad thing' >&2; exit 3"));
  EXPECT_EQ(result.status(), Status::Backend("tool-t1", "exit code 3: first | bad thing"));

  // A long stderr is cut to its last whole lines within 300 bytes.
  const auto long_result =
      RunCall(Shell("tool-t2",
                    "i=0; while [ $i -lt 200 ]; do echo \"line $i of the error\" >&2; "
                    "i=$((i+1)); done; exit 1"));
  ASSERT_FALSE(long_result.ok());
  const std::string prefix = "tool-t2: exit code 1: ";
  const std::string message = long_result.status().message();
  ASSERT_EQ(message.substr(0, prefix.size()), prefix) << message;
  const std::vector<std::string> lines = StrSplit(message.substr(prefix.size()), '|');
  EXPECT_EQ(lines.back(), " line 199 of the error") << message;
  // 13 whole lines of 22 bytes fit in 300.
  EXPECT_EQ(lines.size(), 13u) << message;
  EXPECT_EQ(lines.front(), "line 187 of the error ") << message;
}

TEST_F(SandboxTest, TimeoutKillsTheWholeProcessGroup) {
  // Past its timeout the call's process group is killed, quickly, and kTimeout comes back once
  // nothing of it is left.
  SandboxCall call = Shell("slow", "sleep 30 & echo $! > " + dir_.File("child") + "; echo $$ > " +
                                       dir_.File("leader") + "; exec sleep 30");
  call.limits.timeout_s = 0.2;
  const Clock::time_point start = Clock::now();
  const auto result = RunCall(call);
  EXPECT_LT(Clock::now() - start, test::Deadline(std::chrono::seconds(10)));
  EXPECT_EQ(result.status(), Status(StatusCode::kTimeout, "slow: timed out after 0.2 s"));
  const std::string leader = ReadIfExists(dir_.File("leader"));
  const std::string child = ReadIfExists(dir_.File("child"));
  ASSERT_FALSE(leader.empty());
  ASSERT_FALSE(child.empty());
  EXPECT_FALSE(IsAlive(std::stoi(leader)));
  EXPECT_TRUE(Eventually([&] { return !IsAlive(std::stoi(child)); }));
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxTest, CpuLimitKillsABusyLoop) {
  // A tool spinning past cpu_seconds is stopped by the kernel, well before its timeout.
  SandboxCall call = Shell("spin", "while :; do :; done");
  call.limits.cpu_seconds = 1;
  call.limits.timeout_s = 15;
  const auto result = RunCall(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kBackend);
  const std::string message = result.status().message();
  EXPECT_TRUE(message.find("spin: killed by SIGXCPU") == 0 ||
              message.find("spin: killed by SIGKILL") == 0)
      << message;
}

TEST_F(SandboxTest, MemoryLimitMakesABigAllocationFail) {
  // With 256 MiB of address space, allocating 2 GiB fails inside the tool.
  SandboxCall call = Call("alloc", {"python3", "-c", "bytearray(2**31)"});
  call.limits.memory_bytes = 256 << 20;
  const auto result = RunCall(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kBackend);
  EXPECT_EQ(result.status().message().find("alloc: exit code 1: "), 0u)
      << result.status().ToString();
  EXPECT_NE(result.status().message().find("MemoryError"), std::string::npos)
      << result.status().ToString();
}

TEST_F(SandboxTest, OutputLimitIsAnError) {
  // More stdout than max_output_bytes is an error, not a truncated result.
  SandboxCall call = Shell("chatty", "head -c 2000 /dev/zero");
  call.limits.max_output_bytes = 1000;
  EXPECT_EQ(RunCall(call).status(), Status::Backend("chatty", "output exceeds 1000 bytes"));

  // Exactly the limit is fine.
  call.limits.max_output_bytes = 2000;
  const auto exact = RunCall(call);
  ASSERT_OK(exact);
  EXPECT_EQ(exact->size(), 2000u);

  // A tool that never stops writing is stopped at file_size_bytes by the kernel (SIGXFSZ).
  SandboxCall endless = Call("endless", {"yes"});
  endless.limits.file_size_bytes = 64 << 10;
  EXPECT_EQ(RunCall(endless).status(), Status::Backend("endless", "output exceeds 65536 bytes"));
}

TEST_F(SandboxTest, SecretsOfLibraAreNotVisible) {
  // Only the allow-list and the call's variables reach the tool; HOME and TMPDIR are its own.
  setenv("LIBRA_TEST_SECRET", "hunter2", 1);
  SandboxCall call = Call("env", {"/usr/bin/env"});
  call.env = {{"TOOL_SETTING", "on"}};
  const auto result = RunCall(call);
  unsetenv("LIBRA_TEST_SECRET");
  ASSERT_OK(result);
  EXPECT_EQ(result->find("LIBRA_TEST_SECRET"), std::string::npos) << *result;
  EXPECT_EQ(result->find("hunter2"), std::string::npos) << *result;
  EXPECT_NE(result->find("TOOL_SETTING=on\n"), std::string::npos) << *result;
  EXPECT_NE(result->find("HOME=" + scratch_.File("calls") + "/env."), std::string::npos) << *result;
  EXPECT_NE(result->find("TMPDIR=" + scratch_.File("calls") + "/env."), std::string::npos)
      << *result;
}

TEST_F(SandboxTest, HostileArgumentsArriveLiterally) {
  // No shell runs the call: separators, substitutions and quotes are plain bytes of arguments.
  const std::string marker = dir_.File("pwned");
  const std::vector<std::string> hostile = {";",
                                            "a; touch " + marker,
                                            "$(touch " + marker + ")",
                                            "`touch " + marker + "`",
                                            "'",
                                            "\"quoted\"",
                                            "a b",
                                            "|| touch " + marker,
                                            "&&",
                                            "> " + marker,
                                            "$HOME",
                                            "*"};
  std::vector<std::string> argv = {"printf", "%s\\n"};
  argv.insert(argv.end(), hostile.begin(), hostile.end());
  const auto result = RunCall(Call("argv", argv));
  ASSERT_OK(result);
  std::string expected;
  for (const std::string& arg : hostile) expected += arg + "\n";
  EXPECT_EQ(*result, expected);
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(SandboxTest, WorkingDirectoryIsFreshPrivateAndRemoved) {
  // Each call starts in an empty folder of its own (mode 0700), its HOME, which is removed with
  // whatever the tool left there, even a folder it locked itself out of.
  const std::string script =
      "pwd; ls -A; stat -c %a .; echo $HOME; mkdir -p d/e; touch d/e/f left; chmod 000 d";
  const auto first = RunCall(Shell("tool", script));
  ASSERT_OK(first);
  const std::vector<std::string> lines = StrSplit(*first, '\n');
  ASSERT_EQ(lines.size(), 4u) << *first;  // pwd, mode, HOME, "" (ls -A printed nothing).
  const std::string work = lines[0];
  EXPECT_EQ(work.rfind(scratch_.File("calls") + "/tool.", 0), 0u) << work;
  EXPECT_EQ(lines[1], "700");
  EXPECT_EQ(lines[2], work);
  EXPECT_FALSE(fs::exists(work));
  EXPECT_TRUE(ScratchIsEmpty());

  // A second call of the same name gets a new, empty folder.
  const auto second = RunCall(Shell("tool", script));
  ASSERT_OK(second);
  EXPECT_EQ(StrSplit(*second, '\n').size(), 4u) << *second;
  EXPECT_NE(StrSplit(*second, '\n')[0], work);
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxTest, DestructorStopsCallsInFlight) {
  // Destroying the sandbox kills its running calls, removes their folders, and runs no callback.
  int callbacks = 0;
  for (const std::string name : {"a", "b"}) {
    sandbox_->Run(Shell(name, "echo $$ > " + dir_.File(name) + "; trap '' TERM; exec sleep 30"),
                  [&](Result<std::string>) { ++callbacks; });
  }
  EXPECT_EQ(sandbox_->running(), 2u);
  ASSERT_TRUE(Eventually([&] {
    return !ReadIfExists(dir_.File("a")).empty() && !ReadIfExists(dir_.File("b")).empty();
  }));
  // A pending failure is dropped too.
  sandbox_->Run(Call("missing", {"libra-no-such-tool"}), [&](Result<std::string>) { ++callbacks; });
  sandbox_.reset();
  EXPECT_FALSE(IsAlive(std::stoi(ReadIfExists(dir_.File("a")))));
  EXPECT_FALSE(IsAlive(std::stoi(ReadIfExists(dir_.File("b")))));
  EXPECT_EQ(processes_->running(), 0u);
  EXPECT_TRUE(ScratchIsEmpty());
  EXPECT_EQ(
      loop_->RunUntil([] { return false; }, Clock::now() + std::chrono::milliseconds(50)).code(),
      StatusCode::kTimeout);
  EXPECT_EQ(callbacks, 0);
}

TEST_F(SandboxTest, AtMostMaxRunningCallsRunAndTheRestWait) {
  // With room for 2, the third and fourth calls wait; their timeouts start when they start, so
  // four 2 s calls with a 3 s timeout all succeed, in about 4 s (the last two would time out if
  // their timeouts started at Run).
  sandbox_ = std::make_unique<Sandbox>(loop_.get(), processes_.get(), scratch_.File("calls"), 2);
  int done = 0;
  int ok = 0;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < 4; ++i) {
    const std::string started = dir_.File("started-" + std::to_string(i));
    SandboxCall call =
        Shell("wait-" + std::to_string(i), "touch " + started + "; sleep 2; echo ok");
    call.limits.timeout_s = 3;
    sandbox_->Run(call, [&](Result<std::string> r) {
      ++done;
      ok += r.ok() && *r == "ok\n";
    });
  }
  EXPECT_EQ(sandbox_->running(), 4u);
  const auto started = [&] {
    int count = 0;
    for (int i = 0; i < 4; ++i) count += fs::exists(dir_.File("started-" + std::to_string(i)));
    return count;
  };
  // No third call starts before one of the first two is done.
  ASSERT_OK(loop_->RunUntil([&] { return done > 0 || started() > 2; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_GT(done, 0);
  EXPECT_OK(loop_->RunUntil([&] { return done == 4; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(ok, 4);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(4000));
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxTest, CallsRunUnderTheCarriedSupervisorOrElseUnderLibraItself) {
  // The supervisor libra carries is written into the scratch folder at the first call, whole and
  // executable only; the tool's parent is it. Without it, the tool's parent is this program
  // again. Either way the call's result is the same, and the sandbox takes its file away.
  const SandboxCall parent = Shell("parent", "readlink /proc/$PPID/exe");
  EXPECT_EQ(sandbox_->supervisor(), "");
  const auto carried = RunCall(parent);
  ASSERT_OK(carried);
  const std::string file = scratch_.File("calls") + "/" + kSupervisorFile;
  EXPECT_EQ(*carried, ExpectedSupervisor() + "\n");
  if (ExpectedSupervisor() == file) {
    EXPECT_EQ(sandbox_->supervisor(), file);
    struct stat st {};
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0500u);
  } else {
    EXPECT_EQ(sandbox_->supervisor(), "/proc/self/exe");  // noexec: nothing written
    EXPECT_FALSE(fs::exists(file));
  }
  EXPECT_TRUE(ScratchIsEmpty());
  sandbox_.reset();
  EXPECT_FALSE(fs::exists(file));

  sandbox_ =
      std::make_unique<Sandbox>(loop_.get(), processes_.get(), scratch_.File("calls"), 0, false);
  const auto itself = RunCall(parent);
  ASSERT_OK(itself);
  EXPECT_EQ(sandbox_->supervisor(), "/proc/self/exe");
  EXPECT_EQ(*itself, fs::read_symlink("/proc/self/exe").string() + "\n");
  EXPECT_FALSE(fs::exists(file));
}

// A call that prints the pid of the sandbox server: its supervisor's parent.
constexpr char kPrintServer[] = "cut -d' ' -f4 /proc/$PPID/stat";

TEST_F(SandboxTest, ACarriedSupervisorThatDoesNotStartGivesWayToLibraItself) {
  // The server dies and the carried file is damaged between calls: the next server, and the
  // calls' supervisors, are this program again, and so are the later ones; the damaged file is
  // removed.
  const auto server = RunCall(Shell("first", kPrintServer));
  ASSERT_OK(server);
  if (sandbox_->supervisor() == "/proc/self/exe") GTEST_SKIP() << "noexec scratch: none carried";
  const std::string file = sandbox_->supervisor();
  ASSERT_EQ(kill(std::stoi(*server), SIGKILL), 0);
  ASSERT_OK(loop_->RunUntil([&] { return processes_->running() == 0; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  // (Not while the server runs from it: the kernel refuses to write a running program.)
  fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
  test::WriteFile(file, "not a program");
  const std::string itself = fs::read_symlink("/proc/self/exe").string() + "\n";
  for (const char* name : {"second", "third"}) {
    const auto result = RunCall(Shell(name, "readlink /proc/$PPID/exe"));
    ASSERT_OK(result);
    EXPECT_EQ(*result, itself);
  }
  EXPECT_EQ(sandbox_->supervisor(), "/proc/self/exe");
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(SandboxTest, AServerThatDiesFailsItsCallsAndTheNextCallStartsAnother) {
  // The server is killed under a running call: the call fails, naming why; its supervisor, left
  // without its server, ends the tool and removes the call's folder; the next call runs.
  std::optional<Result<std::string>> result;
  sandbox_->Run(Shell("long", std::string(kPrintServer) + " > " + dir_.File("server") +
                                  "; echo $$ > " + dir_.File("tool") + "; exec sleep 30"),
                [&](Result<std::string> r) { result = std::move(r); });
  ASSERT_TRUE(Eventually([&] { return !ReadIfExists(dir_.File("tool")).empty(); }));
  ASSERT_EQ(kill(std::stoi(ReadIfExists(dir_.File("server"))), SIGKILL), 0);
  ASSERT_OK(loop_->RunUntil([&] { return result.has_value(); },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(result->status(),
            Status::Backend("long", "the sandbox server exited: killed by SIGKILL"));
  EXPECT_TRUE(Eventually([&] { return !IsAlive(std::stoi(ReadIfExists(dir_.File("tool")))); }));
  EXPECT_TRUE(Eventually([&] { return ScratchIsEmpty(); }));
  const auto next = RunCall(Shell("next", "echo ok"));
  ASSERT_OK(next);
  EXPECT_EQ(*next, "ok\n");
}

TEST_F(SandboxTest, SpawnFailureNamesTheProgram) {
  // A tool that is not installed fails on the loop, naming the program, and leaves no folder.
  const auto result = RunCall(Call("tool-x", {"libra-no-such-tool", "--flag"}));
  EXPECT_EQ(result.status().code(), StatusCode::kBackend);
  EXPECT_EQ(result.status().message().find("tool-x: cannot start 'libra-no-such-tool': not found"),
            0u)
      << result.status().ToString();
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxTest, InvalidCallsAreRefused) {
  // Names that would escape the scratch folder, empty commands and bad limits are refused.
  SandboxCall escape = Call("../x", {"true"});
  SandboxCall empty = Call("x", {});
  SandboxCall no_timeout = Call("x", {"true"});
  no_timeout.limits.timeout_s = 0;
  SandboxCall negative = Call("x", {"true"});
  negative.limits.memory_bytes = -1;
  for (const SandboxCall& call : {escape, empty, no_timeout, negative}) {
    EXPECT_EQ(RunCall(call).status().code(), StatusCode::kInvalidArgument) << call.name;
  }
  EXPECT_FALSE(fs::exists(scratch_.File("x")));
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxTest, CallbackMayStartTheNextCall) {
  // done may call Run: a chain of calls runs one after the other.
  std::vector<std::string> outputs;
  std::function<void(Result<std::string>)> next = [&](Result<std::string> result) {
    ASSERT_OK(result);
    outputs.push_back(*result);
    if (outputs.size() < 3) {
      SandboxCall call = Call("chain", {"cat"});
      call.input = std::to_string(outputs.size());
      sandbox_->Run(call, next);
    }
  };
  SandboxCall call = Call("chain", {"cat"});
  call.input = "0";
  sandbox_->Run(call, next);
  ASSERT_OK(loop_->RunUntil([&] { return outputs.size() == 3; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(outputs, (std::vector<std::string>{"0", "1", "2"}));
}

}  // namespace
}  // namespace libra::cluster
