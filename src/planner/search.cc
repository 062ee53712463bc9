#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>
#include <utility>

#include "common/check.h"
#include "common/strings.h"

namespace libra::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Largest count-DP table (states x requests) MultisetMakespan solves exactly.
constexpr int64_t kMaxMultisetStates = int64_t{1} << 20;

// ---- Inputs ------------------------------------------------------------------------------------

/// The history sorted by total length (then prompt, generated, tool), thinned to at most
/// `max_requests` evenly spaced ranks, the shortest and the longest included.
std::vector<RequestSample> SampleHistory(std::span<const RequestSample> history, int max_requests) {
  std::vector<RequestSample> sorted(history.begin(), history.end());
  std::stable_sort(
      sorted.begin(), sorted.end(), [](const RequestSample& a, const RequestSample& b) {
        return std::make_tuple(a.total(), a.prompt_tokens, a.generated_tokens, a.tool_tokens) <
               std::make_tuple(b.total(), b.prompt_tokens, b.generated_tokens, b.tool_tokens);
      });
  const int64_t n = static_cast<int64_t>(sorted.size());
  const int64_t m = std::min<int64_t>(n, std::max(1, max_requests));
  if (m == n) return sorted;
  std::vector<RequestSample> sample;
  sample.reserve(static_cast<size_t>(m));
  for (int64_t k = 0; k < m; ++k) {
    const int64_t index = m == 1 ? (n - 1) / 2 : (k * (n - 1) * 2 + (m - 1)) / (2 * (m - 1));
    sample.push_back(sorted[static_cast<size_t>(index)]);
  }
  return sample;
}

/// The training batch: `batch` sequences whose lengths cycle through the sample's totals.
std::vector<int64_t> TrainBatch(const std::vector<RequestSample>& sample, int batch) {
  std::vector<int64_t> tokens(static_cast<size_t>(batch));
  for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = sample[k % sample.size()].total();
  return tokens;
}

