#include "planner/planner.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/components.h"
#include "support/test_util.h"

namespace libra::planner {
namespace {

struct Expected {
  int node;
  int first_gpu;
};

TEST(PackInstancesTest, PacksNodeByNode) {
  // Instances fill the range node by node, numbered 0..n-1, each on one node.
  struct Case {
    std::string name;
    int gpus_per_node;
    int first_gpu;
    int gpus;
    int tp;
    std::vector<Expected> instances;
  };
  const std::vector<Case> cases = {
      {"one node tp1", 4, 0, 4, 1, {{0, 0}, {0, 1}, {0, 2}, {0, 3}}},
      {"two nodes tp4", 8, 8, 16, 4, {{1, 8}, {1, 12}, {2, 16}, {2, 20}}},
      {"starting mid-node", 8, 4, 12, 4, {{0, 4}, {1, 8}, {1, 12}}},
      {"tp8 on whole nodes", 8, 8, 8, 8, {{1, 8}}},
      {"nothing to pack", 8, 8, 0, 2, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto packed = PackInstances(c.gpus_per_node, c.first_gpu, c.gpus, std::vector<int>{c.tp});
    ASSERT_OK(packed);
    EXPECT_TRUE(InstancesPack(c.gpus_per_node, c.first_gpu, c.gpus, {c.tp}));
    ASSERT_EQ(packed->size(), c.instances.size());
    for (size_t i = 0; i < c.instances.size(); ++i) {
      const backend::InstanceSpec& spec = (*packed)[i];
      EXPECT_EQ(spec.id, InstanceId(static_cast<int64_t>(i)));
      EXPECT_EQ(spec.tp, c.tp);
      EXPECT_EQ(spec.node, c.instances[i].node);
      EXPECT_EQ(spec.first_gpu, c.instances[i].first_gpu);
    }
  }
}

TEST(PackInstancesTest, RejectsInstancesThatWouldSpanNodes) {
  // GPUs of one node that cannot be split into whole instances are unschedulable: an instance
  // never spans a node boundary, even when the GPUs of two nodes together would fit.
  struct Case {
    std::string name;
    int gpus_per_node;
    int first_gpu;
    int gpus;
    int tp;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"fragment at the start", 8, 4, 12, 8,
       "4 rollout GPUs left on node 0 cannot hold a TP-8 instance (an instance never spans "
       "nodes)"},
      {"fragment at the end", 8, 0, 12, 8,
       "4 rollout GPUs left on node 1 cannot hold a TP-8 instance (an instance never spans "
       "nodes)"},
      {"not a multiple", 8, 2, 6, 4,
       "2 rollout GPUs left on node 0 cannot hold a TP-4 instance (an instance never spans "
       "nodes)"},
      {"single GPU", 8, 15, 1, 2,
       "1 rollout GPU left on node 1 cannot hold a TP-2 instance (an instance never spans "
       "nodes)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto packed = PackInstances(c.gpus_per_node, c.first_gpu, c.gpus, std::vector<int>{c.tp});
    ASSERT_FALSE(packed.ok());
    EXPECT_EQ(packed.status(), Status::Unschedulable(c.message));
    EXPECT_FALSE(InstancesPack(c.gpus_per_node, c.first_gpu, c.gpus, {c.tp}));
  }
}

TEST(PackSizesTest, LargestFirstIntoNodesInGpuOrder) {
  // 12 GPUs in nodes of 8: node 0 full, node 1 holds 4. TP 4, 2, 2, 2, 1, 1 -> node 0: 4, 2, 2;
  // node 1: 2, 1, 1.
  auto packed = PackSizes(8, {1, 2, 4, 2, 1, 2});
  ASSERT_OK(packed);
  std::vector<std::tuple<int64_t, int, int, int>> got;
  for (const backend::InstanceSpec& s : *packed)
    got.emplace_back(s.id.value, s.tp, s.node, s.first_gpu);
  EXPECT_EQ(
      got,
      (std::vector<std::tuple<int64_t, int, int, int>>{
          {0, 4, 0, 0}, {1, 2, 0, 4}, {2, 2, 0, 6}, {3, 2, 1, 8}, {4, 1, 1, 10}, {5, 1, 1, 11}}));
  // 12 GPUs as TP 8 + 2 + 2 fits (8 | 2 2); 4 + 4 + 4 + 2 + 2 = 16 fits two nodes.
  EXPECT_OK(PackSizes(8, {2, 8, 2}));
  EXPECT_OK(PackSizes(8, {4, 4, 4, 2, 2}));
  // 6 GPUs in nodes of 4 as TP 2 + 2 + 2 fits (2 2 | 2); nodes of 8 with 3 + ... sizes that
  // cannot share: 8 + 8 in nodes of 4 never fits.
  EXPECT_OK(PackSizes(4, {2, 2, 2}));
  const auto bad = PackSizes(4, {8, 8});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "rollout instances of TP 8,8 do not fit 16 GPUs in nodes of 4 without crossing a node");
  EXPECT_TRUE(PackSizes(8, {})->empty());
}

TEST(CheckInstancesHoldTest, EveryTpSizeMustHoldTheLongestContext) {
  // Qwen3-30B-A3B on an A800: a TP1 instance holds 87,263 tokens of KV cache, a TP2 far more.
  const auto cost = test::Roofline("A800-80G", "Qwen3-30B-A3B");
  ASSERT_EQ(cost->KvCapacityTokens(1), 87263);
  PlanContext context;
  context.max_sequence_tokens = 87264;
  EXPECT_OK(CheckInstancesHold(context, {1}));  // no cost model: nothing to check
  context.cost = cost.get();
  EXPECT_EQ(CheckInstancesHold(context, {2, 1}),
            Status::Unschedulable("a TP-1 rollout instance of Qwen3-30B-A3B holds 87263 tokens of "
                                  "KV cache, fewer than the longest context to expect (87264 "
                                  "tokens; an engine would not start): raise rollout_tp"));
  EXPECT_OK(CheckInstancesHold(context, {2, 4}));
  context.max_sequence_tokens = 87263;
  EXPECT_OK(CheckInstancesHold(context, {1}));
}

TEST(PlanContextTest, TotalGpus) {
  // The cluster size is nodes times GPUs per node.
  PlanContext context;
  context.nodes = 3;
  context.gpus_per_node = 4;
  EXPECT_EQ(context.total_gpus(), 12);
}

}  // namespace
}  // namespace libra::planner
