#include "cli/common.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/exit_codes.h"
#include "support/test_util.h"

namespace libra::cli {
namespace {

TEST(CliCommonTest, ExitCodes) {
  // Usage and recipe errors are 2, interrupts 130, everything else 1.
  EXPECT_EQ(ExitCodeFor(Status()), 0);
  EXPECT_EQ(ExitCodeFor(Status::InvalidRecipe("a", "b")), 2);
  EXPECT_EQ(ExitCodeFor(Status::InvalidArgument("a")), 2);
  EXPECT_EQ(ExitCodeFor(Status::NotFound("a")), 2);
  EXPECT_EQ(ExitCodeFor(Status::Interrupted("a")), 130);
  EXPECT_EQ(ExitCodeFor(Status::Store("a", "b")), 1);
  EXPECT_EQ(ExitCodeFor(Status::Internal("a")), 1);
}

TEST(CliCommonTest, FailPrintsRecipeErrorsWithACount) {
  // A recipe's problems are printed one per line, then counted.
  std::ostringstream out;
  std::ostringstream err;
  Io io{out, err, false};
  EXPECT_EQ(Fail(io, Status(StatusCode::kInvalidRecipe, "a:1:1: x: bad\na:2:1: y: bad")), 2);
  EXPECT_EQ(err.str(), "a:1:1: x: bad\na:2:1: y: bad\nlibra: the recipe has 2 errors\n");
  err.str("");
  EXPECT_EQ(Fail(io, Status::Store("db", "locked")), 1);
  EXPECT_EQ(err.str(), "libra: error: db: locked\n");
}

TEST(CliCommonTest, ProgressLineOnlyOnATerminal) {
  // Drawn and erased on a terminal; silent otherwise or when disabled.
  std::ostringstream out;
  std::ostringstream err;
  experiment::Progress p{1, 4, 12.5, 10, 1000};
  {
    Io tty{out, err, true};
    ProgressLine line(tty, true, "q/s", true);
    line.Update(p);
  }
  EXPECT_EQ(out.str(), "\r\033[Kq/s: step 1/4, 12.5 s simulated, 0.800 traj/s\r\033[K");
  std::ostringstream quiet;
  {
    Io pipe{quiet, err, false};
    ProgressLine line(pipe, true, "q/s", true);
    line.Update(p);
    Io tty{quiet, err, true};
    ProgressLine off(tty, false, "q/s", true);
    off.Update(p);
  }
  EXPECT_EQ(quiet.str(), "");
}

}  // namespace
}  // namespace libra::cli