std::vector<int> SortedUnique(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

/// The rollout TP sizes of free layouts: those of rollout_tps dividing a node, ascending.
std::vector<int> AllowedRolloutTps(const SearchSpace& space) {
  std::vector<int> tps;
  for (int tp : SortedUnique(space.rollout_tps)) {
    if (tp >= 1 && tp <= space.gpus_per_node && space.gpus_per_node % tp == 0) tps.push_back(tp);
  }
  return tps;
}

std::string IntList(const std::vector<int>& values) {
  std::vector<std::string> items;
  for (int v : values) items.push_back(std::to_string(v));
  return StrJoin(items, ",");
}

/// "4x5 2x5 1x10" for TP sizes sorted descending.
std::string TpsString(const std::vector<int>& tps) {
  std::vector<std::string> items;
  for (size_t i = 0; i < tps.size();) {
    size_t j = i;
    while (j < tps.size() && tps[j] == tps[i]) ++j;
    items.push_back(StrFormat("%dx%zu", tps[i], j - i));
    i = j;
  }
  return items.empty() ? "none" : StrJoin(items, " ");
}

/// Whether items of these sizes fit bins of these capacities, first-fit decreasing (bins in
/// order). With sizes summing to the capacities, that is "fill them exactly".
bool FirstFitDecreasing(std::vector<int> items, std::vector<int> bins) {
  std::sort(items.begin(), items.end(), std::greater<>());
  for (int item : items) {
    auto bin = std::find_if(bins.begin(), bins.end(), [item](int room) { return room >= item; });
    if (bin == bins.end()) return false;
    *bin -= item;
  }
  return true;
}

/// The rollout GPUs [first, total) as bins: the partial first node, then whole nodes.
std::vector<int> RolloutBins(int total, int gpus_per_node, int first) {
  std::vector<int> bins;
  int gpu = first;
  while (gpu < total) {
    const int node_end = (gpu / gpus_per_node + 1) * gpus_per_node;
    bins.push_back(std::min(node_end, total) - gpu);
    gpu = std::min(node_end, total);
  }
  return bins;
}

// ---- Rollout segments --------------------------------------------------------------------------

/// InstanceMakespan of every contiguous run [j, i) of the sorted sample on every TP size of
/// `tps` (ascending, distinct), computed once.
class SegmentTable {
 public:
  SegmentTable(const model::CostModel& cost, std::vector<int> tps,
               const std::vector<RequestSample>& sample, double weight, int max_num_seqs,
               int staleness, int64_t* evaluations)
      : tps_(std::move(tps)), n_(static_cast<int>(sample.size())) {
    const size_t side = static_cast<size_t>(n_ + 1);
    values_.assign(tps_.size() * side * side, 0.0);
    for (size_t k = 0; k < tps_.size(); ++k) {
      for (int j = 0; j < n_; ++j) {
        for (int i = j + 1; i <= n_; ++i) {
          const auto run = std::span<const RequestSample>(sample).subspan(
              static_cast<size_t>(j), static_cast<size_t>(i - j));
          values_[Index(static_cast<int>(k), j, i)] =
              staleness > 0
                  ? InstanceSteadyTime(cost, tps_[k], run, weight, max_num_seqs, staleness)
                  : InstanceMakespan(cost, tps_[k], run, weight, max_num_seqs);
          ++*evaluations;
        }
      }
    }
  }

  /// Makespan of requests [j, i) on an instance of TP tps()[k]; 0 when j == i.
  double operator()(int k, int j, int i) const { return values_[Index(k, j, i)]; }
  const std::vector<int>& tps() const { return tps_; }
  int KOf(int tp) const {
    const auto it = std::lower_bound(tps_.begin(), tps_.end(), tp);
    LIBRA_CHECK(it != tps_.end() && *it == tp) << "no segments for TP " << tp;
    return static_cast<int>(it - tps_.begin());
  }
  int n() const { return n_; }

 private:
  size_t Index(int k, int j, int i) const {
    const size_t side = static_cast<size_t>(n_ + 1);
    return (static_cast<size_t>(k) * side + static_cast<size_t>(j)) * side + static_cast<size_t>(i);
  }

  std::vector<int> tps_;
  int n_;
  std::vector<double> values_;
};

/// The fastest assignment of the sorted sample to the instances `tps` (a multiset), each taking
/// a contiguous, possibly empty run, in the best order of the instances. A DP over (instances
/// used of each size, requests covered); at most n instances of a size can be busy, so counts
/// are capped at n. Beyond kMaxMultisetStates the instances are taken in ascending TP order.
double MultisetMakespan(const SegmentTable& seg, const std::vector<int>& tps, int64_t* cells) {
  const int n = seg.n();
  std::map<int, int> counts;
  for (int tp : tps) ++counts[tp];
  std::vector<int> kinds;
  std::vector<int> caps;
  for (const auto& [tp, count] : counts) {
    kinds.push_back(seg.KOf(tp));
    caps.push_back(std::min(count, n));
  }
  const size_t side = static_cast<size_t>(n + 1);
  int64_t states = 1;
  for (int cap : caps) states *= cap + 1;
  if (states * (n + 1) > kMaxMultisetStates) {
    *cells += std::accumulate(caps.begin(), caps.end(), int64_t{0}) * (n + 1);
    // Instances in ascending TP order: f[i] = best for the first i requests.
    std::vector<double> f(side, kInf);
    f[0] = 0;
    for (size_t t = 0; t < kinds.size(); ++t) {
      for (int copy = 0; copy < caps[t]; ++copy) {
        std::vector<double> next = f;  // the instance idle
        for (int i = 1; i <= n; ++i) {
          for (int j = 0; j < i; ++j) {
            if (f[static_cast<size_t>(j)] >= next[static_cast<size_t>(i)]) continue;
            next[static_cast<size_t>(i)] =
                std::min(next[static_cast<size_t>(i)],
                         std::max(f[static_cast<size_t>(j)], seg(kinds[t], j, i)));
          }
        }
        f = std::move(next);
      }
    }
    return f[static_cast<size_t>(n)];
  }
  *cells += states * (n + 1);
  std::vector<int64_t> stride(kinds.size(), 1);
  for (size_t t = 1; t < kinds.size(); ++t) stride[t] = stride[t - 1] * (caps[t - 1] + 1);
  std::vector<double> value(static_cast<size_t>(states) * side, kInf);
  value[0] = 0;
  double best = kInf;
  std::vector<int> x(kinds.size(), 0);
  for (int64_t s = 0; s < states; ++s) {
    if (s > 0) {  // the next count vector in mixed radix
      for (size_t t = 0; t < x.size(); ++t) {
        if (++x[t] <= caps[t]) break;
        x[t] = 0;
      }
    }
    const int used = std::accumulate(x.begin(), x.end(), 0);
    for (int i = used; i <= n; ++i) {  // every busy instance has a request
      const double v = value[static_cast<size_t>(s) * side + static_cast<size_t>(i)];
      if (v == kInf) continue;
      if (i == n) best = std::min(best, v);
      for (size_t t = 0; t < kinds.size(); ++t) {
        if (x[t] == caps[t]) continue;
        double* row = &value[static_cast<size_t>(s + stride[t]) * side];
        for (int c = i + 1; c <= n; ++c) {
          const double nv = std::max(v, seg(kinds[t], i, c));
          if (nv < row[c]) row[c] = nv;
        }
      }
    }
  }
  return best;
}

// ---- The rollout DP (Algorithm 1), indexed by the largest TP ------------------------------------

/// E[m][g][i]: the fastest layout of g GPUs for the first i sorted requests whose largest
/// instance is exactly tps[m]; L[m][g][i] the same with the largest at most tps[m]. The last
/// instance of a sequence either is a tps[m] (its prefix then any layout with sizes <= tps[m],
/// possibly none) or a smaller one (its prefix then still holds a tps[m]). Computed once up to
/// the largest rollout budget; every budget reads its row.
class RolloutDp {
 public:
  RolloutDp(const SegmentTable& seg, int max_gpus, int64_t* cells)
      : seg_(seg), kinds_(static_cast<int>(seg.tps().size())), gpus_(max_gpus), n_(seg.n()) {
    const size_t size =
        static_cast<size_t>(kinds_) * static_cast<size_t>(gpus_ + 1) * static_cast<size_t>(n_ + 1);
    e_.assign(size, kInf);
    l_.assign(size, kInf);
    e_kind_.assign(size, -1);
    e_segment_.assign(size, -1);
    l_kind_.assign(size, -1);
    const std::vector<int>& tps = seg.tps();
    for (int g = 1; g <= gpus_; ++g) {
      for (int m = 0; m < kinds_; ++m) {
        for (int i = 0; i <= n_; ++i) {
          double best = kInf;
          int best_kind = -1;
          int best_segment = -1;
          // Larger last instance first, then its shorter segment; the first of equals stays.
          for (int k = m; k >= 0; --k) {
            const int tp = tps[static_cast<size_t>(k)];
            if (tp > g) continue;
            for (int c = 0; c <= i; ++c) {
              const double prev = k == m ? Lz(m, g - tp, i - c) : e_[At(m, g - tp, i - c)];
              if (prev >= best) continue;
              const double v = std::max(prev, seg_(k, i - c, i));
              if (v < best) {
                best = v;
                best_kind = k;
                best_segment = c;
              }
            }
          }
          const size_t at = At(m, g, i);
          e_[at] = best;
          e_kind_[at] = static_cast<int8_t>(best_kind);
          e_segment_[at] = static_cast<int16_t>(best_segment);
          // Ties keep the smaller largest TP.
          if (m == 0 || best < l_[At(m - 1, g, i)]) {
            l_[at] = best;
            l_kind_[at] = static_cast<int8_t>(m);
          } else {
            l_[at] = l_[At(m - 1, g, i)];
            l_kind_[at] = l_kind_[At(m - 1, g, i)];
          }
          ++*cells;
        }
      }
    }
  }

  /// The fastest makespan with `gpus` GPUs and largest TP exactly tps[m] for all requests.
  double Value(int m, int gpus) const { return e_[At(m, gpus, n_)]; }

  /// That layout's TP sizes, sorted descending. REQUIRES: Value(m, gpus) is finite.
  std::vector<int> Layout(int m, int gpus) const {
    std::vector<int> tps;
    int g = gpus;
    int i = n_;
    bool exact = true;  // in E[m] (else in L[m], possibly the empty layout)
    while (true) {
      if (!exact) {
        if (g == 0) break;
        m = l_kind_[At(m, g, i)];
        exact = true;
      }
      const size_t at = At(m, g, i);
      const int k = e_kind_[at];
      LIBRA_CHECK(k >= 0) << "no layout for " << g << " GPUs";
      const int tp = seg_.tps()[static_cast<size_t>(k)];
      tps.push_back(tp);
      g -= tp;
      i -= e_segment_[at];
      if (k == m) exact = false;
    }
    LIBRA_CHECK(i == 0) << "layout leaves requests unassigned";
    std::sort(tps.begin(), tps.end(), std::greater<>());
    return tps;
  }

 private:
  size_t At(int m, int g, int i) const {
    return (static_cast<size_t>(m) * static_cast<size_t>(gpus_ + 1) + static_cast<size_t>(g)) *
               static_cast<size_t>(n_ + 1) +
           static_cast<size_t>(i);
  }
  double Lz(int m, int g, int i) const {
    if (g == 0) return i == 0 ? 0.0 : kInf;
    return l_[At(m, g, i)];
  }

  const SegmentTable& seg_;
  int kinds_;
  int gpus_;
  int n_;
  std::vector<double> e_;
  std::vector<double> l_;
  std::vector<int8_t> e_kind_;
  std::vector<int16_t> e_segment_;
  std::vector<int8_t> l_kind_;
};

// ---- The exhaustive rollout enumeration --------------------------------------------------------

/// Every sequence of instances of the table's sizes summing to the GPUs, every split of the
/// requests into contiguous (possibly empty) runs; the fastest per largest TP (first found wins
/// ties).
class RolloutEnumeration {
 public:
  explicit RolloutEnumeration(const SegmentTable& seg)
      : seg_(seg), best_(seg.tps().size(), kInf), best_layout_(seg.tps().size()) {}

  void Free(int gpus) { Sequences(gpus, 0, 0.0); }

  /// Every distinct order of the multiset `tps`.
  void Orders(std::vector<int> tps) {
    std::sort(tps.begin(), tps.end());
    do {
      sequence_ = tps;
      Splits(0, 0, 0.0);
    } while (std::next_permutation(tps.begin(), tps.end()));
  }

  double best(int m) const { return best_[static_cast<size_t>(m)]; }
  /// The fastest layout with largest TP tps()[m], sorted descending.
  std::vector<int> layout(int m) const {
    std::vector<int> tps = best_layout_[static_cast<size_t>(m)];
    std::sort(tps.begin(), tps.end(), std::greater<>());
    return tps;
  }

 private:
  void Record(double makespan) {
    int m = 0;
    for (int tp : sequence_) m = std::max(m, seg_.KOf(tp));
    if (makespan < best_[static_cast<size_t>(m)]) {
      best_[static_cast<size_t>(m)] = makespan;
      best_layout_[static_cast<size_t>(m)] = sequence_;
    }
  }

  void Sequences(int gpus_left, int done, double slowest) {
    const int n = seg_.n();
    for (int k = static_cast<int>(seg_.tps().size()) - 1; k >= 0; --k) {
      const int tp = seg_.tps()[static_cast<size_t>(k)];
      if (tp > gpus_left) continue;
      sequence_.push_back(tp);
      if (tp == gpus_left) {
        Record(std::max(slowest, seg_(k, done, n)));  // the last instance takes the rest
      } else {
        for (int c = 0; c <= n - done; ++c) {
          Sequences(gpus_left - tp, done + c, std::max(slowest, seg_(k, done, done + c)));
        }
      }
      sequence_.pop_back();
    }
  }

  void Splits(size_t instance, int done, double slowest) {
    const int n = seg_.n();
    const int k = seg_.KOf(sequence_[instance]);
    if (instance + 1 == sequence_.size()) {
      Record(std::max(slowest, seg_(k, done, n)));
      return;
    }
    for (int c = 0; c <= n - done; ++c) {
      Splits(instance + 1, done + c, std::max(slowest, seg_(k, done, done + c)));
    }
  }

  const SegmentTable& seg_;
  std::vector<double> best_;
  std::vector<std::vector<int>> best_layout_;
  std::vector<int> sequence_;
};

double Binomial(int64_t n, int64_t k) {
  if (k < 0 || k > n) return 0;
  double r = 1;
  for (int64_t j = 1; j <= k; ++j) r = r * static_cast<double>(n - k + j) / static_cast<double>(j);
  return r;
}

/// Sequences x splits RolloutEnumeration::Free(gpus) visits, for n requests.
double FreeEnumerations(const std::vector<int>& tps, int gpus, int n) {
  // ways[g][k]: sequences of k instances summing to g.
  std::vector<std::vector<double>> ways(static_cast<size_t>(gpus + 1),
                                        std::vector<double>(static_cast<size_t>(gpus + 1), 0));
  ways[0][0] = 1;
  for (int g = 1; g <= gpus; ++g) {
    for (int k = 1; k <= g; ++k) {
      for (int tp : tps) {
        if (tp <= g)
          ways[static_cast<size_t>(g)][static_cast<size_t>(k)] +=
              ways[static_cast<size_t>(g - tp)][static_cast<size_t>(k - 1)];
      }
    }
  }
  double total = 0;
  for (int k = 1; k <= gpus; ++k) {
    total += ways[static_cast<size_t>(gpus)][static_cast<size_t>(k)] * Binomial(n + k - 1, k - 1);
  }
  return total;
}

/// Orders x splits RolloutEnumeration::Orders(tps) visits, for n requests.
double OrderEnumerations(const std::vector<int>& tps, int n) {
  std::map<int, int> counts;
  for (int tp : tps) ++counts[tp];
  double orders = 1;
  int placed = 0;
  for (const auto& [tp, count] : counts) {
    orders *= Binomial(placed + count, count);
    placed += count;
  }
  const int k = static_cast<int>(tps.size());
  return orders * Binomial(n + k - 1, k - 1);
}

// ---- Training ----------------------------------------------------------------------------------

/// The search's inputs, derived once.
struct Problem {
  const model::CostModel* cost = nullptr;
  const SearchSpace* space = nullptr;
  const PipelineShape* shape = nullptr;
  std::vector<RequestSample> sample;
  double weight = 1;
  std::vector<int64_t> batch;
  std::vector<int> train_tps;
  std::vector<int> train_pps;
  std::vector<int> micro_batches;
  std::map<int, double> tp_comm_ratio;  // memo

  /// tp_comm_s / compute_s of one replica {tp, pp 1, dp 1} at the smallest micro-batch.
  double TpCommRatio(int tp) {
    auto it = tp_comm_ratio.find(tp);
    if (it != tp_comm_ratio.end()) return it->second;
    const model::TrainEstimate e =
        cost->TrainStep({tp, 1, 1, micro_batches.front()}, shape->passes, batch);
    double ratio = 0;
    if (e.tp_comm_s > 0) ratio = e.compute_s > 0 ? e.tp_comm_s / e.compute_s : kInf;
    tp_comm_ratio.emplace(tp, ratio);
    return ratio;
  }
};

/// Why a training layout is out of the space, or "" when it is in, given the filters of
/// Algorithm 1 in its order (the exhaustive mode applies them leaf by leaf).
std::string LeafFilter(Problem& p, int budget, int tp, int pp, int micro) {
  const SearchSpace& s = *p.space;
  if (budget % tp != 0 || tp > s.gpus_per_node || s.gpus_per_node % tp != 0) return "tp_divides";
  if (p.TpCommRatio(tp) > s.max_tp_comm_ratio) return "tp_comm_ratio";
  if (budget % (tp * pp) != 0 || p.cost->arch().layers % pp != 0) return "pp_divides";
  const int dp = budget / (tp * pp);
  const int batch = p.shape->batch_trajectories;
  if (batch % (dp * micro) != 0) return "batch_divides";
  const int n_micro = batch / (dp * micro);
  if (static_cast<double>(pp - 1) / (pp + n_micro - 1) > s.max_bubble) return "bubble";
  return "";
}

/// A rollout layout of one budget: the fastest with a given largest TP.
struct RolloutOption {
  int max_tp = 0;
  double makespan = 0;  // unscaled
  std::vector<int> tps;
};

/// The rollout side of one budget, and why it has no option when it has none.
struct RolloutSide {
  std::vector<RolloutOption> options;
  std::map<std::string, int> pruned;
};

void Count(std::map<std::string, int>& local, const std::string& reason, int times = 1) {
  local[reason] += times;
}

/// Keeps the options that pack; counts the others.
void AddPackable(RolloutSide& side, RolloutOption option, const std::vector<int>& bins) {
  if (FirstFitDecreasing(option.tps, bins)) {
    side.options.push_back(std::move(option));
  } else {
    Count(side.pruned, "rollout_unpackable");
  }
}

/// Offers `option` against the budget's best so far (first of equals stays).
void Offer(const Problem& p, const model::TrainLayout& layout, double train_s,
           const RolloutOption& option, std::optional<CandidatePlan>& best) {
  const PipelineShape& shape = *p.shape;
  CandidatePlan plan;
  plan.train = layout;
  plan.rollout_tps = option.tps;
  plan.rollout_s = option.makespan * shape.rollout_scale;
  plan.train_s = train_s;
  plan.sync_s = p.cost->WeightSyncTime({shape.sync_path, layout, option.max_tp, true});
  plan.step_s = StepTime(shape, plan.rollout_s, plan.train_s, plan.sync_s);
  if (!best || plan.step_s < best->step_s) best = std::move(plan);
}

std::string PrunedString(const std::map<std::string, int>& pruned) {
  std::vector<std::string> items;
  for (const auto& [reason, count] : pruned)
    items.push_back(StrFormat("%s %d", reason.c_str(), count));
  return items.empty() ? "nothing feasible" : StrJoin(items, ", ");
}

Status CheckPositive(const std::vector<int>& values, const char* name) {
  if (values.empty()) return Status::InvalidArgument(StrFormat("%s is empty", name));
  for (int v : values) {
    if (v < 1) return Status::InvalidArgument(StrFormat("%s has %d; sizes are >= 1", name, v));
  }
  return Status();
}

/// Sizes and bounds that make no space at all.
Status ValidateSpace(const SearchSpace& space, const PipelineShape& shape) {
  if (space.nodes < 1 || space.gpus_per_node < 1) {
    return Status::InvalidArgument(
        StrFormat("a cluster of %d nodes x %d GPUs", space.nodes, space.gpus_per_node));
  }
  LIBRA_RETURN_IF_ERROR(CheckPositive(space.train_tps, "train_tps"));
  LIBRA_RETURN_IF_ERROR(CheckPositive(space.train_pps, "train_pps"));
  LIBRA_RETURN_IF_ERROR(CheckPositive(space.micro_batches, "micro_batches"));
  if (space.granularity < 1 || space.max_requests < 1 || space.max_requests > kMaxSampleRequests ||
      space.max_num_seqs < 1 || shape.batch_trajectories < 1) {
    return Status::InvalidArgument(
        StrFormat("granularity (%d), max_num_seqs (%d) and batch_trajectories (%d) must be >= 1, "
                  "max_requests (%d) in [1, %d]",
                  space.granularity, space.max_num_seqs, shape.batch_trajectories,
                  space.max_requests, kMaxSampleRequests));
  }
  const int gpn = space.gpus_per_node;
  if (space.node_pattern.empty()) {
    if (AllowedRolloutTps(space).empty()) {
      return Status::InvalidArgument(StrFormat("no rollout TP of {%s} divides %d GPUs per node",
                                               IntList(space.rollout_tps).c_str(), gpn));
    }
  } else {
    for (int tp : space.node_pattern) {
      if (tp < 1 || tp > gpn) {
        return Status::InvalidArgument(
            StrFormat("node_pattern {%s}: TP %d does not fit a node of %d GPUs",
                      IntList(space.node_pattern).c_str(), tp, gpn));
      }
    }
  }
  return Status();
}

/// The training budgets, ascending.
Result<std::vector<int>> TrainingBudgets(const SearchSpace& space) {
  const int total = space.nodes * space.gpus_per_node;
  const int min_rollout = std::max(1, space.min_rollout_gpus);
  if (space.fixed_train_gpus) {
    const int fixed = *space.fixed_train_gpus;
    if (fixed < 1 || fixed > total - min_rollout) {
      return Status::InvalidArgument(
          StrFormat("fixed_train_gpus = %d does not leave %d of the %d GPUs to rollout", fixed,
                    min_rollout, total));
    }
    return std::vector<int>{fixed};
  }
  int max_train = total - min_rollout;
  if (space.max_train_gpus > 0) max_train = std::min(max_train, space.max_train_gpus);
  std::vector<int> budgets;
  for (int n = std::max(1, space.min_train_gpus); n <= max_train; ++n) {
    if (n % space.granularity == 0) budgets.push_back(n);
  }
  if (budgets.empty()) {
    return Status::InvalidArgument(StrFormat(
        "no training budget: multiples of %d in [%d, %d] of %d GPUs leaving %d to rollout",
        space.granularity, space.min_train_gpus, max_train, total, min_rollout));
  }
  return budgets;
}

/// A feasible training leaf against every rollout option of its budget (the budget's best so far
/// in `best`). The tree mode first cuts leaves whose training alone cannot beat `best` ("bound").
void Leaf(Problem& p, int budget, int tp, int pp, int micro, const RolloutSide& side, bool bound,
          std::map<std::string, int>& pruned, std::optional<CandidatePlan>& best) {
  const PipelineShape& shape = *p.shape;
  const model::TrainLayout layout{tp, pp, budget / (tp * pp), micro};
  const model::TrainEstimate e = p.cost->TrainStep(layout, shape.passes, p.batch);
  if (e.oom()) {
    Count(pruned, "oom");
    return;
  }
  const double train_s = e.step_s * shape.train_scale;
  if (bound && best) {
    double fastest_rollout = kInf;
    for (const RolloutOption& o : side.options) {
      fastest_rollout = std::min(fastest_rollout, o.makespan * shape.rollout_scale);
    }
    // Exact: the step is at least this with any rollout option and any sync (>= 0).
    if (StepTime(shape, fastest_rollout, train_s, 0) >= best->step_s) {
      Count(pruned, "bound");
      return;
    }
  }
  for (const RolloutOption& o : side.options) Offer(p, layout, train_s, o, best);
}

/// Algorithm 1's training tree of one budget: TP nodes, PP nodes, micro-batch leaves, each
/// pruned as soon as a filter fails.
std::optional<CandidatePlan> TrainingTree(Problem& p, int budget, const RolloutSide& side,
                                          std::map<std::string, int>& pruned, int& nodes) {
  const SearchSpace& space = *p.space;
  const int batch = p.shape->batch_trajectories;
  std::optional<CandidatePlan> best;
  for (int tp : p.train_tps) {
    ++nodes;
    if (budget % tp != 0 || tp > space.gpus_per_node || space.gpus_per_node % tp != 0) {
      Count(pruned, "tp_divides");
      continue;
    }
    if (p.TpCommRatio(tp) > space.max_tp_comm_ratio) {
      Count(pruned, "tp_comm_ratio");
      continue;
    }
    for (int pp : p.train_pps) {
      ++nodes;
      if (budget % (tp * pp) != 0 || p.cost->arch().layers % pp != 0) {
        Count(pruned, "pp_divides");
        continue;
      }
      const int dp = budget / (tp * pp);
      for (int micro : p.micro_batches) {
        ++nodes;
        if (batch % (dp * micro) != 0) {
          Count(pruned, "batch_divides");
          continue;
        }
        const int n_micro = batch / (dp * micro);
        if (static_cast<double>(pp - 1) / (pp + n_micro - 1) > space.max_bubble) {
          Count(pruned, "bubble");
          continue;
        }
        Leaf(p, budget, tp, pp, micro, side, /*bound=*/true, pruned, best);
      }
    }
  }
  return best;
}

/// The exhaustive mode's training side: every (TP, PP, micro-batch) leaf, filtered one by one.
std::optional<CandidatePlan> EveryLeaf(Problem& p, int budget, const RolloutSide& side,
                                       std::map<std::string, int>& pruned, int& nodes) {
  std::optional<CandidatePlan> best;
  for (int tp : p.train_tps) {
    for (int pp : p.train_pps) {
      for (int micro : p.micro_batches) {
        ++nodes;
        const std::string reason = LeafFilter(p, budget, tp, pp, micro);
        if (!reason.empty()) {
          Count(pruned, reason);
          continue;
        }
        Leaf(p, budget, tp, pp, micro, side, /*bound=*/false, pruned, best);
      }
    }
  }
  return best;
}

}  // namespace

