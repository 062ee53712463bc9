#include "planner/stream_model.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "common/check.h"

namespace libra::planner {
namespace {

/// A launched group: when it completes, the launch number (ties complete in launch order), which
/// group it is, and the version it was launched with.
struct Launched {
  double done_at = 0;
  int64_t order = 0;
  size_t group = 0;
  int version = 0;
  bool operator>(const Launched& other) const {
    return done_at != other.done_at ? done_at > other.done_at : order > other.order;
  }
};

/// A group that completed, waiting for a batch: which group it is and its launch version.
struct Complete {
  size_t group;
  int version;
};

}  // namespace

StreamReplay ReplayStream(std::span<const StreamGroup> groups, const StreamPipeline& pipeline) {
  const int per_step = pipeline.groups_per_step;
  const int staleness = pipeline.staleness;
  LIBRA_CHECK(!groups.empty() && per_step >= 1 && staleness >= 1 && pipeline.steps > staleness + 1)
      << "stream replay of " << groups.size() << " groups, " << per_step << " a step, staleness "
      << staleness << ", " << pipeline.steps << " steps";
  std::priority_queue<Launched, std::vector<Launched>, std::greater<>> running;
  std::vector<Complete> complete;  // in completion order
  int64_t launched = 0;
  int64_t rejected = 0;  // all, for the launch allowance
  int version = 0;
  auto launch = [&](double now) {
    const int64_t allowed =
        static_cast<int64_t>(std::min(pipeline.steps, version + staleness + 1)) * per_step +
        rejected;
    for (; launched < allowed; ++launched) {
      const size_t g = static_cast<size_t>(launched) % groups.size();
      running.push({now + groups[g].latency_s, launched, g, version});
    }
  };
  int64_t counted_rejected = 0;
  int64_t counted_trained = 0;
  double counted_tokens = 0;
  double counted_decoded = 0;  // by trained and rejected groups
  double step_end = 0;
  double counted_from = 0;  // the end of the last step not counted
  int counted_steps = 0;
  launch(0);
  for (int k = 0; k < pipeline.steps; ++k) {
    // Step k forms once step k - 1 has synced and per_step fresh groups are complete.
    const bool counted = k > staleness;
    if (k == staleness + 1) counted_from = step_end;
    double now = step_end;
    while (true) {
      while (!running.empty() && running.top().done_at <= now) {
        complete.push_back({running.top().group, running.top().version});
        running.pop();
      }
      // Stale groups are rejected (their decoding spent) and replaced; the rest keep their order.
      const auto stale = std::stable_partition(complete.begin(), complete.end(),
                                               [&](auto& c) { return k - c.version <= staleness; });
      rejected += complete.end() - stale;
      for (auto it = stale; counted && it != complete.end(); ++it) {
        ++counted_rejected;
        counted_decoded += groups[it->group].decoded;
      }
      complete.erase(stale, complete.end());
      launch(now);
      if (complete.size() >= static_cast<size_t>(per_step) || running.empty()) break;
      now = running.top().done_at;
    }
    if (complete.size() < static_cast<size_t>(per_step)) break;  // nothing left to launch
    StreamGroup batch;  // the step's: its tokens and decoded tokens
    for (auto it = complete.begin(); it != complete.begin() + per_step; ++it) {
      batch.tokens += groups[it->group].tokens;
      batch.decoded += groups[it->group].decoded;
    }
    complete.erase(complete.begin(), complete.begin() + per_step);
    step_end = now + batch.tokens * pipeline.train_s_per_token + pipeline.sync_s;
    if (counted) {
      counted_trained += per_step;
      counted_tokens += batch.tokens;
      counted_decoded += batch.decoded;
      ++counted_steps;
    }
    version = k + 1;
    launch(step_end);
  }
  StreamReplay out;
  if (counted_trained == 0) return out;
  double mean = 0;
  for (const StreamGroup& g : groups) mean += g.tokens / static_cast<double>(groups.size());
  out.rejected = static_cast<double>(counted_rejected) /
                 static_cast<double>(counted_rejected + counted_trained);
  out.period_s = (step_end - counted_from) / counted_steps;
  out.decoded_per_step = counted_decoded / counted_steps;
  if (mean > 0) out.trained_tokens = counted_tokens / static_cast<double>(counted_trained) / mean;
  return out;
}

}  // namespace libra::planner
