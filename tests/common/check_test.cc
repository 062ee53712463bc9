#include "common/check.h"

#include <gtest/gtest.h>

namespace libra {
namespace {

int Count(int* calls) { return ++*calls; }

TEST(CheckDeathTest, FailedCheckAbortsWithFileLineConditionAndMessage) {
  // A broken invariant aborts and prints where (file:line), the condition and the message.
  const int x = 2;
  EXPECT_DEATH(LIBRA_CHECK(x + 1 == 4) << "x is " << x,
               "internal error \\(a bug, please report it\\)\n.*check_test\\.cc:[0-9]+: check "
               "failed: x \\+ 1 == 4: x is 2");
}

TEST(CheckDeathTest, FailedCheckWithoutMessageStillAborts) {
  // The message is optional.
  EXPECT_DEATH(LIBRA_CHECK(false), "check_test\\.cc:[0-9]+: check failed: false: ");
}

TEST(CheckTest, PassingCheckEvaluatesNoMessage) {
  // When the condition holds, nothing happens and the message is not even evaluated.
  int calls = 0;
  LIBRA_CHECK(calls == 0) << Count(&calls);
  EXPECT_EQ(calls, 0);
}

TEST(CheckTest, WorksAsTheOnlyStatementOfAnIf) {
  // The macro is a single statement: an `else` after it binds to the caller's `if`.
  int branch = 0;
  const bool outer = false;
  if (outer)
    LIBRA_CHECK(true) << "never";
  else
    branch = 2;
  EXPECT_EQ(branch, 2);
}

}  // namespace
}  // namespace libra