int CandidatePlan::rollout_gpus() const {
  return std::accumulate(rollout_tps.begin(), rollout_tps.end(), 0);
}

std::string CandidatePlan::ToString() const {
  return StrFormat(
      "train %s (%d GPUs) | rollout %s (%d GPUs) | rollout %.3f s, train %.3f s, "
      "sync %.3f s, step %.3f s",
      train.ToString().c_str(), train_gpus(), TpsString(rollout_tps).c_str(), rollout_gpus(),
      rollout_s, train_s, sync_s, step_s);
}

double StepTime(const PipelineShape& shape, double rollout_s, double train_s, double sync_s) {
  if (shape.staleness <= 0) return rollout_s + train_s + sync_s;
  return std::max(rollout_s, train_s + sync_s);
}

double InstanceSteadyTime(const model::CostModel& cost, int tp,
                          std::span<const RequestSample> requests, double weight, int max_num_seqs,
                          int staleness) {
  LIBRA_CHECK(tp >= 1 && max_num_seqs >= 1) << "tp " << tp << " max_num_seqs " << max_num_seqs;
  if (requests.empty() || !(weight > 0)) return 0;
  const double capacity = static_cast<double>(cost.KvCapacityTokens(tp));
  double prefill_s = 0;
  double decode_tokens = 0;   // per unit weight
  double context_tokens = 0;  // sum over requests of the mean context while decoding
  double final_tokens = 0;    // sum of final contexts (KV each sequence needs at its end)
  int64_t longest = 0;
  for (const RequestSample& r : requests) {
    if (static_cast<double>(r.total()) > capacity) return kInf;
    if (r.prompt_tokens > 0) prefill_s += cost.PrefillTime(tp, r.prompt_tokens, 0);
    if (r.tool_tokens > 0) {
      prefill_s += cost.PrefillTime(tp, r.tool_tokens, r.prompt_tokens + r.generated_tokens / 2);
    }
    decode_tokens += static_cast<double>(r.generated_tokens);
    context_tokens += static_cast<double>(r.prompt_tokens + r.tool_tokens) +
                      static_cast<double>(r.generated_tokens) / 2;
    final_tokens += static_cast<double>(r.total());
    longest = std::max(longest, r.generated_tokens);
  }
  prefill_s *= weight;
  if (decode_tokens <= 0) return prefill_s;
  const double n = static_cast<double>(requests.size());
  const double sequences = n * weight;
  // The saturated batch: as many sequences as max_num_seqs, the KV cache (at the mean final
  // context, half of it in use on average) and the work allow.
  const double batch = std::max(1.0, std::min({static_cast<double>(max_num_seqs), sequences,
                                               2 * capacity * n / final_tokens}));
  model::IterationLoad load;
  load.decode_sequences = std::max<int64_t>(1, std::llround(batch));
  load.decode_context_tokens = std::llround(batch * context_tokens / n);
  const double iteration_s = cost.IterationTime(tp, load);
  const double throughput_s = decode_tokens * weight / batch * iteration_s;
  // A trajectory may span staleness + 1 step periods, so the longest bounds a period from below.
  const double tail_s = static_cast<double>(longest) * iteration_s / (staleness + 1);
  return prefill_s + std::max(throughput_s, tail_s);
}

