#include "model/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"

namespace libra::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

std::vector<int64_t> PartitionUnitStarts(int64_t n, int max_units) {
  std::vector<int64_t> starts;
  const int64_t units = std::max(2, max_units);
  if (n <= units) {
    for (int64_t i = 0; i <= n; ++i) starts.push_back(i);
    return starts;
  }
  // The longest half of the units stay single (they decide the group maxima); the rest of the
  // lengths are cut into equal chunks.
  const int64_t single = units / 2;
  const int64_t chunks = units - single;
  for (int64_t i = 0; i < single; ++i) starts.push_back(i);
  for (int64_t c = 0; c <= chunks; ++c) starts.push_back(single + c * (n - single) / chunks);
  return starts;
}

namespace {

// The cost of the group of units [k, i) on instance j: cost(j, count) for its count of lengths,
// asked once each (the scans ask for the same counts many times) while a table of every
// instance and count stays within kMemoEntries, times its first (longest) length.
class GroupCosts {
 public:
  static constexpr size_t kMemoEntries = size_t{1} << 20;  // 8 MiB

  GroupCosts(std::span<const double> lengths, const std::vector<int64_t>& start, size_t instances,
             const GroupCostFn& cost)
      : start_(start), side_(lengths.size() + 1), cost_(cost) {
    if (instances <= kMemoEntries / side_) per_token_.assign(instances * side_, -1);
    first_.resize(start.size() - 1);
    for (size_t k = 0; k < first_.size(); ++k) first_[k] = lengths[static_cast<size_t>(start[k])];
  }

  /// The cost of the group [k, i) on instance `j` (k < i).
  double At(size_t j, size_t k, size_t i) {
    const int64_t count = start_[i] - start_[k];
    if (per_token_.empty()) return cost_(j, count) * first_[k];
    double& seconds = per_token_[j * side_ + static_cast<size_t>(count)];
    if (seconds < 0) seconds = cost_(j, count);
    return seconds * first_[k];
  }

 private:
  const std::vector<int64_t>& start_;
  size_t side_;
  std::vector<double> per_token_;  // empty: no memo
  std::vector<double> first_;
  const GroupCostFn& cost_;
};

// Pass 2 of PresortedPartition: among cuts whose every group is within `out.makespan`, the one
// with the least sum of squared (normalised) costs, written to out.begin / out.end.
void SpreadCut(GroupCosts& costs, const std::vector<int64_t>& start, Partition& out) {
  const size_t units = start.size() - 1;
  const size_t m = out.begin.size();
  const double limit = out.makespan * (1 + 1e-9);
  const double scale = out.makespan > 0 ? out.makespan : 1;
  // Only cuts of [0, i) on instances [0, j) with reach[j] <= i <= fill[j] are computed: fill[j]
  // is the most units instances [0, j) can take within the limit, reach[j] the first unit from
  // which instances [j, m) can take the rest. Each is found greedily, every instance taking the
  // largest group within the limit (from the first on, or from the last back): group costs grow
  // with the group, so no other cut gets further.
  std::vector<size_t> fill(m + 1, 0), reach(m + 1, units);
  for (size_t j = 0; j < m; ++j) {
    size_t i = fill[j];
    while (i < units && costs.At(j, fill[j], i + 1) <= limit) ++i;
    fill[j + 1] = i;
  }
  for (size_t j = m; j-- > 0;) {
    size_t k = reach[j + 1];
    while (k > 0 && costs.At(j, k - 1, reach[j + 1]) <= limit) --k;
    reach[j] = k;
  }
  LIBRA_CHECK(reach[0] == 0 && fill[m] == units) << "group costs must grow with the group";
  std::vector<std::vector<double>> e(m + 1, std::vector<double>(units + 1, kInf));
  std::vector<std::vector<size_t>> from(m + 1, std::vector<size_t>(units + 1, 0));
  e[0][0] = 0;
  for (size_t j = 1; j <= m; ++j) {
    const double* before = e[j - 1].data();
    for (size_t i = reach[j]; i <= fill[j]; ++i) {
      double best = before[i];  // instance j-1 empty (kInf beyond fill[j - 1])
      size_t arg = i;
      for (size_t k = std::min(i, fill[j - 1] + 1); k-- > reach[j - 1];) {
        const double c = costs.At(j - 1, k, i);
        if (c > limit) break;
        const double v = before[k] + (c / scale) * (c / scale);
        if (v < best) {
          best = v;
          arg = k;
        }
      }
      e[j][i] = best;
      from[j][i] = arg;
    }
  }
  size_t i = units;
  for (size_t j = m; j >= 1; --j) {
    const size_t k = from[j][i];
    out.begin[j - 1] = start[k];
    out.end[j - 1] = start[i];
    i = k;
  }
}

// The first end i a pass computes on instance j of m: the last instance needs only i = units,
// since no later one builds on it.
size_t FirstEnd(size_t j, size_t m, size_t units) { return j == m ? units : 0; }

// Pass 1 of PresortedPartition: D[j][i], the least makespan of units [0, i) on instances [0, j),
// one PresortedStep per instance. Returns D[m][units]; two rows are kept.
double LeastMakespan(GroupCosts& costs, size_t units, size_t m) {
  std::vector<double> before(units + 1, kInf), row(units + 1, kInf);
  before[0] = 0;
  for (size_t j = 1; j <= m; ++j) {
    PresortedStep(
        before, [&](size_t k, size_t i) { return costs.At(j - 1, k, i); }, FirstEnd(j, m, units),
        row);
    std::swap(before, row);
  }
  return before[units];
}

}  // namespace

