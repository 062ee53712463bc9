#include "planner/heddle_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/check.h"
#include "common/strings.h"
#include "model/partition.h"
#include "planner/elastic_pool.h"

namespace libra::planner {
namespace {

std::string MixName(const std::vector<int>& tps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < tps.size();) {
    size_t j = i;
    while (j < tps.size() && tps[j] == tps[i]) ++j;
    parts.push_back(StrFormat("tp%dx%zu", tps[i], j - i));
    i = j;
  }
  return StrJoin(parts, " ");
}

}  // namespace

Result<std::unique_ptr<Planner>> HeddlePlanner::Create(const recipe::OptionTable& options) {
  recipe::OptionReader reader(options);
  HeddlePlannerOptions o;
  if (reader.Has("train_gpus"))
    o.train_gpus = static_cast<int>(reader.Int("train_gpus", 1, 1, 1 << 20));
  o.tp_degrees = ReadTpList(reader, "tp_degrees", o.tp_degrees, /*allow_empty=*/false);
  if (reader.Has("max_tp")) {
    o.max_tp = static_cast<int>(reader.Int("max_tp", 8, 1, 1 << 20));
    if (*o.max_tp < *std::min_element(o.tp_degrees.begin(), o.tp_degrees.end())) {
      reader.Error("max_tp", StrFormat("%d is below every TP degree of tp_degrees", *o.max_tp));
    }
  }
  o.retune_steps = static_cast<int>(reader.Int("retune_steps", o.retune_steps, 0, 1 << 20));
  o.min_gain = reader.Double("min_gain", o.min_gain, 0, 1);
  o.history = static_cast<int>(reader.Int("history", o.history, 1, 1 << 20));
  o.max_units = static_cast<int>(reader.Int("max_units", o.max_units, 2, 4096));
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Planner>(std::make_unique<HeddlePlanner>(std::move(o)));
}

HeddlePlanner::HeddlePlanner(HeddlePlannerOptions options) : options_(std::move(options)) {
  std::vector<int>& tps = options_.tp_degrees;
  std::sort(tps.begin(), tps.end(), std::greater<>());
  tps.erase(std::unique(tps.begin(), tps.end()), tps.end());
  if (options_.max_tp) std::erase_if(tps, [&](int tp) { return tp > *options_.max_tp; });
  for (size_t i = 1; i < tps.size(); ++i) {
    LIBRA_CHECK(tps[i - 1] % tps[i] == 0) << "TP degrees must divide each other (1, 2, 4, 8)";
  }
}

std::vector<double> HeddlePlanner::Profile() const {
  const int n = std::max(1, context_.batch_trajectories * (context_.staleness + 1));
  std::vector<double> sorted;
  for (const TrajectorySize& t : history_) {
    sorted.push_back(static_cast<double>(t.generated_tokens));
  }
  std::vector<double> lengths;
  if (sorted.empty()) {
    lengths.assign(static_cast<size_t>(n), static_cast<double>(context_.typical_sequence_tokens));
    return lengths;
  }
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (int i = 0; i < n; ++i) {  // the (i + 0.5) / n quantiles, longest first
    const auto at = static_cast<size_t>((i + 0.5) / n * static_cast<double>(sorted.size()));
    lengths.push_back(sorted[std::min(at, sorted.size() - 1)]);
  }
  return lengths;
}

int64_t HeddlePlanner::ProfileContext() const {
  if (history_.empty()) return std::max<int64_t>(1, context_.typical_sequence_tokens / 2);
  double sum = 0;
  for (const TrajectorySize& t : history_) {
    sum += static_cast<double>(t.prompt_tokens) +
           static_cast<double>(t.generated_tokens + t.tool_tokens) / 2;
  }
  return std::max<int64_t>(1, std::llround(sum / static_cast<double>(history_.size())));
}

double HeddlePlanner::Makespan(std::vector<int> tps, const std::vector<double>& lengths,
                               int64_t context_tokens) const {
  const model::GroupStepModel steps(*context_.cost, context_tokens, context_.max_num_seqs);
  return Makespan(std::move(tps), lengths, steps, options_.max_units);
}

