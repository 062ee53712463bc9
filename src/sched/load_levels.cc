#include "sched/load_levels.h"

#include <bit>

#include "common/check.h"

namespace libra::sched {

void LoadLevels::Reset(size_t n) {
  load_.assign(n, -1);
  levels_.clear();
  min_ = -1;
}

void LoadLevels::Set(size_t i, int load) {
  LIBRA_CHECK(i < load_.size() && load >= 0) << "item " << i << " load " << load;
  if (load_[i] == load) return;
  Remove(i);
  Add(i, load);
}

void LoadLevels::Remove(size_t i) {
  const int load = load_[i];
  if (load < 0) return;
  Clear(i, load);
  load_[i] = -1;
  if (load == min_ && levels_[static_cast<size_t>(load)].count == 0) {
    // The next non-empty level, if any.
    min_ = -1;
    for (size_t l = static_cast<size_t>(load) + 1; l < levels_.size(); ++l) {
      if (levels_[l].count > 0) {
        min_ = static_cast<int>(l);
        break;
      }
    }
  }
}

void LoadLevels::Add(size_t i, int load) {
  const auto l = static_cast<size_t>(load);
  if (l >= levels_.size()) levels_.resize(l + 1);
  Level& level = levels_[l];
  if (level.words.empty()) {
    level.words.assign((load_.size() + 63) / 64, 0);
    level.summary.assign((level.words.size() + 63) / 64, 0);
  }
  level.words[i / 64] |= uint64_t{1} << (i % 64);
  level.summary[i / 4096] |= uint64_t{1} << ((i / 64) % 64);
  ++level.count;
  load_[i] = load;
  if (min_ < 0 || load < min_) min_ = load;
}

void LoadLevels::Clear(size_t i, int load) {
  Level& level = levels_[static_cast<size_t>(load)];
  uint64_t& word = level.words[i / 64];
  word &= ~(uint64_t{1} << (i % 64));
  if (word == 0) level.summary[i / 4096] &= ~(uint64_t{1} << ((i / 64) % 64));
  --level.count;
}

size_t LoadLevels::NextSet(const Level& level, size_t from) const {
  const size_t n = load_.size();
  if (from >= n) return kNone;
  size_t w = from / 64;
  const uint64_t first = level.words[w] & (~uint64_t{0} << (from % 64));
  if (first != 0) return w * 64 + static_cast<size_t>(std::countr_zero(first));
  // The next non-empty word, through the summary.
  ++w;
  size_t s = w / 64;
  if (s >= level.summary.size()) return kNone;
  uint64_t bits = (w % 64 == 0) ? level.summary[s] : level.summary[s] & (~uint64_t{0} << (w % 64));
  while (bits == 0) {
    if (++s >= level.summary.size()) return kNone;
    bits = level.summary[s];
  }
  w = s * 64 + static_cast<size_t>(std::countr_zero(bits));
  return w * 64 + static_cast<size_t>(std::countr_zero(level.words[w]));
}

size_t LoadLevels::FirstWith(int load, size_t start) const {
  if (load < 0 || static_cast<size_t>(load) >= levels_.size()) return kNone;
  const Level& level = levels_[static_cast<size_t>(load)];
  if (level.count == 0) return kNone;
  start %= load_.size();
  const size_t at = NextSet(level, start);
  return at != kNone ? at : NextSet(level, 0);
}

}  // namespace libra::sched
