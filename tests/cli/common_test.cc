#include "cli/common.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/exit_codes.h"
#include "common/json.h"
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

TEST(CliCommonTest, StepLogRedrawsOnATerminalAndPrintsLinesOtherwise) {
  // On a terminal with text logs: one line redrawn and erased. Otherwise one line per finished
  // step (text, or a JSON object with --log-format json). Disabled (--quiet): nothing.
  records::StepRecord step;
  step.step = 0;
  step.end_s = 12.5;
  step.rollout_s = 9;
  step.train_s = 3;
  step.wait_s = 9.5;
  step.trajectories = 10;
  step.reward_mean = 0.25;
  experiment::Progress p{1, 4, 12.5, 10, 1000, &step, 7};
  std::ostringstream out;
  std::ostringstream err;
  {
    Io tty{out, err, true};
    StepLog log(tty, true, false, out, "q/s", true);
    log.Update(p);
  }
  EXPECT_EQ(out.str(), "\r\033[Kq/s: step 1/4, 12.5 s simulated, 0.800 traj/s\r\033[K");
  std::ostringstream lines;
  {
    Io pipe{lines, err, false};
    StepLog log(pipe, true, false, lines, "q/s", true);
    log.Update(p);
  }
  EXPECT_EQ(lines.str(),
            "q/s: run 7 step 1/4 done at 12.5 s simulated: step 12.5 s (rollout 9.0, train 3.0, "
            "wait 9.5), reward 0.250, 0.800 traj/s so far\n");
  std::ostringstream json;
  {
    Io tty{out, err, true};  // JSON lines even on a terminal: they were asked for
    StepLog log(tty, true, true, json, "q/s", true);
    log.Update(p);
  }
  auto parsed = ParseJson(json.str());
  ASSERT_TRUE(parsed.ok()) << json.str();
  EXPECT_EQ(parsed->Find("event")->as_string(), "step");
  EXPECT_EQ(parsed->Find("run")->as_int(), 7);
  EXPECT_EQ(parsed->Find("step")->as_int(), 0);
  EXPECT_DOUBLE_EQ(parsed->Find("wait_s")->as_double(), 9.5);
  std::ostringstream quiet;
  {
    Io pipe{quiet, err, false};
    StepLog off(pipe, false, false, quiet, "q/s", true);
    off.Update(p);
  }
  EXPECT_EQ(quiet.str(), "");
}

}  // namespace
}  // namespace libra::cli
