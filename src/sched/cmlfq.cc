#include "sched/cmlfq.h"

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "sched/instance_index.h"

namespace libra::sched {
namespace {

using recipe::OptionValue;

// The tree a warm_start option names, read through the caller's file reader; errors name the file.
Result<PrefixTree> ReadTree(const RouterDeps& deps, const std::string& path,
                            const PrefixTreeOptions& options) {
  if (!deps.read_file) return Status::InvalidArgument(path + ": this run reads no router files");
  LIBRA_ASSIGN_OR_RETURN(const std::string text, deps.read_file(path));
  Result<JsonValue> json = ParseJson(text);
  if (!json.ok()) return Status::InvalidArgument(path + ": " + json.status().message());
  Result<PrefixTree> tree = PrefixTree::FromJsonValue(*json, options);
  if (!tree.ok()) return Status::InvalidArgument(path + ": " + tree.status().message());
  return tree;
}

// Decodes `buckets = [{name = "short", max_tokens = 4000, tp = [1]}, ...]`.
bool ReadBuckets(recipe::OptionReader& reader, const recipe::OptionTable& table,
                 std::vector<CmlfqBucket>* out) {
  if (!reader.Has("buckets")) return true;
  const OptionValue* v = table.Find("buckets");
  if (v->kind != OptionValue::Kind::kArray || v->array.empty()) {
    reader.Error("buckets", "expected a non-empty array of tables {name, max_tokens, tp}");
    return false;
  }
  std::vector<CmlfqBucket> buckets;
  for (size_t i = 0; i < v->array.size(); ++i) {
    const OptionValue& e = v->array[i];
    const std::string at = "element " + std::to_string(i + 1) + ": ";
    if (e.kind != OptionValue::Kind::kTable) {
      reader.Error("buckets", at + "expected a table {name, max_tokens, tp}, got " + e.KindName());
      return false;
    }
    recipe::OptionTable sub;
    sub.entries = e.table;
    sub.where = e.where;
    sub.path = table.path.empty() ? "buckets" : table.path + ".buckets";
    recipe::OptionReader r(sub);
    CmlfqBucket b;
    if (!r.Has("name")) r.Error("name", "missing");
    if (!r.Has("max_tokens")) r.Error("max_tokens", "missing");
    if (!r.Has("tp")) r.Error("tp", "missing");
    b.name = r.String("name", "");
    b.max_tokens = r.Int("max_tokens", 1, 1);
    for (int64_t tp : r.IntList("tp", {}, 1, 1024)) b.tp.push_back(static_cast<int>(tp));
    if (r.Has("tp") && b.tp.empty()) r.Error("tp", "must list at least one TP degree");
    if (r.Has("name") && b.name.empty()) r.Error("name", "must not be empty");
    const Status s = r.Finish();
    if (!s.ok()) {
      reader.Error("buckets", at + s.message());
      return false;
    }
    for (const CmlfqBucket& other : buckets) {
      if (other.name == b.name) {
        reader.Error("buckets", at + "duplicate bucket name '" + b.name + "'");
        return false;
      }
    }
    buckets.push_back(std::move(b));
  }
  *out = std::move(buckets);
  return true;
}

}  // namespace

Result<std::unique_ptr<Router>> CmlfqRouter::Create(const recipe::OptionTable& table,
                                                    const RouterDeps& deps) {
  recipe::OptionReader reader(table);
  CmlfqOptions o;
  const bool reference = reader.Bool("reference", false);
  if (reference) {
    o.nearest_fallback = false;
    o.rotate_ties = false;
    o.remaining_includes_tool_tokens = true;
    o.load_per_gpu = false;
  } else {
    o.cost_based_moves = deps.cost != nullptr;
  }
  ReadBuckets(reader, table, &o.buckets);
  o.fallback = reader.Bool("fallback", o.fallback);
  o.nearest_fallback = reader.String("fallback_order", o.nearest_fallback ? "nearest" : "declared",
                                     {"declared", "nearest"}) == "nearest";
  o.global_fallback = reader.Bool("global_fallback", o.global_fallback);
  o.max_episodes_per_instance = static_cast<int>(
      reader.Int("max_episodes_per_instance", o.max_episodes_per_instance, 0, 1 << 20));
  o.round_robin =
      reader.String("selection", "least-conn", {"least-conn", "round-robin"}) == "round-robin";
  o.rotate_ties = reader.String("tie_break", o.rotate_ties ? "rotate" : "first",
                                {"rotate", "first"}) == "rotate";
  o.payload.small = reader.Int("payload_small_tokens", o.payload.small, 0);
  o.payload.large = reader.Int("payload_large_tokens", o.payload.large, 0);
  if (o.payload.large < o.payload.small) {
    reader.Error("payload_large_tokens", "must be >= payload_small_tokens");
  }
  o.tree.window = static_cast<int>(reader.Int("window", o.tree.window, 1, 1 << 20));
  o.tree.min_samples = reader.Double("min_samples", o.tree.min_samples, 0);
  o.rebuild_interval =
      static_cast<int>(reader.Int("rebuild_interval", o.rebuild_interval, 0, 1 << 30));
  o.max_recent_trajectories = static_cast<int>(
      reader.Int("max_recent_trajectories", o.max_recent_trajectories, 1, 1 << 24));
  o.remaining_includes_tool_tokens =
      reader.Bool("remaining_includes_tool_tokens", o.remaining_includes_tool_tokens);
  o.time_quantum = reader.Bool("time_quantum", o.time_quantum);
  o.cost_based_moves = reader.Bool("cost_based_moves", o.cost_based_moves);
  if (o.cost_based_moves && deps.cost == nullptr) {
    reader.Error("cost_based_moves", "needs a cost model, and this run has none");
  }
  o.load_per_gpu = reader.Bool("load_per_gpu", o.load_per_gpu);
  o.decay = reader.Double("decay", o.decay, 0, 1);
  if (o.decay <= 0) reader.Error("decay", "must be in (0, 1]");
  const std::string warm_start = reader.String("warm_start", "");
  LIBRA_RETURN_IF_ERROR(reader.Finish());

  PrefixTree tree(o.tree);
  if (!warm_start.empty()) {
    Result<PrefixTree> loaded = ReadTree(deps, warm_start, o.tree);
    if (!loaded.ok()) {
      const recipe::OptionValue* v = table.Find("warm_start");
      const std::string key = table.path.empty() ? "warm_start" : table.path + ".warm_start";
      return Status::InvalidRecipe(v->where.empty() ? key : v->where + ": " + key,
                                   loaded.status().message());
    }
    tree = std::move(loaded).value();
  }
  return std::unique_ptr<Router>(
      std::make_unique<CmlfqRouter>(std::move(o), deps, std::move(tree)));
}

CmlfqRouter::CmlfqRouter(CmlfqOptions options, const RouterDeps& deps, PrefixTree tree)
    : options_(std::move(options)), cost_(deps.cost), tree_(std::move(tree)) {
  LIBRA_CHECK(!options_.buckets.empty()) << "cmlfq needs at least one bucket";
  LIBRA_CHECK(!options_.cost_based_moves || cost_ != nullptr) << "cost_based_moves needs a model";
  extractor_ = ToolStateExtractor::Create(options_.payload).value();
  const int n = static_cast<int>(options_.buckets.size());
  for (int i = 0; i < n; ++i) sorted_.push_back(i);
  std::stable_sort(sorted_.begin(), sorted_.end(), [&](int a, int b) {
    return options_.buckets[static_cast<size_t>(a)].max_tokens <
           options_.buckets[static_cast<size_t>(b)].max_tokens;
  });
  int max_tp = 1;
  fallback_tp_.resize(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) {
    std::vector<int>& fb = fallback_tp_[static_cast<size_t>(b)];
    if (options_.nearest_fallback) {
      // Larger buckets ascending, then smaller buckets descending.
      const int pos =
          static_cast<int>(std::find(sorted_.begin(), sorted_.end(), b) - sorted_.begin());
      std::vector<int> order;
      for (int k = pos + 1; k < n; ++k) order.push_back(sorted_[static_cast<size_t>(k)]);
      for (int k = pos - 1; k >= 0; --k) order.push_back(sorted_[static_cast<size_t>(k)]);
      for (int o : order) {
        for (int tp : options_.buckets[static_cast<size_t>(o)].tp) fb.push_back(tp);
      }
    } else {
      for (int o = 0; o < n; ++o) {
        if (o == b) continue;
        for (int tp : options_.buckets[static_cast<size_t>(o)].tp) fb.push_back(tp);
      }
    }
    for (int tp : options_.buckets[static_cast<size_t>(b)].tp) max_tp = std::max(max_tp, tp);
  }
  tp_pointer_.assign(static_cast<size_t>(max_tp) + 1, 0);
  routes_.assign(static_cast<size_t>(n), 0);
  recent_.reserve(static_cast<size_t>(std::min(options_.max_recent_trajectories, 1 << 16)));
}

int CmlfqRouter::BucketFor(double remaining_tokens) const {
  for (int b : sorted_) {
    if (remaining_tokens <=
        static_cast<double>(options_.buckets[static_cast<size_t>(b)].max_tokens)) {
      return b;
    }
  }
  return sorted_.back();
}

int CmlfqRouter::EpisodesOn(InstanceId instance) const {
  const auto i = static_cast<size_t>(instance.value);
  return instance.valid() && i < load_.size() ? load_[i] : 0;
}

int CmlfqRouter::Load(const InstanceState& instance) const { return EpisodesOn(instance.id); }

void CmlfqRouter::AddLoad(InstanceId instance, int delta) {
  if (!instance.valid()) return;
  const auto i = static_cast<size_t>(instance.value);
  if (i >= load_.size()) load_.resize(std::max(i + 1, load_.size() * 2), 0);
  load_[i] = std::max(0, load_[i] + delta);
  if (indexed_from_ != nullptr && i < position_of_.size() && position_of_[i] != kNoPick) {
    const size_t at = position_of_[i];
    LoadLevels& levels = groups_[group_of_[at]].levels;
    if (levels.present(at)) levels.Set(at, load_[i]);
  }
}

void CmlfqRouter::IndexInstances(const RouteRequest& request,
                                 std::span<const InstanceState> instances) {
  use_index_ = request.index != nullptr && !options_.round_robin && !instances.empty();
  if (!use_index_) {
    indexed_from_ = nullptr;
    return;
  }
  if (request.index == indexed_from_ && request.index->epoch() == indexed_epoch_ &&
      group_of_.size() == instances.size()) {
    return;
  }
  // The list or an availability changed: index the instances again, by TP and episode load.
  const size_t n = instances.size();
  groups_.clear();
  group_of_.assign(n, 0);
  position_of_.clear();
  for (size_t i = 0; i < n; ++i) {
    const InstanceState& s = instances[i];
    auto group = std::find_if(groups_.begin(), groups_.end(),
                              [&](const TpGroup& g) { return g.tp == s.tp; });
    if (group == groups_.end()) group = groups_.insert(groups_.end(), TpGroup{s.tp, LoadLevels()});
    group_of_[i] = static_cast<uint32_t>(group - groups_.begin());
    const auto id = static_cast<size_t>(s.id.value);
    if (!s.id.valid() || (id < position_of_.size() && position_of_[id] != kNoPick)) {
      use_index_ = false;  // ids the index cannot map back: scan instead
      indexed_from_ = nullptr;
      return;
    }
    if (id >= position_of_.size()) position_of_.resize(id + 1, kNoPick);
    position_of_[id] = i;
  }
  for (TpGroup& g : groups_) g.levels.Reset(n);
  for (size_t i = 0; i < n; ++i) {
    if (instances[i].available) groups_[group_of_[i]].levels.Set(i, Load(instances[i]));
  }
  indexed_from_ = request.index;
  indexed_epoch_ = request.index->epoch();
}

CmlfqRouter::Pick CmlfqRouter::SelectIndexed(int tp, size_t n, size_t pointer, bool capped) const {
  const size_t start = options_.rotate_ties ? pointer % n : 0;
  if (tp != 0) {
    auto group =
        std::find_if(groups_.begin(), groups_.end(), [&](const TpGroup& g) { return g.tp == tp; });
    if (group == groups_.end()) return {};
    const int least = group->levels.MinLoad();
    if (least < 0) return {};
    const int cap = options_.max_episodes_per_instance;
    if (capped && cap > 0 && least >= (options_.load_per_gpu ? cap * std::max(1, tp) : cap)) {
      return {};
    }
    return Pick{group->levels.FirstWith(least, start), PickKind::kPreferred, tp};
  }
  // Every TP: the least episodes (per GPU with load_per_gpu), the first from `start` among equals.
  size_t best = kNoPick;
  int64_t best_load = 0, best_tp = 1;
  for (const TpGroup& g : groups_) {
    const int least = g.levels.MinLoad();
    if (least < 0) continue;
    const size_t i = g.levels.FirstWith(least, start);
    const int64_t gpus = options_.load_per_gpu ? std::max(1, g.tp) : 1;
    const int64_t lhs = static_cast<int64_t>(least) * best_tp;
    const int64_t rhs = best_load * gpus;
    if (best == kNoPick || lhs < rhs ||
        (lhs == rhs && (i + n - start) % n < (best + n - start) % n)) {
      best = i;
      best_load = least;
      best_tp = gpus;
    }
  }
  if (best == kNoPick) return {};
  return Pick{best, PickKind::kPreferred, tp};
}

int CmlfqRouter::Cap(const InstanceState& instance) const {
  const int cap = options_.max_episodes_per_instance;
  return options_.load_per_gpu ? cap * std::max(1, instance.tp) : cap;
}

bool CmlfqRouter::Less(const InstanceState& a, const InstanceState& b) const {
  if (!options_.load_per_gpu) return Load(a) < Load(b);
  // Episodes per GPU, compared exactly: load_a / tp_a < load_b / tp_b.
  return static_cast<int64_t>(Load(a)) * std::max(1, b.tp) <
         static_cast<int64_t>(Load(b)) * std::max(1, a.tp);
}

CmlfqRouter::Pick CmlfqRouter::SelectInTp(int tp, std::span<const InstanceState> instances,
                                          bool capped) const {
  auto eligible = [&](const InstanceState& s) {
    if (!s.available) return false;
    if (tp != 0 && s.tp != tp) return false;
    return !capped || options_.max_episodes_per_instance <= 0 || Load(s) < Cap(s);
  };
  const size_t n = instances.size();
  const size_t pointer =
      tp == 0 ? global_pointer_
              : (static_cast<size_t>(tp) < tp_pointer_.size() ? tp_pointer_[static_cast<size_t>(tp)]
                                                              : 0);
  if (use_index_) return SelectIndexed(tp, n, pointer, capped);
  if (options_.round_robin && tp != 0) {
    size_t count = 0;
    for (const InstanceState& s : instances) count += eligible(s) ? 1 : 0;
    if (count == 0) return {};
    size_t k = pointer % count;
    for (size_t i = 0; i < n; ++i) {
      if (!eligible(instances[i])) continue;
      if (k-- == 0) return Pick{i, PickKind::kPreferred, tp};
    }
    return {};
  }
  // Least-loaded; among equals the first from the pointer (rotation) or from the front.
  const size_t start = options_.rotate_ties ? pointer % n : 0;
  size_t best = kNoPick;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    if (eligible(instances[i]) && (best == kNoPick || Less(instances[i], instances[best]))) {
      best = i;
    }
  }
  if (best == kNoPick) return {};
  return Pick{best, PickKind::kPreferred, tp};
}

