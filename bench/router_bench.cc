// libra_router_bench: how fast the C-MLFQ router decides. Builds a prefix tree of about 100,000
// nodes, keeps 10,000 trajectories in flight on 48 instances (TP 1/1/2/4 per node, 12 nodes) and
// times placements, resumed turns, tool-return updates (tree lookup + move decision) and
// trajectory completions (tree insertion). Not a test: run it by hand (docs/benchmarks.md).
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sched/cmlfq.h"

namespace {

using libra::InstanceId;
using libra::PromptId;
using libra::TrajectoryId;
using namespace libra::sched;  // NOLINT: a benchmark's main

constexpr int kInFlight = 10000;
constexpr int kTurns = 8;
constexpr int kPrompts = 4000;
constexpr size_t kTargetNodes = 100000;
const char* const kTools[] = {"search", "code_executor", "validator", "browser"};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct Script {
  int64_t prompt;
  std::vector<ToolObservation> tools;
  std::vector<int64_t> turn_tokens;
};

Script RandomScript(std::mt19937_64& rng) {
  Script s;
  s.prompt = static_cast<int64_t>(rng() % kPrompts);
  const int turns = 2 + static_cast<int>(rng() % kTurns);
  for (int t = 0; t < turns; ++t) {
    s.turn_tokens.push_back(static_cast<int64_t>(200 + rng() % 4000));
    if (t + 1 < turns) {
      s.tools.push_back(ToolObservation{kTools[rng() % 4],
                                        static_cast<libra::workload::ToolStatus>(rng() % 3),
                                        static_cast<int64_t>(rng() % 15000)});
    }
  }
  return s;
}

TrajectoryObservation Observation(int64_t id, const Script& s) {
  TrajectoryObservation o;
  o.trajectory = TrajectoryId(id);
  o.prompt = PromptId(s.prompt);
  o.prompt_tokens = 1000;
  o.turn_tokens = s.turn_tokens;
  o.tools = s.tools;
  return o;
}

}  // namespace

