// libra_http_stub: an HTTP/1.1 server that answers every request with `200 {}` at once, or after
// N ms for the path /hold/<N>, on keep-alive connections, on one or more ports of 127.0.0.1 (one
// per simulated engine): a stand-in for thousands of engine replies, for libra_cluster_bench
// only. One thread, one epoll set, level-triggered; held replies wait in one FIFO (all holds of a
// run are equal, so FIFO order is deadline order).
//
//   libra_http_stub 8000 8001 8002
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace {

using Clock = std::chrono::steady_clock;

constexpr char kReply[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";

struct Connection {
  std::string in;
  std::string out;
  // Bumped when the fd is closed, so that a held reply for an old connection is dropped.
  uint64_t generation = 0;
  bool open = false;
};

struct Held {
  Clock::time_point due;
  int fd;
  uint64_t generation;
};

class Server {
 public:
  Server(int epoll_fd, std::set<int> listeners)
      : epoll_(epoll_fd), listeners_(std::move(listeners)) {}

  [[noreturn]] void Run() {
    epoll_event events[512];
    for (;;) {
      int timeout = -1;
      if (!held_.empty()) {
        const auto wait =
            std::chrono::ceil<std::chrono::milliseconds>(held_.front().due - Clock::now());
        timeout = wait.count() < 0 ? 0 : static_cast<int>(wait.count());
      }
      const int n = epoll_wait(epoll_, events, 512, timeout);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (listeners_.contains(fd)) {
          Accept(fd);
        } else {
          if (events[i].events & EPOLLOUT) Flush(fd);
          if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) Read(fd);
        }
      }
      const Clock::time_point now = Clock::now();
      while (!held_.empty() && held_.front().due <= now) {
        const Held held = held_.front();
        held_.pop_front();
        Connection& c = connections_[held.fd];
        if (!c.open || c.generation != held.generation) continue;
        c.out += kReply;
        Flush(held.fd);
      }
    }
  }

 private:
  void Accept(int listener) {
    for (;;) {
      const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Connection& c = connections_[fd];
      c.open = true;
      c.in.clear();
      c.out.clear();
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
    }
  }

  void Close(int fd) {
    Connection& c = connections_[fd];
    c.open = false;
    ++c.generation;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
  }

  void Read(int fd) {
    Connection& c = connections_[fd];
    char buffer[16384];
    for (;;) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n > 0) {
        c.in.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || errno != EAGAIN) {
        Close(fd);
        return;
      }
      break;
    }
    // Answers every complete request: headers, then Content-Length bytes of body.
    for (;;) {
      const size_t end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) break;
      size_t body = 0;
      const size_t length = c.in.find("Content-Length:");
      if (length != std::string::npos && length < end)
        body = std::strtoul(&c.in[length + 15], nullptr, 10);
      if (c.in.size() < end + 4 + body) break;
      const size_t hold = c.in.find(" /hold/");
      const long hold_ms = hold != std::string::npos && hold < end ? std::atol(&c.in[hold + 7]) : 0;
      c.in.erase(0, end + 4 + body);
      if (hold_ms > 0) {
        held_.push_back(Held{Clock::now() + std::chrono::milliseconds(hold_ms), fd, c.generation});
      } else {
        c.out += kReply;
      }
    }
    Flush(fd);
  }

  void Flush(int fd) {
    Connection& c = connections_[fd];
    if (!c.open) return;
    while (!c.out.empty()) {
      const ssize_t n = write(fd, c.out.data(), c.out.size());
      if (n < 0) {
        if (errno != EAGAIN) Close(fd);
        break;
      }
      c.out.erase(0, static_cast<size_t>(n));
    }
    if (!c.open) return;
    epoll_event ev{};
    ev.events = c.out.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT;
    ev.data.fd = fd;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);
  }

  int epoll_;
  std::set<int> listeners_;
  std::unordered_map<int, Connection> connections_;
  std::deque<Held> held_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: libra_http_stub PORT...\n");
    return 2;
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);

  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  std::set<int> listeners;
  for (int i = 1; i < argc; ++i) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[i])));
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listener, 65535) != 0) {
      std::fprintf(stderr, "libra_http_stub: cannot listen on port %s: %s\n", argv[i],
                   std::strerror(errno));
      return 1;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listener;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &ev);
    listeners.insert(listener);
  }
  Server(epoll_fd, std::move(listeners)).Run();
}
