// libra_router_bench: how fast the routers decide, on one core. The scenario is the one the
// Libra authors benchmark C-MLFQ on: 20,000 trajectories in flight on 28 rollout instances (7
// nodes of TP 1, 1, 2, 4) with a prefix tree over 200 prompts; here the trajectories are the
// r2e-gym workload's (up to 12 turns, a validator tool after each but the last) and every router
// has the options a recipe gets by default (C-MLFQ as the `libra` system runs it: cost-based
// moves on the paper recipe's cost model, Qwen3-14B on A800).
//
// It drives each router as the coordinator does: a turn is routed, the instance's active count
// goes up (and the coordinator's InstanceIndex with it), the turn ends, its tool returns and the
// next turn is routed, and so on until the trajectory completes and a new one takes its place.
// A wave ends every trajectory's turn, in chunks of 1,024 trajectories: the chunk's turns end, then
// its calls are made, as the coordinator calls the router with a request or an observation it has
// just built (timing all 20,000 after building all of them timed mostly the cache misses of
// reading them back). Each kind of call is timed per chunk, bookkeeping included, in CPU time of
// this thread:
//   placements      the first turn of the first 20,000 trajectories
//   tool returns    the turn after a tool call (C-MLFQ: tree lookup and move decision)
//   completions     a finished trajectory (C-MLFQ: tree insertion)
//   re-placements   the first turn of a trajectory replacing a completed one
//   steps           the router's work when a train step starts (C-MLFQ: the periodic rebuild)
//
//   ./build/bench/libra_router_bench [--router NAME]... [--in-flight N] [--waves N]
//
// docs/benchmarks.md records the figures and the machine they came from.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/allocator.h"
#include "model/cost_model.h"
#include "recipe/recipe_parser.h"
#include "sched/instance_index.h"
#include "sched/router.h"
#include "workload/workload.h"

namespace libra {
namespace {

constexpr int kPrompts = 200;
constexpr int kSamples = 8;      // GRPO group size: scripts cycle over 200 x 8 trajectories
constexpr size_t kChunk = 1024;  // trajectories whose turns end before their calls are timed

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Timed {
  double seconds = 0;
  int64_t calls = 0;
  double PerSecond() const { return seconds > 0 ? static_cast<double>(calls) / seconds : 0; }
};

struct Row {
  std::string router;
  Timed placements, tool_returns, completions, replacements, steps;
  double moves = 0;
};

// Plays the coordinator's part around one router: requests are built and turns ended outside
// the timed loops, which time the router's calls and the coordinator's bookkeeping of each call
// (the instance's active count and its InstanceIndex).
class Driver {
 public:
  Driver(sched::Router& router, const std::vector<workload::TrajectoryScript>& scripts,
         const std::vector<int64_t>& prompt_tokens, int in_flight)
      : router_(router), scripts_(scripts), prompt_tokens_(prompt_tokens) {
    for (int node = 0; node < 7; ++node) {
      for (int tp : {1, 1, 2, 4}) {
        sched::InstanceState s;
        s.id = InstanceId(static_cast<int64_t>(instances_.size()));
        s.tp = tp;
        instances_.push_back(s);
      }
    }
    index_.Reset(instances_);
    live_.resize(static_cast<size_t>(in_flight));
    for (Live& t : live_) {
      t.turn_tokens.reserve(16);
      t.tools.reserve(16);
    }
  }

  size_t size() const { return live_.size(); }

  /// Starts trajectory `slot` afresh and returns the request for its first turn.
  const sched::RouteRequest& Start(size_t slot) {
    Live& t = live_[slot];
    t.id = next_id_++;
    t.script = static_cast<size_t>(t.id) % scripts_.size();
    t.prompt = static_cast<int64_t>(t.script) / kSamples;
    t.turn = 0;
    t.generated = 0;
    t.context = prompt_tokens_[static_cast<size_t>(t.prompt)];
    t.turn_tokens.clear();
    t.tools.clear();
    return Request(slot);
  }

  /// The request for the next turn of trajectory `slot`.
  const sched::RouteRequest& Request(size_t slot) {
    Live& t = live_[slot];
    sched::RouteRequest& r = t.request;
    r.trajectory = TrajectoryId(t.id);
    r.prompt = PromptId(t.prompt);
    r.turn = t.turn;
    r.prompt_tokens = prompt_tokens_[static_cast<size_t>(t.prompt)];
    r.context_tokens = t.context;
    r.generated_tokens = t.generated;
    r.previous = InstanceId(t.instance);
    if (t.tools.empty()) {
      r.last_tool.reset();
    } else {
      r.last_tool = t.tools.back();
    }
    r.oracle_remaining_tokens = scripts_[t.script].generated_tokens() - t.generated;
    r.index = &index_;
    return r;
  }