int main() {
  libra::recipe::OptionTable options;  // defaults: 4k/12k/30k buckets on TP 1/2/4
  auto created = CmlfqRouter::Create(options, RouterDeps());
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  auto& router = static_cast<CmlfqRouter&>(*created.value());
  std::mt19937_64 rng(42);

  // A tree of ~100,000 nodes from finished trajectories.
  int64_t next_id = 0;
  auto start = std::chrono::steady_clock::now();
  int64_t inserted = 0;
  while (router.tree().node_count() < kTargetNodes) {
    router.OnTrajectoryDone(Observation(next_id++, RandomScript(rng)));
    ++inserted;
  }
  const double insert_s = Seconds(start);
  const size_t initial_nodes = router.tree().node_count();

  std::vector<InstanceState> instances;
  for (int node = 0; node < 12; ++node) {
    for (int tp : {1, 1, 2, 4}) {
      instances.push_back(
          InstanceState{InstanceId(static_cast<int64_t>(instances.size())), tp, 0, true});
    }
  }

  // 10,000 trajectories in flight: placements.
  std::vector<Script> scripts;
  std::vector<int64_t> ids;
  for (int i = 0; i < kInFlight; ++i) {
    scripts.push_back(RandomScript(rng));
    ids.push_back(next_id++);
  }
  std::vector<RouteRequest> first(kInFlight);
  for (int i = 0; i < kInFlight; ++i) {
    first[static_cast<size_t>(i)].trajectory = TrajectoryId(ids[static_cast<size_t>(i)]);
    first[static_cast<size_t>(i)].prompt = PromptId(scripts[static_cast<size_t>(i)].prompt);
    first[static_cast<size_t>(i)].context_tokens = 1000;
  }
  start = std::chrono::steady_clock::now();
  int64_t routed = 0;
  for (const RouteRequest& r : first) routed += router.Route(r, instances).instance ? 1 : 0;
  const double place_s = Seconds(start);

  // Resumed turns (no tool return to judge): the common routing decision.
  constexpr int kResumeRounds = 100;
  start = std::chrono::steady_clock::now();
  for (int round = 0; round < kResumeRounds; ++round) {
    for (const RouteRequest& r : first) routed += router.Route(r, instances).instance ? 1 : 0;
  }
  const double resume_s = Seconds(start);

  // Tool-return updates: every trajectory reports its tool returns turn by turn; finished ones
  // are replaced by new ones (completions timed separately).
  std::vector<RouteRequest> tool_requests;
  std::vector<TrajectoryObservation> finished;
  constexpr int kWaves = 6;
  double update_s = 0;
  double done_s = 0;
  double new_s = 0;
  int64_t updates = 0;
  int64_t completions = 0;
  for (int wave = 0; wave < kWaves; ++wave) {
    tool_requests.clear();
    for (int turn = 1; turn <= kTurns; ++turn) {
      for (int i = 0; i < kInFlight; ++i) {
        const Script& s = scripts[static_cast<size_t>(i)];
        if (static_cast<size_t>(turn) > s.tools.size()) continue;
        RouteRequest r = first[static_cast<size_t>(i)];
        r.turn = turn;
        r.generated_tokens = 1000 * turn;
        r.context_tokens = 1000 + 2000 * turn;
        r.last_tool = s.tools[static_cast<size_t>(turn - 1)];
        tool_requests.push_back(std::move(r));
      }
    }
    start = std::chrono::steady_clock::now();
    for (const RouteRequest& r : tool_requests)
      routed += router.Route(r, instances).instance ? 1 : 0;
    update_s += Seconds(start);
    updates += static_cast<int64_t>(tool_requests.size());

    finished.clear();
    for (int i = 0; i < kInFlight; ++i) {
      finished.push_back(Observation(ids[static_cast<size_t>(i)], scripts[static_cast<size_t>(i)]));
    }
    start = std::chrono::steady_clock::now();
    for (const TrajectoryObservation& o : finished) router.OnTrajectoryDone(o);
    done_s += Seconds(start);
    completions += kInFlight;

    for (int i = 0; i < kInFlight; ++i) {
      scripts[static_cast<size_t>(i)] = RandomScript(rng);
      ids[static_cast<size_t>(i)] = next_id++;
      first[static_cast<size_t>(i)].trajectory = TrajectoryId(ids[static_cast<size_t>(i)]);
      first[static_cast<size_t>(i)].prompt = PromptId(scripts[static_cast<size_t>(i)].prompt);
    }
    start = std::chrono::steady_clock::now();
    for (const RouteRequest& r : first) routed += router.Route(r, instances).instance ? 1 : 0;
    new_s += Seconds(start);
  }

  const libra::sched::RouterMetrics m = router.Metrics();
  std::printf(
      "cmlfq router benchmark: %zu tree nodes (%lld trajectories inserted in %.3f s, "
      "%.0f insertions/s), %d in flight on %zu instances\n",
      initial_nodes, static_cast<long long>(inserted), insert_s,
      static_cast<double>(inserted) / insert_s, kInFlight, instances.size());
  std::printf("  placements          %10.0f /s  (%d in %.4f s)\n", kInFlight / place_s, kInFlight,
              place_s);
  std::printf("  resumed turns       %10.0f /s  (%d in %.4f s)\n",
              kResumeRounds * kInFlight / resume_s, kResumeRounds * kInFlight, resume_s);
  std::printf("  tool-return updates %10.0f /s  (%lld in %.4f s)\n",
              static_cast<double>(updates) / update_s, static_cast<long long>(updates), update_s);
  std::printf("  completions         %10.0f /s  (%lld in %.4f s)\n",
              static_cast<double>(completions) / done_s, static_cast<long long>(completions),
              done_s);
  std::printf("  re-placements       %10.0f /s  (%d in %.4f s)\n", kWaves * kInFlight / new_s,
              kWaves * kInFlight, new_s);
  std::printf("  routed %lld; moves/tree %.0f, fallbacks %.0f, tree_nodes at the end %.0f\n",
              static_cast<long long>(routed), m.values.at("moves/tree"), m.values.at("fallbacks"),
              m.values.at("tree_nodes"));
  return 0;
}