double HeddlePlanner::Makespan(std::vector<int> tps, const std::vector<double>& lengths,
                               const model::GroupStepModel& steps, int max_units) {
  std::sort(tps.begin(), tps.end(), std::greater<>());
  for (int tp : tps) {
    if (steps.Fit(tp) <= 0) return std::numeric_limits<double>::infinity();
  }
  // Instances of one TP beyond the DP's units never take a group: the same makespan without them.
  const size_t units =
      model::PartitionUnitStarts(static_cast<int64_t>(lengths.size()), max_units).size() - 1;
  size_t kept = 0;
  for (size_t i = 0, run = 0; i < tps.size(); ++i) {
    run = i > 0 && tps[i] == tps[i - 1] ? run + 1 : 1;
    if (run <= std::max<size_t>(1, units)) tps[kept++] = tps[i];
  }
  tps.resize(kept);
  return model::PresortedMakespan(
      lengths, tps.size(),
      [&](size_t j, int64_t count) { return steps.StepSeconds(tps[j], count); }, max_units);
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Scores the TP mixes of one ranking with the DP of model::PresortedPartition, rows shared
// between mixes. A row holds, for every unit i, the least makespan of units [0, i) on the
// instances so far (the DP's D[j]); adding an instance computes the next row exactly as the DP
// does. The instances of the last degree are taken from the back instead: Last(c)[i], the least
// makespan of units [i, units) on c of them, so that a mix's makespan is the least over i of
// max(row[i], Last(c)[i]), the same minimum over the same cuts. Beyond `units` instances of one
// degree rows no longer change (no cut has more non-empty groups than units).
class MixScorer {
 public:
  using Row = std::vector<double>;

  /// REQUIRES: every degree in 1 .. 8.
  MixScorer(const std::vector<double>& lengths, int max_units, const model::GroupStepModel& steps,
            const std::vector<int>& degrees)
      : cost_(9) {
    const std::vector<int64_t> start =
        model::PartitionUnitStarts(static_cast<int64_t>(lengths.size()), max_units);
    units_ = start.size() - 1;
    for (int tp : degrees) {
      std::vector<double>& table = cost_[static_cast<size_t>(tp)];
      table.assign((units_ + 1) * (units_ + 1), 0);
      for (size_t k = 0; k < units_; ++k) {
        const double first = lengths[static_cast<size_t>(start[k])];
        for (size_t i = k + 1; i <= units_; ++i) {
          table[k * (units_ + 1) + i] = steps.StepSeconds(tp, start[i] - start[k]) * first;
        }
      }
    }
  }

  size_t units() const { return units_; }
  /// The row before any instance.
  Row Empty() const {
    Row row(units_ + 1, kInf);
    row[0] = 0;
    return row;
  }
  /// `before` with one more instance of `tp` (the DP's step, for every end).
  void Add(const Row& before, int tp, Row& row) const {
    row.resize(units_ + 1);
    model::PresortedStep(
        before, [&](size_t k, size_t i) { return Cost(tp, k, i); }, 0, row);
  }
  /// Last(c) for c = 0 .. units of `tp`. The group [i, k) grows with k while the rest's least
  /// makespan falls: the least of their maximum is where they cross, found by bisection.
  void SetLast(int tp) {
    last_.assign(units_ + 1, Row(units_ + 1, kInf));
    last_[0][units_] = 0;
    for (size_t c = 1; c <= units_; ++c) {
      const Row& after = last_[c - 1];
      for (size_t i = 0; i <= units_; ++i) {
        size_t y = i, hi = units_;  // the first k in [i, units] with Cost(i, k) >= after[k]
        while (y < hi) {
          const size_t k = y + (hi - y) / 2;
          if (GroupCost(tp, i, k) >= after[k]) {
            hi = k;
          } else {
            y = k + 1;
          }
        }
        last_[c][i] = y > i ? std::min(GroupCost(tp, i, y), after[y - 1]) : GroupCost(tp, i, y);
      }
    }
  }
  /// The makespan of the instances of `row` and then `c` of the last degree.
  double Makespan(const Row& row, size_t c) const {
    const Row& last = last_[std::min(c, units_)];
    double best = kInf;
    for (size_t i = 0; i <= units_; ++i) best = std::min(best, std::max(row[i], last[i]));
    return best;
  }

 private:
  // The group [k, i) on an instance of `tp` (k < i), as model::PresortedPartition costs it.
  double Cost(int tp, size_t k, size_t i) const {
    return cost_[static_cast<size_t>(tp)][k * (units_ + 1) + i];
  }
  // The same, 0 for the empty group.
  double GroupCost(int tp, size_t k, size_t i) const { return k < i ? Cost(tp, k, i) : 0; }

  size_t units_ = 0;
  std::vector<std::vector<double>> cost_;  // by TP: [k * (units + 1) + i], the group [k, i)
  std::vector<Row> last_;
};

// Enumerates the mixes of `degrees` (descending, each dividing the next larger) that fill some
// GPUs, in RankMixes's order (more of the larger TP first), and keeps the best `keep`: by
// makespan, then in that order. Each distinct mix is scored once.
class MixRanker {
 public:
  /// `runs[d]`: whether degree d runs a sequence (a mix with one that does not scores infinite).
  MixRanker(std::vector<int> degrees, std::vector<bool> runs, const MixScorer& scorer, size_t keep)
      : degrees_(std::move(degrees)),
        runs_(std::move(runs)),
        scorer_(scorer),
        keep_(keep),
        units_(static_cast<int>(std::max<size_t>(1, scorer.units()))),
        counts_(degrees_.size(), 0),
        levels_(degrees_.size()) {}

  MixRanking Rank(int gpus) {
    MixRanking ranking;
    if (degrees_.empty()) return ranking;
    Enumerate(0, gpus, scorer_.Empty());
    ranking.count = count_;
    for (const Ranked& r : best_) {
      std::vector<int> tps;
      for (size_t d = 0; d < degrees_.size(); ++d) {
        tps.insert(tps.end(), static_cast<size_t>(r.counts[d]), degrees_[d]);
      }
      ranking.best.push_back(TpMix{std::move(tps), r.makespan_s});
    }
    return ranking;
  }

 private:
  struct Ranked {
    double makespan_s;
    std::vector<int> counts;
  };
  // The rows of the degrees before d, as counted, and c = 0 .. units more of degree d (more
  // change nothing), built as far as asked. For the second to last degree also the scores of
  // c = 0 .. units with the last degree's count at least units, and their least and finite
  // number over [0, c]; empty until asked.
  struct Built {
    std::vector<MixScorer::Row> rows;
    std::vector<double> tail;
    std::vector<double> tail_least;
    std::vector<size_t> tail_finite;
  };
  // Rows depend on the capped counts before d: kept per capped count of degree d - 1 while those
  // before it stay the same (the enumeration comes back to them for every count before).
  struct Level {
    std::vector<int> outer;
    std::unordered_map<int, Built> by_count;
  };

  void Enumerate(size_t d, int left, const MixScorer::Row& row) {
    const size_t last = degrees_.size() - 1;
    if (left == 0) {
      const double m = Score(row);
      if (std::isfinite(m)) Offer(m);
      return;
    }
    if (d >= last) {  // the last degree takes the rest, if it divides it
      if (d == last && left % degrees_[d] == 0) {
        counts_[d] = left / degrees_[d];
        Enumerate(last + 1, 0, row);
        counts_[d] = 0;
      }
      return;
    }
    Built& entry = EntryFor(d, row);
    if (d + 1 == last) return LastTwo(d, left, entry);
    for (int count = left / degrees_[d]; count >= 0; --count) {
      counts_[d] = count;
      Enumerate(d + 1, left - count * degrees_[d], RowFor(d, entry, count));
    }
    counts_[d] = 0;
  }

  // The last two degrees, as Enumerate would visit them. Where both counts are at least `units`
  // every mix scores the same, so once one is not among the best none of the rest of that run
  // is: they are counted, not scored. Where only the last one's is, the scores repeat for every
  // count before: they are kept (Built::tail), and what is left is counted once none of it can
  // be among the best.
  void LastTwo(size_t d, int left, Built& entry) {
    const int tp = degrees_[d];
    const int last = degrees_.back();
    if (left % last != 0) return;  // last divides tp: no count leaves a multiple of it
    for (int count = left / tp; count >= 0; --count) {
      counts_[d] = count;
      counts_.back() = (left - count * tp) / last;
      if (count <= units_ && counts_.back() >= units_) {
        if (entry.tail.empty()) FillTail(d, entry);
        const auto c = static_cast<size_t>(count);
        if (best_.size() >= keep_ && !best_.empty() &&
            !(entry.tail_least[c] < best_.back().makespan_s)) {
          count_ += entry.tail_finite[c];
          break;
        }
        if (std::isfinite(entry.tail[c])) Offer(entry.tail[c]);
        continue;
      }
      const double m = Score(RowFor(d, entry, count));
      if (!std::isfinite(m)) continue;
      if (!Offer(m) && count > units_ && counts_.back() >= units_) {
        count_ += static_cast<size_t>(count - units_);
        count = units_;  // next: units - 1
      }
    }
    counts_[d] = 0;
    counts_.back() = 0;
  }

  void FillTail(size_t d, Built& entry) {
    const int count = counts_[d];
    for (int c = 0; c <= units_; ++c) {
      counts_[d] = c;
      const double m = Score(RowFor(d, entry, c));
      entry.tail.push_back(m);
      entry.tail_least.push_back(c > 0 ? std::min(entry.tail_least.back(), m) : m);
      entry.tail_finite.push_back((c > 0 ? entry.tail_finite.back() : 0) +
                                  (std::isfinite(m) ? 1 : 0));
    }
    counts_[d] = count;
  }

  Built& EntryFor(size_t d, const MixScorer::Row& row) {
    Level& level = levels_[d];
    std::vector<int> outer(counts_.begin(),
                           counts_.begin() + static_cast<std::ptrdiff_t>(d > 0 ? d - 1 : 0));
    for (int& c : outer) c = std::min(c, units_);
    if (outer != level.outer) {
      level.by_count.clear();
      level.outer = std::move(outer);
    }
    Built& entry = level.by_count[d > 0 ? std::min(counts_[d - 1], units_) : 0];
    if (entry.rows.empty()) entry.rows.push_back(row);
    return entry;
  }

  const MixScorer::Row& RowFor(size_t d, Built& entry, int count) const {
    const auto c = static_cast<size_t>(std::min(count, units_));
    while (entry.rows.size() <= c) {
      MixScorer::Row next;
      scorer_.Add(entry.rows.back(), degrees_[d], next);
      entry.rows.push_back(std::move(next));
    }
    return entry.rows[c];
  }

  double Score(const MixScorer::Row& row) const {
    for (size_t d = 0; d < degrees_.size(); ++d) {
      if (counts_[d] > 0 && !runs_[d]) return kInf;
    }
    return scorer_.Makespan(row, static_cast<size_t>(counts_.back()));
  }

  // Counts a scored mix and keeps it among the best if it is; whether it is.
  bool Offer(double makespan_s) {
    ++count_;
    if (best_.size() >= keep_ && (best_.empty() || !(makespan_s < best_.back().makespan_s))) {
      return false;
    }
    best_.insert(std::upper_bound(best_.begin(), best_.end(), makespan_s,
                                  [](double v, const Ranked& r) { return v < r.makespan_s; }),
                 Ranked{makespan_s, counts_});
    if (best_.size() > keep_) best_.pop_back();
    return true;
  }

  std::vector<int> degrees_;
  std::vector<bool> runs_;
  const MixScorer& scorer_;
  size_t keep_;
  int units_;
  std::vector<int> counts_;  // the mix being enumerated, per degree
  std::vector<Level> levels_;
  std::vector<Ranked> best_;
  size_t count_ = 0;
};

}  // namespace

