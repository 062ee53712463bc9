#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <tuple>
#include <utility>

#include "common/check.h"
#include "common/strings.h"
#include "planner/stream_model.h"

namespace libra::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Inputs ------------------------------------------------------------------------------------

/// The order a history is sampled in: by total length, then prompt, generated, tool tokens, turns
/// and tool time.
bool SampleOrder(const RequestSample& a, const RequestSample& b) {
  return std::make_tuple(a.total(), a.prompt_tokens, a.generated_tokens, a.tool_tokens, a.turns,
                         a.tool_s) < std::make_tuple(b.total(), b.prompt_tokens, b.generated_tokens,
                                                     b.tool_tokens, b.turns, b.tool_s);
}

/// The history sorted by total length (then prompt, generated, tool, turns, tool time), cut at the
/// rank of a batch's longest trajectory (a history of many batches holds longer ones than a batch
/// does: of n, the longest n / (batch + 1) are left out), and thinned to at most `max_requests`
/// evenly spaced ranks, the shortest and that longest included. With `pace_s` > 0, the trajectory
/// at the same rank by latency (tool time plus generated tokens at `pace_s` a token) takes the
/// place of the sampled one nearest it in length, when the thinning left it out.
std::vector<RequestSample> SampleHistory(std::span<const RequestSample> history, int max_requests,
                                         int batch, double pace_s) {
  std::vector<RequestSample> sorted(history.begin(), history.end());
  if (!std::is_sorted(sorted.begin(), sorted.end(), SampleOrder)) {
    std::stable_sort(sorted.begin(), sorted.end(), SampleOrder);
  }
  const size_t cut = (sorted.size() - 1) / (static_cast<size_t>(std::max(1, batch)) + 1);
  std::optional<RequestSample> slowest;
  if (pace_s > 0 && !sorted.empty()) {
    // Latencies by rank in `sorted`; equal latencies rank the later of the length order first.
    std::vector<std::pair<double, size_t>> latencies(sorted.size());
    for (size_t k = 0; k < sorted.size(); ++k) {
      latencies[k] = {sorted[k].tool_s + pace_s * static_cast<double>(sorted[k].generated_tokens),
                      k};
    }
    std::nth_element(latencies.begin(), latencies.begin() + static_cast<std::ptrdiff_t>(cut),
                     latencies.end(), std::greater<>());
    slowest = sorted[latencies[cut].second];
  }
  sorted.resize(sorted.size() - cut);
  const int64_t n = static_cast<int64_t>(sorted.size());
  const int64_t m = std::min<int64_t>(n, std::max(1, max_requests));
  std::vector<RequestSample> sample;
  if (m == n) {
    sample = std::move(sorted);
  } else {
    sample.reserve(static_cast<size_t>(m));
    for (int64_t k = 0; k < m; ++k) {
      const int64_t index = m == 1 ? (n - 1) / 2 : (k * (n - 1) * 2 + (m - 1)) / (2 * (m - 1));
      sample.push_back(sorted[static_cast<size_t>(index)]);
    }
  }
  if (slowest && sample.size() > 1 &&
      std::find(sample.begin(), sample.end(), *slowest) == sample.end()) {
    const auto at = std::lower_bound(sample.begin() + 1, sample.end(), *slowest, SampleOrder);
    auto nearest = at == sample.end() ? at - 1 : at;
    if (at != sample.end() && at - 1 != sample.begin() &&
        slowest->total() - (at - 1)->total() <= at->total() - slowest->total()) {
      nearest = at - 1;
    }
    *nearest = *slowest;
    std::sort(sample.begin(), sample.end(), SampleOrder);
  }
  return sample;
}

