// libra_cluster_backend_bench: what the cluster controller (the coordinator, the router, the store
// and ClusterBackend, all on one event loop) costs per turn, and how many trajectories it keeps
// in flight on one core. Each scenario writes a recipe (backend = "cluster", local launcher)
// whose engines and trainer are libra_http_stub --serve-libra (instant replies, or replies held
// H ms to keep thousands of trajectories in flight) and whose [agent] commands are
// libra_http_stub --task (or, with --tool-server, whose tool calls are POSTed to the trainer's
// stub as a tool server: tool_url), and runs it with experiment::RunSystem, recorded in a store,
// as `libra run` does. Not a test, and the stub is never used for correctness: run it by hand
// (docs/benchmarks.md).
//
// This process pins itself to CPU 0; the stubs and every sandboxed [agent] command run on the
// other CPUs (through taskset), so that their work is not counted and does not compete. The
// backend is wrapped in a meter that sees every action and event: a trajectory is in flight from
// its first StartTurn to its last TurnDone (tool calls and reward included). Figures are taken
// over the window from the first StartTurn to the last trajectory's end; CPU is this process's
// user + system time (getrusage RUSAGE_SELF, children excluded), split into the time spent
// inside the backend (Submit and Wait: HTTP, JSON, sandbox spawns) and the rest (coordinator,
// router, store).
//
//   libra_cluster_backend_bench                      # the default sweep
//   libra_cluster_backend_bench --in-flight 5000 --turns 4 --hold-ms 3000 --steps 4
//   libra_cluster_backend_bench --in-flight 5000 --turns 4 --hold-ms 1000 --steps 1 --tool-server
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cluster/cluster_backend.h"
#include "cluster/cluster_options.h"
#include "common/allocator.h"
#include "common/strings.h"
#include "experiment/runner.h"
#include "recipe/recipe_parser.h"
#include "store/store.h"

namespace {

using libra::Result;
using libra::Status;
using libra::StrFormat;
using Clock = std::chrono::steady_clock;

struct Scenario {
  /// Trajectories the pipeline allows in flight: 2 steps' worth (staleness 1).
  int in_flight = 1000;
  /// Turns per trajectory; turns - 1 tool calls.
  int turns = 1;
  /// How long an engine holds each turn's reply.
  int hold_ms = 2000;
  int steps = 4;
  int engines = 7;
  /// Tokens each turn generates.
  int tokens = 8;
  int group_size = 8;
  /// Tool calls POSTed to a tool server (the trainer's stub, tool_url) instead of run as
  /// sandboxed subprocesses (tool_command).
  bool tool_server = false;
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// This thread's CPU time (cheaper than getrusage; the controller is one thread).
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

/// What the meter saw.
struct Figures {
  int64_t turns = 0;
  int64_t tool_calls = 0;
  int64_t trajectories = 0;
  int64_t failed_turns = 0;
  size_t peak_in_flight = 0;
  double mean_in_flight = 0;  // time-weighted over the window
  size_t peak_turns_in_flight = 0;
  double window_s = 0;
  double window_cpu_s = 0;
  double backend_cpu_s = 0;  // inside Submit and Wait, within the window
  double total_cpu_s = 0;    // the whole run, setup and store included
};

/// Passes everything to the cluster backend and counts what goes through.
class MeteredBackend final : public libra::backend::Backend {
 public:
  MeteredBackend(std::unique_ptr<libra::backend::Backend> inner, Figures* figures)
      : inner_(std::move(inner)), f_(figures) {}

  std::string_view Name() const override { return inner_->Name(); }

  Status Submit(const libra::backend::Action& action) override {
    if (const auto* turn = std::get_if<libra::backend::StartTurn>(&action)) {
      if (!opened_) {
        opened_ = true;
        opened_at_ = last_change_ = Clock::now();
        cpu_open_ = CpuSeconds();
      }
      Integrate();
      live_.insert(turn->trajectory.value);
      f_->peak_in_flight = std::max(f_->peak_in_flight, live_.size());
      f_->peak_turns_in_flight = std::max(f_->peak_turns_in_flight, ++turns_in_flight_);
    } else if (std::holds_alternative<libra::backend::RunTool>(action)) {
      ++f_->tool_calls;
    }
    const double cpu = ThreadCpuSeconds();
    Status status = inner_->Submit(action);
    if (opened_) backend_cpu_ += ThreadCpuSeconds() - cpu;
    return status;
  }