MixRanking HeddlePlanner::RankMixes(int gpus, const std::vector<double>& lengths,
                                    int64_t context_tokens, size_t keep) const {
  // Degrees that fit a node and hold one of the longest sequences. Every mix of them packs
  // (PackSizes): each divides the node's GPUs and the next larger degree, so first fit in
  // decreasing order leaves every full node's free GPUs a multiple of the size being placed. A
  // size finds no room only when the full nodes are full and the last node has less than it
  // free, fewer GPUs than the sizes still to place, which fill them exactly.
  const model::GroupStepModel steps(*context_.cost, context_tokens, context_.max_num_seqs);
  std::vector<int> degrees;
  std::vector<bool> runs;
  for (int tp : options_.tp_degrees) {
    if (tp <= context_.gpus_per_node && context_.gpus_per_node % tp == 0 &&
        context_.cost->KvCapacityTokens(tp) >= context_.max_sequence_tokens) {
      degrees.push_back(tp);
      runs.push_back(steps.Fit(tp) > 0);
    }
  }
  MixScorer scorer(lengths, options_.max_units, steps, degrees);
  if (!degrees.empty()) scorer.SetLast(degrees.back());
  return MixRanker(std::move(degrees), std::move(runs), scorer, keep).Rank(gpus);
}

Result<Plan> HeddlePlanner::Initial(const PlanContext& context) {
  context_ = context;
  if (context.cost == nullptr) {
    return Status::InvalidArgument("the heddle planner needs a cost model to size its instances");
  }
  history_.assign(context.history.begin(), context.history.end());
  while (static_cast<int>(history_.size()) > options_.history) history_.pop_front();
  const int total = context.total_gpus();
  if (total < 2) {
    return Status::Unschedulable(
        "the heddle planner splits training and rollout: it needs at least 2 GPUs");
  }
  int train = 0;
  if (options_.train_gpus) {
    train = *options_.train_gpus;
  } else {
    train = context.nodes > 1 ? (context.nodes / 2) * context.gpus_per_node : total / 2;
  }
  if (train >= total) {
    return Status::Unschedulable(
        StrFormat("train_gpus = %d leaves no GPU for rollout (the cluster has %d)", train, total));
  }
  LIBRA_ASSIGN_OR_RETURN(model::TrainLayout train_layout, ChooseTrainLayout(context, train));
  const std::vector<double> lengths = Profile();
  const int64_t sequence_context = ProfileContext();
  const MixRanking ranking = RankMixes(total - train, lengths, sequence_context, kExplainedMixes);
  const std::vector<TpMix>& mixes = ranking.best;
  if (mixes.empty()) {
    return Status::Unschedulable(StrFormat(
        "no mix of rollout TP degrees fills %d GPUs in nodes of %d with room for a %lld-token "
        "sequence",
        total - train, context.gpus_per_node, static_cast<long long>(context.max_sequence_tokens)));
  }
  Plan plan;
  LIBRA_ASSIGN_OR_RETURN(plan.layout,
                         SplitLayout(train_layout, mixes.front().tps, context.gpus_per_node));
  plan.reason = StrFormat(
      "%s: predicted rollout makespan %.1f s for %zu trajectories, the least of %zu TP mixes "
      "(%s split)",
      MixName(mixes.front().tps).c_str(), mixes.front().makespan_s, lengths.size(), ranking.count,
      options_.train_gpus ? "recipe's" : "default");
  for (size_t i = 0; i < mixes.size(); ++i) {
    plan.explain.push_back(
        StrFormat("%s: %.1f s", MixName(mixes[i].tps).c_str(), mixes[i].makespan_s));
  }
  plan.explain.push_back(
      StrFormat("%zu mixes scored exhaustively on the group model", ranking.count));
  return plan;
}