CmlfqRouter::Pick CmlfqRouter::Select(int bucket, std::span<const InstanceState> instances) const {
  for (int tp : options_.buckets[static_cast<size_t>(bucket)].tp) {
    Pick p = SelectInTp(tp, instances, /*capped=*/true);
    if (p.index != kNoPick) return p;
  }
  if (options_.fallback) {
    for (int tp : fallback_tp_[static_cast<size_t>(bucket)]) {
      Pick p = SelectInTp(tp, instances, /*capped=*/true);
      if (p.index != kNoPick) {
        p.kind = PickKind::kFallback;
        return p;
      }
    }
  }
  if (options_.global_fallback) {
    Pick p = SelectInTp(0, instances, /*capped=*/false);
    if (p.index != kNoPick) {
      p.kind = PickKind::kGlobal;
      return p;
    }
  }
  return {};
}

void CmlfqRouter::Commit(const Pick& pick, std::span<const InstanceState> instances) {
  const size_t n = instances.size();
  size_t& pointer = pick.tp == 0 ? global_pointer_ : tp_pointer_[static_cast<size_t>(pick.tp)];
  if (options_.round_robin && pick.tp != 0) {
    ++pointer;
  } else if (options_.rotate_ties) {
    pointer = (pick.index + 1) % n;
  }
}