/// The training batch: `batch` sequences at evenly spaced ranks of the (sorted) sample's totals,
/// each request batch / n times when that is whole, so that a batch smaller than the sample spans
/// it up to its longest request, as a batch of the workload does (cycling through the sample
/// took its shortest `batch` requests only).
std::vector<int64_t> TrainBatch(const std::vector<RequestSample>& sample, int batch) {
  const size_t n = sample.size();
  const size_t b = static_cast<size_t>(batch);
  std::vector<int64_t> tokens(b);
  for (size_t k = 0; k < b; ++k) tokens[k] = sample[(2 * k + 1) * n / (2 * b)].total();
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

/// Instances of one TP size.
struct TpCount {
  int tp = 0;
  int count = 0;
  auto operator<=>(const TpCount&) const = default;
};
/// A rollout layout as its instances per TP size, largest first: layouts of thousands of GPUs
/// have thousands of instances but few sizes.
using TpCounts = std::vector<TpCount>;

/// `tps`, sorted descending, as counts.
TpCounts CountsOf(std::span<const int> tps) {
  LIBRA_CHECK(std::is_sorted(tps.begin(), tps.end(), std::greater<>()))
      << "a layout's TP sizes must come largest first";
  TpCounts counts;
  for (const int tp : tps) {
    if (counts.empty() || counts.back().tp != tp) counts.push_back({tp, 0});
    ++counts.back().count;
  }
  return counts;
}

/// Every instance's TP size, largest first.
std::vector<int> Expand(const TpCounts& counts) {
  std::vector<int> tps;
  for (const TpCount& c : counts) tps.insert(tps.end(), static_cast<size_t>(c.count), c.tp);
  return tps;
}

/// `count` bins in a row with `room` GPUs each.
struct BinRun {
  int room = 0;
  int count = 0;
};

/// Whether the instances fit these bins, first-fit decreasing (bins in order). With sizes summing
/// to the capacities, that is "fill them exactly". While the items keep one size, each bin in
/// turn takes as many as fit; bins in a row with the same room take them alike, so a run of bins
/// is filled at once and splits at most in three (filled, part-filled, untouched). O(runs) per
/// size; rollout GPUs are two runs (a partial node, then whole ones).
bool FirstFitDecreasing(const TpCounts& items, std::vector<BinRun> bins) {
  for (size_t k = 0; k < items.size(); ++k) {
    const auto [size, count] = items[k];
    LIBRA_CHECK(size > 0 && (k == 0 || items[k - 1].tp > size))
        << "first-fit decreasing needs its sizes largest first";
    int left = count;
    for (size_t b = 0; left > 0; ++b) {
      if (b == bins.size()) return false;
      BinRun& run = bins[b];
      if (run.room < size) continue;
      const int each = run.room / size;  // what one bin of the run takes
      const int filled = std::min(run.count, left / each);
      if (filled == run.count) {
        run.room -= each * size;
        left -= filled * each;
        continue;
      }
      const int rest = left - filled * each;  // fewer than `each`: one more bin takes them
      const BinRun part{run.room - rest * size, rest > 0 ? 1 : 0};
      const BinRun full{run.room - each * size, filled};
      run.count -= filled + part.count;
      bins.insert(bins.begin() + static_cast<std::ptrdiff_t>(b), {full, part});
      left = 0;
    }
  }
  return true;
}

/// The rollout GPUs [first, total) as bins: the partial first node, then whole nodes.
std::vector<BinRun> RolloutBins(int total, int gpus_per_node, int first) {
  std::vector<BinRun> bins;
  int gpu = first;
  if (gpu < total && gpu % gpus_per_node != 0) {
    const int end = std::min((gpu / gpus_per_node + 1) * gpus_per_node, total);
    bins.push_back({end - gpu, 1});
    gpu = end;
  }
  const int whole = (total - gpu) / gpus_per_node;
  if (whole > 0) bins.push_back({gpus_per_node, whole});
  gpu += whole * gpus_per_node;
  if (gpu < total) bins.push_back({total - gpu, 1});
  return bins;
}

// ---- The rollout model on the sample -----------------------------------------------------------

/// Every sampled request as the rollout model sees it on each TP size (CostOf), each standing for
/// `weight` trajectories, and all of them as one load; computed once.
class SampleCosts {
 public:
  SampleCosts(const model::CostModel& cost, std::vector<int> tps,
              const std::vector<RequestSample>& sample, double weight)
      : tps_(std::move(tps)), n_(static_cast<int>(sample.size())) {
    costs_.resize(tps_.size());
    all_.resize(tps_.size());
    for (size_t k = 0; k < tps_.size(); ++k) {
      costs_[k].reserve(sample.size());
      for (const RequestSample& r : sample) {
        costs_[k].push_back(CostOf(cost, tps_[k], r));
        all_[k].Add(costs_[k].back(), weight);
      }
    }
  }
  const std::vector<int>& tps() const { return tps_; }
  int n() const { return n_; }
  int KOf(int tp) const {
    const auto it = std::lower_bound(tps_.begin(), tps_.end(), tp);
    LIBRA_CHECK(it != tps_.end() && *it == tp) << "no costs for TP " << tp;
    return static_cast<int>(it - tps_.begin());
  }
  const RequestCost& at(int k, int r) const {
    return costs_[static_cast<size_t>(k)][static_cast<size_t>(r)];
  }
  /// Every request on TP tps()[k].
  const RolloutLoad& All(int k) const { return all_[static_cast<size_t>(k)]; }

 private:
  std::vector<int> tps_;
  int n_;
  std::vector<std::vector<RequestCost>> costs_;
  std::vector<RolloutLoad> all_;  // by k: every request
};

/// The search's inputs, derived once.
struct Problem {
  const model::CostModel* cost = nullptr;
  const SearchSpace* space = nullptr;
  const PipelineShape* shape = nullptr;
  std::vector<RequestSample> sample;
  double weight = 1;
  /// TrainStep on the training batch (TrainBatch) for any layout.
  std::unique_ptr<model::TrainBatchCosts> train;
  /// TrainStep on it with its first sequence replaced by the longest expected one (null when
  /// the sample already holds one as long), and with every sequence that long: a micro-batch of
  /// m > 1 sequences can hold m of the longest together.
  std::unique_ptr<model::TrainBatchCosts> train_longest;
  std::unique_ptr<model::TrainBatchCosts> train_all_longest;
  std::vector<int> train_tps;
  std::vector<int> train_pps;
  std::vector<int> micro_batches;
  std::map<int, double> tp_comm_ratio;   // memo
  const ToolLatencies* tools = nullptr;  // the shape's; null when it has none
  /// The longest context, the history's or the shape's max_sequence_tokens: any instance may get
  /// it, so every instance must hold it (an engine refuses to start with a context limit its KV
  /// cache cannot hold).
  int64_t longest = 0;

  /// tp_comm_s / compute_s of one replica {tp, pp 1, dp 1} at the smallest micro-batch.
  double TpCommRatio(int tp) {
    auto it = tp_comm_ratio.find(tp);
    if (it != tp_comm_ratio.end()) return it->second;
    const model::TrainEstimate e = train->TrainStep({tp, 1, 1, micro_batches.front()});
    double ratio = 0;
    if (e.tp_comm_s > 0) ratio = e.compute_s > 0 ? e.tp_comm_s / e.compute_s : kInf;
    tp_comm_ratio.emplace(tp, ratio);
    return ratio;
  }
  bool Holds(int tp) const { return cost->KvCapacityTokens(tp) >= longest; }
  /// Whether `layout` runs out of memory on a batch whose largest micro-batch holds the longest
  /// expected sequences only.
  bool OutOfMemory(const model::TrainLayout& layout) const {
    const auto& batch = layout.micro_batch > 1 ? train_all_longest : train_longest;
    return batch != nullptr && batch->OutOfMemory(layout);
  }
  /// An instance of TP `tp` in a layout of `instances` (0: not known, as for one run of the
  /// sample in the rollout DP, whose layouts are timed again whole).
  InstanceSetting Setting(int tp, double outside_s, double paced_batches = 0,
                          int instances = 0) const {
    InstanceSetting s;
    s.tp = tp;
    s.max_num_seqs = space->max_num_seqs;
    s.staleness = shape->staleness;
    s.outside_s = outside_s;
    s.paced_batches = paced_batches;
    s.credit_pace = shape->credit_pace;
    s.kv_policy = shape->kv_policy;
    s.tools = tools;
    s.returns = shape->returns;
    s.instances = instances;
    return s;
  }
};

/// The instances of one TP size in a rollout layout, sharing `load` (all their requests) evenly.
struct KindShare {
  int tp = 0;
  int count = 0;
  RolloutLoad load;
  bool operator==(const KindShare&) const = default;
};

/// The instances of a layout.
int Instances(const std::vector<KindShare>& kinds) {
  int n = 0;
  for (const KindShare& kind : kinds) n += kind.count;
  return n;
}

/// The slowest instance's period (unscaled) with `outside_s` in the cycle (rollout_model.h) and,
/// when given, `paced_batches` in flight at the trainer's pace (rollout_model.h); with
/// `occupancy`, the largest InstanceEstimate::paced_occupancy there too.
double Period(const Problem& p, const std::vector<KindShare>& kinds, double outside_s,
              double paced_batches = 0, double* occupancy = nullptr) {
  const int instances = Instances(kinds);
  double worst = 0;
  for (const KindShare& kind : kinds) {
    if (kind.count <= 0 || kind.load.empty()) continue;
    if (!p.Holds(kind.tp)) return kInf;
    const InstanceEstimate e =
        EstimateInstance(*p.cost, p.Setting(kind.tp, outside_s, paced_batches, instances),
                         kind.load.Share(1.0 / kind.count));
    worst = std::max(worst, e.period_s);
    if (occupancy != nullptr) *occupancy = std::max(*occupancy, e.paced_occupancy);
  }
  return worst;
}

/// The step a rollout layout (scaled rollout time `rollout_s`) makes with a train step and a
/// sync per step: in series when synchronous or time-shared; asynchronous and disaggregated, the
/// slower of the trainer and the rollout side, whose batches also wait for the trainer's step
/// within their staleness + 1 periods (rollout_model.h). `rollout_s` (every allowed batch in
/// flight) does not bound it: a KV cache that thrashes with all of them may keep up with fewer.
/// `scale` is the rollout side's (measured over modelled; PipelineShape::rollout_scale).
/// `occupancy` receives the paced instances' largest InstanceEstimate::paced_occupancy.
double PlanStep(const Problem& p, const std::vector<KindShare>& kinds, double rollout_s,
                double train_s, double sync_s, bool colocated, double scale, double* occupancy) {
  const PipelineShape& shape = *p.shape;
  if (colocated || shape.staleness <= 0) return rollout_s + train_s + sync_s;
  const double outside = train_s + sync_s;
  // When the trainer sets the pace, each batch launches a whole step after the one before it
  // completes, so at most `staleness` batches are in flight and they arrive no faster than the
  // trainer takes them: if the rollout side keeps up with that (far less KV pressure than with
  // every allowed batch in flight, rollout_model.h), the step is the trainer's.
  if (scale * Period(p, kinds, outside / scale, shape.staleness, occupancy) <= outside) {
    return outside;
  }
  return std::max(outside, scale * Period(p, kinds, outside / scale));
}

/// One instance's contiguous run [j, i) of the sorted sample.
struct Segment {
  int tp = 0;
  int j = 0;
  int i = 0;
};

/// The instances of `layout` as the router fills them: every instance gets the same mix of
/// the step's trajectories, in proportion to its GPUs (C-MLFQ counts load per GPU; a balancing
/// router cannot sort trajectories by a length it does not know), so any of them may get the
/// slowest trajectory. One share per TP size.
std::vector<KindShare> MixedShares(const SampleCosts& costs, const TpCounts& layout) {
  int gpus = 0;
  for (const TpCount& c : layout) gpus += c.tp * c.count;
  std::vector<KindShare> out;
  out.reserve(layout.size());
  for (auto c = layout.rbegin(); c != layout.rend(); ++c) {  // ascending TP
    const RolloutLoad& all = costs.All(costs.KOf(c->tp));
    out.push_back({c->tp, c->count, all.Share(static_cast<double>(c->tp * c->count) / gpus)});
  }
  return out;
}

/// Period's slowest period, and the slowest iteration there (seconds a decoding sequence waits
/// for each token), from one estimate of each kind.
struct Slowest {
  double period_s = 0;
  double iteration_s = 0;
  /// The lowest share of tool calls whose context survived in the cache.
  double hit_rate = 1;
};
Slowest SlowestInstance(const Problem& p, const std::vector<KindShare>& kinds, double outside_s,
                        double paced_batches) {
  const int instances = Instances(kinds);
  Slowest worst;
  for (const KindShare& kind : kinds) {
    if (kind.count <= 0 || kind.load.empty()) continue;
    if (!p.Holds(kind.tp)) {
      worst.period_s = kInf;
      continue;
    }
    const InstanceEstimate e =
        EstimateInstance(*p.cost, p.Setting(kind.tp, outside_s, paced_batches, instances),
                         kind.load.Share(1.0 / kind.count));
    worst.period_s = std::max(worst.period_s, e.period_s);
    worst.iteration_s = std::max(worst.iteration_s, e.iteration_s);
    worst.hit_rate = std::min(worst.hit_rate, e.hit_rate);
  }
  return worst;
}

/// Steps a stream replay runs (its first staleness + 1 are not counted), and the replays that
/// bring its iteration time to the one its own load sets.
constexpr int kStreamReplaySteps = 40;
constexpr int kStreamRounds = 8;

/// The time between a decoding sequence's tokens on the slowest kind's instances when `decoding`
/// sequences of `context` tokens decode across the layout, each kind holding its share of the
/// decoded tokens, and the instances prefill `prefill_per_token` seconds for each token decoded:
/// an iteration of the sequences an instance holds (at most what its engine admits and its KV
/// cache fits) and their share of the prefill; sequences beyond those take turns with them.
double TokenTime(const Problem& p, const std::vector<KindShare>& kinds, double decoding,
                 double context, double prefill_per_token) {
  double decode = 0;
  for (const KindShare& kind : kinds) {
    if (kind.count > 0) decode += kind.load.decode;
  }
  double worst = 0;
  for (const KindShare& kind : kinds) {
    if (kind.count <= 0 || kind.load.decode <= 0) continue;
    const double fit =
        static_cast<double>(p.cost->KvCapacityTokens(kind.tp)) / std::max(1.0, context);
    const double most = std::max(1.0, std::min(static_cast<double>(p.space->max_num_seqs), fit));
    const double n = std::max(1.0, decoding * kind.load.decode / decode / kind.count);
    const double held = std::min(n, most);
    const double iteration =
        p.cost->DecodeSpanTime(kind.tp, std::llround(held), std::llround(held * context), 1);
    worst = std::max(worst, (iteration + prefill_per_token * held) * n / held);
  }
  return worst;
}

/// `plan` (asynchronous and disaggregated, not lending) with stream batches: the shape's groups
/// replayed (ReplayStream), each taking its slowest sample's tools, own prefill and decoded
/// tokens at an iteration time. That time is set by the sequences decoding, which the replay
/// sets in turn (Little's law: the tokens it decodes a step, each holding a place in a batch for
/// one iteration, over the period), stretched by the share of the period the instances prefill;
/// the replay is run to that fixed point. Training is scaled by the tokens the replay trains; the
/// step is the replay's, and at least the trainer's cycle (no batch waits for the slowest group,
/// so the rollout side's latency bound does not hold it back); rollout alone is the replay's
/// period with training free, the rejected groups' work included. Unchanged without stream
/// groups.
void ApplyStream(const Problem& p, const std::vector<KindShare>& kinds, CandidatePlan& plan) {
  const PipelineShape& shape = *p.shape;
  if (shape.stream_groups == nullptr || shape.stream_groups->empty() || shape.staleness <= 0 ||
      plan.colocated || plan.lend_trainer) {
    return;
  }
  const double scale = shape.rollout_scale;
  const auto size = static_cast<size_t>(std::max(1, shape.group_size));
  const std::vector<TrajectorySize>& members = *shape.stream_groups;
  const size_t count = members.size() / size;
  if (count == 0 || kinds.empty()) return;
  // Each sample's own prefill (its prompt and tool outputs after a cached context) on the
  // slowest kind's instances; the decoded tokens, their mean context, and the instances'
  // prefill for each of them.
  std::vector<StreamGroup> groups(count);  // tokens now, latencies at each round's pace
  std::vector<double> own_prefill(count * size, 0.0);
  std::vector<double> own_miss(count * size, 0.0);
  double tokens = 0;
  double decoded = 0;
  double decoded_context = 0;
  double prefill_s = 0;
  double miss_s = 0;
  for (size_t i = 0; i < count * size; ++i) {
    const TrajectorySize& m = members[i];
    groups[i / size].tokens += static_cast<double>(m.total());
    groups[i / size].decoded += static_cast<double>(m.generated_tokens);
    tokens += static_cast<double>(m.total());
    for (const KindShare& kind : kinds) {
      const RequestCost c = CostOf(*p.cost, kind.tp, m);
      own_prefill[i] = std::max(own_prefill[i], c.prefill_s);
      own_miss[i] = std::max(own_miss[i], c.miss_s);
      if (&kind == &kinds.front()) {  // the decoded tokens and their context: any TP's
        decoded += c.decode;
        decoded_context += c.decode_context;
      }
    }
    prefill_s += own_prefill[i];
    miss_s += own_miss[i];
  }
  const double context = decoded > 0 ? decoded_context / decoded : 0;
  StreamPipeline pipeline;
  pipeline.groups_per_step = std::max(1, shape.batch_trajectories / static_cast<int>(size));
  pipeline.staleness = shape.staleness;
  pipeline.steps = std::max(kStreamReplaySteps, 4 * (shape.staleness + 1));
  pipeline.train_s_per_token =
      plan.train_s / (pipeline.groups_per_step * tokens / static_cast<double>(count));
  pipeline.sync_s = plan.sync_s;
  // The replay from the iteration time of the regime PlanStep finds with `outside` in the
  // cycle, each round halfway to the time its load sets (a full step overshoots: the period
  // moves with the iteration time).
  auto replay_at = [&](double outside) {
    Slowest slowest = SlowestInstance(p, kinds, outside / scale, shape.staleness);
    if (scale * slowest.period_s > outside) slowest = SlowestInstance(p, kinds, outside / scale, 0);
    double iteration = scale * slowest.iteration_s;
    const double miss = 1 - slowest.hit_rate;
    const double prefill_per_token = decoded > 0 ? (prefill_s + miss * miss_s) / decoded : 0;
    StreamReplay replay;
    for (int round = 0; round < kStreamRounds; ++round) {
      for (StreamGroup& g : groups) g.latency_s = 0;
      for (size_t i = 0; i < count * size; ++i) {
        const TrajectorySize& m = members[i];
        StreamGroup& g = groups[i / size];
        g.latency_s =
            std::max(g.latency_s, m.tool_s + scale * (own_prefill[i] + miss * own_miss[i]) +
                                      static_cast<double>(m.generated_tokens) * iteration);
      }
      replay = ReplayStream(groups, pipeline);
      if (replay.period_s <= 0) break;
      const double decoding = replay.decoded_per_step * iteration / replay.period_s;
      const double held = scale * TokenTime(p, kinds, decoding, context, prefill_per_token);
      iteration = (iteration + held) / 2;
    }
    return replay;
  };
  const StreamReplay replay = replay_at(plan.train_s + plan.sync_s);
  pipeline.train_s_per_token = 0;
  const StreamReplay alone = replay_at(plan.sync_s);
  plan.train_s *= replay.trained_tokens;
  plan.rollout_s = alone.period_s;
  plan.step_s = std::max(plan.train_s + plan.sync_s, replay.period_s);
}

// ---- Rollout segments --------------------------------------------------------------------------

/// The period (outside nothing) of any contiguous run [j, i) of the sorted sample on one instance
/// of any TP size of `costs`, each computed once when first asked, on running sums: the runs from
/// one start grow one request at a time. Two lower bounds let the rollout DP skip the runs that
/// cannot improve on what it has without estimating them: one from prefix sums (LowerBound),
/// then a run's saturated period (Candidate). Free layouts only: a node pattern's layouts
/// are timed as the router fills them (MixedShares), so with `free` false the table is empty.
class SegmentTable {
 public:
  /// Counts in `trace` the runs asked for (segment_evaluations) and those estimated.
  SegmentTable(const Problem& p, const SampleCosts& costs, bool free, SearchTrace* trace)
      : p_(p), costs_(costs), tps_(costs.tps()), n_(costs.n()), trace_(trace) {
    if (!free) return;
    const size_t side = static_cast<size_t>(n_ + 1);
    values_.assign(tps_.size() * side * side, kUnknown);
    floors_.assign(values_.size(), kUnknown);
    runs_.resize(tps_.size() * side);
    bounds_.assign(tps_.size() * side, 0.0);
    for (size_t k = 0; k < tps_.size(); ++k) {
      holds_.push_back(p.Holds(tps_[k]));
      settings_.push_back(p.Setting(tps_[k], 0));
      for (int j = 0; j <= n_; ++j) runs_[k * side + static_cast<size_t>(j)].end = j;
      // An instance's period is at least its prefill after cached contexts plus its decoded
      // tokens at the saturated iteration time per sequence (EstimateInstance). The cost model
      // bounds that per token (DecodeGpuSecondsLowerBound, concave in the context) at each
      // request's mean context less the half token the estimate may round away.
      double sum = 0;
      for (int r = 0; r < n_; ++r) {
        const RequestCost& c = costs.at(static_cast<int>(k), r);
        const auto context = static_cast<int64_t>(std::max(0.0, c.held_context - 0.5));
        const double per_token =
            p.cost->DecodeGpuSecondsLowerBound(context, p.space->max_num_seqs) / tps_[k];
        sum += p.weight * (c.prefill_s + c.decode * per_token);
        bounds_[k * side + static_cast<size_t>(r) + 1] = sum;
      }
    }
  }

  /// Period of requests [j, i) on an instance of TP tps()[k]; 0 when j == i.
  double operator()(int k, int j, int i) const {
    const double value = values_[Index(k, j, i)];
    return value != kUnknown ? value : Evaluate(k, j, i);
  }
  /// The run as a candidate against `best`: operator()(k, j, i) when that is below `best`;
  /// otherwise it or a floor of it at least `best`, the run's saturated period (PeriodFloor, a
  /// small part of an estimate's cost, remembered).
  double Candidate(int k, int j, int i, double best) const {
    const double value = values_[Index(k, j, i)];
    return value != kUnknown ? value : FloorOrEstimate(k, j, i, best);
  }
  /// At most operator()(k, j, i), and non-decreasing as j falls with i fixed.
  double LowerBound(int k, int j, int i) const {
    const size_t row = static_cast<size_t>(k) * static_cast<size_t>(n_ + 1);
    const double upto = bounds_[row + static_cast<size_t>(i)];
    // The sums round differently from the estimate's: a margin far above their rounding.
    return (upto - bounds_[row + static_cast<size_t>(j)]) * (1 - 1e-9) - upto * 1e-12;
  }
  const std::vector<int>& tps() const { return tps_; }
  int KOf(int tp) const {
    const auto it = std::lower_bound(tps_.begin(), tps_.end(), tp);
    LIBRA_CHECK(it != tps_.end() && *it == tp) << "no segments for TP " << tp;
    return static_cast<int>(it - tps_.begin());
  }
  int n() const { return n_; }

 private:
  static constexpr double kUnknown = -1;
  /// The load of requests [start, end) of one start, as far as it has grown.
  struct Run {
    RolloutLoad load;
    int end = 0;
  };

  /// Candidate when the value is not known yet.
  [[gnu::noinline]] double FloorOrEstimate(int k, int j, int i, double best) const {
    if (j == i) return Evaluate(k, j, i);
    double& floor = floors_[Index(k, j, i)];
    if (floor == kUnknown) {
      ++trace_->segment_evaluations;
      floor = holds_[static_cast<size_t>(k)]
                  ? PeriodFloor(*p_.cost, settings_[static_cast<size_t>(k)], Grow(k, j, i))
                  : kInf;
    }
    return floor >= best ? floor : Evaluate(k, j, i);
  }
  /// operator() when the value is not known yet: computed and kept.
  [[gnu::noinline]] double Evaluate(int k, int j, int i) const {
    double& value = values_[Index(k, j, i)];
    if (j == i) return value = 0;
    // A run counts once, when first asked for, whether its floor or its estimate came first.
    if (floors_[Index(k, j, i)] == kUnknown) ++trace_->segment_evaluations;
    ++trace_->segment_estimates;
    return value =
               holds_[static_cast<size_t>(k)]
                   ? EstimateInstance(*p_.cost, settings_[static_cast<size_t>(k)], Grow(k, j, i))
                         .period_s
                   : kInf;
  }
  /// The load of requests [j, i) of TP tps()[k].
  const RolloutLoad& Grow(int k, int j, int i) const {
    Run& run = runs_[static_cast<size_t>(k) * static_cast<size_t>(n_ + 1) + static_cast<size_t>(j)];
    if (run.end > i) run = Run{RolloutLoad{}, j};  // asked for a shorter run than it has grown
    while (run.end < i) run.load.Add(costs_.at(k, run.end++), p_.weight);
    return run.load;
  }

  // By end, then start: the DP reads the runs ending at i one after another.
  size_t Index(int k, int j, int i) const {
    const size_t side = static_cast<size_t>(n_ + 1);
    return (static_cast<size_t>(k) * side + static_cast<size_t>(i)) * side + static_cast<size_t>(j);
  }

  const Problem& p_;
  const SampleCosts& costs_;
  std::vector<int> tps_;
  int n_;
  SearchTrace* trace_;
  std::vector<bool> holds_;
  std::vector<InstanceSetting> settings_;
  std::vector<double> bounds_;  // per TP, prefix sums of each request's share of LowerBound
  mutable std::vector<double> values_;
  mutable std::vector<double> floors_;  // the runs' saturated periods, kUnknown until asked
  mutable std::vector<Run> runs_;
};

/// Algorithm 1's rollout DP over free layouts: for every GPU count up to `max_gpus`, largest TP
/// and prefix of the sorted sample, the fastest makespan and the instance that ends it. Rows of
/// GPUs past the largest TP depend only on the rows one TP size back, so once `period_` (the
/// largest TP) rows in a row equal the rows a period before, every later row repeats them: the
/// extra GPUs only add empty instances. The DP stops there and reads later rows from that
/// period (Row); at 8,192 GPUs and 64 requests that is after a few hundred of 8,192 rows.
class RolloutDp {
 public:
  RolloutDp(const SegmentTable& seg, int max_gpus, int64_t* cells)
      : seg_(seg),
        kinds_(static_cast<int>(seg.tps().size())),
        gpus_(max_gpus),
        n_(seg.n()),
        period_(*std::max_element(seg.tps().begin(), seg.tps().end())),
        window_(period_ + 1),
        repeats_from_(max_gpus) {
    const size_t ring =
        static_cast<size_t>(kinds_) * static_cast<size_t>(window_) * static_cast<size_t>(n_ + 1);
    e_.assign(ring, kInf);
    l_.assign(ring, kInf);
    value_.assign(Cell(kinds_, 0), kInf);
    int repeated = 0;  // rows in a row equal to the row a period before
    for (int g = 1; g <= gpus_; ++g) {
      ComputeRow(g, cells);
      repeated = g > 2 * period_ && RowRepeats(g) ? repeated + 1 : 0;
      if (repeated == period_) {
        repeats_from_ = g;
        break;
      }
    }
    BuildJumps();
  }

  /// The fastest makespan with `gpus` GPUs and largest TP exactly tps[m] for all requests.
  double Value(int m, int gpus) const { return value_[Cell(m, Row(gpus))]; }

  /// That layout's instances. REQUIRES: Value(m, gpus) is finite. On ties the DP keeps the shortest
  /// run, an instance with no requests, so a budget far larger than the sample needs starts its
  /// layout with thousands of empty instances: they are passed in one jump (BuildJumps).
  TpCounts Counts(int m, int gpus) const {
    const Jump& top = jumps_[Cell(m, gpus)];
    const int* passed = JumpCounts(m, gpus);
    std::vector<int> count(passed, passed + kinds_);
    m = top.m;
    int g = top.g;
    int i = n_;
    bool exact = !top.end;
    while (true) {
      if (!exact) {
        if (g == 0) break;
        m = l_kind_[At(m, Row(g), i)];
        exact = true;
      }
      const size_t at = At(m, Row(g), i);
      const int k = e_kind_[at];
      LIBRA_CHECK(k >= 0) << "no layout for " << g << " GPUs";
      ++count[static_cast<size_t>(k)];
      g -= seg_.tps()[static_cast<size_t>(k)];
      i -= e_segment_[at];
      if (k == m) exact = false;
    }
    LIBRA_CHECK(i == 0) << "layout leaves requests unassigned";
    TpCounts layout;
    for (int k = kinds_; k-- > 0;) {
      const int c = count[static_cast<size_t>(k)];
      if (c > 0) layout.push_back({seg_.tps()[static_cast<size_t>(k)], c});
    }
    return layout;
  }

 private:
  /// Row g: the best over the last instance's kind and run (its TP's row back in e_ or l_).
  void ComputeRow(int g, int64_t* cells) {
    const std::vector<int>& tps = seg_.tps();
    e_kind_.resize(At(0, g + 1, 0), -1);
    e_segment_.resize(e_kind_.size(), -1);
    l_kind_.resize(e_kind_.size(), -1);
    std::vector<int> slot_back(tps.size());  // the ring slot of g - tps[k]
    for (size_t k = 0; k < tps.size(); ++k) slot_back[k] = std::max(0, g - tps[k]) % window_;
    const int slot = g % window_;
    for (int m = 0; m < kinds_; ++m) {
      for (int i = 0; i <= n_; ++i) {
        double best = kInf;
        int best_kind = -1;
        int best_segment = -1;
        // Larger last instance first, then its shorter segment; the first of equals stays.
        for (int k = m; k >= 0; --k) {
          const int tp = tps[static_cast<size_t>(k)];
          if (tp > g) continue;
          // Row g - tp of e (another kind last) or l (this one again; none left at 0 GPUs).
          const double* back = k == m ? (g == tp ? nullptr : &l_[Ring(m, slot_back[k], 0)])
                                      : &e_[Ring(m, slot_back[k], 0)];
          for (int c = 0; c <= i; ++c) {
            const double prev = back != nullptr ? back[i - c] : i == c ? 0.0 : kInf;
            if (prev >= best) continue;
            // Longer runs only bound higher, and `best` only falls.
            if (seg_.LowerBound(k, i - c, i) >= best) break;
            const double v = std::max(prev, seg_.Candidate(k, i - c, i, best));
            if (v < best) {
              best = v;
              best_kind = k;
              best_segment = c;
            }
          }
        }
        const size_t at = At(m, g, i);
        const size_t here = Ring(m, slot, i);
        e_[here] = best;
        if (i == n_) value_[Cell(m, g)] = best;
        e_kind_[at] = static_cast<int8_t>(best_kind);
        e_segment_[at] = static_cast<int16_t>(best_segment);
        // Ties keep the smaller largest TP.
        if (m == 0 || best < l_[Ring(m - 1, slot, i)]) {
          l_[here] = best;
          l_kind_[at] = static_cast<int8_t>(m);
        } else {
          l_[here] = l_[Ring(m - 1, slot, i)];
          l_kind_[at] = l_kind_[At(m - 1, g, i)];
        }
        ++*cells;
      }
    }
  }
  /// Whether row g's values equal those of row g - period_ (both still in the ring).
  bool RowRepeats(int g) const {
    const int now = g % window_;
    const int before = (g - period_) % window_;
    for (int m = 0; m < kinds_; ++m) {
      if (!std::equal(&e_[Ring(m, now, 0)], &e_[Ring(m, now, n_)] + 1, &e_[Ring(m, before, 0)]) ||
          !std::equal(&l_[Ring(m, now, 0)], &l_[Ring(m, now, n_)] + 1, &l_[Ring(m, before, 0)])) {
        return false;
      }
    }
    return true;
  }
  /// The computed row that row g repeats: g itself up to repeats_from_, then the row a whole
  /// number of periods back in the last period computed.
  int Row(int g) const {
    if (g <= repeats_from_) return g;
    const int periods = (g - repeats_from_ + period_ - 1) / period_;
    return g - periods * period_;
  }
  /// Rows of GPUs first, so the DP's arrays grow a row at a time.
  size_t At(int m, int g, int i) const {
    return (static_cast<size_t>(g) * static_cast<size_t>(kinds_) + static_cast<size_t>(m)) *
               static_cast<size_t>(n_ + 1) +
           static_cast<size_t>(i);
  }
  /// e_ and l_ keep only the last window_ rows of GPUs, which is all the DP reads back.
  size_t Ring(int m, int slot, int i) const {
    return (static_cast<size_t>(m) * static_cast<size_t>(window_) + static_cast<size_t>(slot)) *
               static_cast<size_t>(n_ + 1) +
           static_cast<size_t>(i);
  }

  /// From the exact state (m, g) with every request left: past the empty instances that the
  /// layout takes first, to the state where it takes its first non-empty one, or to the end.
  struct Jump {
    int m = 0;
    int g = 0;
    bool end = false;
  };
  size_t Cell(int m, int g) const {
    return static_cast<size_t>(m) * static_cast<size_t>(gpus_ + 1) + static_cast<size_t>(g);
  }
  const int* JumpCounts(int m, int g) const {
    return &jump_count_[Cell(m, g) * static_cast<size_t>(kinds_)];
  }
  /// Jumps for every state of the top row, by GPUs ascending (a jump ends in one of fewer GPUs).
  void BuildJumps() {
    jumps_.resize(Cell(kinds_, 0));
    jump_count_.assign(jumps_.size() * static_cast<size_t>(kinds_), 0);
    for (int g = 0; g <= gpus_; ++g) {
      for (int m = 0; m < kinds_; ++m) {
        Jump& jump = jumps_[Cell(m, g)];
        jump = {m, g, false};
        const size_t at = At(m, Row(g), n_);
        const int k = e_kind_[at];
        if (g == 0 || k < 0 || e_segment_[at] != 0) continue;
        // An empty instance of kind k, then the state Tps would step to.
        int next_m = m;
        const int next_g = g - seg_.tps()[static_cast<size_t>(k)];
        if (k == m) {
          if (next_g == 0) {
            jump = {m, 0, true};
            jump_count_[Cell(m, g) * static_cast<size_t>(kinds_) + static_cast<size_t>(k)] = 1;
            continue;
          }
          next_m = l_kind_[At(m, Row(next_g), n_)];
        }
        jump = jumps_[Cell(next_m, next_g)];
        int* counts = &jump_count_[Cell(m, g) * static_cast<size_t>(kinds_)];
        std::copy_n(JumpCounts(next_m, next_g), kinds_, counts);
        ++counts[k];
      }
    }
  }

  const SegmentTable& seg_;
  int kinds_;
  int gpus_;
  int n_;
  std::vector<Jump> jumps_;      // by Cell(m, g)
  std::vector<int> jump_count_;  // empty instances of each kind a jump passes
  int period_;                   // the largest TP: how far back a row reads
  int window_;                   // rows of GPUs e_ and l_ keep: one more than the largest TP
  int repeats_from_;             // the last row computed; later rows repeat the last period
  std::vector<double> value_;    // e at every request, by Cell(m, g) of the rows computed
  std::vector<double> e_;
  std::vector<double> l_;
  std::vector<int8_t> e_kind_;
  std::vector<int16_t> e_segment_;
  std::vector<int8_t> l_kind_;
};

// ---- The exhaustive rollout enumeration --------------------------------------------------------

/// Every sequence of instances of the table's sizes summing to the GPUs, every split of the
// ---- The exhaustive rollout enumeration --------------------------------------------------------

/// Every sequence of instances of the table's sizes summing to the GPUs, every split of the
/// requests into contiguous (possibly empty) runs; the fastest per largest TP (first found wins
/// ties).
class RolloutEnumeration {
 public:
  explicit RolloutEnumeration(const SegmentTable& seg)
      : seg_(seg), best_(seg.tps().size(), kInf), best_layout_(seg.tps().size()) {}

  void Free(int gpus) { Sequences(gpus, 0, 0.0); }

  double best(int m) const { return best_[static_cast<size_t>(m)]; }
  /// The fastest layout with largest TP tps()[m], its instances with their runs.
  const std::vector<Segment>& layout(int m) const { return best_layout_[static_cast<size_t>(m)]; }

 private:
  void Record(double makespan) {
    int m = 0;
    for (const Segment& s : sequence_) m = std::max(m, seg_.KOf(s.tp));
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
      if (tp == gpus_left) {
        sequence_.push_back({tp, done, n});  // the last instance takes the rest
        Record(std::max(slowest, seg_(k, done, n)));
        sequence_.pop_back();
        continue;
      }
      for (int c = 0; c <= n - done; ++c) {
        sequence_.push_back({tp, done, done + c});
        Sequences(gpus_left - tp, done + c, std::max(slowest, seg_(k, done, done + c)));
        sequence_.pop_back();
      }
    }
  }

  const SegmentTable& seg_;
  std::vector<double> best_;
  std::vector<std::vector<Segment>> best_layout_;
  std::vector<Segment> sequence_;
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

// ---- Training ----------------------------------------------------------------------------------

/// Why a training layout is out of the space, or "" when it is in, given the filters of
/// Algorithm 1 in its order (the exhaustive mode applies them leaf by leaf).
std::string LeafFilter(Problem& p, int budget, int tp, int pp, int micro) {
  const SearchSpace& s = *p.space;
  if (budget % tp != 0 || tp > s.gpus_per_node || s.gpus_per_node % tp != 0) return "tp_divides";
  if (p.TpCommRatio(tp) > s.max_tp_comm_ratio) return "tp_comm_ratio";
  if (budget % (tp * pp) != 0 || p.cost->arch().layers % pp != 0) return "pp_divides";
  const int dp = budget / (tp * pp);
  const int batch = p.shape->batch_trajectories;
  if (dp * micro > batch) return "batch_divides";
  const int n_micro = (batch + dp * micro - 1) / (dp * micro);
  if (static_cast<double>(pp - 1) / (pp + n_micro - 1) > s.max_bubble) return "bubble";
  return "";
}

/// A rollout layout of one budget: the fastest with a given largest TP (layout.front()), its
/// instances pooled by size, and its period (unscaled) with nothing outside.
struct RolloutOption {
  double makespan = 0;
  TpCounts layout;
  std::vector<KindShare> kinds;
};

/// The rollout side of one budget, and why it has no option when it has none.
struct RolloutSide {
  std::vector<RolloutOption> options;
  std::map<std::string, int> pruned;
};

/// A budget's best plan so far and the rollout option it takes. The plan's instance list
/// (thousands of instances at scale) is written once, when the budget is done (Expanded).
struct BudgetBest {
  std::optional<CandidatePlan> plan;
  const RolloutOption* option = nullptr;  // of the RolloutSide searched; set with `plan`

  /// The plan (moved out), its instance list written.
  std::optional<CandidatePlan> Expanded() {
    if (plan) plan->rollout_tps = Expand(option->layout);
    return std::move(plan);
  }
};

void Count(std::map<std::string, int>& local, const std::string& reason, int times = 1) {
  local[reason] += times;
}

/// TP sizes of the segments.
TpCounts TpsOf(const std::vector<Segment>& segments) {
  std::vector<int> tps;
  for (const Segment& s : segments) tps.push_back(s.tp);
  std::sort(tps.begin(), tps.end(), std::greater<>());
  return CountsOf(tps);
}

/// Keeps the options that pack; counts the others.
void AddPackable(RolloutSide& side, RolloutOption option, const std::vector<BinRun>& bins) {
  if (FirstFitDecreasing(option.layout, bins)) {
    side.options.push_back(std::move(option));
  } else {
    Count(side.pruned, "rollout_unpackable");
  }
}

/// Role switches of a time-shared step: every GPU leaves rollout for training and comes back.
double SwitchSeconds(const Problem& p, const model::TrainLayout& layout, int rollout_tp) {
  return p.cost->RoleSwitchTime({model::SwitchDirection::kRolloutToTrain, rollout_tp, layout}) +
         p.cost->RoleSwitchTime({model::SwitchDirection::kTrainToRollout, rollout_tp, layout});
}

/// Offers `option` against the budget's best so far (first of equals stays).
void Offer(const Problem& p, const model::TrainLayout& layout, double train_s,
           const RolloutOption& option, bool colocated, BudgetBest& best) {
  const PipelineShape& shape = *p.shape;
  CandidatePlan plan;
  plan.train = layout;
  plan.colocated = colocated;
  plan.rollout_s = option.makespan * shape.rollout_scale;
  const int max_tp = option.layout.front().tp;
  plan.train_s = train_s + (colocated ? SwitchSeconds(p, layout, max_tp) : 0);
  plan.sync_s = p.cost->WeightSyncTime({shape.sync_path, layout, max_tp, !colocated}) /
                std::max(1, shape.sync_interval);
  plan.step_s = PlanStep(p, option.kinds, plan.rollout_s, plan.train_s, plan.sync_s, colocated,
                         shape.rollout_scale, &plan.paced_occupancy);
  if (best.plan && !(plan.step_s < best.plan->step_s)) return;
  best.plan = std::move(plan);
  best.option = &option;
}

/// `plan` (asynchronous, disaggregated) with the trainer's GPUs rolling out while it waits for
/// its batch, as instances of the plan's largest TP (the elastic hybrid pool as a planned layout).
/// Per step the lent GPUs switch to rollout (a role switch), serve turns until the batch is
/// ready, finish the turns they hold (half a turn at their decode speed, on average) and switch
/// back before the trainer starts. The lent GPUs take a share of the turns that follow tool calls
/// (the first turns go out at launch, before they join), in proportion to GPU-time; the rollout
/// side carries the rest, and its batches wait for that drain and the switch back too. The
/// period: the smallest P with P >= the trainer's cycle and >= the rollout side's period with
/// its share at P (bisection: a longer period lends longer). nullopt when the pipeline cannot lend
/// (synchronous, time-shared, instances that do not pack) or when the lent step is not below
/// `beat` (kInf: always lend), found out from the rollout side at P = `beat` before bisecting.
/// `scale` is the rollout side's (PlanStep).
std::optional<CandidatePlan> LendTrainer(const Problem& p, const CandidatePlan& plan,
                                         const std::vector<KindShare>& kinds, double beat,
                                         double scale) {
  const PipelineShape& shape = *p.shape;
  if (plan.colocated || shape.staleness <= 0 || kinds.empty()) return std::nullopt;
  const int tp = plan.rollout_tps.front();
  const int gpn = p.space->gpus_per_node;
  const int lent = plan.train_gpus();
  if (!InstancesPack(gpn, plan.rollout_gpus(), lent, {tp})) return std::nullopt;
  const double in =
      p.cost->RoleSwitchTime({model::SwitchDirection::kTrainToRollout, tp, plan.train});
  const double out =
      p.cost->RoleSwitchTime({model::SwitchDirection::kRolloutToTrain, tp, plan.train});
  double turns = 0;
  double decode = 0;
  double trajectories = 0;
  double held = 0;
  double iteration = 0;  // the loaded iteration of the largest instances
  for (const KindShare& k : kinds) {
    turns += k.load.calls + k.load.trajectories;
    decode += k.load.decode;
    trajectories += k.load.trajectories;
    held += k.load.held_context;
    if (k.tp == tp) {
      iteration = EstimateInstance(*p.cost, p.Setting(tp, 0, 0, Instances(kinds)),
                                   k.load.Share(1.0 / k.count))
                      .iteration_s;
    }
  }
  // Lent instances join after the step's batches were launched, so they only get the turns
  // routed while they serve: a trajectory's first turn goes out at its launch, its later turns
  // (after each tool call) to whichever instance the router picks then. A single-turn workload
  // lends nothing.
  const double continued = turns > 0 ? (turns - trajectories) / turns : 0;
  // The reclaim waits for the longest turn running on a lent instance (about twice a mean turn),
  // and the trajectories that were there build their contexts again elsewhere.
  const double drain = continued > 0 ? 2 * decode / turns * iteration : 0;
  const double moved_prefill =
      trajectories > 0
          ? p.cost->PrefillTime(tp, std::max<int64_t>(1, std::llround(held / trajectories)), 0)
          : 0;
  const double rollout_gpus = plan.rollout_gpus();
  // The rollout side's period when a step of `at` s lends the trainer all but `outside` of it.
  auto needs = [&](double outside, double at) {
    const double lent_s = std::max(0.0, at - outside - in);
    const double share = 1 - continued * lent * lent_s / (rollout_gpus * at + lent * lent_s);
    std::vector<KindShare> scaled = kinds;
    for (KindShare& k : scaled) {
      const double moved = k.load.trajectories * (1 - share);
      k.load = k.load.Share(share);
      k.load.prefill_s += moved * moved_prefill;
    }
    return std::max(outside, scale * Period(p, scaled, outside / scale));
  };
  const double cycle = plan.train_s + plan.sync_s;
  // A step below `beat` needs a rollout side that keeps up at `beat` (a longer step lends longer).
  if (beat < kInf && needs(drain + out + cycle, beat) > beat) return std::nullopt;
  // The step at a given trainer cycle (train + sync, 0 for rollout alone).
  auto period = [&](double trainer_s) {
    const double outside = drain + out + trainer_s;
    double lo = outside;
    double hi = needs(outside, lo);
    if (hi <= lo) return lo;
    for (int k = 0; k < 40 && hi - lo > 1e-6 * hi; ++k) {
      const double mid = (lo + hi) / 2;
      if (needs(outside, mid) <= mid) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi;
  };
  CandidatePlan lending = plan;
  lending.lend_trainer = true;
  lending.paced_occupancy = 0;
  lending.train_s = plan.train_s + out;
  // When the trainer's wait is too short for the drain and the switches, the lent GPUs barely
  // serve: the step is at worst the plan's own, plus the switch back that every reclaim costs.
  lending.step_s = std::min(period(cycle), plan.step_s + out);
  if (beat < kInf && !(lending.step_s < beat)) return std::nullopt;
  lending.rollout_s = std::min(period(0), plan.rollout_s + out);
  return lending;
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
          bool colocated, std::map<std::string, int>& pruned, BudgetBest& best) {
  const PipelineShape& shape = *p.shape;
  const model::TrainLayout layout{tp, pp, budget / (tp * pp), micro};
  // Most layouts that do not fit are known before the batch is packed onto their ranks.
  if (p.train->SurelyOutOfMemory(layout)) {
    Count(pruned, "oom");
    return;
  }
  const model::TrainEstimate e = p.train->TrainStep(layout);
  if (e.oom() || p.OutOfMemory(layout)) {
    Count(pruned, "oom");
    return;
  }
  const double train_s = e.step_s * shape.train_scale;
  if (bound && best.plan) {
    double fastest_rollout = kInf;
    for (const RolloutOption& o : side.options) {
      fastest_rollout = std::min(fastest_rollout, o.makespan * shape.rollout_scale);
    }
    // Exact: the step is at least this with any rollout option, any sync and switch (>= 0).
    // (Asynchronous, the rollout side alone can be slower than the pipeline: with every allowed
    // batch in flight it may thrash its KV cache where the trainer's pace would not.)
    const double lower = colocated || shape.staleness <= 0 ? fastest_rollout + train_s : train_s;
    if (lower >= best.plan->step_s) {
      Count(pruned, "bound");
      return;
    }
  }
  for (const RolloutOption& o : side.options) Offer(p, layout, train_s, o, colocated, best);
}

/// Algorithm 1's training tree of one budget: TP nodes, PP nodes, micro-batch leaves, each
/// pruned as soon as a filter fails.
BudgetBest TrainingTree(Problem& p, int budget, const RolloutSide& side, bool colocated,
                        std::map<std::string, int>& pruned, int& nodes) {
  const SearchSpace& space = *p.space;
  const int batch = p.shape->batch_trajectories;
  BudgetBest best;
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
        // Every DP rank needs a micro-batch; ranks may get uneven shares (TrainStep counts the
        // imbalance), as RL trainers' batches rarely divide evenly.
        if (dp * micro > batch) {
          Count(pruned, "batch_divides");
          continue;
        }
        const int n_micro = (batch + dp * micro - 1) / (dp * micro);
        if (static_cast<double>(pp - 1) / (pp + n_micro - 1) > space.max_bubble) {
          Count(pruned, "bubble");
          continue;
        }
        Leaf(p, budget, tp, pp, micro, side, /*bound=*/true, colocated, pruned, best);
      }
    }
  }
  return best;
}

