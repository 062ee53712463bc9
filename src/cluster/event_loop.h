// EventLoop: the cluster backend's single wait. Everything the backend waits for (child processes
// exiting, sockets becoming readable or writable: libcurl's connections, the signal self-pipe,
// timers) is one epoll set, and the only blocking call is epoll_wait. Callbacks run one at a time
// on the thread that runs the loop, so the backend's state needs no locks and no thread per
// request or per process.
//
// Why epoll driven by libcurl's socket interface (HttpTransport calls curl_multi_socket_action
// from these callbacks) rather than curl_multi_poll with extra fds: curl_multi_poll rebuilds a
// poll set of every connection on each call, O(connections) per wake-up, and knows nothing of our
// timers; with thousands of requests in flight, epoll's O(ready) wake-up keeps the controller's
// cost per request flat. Child exits arrive as pidfds (Linux >= 5.3), so there is no SIGCHLD
// handler and no process-wide state.
//
// The loop does not own what it watches: whoever watches an fd closes it, whoever starts a child
// stops it (ProcessSet).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/status.h"

namespace libra::cluster {

/// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  /// Closes the held fd (if any) and holds `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// How a child process ended.
struct ExitStatus {
  /// Exit code when it exited; -1 when a signal killed it.
  int code = -1;
  /// The signal that killed it; 0 when it exited.
  int signal = 0;

  /// From what waitid() says of an exited child.
  static ExitStatus FromSiginfo(const siginfo_t& info);
  bool success() const { return signal == 0 && code == 0; }
  /// "exit code 3" or "killed by SIGKILL".
  std::string ToString() const;
  bool operator==(const ExitStatus&) const = default;
};

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = uint64_t;
  using FdCallback = std::function<void(uint32_t ready)>;
  using ChildCallback = std::function<void(const ExitStatus&)>;

  /// kBackend when the kernel refuses an epoll instance.
  static Result<std::unique_ptr<EventLoop>> Create();
  /// Closes the loop's own fds (epoll, pidfds). Watched fds are their owners' to close, and
  /// watched children are neither stopped nor reaped: stop them (ProcessSet) before.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  /// Runs `callback` once on the loop, `delay` from now (zero: at the loop's next turn, after the
  /// events already pending). Timers due at the same time run in the order they were added.
  TimerId AddTimer(Clock::duration delay, std::function<void()> callback);
  /// Cancels a timer that has not run yet; no-op otherwise.
  void CancelTimer(TimerId id);

  /// Calls `callback(ready)` whenever `fd` is ready for any of `events` (EPOLLIN, EPOLLOUT;
  /// level-triggered); `ready` may also hold EPOLLERR or EPOLLHUP. The caller keeps `fd` open
  /// until UnwatchFd. kInternal when `fd` is already watched; kBackend when epoll refuses it.
  Status WatchFd(int fd, uint32_t events, FdCallback callback);
  /// Changes the events a watched fd waits for. kInternal when it is not watched.
  Status ModifyFd(int fd, uint32_t events);
  /// Stops watching `fd`: its callback never runs again, even for events already collected.
  /// No-op when it is not watched.
  void UnwatchFd(int fd);

  /// Calls `callback(status)` once child `pid` has exited, then reaps it. The callback runs while
  /// the child is still a zombie, so its pid and process-group id cannot have been reused yet:
  /// the callback may still signal what is left of the child's process group.
  /// REQUIRES: `pid` is a child of this process that nothing else reaps.
  /// kInternal when `pid` is already watched; kBackend when pidfd_open fails (Linux < 5.3).
  Status WatchChild(pid_t pid, ChildCallback callback);
  /// Forgets `pid` without reaping it (its owner reaps it); no-op when it is not watched.
  void UnwatchChild(pid_t pid);

  /// Runs callbacks until `done()` holds (checked before every wait), Stop() is called, or
  /// `deadline` passes. OK for `done()` or Stop(); kTimeout when the deadline came first;
  /// kBackend when epoll_wait fails.
  /// REQUIRES: not called from one of this loop's callbacks.
  Status RunUntil(const std::function<bool()>& done,
                  Clock::time_point deadline = Clock::time_point::max());
  /// Makes RunUntil return once the callback running now returns (or at once, before its next
  /// wait, when called outside a callback).
  void Stop() { stop_requested_ = true; }

 private:
  struct Watch {
    int fd = -1;
    FdCallback callback;
  };
  struct Child {
    UniqueFd pidfd;
    ChildCallback callback;
  };

  explicit EventLoop(UniqueFd epoll_fd) : epoll_fd_(std::move(epoll_fd)) {}
  // Runs the timers due at `now` that existed when it was called.
  void RunDueTimers(Clock::time_point now);
  void OnChildReady(pid_t pid);

  UniqueFd epoll_fd_;
  // Each WatchFd gets a fresh token, which epoll hands back with the fd's events: an event
  // collected for a registration that has since gone (or been replaced on the same fd number)
  // finds no token and is dropped.
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Watch>> watches_;
  std::unordered_map<int, uint64_t> token_of_fd_;
  // Timers in (deadline, id) order; id breaks ties in the order added.
  TimerId next_timer_ = 1;
  std::map<std::pair<Clock::time_point, TimerId>, std::function<void()>> timers_;
  std::unordered_map<TimerId, Clock::time_point> timer_deadline_;
  std::unordered_map<pid_t, Child> children_;
  bool running_ = false;
  bool stop_requested_ = false;
};

}  // namespace libra::cluster
