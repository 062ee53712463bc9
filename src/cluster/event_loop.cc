#include "cluster/event_loop.h"

#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/strings.h"

namespace libra::cluster {
namespace {

// Events collected per epoll_wait; more simply wait for the next turn (level-triggered).
constexpr int kMaxEvents = 256;

std::string Errno() { return std::strerror(errno); }

// glibc 2.36 declares pidfd_open without C linkage (fixed in 2.37): call the kernel directly.
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Milliseconds from `now` until `until`, rounded up so that a timer never fires early; -1 (wait
// forever) for time_point::max().
int WaitMillis(EventLoop::Clock::time_point now, EventLoop::Clock::time_point until) {
  if (until == EventLoop::Clock::time_point::max()) return -1;
  if (until <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  return ms > 24 * 3600 * 1000 ? 24 * 3600 * 1000 : static_cast<int>(ms);
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

ExitStatus ExitStatus::FromSiginfo(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return ExitStatus{.code = info.si_status, .signal = 0};
  return ExitStatus{.code = -1, .signal = info.si_status};
}

std::string ExitStatus::ToString() const {
  if (signal == 0) return "exit code " + std::to_string(code);
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? StrFormat("killed by SIG%s", name)
                         : StrFormat("killed by signal %d", signal);
}

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  UniqueFd epoll_fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid()) return Status::Backend("event loop", "epoll_create1: " + Errno());
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(epoll_fd)));
}

EventLoop::~EventLoop() = default;

EventLoop::TimerId EventLoop::AddTimer(Clock::duration delay, std::function<void()> callback) {
  const TimerId id = next_timer_++;
  const Clock::time_point at = Clock::now() + delay;
  timers_.emplace(std::make_pair(at, id), std::move(callback));
  timer_deadline_.emplace(id, at);
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  const auto it = timer_deadline_.find(id);
  if (it == timer_deadline_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_deadline_.erase(it);
}

Status EventLoop::WatchFd(int fd, uint32_t events, FdCallback callback) {
  if (token_of_fd_.contains(fd)) {
    return Status::Internal(StrFormat("event loop: fd %d is already watched", fd));
  }
  const uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Status::Backend("event loop", StrFormat("cannot watch fd %d: %s", fd, Errno().c_str()));
  }
  watches_.emplace(token, std::make_shared<Watch>(Watch{fd, std::move(callback)}));
  token_of_fd_.emplace(fd, token);
  return Status();
}

Status EventLoop::ModifyFd(int fd, uint32_t events) {
  const auto it = token_of_fd_.find(fd);
  if (it == token_of_fd_.end()) {
    return Status::Internal(StrFormat("event loop: fd %d is not watched", fd));
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return Status::Backend("event loop",
                           StrFormat("cannot change fd %d's events: %s", fd, Errno().c_str()));
  }
  return Status();
}

void EventLoop::UnwatchFd(int fd) {
  const auto it = token_of_fd_.find(fd);
  if (it == token_of_fd_.end()) return;
  // Fails harmlessly (EBADF) when the owner closed the fd first, which removed it from the set.
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  watches_.erase(it->second);
  token_of_fd_.erase(it);
}

Status EventLoop::WatchChild(pid_t pid, ChildCallback callback) {
  if (children_.contains(pid)) {
    return Status::Internal(StrFormat("event loop: child %d is already watched", pid));
  }
  UniqueFd pidfd(PidfdOpen(pid));
  if (!pidfd.valid()) {
    return Status::Backend("event loop", StrFormat("pidfd_open(%d): %s (libra needs Linux 5.3+)",
                                                   pid, Errno().c_str()));
  }
  LIBRA_RETURN_IF_ERROR(
      WatchFd(pidfd.get(), EPOLLIN, [this, pid](uint32_t) { OnChildReady(pid); }));
  children_.emplace(pid, Child{std::move(pidfd), std::move(callback)});
  return Status();
}

void EventLoop::UnwatchChild(pid_t pid) {
  const auto it = children_.find(pid);
  if (it == children_.end()) return;
  UnwatchFd(it->second.pidfd.get());
  children_.erase(it);
}

void EventLoop::OnChildReady(pid_t pid) {
  siginfo_t info{};
  // WNOWAIT: look without reaping, so that the pid stays reserved while the callback runs.
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    LIBRA_CHECK(errno == EINTR) << "waitid(" << pid << "): " << Errno()
                                << " (a watched child was reaped elsewhere)";
    return;
  }
  if (info.si_pid == 0) return;
  const ExitStatus status = ExitStatus::FromSiginfo(info);
  const auto it = children_.find(pid);
  Child child = std::move(it->second);
  UnwatchFd(child.pidfd.get());
  children_.erase(it);
  child.callback(status);
  waitpid(pid, nullptr, WNOHANG);
}

void EventLoop::RunDueTimers(Clock::time_point now) {
  // Timers added by these callbacks have larger ids and wait for the next turn, so a timer that
  // re-arms itself with a zero delay cannot starve the fds.
  const TimerId newest = next_timer_ - 1;
  while (!timers_.empty() && !stop_requested_) {
    auto it = timers_.begin();
    if (it->first.first > now || it->first.second > newest) break;
    std::function<void()> callback = std::move(it->second);
    timer_deadline_.erase(it->first.second);
    timers_.erase(it);
    callback();
  }
}

Status EventLoop::RunUntil(const std::function<bool()>& done, Clock::time_point deadline) {
  LIBRA_CHECK(!running_) << "EventLoop::RunUntil called from one of its callbacks";
  running_ = true;
  struct Reset {
    EventLoop* loop;
    ~Reset() {
      loop->running_ = false;
      loop->stop_requested_ = false;
    }
  } reset{this};

  std::array<epoll_event, kMaxEvents> events;
  for (;;) {
    if (stop_requested_ || done()) return Status();
    Clock::time_point now = Clock::now();
    if (now >= deadline) return Status(StatusCode::kTimeout, "event loop: deadline passed");
    Clock::time_point wake = deadline;
    if (!timers_.empty() && timers_.begin()->first.first < wake) {
      wake = timers_.begin()->first.first;
    }
    const int n = epoll_wait(epoll_fd_.get(), events.data(), kMaxEvents, WaitMillis(now, wake));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Backend("event loop", "epoll_wait: " + Errno());
    }
    for (int i = 0; i < n && !stop_requested_; ++i) {
      const auto it = watches_.find(events[i].data.u64);
      if (it == watches_.end()) continue;
      // Holds the watch while its callback runs, which may unwatch it.
      const std::shared_ptr<Watch> watch = it->second;
      watch->callback(events[i].events);
    }
    RunDueTimers(Clock::now());
  }
}

}  // namespace libra::cluster
