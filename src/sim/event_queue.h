// EventQueue: the simulator's one total order of events. Events are ordered by exactly one key,
// (time, rank, seq): earlier time first; at equal times the lower rank first (the simulator ranks
// completions before new work); then the order of insertion. So a run is bit-reproducible.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "common/check.h"

namespace libra::sim {

template <typename T>
class EventQueue {
 public:
  struct Entry {
    double at = 0;
    int rank = 0;
    uint64_t seq = 0;
    T payload;
  };

  /// Adds an event. REQUIRES: `at` is not before the last popped time.
  void Push(double at, int rank, T payload) {
    LIBRA_CHECK(at >= now_) << "event at " << at << " is before now " << now_;
    heap_.push(Entry{at, rank, next_seq_++, std::move(payload)});
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  /// Time of the earliest event. REQUIRES: !empty().
  double next_time() const { return heap_.top().at; }
  /// Time of the last popped event (0 before the first).
  double now() const { return now_; }

  /// Removes and returns the earliest event. REQUIRES: !empty().
  Entry Pop() {
    Entry e = heap_.top();
    heap_.pop();
    now_ = e.at;
    return e;
  }

 private:
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.at != b.at) return a.at > b.at;
      if (a.rank != b.rank) return a.rank > b.rank;
      return a.seq > b.seq;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_;
  uint64_t next_seq_ = 0;
  double now_ = 0;
};

}  // namespace libra::sim
