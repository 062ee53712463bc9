#include "sched/la_mlfq.h"

#include <iterator>

namespace libra::sched {
namespace {

constexpr std::string_view kBucketNames[2] = {"short", "long"};

/// Why a turn went to its bucket, and the same on a fallback or global-fallback instance
/// (TpPickKind's order).
enum Why { kPromptLength, kDemoted, kHistoryHit, kMigrated };
constexpr std::string_view kWhy[4][3] = {
    {"prompt length", "prompt length, fallback", "prompt length, global fallback"},
    {"demoted", "demoted, fallback", "demoted, global fallback"},
    {"history hit", "history hit, fallback", "history hit, global fallback"},
    {"migrated", "migrated, fallback", "migrated, global fallback"},
};
static_assert(static_cast<int>(TpPickKind::kPreferred) == 0 &&
                  static_cast<int>(TpPickKind::kFallback) == 1 &&
                  static_cast<int>(TpPickKind::kGlobal) == 2,
              "kWhy's columns follow TpPickKind");

}  // namespace

Result<std::unique_ptr<Router>> LaMlfqRouter::Create(const recipe::OptionTable& options,
                                                     const RouterDeps& /*deps*/) {
  recipe::OptionReader reader(options);
  Options o;
  o.short_prompt_tokens =
      reader.Int("short_prompt_tokens", o.short_prompt_tokens, 0, int64_t{1} << 40);
  o.short_max_tokens = reader.Int("short_max_tokens", o.short_max_tokens, 1, int64_t{1} << 40);
  o.migrate = reader.Bool("migrate", o.migrate);
  o.history_ttl = static_cast<int>(reader.Int("history_ttl", o.history_ttl, 0, 1 << 20));
  o.short_rule.preferred = ReadTpList(reader, "short_tp", o.short_rule.preferred, false);
  o.short_rule.fallback = ReadTpList(reader, "short_fallback_tp", o.short_rule.fallback, true);
  o.long_rule.preferred = ReadTpList(reader, "long_tp", o.long_rule.preferred, false);
  o.long_rule.fallback = ReadTpList(reader, "long_fallback_tp", o.long_rule.fallback, true);
  o.max_active = static_cast<int>(reader.Int("max_active", o.max_active, 0, 1 << 20));
  o.enable_fallback = reader.Bool("enable_fallback", o.enable_fallback);
  LIBRA_RETURN_IF_ERROR(reader.Finish());
  return std::unique_ptr<Router>(std::make_unique<LaMlfqRouter>(o));
}

bool LaMlfqRouter::Expired(const HistoryEntry& entry) const {
  return options_.history_ttl > 0 && step_ - entry.step > options_.history_ttl;
}

RouteDecision LaMlfqRouter::Route(const RouteRequest& request,
                                  std::span<const InstanceState> instances) {
  TrajectoryState& state = trajectories_[request.trajectory];
  Bucket bucket = kShort;
  Why why = kPromptLength;
  bool history_hit = false;
  if (state.demoted) {
    bucket = kLong;
    why = kDemoted;
  } else {
    auto it = history_.find(request.prompt);
    if (it != history_.end() && Expired(it->second)) {
      history_.erase(it);
      it = history_.end();
    }
    if (it != history_.end()) {
      bucket = it->second.bucket;
      why = kHistoryHit;
      history_hit = true;
    } else {
      bucket = request.prompt_tokens <= options_.short_prompt_tokens ? kShort : kLong;
    }
    if (options_.migrate && bucket == kShort &&
        request.generated_tokens > options_.short_max_tokens) {
      bucket = kLong;
      why = kMigrated;
      history_hit = false;
      state.demoted = true;
      ++migrations_;
    }
  }
  const std::string_view bucket_name = kBucketNames[bucket];
  const std::optional<TpPick> pick =
      selector_.Select(bucket == kShort ? options_.short_rule : options_.long_rule, instances);
  if (!pick) {
    ++no_instance_;
    return RouteDecision{std::nullopt, "no instance available", bucket_name};
  }
  state.last_bucket = bucket;
  ++routes_[bucket];
  if (history_hit) ++history_hits_;
  if (pick->kind == TpPickKind::kFallback) {
    ++fallbacks_;
  } else if (pick->kind == TpPickKind::kGlobal) {
    ++fallbacks_;
    ++global_fallbacks_;
  }
  return RouteDecision{instances[pick->index].id, kWhy[why][static_cast<int>(pick->kind)],
                       bucket_name};
}

void LaMlfqRouter::OnTurnDone(const TurnObservation& observation) {
  auto it = trajectories_.find(observation.trajectory);
  if (it == trajectories_.end()) return;
  history_[observation.prompt] = HistoryEntry{it->second.last_bucket, step_};
}

void LaMlfqRouter::OnTrajectoryDone(const TrajectoryObservation& observation) {
  trajectories_.erase(observation.trajectory);
}

void LaMlfqRouter::OnStep(int step) {
  step_ = step;
  if (options_.history_ttl <= 0) return;
  for (auto it = history_.begin(); it != history_.end();) {
    it = Expired(it->second) ? history_.erase(it) : std::next(it);
  }
}

RouterMetrics LaMlfqRouter::Metrics() const {
  RouterMetrics m;
  m.values["routes/short"] = static_cast<double>(routes_[kShort]);
  m.values["routes/long"] = static_cast<double>(routes_[kLong]);
  m.values["history_hits"] = static_cast<double>(history_hits_);
  m.values["migrations"] = static_cast<double>(migrations_);
  m.values["fallbacks"] = static_cast<double>(fallbacks_);
  m.values["global_fallbacks"] = static_cast<double>(global_fallbacks_);
  m.values["no_instance"] = static_cast<double>(no_instance_);
  m.values["history_size"] = static_cast<double>(history_.size());
  return m;
}

}  // namespace libra::sched
