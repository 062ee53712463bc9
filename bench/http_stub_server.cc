// libra_http_stub: an instant-reply HTTP/1.1 server for the cluster controller's load benchmarks,
// and nothing else: it is never used to check that libra is correct (the CPU workers in workers/
// are). One thread, one epoll set, level-triggered, keep-alive connections on one or more ports
// of 127.0.0.1; held replies wait in one FIFO (all holds of a run are equal, so FIFO order is
// deadline order). Three modes:
//
//   libra_http_stub PORT...
//     Answers every request `200 {}` at once, or after N ms for the path /hold/<N>
//     (libra_cluster_bench: the HTTP transport alone).
//
//   libra_http_stub --serve-libra [--hold-ms H] [--tokens K] [--stop-token T] PORT...
//     An SGLang engine and a trainer in one, for libra_cluster_backend_bench. POST /generate
//     answers after H ms (default 0) with min(K, max_new_tokens) tokens (default K 8), the last
//     one T (default 2), finish_reason {"type": "stop", "matched": T}, the prompt_tokens counted
//     from input_ids and a logprob per token. The trainer protocol (docs/cluster.md): /train_step
//     echoes the step, answers version step + 1 and tokens = the sum of the loss masks;
//     /save_weights echoes path and version and creates an empty file at the path; /join and
//     /leave keep the replica set; GET /health answers {"status": "ok", "version": v}. POST /tool
//     answers as a tool server (an [agent] tool_url): {"tokens": [4 ids], "status": "success"}.
//     Every other path (weight updates, memory release and resume, aborts) answers
//     {"success": true}.
//     Nothing is validated beyond what it needs to answer.
//
//   libra_http_stub --task prompt|tool|reward [--tokens K]
//     Prints what an [agent] command prints: {"tokens": [K ids]} (prompt, tool) or
//     {"reward": 0 or 1} (reward, from the pid's parity, so that GRPO groups have a spread).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <string_view>
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
  // Empty: kReply.
  std::string reply;
};

// --serve-libra's settings and the trainer's state.
struct LibraMode {
  bool on = false;
  long hold_ms = 0;
  long tokens = 8;
  long stop_token = 2;
  long version = 0;
  std::set<std::string> replicas = {"replica-0"};
};

// The text after `"key":` (spaces skipped) in `body`, or npos.
size_t ValueOf(std::string_view body, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  size_t at = body.find(quoted);
  if (at == std::string_view::npos) return at;
  at = body.find(':', at + quoted.size());
  if (at == std::string_view::npos) return at;
  ++at;
  while (at < body.size() && body[at] == ' ') ++at;
  return at;
}

long IntOf(std::string_view body, std::string_view key, long fallback) {
  const size_t at = ValueOf(body, key);
  return at == std::string_view::npos ? fallback : std::atol(body.data() + at);
}

// The JSON string literal (quotes included) of member `key`, or "".
std::string_view StringOf(std::string_view body, std::string_view key) {
  const size_t at = ValueOf(body, key);
  if (at == std::string_view::npos || body[at] != '"') return {};
  size_t end = at + 1;
  while (end < body.size() && body[end] != '"') end += body[end] == '\\' ? 2 : 1;
  return end < body.size() ? body.substr(at, end - at + 1) : std::string_view{};
}

// The numbers in the array value of member `key` starting at `from`: their count and sum;
// `next` receives where the array ends.
std::pair<long, long> ArrayOf(std::string_view body, std::string_view key, size_t from,
                              size_t* next) {
  *next = std::string_view::npos;
  const size_t at = ValueOf(body.substr(from), key);
  if (at == std::string_view::npos || body[from + at] != '[') return {0, 0};
  long count = 0;
  long sum = 0;
  size_t i = from + at + 1;
  while (i < body.size() && body[i] != ']') {
    if ((body[i] >= '0' && body[i] <= '9') || body[i] == '-') {
      char* end = nullptr;
      sum += std::strtol(body.data() + i, &end, 10);
      ++count;
      i = static_cast<size_t>(end - body.data());
    } else {
      ++i;
    }
  }
  *next = i;
  return {count, sum};
}

std::string Http200(const std::string& json) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(json.size()) + "\r\n\r\n" + json;
}

std::string Generate(const LibraMode& mode, std::string_view body) {
  size_t next = 0;
  const long prompt = ArrayOf(body, "input_ids", 0, &next).first;
  const long n = std::max(1L, std::min(mode.tokens, IntOf(body, "max_new_tokens", mode.tokens)));
  const std::string stop = std::to_string(mode.stop_token);
  std::string ids;
  std::string logprobs;
  for (long i = 0; i < n; ++i) {
    const std::string id = i + 1 == n ? stop : "5";
    ids += (i ? "," : "") + id;
    logprobs += (i ? ",[-0.5," : "[-0.5,") + id + ",null]";
  }
  return Http200("{\"text\":\"\",\"output_ids\":[" + ids + "],\"meta_info\":{\"prompt_tokens\":" +
                 std::to_string(prompt) + ",\"completion_tokens\":" + std::to_string(n) +
                 ",\"finish_reason\":{\"type\":\"stop\",\"matched\":" + stop +
                 "},\"output_token_logprobs\":[" + logprobs + "],\"weight_version\":\"" +
                 std::to_string(mode.version) + "\"}}");
}

std::string Membership(const LibraMode& mode) {
  std::string names;
  for (const std::string& r : mode.replicas) names += (names.empty() ? "\"" : ",\"") + r + "\"";
  return Http200("{\"replicas\":[" + names +
                 "],\"dp_size\":" + std::to_string(mode.replicas.size()) + "}");
}

