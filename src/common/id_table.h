// IdTable: the live entries of a run keyed by a strong id (the trajectories in flight, the groups
// of prompts), stored in a pool that reuses freed slots, found through a WindowIndex.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/check.h"
#include "common/ids.h"
#include "common/window_index.h"

namespace libra {

/// A map from StrongId<Tag> to T for entries that come and go by the hundred thousand: no
/// allocation per entry (the pool grows by chunks and reuses the slot freed last), and a lookup of
/// an id from a counter is one load at its position in the window of live ids (a node-based map
/// costs a bucket and a node, a hash table a probe, all cold in a large run). An entry's address is
/// stable from Insert to Erase. Not iterable: the order would be the pool's, not the ids'.
template <typename Tag, typename T>
class IdTable {
 public:
  using Id = StrongId<Tag>;

  /// The entry for `id`, or null.
  T* Find(Id id) {
    const uint32_t slot = index_.Find(Key(id));
    return slot == WindowIndex::kNone ? nullptr : &At(slot);
  }
  const T* Find(Id id) const {
    const uint32_t slot = index_.Find(Key(id));
    return slot == WindowIndex::kNone ? nullptr : &At(slot);
  }
  /// Stores `value` for `id` and returns it. REQUIRES: `id` is absent.
  T& Insert(Id id, T value) {
    LIBRA_CHECK(index_.Find(Key(id)) == WindowIndex::kNone)
        << "IdTable: id " << id.value << " already present";
    if (free_.empty()) {
      // A new chunk of slots, handed out lowest first.
      const auto first = static_cast<uint32_t>(chunks_.size() * kChunk);
      chunks_.push_back(std::make_unique<T[]>(kChunk));
      for (uint32_t i = kChunk; i > 0; --i) free_.push_back(first + i - 1);
    }
    const uint32_t slot = free_.back();
    free_.pop_back();
    T& entry = At(slot);
    entry = std::move(value);
    index_.Insert(Key(id), slot);
    return entry;
  }
  /// Removes `id`'s entry, releasing what it holds; a no-op when absent.
  void Erase(Id id) {
    const uint32_t slot = index_.Find(Key(id));
    if (slot == WindowIndex::kNone) return;
    index_.Erase(Key(id));
    At(slot) = T();
    free_.push_back(slot);
  }
  size_t size() const { return index_.size(); }
  bool empty() const { return index_.size() == 0; }

 private:
  // Chunks of entries that never move: a chunk's address table stays small enough to be cached.
  static constexpr uint32_t kChunk = 256;

  static uint64_t Key(Id id) { return static_cast<uint64_t>(id.value); }
  T& At(uint32_t slot) { return chunks_[slot / kChunk][slot % kChunk]; }
  const T& At(uint32_t slot) const { return chunks_[slot / kChunk][slot % kChunk]; }

  WindowIndex index_;
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::vector<uint32_t> free_;  // the slots not in use; the most recently freed last
};

}  // namespace libra
