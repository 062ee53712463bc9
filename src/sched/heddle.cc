#include "sched/heddle.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "common/check.h"
#include "common/rng.h"
#include "common/strings.h"
#include "model/partition.h"

namespace libra::sched {
namespace {

/// HeddleRouter::ranked_'s order: longer first, then smaller id.
bool RankedBefore(const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

/// Finished trajectories the history predictor keeps.
constexpr size_t kHistory = 1024;
/// What the history predictor says before any trajectory finished.
constexpr double kNoHistoryTokens = 4096;

}  // namespace

Result<std::unique_ptr<Router>> HeddleRouter::Create(const recipe::OptionTable& options,
                                                     const RouterDeps& deps) {
  recipe::OptionReader reader(options);
  HeddleOptions o;
  o.noise_sigma = reader.DoubleList("noise_sigma", o.noise_sigma, 0, 10);
  if (o.noise_sigma.empty()) reader.Error("noise_sigma", "must list at least one sigma");
  o.noise_correlation = reader.Double("noise_correlation", o.noise_correlation, 0, 1);
  o.noise_seed = static_cast<uint64_t>(
      reader.Int("noise_seed", static_cast<int64_t>(o.noise_seed), 0, int64_t{1} << 62));
  o.prediction_latency_s = reader.Double("prediction_latency_s", o.prediction_latency_s, 0, 3600);
  o.priority = reader.Bool("priority", o.priority);
  o.migration = reader.Bool("migration", o.migration);
  o.migration_hysteresis = reader.Double("migration_hysteresis", o.migration_hysteresis, 0, 1);
  o.max_units = static_cast<int>(reader.Int("max_units", o.max_units, 2, 4096));
  o.repartition_drift = reader.Double("repartition_drift", o.repartition_drift, 0, 100);
  o.max_num_seqs = static_cast<int>(reader.Int("max_num_seqs", o.max_num_seqs, 1, 1 << 20));
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  if (deps.cost == nullptr) {
    return Status::InvalidArgument(
        "the heddle router needs the run's cost model (its placement weighs decode time per "
        "TP)");
  }
  return std::unique_ptr<Router>(std::make_unique<HeddleRouter>(std::move(o), deps));
}

HeddleRouter::HeddleRouter(HeddleOptions options, const RouterDeps& deps)
    : options_(std::move(options)), cost_(deps.cost) {
  LIBRA_CHECK(cost_ != nullptr) << "heddle needs a cost model";
  LIBRA_CHECK(!options_.noise_sigma.empty()) << "heddle needs a noise sigma";
}

double HeddleRouter::PredictWithNoise(const HeddleOptions& options, TrajectoryId trajectory,
                                      int turn, int64_t oracle_remaining) {
  const size_t k = std::min(static_cast<size_t>(std::max(turn, 0)), options.noise_sigma.size() - 1);
  const auto id = static_cast<uint64_t>(trajectory.value);
  Rng persistent = Rng::ForKey(options.noise_seed, id, 0, 1);
  Rng fresh = Rng::ForKey(options.noise_seed, id, static_cast<uint64_t>(turn), 2);
  const double c = options.noise_correlation;
  const double z = std::sqrt(c) * persistent.Normal() + std::sqrt(1 - c) * fresh.Normal();
  return std::max(1.0, static_cast<double>(std::max<int64_t>(oracle_remaining, 1)) *
                           std::exp(options.noise_sigma[k] * z));
}

double HeddleRouter::Predict(const RouteRequest& request) {
  ++predictions_;
  if (request.oracle_remaining_tokens) {
    return PredictWithNoise(options_, request.trajectory, request.turn,
                            *request.oracle_remaining_tokens);
  }
  // No truth (a real cluster): the mean remaining length of finished trajectories that were
  // longer than this one is so far.
  ++history_predictions_;
  const auto generated = static_cast<double>(request.generated_tokens);
  double sum = 0;
  int64_t count = 0;
  for (int64_t total : history_) {
    if (static_cast<double>(total) > generated) {
      sum += static_cast<double>(total) - generated;
      ++count;
    }
  }
  return count > 0 ? sum / static_cast<double>(count) : kNoHistoryTokens;
}

bool HeddleRouter::InstancesChanged(std::span<const InstanceState> instances) const {
  if (instances.size() != seen_.size()) return true;
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!(seen_[i] == Seen{instances[i].id, instances[i].tp, instances[i].available})) return true;
  }
  return false;
}

