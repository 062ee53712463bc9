#include "cluster/async.h"

#include <memory>
#include <utility>

namespace libra::cluster {

namespace {

void Join(EventLoop& loop, std::vector<AsyncStep> steps, Done then, bool fail_fast) {
  struct Join {
    size_t left = 0;
    Status first;
    Done then;
    bool answered = false;
  };
  auto join = std::make_shared<Join>();
  join->left = steps.size();
  join->then = std::move(then);
  if (steps.empty()) {
    loop.AddTimer(EventLoop::Clock::duration::zero(), [join] { join->then(Status()); });
    return;
  }
  for (AsyncStep& step : steps) {
    step([join, fail_fast](Status status) {
      if (!status.ok() && join->first.ok()) join->first = std::move(status);
      const bool last = --join->left == 0;
      if (join->answered || !(last || (fail_fast && !join->first.ok()))) return;
      join->answered = true;
      join->then(join->first);
    });
  }
}

}  // namespace

void RunAll(EventLoop& loop, std::vector<AsyncStep> steps, Done then) {
  Join(loop, std::move(steps), std::move(then), false);
}

void RunAllFailFast(EventLoop& loop, std::vector<AsyncStep> steps, Done then) {
  Join(loop, std::move(steps), std::move(then), true);
}

}  // namespace libra::cluster
