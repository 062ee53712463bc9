// HttpTransport: every HTTP request of the cluster backend (engine turns, trainer steps, health
// checks) on libcurl's multi interface, driven by the EventLoop: curl's sockets and timers are
// registered with the loop (CURLMOPT_SOCKETFUNCTION / TIMERFUNCTION) and advanced with
// curl_multi_socket_action, so thousands of requests are in flight with no thread per request and
// the one wait of the process stays epoll_wait. Connections are kept alive and reused; every
// request has its own timeout. An HTTP error status is a reply like any other; a request that gets
// no whole reply (refused, timed out, cut short, not HTTP) fails with kBackend naming its URL and
// the reason. Servers are reached directly: an http_proxy in libra's environment is ignored. curl
// is included only by the .cc file.
//
// Cost (libra_cluster_bench, one core): 20-35 us of controller CPU per request up to a thousand
// in flight, 60-75 us at 5,000-10,000 in flight over 16 servers. libcurl 7.x walks a multi
// handle's whole connection cache when a request ends, so the cost grows with connections: each
// server ("scheme://host:port") gets its own multi handle, so that a walk covers that server's
// connections only; 10,000 in flight to a single server cost about 120 us each.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/http.h"
#include "common/status.h"

namespace libra::cluster {

/// Bytes of one reply body; a longer reply fails its request ("the reply is larger than libra's
/// limit"), so that no server can make libra allocate without bound.
inline constexpr size_t kMaxReplyBytes = size_t{64} << 20;

struct HttpTransportOptions {
  /// Most connections open at once to one host and port; requests beyond it wait for a free
  /// connection. 0: no limit. Default: 0.
  long max_host_connections = 0;
  /// How long to wait for a connection to be set up. Default: 10 s.
  std::chrono::milliseconds connect_timeout{10000};
};

class HttpTransport {
 public:
  /// Calls curl_global_init (reference-counted by libcurl; undone on destruction).
  /// REQUIRES: `loop` outlives the transport. kBackend when libcurl cannot be initialised.
  static Result<std::unique_ptr<HttpTransport>> Create(EventLoop* loop,
                                                       HttpTransportOptions options = {});
  /// Abandons the requests in flight (their callbacks never run) and pending health checks.
  /// REQUIRES: not called from one of its callbacks.
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  /// Sends `request`; `callback` runs once, on the loop and never inside Send, with the reply
  /// (any status) or the error: kBackend "<METHOD> <url>: <reason>" when no whole reply came
  /// (connection refused, timeout, truncated or malformed reply), kInvalidArgument for a method
  /// other than GET, POST, PUT or DELETE.
  void Send(const HttpRequest& request, HttpCallback callback);

  /// Polls `url` with GET every `interval` until it answers 200; `done` then runs with OK, or
  /// with kTimeout "<url>: not healthy after <t> s (last: <reason>)" once `timeout` has passed.
  void WaitHealthy(const std::string& url, std::chrono::milliseconds timeout,
                   std::function<void(Status)> done,
                   std::chrono::milliseconds interval = std::chrono::milliseconds(200));

  /// Requests sent whose callback has not run yet.
  size_t in_flight() const { return in_flight_; }

 private:
  struct Transfer;
  struct HealthCheck;
  // One server's multi handle and its timer on the loop.
  struct Multi;
  // curl_multi_cleanup.
  struct MultiDeleter {
    void operator()(void* multi) const;
  };

  HttpTransport(EventLoop* loop, HttpTransportOptions options);
  // curl's socket and timer callbacks (CURL* and CURLM* are void* in curl's headers); `multi`
  // is the Multi.
  static int OnCurlSocket(void* easy, int fd, int what, void* multi, void* socket_data);
  static int OnCurlTimer(void* handle, long timeout_ms, void* multi);
  // The multi handle of `url`'s server, made on first use; null when curl cannot make one.
  Multi* MultiFor(const std::string& url);
  // Tells `multi`'s curl that `fd` is ready, or (CURL_SOCKET_TIMEOUT) that its timer expired,
  // and runs the callbacks of the transfers that finished.
  void Advance(Multi& multi, int fd, int curl_events);
  // Runs `callback(error)` at the loop's next turn.
  void FailLater(HttpCallback callback, Status error);
  void Probe(const std::shared_ptr<HealthCheck>& check);
  void AddOwnedTimer(EventLoop::Clock::duration delay, std::function<void()> callback);

  EventLoop* loop_;
  HttpTransportOptions options_;
  // By server, "scheme://host:port".
  std::unordered_map<std::string, std::unique_ptr<Multi>> multis_;
  // curl's sockets watched on the loop.
  std::set<int> watched_fds_;
  // Timers this transport armed besides curl's (health probes, deferred failures).
  std::set<EventLoop::TimerId> timers_;
  // Transfers in flight by easy handle, and finished ones kept for reuse.
  std::unordered_map<void*, std::unique_ptr<Transfer>> active_;
  std::vector<std::unique_ptr<Transfer>> idle_;
  size_t in_flight_ = 0;
};

/// Raises this process's soft limit on open files to its hard limit: every connection is a file
/// descriptor, and the usual soft limit (1024) caps requests in flight far below what the
/// transport handles. Returns the new soft limit; kBackend when it cannot be read or set.
Result<long> RaiseOpenFileLimit();

}  // namespace libra::cluster
