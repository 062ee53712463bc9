#include "planner/rollout_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace libra::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Whether ToolLatencies keeps a latency.
bool Kept(double latency) { return std::isfinite(latency) && latency >= 0; }

/// std::llround(x), without the library call, for the non-negative counts below 2^52 that the
/// estimates round (hundreds of thousands of times a search): there x - trunc(x) is exact, so the
/// value is the same.
int64_t RoundCount(double x) {
  if (!(x >= 0 && x < 0x1p52)) return std::llround(x);
  const auto whole = static_cast<int64_t>(x);
  return whole + (x - static_cast<double>(whole) >= 0.5 ? 1 : 0);
}

/// tau(n) = a + b * n: iteration time of n decoding sequences at `context` tokens each.
struct Affine {
  double a = 0;
  double b = 0;
  double at(double n) const { return a + b * n; }
};

/// The iteration time of n decoding sequences at a fixed TP and context, remembered by n: one
/// instance's estimate asks for the same few sizes many times (its hit-rate bisection refits
/// around the same operating point), and the cost model is pure, so what is not remembered is
/// simply asked again.
class IterationTimes {
 public:
  IterationTimes(const model::CostModel& cost, int tp, double context)
      : cost_(cost), tp_(tp), context_(context) {}

  double operator()(double n) {
    const int64_t sequences = std::max<int64_t>(1, RoundCount(n));
    for (size_t k = 0; k < known_count_; ++k) {
      if (known_[k].first == sequences) return known_[k].second;
    }
    model::IterationLoad load;
    load.decode_sequences = sequences;
    load.decode_context_tokens = RoundCount(static_cast<double>(sequences) * context_);
    const double t = cost_.IterationTime(tp_, load);
    if (known_count_ < known_.size()) known_[known_count_++] = {sequences, t};
    return t;
  }

  /// The secant over whole sequences [lo, hi]; the last one is remembered (a hit-rate bisection
  /// refits around the same operating point over and over).
  Affine Secant(double lo, double hi) {
    if (lo == secant_lo_ && hi == secant_hi_) return secant_;
    const double t_lo = (*this)(lo);
    const double t_hi = (*this)(hi);
    const double b = std::max(0.0, (t_hi - t_lo) / (hi - lo));
    secant_lo_ = lo;
    secant_hi_ = hi;
    secant_ = {t_lo - b * lo, b};
    return secant_;
  }

 private:
  const model::CostModel& cost_;
  int tp_;
  double context_;
  // An estimate asks for a few sizes (fewer than this in the benchmarks): they fit here without
  // an allocation, and a size beyond them is asked again each time.
  std::array<std::pair<int64_t, double>, 24> known_;
  size_t known_count_ = 0;
  double secant_lo_ = 0;  // no secant starts at 0
  double secant_hi_ = 0;
  Affine secant_;
};

/// The secant of tau over [lo, hi] in whole sequences, at least one sequence wide. Inlined:
/// a solution refits twice, about 100,000 times a search at 48 GPUs, and 82% of the secants are
/// the one remembered, so the call itself was a large part of the cost.
[[gnu::always_inline]] inline Affine Fit(IterationTimes& iteration, double lo, double hi) {
  lo = std::max(1.0, static_cast<double>(RoundCount(lo)));
  hi = std::max(lo + 1, static_cast<double>(RoundCount(hi)));
  return iteration.Secant(lo, hi);
}

/// The largest root of (s+1) P^2 - [(s+1) D + O + W + X] P + (O + X) D = 0: the period at which a
/// trajectory with W = `own_s` seconds of its own work on the instance (its prefill and its g
/// decode iterations, g (a + b)) and X = `fixed_s` seconds off it (its tools), plus
/// O = `outside_s`, takes exactly (s + 1) periods. The others' work is spread over the period, D
/// of every P seconds (their prefill, and b a token they decode beside its iterations), so its
/// own work takes W P / (P - D): it waits for the others' prefill chunks as they wait for its.
///
/// Only a bound above `than` matters to the caller: at most `than` is returned without the square
/// root when the root cannot exceed it. The root is at most b / (s + 1) (c >= 0), and so is its
/// rounded value (sqrt(fl(b * b)) == |b|, and rounding is monotone).
double LatencyBound(double d, double outside_s, double own_s, double fixed_s, int staleness,
                    double than) {
  const double s1 = staleness + 1;
  const double b = s1 * d + outside_s + own_s + fixed_s;
  if (b / s1 <= than) return than;
  const double c = (outside_s + fixed_s) * d;
  const double disc = std::max(0.0, b * b - 4 * s1 * c);
  return (b + std::sqrt(disc)) / (2 * s1);
}

