// FlatMap: a small open-addressing hash map from a uint64 key to a uint32 value, for the hot
// lookups of the router and the prefix tree, and for the keys a WindowIndex cannot place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace libra {

/// Linear probing, backward-shift deletion. Find never allocates; Insert allocates only when the
/// table grows. A value type: copies are independent.
class FlatMap {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  explicit FlatMap(size_t capacity = 16) { Reserve(capacity); }
  /// The value for `key`, or kNone. Inline: the tree's walks and the router's episode lookups
  /// call it several times per decision.
  uint32_t Find(uint64_t key) const {
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kNone) return kNone;
      if (s.key == key) return s.value;
    }
  }
  /// Sets `key` to `value` (replacing any value). REQUIRES: value != kNone.
  void Insert(uint64_t key, uint32_t value);
  /// Removes `key`; no-op if absent.
  void Erase(uint64_t key);
  void Clear();
  /// Room for `n` keys without growing.
  void Reserve(size_t n);
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = kNone;  // kNone = empty
  };
  static uint64_t Hash(uint64_t key) {
    // splitmix64 finaliser.
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    key ^= key >> 31;
    return key;
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace libra
