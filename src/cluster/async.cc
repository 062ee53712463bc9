#include "cluster/async.h"

#include <memory>
#include <utility>

namespace libra::cluster {

void RunAll(EventLoop& loop, std::vector<AsyncStep> steps, Done then) {
  struct Join {
    size_t left = 0;
    Status first;
    Done then;
  };
  auto join = std::make_shared<Join>();
  join->left = steps.size();
  join->then = std::move(then);
  if (steps.empty()) {
    loop.AddTimer(EventLoop::Clock::duration::zero(), [join] { join->then(Status()); });
    return;
  }
  for (AsyncStep& step : steps) {
    step([join](Status status) {
      if (!status.ok() && join->first.ok()) join->first = std::move(status);
      if (--join->left == 0) join->then(join->first);
    });
  }
}

}  // namespace libra::cluster
