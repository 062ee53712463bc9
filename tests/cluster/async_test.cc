#include "cluster/async.h"

#include "gtest/gtest.h"

namespace libra::cluster {
namespace {

TEST(RunAllTest, JoinsEveryStepAndReportsTheFirstError) {
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok());
  std::vector<Done> pending;
  std::optional<Status> result;
  std::vector<AsyncStep> steps;
  for (int i = 0; i < 3; ++i) steps.push_back([&](Done d) { pending.push_back(std::move(d)); });
  RunAll(**loop, std::move(steps), [&](Status s) { result = s; });
  ASSERT_EQ(pending.size(), 3u);
  pending[1](Status::Backend("b", "second"));
  pending[2](Status::Backend("c", "third"));
  EXPECT_FALSE(result.has_value());
  pending[0](Status());
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->message(), "b: second");
}

TEST(RunAllTest, NoStepsAnswerAtTheLoopsNextTurn) {
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok());
  std::optional<Status> result;
  RunAll(**loop, {}, [&](Status s) { result = s; });
  EXPECT_FALSE(result.has_value());  // never inside RunAll
  ASSERT_TRUE((*loop)->RunUntil([&] { return result.has_value(); }).ok());
  EXPECT_TRUE(result->ok());
}

}  // namespace
}  // namespace libra::cluster