void CmlfqRouter::CountRoute(int bucket, const Pick& pick) {
  ++routes_[static_cast<size_t>(bucket)];
  if (pick.kind == PickKind::kFallback) ++fallbacks_;
  if (pick.kind == PickKind::kGlobal) {
    ++fallbacks_;
    ++global_fallbacks_;
  }
}

std::string_view CmlfqRouter::Reason(Why why, const Pick& pick) {
  static constexpr std::string_view kReasons[3][2] = {
      {"cmlfq_initial_placement", "cmlfq_initial_placement_fallback"},
      {"cmlfq_migration", "cmlfq_migration_fallback"},
      {"cmlfq_reroute", "cmlfq_reroute_fallback"},
  };
  if (pick.kind == PickKind::kGlobal) return "global_fallback";
  return kReasons[why][pick.kind == PickKind::kFallback ? 1 : 0];
}

double CmlfqRouter::DecodeSeconds(int tp, int sequences, int64_t context, double remaining) const {
  const double mid = static_cast<double>(context) + remaining / 2;
  if (static_cast<double>(cost_->KvCapacityTokens(tp)) < static_cast<double>(context) + remaining) {
    return std::numeric_limits<double>::infinity();
  }
  model::IterationLoad load;
  load.decode_sequences = std::max(1, sequences);
  load.decode_context_tokens = static_cast<int64_t>(mid) * load.decode_sequences;
  return remaining * cost_->IterationTime(tp, load);
}