struct Solved {
  double period = 0;
  double decode_set = 0;
  double iteration = 0;
  const char* bound = "idle";
};

/// Whether two trajectories have the same latency bound (SolveAt reads only these).
bool SameBound(const RequestCost& a, const RequestCost& b) {
  return a.decode == b.decode && a.prefill_s == b.prefill_s && a.miss_s == b.miss_s &&
         a.tool_s == b.tool_s;
}

/// What SolveAt needs of one instance's load that does not depend on the hit rate, derived once
/// per estimate: the iteration times, the saturated decode set, the secant over its whole range
/// (every solution's first fit) and the candidates for the slowest trajectory without repeats
/// (a repeat gives the same bound, which never exceeds itself), with the tokens the others decode
/// beside each.
struct Operating {
  Operating(IterationTimes& times, const InstanceSetting& setting, const RolloutLoad& share,
            double max_sequences)
      : iteration(times), s(setting), load(share), n_max(max_sequences) {
    for (const RequestCost& c : load.slowest) {
      const auto seen = slowest.begin() + distinct;
      if (std::none_of(slowest.begin(), seen,
                       [&](const RequestCost* other) { return SameBound(*other, c); })) {
        others_decode[static_cast<size_t>(distinct)] = load.Others(load.decode, c.decode);
        slowest[static_cast<size_t>(distinct++)] = &c;
      }
    }
    if (load.decode > 0) {
      per_sequence_at_max = iteration(n_max) / n_max;
      whole = Fit(iteration, 1, n_max);
    }
  }

  /// The slowest candidates, each once.
  std::span<const RequestCost* const> Slowest() const {
    return {slowest.data(), static_cast<size_t>(distinct)};
  }

  IterationTimes& iteration;
  const InstanceSetting& s;
  const RolloutLoad& load;
  const double n_max;
  double per_sequence_at_max = 0;
  Affine whole;
  std::array<const RequestCost*, 3> slowest{};
  std::array<double, 3> others_decode{};  // per candidate: the tokens the others decode
  int distinct = 0;
};

/// The period for a given hit rate.
Solved SolveAt(const Operating& op, double hit) {
  const InstanceSetting& s = op.s;
  const RolloutLoad& load = op.load;
  const double n_max = op.n_max;
  const double g = load.decode;
  const double prefill = load.prefill_s + (1 - hit) * load.miss_s;
  Solved out;
  if (g <= 0) {
    // Nothing to decode: prefill and tools only.
    out.period = prefill;
    out.bound = "throughput";
    for (const RequestCost* c : op.Slowest()) {
      const double latency = c->prefill_s + (1 - hit) * c->miss_s + c->tool_s;
      if ((latency + s.outside_s) / (s.staleness + 1) > out.period) {
        out.period = (latency + s.outside_s) / (s.staleness + 1);
        out.bound = "latency";
      }
    }
    return out;
  }
  // Saturated: the largest decode set the engine runs.
  const double saturated = prefill + g * op.per_sequence_at_max;
  // Each candidate's own prefill and the others' beside it, the same each round.
  std::array<double, 3> own_prefill{};
  std::array<double, 3> others_prefill{};
  const std::span<const RequestCost* const> slowest = op.Slowest();
  for (size_t k = 0; k < slowest.size(); ++k) {
    own_prefill[k] = slowest[k]->prefill_s + (1 - hit) * slowest[k]->miss_s;
    others_prefill[k] = load.Others(prefill, own_prefill[k]);
  }
  Affine tau = op.whole;
  for (int round = 0; round < 3; ++round) {
    const double d = prefill + g * tau.b;
    out.period = saturated;
    out.bound = "throughput";
    for (size_t k = 0; k < slowest.size(); ++k) {
      const double beside = others_prefill[k] + op.others_decode[k] * tau.b;
      const double own = own_prefill[k] + slowest[k]->decode * (tau.a + tau.b);
      const double latency =
          LatencyBound(beside, s.outside_s, own, slowest[k]->tool_s, s.staleness, out.period);
      if (latency > out.period) {
        out.period = latency;
        out.bound = "latency";
      }
    }
    out.decode_set = std::clamp(g * tau.a / std::max(out.period - d, 1e-12), 1.0, n_max);
    // Refit around the operating point: tau is not affine over the whole range (a MoE reads
    // more experts, compute overtakes memory).
    if (round < 2) {
      tau = Fit(op.iteration, std::max(1.0, out.decode_set * 0.8),
                std::min(n_max, std::max(1.0, out.decode_set * 1.25)));
    }
  }
  out.iteration = tau.at(out.decode_set) * out.period / std::max(out.period - prefill, 1e-12);
  return out;
}

