#include "sched/instance_index.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/router_support.h"

namespace libra::sched {
namespace {

TEST(InstanceIndexTest, TracksAvailableInstancesByActiveAndMovesTheEpoch) {
  // Active counts move the levels, not the epoch; availability and new lists move the epoch.
  std::vector<InstanceState> instances = test::Cluster({1, 1, 2});
  InstanceIndex index;
  index.Reset(instances);
  const uint64_t start = index.epoch();
  EXPECT_EQ(index.size(), 3u);
  EXPECT_EQ(index.active().MinLoad(), 0);
  instances[0].active = 2;
  index.Update(instances, 0);
  instances[1].active = 1;
  index.Update(instances, 1);
  instances[2].active = 1;
  index.Update(instances, 2);
  EXPECT_EQ(index.epoch(), start);
  EXPECT_EQ(index.active().MinLoad(), 1);
  EXPECT_EQ(index.active().FirstWith(1, 2), 2u);
  instances[1].available = false;
  index.Update(instances, 1);
  EXPECT_GT(index.epoch(), start);
  EXPECT_FALSE(index.active().present(1));
  const uint64_t before = index.epoch();
  index.Update(instances, 1);  // nothing changed
  EXPECT_EQ(index.epoch(), before);
  index.Reset(test::Cluster({4}));
  EXPECT_GT(index.epoch(), before);
  EXPECT_EQ(index.size(), 1u);
}

}  // namespace
}  // namespace libra::sched
