// LoadLevels: items 0..n-1 (instances, by position), each absent or present with an integer load.
// It finds the least-loaded present item, ties going to the first at or after a start position
// in cyclic order, without looking at every item: one bitset per load value, with a summary bit
// per 64-bit word. Routers use it so that a routing decision does not grow with the cluster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace libra::sched {

class LoadLevels {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  explicit LoadLevels(size_t n = 0) { Reset(n); }

  /// n items, all absent.
  void Reset(size_t n);
  size_t size() const { return load_.size(); }
  /// Makes item `i` present with `load` (moving it when present). REQUIRES: i < size(), load >= 0.
  void Set(size_t i, int load);
  /// Makes item `i` absent; no-op when absent.
  void Remove(size_t i);
  bool present(size_t i) const { return load_[i] >= 0; }
  /// The least load among present items; -1 when none is present.
  int MinLoad() const { return min_; }
  /// The first present item with exactly `load`, at or after `start` in cyclic order (start is
  /// taken modulo size()); kNone when there is none.
  size_t FirstWith(int load, size_t start) const;

 private:
  /// The items with one load value: a bitset over item positions, and a summary bit per word.
  struct Level {
    std::vector<uint64_t> words;
    std::vector<uint64_t> summary;
    size_t count = 0;
  };
  void Add(size_t i, int load);
  void Clear(size_t i, int load);
  /// The first set bit of `level` at or after `from` (not wrapping); kNone when none.
  size_t NextSet(const Level& level, size_t from) const;

  std::vector<int> load_;  // -1: absent
  std::vector<Level> levels_;
  int min_ = -1;
};

}  // namespace libra::sched
