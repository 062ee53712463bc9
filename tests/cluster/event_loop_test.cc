#include "cluster/event_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::cluster {
namespace {

using std::chrono::milliseconds;
using Clock = EventLoop::Clock;

std::unique_ptr<EventLoop> MakeLoop() {
  auto loop = EventLoop::Create();
  EXPECT_OK(loop);
  return std::move(loop).value();
}

Clock::time_point In(milliseconds ms) { return Clock::now() + ms; }

// A non-blocking pipe, closed on destruction.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
  Pipe() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
  void Send(const std::string& text) const {
    EXPECT_EQ(::write(write.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
};

// Starts `sh -c script` as a plain child (no ProcessSet), for WatchChild.
pid_t SpawnShell(const std::string& script) {
  pid_t pid = 0;
  std::string sh = "/bin/sh";
  std::string c = "-c";
  std::string body = script;
  char* argv[] = {sh.data(), c.data(), body.data(), nullptr};
  char* envp[] = {nullptr};
  EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv, envp), 0);
  return pid;
}

TEST(EventLoopTest, TimersRunInDeadlineOrderThenInsertionOrder) {
  // Timers fire by deadline; two with the same delay fire in the order they were added.
  auto loop = MakeLoop();
  std::vector<std::string> fired;
  loop->AddTimer(milliseconds(30), [&] { fired.push_back("late"); });
  loop->AddTimer(milliseconds(0), [&] { fired.push_back("first"); });
  loop->AddTimer(milliseconds(0), [&] { fired.push_back("second"); });
  loop->AddTimer(milliseconds(10), [&] { fired.push_back("middle"); });
  ASSERT_OK(
      loop->RunUntil([&] { return fired.size() == 4; }, In(test::Deadline(milliseconds(30000)))));
  EXPECT_EQ(fired, (std::vector<std::string>{"first", "second", "middle", "late"}));
}

TEST(EventLoopTest, TimerNeverFiresEarly) {
  // A timer's callback runs no sooner than its delay.
  auto loop = MakeLoop();
  const Clock::time_point start = Clock::now();
  Clock::time_point fired_at;
  loop->AddTimer(milliseconds(25), [&] { fired_at = Clock::now(); });
  ASSERT_OK(loop->RunUntil([&] { return fired_at != Clock::time_point(); },
                           In(test::Deadline(milliseconds(30000)))));
  EXPECT_GE(fired_at - start, milliseconds(25));
}

TEST(EventLoopTest, CancelledTimerDoesNotRun) {
  // A cancelled timer never runs; cancelling twice or after it ran is harmless.
  auto loop = MakeLoop();
  bool cancelled_ran = false;
  bool other_ran = false;
  const EventLoop::TimerId id = loop->AddTimer(milliseconds(5), [&] { cancelled_ran = true; });
  const EventLoop::TimerId other = loop->AddTimer(milliseconds(10), [&] { other_ran = true; });
  loop->CancelTimer(id);
  loop->CancelTimer(id);
  ASSERT_OK(loop->RunUntil([&] { return other_ran; }, In(test::Deadline(milliseconds(30000)))));
  loop->CancelTimer(other);
  EXPECT_FALSE(cancelled_ran);
}

TEST(EventLoopTest, DeadlineGivesTimeout) {
  // With nothing to do, RunUntil returns kTimeout at its deadline, not much later.
  auto loop = MakeLoop();
  const Clock::time_point start = Clock::now();
  const Status status = loop->RunUntil([] { return false; }, In(milliseconds(30)));
  EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.ToString();
  EXPECT_GE(Clock::now() - start, milliseconds(30));
  EXPECT_LT(Clock::now() - start, test::Deadline(milliseconds(10000)));
}

TEST(EventLoopTest, StopEndsRunUntilAfterTheCurrentCallback) {
  // Stop() from a callback returns OK from RunUntil; later timers wait for the next run.
  auto loop = MakeLoop();
  bool later_ran = false;
  loop->AddTimer(milliseconds(0), [&] { loop->Stop(); });
  loop->AddTimer(milliseconds(0), [&] { later_ran = true; });
  ASSERT_OK(loop->RunUntil([] { return false; }, In(test::Deadline(milliseconds(30000)))));
  EXPECT_FALSE(later_ran);
  ASSERT_OK(loop->RunUntil([&] { return later_ran; }, In(test::Deadline(milliseconds(30000)))));
}

TEST(EventLoopTest, WatchedFdCallsBackWhileReadable) {
  // A readable fd calls back (level-triggered) until drained; unwatched it stays silent.
  auto loop = MakeLoop();
  Pipe pipe;
  std::string got;
  ASSERT_OK(loop->WatchFd(pipe.read.get(), EPOLLIN, [&](uint32_t ready) {
    EXPECT_TRUE(ready & EPOLLIN);
    char c;
    if (read(pipe.read.get(), &c, 1) == 1) got += c;
  }));
  pipe.Send("abc");
  ASSERT_OK(
      loop->RunUntil([&] { return got.size() == 3; }, In(test::Deadline(milliseconds(30000)))));
  EXPECT_EQ(got, "abc");
  loop->UnwatchFd(pipe.read.get());
  pipe.Send("d");
  EXPECT_EQ(loop->RunUntil([] { return false; }, In(milliseconds(20))).code(),
            StatusCode::kTimeout);
  EXPECT_EQ(got, "abc");
}

TEST(EventLoopTest, WatchingAnFdTwiceIsAnError) {
  // One callback per fd: a second WatchFd is refused, ModifyFd of an unwatched fd too.
  auto loop = MakeLoop();
  Pipe pipe;
  ASSERT_OK(loop->WatchFd(pipe.read.get(), EPOLLIN, [](uint32_t) {}));
  EXPECT_EQ(loop->WatchFd(pipe.read.get(), EPOLLIN, [](uint32_t) {}).code(), StatusCode::kInternal);
  EXPECT_EQ(loop->ModifyFd(pipe.write.get(), EPOLLOUT).code(), StatusCode::kInternal);
  loop->UnwatchFd(pipe.read.get());
}

TEST(EventLoopTest, UnwatchDropsEventsAlreadyCollected) {
  // Two fds ready in one wait: the first callback unwatches the second, which never runs.
  auto loop = MakeLoop();
  Pipe a;
  Pipe b;
  int a_calls = 0;
  int b_calls = 0;
  ASSERT_OK(loop->WatchFd(a.read.get(), EPOLLIN, [&](uint32_t) {
    ++a_calls;
    loop->UnwatchFd(a.read.get());
    loop->UnwatchFd(b.read.get());
    loop->Stop();
  }));
  ASSERT_OK(loop->WatchFd(b.read.get(), EPOLLIN, [&](uint32_t) {
    ++b_calls;
    loop->UnwatchFd(a.read.get());
    loop->UnwatchFd(b.read.get());
    loop->Stop();
  }));
  a.Send("x");
  b.Send("x");
  ASSERT_OK(loop->RunUntil([] { return false; }, In(test::Deadline(milliseconds(30000)))));
  EXPECT_EQ(a_calls + b_calls, 1);
}

TEST(EventLoopTest, ZeroDelayTimerLoopDoesNotStarveFds) {
  // A timer that re-arms itself with a zero delay still lets a ready fd be served.
  auto loop = MakeLoop();
  Pipe pipe;
  bool fd_served = false;
  std::function<void()> spin = [&] { loop->AddTimer(milliseconds(0), spin); };
  loop->AddTimer(milliseconds(0), spin);
  ASSERT_OK(loop->WatchFd(pipe.read.get(), EPOLLIN, [&](uint32_t) { fd_served = true; }));
  pipe.Send("x");
  ASSERT_OK(loop->RunUntil([&] { return fd_served; }, In(test::Deadline(milliseconds(30000)))));
  loop->UnwatchFd(pipe.read.get());
}

TEST(EventLoopTest, WatchChildReportsExitCodeAndSignal) {
  // Child exits arrive as loop callbacks: an exit code, or the signal that killed it.
  auto loop = MakeLoop();
  std::vector<ExitStatus> statuses(2);
  int done = 0;
  const pid_t exits = SpawnShell("exit 3");
  const pid_t killed = SpawnShell("kill -KILL $$");
  ASSERT_OK(loop->WatchChild(exits, [&](const ExitStatus& s) {
    statuses[0] = s;
    ++done;
  }));
  ASSERT_OK(loop->WatchChild(killed, [&](const ExitStatus& s) {
    statuses[1] = s;
    ++done;
  }));
  ASSERT_OK(loop->RunUntil([&] { return done == 2; }, In(test::Deadline(milliseconds(30000)))));
  EXPECT_EQ(statuses[0], (ExitStatus{.code = 3, .signal = 0}));
  EXPECT_EQ(statuses[0].ToString(), "exit code 3");
  EXPECT_EQ(statuses[1], (ExitStatus{.code = -1, .signal = SIGKILL}));
  EXPECT_EQ(statuses[1].ToString(), "killed by SIGKILL");
  // Both were reaped after their callbacks.
  EXPECT_EQ(waitpid(exits, nullptr, WNOHANG), -1);
  EXPECT_EQ(waitpid(killed, nullptr, WNOHANG), -1);
}

TEST(EventLoopTest, ChildIsStillAZombieDuringItsCallback) {
  // The callback runs before the reap, so the pid cannot have been reused yet.
  auto loop = MakeLoop();
  const pid_t pid = SpawnShell("exit 0");
  bool called = false;
  bool zombie_seen = false;
  ASSERT_OK(loop->WatchChild(pid, [&](const ExitStatus&) {
    called = true;
    zombie_seen = kill(pid, 0) == 0;
  }));
  ASSERT_OK(loop->RunUntil([&] { return called; }, In(test::Deadline(milliseconds(30000)))));
  EXPECT_TRUE(zombie_seen);
}

}  // namespace
}  // namespace libra::cluster