/// The cache's hit rate at the period a hit rate gives: a fixed point, by bisection (the period
/// falls as the hit rate rises, and the hit rate rises with the period). At period P the
/// instance starts calls/P tool calls a second; each call's context is cached until its
/// trajectory's next turn is admitted: the call's latency plus the wait for admission. Waiting
/// for admission: every trajectory in flight that is neither in a tool call nor running. In
/// flight: when the instance is saturated, all that the staleness bound lets in (s + 1 batches,
/// less the part of the cycle spent outside rollout); otherwise those whose turns and tools are
/// under way (Little's law).
struct CacheFixedPoint {
  const Operating& op;
  const InstanceSetting& s;
  const RolloutLoad& load;
  double capacity = 0;
  double context = 0;  // the decode set's mean context
  Solved at_one;       // the solution with every context cached

  /// A trajectory's mean latency at the iteration time of `solved`.
  double Latency(const Solved& solved) const {
    return (load.decode * solved.iteration + load.tool_s + load.prefill_s) / load.trajectories;
  }

  /// The share of returning turns that find their context cached at the period of `solved`: on
  /// their instance (ReturnAffinity) and still there (CachedAfter).
  double HitAfter(const Solved& solved, bool saturated) const {
    const double cached = CachedAfter(solved, saturated);
    if (cached <= 0) return cached;
    const double placements_per_s = (load.calls + load.trajectories) / solved.period * s.instances;
    return cached *
           ReturnAffinity(s.returns, s.instances, placements_per_s, load.tool_s / load.calls);
  }

  /// The share of tool calls whose context is still cached when their trajectory's next turn is
  /// admitted, at the period of `solved`.
  double CachedAfter(const Solved& solved, bool saturated) const {
    const double held_per_trajectory = load.held_context / load.trajectories;
    const double mean_tool = load.tool_s / load.calls;
    const double p = solved.period;
    const double calls_per_s = load.calls / p;
    const double in_tools = calls_per_s * mean_tool;
    const double allowed =
        load.trajectories *
        (s.paced_batches > 0 ? s.paced_batches : std::max(1.0, s.staleness + 1 - s.outside_s / p));
    const double in_flight =
        saturated ? allowed : std::min(allowed, load.trajectories * Latency(solved) / p);
    const double queued = std::max(0.0, in_flight - in_tools - solved.decode_set);
    const double wait = queued / ((load.calls + load.trajectories) / p);  // per turn
    const double cache = std::max(0.0, capacity - solved.decode_set * context);
    // Context-seconds held per second: tools and prefill at each trajectory's own mean context
    // (the long ones hold large contexts for long), and the queue at the mean.
    const double held =
        (load.tool_context + load.prefill_context) / p + queued * held_per_trajectory;
    if (held <= cache) return 1.0;
    // E[min(latency + wait, age)] of the calls fills the cache.
    const double target = cache / (calls_per_s * held_per_trajectory);
    if (target <= wait) return 0.0;
    if (s.tools == nullptr || s.tools->empty()) return std::min(1.0, (target - wait) / mean_tool);
    if (target - wait >= s.tools->Mean()) return 1.0;
    return s.tools->FractionWithin(s.tools->AgeForCappedMean(target - wait));
  }