  Result<std::vector<libra::backend::Event>> Wait() override {
    const double cpu = ThreadCpuSeconds();
    Result<std::vector<libra::backend::Event>> events = inner_->Wait();
    if (opened_) backend_cpu_ += ThreadCpuSeconds() - cpu;
    if (!events.ok()) return events;
    for (const libra::backend::Event& e : *events) {
      if (const auto* done = std::get_if<libra::backend::TurnDone>(&e.what)) {
        ++f_->turns;
        --turns_in_flight_;
        if (done->end != libra::workload::TurnEnd::kToolCall) {
          Integrate();
          live_.erase(done->trajectory.value);
          ++f_->trajectories;
          // The window ends with the last trajectory's end.
          f_->window_s = std::chrono::duration<double>(Clock::now() - opened_at_).count();
          f_->window_cpu_s = CpuSeconds() - cpu_open_;
          f_->backend_cpu_s = backend_cpu_;
          f_->mean_in_flight = f_->window_s > 0 ? area_ / f_->window_s : 0;
        }
      } else if (std::holds_alternative<libra::backend::TurnFailed>(e.what)) {
        ++f_->failed_turns;
        --turns_in_flight_;
      }
    }
    return events;
  }

  std::optional<int64_t> OracleTrajectoryTokens(
      const libra::backend::StartTurn& turn) const override {
    return inner_->OracleTrajectoryTokens(turn);
  }
  std::optional<double> RolloutBusyGpuSeconds() const override {
    return inner_->RolloutBusyGpuSeconds();
  }

 private:
  // Adds the in-flight count times the time since the last change, before a change.
  void Integrate() {
    const Clock::time_point now = Clock::now();
    area_ += static_cast<double>(live_.size()) *
             std::chrono::duration<double>(now - last_change_).count();
    last_change_ = now;
  }

  std::unique_ptr<libra::backend::Backend> inner_;
  Figures* f_;
  std::unordered_set<int64_t> live_;
  size_t turns_in_flight_ = 0;
  bool opened_ = false;
  Clock::time_point opened_at_;
  Clock::time_point last_change_;
  double area_ = 0;
  double cpu_open_ = 0;
  double backend_cpu_ = 0;
};

// A port p such that p .. p + n - 1 are free on 127.0.0.1 now.
int FreePortRange(int n) {
  for (int base = 21000 + static_cast<int>(getpid() % 500) * 16; base < 60000; base += 97) {
    bool free = true;
    for (int p = base; p < base + n && free; ++p) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(p));
      free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      close(fd);
    }
    if (free) return base;
  }
  return 0;
}

std::string RecipeText(const Scenario& s, const std::string& dir, const std::string& pin) {
  const std::string stub = pin + LIBRA_HTTP_STUB;
  const int prompts = std::max(1, s.in_flight / 2 / s.group_size);
  const int ports = FreePortRange(s.engines + 1);
  const std::string tool =
      s.tool_server ? StrFormat("tool_url = \"http://127.0.0.1:%d/tool\"", ports + s.engines)
                    : StrFormat("tool_command = \"%s --task tool --tokens 4\"", stub.c_str());
  return StrFormat(
      R"(name = "controller-bench"
seed = 1
steps = %d
backend = "cluster"

[cluster]
gpu = "A800-80G"
nodes = 1
gpus_per_node = %d

[model]
name = "Qwen3-0.6B"

[workload]
kind = "agentic"
preset = "search-r1"

[rl]
prompts_per_step = %d
group_size = %d
staleness = 1

[system]
name = "bench"
router = "cmlfq"
planner = "static"

[system.planner_options]
train_gpus = 1
rollout_tp = 1

[launcher]
kind = "local"

[engine]
dialect = "sglang"
command = "%s --serve-libra --hold-ms %d --tokens %d --stop-token %d {port}"
base_port = %d
health_timeout_s = 30
max_tokens_per_turn = %d
max_context_tokens = 1000000
turn_timeout_s = 120

[trainer]
command = "%s --serve-libra {port}"
port = %d
initial_weights = "%s/initial.pt"
health_timeout_s = 30

[agent]
prompt_command = "%s --task prompt --tokens 16"
%s
reward_command = "%s --task reward"
stop_token_ids = [2, 6]
tool_call_token = 6
max_turns = %d
# Thousands of reward calls can end at once: none may time out on a loaded machine.
tool_timeout_s = 600
)",
      s.steps, s.engines + 1, prompts, s.group_size, stub.c_str(), s.hold_ms, s.tokens,
      s.turns > 1 ? 6 : 2, ports, s.tokens, stub.c_str(), ports + s.engines, dir.c_str(),
      stub.c_str(), tool.c_str(), stub.c_str(), s.turns);
}

