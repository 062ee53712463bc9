#include "sched/load_levels.h"

#include <gtest/gtest.h>

#include <vector>

namespace libra::sched {
namespace {

// What LoadLevels answers, by scanning every item.
size_t Scan(const std::vector<int>& load, int wanted, size_t start) {
  const size_t n = load.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start % n + k) % n;
    if (load[i] == wanted) return i;
  }
  return LoadLevels::kNone;
}

TEST(LoadLevelsTest, LeastLoadAndFirstFromStartMatchAScan) {
  // Random loads, removals and starts over sizes around the 64-bit word and the 4096-item
  // summary boundaries: every answer equals the scan's.
  for (const size_t n : {1u, 5u, 64u, 65u, 200u, 4097u, 9000u}) {
    LoadLevels levels(n);
    std::vector<int> load(n, -1);
    uint64_t x = n;
    auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
    for (int op = 0; op < 3000; ++op) {
      const size_t i = next() % n;
      if (next() % 5 == 0) {
        levels.Remove(i);
        load[i] = -1;
      } else {
        const int l = static_cast<int>(next() % 6);
        levels.Set(i, l);
        load[i] = l;
      }
      int least = -1;
      for (int l : load) {
        if (l >= 0 && (least < 0 || l < least)) least = l;
      }
      ASSERT_EQ(levels.MinLoad(), least) << "n " << n << " op " << op;
      const size_t start = next() % (2 * n);
      if (least >= 0) {
        ASSERT_EQ(levels.FirstWith(least, start), Scan(load, least, start));
      }
      const int other = static_cast<int>(next() % 7);
      ASSERT_EQ(levels.FirstWith(other, start), Scan(load, other, start)) << other;
      ASSERT_EQ(levels.present(i), load[i] >= 0);
    }
  }
}

TEST(LoadLevelsTest, EmptyAndReset) {
  LoadLevels levels(3);
  EXPECT_EQ(levels.MinLoad(), -1);
  EXPECT_EQ(levels.FirstWith(0, 0), LoadLevels::kNone);
  levels.Set(2, 4);
  levels.Remove(0);  // absent: no-op
  EXPECT_EQ(levels.MinLoad(), 4);
  EXPECT_EQ(levels.FirstWith(4, 0), 2u);
  levels.Reset(2);
  EXPECT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels.MinLoad(), -1);
  EXPECT_FALSE(levels.present(1));
}

}  // namespace
}  // namespace libra::sched
