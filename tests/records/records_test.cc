#include "records/records.h"

#include <gtest/gtest.h>

namespace libra::records {
namespace {

TEST(RecordsTest, ARunOwnerNamesItsProcessAndHost) {
  // How a run's owner appears in messages (a run left running by another libra).
  EXPECT_EQ((RunOwner{"node-1", 1234, "boot/99"}).ToString(), "pid 1234 on host node-1");
}

TEST(RecordsTest, ARunInfoStartsRunningAndTellsASimulatedRun) {
  RunInfo run;
  EXPECT_EQ(run.status, kRunRunning);
  run.backend = "sim";
  EXPECT_TRUE(run.Simulated());
  run.backend = "cluster";
  EXPECT_FALSE(run.Simulated());
}

}  // namespace
}  // namespace libra::records
