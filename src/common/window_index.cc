#include "common/window_index.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "common/check.h"

namespace libra {

void WindowIndex::Insert(uint64_t key, uint32_t value) {
  LIBRA_CHECK(value != kNone) << "WindowIndex: kNone is not a value";
  if (key == std::numeric_limits<uint64_t>::max()) {  // no end_ past it
    overflow_.Insert(key, value);
    return;
  }
  const uint64_t base = in_ring_ == 0 ? key : std::min(base_, key);
  const uint64_t end = in_ring_ == 0 ? key + 1 : std::max(end_, key + 1);
  const uint64_t span = end - base;
  if (span > ring_.size()) {
    if (span > std::max(kMinSpan, kSpanPerKey * (size() + 1))) {
      overflow_.Insert(key, value);
      return;
    }
    Grow(span);
  }
  base_ = base;
  end_ = end;
  ring_[key & mask_] = value;
  ++in_ring_;
}

void WindowIndex::Erase(uint64_t key) {
  if (key - base_ < end_ - base_ && ring_[key & mask_] != kNone) {
    ring_[key & mask_] = kNone;
    if (--in_ring_ == 0) {
      base_ = end_ = 0;
    } else if (key == base_) {
      while (ring_[base_ & mask_] == kNone) ++base_;  // stops at the least key left
    }
    return;
  }
  if (overflow_.size() != 0) overflow_.Erase(key);
}

void WindowIndex::Grow(uint64_t span) {
  const size_t size =
      std::max({size_t{1024}, ring_.size() * 2, std::bit_ceil(static_cast<size_t>(span))});
  std::vector<uint32_t> ring(size, kNone);
  for (uint64_t k = base_; k != end_; ++k) ring[k & (size - 1)] = ring_[k & mask_];
  ring_.swap(ring);
  mask_ = size - 1;
}

}  // namespace libra
