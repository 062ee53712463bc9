#include "common/id_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/ids.h"

namespace libra {
namespace {

struct Entry {
  std::string name;
  std::vector<int> turns;
};

TEST(IdTableTest, FindsWhatWasInsertedUntilErased) {
  IdTable<TrajectoryIdTag, Entry> table;
  EXPECT_TRUE(table.empty());
  for (int64_t id = 0; id < 5000; ++id) {
    table.Insert(TrajectoryId(id * 3), Entry{std::to_string(id), {}});
  }
  for (int64_t id = 0; id < 5000; id += 2) table.Erase(TrajectoryId(id * 3));
  table.Erase(TrajectoryId(1));  // absent: a no-op
  EXPECT_EQ(table.size(), 2500u);
  for (int64_t id = 0; id < 5000; ++id) {
    const Entry* e = table.Find(TrajectoryId(id * 3));
    if (id % 2 == 0) {
      EXPECT_EQ(e, nullptr) << id;
    } else {
      ASSERT_NE(e, nullptr) << id;
      EXPECT_EQ(e->name, std::to_string(id));
    }
  }
}

TEST(IdTableTest, AnEntryStaysWhereItIsWhileOthersComeAndGo) {
  IdTable<TrajectoryIdTag, Entry> table;
  Entry& kept = table.Insert(TrajectoryId(0), Entry{"kept", {1, 2}});
  for (int64_t id = 1; id < 10000; ++id) {
    table.Insert(TrajectoryId(id), Entry{});
    if (id % 3 == 0) table.Erase(TrajectoryId(id - 1));
  }
  EXPECT_EQ(table.Find(TrajectoryId(0)), &kept);
  EXPECT_EQ(kept.turns, (std::vector<int>{1, 2}));
}

TEST(IdTableTest, ErasingReleasesTheEntryAndItsSlotIsReused) {
  IdTable<TrajectoryIdTag, Entry> table;
  Entry& first = table.Insert(TrajectoryId(1), Entry{"one", {1, 2, 3}});
  table.Erase(TrajectoryId(1));
  EXPECT_TRUE(first.name.empty());
  EXPECT_TRUE(first.turns.empty());
  EXPECT_EQ(table.Find(TrajectoryId(1)), nullptr);
  Entry& second = table.Insert(TrajectoryId(2), Entry{"two", {}});
  EXPECT_EQ(&second, &first);  // the freed slot, not a new one
  EXPECT_EQ(table.Find(TrajectoryId(2))->name, "two");
}

TEST(IdTableDeathTest, InsertingAPresentIdIsABug) {
  IdTable<TrajectoryIdTag, Entry> table;
  table.Insert(TrajectoryId(4), Entry{});
  EXPECT_DEATH(table.Insert(TrajectoryId(4), Entry{}), "already present");
}

}  // namespace
}  // namespace libra