/// The exhaustive mode's training side: every (TP, PP, micro-batch) leaf, filtered one by one.
BudgetBest EveryLeaf(Problem& p, int budget, const RolloutSide& side, bool colocated,
                     std::map<std::string, int>& pruned, int& nodes) {
  BudgetBest best;
  for (int tp : p.train_tps) {
    for (int pp : p.train_pps) {
      for (int micro : p.micro_batches) {
        ++nodes;
        const std::string reason = LeafFilter(p, budget, tp, pp, micro);
        if (!reason.empty()) {
          Count(pruned, reason);
          continue;
        }
        Leaf(p, budget, tp, pp, micro, side, /*bound=*/false, colocated, pruned, best);
      }
    }
  }
  return best;
}

/// Seconds a token of one sequence decoding alone on an instance of the largest rollout TP, at the
/// history's mean context: a trajectory's own pace, which SampleHistory ranks latencies by (0
/// when there is no TP or no history).
double LonePace(const model::CostModel& cost, const SearchSpace& space,
                std::span<const RequestSample> history) {
  const std::vector<int> tps = AllowedRolloutTps(space);
  if (tps.empty() || history.empty()) return 0;
  double context = 0;
  for (const RequestSample& r : history) {
    context += static_cast<double>(r.prompt_tokens) +
               static_cast<double>(r.generated_tokens + r.tool_tokens) / 2;
  }
  model::IterationLoad load;
  load.decode_sequences = 1;
  load.decode_context_tokens = std::llround(context / static_cast<double>(history.size()));
  return cost.IterationTime(tps.back(), load);
}

