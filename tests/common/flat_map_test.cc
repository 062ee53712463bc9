#include "common/flat_map.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace libra {
namespace {

TEST(FlatMapTest, InsertFindEraseKeepProbeChains) {
  // Backward-shift deletion keeps colliding keys findable.
  FlatMap map(4);
  for (uint64_t k = 0; k < 1000; ++k) map.Insert(k * 7919, static_cast<uint32_t>(k));
  for (uint64_t k = 0; k < 1000; k += 2) map.Erase(k * 7919);
  EXPECT_EQ(map.size(), 500u);
  for (uint64_t k = 0; k < 1000; ++k) {
    EXPECT_EQ(map.Find(k * 7919), k % 2 == 0 ? FlatMap::kNone : k);
  }
  map.Erase(12345);
  EXPECT_EQ(map.size(), 500u);
}

TEST(FlatMapTest, InsertReplacesAndClearEmpties) {
  FlatMap map;
  map.Insert(7, 1);
  map.Insert(7, 2);
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(map.Find(7), 2u);
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.Find(7), FlatMap::kNone);
}

}  // namespace
}  // namespace libra