RouteDecision CmlfqRouter::Route(const RouteRequest& request,
                                 std::span<const InstanceState> instances) {
  IndexInstances(request, instances);
  const uint32_t slot = episode_of_.Find(static_cast<uint64_t>(request.trajectory.value));
  if (slot == WindowIndex::kNone) return PlaceNewEpisode(request, instances);
  Episode& ep = episodes_[slot];
  const Target target = TargetBucket(request, ep);
  const bool current_ok = ep.instance_index < instances.size() &&
                          instances[ep.instance_index].id == ep.instance &&
                          instances[ep.instance_index].available;
  if (target.bucket != ep.bucket) {
    const Pick pick = Select(target.bucket, instances);
    if (pick.index == kNoPick) {
      ++moves_failed_;
    } else if (MovePays(request, ep, target, pick, current_ok, instances)) {
      Reassign(ep, target.bucket, pick, instances);
      ++(target.quantum ? moves_quantum_ : moves_tree_);
      return RouteDecision{ep.instance, Reason(kMigration, pick),
                           options_.buckets[static_cast<size_t>(target.bucket)].name};
    }
  }
  const std::string_view name = options_.buckets[static_cast<size_t>(ep.bucket)].name;
  if (current_ok) {
    ++routes_[static_cast<size_t>(ep.bucket)];
    return RouteDecision{ep.instance, "cmlfq_resume", name};
  }
  // 6. The episode's instance is gone: re-select in its bucket.
  const Pick pick = Select(ep.bucket, instances);
  if (pick.index == kNoPick) {
    ++failed_routes_;
    return RouteDecision{std::nullopt, "no_available_instance", name};
  }
  Reassign(ep, ep.bucket, pick, instances);
  ++reroutes_;
  return RouteDecision{ep.instance, Reason(kReroute, pick), name};
}