/// The sample, the tool latencies and the longest context of a history, for `space` and `shape`.
Problem MakeProblem(const model::CostModel& cost, const SearchSpace& space,
                    const PipelineShape& shape, std::span<const RequestSample> history) {
  Problem p;
  p.cost = &cost;
  p.space = &space;
  p.shape = &shape;
  p.sample = SampleHistory(history, space.max_requests, shape.batch_trajectories,
                           LonePace(cost, space, history));
  p.weight = static_cast<double>(shape.batch_trajectories) / static_cast<double>(p.sample.size());
  std::vector<int64_t> batch = TrainBatch(p.sample, shape.batch_trajectories);
  if (!p.sample.empty()) {
    const int64_t longest = std::max(shape.max_sequence_tokens, p.sample.back().total());
    if (shape.max_sequence_tokens > p.sample.back().total()) {
      std::vector<int64_t> longest_batch = batch;
      longest_batch.front() = longest;
      p.train_longest = cost.ForTrainBatch(shape.passes, std::move(longest_batch));
    }
    p.train_all_longest =
        cost.ForTrainBatch(shape.passes, std::vector<int64_t>(batch.size(), longest));
  }
  p.train = cost.ForTrainBatch(shape.passes, std::move(batch));
  p.train_tps = SortedUnique(space.train_tps);
  p.train_pps = SortedUnique(space.train_pps);
  p.micro_batches = SortedUnique(space.micro_batches);
  p.tools = shape.tool_latencies.get();
  p.longest = shape.max_sequence_tokens;
  for (const RequestSample& r : history) p.longest = std::max(p.longest, r.total());
  return p;
}