std::optional<PlanDecision> HeddlePlanner::OnStep(const StepObservation& observation) {
  for (const TrajectorySize& t : observation.trajectories) history_.push_back(t);
  while (static_cast<int>(history_.size()) > options_.history) history_.pop_front();
  if (options_.retune_steps == 0 || (observation.step + 1) % options_.retune_steps != 0) {
    return std::nullopt;
  }
  PlanDecision decision;
  decision.trigger = "retune";
  const backend::Layout& current = observation.layout;
  if (observation.transition_in_flight || current.colocated || current.instances.empty()) {
    decision.reason = "a transition is under way; kept";
    return decision;
  }
  std::vector<int> now;
  for (const backend::InstanceSpec& i : current.instances) now.push_back(i.tp);
  std::sort(now.begin(), now.end(), std::greater<>());
  const std::vector<double> lengths = Profile();
  const int64_t sequence_context = ProfileContext();
  const double current_s = Makespan(now, lengths, sequence_context);
  const std::vector<TpMix> mixes =
      RankMixes(current.rollout_gpus(), lengths, sequence_context, 1).best;
  decision.current_step_s = current_s;
  if (mixes.empty()) {
    decision.reason = "no feasible TP mix; kept";
    return decision;
  }
  const TpMix& best = mixes.front();
  decision.candidate_step_s = best.makespan_s;
  if (best.tps == now || !(best.makespan_s < current_s)) {
    decision.reason = StrFormat("kept: %s is the best mix (predicted makespan %.1f s)",
                                MixName(now).c_str(), current_s);
    return decision;
  }
  auto target = SplitLayout(current.train, best.tps, context_.gpus_per_node);
  if (!target.ok()) {
    decision.reason = "kept: " + target.status().message();
    return decision;
  }
  // New instances load weights at their TP before serving (the simulator charges the same).
  const std::vector<bool> kept = KeptInstances(current, *target);
  double transition = 0;
  for (size_t i = 0; i < target->instances.size(); ++i) {
    if (i < kept.size() && kept[i]) continue;
    transition = std::max(transition,
                          context_.cost->RoleSwitchTime({model::SwitchDirection::kTrainToRollout,
                                                         target->instances[i].tp, current.train}));
  }
  const int remaining = std::max(0, context_.steps - observation.step - 1);
  const double gain = (current_s - best.makespan_s) * remaining - transition;
  const double relative = (current_s - best.makespan_s) / current_s;
  decision.transition_s = transition;
  decision.gain_s = gain;
  if (gain <= 0 || relative < options_.min_gain) {
    decision.reason = StrFormat(
        "kept: %s would cut the predicted makespan by %.1f%%, %.1f s over %d steps net of a "
        "%.1f s transition",
        MixName(best.tps).c_str(), 100 * relative, gain, remaining, transition);
    return decision;
  }
  decision.layout = *target;
  decision.reason = StrFormat(
      "moved: %s -> %s, predicted makespan %.1f s -> %.1f s, %.1f s saved over %d steps net of a "
      "%.1f s transition",
      MixName(now).c_str(), MixName(best.tps).c_str(), current_s, best.makespan_s, gain, remaining,
      transition);
  return decision;
}

}  // namespace libra::planner
