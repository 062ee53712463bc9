#include "common/window_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "common/rng.h"

namespace libra {
namespace {

constexpr uint32_t kNone = WindowIndex::kNone;

TEST(WindowIndexTest, KeysFromACounterLiveInTheRing) {
  // A window of 3,000 live keys slides over 100,000: every key found until erased, none in the
  // FlatMap.
  WindowIndex index;
  for (uint64_t k = 0; k < 100000; ++k) {
    index.Insert(k, static_cast<uint32_t>(k % 7));
    if (k >= 3000) index.Erase(k - 3000);
  }
  EXPECT_EQ(index.size(), 3000u);
  EXPECT_EQ(index.overflow_size(), 0u);
  for (uint64_t k = 0; k < 100000; ++k) {
    EXPECT_EQ(index.Find(k), k < 97000 ? kNone : k % 7) << k;
  }
  EXPECT_EQ(index.Find(100000), kNone);
}

TEST(WindowIndexTest, AKeyBelowTheWindowWidensIt) {
  WindowIndex index;
  index.Insert(5000, 1);
  index.Insert(4000, 2);
  index.Insert(6000, 3);
  EXPECT_EQ(index.Find(4000), 2u);
  EXPECT_EQ(index.Find(5000), 1u);
  EXPECT_EQ(index.Find(6000), 3u);
  EXPECT_EQ(index.Find(4500), kNone);
  EXPECT_EQ(index.overflow_size(), 0u);
  index.Erase(4000);
  index.Erase(5000);
  EXPECT_EQ(index.Find(6000), 3u);
  EXPECT_EQ(index.size(), 1u);
}

TEST(WindowIndexTest, FarKeysGoToTheFlatMapAndStayFindable) {
  WindowIndex index;
  index.Insert(0, 10);  // a straggler: the window cannot pass it
  const uint64_t far = WindowIndex::kMinSpan * 4;
  index.Insert(far, 11);
  index.Insert(std::numeric_limits<uint64_t>::max(), 12);
  index.Insert(uint64_t{1} << 62, 13);
  EXPECT_EQ(index.overflow_size(), 3u);
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.Find(0), 10u);
  EXPECT_EQ(index.Find(far), 11u);
  EXPECT_EQ(index.Find(std::numeric_limits<uint64_t>::max()), 12u);
  EXPECT_EQ(index.Find(uint64_t{1} << 62), 13u);
  // Once the straggler leaves, the ring starts again wherever the next key is.
  index.Erase(0);
  index.Insert(far + 1, 14);
  EXPECT_EQ(index.overflow_size(), 3u);
  EXPECT_EQ(index.Find(far), 11u);
  EXPECT_EQ(index.Find(far + 1), 14u);
  index.Erase(far);
  index.Erase(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(index.Find(far), kNone);
  EXPECT_EQ(index.Find(std::numeric_limits<uint64_t>::max()), kNone);
  EXPECT_EQ(index.size(), 2u);
}

TEST(WindowIndexTest, AgreesWithAHashMapUnderRandomUse) {
  // Mostly keys from a counter, erased out of order, some far ones and some re-inserted below
  // the window; checked against std::unordered_map after every operation batch.
  Rng rng(7);
  WindowIndex index;
  std::unordered_map<uint64_t, uint32_t> expected;
  std::vector<uint64_t> live;
  uint64_t next = 1000;
  for (int op = 0; op < 200000; ++op) {
    const double u = rng.Uniform();
    if (u < 0.45 || live.empty()) {
      uint64_t key = next++;
      if (u < 0.01) key = static_cast<uint64_t>(rng.UniformInt(0, int64_t{1} << 50));
      if (u >= 0.01 && u < 0.02) key = static_cast<uint64_t>(rng.UniformInt(0, 999));
      if (expected.count(key) != 0) continue;
      const auto value = static_cast<uint32_t>(op);
      index.Insert(key, value);
      expected[key] = value;
      live.push_back(key);
    } else {
      const auto at = static_cast<size_t>(
          rng.UniformInt(0, static_cast<int64_t>(std::min<size_t>(live.size(), 64)) - 1));
      const uint64_t key = live[at];  // among the oldest: a window that slides
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
      index.Erase(key);
      expected.erase(key);
    }
    if (op % 997 == 0) {
      ASSERT_EQ(index.size(), expected.size()) << op;
      for (const auto& [key, value] : expected) ASSERT_EQ(index.Find(key), value) << key;
      for (uint64_t key = next - 2000; key < next + 10; ++key) {
        const auto it = expected.find(key);
        ASSERT_EQ(index.Find(key), it == expected.end() ? kNone : it->second) << key;
      }
    }
  }
  EXPECT_GT(index.overflow_size(), 0u);
  EXPECT_LT(index.overflow_size(), index.size());
}

TEST(WindowIndexTest, CopiesAreIndependent) {
  WindowIndex a;
  a.Insert(1, 1);
  WindowIndex b = a;
  b.Insert(2, 2);
  b.Erase(1);
  EXPECT_EQ(a.Find(1), 1u);
  EXPECT_EQ(a.Find(2), kNone);
  EXPECT_EQ(b.Find(1), kNone);
  EXPECT_EQ(b.Find(2), 2u);
}

}  // namespace
}  // namespace libra