void HeddleRouter::Repartition(std::span<const InstanceState> instances) {
  ++repartitions_;
  stale_ = false;
  seen_.clear();
  for (const InstanceState& s : instances) seen_.push_back(Seen{s.id, s.tp, s.available});
  // The population, longest first (ties by id), and the context the group model assumes.
  std::vector<std::pair<double, int64_t>> population;
  double context = 0;
  for (const auto& [id, t] : trajectories_) {
    population.emplace_back(t.predicted, id);
    context += static_cast<double>(t.context) + t.predicted / 2;
  }
  std::sort(population.begin(), population.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  snapshot_.clear();
  for (const auto& p : population) snapshot_.push_back(p.first);
  if (!population.empty()) context /= static_cast<double>(population.size());
  const model::GroupStepModel steps(*cost_, static_cast<int64_t>(context), options_.max_num_seqs);
  // The available instances that hold a sequence, largest TP first.
  ranges_.clear();
  for (const InstanceState& s : instances) {
    if (s.available && steps.Fit(s.tp) > 0) ranges_.push_back(Range{s.id, s.tp, 0, 0});
  }
  std::stable_sort(ranges_.begin(), ranges_.end(),
                   [](const Range& a, const Range& b) { return a.tp > b.tp; });
  if (ranges_.empty()) return;
  const model::Partition cut = model::PresortedPartition(
      snapshot_, ranges_.size(),
      [&](size_t j, int64_t count) { return steps.StepSeconds(ranges_[j].tp, count); },
      options_.max_units);
  const double n = std::max<double>(1, static_cast<double>(snapshot_.size()));
  for (size_t j = 0; j < ranges_.size(); ++j) {
    ranges_[j].lo = static_cast<double>(cut.begin[j]) / n;
    ranges_[j].hi = static_cast<double>(cut.end[j]) / n;
  }
  if (snapshot_.empty()) ranges_[0].hi = 1;  // nothing to cut yet: the largest TP takes it all
}

double HeddleRouter::RankFraction(double predicted) const {
  if (snapshot_.empty()) return 0;
  // Lengths strictly longer, in the descending snapshot.
  const auto longer =
      std::lower_bound(snapshot_.begin(), snapshot_.end(), predicted, std::greater<>()) -
      snapshot_.begin();
  return static_cast<double>(longer) / static_cast<double>(snapshot_.size());
}

void HeddleRouter::Rank(double predicted, int64_t id) {
  const std::pair<double, int64_t> key{predicted, id};
  ranked_.insert(std::lower_bound(ranked_.begin(), ranked_.end(), key, RankedBefore), key);
}

void HeddleRouter::Unrank(double predicted, int64_t id) {
  const std::pair<double, int64_t> key{predicted, id};
  const auto it = std::lower_bound(ranked_.begin(), ranked_.end(), key, RankedBefore);
  LIBRA_CHECK(it != ranked_.end() && *it == key) << "trajectory " << id << " is not ranked";
  ranked_.erase(it);
}

double HeddleRouter::LiveRankFraction(TrajectoryId id, double predicted) const {
  // Trajectories in flight predicted longer (ties: smaller id first), among all in flight.
  const auto before =
      std::lower_bound(ranked_.begin(), ranked_.end(),
                       std::pair<double, int64_t>{predicted, id.value}, RankedBefore) -
      ranked_.begin();
  return static_cast<double>(before) /
         static_cast<double>(std::max<size_t>(1, trajectories_.size()));
}

size_t HeddleRouter::RangeFor(double rank) const {
  size_t last = ranges_.size();
  for (size_t j = 0; j < ranges_.size(); ++j) {
    if (ranges_[j].lo >= ranges_[j].hi) continue;  // empty
    if (rank < ranges_[j].hi) return j;
    last = j;
  }
  return last;  // beyond every range: the shortest non-empty one
}

size_t HeddleRouter::FindRange(InstanceId id) const {
  for (size_t j = 0; j < ranges_.size(); ++j) {
    if (ranges_[j].id == id) return j;
  }
  return ranges_.size();
}

RouteDecision HeddleRouter::Route(const RouteRequest& request,
                                  std::span<const InstanceState> instances) {
  ++routes_;
  RouteDecision decision;
  const auto [it, added] = trajectories_.try_emplace(request.trajectory.value);
  Trajectory& t = it->second;
  if (t.turn != request.turn) {
    const double predicted = Predict(request);
    if (!added) Unrank(t.predicted, it->first);
    t.predicted = predicted;
    t.turn = request.turn;
    Rank(t.predicted, it->first);
  } else if (added) {
    Rank(t.predicted, it->first);
  }
  t.context = request.context_tokens;
  const auto population = static_cast<double>(trajectories_.size());
  const auto partitioned = static_cast<double>(snapshot_.size());
  if (stale_ || InstancesChanged(instances) ||
      std::abs(population - partitioned) >
          options_.repartition_drift * std::max(1.0, partitioned)) {
    Repartition(instances);
  }
  const bool resumed = request.turn > 0 && request.previous.valid();
  // A first turn is ranked against the last partition's lengths (a burst spreads like the
  // population); a later one against the trajectories in flight now: every remaining length
  // shrinks as its trajectory runs, so a stale snapshot would rank every re-prediction short.
  const double rank =
      resumed ? LiveRankFraction(request.trajectory, t.predicted) : RankFraction(t.predicted);
  const size_t target = RangeFor(rank);
  if (target == ranges_.size()) {
    ++no_instance_;
    decision.reason = "no instance available";
    return decision;
  }
  if (options_.priority) decision.priority = t.predicted;
  decision.setup_s = options_.prediction_latency_s;
  const size_t current = resumed ? FindRange(request.previous) : ranges_.size();
  if (!resumed) {
    ++placements_;
    decision.instance = ranges_[target].id;
    decision.reason = "heddle_placement";
    return decision;
  }
  if (current == ranges_.size()) {
    // Its instance left the partition (gone or draining): its rank's instance takes it.
    ++reroutes_;
    decision.instance = ranges_[target].id;
    decision.move_kv = true;
    decision.reason = "heddle_reroute";
    return decision;
  }
  const Range& range = ranges_[current];
  const double h = options_.migration_hysteresis;
  if (options_.migration && target != current && (rank < range.lo - h || rank >= range.hi + h)) {
    ++migrations_;
    decision.instance = ranges_[target].id;
    decision.move_kv = true;
    decision.reason = "heddle_migration";
    return decision;
  }
  ++resumes_;
  decision.instance = request.previous;
  decision.reason = "heddle_resume";
  return decision;
}

void HeddleRouter::OnTrajectoryDone(const TrajectoryObservation& observation) {
  if (auto it = trajectories_.find(observation.trajectory.value); it != trajectories_.end()) {
    Unrank(it->second.predicted, it->first);
    trajectories_.erase(it);
  }
  history_.push_back(observation.generated_tokens());
  if (history_.size() > kHistory) history_.pop_front();
}

void HeddleRouter::OnStep(int /*step*/) { stale_ = true; }

std::optional<double> HeddleRouter::Predicted(TrajectoryId trajectory) const {
  auto it = trajectories_.find(trajectory.value);
  if (it == trajectories_.end()) return std::nullopt;
  return it->second.predicted;
}

RouterMetrics HeddleRouter::Metrics() const {
  RouterMetrics m;
  m.values["routes"] = static_cast<double>(routes_);
  m.values["placements"] = static_cast<double>(placements_);
  m.values["migrations"] = static_cast<double>(migrations_);
  m.values["reroutes"] = static_cast<double>(reroutes_);
  m.values["resumes"] = static_cast<double>(resumes_);
  m.values["repartitions"] = static_cast<double>(repartitions_);
  m.values["predictions"] = static_cast<double>(predictions_);
  m.values["predictions/history"] = static_cast<double>(history_predictions_);
  m.values["no_instance"] = static_cast<double>(no_instance_);
  m.values["in_flight"] = static_cast<double>(trajectories_.size());
  return m;
}

}  // namespace libra::sched