GroupStepModel::GroupStepModel(const CostModel& cost, int64_t context_tokens, int max_num_seqs)
    : cost_(cost), context_(std::max<int64_t>(1, context_tokens)), max_num_seqs_(max_num_seqs) {}

int64_t GroupStepModel::Fit(int tp) const {
  return std::min<int64_t>(max_num_seqs_, cost_.KvCapacityTokens(tp) / context_);
}

double GroupStepModel::StepSeconds(int tp, int64_t sequences) const {
  if (sequences <= 0) return 0;
  const auto slot = static_cast<size_t>(tp);
  if (memo_.size() <= slot) memo_.resize(slot + 1);
  std::vector<double>& row = memo_[slot];
  const auto index = static_cast<size_t>(sequences);
  if (row.size() <= index) row.resize(index + 1, -1);
  if (row[index] >= 0) return row[index];
  const int64_t fit = Fit(tp);
  double step = kInf;
  if (fit > 0) {
    const int64_t batch = std::min(sequences, fit);
    IterationLoad load;
    load.decode_sequences = batch;
    load.decode_context_tokens = batch * context_;
    step =
        cost_.IterationTime(tp, load) * static_cast<double>(sequences) / static_cast<double>(batch);
  }
  row[index] = step;
  return step;
}

Partition PresortedPartition(std::span<const double> lengths, size_t instances,
                             const GroupCostFn& cost, int max_units) {
  LIBRA_CHECK(instances >= 1) << "a partition needs an instance";
  const auto n = static_cast<int64_t>(lengths.size());
  const std::vector<int64_t> start = PartitionUnitStarts(n, max_units);
  const size_t m = instances;
  GroupCosts costs(lengths, start, m, cost);
  Partition out;
  out.makespan = LeastMakespan(costs, start.size() - 1, m);
  out.begin.assign(m, n);
  out.end.assign(m, n);
  if (!std::isfinite(out.makespan)) {
    out.begin[0] = 0;  // nothing fits: everything on the first instance
    return out;
  }
  SpreadCut(costs, start, out);
  return out;
}

double PresortedMakespan(std::span<const double> lengths, size_t instances, const GroupCostFn& cost,
                         int max_units) {
  LIBRA_CHECK(instances >= 1) << "a partition needs an instance";
  const std::vector<int64_t> start =
      PartitionUnitStarts(static_cast<int64_t>(lengths.size()), max_units);
  GroupCosts costs(lengths, start, instances, cost);
  return LeastMakespan(costs, start.size() - 1, instances);
}

double AssignmentMakespan(std::span<const double> lengths, std::span<const size_t> group,
                          size_t instances, const GroupCostFn& cost) {
  std::vector<int64_t> count(instances, 0);
  std::vector<double> longest(instances, 0);
  for (size_t t = 0; t < lengths.size(); ++t) {
    ++count[group[t]];
    longest[group[t]] = std::max(longest[group[t]], lengths[t]);
  }
  double makespan = 0;
  for (size_t j = 0; j < instances; ++j) {
    if (count[j] > 0) makespan = std::max(makespan, cost(j, count[j]) * longest[j]);
  }
  return makespan;
}

double KvTransferTime(const CostModel& cost, int64_t tokens, bool same_node) {
  const double bandwidth =
      same_node ? cost.gpu().nvlink_bandwidth : cost.gpu().inter_node_bandwidth;
  if (tokens <= 0) return 0;
  if (bandwidth <= 0) return kInf;
  return static_cast<double>(tokens) * cost.arch().KvBytesPerToken() / bandwidth;
}

}  // namespace libra::model