double InstanceMakespan(const model::CostModel& cost, int tp,
                        std::span<const RequestSample> requests, double weight, int max_num_seqs) {
  LIBRA_CHECK(tp >= 1 && max_num_seqs >= 1) << "tp " << tp << " max_num_seqs " << max_num_seqs;
  if (requests.empty() || !(weight > 0)) return 0;
  const double capacity = static_cast<double>(cost.KvCapacityTokens(tp));
  double prefill_s = 0;
  std::vector<size_t> order;
  for (size_t j = 0; j < requests.size(); ++j) {
    const RequestSample& r = requests[j];
    if (static_cast<double>(r.total()) > capacity) return kInf;
    if (r.prompt_tokens > 0) prefill_s += cost.PrefillTime(tp, r.prompt_tokens, 0);
    if (r.tool_tokens > 0) {
      prefill_s += cost.PrefillTime(tp, r.tool_tokens, r.prompt_tokens + r.generated_tokens / 2);
    }
    if (r.generated_tokens > 0) order.push_back(j);
  }
  prefill_s *= weight;
  // Longest first (total, then generated), then input order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(requests[a].total(), requests[a].generated_tokens) >
           std::make_pair(requests[b].total(), requests[b].generated_tokens);
  });

  // The decode fluid. A running group: `mass` sequences admitted at one iteration, finishing at
  // iteration `finish`; the batch keeps sums so that its context is base + mass * iteration.
  struct Running {
    int64_t finish;
    size_t seq;
    double mass;
    double kv;
    double base;
    bool operator>(const Running& o) const {
      return std::tie(finish, seq) > std::tie(o.finish, o.seq);
    }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  const double eps = 1e-9 * std::max(1.0, weight);
  double batch = 0;  // sequences
  double kv = 0;     // KV tokens reserved (final contexts)
  double base = 0;   // sum of mass * (start context - admission iteration)
  int64_t iteration = 0;
  size_t next = 0;
  double left = weight;
  size_t admitted = 0;
  auto admit = [&] {
    while (next < order.size()) {
      const RequestSample& r = requests[order[next]];
      const double total = static_cast<double>(r.total());
      const double room =
          std::min(max_num_seqs - batch, total > 0 ? (capacity - kv) / total : kInf);
      const double take = std::min(left, room);
      if (take <= eps) break;
      const double start = static_cast<double>(r.prompt_tokens + r.tool_tokens);
      Running g{iteration + r.generated_tokens, admitted++, take, take * total,
                take * (start - static_cast<double>(iteration))};
      batch += g.mass;
      kv += g.kv;
      base += g.base;
      running.push(g);
      left -= take;
      if (left > eps) break;  // only part of it fits
      ++next;
      left = weight;
    }
  };
  double decode_s = 0;
  admit();
  while (!running.empty()) {
    const int64_t finish = running.top().finish;
    if (finish > iteration) {
      const int64_t sequences = std::max<int64_t>(1, std::llround(batch));
      const double context = base + batch * static_cast<double>(iteration);
      decode_s += cost.DecodeSpanTime(tp, sequences, std::max<int64_t>(0, std::llround(context)),
                                      finish - iteration);
      iteration = finish;
    }
    while (!running.empty() && running.top().finish == finish) {
      batch -= running.top().mass;
      kv -= running.top().kv;
      base -= running.top().base;
      running.pop();
    }
    if (running.empty()) batch = kv = base = 0;  // no drift
    admit();
  }
  return prefill_s + decode_s;
}

