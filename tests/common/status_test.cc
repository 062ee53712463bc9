#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/test_util.h"

namespace libra {
namespace {

Status FailIf(bool fail, int* calls) {
  ++*calls;
  return fail ? Status::Backend("here", "failed") : Status();
}

Status TwoSteps(bool fail_first, bool fail_second, int* calls) {
  LIBRA_RETURN_IF_ERROR(FailIf(fail_first, calls));
  LIBRA_RETURN_IF_ERROR(FailIf(fail_second, calls));
  return Status();
}

Result<std::unique_ptr<int>> MakeInt(int value) {
  if (value < 0) return Status::InvalidArgument("negative");
  return std::make_unique<int>(value);
}

Result<int> Doubled(int value) {
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(value));  // move-only value
  LIBRA_ASSIGN_OR_RETURN(auto q, MakeInt(value));                  // two on one function
  return *p + *q;
}

TEST(StatusTest, DefaultIsOk) {
  // A default Status is OK, has an empty message and prints as "OK".
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, FactoriesSetCodeAndJoinWhereWithWhat) {
  // Every factory gives its code; those with a location read "where: what", or just "what" when
  // the location is empty.
  struct Case {
    std::string name;
    Status status;
    StatusCode code;
    std::string message;
    std::string printed;
  };
  const std::vector<Case> cases = {
      {"invalid recipe", Status::InvalidRecipe("r.toml:3:1", "bad"), StatusCode::kInvalidRecipe,
       "r.toml:3:1: bad", "invalid recipe: r.toml:3:1: bad"},
      {"invalid recipe, no where", Status::InvalidRecipe("", "bad"), StatusCode::kInvalidRecipe,
       "bad", "invalid recipe: bad"},
      {"invalid argument", Status::InvalidArgument("x"), StatusCode::kInvalidArgument, "x",
       "invalid argument: x"},
      {"not found", Status::NotFound("run 3"), StatusCode::kNotFound, "run 3", "not found: run 3"},
      {"unschedulable", Status::Unschedulable("too big"), StatusCode::kUnschedulable, "too big",
       "unschedulable: too big"},
      {"backend", Status::Backend("sim", "boom"), StatusCode::kBackend, "sim: boom",
       "backend error: sim: boom"},
      {"store", Status::Store("insert_run", "locked"), StatusCode::kStore, "insert_run: locked",
       "store error: insert_run: locked"},
      {"interrupted", Status::Interrupted("ctrl-c"), StatusCode::kInterrupted, "ctrl-c",
       "interrupted: ctrl-c"},
      {"internal", Status::Internal("bug"), StatusCode::kInternal, "bug", "internal error: bug"},
      {"timeout (constructor)", Status(StatusCode::kTimeout, "slow"), StatusCode::kTimeout, "slow",
       "timeout: slow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), c.message);
    EXPECT_EQ(c.status.ToString(), c.printed);
  }
}

TEST(StatusTest, CodeNamesAreDistinct) {
  // Every code has its own name, so messages and logs can tell them apart.
  const std::vector<StatusCode> codes = {
      StatusCode::kOk,       StatusCode::kInvalidRecipe, StatusCode::kInvalidArgument,
      StatusCode::kNotFound, StatusCode::kUnschedulable, StatusCode::kBackend,
      StatusCode::kTimeout,  StatusCode::kStore,         StatusCode::kInterrupted,
      StatusCode::kInternal};
  std::vector<std::string> names;
  for (StatusCode code : codes) {
    const std::string name = StatusCodeName(code);
    EXPECT_NE(name, "unknown");
    for (const std::string& other : names) EXPECT_NE(name, other);
    names.push_back(name);
  }
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  // Two statuses are equal only when both code and message match.
  EXPECT_EQ(Status::NotFound("a"), Status::NotFound("a"));
  EXPECT_NE(Status::NotFound("a"), Status::NotFound("b"));
  EXPECT_NE(Status::NotFound("a"), Status::Internal("a"));
  EXPECT_EQ(Status(), Status());
}

TEST(StatusTest, ResultHoldsValue) {
  // A Result built from a value is OK, its status is OK and the value is reachable every way.
  Result<std::string> r = std::string("hello");
  ASSERT_OK(r);
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), "hello");
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(r->size(), 5u);
  r.value() += "!";
  EXPECT_EQ(*r, "hello!");
  const std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "hello!");
}

TEST(StatusTest, ResultHoldsError) {
  // A Result built from an error is not OK and returns that error.
  const Result<int> r = Status::NotFound("nothing");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::NotFound("nothing"));
}

TEST(StatusDeathTest, ResultFromOkStatusAborts) {
  // Building a Result from an OK status is a bug: there would be neither value nor error.
  EXPECT_DEATH({ Result<int> r{Status()}; }, "Result constructed from an OK status");
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  // Reading the value of an error is a bug and aborts, naming the error.
  const Result<int> r = Status::Internal("oops");
  EXPECT_DEATH({ (void)r.value(); }, "value\\(\\) on an error: internal error: oops");
}

TEST(StatusTest, ReturnIfErrorStopsAtFirstError) {
  // LIBRA_RETURN_IF_ERROR returns the first error and skips what follows; OK falls through.
  struct Case {
    std::string name;
    bool fail_first;
    bool fail_second;
    int calls;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"both ok", false, false, 2, true},
      {"first fails", true, false, 1, false},
      {"second fails", false, true, 2, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    int calls = 0;
    const Status s = TwoSteps(c.fail_first, c.fail_second, &calls);
    EXPECT_EQ(calls, c.calls);
    EXPECT_EQ(s.ok(), c.ok);
    if (!c.ok) {
      EXPECT_EQ(s, Status::Backend("here", "failed"));
    }
  }
}

TEST(StatusTest, AssignOrReturnMovesValueOrPropagatesError) {
  // LIBRA_ASSIGN_OR_RETURN declares the variable from the value (move-only types included), or
  // returns the error unchanged.
  const Result<int> good = Doubled(21);
  ASSERT_OK(good);
  EXPECT_EQ(*good, 42);
  const Result<int> bad = Doubled(-1);
  EXPECT_EQ(bad.status(), Status::InvalidArgument("negative"));
}

}  // namespace
}  // namespace libra
