#include "sched/eligible.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace libra::sched {
namespace {

std::vector<InstanceState> Instances(const std::vector<int>& active,
                                     const std::vector<bool>& available) {
  std::vector<InstanceState> out;
  for (size_t i = 0; i < active.size(); ++i) {
    InstanceState s;
    s.id = InstanceId(static_cast<int64_t>(i));
    s.active = active[i];
    s.available = available[i];
    out.push_back(s);
  }
  return out;
}

TEST(EligibleInstancesTest, FiltersByAvailabilityAndCap) {
  // Available instances below the cap are eligible; with every available instance at the cap,
  // all available ones are (the turn queues); unavailable instances never are.
  struct Case {
    std::string name;
    std::vector<int> active;
    std::vector<bool> available;
    int max_active;
    std::vector<size_t> eligible;
  };
  const std::vector<Case> cases = {
      {"no cap, all available", {5, 0, 9}, {true, true, true}, 0, {0, 1, 2}},
      {"no cap skips unavailable", {0, 0, 0}, {true, false, true}, 0, {0, 2}},
      {"cap filters busy", {2, 1, 2, 0}, {true, true, true, true}, 2, {1, 3}},
      {"all at cap: every available", {2, 3, 2}, {true, true, false}, 2, {0, 1}},
      {"below cap but unavailable", {0, 2}, {false, true}, 2, {1}},
      {"none available", {0, 0}, {false, false}, 0, {}},
      {"no instances", {}, {}, 1, {}},
      {"negative cap means none", {7, 8}, {true, true}, -1, {0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<InstanceState> instances = Instances(c.active, c.available);
    std::vector<size_t> eligible = {99};  // replaced, not appended to
    EligibleInstances(instances, c.max_active, &eligible);
    EXPECT_EQ(eligible, c.eligible);
  }
}

}  // namespace
}  // namespace libra::sched