RouteDecision CmlfqRouter::PlaceNewEpisode(const RouteRequest& request,
                                           std::span<const InstanceState> instances) {
  // 1. A new episode starts in the shortest bucket.
  const int bucket = sorted_.front();
  const std::string_view name = options_.buckets[static_cast<size_t>(bucket)].name;
  const Pick pick = Select(bucket, instances);
  if (pick.index == kNoPick) {
    ++failed_routes_;
    return RouteDecision{std::nullopt, "no_available_instance", name};
  }
  Commit(pick, instances);
  uint32_t e;
  if (!free_episodes_.empty()) {
    e = free_episodes_.back();
    free_episodes_.pop_back();
  } else {
    e = static_cast<uint32_t>(episodes_.size());
    episodes_.emplace_back();
  }
  Episode& ep = episodes_[e];
  episode_of_.Insert(static_cast<uint64_t>(request.trajectory.value), e);
  ep.prompt = request.prompt;
  ep.bucket = bucket;
  ep.instance = instances[pick.index].id;
  ep.instance_index = pick.index;
  ep.last_tool_turn = request.last_tool ? request.turn : -1;
  ep.states.clear();
  AddLoad(ep.instance, +1);
  ++placements_;
  CountRoute(bucket, pick);
  return RouteDecision{ep.instance, Reason(kInitialPlacement, pick), name};
}