// ---- The search ---------------------------------------------------------------------------------

/// The rollout layouts of space.node_pattern per training budget (empty where the pattern cannot
/// fill the budget's remainder); `segment_tps` gets every instance size they use, sorted.
std::map<int, std::vector<int>> PatternLayouts(const SearchSpace& space,
                                               const std::vector<int>& budgets,
                                               std::vector<int>* segment_tps) {
  const int gpn = space.gpus_per_node;
  const int total = space.nodes * gpn;
  std::map<int, std::vector<int>> layouts;
  segment_tps->clear();
  for (int budget : budgets) {
    auto packed = PackInstances(gpn, budget, total - budget, space.node_pattern);
    std::vector<int> tps;
    if (packed.ok()) {
      for (const backend::InstanceSpec& i : *packed) tps.push_back(i.tp);
    }
    segment_tps->insert(segment_tps->end(), tps.begin(), tps.end());
    layouts[budget] = std::move(tps);
  }
  *segment_tps = SortedUnique(std::move(*segment_tps));
  return layouts;
}

/// Refuses an exhaustive search too large to finish: it is for cross-checks on small cases.
Status CheckExhaustiveSize(const SearchSpace& space, const std::vector<int>& budgets,
                           const std::vector<int>& rollout_tps, bool time_shared, int n) {
  const int total = space.nodes * space.gpus_per_node;
  if (total > kExhaustiveMaxGpus || n > kExhaustiveMaxRequests) {
    return Status::InvalidArgument(StrFormat(
        "the exhaustive search is for cross-checks of at most %d GPUs and %d sampled requests "
        "(this is %d GPUs and %d requests); use the tree-DP search",
        kExhaustiveMaxGpus, kExhaustiveMaxRequests, total, n));
  }
  double enumerations = 0;
  if (space.node_pattern.empty()) {
    for (int budget : budgets) enumerations += FreeEnumerations(rollout_tps, total - budget, n);
    if (time_shared) enumerations += FreeEnumerations(rollout_tps, total, n);
  }
  if (enumerations > kExhaustiveMaxEnumerations) {
    return Status::InvalidArgument(StrFormat(
        "the exhaustive search would enumerate %.3g rollout layouts x request splits (at most "
        "%.3g); use the tree-DP search or fewer GPUs or requests",
        enumerations, kExhaustiveMaxEnumerations));
  }
  return Status();
}

