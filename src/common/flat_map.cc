#include "common/flat_map.h"

#include <algorithm>

#include "common/check.h"

namespace libra {

void FlatMap::Insert(uint64_t key, uint32_t value) {
  LIBRA_CHECK(value != kNone) << "FlatMap value reserved";
  if ((size_ + 1) * 4 > slots_.size() * 3) Reserve(slots_.size());  // doubles
  for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.value == kNone) {
      s = Slot{key, value};
      ++size_;
      return;
    }
    if (s.key == key) {
      s.value = value;
      return;
    }
  }
}

void FlatMap::Erase(uint64_t key) {
  size_t i = Hash(key) & mask_;
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].value == kNone) return;
    if (slots_[i].key == key) break;
  }
  // Backward-shift deletion keeps every probe sequence unbroken.
  size_t hole = i;
  for (size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
    if (slots_[j].value == kNone) break;
    const size_t home = Hash(slots_[j].key) & mask_;
    // Move j into the hole unless its home lies cyclically in (hole, j].
    const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
}

void FlatMap::Clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

void FlatMap::Reserve(size_t n) {
  size_t capacity = 16;
  while (capacity * 3 < (n + 1) * 4) capacity *= 2;
  if (capacity <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  size_ = 0;
  for (const Slot& s : old) {
    if (s.value != kNone) Insert(s.key, s.value);
  }
}

}  // namespace libra