CmlfqRouter::Target CmlfqRouter::TargetBucket(const RouteRequest& request, Episode& ep) {
  Target target{ep.bucket, nullptr, false};
  if (!request.last_tool || request.turn <= ep.last_tool_turn) return target;
  // 2.-4. A tool return: look the state sequence up and decide the target bucket.
  ep.last_tool_turn = request.turn;
  const ToolObservation& tool = *request.last_tool;
  ep.states.push_back(tree_.states().Intern(
      tool.tool.empty() ? std::string_view("unknown") : std::string_view(tool.tool),
      extractor_.Classify(tool.output_tokens), tool.status));
  target.node = tree_.Lookup(ep.prompt, ep.states);
  if (target.node != nullptr) {
    const int by_mean = BucketFor(target.node->mean);
    const int by_p90 = BucketFor(target.node->p90);
    if (by_mean != by_p90) {
      ++disagree_;
    } else {
      target.bucket = by_mean;
    }
    return target;
  }
  ++no_evidence_;
  if (options_.time_quantum &&
      request.generated_tokens >= options_.buckets[static_cast<size_t>(ep.bucket)].max_tokens) {
    const auto pos =
        static_cast<size_t>(std::find(sorted_.begin(), sorted_.end(), ep.bucket) - sorted_.begin());
    if (pos + 1 < sorted_.size()) {
      target.bucket = sorted_[pos + 1];
      target.quantum = true;
    }
  }
  return target;
}

bool CmlfqRouter::MovePays(const RouteRequest& request, const Episode& ep, const Target& target,
                           const Pick& pick, bool current_ok,
                           std::span<const InstanceState> instances) {
  if (!options_.cost_based_moves) return true;
  // 5. Move only if re-prefill plus decode on the target beats decode where it is.
  const double remaining =
      target.node != nullptr
          ? target.node->mean
          : std::max(1.0, static_cast<double>(
                              options_.buckets[static_cast<size_t>(target.bucket)].max_tokens -
                              request.generated_tokens));
  const int64_t context = std::max<int64_t>(1, request.context_tokens);
  const InstanceState& to = instances[pick.index];
  const double stay = current_ok
                          ? DecodeSeconds(instances[ep.instance_index].tp,
                                          Load(instances[ep.instance_index]), context, remaining)
                          : std::numeric_limits<double>::infinity();
  const bool same = to.id == ep.instance;
  const double go = (same ? 0.0 : cost_->PrefillTime(to.tp, context, 0)) +
                    DecodeSeconds(to.tp, Load(to) + (same ? 0 : 1), context, remaining);
  if (go < stay) {
    ++moves_cost_;
    return true;
  }
  ++cost_vetoes_;
  return false;
}