/// composable[g]: whether sizes of `tps` sum to g, for g in [0, max].
std::vector<bool> Composable(const std::vector<int>& tps, int max) {
  std::vector<bool> composable(static_cast<size_t>(max + 1), false);
  composable[0] = true;
  for (int g = 1; g <= max; ++g) {
    for (int tp : tps) {
      if (tp <= g && composable[static_cast<size_t>(g - tp)])
        composable[static_cast<size_t>(g)] = true;
    }
  }
  return composable;
}

/// One search's working state: each training budget's rollout options, then its best plan against
/// them, appended to the result (its trace counts the work).
class BudgetSearch {
 public:
  BudgetSearch(const SearchSpace& space, SearchMode mode, Problem& p, const SampleCosts& costs,
               const SegmentTable& seg, std::vector<int> rollout_tps,
               std::map<int, std::vector<int>> pattern_layouts, int max_rollout,
               SearchResult& result)
      : space_(space),
        mode_(mode),
        p_(p),
        costs_(costs),
        seg_(seg),
        total_(space.nodes * space.gpus_per_node),
        rollout_tps_(std::move(rollout_tps)),
        pattern_layouts_(std::move(pattern_layouts)),
        result_(result) {
    if (!space.node_pattern.empty()) return;
    composable_ = Composable(rollout_tps_, max_rollout);
    // Once, up to the largest rollout budget; every budget reads its row.
    if (mode == SearchMode::kTreeDp) dp_.emplace(seg, max_rollout, &result.trace.dp_cells);
  }