  /// The share of the cache the contexts in flight fill when the trainer paces the batches
  /// (one per outside_s, at most paced_batches in flight): Little's law at that pace.
  double PacedOccupancy(const Solved& solved) const {
    const double batches = s.outside_s > 0
                               ? std::min(s.paced_batches, Latency(solved) / s.outside_s)
                               : s.paced_batches;
    const double in_flight = load.trajectories * batches;
    return in_flight * (load.held_context / load.trajectories) / capacity;
  }

  /// The solution and its hit rate in the saturated or the unsaturated equilibrium.
  std::pair<Solved, double> Solve(bool saturated) const {
    if (HitAfter(at_one, saturated) >= 1) return {at_one, 1.0};
    double lo = 0;
    double hi = 1;
    for (int k = 0; k < 12; ++k) {
      const double mid = (lo + hi) / 2;
      if (HitAfter(SolveAt(op, mid), saturated) > mid) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const double hit = (lo + hi) / 2;
    return {SolveAt(op, hit), hit};
  }
};

}  // namespace

double ReturnAffinity(ReturnPlacement returns, int instances, double placements_per_s,
                      double mean_tool_s) {
  if (returns == ReturnPlacement::kKept || instances <= 1) return 1;
  const double k = instances;
  if (returns == ReturnPlacement::kRotated) return 1 / k;
  const double alone = std::exp(-std::max(0.0, placements_per_s * mean_tool_s));
  return alone * std::pow(k, -kReturnStay) + (1 - alone) / k;
}

ToolLatencies::ToolLatencies(std::span<const double> latencies) {
  for (double l : latencies) {
    if (Kept(l)) sorted_.push_back(l);
  }
  if (!std::is_sorted(sorted_.begin(), sorted_.end())) std::sort(sorted_.begin(), sorted_.end());
  prefix_.assign(sorted_.size() + 1, 0.0);
  for (size_t k = 0; k < sorted_.size(); ++k) prefix_[k + 1] = prefix_[k] + sorted_[k];
}

double ToolLatencies::Mean() const {
  return sorted_.empty() ? 0 : prefix_.back() / static_cast<double>(sorted_.size());
}

double ToolLatencies::MeanCappedAt(double age) const {
  if (sorted_.empty()) return 0;
  const size_t below =
      static_cast<size_t>(std::upper_bound(sorted_.begin(), sorted_.end(), age) - sorted_.begin());
  return (prefix_[below] + age * static_cast<double>(sorted_.size() - below)) /
         static_cast<double>(sorted_.size());
}

double ToolLatencies::FractionWithin(double age) const {
  if (sorted_.empty()) return 1;
  return static_cast<double>(std::upper_bound(sorted_.begin(), sorted_.end(), age) -
                             sorted_.begin()) /
         static_cast<double>(sorted_.size());
}