Result<Figures> RunScenario(const Scenario& s, const std::string& pin) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / StrFormat("libra-controller-bench-%d", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "initial.pt").flush();
  const std::string recipe_path = (dir / "bench.toml").string();
  std::ofstream(recipe_path) << RecipeText(s, dir.string(), pin);

  LIBRA_ASSIGN_OR_RETURN(libra::recipe::ParsedRecipe parsed,
                         libra::recipe::ParseRecipeFile(recipe_path));
  libra::experiment::Components parts{
      &libra::sched::BuiltinRouters(), &libra::planner::BuiltinPlanners(), {}};
  libra::experiment::ValidateWithRegistries(parsed.recipe, parts, &parsed.diagnostics);
  if (!parsed.diagnostics.empty()) return libra::recipe::DiagnosticsToStatus(parsed.diagnostics);
  LIBRA_ASSIGN_OR_RETURN(auto store, libra::store::Store::Open((dir / "bench.db").string()));

  Figures figures;
  const std::string run_dir = (dir / "run").string();
  parts.make_backend = [&](const libra::recipe::Recipe& recipe, const libra::workload::Workload&,
                           const libra::model::CostModel&,
                           const libra::experiment::BackendContext& context)
      -> Result<std::unique_ptr<libra::backend::Backend>> {
    LIBRA_ASSIGN_OR_RETURN(libra::cluster::ClusterOptions options,
                           libra::cluster::DecodeClusterOptions(recipe));
    LIBRA_ASSIGN_OR_RETURN(
        auto backend, libra::cluster::ClusterBackend::Create(recipe, std::move(options), run_dir,
                                                             context.start_version));
    return std::unique_ptr<libra::backend::Backend>(
        std::make_unique<MeteredBackend>(std::move(backend), &figures));
  };
  libra::experiment::RunRequest request;
  request.recipe = &parsed.recipe;
  request.system = &parsed.recipe.system;
  const double cpu_start = CpuSeconds();
  LIBRA_ASSIGN_OR_RETURN(libra::experiment::RunOutcome outcome,
                         libra::experiment::RunSystem(*store, request, parts));
  figures.total_cpu_s = CpuSeconds() - cpu_start;
  LIBRA_RETURN_IF_ERROR(outcome.status);
  store.reset();
  std::filesystem::remove_all(dir);
  return figures;
}

void PrintRow(const Scenario& s, const Figures& f) {
  const double turns = static_cast<double>(std::max<int64_t>(1, f.turns));
  std::printf(
      "| %d | %d | %d ms | %lld | %lld | %s | %.0f | %zu | %.0f | %.3f ms | %.3f ms | %.3f ms | "
      "%.1f s | %lld |\n",
      s.in_flight, s.turns, s.hold_ms, static_cast<long long>(f.turns),
      static_cast<long long>(f.tool_calls),
      f.tool_calls == 0 ? "-" : (s.tool_server ? "HTTP" : "subprocess"),
      static_cast<double>(f.turns) / f.window_s, f.peak_in_flight, f.mean_in_flight,
      f.window_cpu_s * 1e3 / turns, f.backend_cpu_s * 1e3 / turns,
      (f.window_cpu_s - f.backend_cpu_s) * 1e3 / turns, f.total_cpu_s,
      static_cast<long long>(f.failed_turns));
  std::fflush(stdout);
}

int Usage() {
  std::fprintf(stderr,
               "usage: libra_cluster_backend_bench [--in-flight N] [--turns T] [--hold-ms H] "
               "[--steps S] [--engines E] [--tokens K] [--group-size G] [--tool-server]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  libra::TuneAllocator();  // as the libra binary runs
  std::vector<Scenario> scenarios = {
      {1000, 1, 1000, 3},
      {5000, 1, 3000, 1},
      {10000, 1, 5000, 1},
      {1000, 4, 1000, 3},
      {.in_flight = 1000, .turns = 4, .hold_ms = 1000, .steps = 3, .tool_server = true},
  };
  if (argc > 1) {
    Scenario one;
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--tool-server") {
        one.tool_server = true;
        continue;
      }
      if (++i >= argc) return Usage();
      const int value = std::atoi(argv[i]);
      if (value <= 0) return Usage();
      if (flag == "--in-flight") {
        one.in_flight = value;
      } else if (flag == "--turns") {
        one.turns = value;
      } else if (flag == "--hold-ms") {
        one.hold_ms = value;
      } else if (flag == "--steps") {
        one.steps = value;
      } else if (flag == "--engines") {
        one.engines = value;
      } else if (flag == "--tokens") {
        one.tokens = value;
      } else if (flag == "--group-size") {
        one.group_size = value;
      } else {
        return Usage();
      }
    }
    scenarios = {one};
  }
  // The controller on CPU 0; the stubs and [agent] commands on the others, through taskset.
  std::string pin;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 1) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof(set), &set) == 0 &&
        std::filesystem::exists("/usr/bin/taskset")) {
      pin = StrFormat("/usr/bin/taskset -c 1-%ld ", cpus - 1);
    }
  }
  std::printf("controller on CPU 0 of %ld; stubs and agent commands %s\n\n", cpus,
              pin.empty() ? "share it" : ("on " + pin.substr(pin.find("-c ") + 3)).c_str());
  std::printf(
      "| in flight allowed | turns/traj | engine hold | turns | tool calls | tools | turns/s | "
      "peak in flight | mean in flight | CPU per turn | in backend | in coordinator + store | "
      "run CPU | failed turns |\n");
  std::printf(
      "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | "
      "---: | ---: |\n");
  for (const Scenario& s : scenarios) {
    Result<Figures> f = RunScenario(s, pin);
    if (!f.ok()) {
      std::fprintf(stderr, "libra_cluster_backend_bench: %s\n", f.status().ToString().c_str());
      return 1;
    }
    PrintRow(s, *f);
  }
  return 0;
}