  /// The best plan training on `budget` GPUs (all of them time-shared when `colocated`).
  void PlanBudget(int budget, bool colocated) {
    SearchTrace& trace = result_.trace;
    const RolloutSide side = !space_.node_pattern.empty() ? PatternSide(budget)
                             : colocated                  ? FreeSide(total_, 0)
                                                          : FreeSide(total_ - budget, budget);
    std::map<std::string, int> pruned = side.pruned;
    BudgetBest found;
    if (!side.options.empty()) {
      found = mode_ == SearchMode::kTreeDp
                  ? TrainingTree(p_, budget, side, colocated, pruned, trace.train_nodes)
                  : EveryLeaf(p_, budget, side, colocated, pruned, trace.train_nodes);
    }
    const RolloutOption* option = found.option;
    std::optional<CandidatePlan> best = found.Expanded();
    if (best && space_.hybrid) best = BestLent(*best, *option, side);
    for (const auto& [reason, count] : pruned) trace.pruned[reason] += count;
    const std::string what = colocated
                                 ? StrFormat("time-shared %d", total_)
                                 : StrFormat("train %d + rollout %d", budget, total_ - budget);
    if (best) {
      trace.lines.push_back(StrFormat("%s: %s", what.c_str(), best->ToString().c_str()));
      result_.top.push_back(std::move(*best));
    } else {
      trace.lines.push_back(
          StrFormat("%s: no plan (%s)", what.c_str(), PrunedString(pruned).c_str()));
    }
  }

 private:
  /// `plan` (the budget's best, taking `chosen`), or a rollout option of `side` with the trainer's
  /// GPUs lent while it waits when that makes the step shorter. Lending changes which option is
  /// fastest: the trainer's GPUs join as instances of the option's largest TP and take over part
  /// of the turns, so an option too small to keep up alone may be the best one lent. Each option
  /// is tried with the plan's training layout; `chosen` first, then the first of equals stays.
  CandidatePlan BestLent(const CandidatePlan& plan, const RolloutOption& chosen,
                         const RolloutSide& side) {
    CandidatePlan kept = plan;
    if (plan.colocated) return kept;  // nothing waits to lend
    const double scale = p_.shape->rollout_scale;
    if (std::optional<CandidatePlan> lent = LendTrainer(p_, plan, chosen.kinds, plan.step_s, scale))
      kept = std::move(*lent);
    for (const RolloutOption& option : side.options) {
      if (&option == &chosen) continue;
      BudgetBest alone;
      Offer(p_, plan.train, plan.train_s, option, /*colocated=*/false, alone);
      std::optional<CandidatePlan> lent =
          LendTrainer(p_, *alone.Expanded(), option.kinds, kept.step_s, scale);
      if (lent) kept = std::move(*lent);
    }
    return kept;
  }

  /// The one rollout layout node_pattern gives `budget`.
  RolloutSide PatternSide(int budget) {
    RolloutSide side;
    const std::vector<int>& tps = pattern_layouts_[budget];
    if (tps.empty()) {
      Count(side.pruned, "no_rollout_layout");
      return side;
    }
    std::vector<int> sorted = tps;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    TpCounts layout = CountsOf(sorted);
    // Layouts with the same instances have the same rollout.
    auto it = shared_memo_.find(layout);
    if (it == shared_memo_.end()) {
      std::vector<KindShare> kinds = MixedShares(costs_, layout);
      const double period = Period(p_, kinds, 0);
      it = shared_memo_.emplace(layout, std::make_pair(std::move(kinds), period)).first;
    }
    if (it->second.second == kInf) {
      Count(side.pruned, "rollout_oom");
      return side;
    }
    side.options.push_back({it->second.second, std::move(layout), it->second.first});
    return side;
  }

