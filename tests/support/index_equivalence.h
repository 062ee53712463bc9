// Checks that a router decides exactly alike with and without the caller's InstanceIndex: two
// routers built alike are driven, as the coordinator drives one, through the same random turns,
// tool returns, finished trajectories, availability changes, steps and new layouts.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "sched/instance_index.h"
#include "sched/router.h"

namespace libra::test {

inline void ExpectIndexChangesNoDecision(sched::Router& plain, sched::Router& indexed,
                                         uint64_t seed, int operations) {
  using sched::InstanceState;
  uint64_t x = seed;
  auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  std::vector<InstanceState> instances;
  sched::InstanceIndex index;
  auto layout = [&](size_t n) {
    std::vector<InstanceState> fresh;
    for (size_t i = 0; i < n; ++i) {
      InstanceState s;
      s.id = InstanceId(static_cast<int64_t>(i));
      s.tp = std::vector<int>{1, 1, 2, 4, 8}[next() % 5];
      if (i < instances.size() && s.tp == instances[i].tp) s.active = instances[i].active;
      fresh.push_back(s);
    }
    instances = std::move(fresh);
    index.Reset(instances);
  };
  struct Trajectory {
    int64_t prompt = 0;
    int turn = 0;
    int64_t instance = -1;  // of the turn in flight; -1 when waiting for a tool or a route
    std::vector<int64_t> turn_tokens;
    std::vector<sched::ToolObservation> tools;
  };
  std::map<int64_t, Trajectory> live;
  int64_t next_id = 0;
  auto route = [&](int64_t id, Trajectory& t) {
    sched::RouteRequest request;
    request.trajectory = TrajectoryId(id);
    request.prompt = PromptId(t.prompt);
    request.turn = t.turn;
    request.context_tokens = 1000 + 3000 * t.turn;
    for (int64_t tokens : t.turn_tokens) request.generated_tokens += tokens;
    if (!t.tools.empty()) request.last_tool = t.tools.back();
    const sched::RouteDecision a = plain.Route(request, instances);
    request.index = &index;
    const sched::RouteDecision b = indexed.Route(request, instances);
    ASSERT_EQ(a.instance, b.instance) << "trajectory " << id << " turn " << t.turn;
    ASSERT_EQ(a.reason, b.reason);
    ASSERT_EQ(a.bucket, b.bucket);
    if (!a.instance) return;
    const auto i = static_cast<size_t>(a.instance->value);
    ++instances[i].active;
    index.Update(instances, i);
    t.instance = a.instance->value;
  };
  layout(3 + next() % 150);
  for (int op = 0; op < operations && !::testing::Test::HasFatalFailure(); ++op) {
    const uint64_t what = next() % 100;
    if (what < 30 || live.empty()) {
      const int64_t id = next_id++;
      Trajectory& t = live[id];
      t.prompt = static_cast<int64_t>(next() % 40);
      route(id, t);
    } else if (what < 85) {
      // A turn in flight ends: the trajectory finishes or calls a tool, whose return is routed.
      auto it = live.begin();
      std::advance(it, static_cast<ptrdiff_t>(next() % live.size()));
      Trajectory& t = it->second;
      if (t.instance < 0) {
        route(it->first, t);
        continue;
      }
      const auto i = static_cast<size_t>(t.instance);
      if (i < instances.size() && instances[i].id.value == t.instance) {
        instances[i].active = std::max(0, instances[i].active - 1);
        index.Update(instances, i);
      }
      const int64_t tokens = static_cast<int64_t>(200 + next() % 9000);
      t.turn_tokens.push_back(tokens);
      sched::TurnObservation done{TrajectoryId(it->first), PromptId(t.prompt),
                                  InstanceId(t.instance), t.turn, tokens};
      plain.OnTurnDone(done);
      indexed.OnTurnDone(done);
      t.instance = -1;
      ++t.turn;
      if (next() % 4 == 0 || t.turn > 8) {
        sched::TrajectoryObservation o;
        o.trajectory = TrajectoryId(it->first);
        o.prompt = PromptId(t.prompt);
        o.turn_tokens = t.turn_tokens;
        o.tools = t.tools;
        plain.OnTrajectoryDone(o);
        indexed.OnTrajectoryDone(o);
        live.erase(it);
      } else {
        t.tools.push_back(sched::ToolObservation{next() % 2 ? "search" : "validator",
                                                 static_cast<workload::ToolStatus>(next() % 3),
                                                 static_cast<int64_t>(next() % 20000)});
        route(it->first, t);
      }
    } else if (what < 95) {
      const size_t i = next() % instances.size();
      instances[i].available = !instances[i].available;
      index.Update(instances, i);
    } else if (what < 98) {
      const int step = static_cast<int>(next() % 12);
      plain.OnStep(step);
      indexed.OnStep(step);
    } else {
      layout(1 + next() % 150);
    }
  }
}

}  // namespace libra::test
