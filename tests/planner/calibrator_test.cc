#include "planner/calibrator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace libra::planner {
namespace {

TEST(CalibratorTest, StartsAtOneAndConvergesToTheMeasuredRatio) {
  Calibrator c;
  EXPECT_EQ(c.factor(), 1.0);
  EXPECT_FALSE(c.Observe(10, 13));
  EXPECT_NEAR(c.factor(), 1.3, 1e-12);  // the first value sets it
  for (int i = 0; i < 30; ++i) c.Observe(10, 13);
  EXPECT_NEAR(c.factor(), 1.3, 1e-9);
  EXPECT_EQ(c.observations(), 31);
  EXPECT_EQ(c.resets(), 0);
}

TEST(CalibratorTest, SmoothsNoiseWithTheEwma) {
  // Ratios 1.1 then 1.2 (small steps, below the change-point floor): alpha 0.3 moves a third.
  Calibrator c;
  c.Observe(1, 1.1);
  c.Observe(1, 1.2);
  EXPECT_NEAR(c.factor(), std::exp(0.3 * std::log(1.2) + 0.7 * std::log(1.1)), 1e-12);
}

TEST(CalibratorTest, ChangePointResetsToTheNewRatio) {
  // Steady at 1.0 (with 1% wiggle), then the backend becomes twice as slow: the next value is a
  // change point and the factor jumps to 2 instead of creeping towards it.
  Calibrator c;
  for (int i = 0; i < 10; ++i) c.Observe(1, i % 2 == 0 ? 1.01 : 0.99);
  EXPECT_NEAR(c.factor(), 1.0, 0.02);
  EXPECT_TRUE(c.Observe(1, 2.0));
  EXPECT_EQ(c.resets(), 1);
  EXPECT_NEAR(c.factor(), 2.0, 1e-12);
  // Not a change point while the window is too short after a reset.
  EXPECT_FALSE(c.Observe(1, 4.0));
}

TEST(CalibratorTest, IgnoresMeaninglessValues) {
  Calibrator c;
  EXPECT_FALSE(c.Observe(0, 5));
  EXPECT_FALSE(c.Observe(5, 0));
  EXPECT_FALSE(c.Observe(std::numeric_limits<double>::infinity(), 5));
  EXPECT_FALSE(c.Observe(5, std::nan("")));
  EXPECT_EQ(c.observations(), 0);
  EXPECT_EQ(c.factor(), 1.0);
}

}  // namespace
}  // namespace libra::planner