  /// Free layouts of `rollout` GPUs from GPU `first_gpu` on: Algorithm 1's fastest layout per
  /// largest TP, and every homogeneous layout; each timed as the router fills it (MixedShares).
  RolloutSide FreeSide(int rollout, int first_gpu) {
    RolloutSide side;
    if (!composable_[static_cast<size_t>(rollout)]) {
      Count(side.pruned, "no_rollout_layout");
      return side;
    }
    std::optional<RolloutEnumeration> e;
    if (mode_ == SearchMode::kExhaustive) {
      e.emplace(seg_);
      e->Free(rollout);
    }
    const std::vector<BinRun> bins = RolloutBins(total_, space_.gpus_per_node, first_gpu);
    std::vector<TpCounts> layouts;
    for (int m = 0; m < static_cast<int>(rollout_tps_.size()); ++m) {
      const double fastest = dp_ ? dp_->Value(m, rollout) : e->best(m);
      if (fastest == kInf) continue;
      layouts.push_back(dp_ ? dp_->Counts(m, rollout) : TpsOf(e->layout(m)));
    }
    for (int tp : rollout_tps_) {
      if (rollout % tp == 0) layouts.push_back({{tp, rollout / tp}});
    }
    std::set<TpCounts> seen;
    for (TpCounts& layout : layouts) {
      if (!seen.insert(layout).second) continue;
      RolloutOption option;
      option.kinds = MixedShares(costs_, layout);
      option.makespan = Period(p_, option.kinds, 0);
      option.layout = std::move(layout);
      if (option.makespan == kInf) continue;
      AddPackable(side, std::move(option), bins);
    }
    if (side.options.empty() && side.pruned.empty()) Count(side.pruned, "rollout_oom");
    return side;
  }

  const SearchSpace& space_;
  const SearchMode mode_;
  Problem& p_;
  const SampleCosts& costs_;
  const SegmentTable& seg_;
  const int total_;
  const std::vector<int> rollout_tps_;  // allowed sizes of free layouts, ascending
  std::map<int, std::vector<int>> pattern_layouts_;
  std::vector<bool> composable_;  // free layouts only
  std::optional<RolloutDp> dp_;   // free layouts, tree-DP mode only
  std::map<TpCounts, std::pair<std::vector<KindShare>, double>> shared_memo_;
  SearchResult& result_;
};

}  // namespace

int CandidatePlan::rollout_gpus() const {
  return std::accumulate(rollout_tps.begin(), rollout_tps.end(), 0);
}

std::string CandidatePlan::ToString() const {
  return StrFormat(
      "train %s (%d GPUs%s) | rollout %s (%d GPUs%s) | rollout %.3f s, train %.3f s, "
      "sync %.3f s, step %.3f s",
      train.ToString().c_str(), train_gpus(), lend_trainer ? ", lent while waiting" : "",
      TpsString(rollout_tps).c_str(), rollout_gpus(), colocated ? ", time-shared" : "", rollout_s,
      train_s, sync_s, step_s);
}

void SortHistory(std::vector<RequestSample>& history) {
  std::stable_sort(history.begin(), history.end(), SampleOrder);
}

Result<SearchResult> Search(const model::CostModel& cost, const SearchSpace& space,
                            const PipelineShape& shape, std::span<const RequestSample> history,
                            SearchMode mode) {
  if (history.empty()) return Status::InvalidArgument("the length history is empty");
  LIBRA_RETURN_IF_ERROR(ValidateSpace(space, shape));
  const int total = space.nodes * space.gpus_per_node;
  LIBRA_ASSIGN_OR_RETURN(const std::vector<int> budgets, TrainingBudgets(space));
  // Allowed sizes of free layouts, ascending (unused with a node pattern).
  std::vector<int> rollout_tps = AllowedRolloutTps(space);
  Problem p = MakeProblem(cost, space, shape, history);
  const int n = static_cast<int>(p.sample.size());
  // The time-shared layout: every GPU rolls out and trains.
  const bool time_shared =
      space.time_shared && space.node_pattern.empty() && !space.fixed_train_gpus;
  std::vector<int> segment_tps = rollout_tps;
  std::map<int, std::vector<int>> pattern_layouts;
  if (!space.node_pattern.empty()) pattern_layouts = PatternLayouts(space, budgets, &segment_tps);
  if (mode == SearchMode::kExhaustive) {
    LIBRA_RETURN_IF_ERROR(CheckExhaustiveSize(space, budgets, rollout_tps, time_shared, n));
  }

  SearchResult result;
  SearchTrace& trace = result.trace;
  trace.budgets = static_cast<int>(budgets.size());
  const SampleCosts costs(cost, segment_tps, p.sample, p.weight);
  const SegmentTable seg(p, costs, space.node_pattern.empty(), &trace);
  const int max_rollout = time_shared ? total : total - budgets.front();
  BudgetSearch search(space, mode, p, costs, seg, std::move(rollout_tps),
                      std::move(pattern_layouts), max_rollout, result);
  for (int budget : budgets) search.PlanBudget(budget, false);
  if (time_shared) search.PlanBudget(total, true);
  RankPlans(result.top);
  if (!result.top.empty()) result.best = result.top.front();
  const std::string outcome =
      result.best ? "best: " + result.best->ToString() : std::string("no feasible plan");
  trace.lines.push_back(StrFormat(
      "%s: %d budgets%s, %d training-tree nodes, %lld DP cells, %lld segments; %d of %zu "
      "requests sampled, %.3g trajectories each; %s",
      mode == SearchMode::kTreeDp ? "Algorithm 1 (tree x DP)" : "exhaustive", trace.budgets,
      time_shared ? " and time-shared" : "", trace.train_nodes,
      static_cast<long long>(trace.dp_cells), static_cast<long long>(trace.segment_evaluations), n,
      history.size(), p.weight, outcome.c_str()));
  return result;
}

void RankPlans(std::vector<CandidatePlan>& top) {
  std::stable_sort(top.begin(), top.end(), [](const CandidatePlan& a, const CandidatePlan& b) {
    return std::make_pair(a.step_s, a.train_gpus()) < std::make_pair(b.step_s, b.train_gpus());
  });
}

Result<CandidatePlan> EvaluatePlan(const model::CostModel& cost, const SearchSpace& space,
                                   const PipelineShape& shape,
                                   std::span<const RequestSample> history,
                                   const model::TrainLayout& train, std::vector<int> rollout_tps,
                                   bool colocated, bool lend_trainer) {
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
  if (colocated ? (train.gpus() != total || rollout != total) : train.gpus() + rollout > total) {
    return Status::InvalidArgument(StrFormat(
        colocated ? "a time-shared plan trains (%d GPUs) and rolls out (%d) on all %d GPUs"
                  : "training (%d GPUs) and rollout (%d) exceed %d GPUs",
        train.gpus(), rollout, total));
  }
  const TpCounts layout = CountsOf(rollout_tps);
  if (!FirstFitDecreasing(layout, RolloutBins(total, gpn, colocated ? 0 : train.gpus()))) {
    return Status::InvalidArgument(
        StrFormat("rollout instances %s do not fit GPUs [%d, %d) without crossing a node",
                  TpsString(rollout_tps).c_str(), colocated ? 0 : train.gpus(), total));
  }
  Problem p = MakeProblem(cost, space, shape, history);
  const model::TrainEstimate e = p.train->TrainStep(train);
  if (e.oom() || p.OutOfMemory(train)) {
    return Status::InvalidArgument(
        StrFormat("training layout %s runs out of memory (%.1f GB per GPU of %.1f)",
                  train.ToString().c_str(), e.memory_bytes / 1e9, e.memory_limit_bytes / 1e9));
  }
  const SampleCosts costs(cost, SortedUnique(rollout_tps), p.sample, p.weight);
  RolloutOption option;
  option.kinds = MixedShares(costs, layout);
  const double period = Period(p, option.kinds, 0);
  if (period == kInf) {
    return Status::InvalidArgument(
        StrFormat("a request of %lld tokens fits the KV cache of no instance of %s",
                  static_cast<long long>(p.longest), TpsString(rollout_tps).c_str()));
  }
  option.makespan = period;
  option.layout = layout;
  BudgetBest found;
  Offer(p, train, e.step_s * shape.train_scale, option, colocated, found);
  std::optional<CandidatePlan> plan = found.Expanded();
  if (lend_trainer) {
    std::optional<CandidatePlan> lending =
        LendTrainer(p, *plan, option.kinds, kInf, shape.rollout_scale);
    if (!lending) {
      return Status::InvalidArgument(
          "the trainer's GPUs cannot be lent: the plan is synchronous or time-shared, or "
          "instances of its largest TP do not fit the training GPUs");
    }
    return *lending;
  }
  ApplyStream(p, option.kinds, *plan);
  return *plan;
}

}  // namespace libra::planner