void CmlfqRouter::Reassign(Episode& ep, int bucket, const Pick& pick,
                           std::span<const InstanceState> instances) {
  Commit(pick, instances);
  AddLoad(ep.instance, -1);
  ep.bucket = bucket;
  ep.instance = instances[pick.index].id;
  ep.instance_index = pick.index;
  AddLoad(ep.instance, +1);
  CountRoute(bucket, pick);
}

void CmlfqRouter::OnTrajectoryDone(const TrajectoryObservation& observation) {
  const uint64_t key = static_cast<uint64_t>(observation.trajectory.value);
  const uint32_t slot = episode_of_.Find(key);
  if (slot != WindowIndex::kNone) {
    AddLoad(episodes_[slot].instance, -1);
    episode_of_.Erase(key);
    free_episodes_.push_back(slot);
  }
  // 8. Single-turn episodes never enter the tree.
  const size_t returns = std::min(observation.tools.size(), observation.turn_tokens.size());
  if (returns == 0) return;
  const bool with_tools = options_.remaining_includes_tool_tokens;
  TreeTrajectory& t = scratch_;
  t.prompt = observation.prompt;
  t.states.resize(returns);
  t.remaining.resize(returns);
  double after = 0;  // tokens produced after return i
  for (size_t i = observation.turn_tokens.size(); i-- > 0;) {
    if (i < returns) {
      t.remaining[i] = after;
      const ToolObservation& tool = observation.tools[i];
      t.states[i] = tree_.states().Intern(
          tool.tool.empty() ? std::string_view("unknown") : std::string_view(tool.tool),
          extractor_.Classify(tool.output_tokens), tool.status);
      // Reference token positions are taken after the tool text is in the context, so the
      // output of tool i is before position i, and the outputs of later tools after it.
      if (with_tools) after += static_cast<double>(std::max<int64_t>(0, tool.output_tokens));
    }
    after += static_cast<double>(std::max<int64_t>(0, observation.turn_tokens[i]));
  }
  t.total_length = after;
  tree_.Insert(t);
  const auto cap = static_cast<size_t>(options_.max_recent_trajectories);
  if (recent_.size() < cap) {
    recent_.push_back(t);
  } else {
    TreeTrajectory& old = recent_[recent_next_];
    old.prompt = t.prompt;
    old.states.assign(t.states.begin(), t.states.end());
    old.remaining.assign(t.remaining.begin(), t.remaining.end());
    old.total_length = t.total_length;
    recent_next_ = (recent_next_ + 1) % cap;
  }
}

void CmlfqRouter::OnStep(int step) {
  if (options_.decay < 1) tree_.Decay(options_.decay);
  if (options_.rebuild_interval > 0 && step > 0 && step % options_.rebuild_interval == 0 &&
      !recent_.empty()) {
    // 9. Rebuild from the recent trajectories, oldest first (this discards a warm-start tree).
    const std::span<const TreeTrajectory> recent(recent_);
    tree_.Rebuild(recent.subspan(recent_next_), recent.first(recent_next_));
    ++rebuilds_;
  }
}

RouterMetrics CmlfqRouter::Metrics() const {
  RouterMetrics m;
  for (size_t b = 0; b < options_.buckets.size(); ++b) {
    m.values["routes/" + options_.buckets[b].name] = static_cast<double>(routes_[b]);
  }
  auto set = [&](const char* key, int64_t v) { m.values[key] = static_cast<double>(v); };
  set("placements", placements_);
  set("fallbacks", fallbacks_);
  set("global_fallbacks", global_fallbacks_);
  set("failed_routes", failed_routes_);
  set("moves/tree", moves_tree_);
  set("moves/quantum", moves_quantum_);
  set("moves/cost", moves_cost_);
  set("cost_vetoes", cost_vetoes_);
  set("moves_failed", moves_failed_);
  set("mean_p90_disagree", disagree_);
  set("no_tree_evidence", no_evidence_);
  set("reroutes", reroutes_);
  set("tree_rebuilds", rebuilds_);
  set("tree_nodes", static_cast<int64_t>(tree_.node_count()));
  set("tree_insertions", tree_.total_insertions());
  set("episodes_in_flight", static_cast<int64_t>(episode_of_.size()));
  return m;
}

}  // namespace libra::sched
