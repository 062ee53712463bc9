// EventQueue: the simulator's one total order of events. Events are ordered by exactly one key,
// (time, rank, seq): earlier time first; at equal times the lower rank first (the simulator ranks
// completions before new work); then the order of insertion. So a run is bit-reproducible.
#pragma once

#include <algorithm>
#include <cstdint>
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
    heap_.push_back(Entry{at, rank, next_seq_++, std::move(payload)});
    std::push_heap(heap_.begin(), heap_.end(), Later());
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  /// Time of the earliest event. REQUIRES: !empty().
  double next_time() const { return heap_.front().at; }
  /// Time of the last popped event (0 before the first).
  double now() const { return now_; }

  /// Removes and returns the earliest event. REQUIRES: !empty().
  Entry Pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later());
    Entry e = std::move(heap_.back());  // moved out, not copied
    heap_.pop_back();
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
  std::vector<Entry> heap_;  // a binary heap under Later: the earliest entry in front
  uint64_t next_seq_ = 0;
  double now_ = 0;
};

}  // namespace libra::sim