// The reply of --serve-libra to `path` with `body`.
std::string Answer(LibraMode& mode, std::string_view path, std::string_view body) {
  if (path == "/generate") return Generate(mode, body);
  if (path == "/health") {
    return Http200("{\"status\":\"ok\",\"version\":" + std::to_string(mode.version) + "}");
  }
  if (path == "/train_step") {
    const long step = IntOf(body, "step", 0);
    long tokens = 0;
    for (size_t at = 0; at != std::string_view::npos;) {
      tokens += ArrayOf(body, "loss_mask", at, &at).second;
    }
    mode.version = step + 1;
    return Http200("{\"step\":" + std::to_string(step) +
                   ",\"version\":" + std::to_string(mode.version) +
                   ",\"loss\":0,\"kl\":0,\"grad_norm\":0,\"tokens\":" + std::to_string(tokens) +
                   ",\"seconds\":0}");
  }
  if (path == "/save_weights") {
    const std::string_view quoted = StringOf(body, "path");
    const std::string file(quoted.size() >= 2 ? quoted.substr(1, quoted.size() - 2) : "");
    if (!file.empty() && file.find('\\') == std::string::npos) {
      const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) close(fd);
    }
    return Http200("{\"path\":" + std::string(quoted.empty() ? "\"\"" : quoted) + ",\"version\":" +
                   std::to_string(IntOf(body, "version", mode.version)) + ",\"seconds\":0}");
  }
  if (path == "/tool") return Http200("{\"tokens\":[10,11,12,13],\"status\":\"success\"}");
  if (path == "/join" || path == "/leave") {
    const std::string_view quoted = StringOf(body, "replica");
    const std::string name(quoted.size() >= 2 ? quoted.substr(1, quoted.size() - 2) : "");
    if (path == "/join") {
      mode.replicas.insert(name);
    } else {
      mode.replicas.erase(name);
    }
    return Membership(mode);
  }
  return Http200("{\"success\":true}");
}

class Server {
 public:
  Server(int epoll_fd, std::set<int> listeners, LibraMode mode)
      : epoll_(epoll_fd), listeners_(std::move(listeners)), mode_(std::move(mode)) {}

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
        c.out += held.reply.empty() ? std::string(kReply) : held.reply;
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
      if (mode_.on) {
        // The request line: METHOD PATH[?QUERY] HTTP/1.1.
        const size_t space = c.in.find(' ');
        const size_t path_end = c.in.find_first_of(" ?", space + 1);
        const std::string path = c.in.substr(space + 1, path_end - space - 1);
        std::string reply = Answer(mode_, path, std::string_view(c.in).substr(end + 4, body));
        c.in.erase(0, end + 4 + body);
        if (path == "/generate" && mode_.hold_ms > 0) {
          held_.push_back(Held{Clock::now() + std::chrono::milliseconds(mode_.hold_ms), fd,
                               c.generation, std::move(reply)});
        } else {
          c.out += reply;
        }
        continue;
      }
      const size_t hold = c.in.find(" /hold/");
      const long hold_ms = hold != std::string::npos && hold < end ? std::atol(&c.in[hold + 7]) : 0;
      c.in.erase(0, end + 4 + body);
      if (hold_ms > 0) {
        held_.push_back(
            Held{Clock::now() + std::chrono::milliseconds(hold_ms), fd, c.generation, {}});
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
  LibraMode mode_;
};

// --task: what an [agent] command prints.
int Task(const std::string& kind, long tokens) {
  if (kind == "reward") {
    std::printf("{\"reward\": %d}\n", static_cast<int>(getpid() % 2));
    return 0;
  }
  if (kind != "prompt" && kind != "tool") {
    std::fprintf(stderr, "libra_http_stub: --task prompt|tool|reward, not %s\n", kind.c_str());
    return 2;
  }
  std::string ids;
  for (long i = 0; i < tokens; ++i) ids += (i ? ", " : "") + std::to_string(10 + i % 20);
  std::printf("{\"tokens\": [%s]%s}\n", ids.c_str(),
              kind == "tool" ? ", \"status\": \"success\"" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  LibraMode mode;
  std::string task;
  int first_port = 1;
  for (; first_port < argc && argv[first_port][0] == '-'; ++first_port) {
    const std::string flag = argv[first_port];
    if (flag == "--serve-libra") {
      mode.on = true;
      continue;
    }
    if (first_port + 1 >= argc) break;
    const char* value = argv[++first_port];
    if (flag == "--hold-ms") {
      mode.hold_ms = std::atol(value);
    } else if (flag == "--tokens") {
      mode.tokens = std::max(1L, std::atol(value));
    } else if (flag == "--stop-token") {
      mode.stop_token = std::atol(value);
    } else if (flag == "--task") {
      task = value;
    } else {
      first_port = argc + 1;  // unknown: usage
    }
  }
  if (!task.empty()) return Task(task, mode.tokens);
  if (first_port >= argc) {
    std::fprintf(stderr,
                 "usage: libra_http_stub [--serve-libra [--hold-ms H] [--tokens K] "
                 "[--stop-token T]] PORT...\n"
                 "       libra_http_stub --task prompt|tool|reward [--tokens K]\n");
    return 2;
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);

  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  std::set<int> listeners;
  for (int i = first_port; i < argc; ++i) {
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
  Server(epoll_fd, std::move(listeners), std::move(mode)).Run();
}
