// libra_cluster_bench: what the cluster backend's controller costs per HTTP request, and how many
// requests it keeps in flight on one core. Starts libra_http_stub (a separate process, so that
// the server's work is not counted) through a ProcessSet, waits for it with WaitHealthy, then
// drives it through one HttpTransport on one EventLoop in a closed loop: each reply sends the
// next request, so `concurrency` requests are always outstanding. Not a test: run it by hand
// (docs/benchmarks.md).
//
// Scenarios: instant replies at 1, 64 and 1,024 concurrent requests (the controller's cost and
// latency per request), and replies held 1 s by the server at 5,000 and 10,000 concurrent
// requests (how many the controller really keeps in flight: ideally all, at concurrency / 1 s
// requests per second). Figures are measured after a warm-up, over a fixed window; CPU is this
// process's user + system time, i.e. the controller alone.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cluster/http_transport.h"
#include "cluster/process.h"

namespace {

using libra::Result;
using libra::Status;
using namespace libra::cluster;  // NOLINT: a benchmark's main
using Clock = EventLoop::Clock;
using std::chrono::milliseconds;

struct Scenario {
  // Servers (ports of the stub) the requests are spread over, round robin.
  int engines;
  int concurrency;
  // How long the server holds each reply; 0: replies at once.
  int hold_ms;
  // Measurement starts after `warmup` and ends at `duration`.
  milliseconds warmup;
  milliseconds duration;
};

struct Figures {
  double requests_per_s = 0;
  double mean_in_flight = 0;
  double cpu_us_per_request = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  int64_t errors = 0;
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// `n` distinct ports of 127.0.0.1 that nothing listens on (all bound at once, then released).
std::vector<int> FreePorts(int n) {
  std::vector<UniqueFd> fds;
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    fds.emplace_back(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(addr);
    bind(fds.back().get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    getsockname(fds.back().get(), reinterpret_cast<sockaddr*>(&addr), &size);
    ports.push_back(ntohs(addr.sin_port));
  }
  return ports;
}

// One closed-loop run.
class Load {
 public:
  Load(EventLoop* loop, HttpTransport* transport, const std::vector<std::string>& bases,
       const Scenario& s)
      : loop_(loop), transport_(transport), scenario_(s) {
    for (int i = 0; i < s.engines; ++i) {
      libra::cluster::HttpRequest request;
      request.method = "POST";
      request.url = bases[i] + (s.hold_ms > 0 ? "/hold/" + std::to_string(s.hold_ms) : "/turn");
      request.body = R"({"prompt": [1, 2, 3], "max_tokens": 16})";
      request.timeout_s = 30;
      requests_.push_back(request);
    }
  }

  Result<Figures> Run() {
    // The window opens and closes on timers; sends stop when it closes, then the requests in
    // flight drain.
    double cpu_start = 0;
    double cpu_end = 0;
    Clock::time_point opened;
    Clock::time_point closed;
    loop_->AddTimer(scenario_.warmup, [&] {
      in_window_ = true;
      opened = Clock::now();
      cpu_start = CpuSeconds();
    });
    loop_->AddTimer(scenario_.duration, [&] {
      in_window_ = false;
      ended_ = true;
      closed = Clock::now();
      cpu_end = CpuSeconds();
    });
    for (int i = 0; i < scenario_.concurrency; ++i) SendOne();
    Sample();
    LIBRA_RETURN_IF_ERROR(
        loop_->RunUntil([&] { return ended_ && transport_->in_flight() == 0; },
                        Clock::now() + scenario_.duration + std::chrono::seconds(40)));
    loop_->CancelTimer(sampler_);
    const double window_s = std::chrono::duration<double>(closed - opened).count();

    Figures f;
    f.requests_per_s = static_cast<double>(completed_) / window_s;
    double sum = 0;
    for (const size_t n : in_flight_samples_) sum += static_cast<double>(n);
    f.mean_in_flight = in_flight_samples_.empty() ? 0 : sum / in_flight_samples_.size();
    f.cpu_us_per_request =
        completed_ == 0 ? 0 : (cpu_end - cpu_start) * 1e6 / static_cast<double>(completed_);
    std::sort(latencies_ms_.begin(), latencies_ms_.end());
    if (!latencies_ms_.empty()) {
      f.p50_ms = latencies_ms_[latencies_ms_.size() / 2];
      f.p99_ms = latencies_ms_[latencies_ms_.size() * 99 / 100];
    }
    f.errors = errors_;
    return f;
  }

 private:
  void SendOne() {
    const Clock::time_point sent = Clock::now();
    const bool sent_in_window = in_window_;
    transport_->Send(
        requests_[next_++ % requests_.size()],
        [this, sent, sent_in_window](Result<libra::cluster::HttpResponse> reply) {
          if (!reply.ok() || reply->status != 200) {
            if (errors_++ == 0) {
              std::fprintf(stderr, "first error: %s\n", reply.status().ToString().c_str());
            }
          } else if (in_window_) {
            ++completed_;
            // Latency of requests sent within the window only: the first round
            // also waits for thousands of connections to be set up.
            if (sent_in_window) {
              latencies_ms_.push_back(
                  std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
            }
          }
          if (!ended_) SendOne();
        });
  }

  void Sample() {
    sampler_ = loop_->AddTimer(milliseconds(10), [this] {
      if (in_window_) in_flight_samples_.push_back(transport_->in_flight());
      if (!ended_) Sample();
    });
  }

  EventLoop* loop_;
  HttpTransport* transport_;
  Scenario scenario_;
  std::vector<libra::cluster::HttpRequest> requests_;
  size_t next_ = 0;
  bool in_window_ = false;
  bool ended_ = false;
  EventLoop::TimerId sampler_ = 0;
  std::vector<double> latencies_ms_;
  std::vector<size_t> in_flight_samples_;
  int64_t completed_ = 0;
  int64_t errors_ = 0;
};

Status Main(const std::vector<Scenario>& scenarios) {
  LIBRA_ASSIGN_OR_RETURN(const long files, RaiseOpenFileLimit());
  LIBRA_ASSIGN_OR_RETURN(auto loop, EventLoop::Create());
  LIBRA_ASSIGN_OR_RETURN(auto transport, HttpTransport::Create(loop.get()));
  ProcessSet processes(loop.get());
  int engines = 1;
  for (const Scenario& s : scenarios) engines = std::max(engines, s.engines);
  ProcessSpec stub;
  stub.name = "http-stub";
  stub.argv = {LIBRA_HTTP_STUB};
  std::vector<std::string> bases;
  for (const int port : FreePorts(engines)) {
    stub.argv.push_back(std::to_string(port));
    bases.push_back("http://127.0.0.1:" + std::to_string(port));
  }
  LIBRA_RETURN_IF_ERROR(processes
                            .Spawn(stub,
                                   [](const ExitStatus& s) {
                                     std::fprintf(stderr, "libra_http_stub exited: %s\n",
                                                  s.ToString().c_str());
                                   })
                            .status());
  std::vector<Status> health;
  for (const std::string& base : bases) {
    transport->WaitHealthy(base + "/health", std::chrono::seconds(5),
                           [&](Status s) { health.push_back(s); });
  }
  LIBRA_RETURN_IF_ERROR(loop->RunUntil([&] { return health.size() == bases.size(); }));
  for (const Status& s : health) LIBRA_RETURN_IF_ERROR(s);

  std::printf("open-file limit %ld\n\n", files);
  std::printf(
      "| engines | concurrency | server hold | requests/s | mean in flight | controller CPU per "
      "request | latency p50 | latency p99 | errors |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Scenario& s : scenarios) {
    // One socket per request in flight (the stub holds the other ends, in its own process).
    if (s.concurrency + 100L > files) {
      std::printf("| %d | %d | skipped: needs %d open files |\n", s.engines, s.concurrency,
                  s.concurrency + 100);
      continue;
    }
    // A fresh transport, so that no scenario inherits the previous one's connections.
    LIBRA_ASSIGN_OR_RETURN(auto load_transport, HttpTransport::Create(loop.get()));
    Load load(loop.get(), load_transport.get(), bases, s);
    LIBRA_ASSIGN_OR_RETURN(const Figures f, load.Run());
    std::printf("| %d | %d | %d ms | %.0f | %.0f | %.1f us | %.2f ms | %.2f ms | %lld |\n",
                s.engines, s.concurrency, s.hold_ms, f.requests_per_s, f.mean_in_flight,
                f.cpu_us_per_request, f.p50_ms, f.p99_ms, static_cast<long long>(f.errors));
    std::fflush(stdout);
  }
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Scenario> scenarios = {
      {1, 1, 0, milliseconds(500), milliseconds(2500)},
      {1, 64, 0, milliseconds(500), milliseconds(2500)},
      {1, 1024, 0, milliseconds(500), milliseconds(2500)},
      {16, 1024, 0, milliseconds(500), milliseconds(2500)},
      {1, 5000, 1000, milliseconds(1500), milliseconds(4500)},
      {16, 5000, 1000, milliseconds(1500), milliseconds(4500)},
      {16, 10000, 1000, milliseconds(1500), milliseconds(4500)},
      {1, 10000, 1000, milliseconds(1500), milliseconds(4500)},
  };
  if (argc == 4) {
    // One scenario: libra_cluster_bench ENGINES CONCURRENCY HOLD_MS.
    const int hold_ms = std::atoi(argv[3]);
    scenarios = {{std::atoi(argv[1]), std::atoi(argv[2]), hold_ms, milliseconds(500 + hold_ms),
                  milliseconds(2500 + 2 * hold_ms)}};
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: libra_cluster_bench [ENGINES CONCURRENCY HOLD_MS]\n");
    return 2;
  }
  const Status status = Main(scenarios);
  if (!status.ok()) {
    std::fprintf(stderr, "libra_cluster_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