  /// Routes the prepared request of trajectory `slot`, as the coordinator does. Timed.
  void Route(size_t slot) {
    Live& t = live_[slot];
    const sched::RouteDecision d = router_.Route(t.request, instances_);
    t.instance = d.instance ? d.instance->value : -1;
    if (t.instance >= 0) {
      ++instances_[static_cast<size_t>(t.instance)].active;
      index_.Update(instances_, static_cast<size_t>(t.instance));
    }
  }

  /// Ends the turn in flight of trajectories [first, last) and prepares what follows: the slots
  /// whose trajectory called a tool (their next request), and those that completed (their
  /// observation). A turn the router deferred is routed again.
  void EndTurns(size_t first, size_t last, std::vector<size_t>* tool_calls,
                std::vector<size_t>* completed) {
    tool_calls->clear();
    completed->clear();
    for (size_t slot = first; slot < last; ++slot) {
      Live& t = live_[slot];
      if (t.instance < 0) {
        Route(slot);
        continue;
      }
      const workload::TurnScript& turn = scripts_[t.script].turns[static_cast<size_t>(t.turn)];
      sched::InstanceState& s = instances_[static_cast<size_t>(t.instance)];
      s.active = std::max(0, s.active - 1);
      index_.Update(instances_, static_cast<size_t>(t.instance));
      router_.OnTurnDone(sched::TurnObservation{TrajectoryId(t.id), PromptId(t.prompt),
                                                InstanceId(t.instance), t.turn,
                                                turn.generated_tokens, turn.end});
      t.generated += turn.generated_tokens;
      t.context += turn.generated_tokens;
      t.turn_tokens.push_back(turn.generated_tokens);
      if (turn.end == workload::TurnEnd::kToolCall) {
        t.context += turn.tool_output_tokens;
        t.tools.push_back(
            sched::ToolObservation{turn.tool, turn.tool_status, turn.tool_output_tokens});
        ++t.turn;
        Request(slot);
        tool_calls->push_back(slot);
      } else {
        sched::TrajectoryObservation& o = t.observation;
        o.trajectory = TrajectoryId(t.id);
        o.prompt = PromptId(t.prompt);
        o.prompt_tokens = prompt_tokens_[static_cast<size_t>(t.prompt)];
        o.turn_tokens.assign(t.turn_tokens.begin(), t.turn_tokens.end());
        o.tools.assign(t.tools.begin(), t.tools.end());
        o.truncated = scripts_[t.script].truncated();
        completed->push_back(slot);
      }
    }
  }

  /// Hands the router the completed trajectory of `slot`. Timed.
  void Complete(size_t slot) { router_.OnTrajectoryDone(live_[slot].observation); }

 private:
  struct Live {
    int64_t id = 0;
    size_t script = 0;
    int64_t prompt = 0;
    int turn = 0;
    int64_t instance = -1;
    int64_t generated = 0;
    int64_t context = 0;
    std::vector<int64_t> turn_tokens;
    std::vector<sched::ToolObservation> tools;
    sched::RouteRequest request;
    sched::TrajectoryObservation observation;
  };

  sched::Router& router_;
  const std::vector<workload::TrajectoryScript>& scripts_;
  const std::vector<int64_t>& prompt_tokens_;
  std::vector<sched::InstanceState> instances_;
  sched::InstanceIndex index_;
  std::vector<Live> live_;
  int64_t next_id_ = 0;
};

template <typename F>
void Time(Timed& timed, const std::vector<size_t>& slots, F call) {
  const double start = CpuSeconds();
  for (size_t slot : slots) call(slot);
  timed.seconds += CpuSeconds() - start;
  timed.calls += static_cast<int64_t>(slots.size());
}

Result<Row> RunRouter(const std::string& name, const model::CostModel& cost,
                      const std::vector<workload::TrajectoryScript>& scripts,
                      const std::vector<int64_t>& prompt_tokens, int in_flight, int waves) {
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<sched::Router> router,
                         sched::BuiltinRouters().Create(name, recipe::OptionTable(),
                                                        sched::RouterDeps{&cost, nullptr}));
  Driver driver(*router, scripts, prompt_tokens, in_flight);
  Row row;
  row.router = name;
  auto route = [&](size_t slot) { driver.Route(slot); };
  std::vector<size_t> slots, tool_calls, completed;
  for (size_t first = 0; first < driver.size(); first += kChunk) {
    slots.clear();
    for (size_t slot = first; slot < std::min(driver.size(), first + kChunk); ++slot) {
      driver.Start(slot);
      slots.push_back(slot);
    }
    Time(row.placements, slots, route);
  }
  for (int wave = 0; wave < waves; ++wave) {
    for (size_t first = 0; first < driver.size(); first += kChunk) {
      driver.EndTurns(first, std::min(driver.size(), first + kChunk), &tool_calls, &completed);
      Time(row.tool_returns, tool_calls, route);
      Time(row.completions, completed, [&](size_t slot) { driver.Complete(slot); });
      for (size_t slot : completed) driver.Start(slot);
      Time(row.replacements, completed, route);
    }
    // A train step about every 2,048 completions (256 prompts x 8 samples).
    if (wave % 2 == 1) {
      const double start = CpuSeconds();
      router->OnStep(wave / 2);
      row.steps.seconds += CpuSeconds() - start;
      ++row.steps.calls;
    }
  }
  const sched::RouterMetrics m = router->Metrics();
  for (const char* key : {"moves/tree", "moves/quantum", "cost_vetoes"}) {
    if (auto it = m.values.find(key); it != m.values.end()) row.moves += it->second;
  }
  return row;
}

}  // namespace
}  // namespace libra