Result<SearchResult> Search(const model::CostModel& cost, const SearchSpace& space,
                            const PipelineShape& shape, std::span<const RequestSample> history,
                            SearchMode mode) {
  if (history.empty()) return Status::InvalidArgument("the length history is empty");
  LIBRA_RETURN_IF_ERROR(ValidateSpace(space, shape));
  const int gpn = space.gpus_per_node;
  const int total = space.nodes * gpn;
  LIBRA_ASSIGN_OR_RETURN(const std::vector<int> budgets, TrainingBudgets(space));
  // Allowed sizes of free layouts, ascending (unused with a node pattern).
  const std::vector<int> rollout_tps = AllowedRolloutTps(space);

  Problem p;
  p.cost = &cost;
  p.space = &space;
  p.shape = &shape;
  p.sample = SampleHistory(history, space.max_requests);
  const int n = static_cast<int>(p.sample.size());
  p.weight = static_cast<double>(shape.batch_trajectories) / n;
  p.batch = TrainBatch(p.sample, shape.batch_trajectories);
  p.train_tps = SortedUnique(space.train_tps);
  p.train_pps = SortedUnique(space.train_pps);
  p.micro_batches = SortedUnique(space.micro_batches);

  // The rollout layouts of node_pattern, per budget (empty when the pattern cannot fill it).
  std::map<int, std::vector<int>> pattern_layouts;
  std::vector<int> segment_tps = rollout_tps;
  if (!space.node_pattern.empty()) {
    segment_tps.clear();
    for (int budget : budgets) {
      auto packed = PackInstances(gpn, budget, total - budget, space.node_pattern);
      std::vector<int> tps;
      if (packed.ok()) {
        for (const backend::InstanceSpec& i : *packed) tps.push_back(i.tp);
      }
      segment_tps.insert(segment_tps.end(), tps.begin(), tps.end());
      pattern_layouts[budget] = std::move(tps);
    }
    segment_tps = SortedUnique(segment_tps);
  }

  if (mode == SearchMode::kExhaustive) {
    if (total > kExhaustiveMaxGpus || n > kExhaustiveMaxRequests) {
      return Status::InvalidArgument(StrFormat(
          "the exhaustive search is for cross-checks of at most %d GPUs and %d sampled requests "
          "(this is %d GPUs and %d requests); use the tree-DP search",
          kExhaustiveMaxGpus, kExhaustiveMaxRequests, total, n));
    }
    double enumerations = 0;
    for (int budget : budgets) {
      enumerations += space.node_pattern.empty() ? FreeEnumerations(rollout_tps, total - budget, n)
                                                 : OrderEnumerations(pattern_layouts[budget], n);
    }
    if (enumerations > kExhaustiveMaxEnumerations) {
      return Status::InvalidArgument(StrFormat(
          "the exhaustive search would enumerate %.3g rollout layouts x request splits (at most "
          "%.3g); use the tree-DP search or fewer GPUs or requests",
          enumerations, kExhaustiveMaxEnumerations));
    }
  }

  SearchResult result;
  SearchTrace& trace = result.trace;
  trace.budgets = static_cast<int>(budgets.size());
  const SegmentTable seg(cost, segment_tps, p.sample, p.weight, space.max_num_seqs, shape.staleness,
                         &trace.segment_evaluations);

  // ---- The rollout side of a budget: its fastest layout per largest TP ----
  std::optional<RolloutDp> dp;
  std::vector<bool> composable;  // whether sizes of rollout_tps sum to g
  if (space.node_pattern.empty()) {
    const int max_rollout = total - budgets.front();
    composable.assign(static_cast<size_t>(max_rollout + 1), false);
    composable[0] = true;
    for (int g = 1; g <= max_rollout; ++g) {
      for (int tp : rollout_tps) {
        if (tp <= g && composable[static_cast<size_t>(g - tp)]) {
          composable[static_cast<size_t>(g)] = true;
        }
      }
    }
    // Once, up to the largest rollout budget; every budget reads its row.
    if (mode == SearchMode::kTreeDp) dp.emplace(seg, max_rollout, &trace.dp_cells);
  }
  std::map<std::vector<int>, double> multiset_memo;
  auto pattern_side = [&](int budget) {
    RolloutSide side;
    const std::vector<int>& tps = pattern_layouts[budget];
    if (tps.empty()) {
      Count(side.pruned, "no_rollout_layout");
      return side;
    }
    double makespan = kInf;
    if (mode == SearchMode::kTreeDp) {
      // Layouts with the same counts (capped at n per size) have the same makespan.
      std::map<int, int> counts;
      for (int tp : tps) counts[tp] = std::min(counts[tp] + 1, n);
      std::vector<int> key;
      for (const auto& [tp, count] : counts) key.insert(key.end(), static_cast<size_t>(count), tp);
      auto it = multiset_memo.find(key);
      if (it == multiset_memo.end()) {
        it = multiset_memo.emplace(key, MultisetMakespan(seg, key, &trace.dp_cells)).first;
      }
      makespan = it->second;
    } else {
      RolloutEnumeration e(seg);
      e.Orders(tps);
      for (size_t m = 0; m < seg.tps().size(); ++m) {
        makespan = std::min(makespan, e.best(static_cast<int>(m)));
      }
    }
    if (makespan == kInf) {
      Count(side.pruned, "rollout_oom");
      return side;
    }
    std::vector<int> sorted = tps;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    side.options.push_back({sorted.front(), makespan, sorted});
    return side;
  };
  auto free_side = [&](int budget) {
    RolloutSide side;
    const int rollout = total - budget;
    if (!composable[static_cast<size_t>(rollout)]) {
      Count(side.pruned, "no_rollout_layout");
      return side;
    }
    std::optional<RolloutEnumeration> e;
    if (mode == SearchMode::kExhaustive) {
      e.emplace(seg);
      e->Free(rollout);
    }
    const std::vector<int> bins = RolloutBins(total, gpn, budget);
    for (int m = 0; m < static_cast<int>(rollout_tps.size()); ++m) {
      const double makespan = dp ? dp->Value(m, rollout) : e->best(m);
      if (makespan == kInf) continue;
      AddPackable(side,
                  {rollout_tps[static_cast<size_t>(m)], makespan,
                   dp ? dp->Layout(m, rollout) : e->layout(m)},
                  bins);
    }
    if (side.options.empty() && side.pruned.empty()) Count(side.pruned, "rollout_oom");
    return side;
  };

  // ---- Every budget: the training side against its rollout options ----
  for (int budget : budgets) {
    const RolloutSide side = space.node_pattern.empty() ? free_side(budget) : pattern_side(budget);
    std::map<std::string, int> pruned = side.pruned;
    std::optional<CandidatePlan> best;
    if (!side.options.empty()) {
      best = mode == SearchMode::kTreeDp ? TrainingTree(p, budget, side, pruned, trace.train_nodes)
                                         : EveryLeaf(p, budget, side, pruned, trace.train_nodes);
    }
    for (const auto& [reason, count] : pruned) trace.pruned[reason] += count;
    if (best) {
      trace.lines.push_back(
          StrFormat("train %d + rollout %d: %s", budget, total - budget, best->ToString().c_str()));
      result.top.push_back(std::move(*best));
    } else {
      trace.lines.push_back(StrFormat("train %d + rollout %d: no plan (%s)", budget, total - budget,
                                      PrunedString(pruned).c_str()));
    }
  }
  std::stable_sort(
      result.top.begin(), result.top.end(), [](const CandidatePlan& a, const CandidatePlan& b) {
        return std::make_pair(a.step_s, a.train_gpus()) < std::make_pair(b.step_s, b.train_gpus());
      });
  if (!result.top.empty()) result.best = result.top.front();
  const std::string outcome =
      result.best ? "best: " + result.best->ToString() : std::string("no feasible plan");
  trace.lines.push_back(StrFormat(
      "%s: %d budgets, %d training-tree nodes, %lld DP cells, %lld segments; %d of %zu requests "
      "sampled, %.3g trajectories each; %s",
      mode == SearchMode::kTreeDp ? "Algorithm 1 (tree x DP)" : "exhaustive", trace.budgets,
      trace.train_nodes, static_cast<long long>(trace.dp_cells),
      static_cast<long long>(trace.segment_evaluations), n, history.size(), p.weight,
      outcome.c_str()));
  return result;
}

