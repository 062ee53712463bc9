#include "model/packing.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

namespace libra::model {
namespace {

/// PackLongestFirst one sequence at a time. While every rank so far got a sequence of positive
/// FLOPs, the next one goes to the next rank (all the others are still empty); then a tournament
/// of (load, rank), whose least is unique, takes over. The rank that receives a sequence is
/// always the last winner, so a loser tree replays just its path: one comparison per level,
/// O(log dp) per sequence.
RankShare PackEachSequence(std::span<const SequenceRun> runs, int dp) {
  const auto ranks = static_cast<size_t>(dp);
  std::vector<double> rank_flops(ranks, 0);
  std::vector<double> rank_tokens(ranks, 0);
  std::vector<int> rank_sequences(ranks, 0);
  using Entry = std::pair<double, size_t>;  // (load, rank): the least wins
  // Leaves: `width` slots (ranks beyond dp never win); loser[0] is the winner, loser[node] for
  // node in [1, width) the loser of that node's match. Built once the empty ranks are filled.
  size_t width = 1;
  while (width < ranks) width *= 2;
  std::vector<Entry> loser;
  size_t next = 0;  // ranks filled so far, while no tree is built
  auto build = [&] {
    std::vector<Entry> winner(2 * width);
    for (size_t leaf = 0; leaf < width; ++leaf) {
      winner[width + leaf] = {
          leaf < ranks ? rank_flops[leaf] : std::numeric_limits<double>::infinity(), leaf};
    }
    loser.resize(width);
    for (size_t node = width; node-- > 1;) {
      const Entry& a = winner[2 * node];
      const Entry& b = winner[2 * node + 1];
      const bool a_wins = a < b;
      winner[node] = a_wins ? a : b;
      loser[node] = a_wins ? b : a;
    }
    loser[0] = winner[1];
  };
  for (const SequenceRun& run : runs) {
    for (int64_t i = 0; i < run.count; ++i) {
      if (loser.empty() && next < ranks && run.flops > 0) {
        rank_flops[next] += run.flops;
        rank_tokens[next] += static_cast<double>(run.tokens);
        ++rank_sequences[next++];
        continue;
      }
      if (loser.empty()) build();
      const size_t rank = loser[0].second;
      rank_flops[rank] += run.flops;
      rank_tokens[rank] += static_cast<double>(run.tokens);
      ++rank_sequences[rank];
      Entry raised{rank_flops[rank], rank};
      for (size_t node = (width + rank) / 2; node > 0; node /= 2) {
        if (loser[node] < raised) std::swap(loser[node], raised);
      }
      loser[0] = raised;
    }
  }
  const size_t busiest = static_cast<size_t>(
      std::max_element(rank_flops.begin(), rank_flops.end()) - rank_flops.begin());
  return {std::accumulate(rank_flops.begin(), rank_flops.end(), 0.0), rank_flops[busiest],
          rank_tokens[busiest], rank_sequences[busiest]};
}

/// Ranks [begin, end), each holding this share.
struct RankClass {
  double flops = 0;
  double tokens = 0;
  int sequences = 0;
  size_t begin = 0;
  size_t end = 0;
};

/// A min-heap of classes by load: the root moved down to its place after its load rose.
void SiftDown(std::vector<RankClass>& heap) {
  const RankClass root = heap.front();
  size_t at = 0;
  for (size_t child = 1; child < heap.size(); child = 2 * at + 1) {
    if (child + 1 < heap.size() && heap[child + 1].flops < heap[child].flops) ++child;
    if (!(heap[child].flops < root.flops)) break;
    heap[at] = heap[child];
    at = child;
  }
  heap[at] = root;
}

/// A class added to the heap.
void Push(std::vector<RankClass>& heap, const RankClass& c) {
  heap.push_back(c);
  std::push_heap(heap.begin(), heap.end(),
                 [](const RankClass& a, const RankClass& b) { return a.flops > b.flops; });
}

/// The batch's FLOPs (summed rank by rank, as PackEachSequence sums them) and the busiest share.
RankShare ShareOfClasses(std::vector<RankClass> classes) {
  std::sort(classes.begin(), classes.end(),
            [](const RankClass& a, const RankClass& b) { return a.begin < b.begin; });
  double flops = 0;
  const RankClass* busiest = &classes.front();
  for (const RankClass& c : classes) {
    for (size_t rank = c.begin; rank < c.end; ++rank) flops += c.flops;
    if (c.flops > busiest->flops) busiest = &c;
  }
  return {flops, busiest->flops, busiest->tokens, busiest->sequences};
}

}  // namespace

std::optional<RankShare> PackByRankClasses(std::span<const SequenceRun> runs, int dp,
                                           int64_t max_visits) {
  // Ranks of one class have the same share, bit for bit. While a class is the only least-loaded
  // one, its ranks take the next sequences of a run one each, in rank order, each ending with
  // the same share again: the whole class moves, or its first ranks split off when the run ends
  // first. A class starts as a range of ranks and a split keeps ranges, so a class is one range.
  const auto ranks = static_cast<size_t>(dp);
  std::vector<RankClass> heap;
  heap.reserve(runs.size() + 1);  // a run splits at most one class: the one it ends in
  heap.push_back({0, 0, 0, 0, ranks});
  int64_t visits = 0;
  for (const SequenceRun& run : runs) {
    const auto tokens = static_cast<double>(run.tokens);
    for (auto left = static_cast<size_t>(run.count); left > 0;) {
      if (++visits > max_visits) return std::nullopt;
      RankClass& least = heap.front();
      // Two least-loaded classes would take turns rank by rank (another class of the least load
      // would be a child of the root); a sequence that adds nothing leaves its rank the least
      // loaded for the next one too.
      if ((heap.size() > 1 && heap[1].flops == least.flops) ||
          (heap.size() > 2 && heap[2].flops == least.flops)) {
        return std::nullopt;
      }
      RankClass served = least;
      served.flops += run.flops;
      if (!(served.flops > least.flops)) return std::nullopt;
      served.tokens += tokens;
      ++served.sequences;
      if (left < least.end - least.begin) {  // the rest stays the least loaded
        served.end = least.begin + left;
        least.begin = served.end;
        left = 0;
        Push(heap, served);
      } else {
        left -= least.end - least.begin;
        least = served;
        SiftDown(heap);
      }
    }
  }
  return ShareOfClasses(std::move(heap));
}

RankShare PackLongestFirst(std::span<const SequenceRun> runs, int dp) {
  int64_t sequences = 0;
  for (const SequenceRun& run : runs) sequences += run.count;
  // Classes pay where runs are long; a visit costs about what placing one sequence does.
  if (static_cast<int64_t>(runs.size()) * 8 <= sequences) {
    if (auto share = PackByRankClasses(runs, dp, 64 + sequences / 2)) return *share;
  }
  return PackEachSequence(runs, dp);
}

}  // namespace libra::model