int main(int argc, char** argv) {
  using namespace libra;  // NOLINT: a benchmark's main
  TuneAllocator();        // as the libra binary runs
  std::vector<std::string> routers;
  int in_flight = 20000;
  int waves = 40;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--router" && i + 1 < argc) {
      routers.push_back(argv[++i]);
    } else if (arg == "--in-flight" && i + 1 < argc) {
      in_flight = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--waves" && i + 1 < argc) {
      waves = std::max(1, std::atoi(argv[++i]));
    } else {
      std::printf("usage: libra_router_bench [--router NAME]... [--in-flight N] [--waves N]\n");
      return arg == "-h" || arg == "--help" ? 0 : 2;
    }
  }
  if (routers.empty()) {
    routers = {"cmlfq",   "least-conn",    "round-robin", "length-aware",
               "la-mlfq", "oracle-length", "sorted"};
  }
  const std::string path = std::string(LIBRA_SOURCE_DIR) + "/recipes/paper/r2e-gym-qwen3-14b.toml";
  auto parsed = recipe::ParseRecipeFile(path, {});
  if (!parsed.ok() || !parsed->diagnostics.empty()) {
    std::fprintf(stderr, "libra_router_bench: cannot read %s\n", path.c_str());
    return 1;
  }
  const recipe::Recipe& r = parsed->recipe;
  auto workload = workload::MakeWorkload(r.workload, r.seed);
  auto cost = model::MakeCostModel(r);
  if (!workload.ok() || !cost.ok()) {
    std::fprintf(stderr, "libra_router_bench: %s\n",
                 (!workload.ok() ? workload.status() : cost.status()).ToString().c_str());
    return 1;
  }
  std::vector<workload::TrajectoryScript> scripts;
  std::vector<int64_t> prompt_tokens;
  int64_t turns = 0;
  for (int p = 0; p < kPrompts; ++p) {
    prompt_tokens.push_back((*workload)->Prompt(p).prompt_tokens);
    for (int s = 0; s < kSamples; ++s) {
      scripts.push_back((*workload)->Script(p, s, 0, (*workload)->skill_params().initial));
      turns += static_cast<int64_t>(scripts.back().turns.size());
    }
  }
  std::printf(
      "router benchmark: %d trajectories in flight on 28 instances (7 x TP 1,1,2,4), %d prompts, "
      "r2e-gym scripts (%.1f turns each on average), %d waves; calls per CPU-second\n",
      in_flight, kPrompts, static_cast<double>(turns) / static_cast<double>(scripts.size()), waves);
  std::printf("%-14s %12s %12s %12s %14s %12s %10s\n", "router", "placements", "tool returns",
              "completions", "re-placements", "step (ms)", "moves");
  for (const std::string& name : routers) {
    auto row = RunRouter(name, **cost, scripts, prompt_tokens, in_flight, waves);
    if (!row.ok()) {
      std::fprintf(stderr, "libra_router_bench: %s: %s\n", name.c_str(),
                   row.status().ToString().c_str());
      return 1;
    }
    std::printf("%-14s %12.3g %12.3g %12.3g %14.3g %12.3f %10.0f\n", row->router.c_str(),
                row->placements.PerSecond(), row->tool_returns.PerSecond(),
                row->completions.PerSecond(), row->replacements.PerSecond(),
                row->steps.calls > 0 ? 1e3 * row->steps.seconds / row->steps.calls : 0.0,
                row->moves);
  }
  return 0;
}
