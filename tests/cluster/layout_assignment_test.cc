// AssignEngines case by case: which engine serves each instance of a new layout, and which
// engines sleep, wake, stop or start. No process runs.
#include "cluster/layout_assignment.h"

#include "gtest/gtest.h"

namespace libra::cluster {
namespace {

using Kind = EngineChange::Kind;

backend::InstanceSpec Gpus(int node, int first, int tp, int64_t id = 0) {
  return backend::InstanceSpec{InstanceId(id), tp, node, first};
}

EngineView Live(int64_t key, backend::InstanceSpec spec, bool in_layout = true) {
  return EngineView{key, spec, in_layout, false, false};
}
EngineView Asleep(int64_t key, backend::InstanceSpec spec) {
  return EngineView{key, spec, false, true, false};
}
EngineView Dead(int64_t key, backend::InstanceSpec spec) {
  return EngineView{key, spec, false, false, true};
}

std::string Show(const LayoutAssignment& a) {
  std::string text = "serving:";
  for (const auto& s : a.serving) text += " " + (s ? std::to_string(*s) : std::string("new"));
  text += "; changes:";
  for (const EngineChange& c : a.changes) text += " [" + c.ToString() + "]";
  return text;
}

struct Case {
  const char* name;
  std::vector<int64_t> current;
  std::vector<EngineView> engines;
  std::vector<backend::InstanceSpec> instances;
  LayoutAssignment want;
};

TEST(AssignEnginesTest, Table) {
  const std::vector<Case> cases = {
      {"first layout: every instance starts an engine",
       {},
       {},
       {Gpus(0, 0, 2), Gpus(0, 2, 1)},
       {{std::nullopt, std::nullopt}, {{Kind::kStart, -1, 0}, {Kind::kStart, -1, 1}}}},
      {"the same layout again changes nothing",
       {0, 1},
       {Live(0, Gpus(0, 0, 2)), Live(1, Gpus(0, 2, 1))},
       {Gpus(0, 0, 2), Gpus(0, 2, 1)},
       {{0, 1}, {}}},
      {"lending the trainer's GPUs: kept engines stay, two new ones start",
       {0, 1},
       {Live(0, Gpus(0, 0, 2)), Live(1, Gpus(0, 2, 1))},
       {Gpus(0, 0, 2), Gpus(0, 2, 1), Gpus(0, 4, 1), Gpus(0, 5, 1)},
       {{0, 1, std::nullopt, std::nullopt}, {{Kind::kStart, -1, 2}, {Kind::kStart, -1, 3}}}},
      {"taking them back: the lent engines sleep",
       {0, 1, 2, 3},
       {Live(0, Gpus(0, 0, 2)), Live(1, Gpus(0, 2, 1)), Live(2, Gpus(0, 4, 1)),
        Live(3, Gpus(0, 5, 1))},
       {Gpus(0, 0, 2), Gpus(0, 2, 1)},
       {{0, 1}, {{Kind::kSleep, 2, -1}, {Kind::kSleep, 3, -1}}}},
      {"lending again wakes the sleeping engines on the same GPUs",
       {0, 1},
       {Live(0, Gpus(0, 0, 2)), Live(1, Gpus(0, 2, 1)), Asleep(2, Gpus(0, 4, 1)),
        Asleep(3, Gpus(0, 5, 1))},
       {Gpus(0, 0, 2), Gpus(0, 2, 1), Gpus(0, 4, 1), Gpus(0, 5, 1)},
       {{0, 1, 2, 3}, {{Kind::kWake, 2, 2}, {Kind::kWake, 3, 3}}}},
      {"an engine that moved index is kept by its GPUs",
       {0, 1},
       {Live(0, Gpus(0, 0, 1)), Live(1, Gpus(0, 1, 1))},
       {Gpus(0, 1, 1), Gpus(0, 0, 1)},
       {{1, 0}, {}}},
      {"a new TP size stops the sleeping engines on its GPUs and starts one",
       {0},
       {Live(0, Gpus(0, 0, 2)), Asleep(1, Gpus(0, 2, 1)), Asleep(2, Gpus(0, 3, 1))},
       {Gpus(0, 0, 2), Gpus(0, 2, 2)},
       {{0, std::nullopt}, {{Kind::kStop, 1, -1}, {Kind::kStop, 2, -1}, {Kind::kStart, -1, 1}}}},
      {"a live engine whose GPUs a new engine takes sleeps (it is not stopped)",
       {0, 1},
       {Live(0, Gpus(0, 0, 1)), Live(1, Gpus(0, 1, 1))},
       {Gpus(0, 0, 2)},
       {{std::nullopt}, {{Kind::kSleep, 0, -1}, {Kind::kSleep, 1, -1}, {Kind::kStart, -1, 0}}}},
      {"a dropped engine keeps its instance at the same index (which stays down)",
       {0, 1},
       {Dead(0, Gpus(0, 0, 1)), Live(1, Gpus(0, 1, 1))},
       {Gpus(0, 0, 1), Gpus(0, 1, 1)},
       {{0, 1}, {}}},
      {"a dead engine of an old layout is not woken, nor slept",
       {1},
       {Dead(0, Gpus(0, 0, 1)), Live(1, Gpus(0, 1, 1))},
       {Gpus(0, 1, 1), Gpus(0, 0, 1)},
       {{1, std::nullopt}, {{Kind::kStart, -1, 1}}}},
      {"other nodes never match",
       {0},
       {Live(0, Gpus(0, 0, 1))},
       {Gpus(1, 0, 1)},
       {{std::nullopt}, {{Kind::kSleep, 0, -1}, {Kind::kStart, -1, 0}}}},
      {"of two sleeping engines on the same GPUs the lower key wakes, the other stays asleep",
       {},
       {Asleep(4, Gpus(0, 0, 1)), Asleep(7, Gpus(0, 0, 1))},
       {Gpus(0, 0, 1)},
       {{4}, {{Kind::kWake, 4, 0}}}},
  };
  for (const Case& c : cases) {
    const LayoutAssignment got = AssignEngines(c.current, c.engines, c.instances);
    EXPECT_EQ(got, c.want) << c.name << "\n got  " << Show(got) << "\n want " << Show(c.want);
  }
}

}  // namespace
}  // namespace libra::cluster
