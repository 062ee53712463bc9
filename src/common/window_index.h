// WindowIndex: a uint64 -> uint32 index for keys a counter hands out (the ids of trajectories
// and prompts), found by position in a window of recent keys instead of by hashing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/flat_map.h"

namespace libra {

/// The keys present between the least and the greatest sit in a ring of values, one per key of
/// that span, at the key's position: a lookup is a bounds check and one load, and keys handed
/// out together sit together. That suits keys from a counter whose live ones stay within a
/// window (a run's trajectories in flight). A key that would stretch the span beyond
/// max(kMinSpan, kSpanPerKey x keys present) goes to a FlatMap instead, so any keys work and the
/// ring's memory stays bounded; lookups of those cost a probe as before. A value type.
class WindowIndex {
 public:
  static constexpr uint32_t kNone = FlatMap::kNone;
  /// The span the ring may always reach, and how far beyond the keys present it may stretch.
  static constexpr uint64_t kMinSpan = uint64_t{1} << 16;
  static constexpr uint64_t kSpanPerKey = 8;

  /// The value for `key`, or kNone.
  uint32_t Find(uint64_t key) const {
    if (key - base_ < end_ - base_) {  // base_ <= key < end_
      const uint32_t value = ring_[key & mask_];
      if (value != kNone || overflow_.size() == 0) return value;
    }
    return overflow_.size() == 0 ? kNone : overflow_.Find(key);
  }
  /// Sets `key` to `value`. REQUIRES: `key` is absent; value != kNone.
  void Insert(uint64_t key, uint32_t value);
  /// Removes `key`; a no-op when absent.
  void Erase(uint64_t key);
  size_t size() const { return in_ring_ + overflow_.size(); }
  /// The keys held by the FlatMap rather than the ring (for tests and benchmarks).
  size_t overflow_size() const { return overflow_.size(); }

 private:
  /// A ring of at least `span` positions, the keys of [base_, end_) moved to their new places.
  void Grow(uint64_t span);

  std::vector<uint32_t> ring_;  // a power of two long; kNone wherever no key of the span is
  uint64_t mask_ = 0;
  uint64_t base_ = 0;  // the least key in the ring (the span is empty when base_ == end_)
  uint64_t end_ = 0;   // one past the greatest key put in the ring since it was last empty
  size_t in_ring_ = 0;
  FlatMap overflow_;
};

}  // namespace libra