double ToolLatencies::AgeForCappedMean(double mean) const {
  if (sorted_.empty() || mean <= 0) return 0;
  const double n = static_cast<double>(sorted_.size());
  // MeanCappedAt is piecewise linear between the sorted latencies: find the piece.
  size_t lo = 0;
  size_t hi = sorted_.size();
  while (lo < hi) {  // the first k with MeanCappedAt(sorted_[k]) >= mean
    const size_t mid = (lo + hi) / 2;
    const double at = (prefix_[mid] + sorted_[mid] * (n - static_cast<double>(mid))) / n;
    if (at >= mean) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  if (lo == sorted_.size()) return sorted_.back();
  // Between sorted_[lo - 1] and sorted_[lo]: mean = (prefix[lo] + A (n - lo)) / n.
  return (mean * n - prefix_[lo]) / (n - static_cast<double>(lo));
}

void ToolLatencyWindow::Add(std::span<const double> latencies) {
  for (double l : latencies) {
    window_.push_back(l);
    if (Kept(l)) added_.push_back(l);
    if (window_.size() > capacity_) {
      if (Kept(window_.front())) evicted_.push_back(window_.front());
      window_.pop_front();
    }
  }
  if (!latencies.empty()) stale_ = true;
}

void ToolLatencyWindow::Clear() {
  window_.clear();
  added_.clear();
  evicted_.clear();
  latencies_.reset();
  stale_ = false;
}

std::shared_ptr<const ToolLatencies> ToolLatencyWindow::Sorted() {
  if (window_.empty()) return nullptr;
  if (!stale_) return latencies_;
  // The window's multiset: (the last one + added_) - evicted_, where evicted_ is part of the sum.
  const std::vector<double> none;
  const std::vector<double>& before = latencies_ ? latencies_->sorted() : none;
  std::sort(added_.begin(), added_.end());
  std::vector<double> all;
  all.reserve(before.size() + added_.size());
  std::merge(before.begin(), before.end(), added_.begin(), added_.end(), std::back_inserter(all));
  std::sort(evicted_.begin(), evicted_.end());
  std::vector<double> kept;
  kept.reserve(all.size());
  std::set_difference(all.begin(), all.end(), evicted_.begin(), evicted_.end(),
                      std::back_inserter(kept));
  added_.clear();
  evicted_.clear();
  stale_ = false;
  latencies_ = std::make_shared<const ToolLatencies>(kept);
  return latencies_;
}

RequestCost CostOf(const model::CostModel& cost, int tp, const TrajectorySize& r) {
  RequestCost c;
  const double p = static_cast<double>(r.prompt_tokens);
  const double g = static_cast<double>(r.generated_tokens);
  const double o = static_cast<double>(r.tool_tokens);
  c.decode = g;
  c.held_context = p + (g + o) / 2;
  c.decode_context = g * c.held_context;
  c.calls = std::max(r.turns - 1, r.tool_tokens > 0 ? 1 : 0);
  c.tool_s = r.tool_s;
  c.tool_context = c.tool_s * c.held_context;
  c.tokens = static_cast<double>(r.total());
  double tool_prefill = 0;
  if (r.prompt_tokens > 0) c.prefill_s += cost.PrefillTime(tp, r.prompt_tokens, 0);
  if (r.tool_tokens > 0) {
    tool_prefill = cost.PrefillTime(tp, r.tool_tokens, r.prompt_tokens + r.generated_tokens / 2);
    c.prefill_s += tool_prefill;
  }
  if (c.calls > 0) {
    const auto mid = static_cast<int64_t>(std::llround(c.held_context));
    c.miss_s =
        std::max(0.0, c.calls * cost.PrefillTime(tp, std::max<int64_t>(1, mid), 0) - tool_prefill);
  }
  c.prefill_context = c.prefill_s * c.held_context;
  return c;
}

void RolloutLoad::Add(const RequestCost& r, double weight) {
  trajectories += weight;
  decode += weight * r.decode;
  decode_context += weight * r.decode_context;
  held_context += weight * r.held_context;
  tool_context += weight * r.tool_context;
  prefill_context += weight * r.prefill_context;
  calls += weight * r.calls;
  tool_s += weight * r.tool_s;
  prefill_s += weight * r.prefill_s;
  miss_s += weight * r.miss_s;
  max_tokens = std::max(max_tokens, r.tokens);
  if (r.decode > slowest[0].decode) slowest[0] = r;
  if (r.tool_s > slowest[1].tool_s) slowest[1] = r;
  if (r.prefill_s + r.miss_s > slowest[2].prefill_s + slowest[2].miss_s) slowest[2] = r;
}

double RolloutLoad::Others(double total, double own) const {
  if (share >= 1) return std::max(0.0, total - own);
  if (trajectories <= 1) return 0;
  const double mix = trajectories / share;  // the whole mix's trajectories, more than these
  return (trajectories - 1) * std::max(0.0, total / share - own) / (mix - 1);
}

RolloutLoad RolloutLoad::Share(double f) const {
  RolloutLoad out = *this;
  out.share = share * f;
  out.trajectories *= f;
  out.decode *= f;
  out.decode_context *= f;
  out.held_context *= f;
  out.tool_context *= f;
  out.prefill_context *= f;
  out.calls *= f;
  out.tool_s *= f;
  out.prefill_s *= f;
  out.miss_s *= f;
  return out;
}

RolloutLoad RolloutLoad::Merge(const RolloutLoad& a, const RolloutLoad& b) {
  RolloutLoad out = a;
  out.share = std::min(1.0, a.share + b.share);
  out.trajectories += b.trajectories;
  out.decode += b.decode;
  out.decode_context += b.decode_context;
  out.held_context += b.held_context;
  out.tool_context += b.tool_context;
  out.prefill_context += b.prefill_context;
  out.calls += b.calls;
  out.tool_s += b.tool_s;
  out.prefill_s += b.prefill_s;
  out.miss_s += b.miss_s;
  out.max_tokens = std::max(a.max_tokens, b.max_tokens);
  if (b.slowest[0].decode > out.slowest[0].decode) out.slowest[0] = b.slowest[0];
  if (b.slowest[1].tool_s > out.slowest[1].tool_s) out.slowest[1] = b.slowest[1];
  if (b.slowest[2].prefill_s + b.slowest[2].miss_s >
      out.slowest[2].prefill_s + out.slowest[2].miss_s) {
    out.slowest[2] = b.slowest[2];
  }
  return out;
}

namespace {

/// The decode set's mean context and the largest decode set the KV cache and the engine allow.
struct DecodeLimits {
  DecodeLimits(const InstanceSetting& s, const RolloutLoad& load, double capacity)
      : context(load.decode > 0 ? load.decode_context / load.decode : 0),
        n_max(std::max(1.0, std::min(static_cast<double>(s.max_num_seqs),
                                     std::floor(capacity / std::max(1.0, context))))) {}
  double context;
  double n_max;
};

}  // namespace

double PeriodFloor(const model::CostModel& cost, const InstanceSetting& s,
                   const RolloutLoad& load) {
  if (load.empty()) return 0;
  const double capacity = static_cast<double>(cost.KvCapacityTokens(s.tp));
  if (load.max_tokens > capacity) return kInf;
  if (load.decode <= 0) return load.prefill_s;
  // SolveAt's saturated period, at the least prefill any hit rate gives; every solution's period
  // starts there and only grows (rounding is monotone, so the floor holds in floating point too).
  const DecodeLimits limits(s, load, capacity);
  IterationTimes iteration(cost, s.tp, limits.context);
  return load.prefill_s + load.decode * (iteration(limits.n_max) / limits.n_max);
}

InstanceEstimate EstimateInstance(const model::CostModel& cost, const InstanceSetting& s,
                                  const RolloutLoad& load) {
  InstanceEstimate out;
  if (load.empty()) return out;
  const double capacity = static_cast<double>(cost.KvCapacityTokens(s.tp));
  if (load.max_tokens > capacity) {
    out.period_s = kInf;
    out.bound = "kv";
    return out;
  }
  const auto [context, n_max] = DecodeLimits(s, load, capacity);
  IterationTimes iteration(cost, s.tp, context);
  const Operating op(iteration, s, load, n_max);
  auto finish = [&](const Solved& solved, double hit) {
    out.period_s = solved.period;
    out.decode_set = solved.decode_set;
    out.iteration_s = solved.iteration;
    out.hit_rate = hit;
    out.bound = solved.bound;
    return out;
  };
  if (load.calls <= 0 || load.miss_s <= 0) return finish(SolveAt(op, 1), 1);
  if (s.kv_policy == KvPolicy::kFree) return finish(SolveAt(op, 0), 0);
  // Two equilibria can exist: a saturated engine thrashing its cache with every trajectory the
  // staleness bound lets in queued for admission, and an unsaturated one whose trajectories hold
  // only what their turns and tools take. A run starts with every allowed batch launched at once,
  // so it falls into the saturated one whenever that one is self-consistent, unless the trainer
  // paces the batches and the unsaturated one keeps up with room to spare (paced_batches).
  const CacheFixedPoint cache{op, s, load, capacity, context, SolveAt(op, 1)};
  std::optional<std::pair<Solved, double>> calm;
  if (s.paced_batches > 0 && s.credit_pace) {
    calm = cache.Solve(false);
    if (calm->first.period <= s.outside_s) {
      out.paced_occupancy = cache.PacedOccupancy(calm->first);
      if (out.paced_occupancy <= kPacedHeadroom) return finish(calm->first, calm->second);
    }
  }
  const auto [thrashing, thrashing_hit] = cache.Solve(true);
  if (thrashing_hit < 1 && std::string_view(thrashing.bound) == "throughput") {
    return finish(thrashing, thrashing_hit);
  }
  if (!calm) calm = cache.Solve(false);
  return finish(calm->first, calm->second);
}

}  // namespace libra::planner