Result<CandidatePlan> EvaluatePlan(const model::CostModel& cost, const SearchSpace& space,
                                   const PipelineShape& shape,
                                   std::span<const RequestSample> history,
                                   const model::TrainLayout& train, std::vector<int> rollout_tps) {
  if (history.empty()) return Status::InvalidArgument("the length history is empty");
  if (rollout_tps.empty()) return Status::InvalidArgument("the plan has no rollout instance");
  if (space.nodes < 1 || space.gpus_per_node < 1 || space.max_requests < 1 ||
      space.max_requests > kMaxSampleRequests || space.max_num_seqs < 1 ||
      shape.batch_trajectories < 1) {
    return Status::InvalidArgument("the space or the pipeline has a non-positive size");
  }
  const int gpn = space.gpus_per_node;
  const int total = space.nodes * gpn;
  if (train.tp < 1 || train.pp < 1 || train.dp < 1 || train.micro_batch < 1 || train.tp > gpn) {
    return Status::InvalidArgument(StrFormat("training layout %s does not fit nodes of %d GPUs",
                                             train.ToString().c_str(), gpn));
  }
  for (int tp : rollout_tps) {
    if (tp < 1 || tp > gpn) {
      return Status::InvalidArgument(
          StrFormat("a rollout instance of TP %d does not fit a node of %d GPUs", tp, gpn));
    }
  }
  std::sort(rollout_tps.begin(), rollout_tps.end(), std::greater<>());
  const int rollout = std::accumulate(rollout_tps.begin(), rollout_tps.end(), 0);
  if (train.gpus() + rollout > total) {
    return Status::InvalidArgument(StrFormat("training (%d GPUs) and rollout (%d) exceed %d GPUs",
                                             train.gpus(), rollout, total));
  }
  if (!FirstFitDecreasing(rollout_tps, RolloutBins(total, gpn, train.gpus()))) {
    return Status::InvalidArgument(
        StrFormat("rollout instances %s do not fit GPUs [%d, %d) without crossing a node",
                  TpsString(rollout_tps).c_str(), train.gpus(), total));
  }
  const std::vector<RequestSample> sample = SampleHistory(history, space.max_requests);
  const double weight = static_cast<double>(shape.batch_trajectories) / sample.size();
  const model::TrainEstimate e =
      cost.TrainStep(train, shape.passes, TrainBatch(sample, shape.batch_trajectories));
  if (e.oom()) {
    return Status::InvalidArgument(
        StrFormat("training layout %s runs out of memory (%.1f GB per GPU of %.1f)",
                  train.ToString().c_str(), e.memory_bytes / 1e9, e.memory_limit_bytes / 1e9));
  }
  int64_t evaluations = 0;
  const SegmentTable seg(cost, SortedUnique(rollout_tps), sample, weight, space.max_num_seqs,
                         shape.staleness, &evaluations);
  int64_t cells = 0;
  const double makespan = MultisetMakespan(seg, rollout_tps, &cells);
  if (makespan == kInf) {
    return Status::InvalidArgument(
        StrFormat("a request of %lld tokens fits the KV cache of no instance of %s",
                  static_cast<long long>(sample.back().total()), TpsString(rollout_tps).c_str()));
  }
  CandidatePlan plan;
  plan.train = train;
  plan.rollout_s = makespan * shape.rollout_scale;
  plan.train_s = e.step_s * shape.train_scale;
  plan.sync_s = cost.WeightSyncTime({shape.sync_path, train, rollout_tps.front(), true});
  plan.step_s = StepTime(shape, plan.rollout_s, plan.train_s, plan.sync_s);
  plan.rollout_tps = std::move(rollout_tps);
  return plan;
}

}  // namespace libra::planner
