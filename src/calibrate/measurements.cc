#include "calibrate/measurements.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "common/strings.h"
#include "recipe/recipe_parser.h"

namespace libra::calibrate {
namespace {

/// Where a recorded turn sits in time and what it did.
struct TurnSpan {
  const records::TurnRecord* turn = nullptr;
  int64_t context_before = 0;  // prompt + earlier turns' tokens and tool outputs
  PrefillChunk prefill;        // the new context this turn had to prefill
  bool excluded = false;       // overlaps a pause (sync, or training on a colocated layout)
  double start() const { return turn->start_s; }
  double end() const { return turn->end_s; }
};

/// The applied layout in force at each step: the latest applied decision at or before it.
std::map<int, std::string> LayoutsByStep(const std::vector<records::DecisionRecord>& decisions,
                                         const std::vector<records::StepRecord>& steps) {
  std::vector<const records::DecisionRecord*> applied;
  for (const records::DecisionRecord& d : decisions) {
    if (d.applied) applied.push_back(&d);
  }
  std::stable_sort(applied.begin(), applied.end(),
                   [](const auto* a, const auto* b) { return a->step < b->step; });
  std::map<int, std::string> layouts;
  for (const records::StepRecord& s : steps) {
    const records::DecisionRecord* in_force = nullptr;
    for (const records::DecisionRecord* d : applied) {
      if (d->step <= s.step) in_force = d;
    }
    if (in_force != nullptr) layouts[s.step] = in_force->layout;
  }
  return layouts;
}

std::string RunName(const records::RunInfo& run) {
  return StrFormat("run %lld", static_cast<long long>(run.id));
}

}  // namespace

Term TermOf(const Measurement& m) {
  if (std::holds_alternative<DecodeTurn>(m.what)) return Term::kRollout;
  if (std::holds_alternative<TrainStep>(m.what)) return Term::kTrain;
  return Term::kSync;
}

double Predict(const model::CostModel& model, const Measurement& m) {
  if (const auto* turn = std::get_if<DecodeTurn>(&m.what)) {
    // Contexts grow by one token per sequence per iteration: start the span so that its mean
    // context sum is the recorded one.
    const double growth = static_cast<double>(turn->sequences) * (turn->tokens - 1) / 2.0;
    const auto start =
        static_cast<int64_t>(std::max(0.0, static_cast<double>(turn->context_tokens) - growth));
    double seconds = model.DecodeSpanTime(turn->tp, turn->sequences, start, turn->tokens);
    model::IterationLoad base;
    base.decode_sequences = turn->sequences;
    base.decode_context_tokens = turn->context_tokens;
    const double base_s = model.IterationTime(turn->tp, base);
    for (const PrefillChunk& p : turn->prefills) {
      model::IterationLoad with = base;
      with.AddPrefill(p.new_tokens, p.prior_tokens);
      seconds += model.IterationTime(turn->tp, with) - base_s;
    }
    return seconds;
  }
  if (const auto* step = std::get_if<TrainStep>(&m.what)) {
    double seconds =
        model.TrainStep(step->layout, model::TrainPasses(), step->sequence_tokens).step_s;
    if (step->colocated) {
      seconds += model.RoleSwitchTime(
                     {model::SwitchDirection::kRolloutToTrain, step->rollout_tp, step->layout}) +
                 model.RoleSwitchTime(
                     {model::SwitchDirection::kTrainToRollout, step->rollout_tp, step->layout});
    }
    return seconds;
  }
  return model.WeightSyncTime(std::get<WeightSync>(m.what).request);
}

Result<RecordedLayout> ParseRecordedLayout(const std::string& text) {
  RecordedLayout layout;
  int train_gpus = 0;
  int consumed = 0;
  model::TrainLayout& t = layout.train;
  const int fields = std::sscanf(text.c_str(), "train %d (tp%d pp%d dp%d mb%d) | rollout %n",
                                 &train_gpus, &t.tp, &t.pp, &t.dp, &t.micro_batch, &consumed);
  if (fields != 5 || consumed == 0) {
    return Status::InvalidArgument("layout '" + text +
                                   "' is not 'train N (tpT ppP dpD mbM) | rollout ...'");
  }
  std::string rest = text.substr(static_cast<size_t>(consumed));
  const std::string colocated = " (colocated)";
  if (rest.size() >= colocated.size() &&
      rest.compare(rest.size() - colocated.size(), colocated.size(), colocated) == 0) {
    layout.colocated = true;
    rest.resize(rest.size() - colocated.size());
  }
  if (rest == "none") return layout;
  for (const std::string& part : StrSplit(rest, '+')) {
    int tp = 0;
    int count = 0;
    char extra = 0;
    if (std::sscanf(part.c_str(), "tp%dx%d%c", &tp, &count, &extra) != 2 || tp < 1 || count < 1) {
      return Status::InvalidArgument("layout '" + text + "': rollout part '" + part +
                                     "' is not tpTxN");
    }
    layout.rollout.emplace_back(tp, count);
  }
  return layout;
}

namespace {

/// The recorded layout in force at each step; a step whose layout does not parse is left out
/// (a note says so).
std::map<int, RecordedLayout> RecordedLayouts(const RunRecords& records, const std::string& name,
                                              std::vector<std::string>* notes) {
  std::map<int, RecordedLayout> layouts;
  for (const auto& [step, text] : LayoutsByStep(records.decisions, records.steps)) {
    auto layout = ParseRecordedLayout(text);
    if (!layout.ok()) {
      notes->push_back(name + ": " + layout.status().message() + "; step " + std::to_string(step) +
                       " left out");
      continue;
    }
    layouts[step] = *layout;
  }
  return layouts;
}

/// One train and one sync measurement per step.
void AddTrainAndSync(const RunRecords& records, const std::map<int, RecordedLayout>& layouts,
                     model::SyncPath sync_path, const std::string& name, MeasurementSet* set) {
  // Tokens per trajectory as the trainer saw them: prompt, generated and tool outputs.
  std::map<int64_t, int64_t> tool_tokens;
  for (const records::TurnRecord& turn : records.turns) {
    tool_tokens[turn.trajectory] += turn.tool_output_tokens;
  }
  for (const records::StepRecord& s : records.steps) {
    auto layout = layouts.find(s.step);
    if (layout == layouts.end()) continue;
    const RecordedLayout& l = layout->second;
    const std::string where = StrFormat("%s step %d", name.c_str(), s.step);
    int max_tp = 1;
    for (const auto& [tp, count] : l.rollout) max_tp = std::max(max_tp, tp);
    if (s.train_s > 0) {
      TrainStep train;
      train.layout = l.train;
      train.colocated = l.colocated;
      train.rollout_tp = max_tp;
      for (const records::TrajectoryRecord& t : records.trajectories) {
        if (t.step != s.step) continue;
        train.sequence_tokens.push_back(t.prompt_tokens + t.generated_tokens + tool_tokens[t.id]);
      }
      if (l.colocated && l.rollout.size() > 1) {
        set->notes.push_back(where + ": colocated with several TP degrees; train step left out");
      } else if (!train.sequence_tokens.empty()) {
        set->measurements.push_back(Measurement{std::move(train), s.train_s, where});
      }
    }
    if (s.sync_s > 0) {
      WeightSync sync;
      sync.request.path = sync_path;
      sync.request.train = l.train;
      sync.request.rollout_tp = max_tp;
      sync.request.cross_node = !l.colocated;
      set->measurements.push_back(Measurement{sync, s.sync_s, where + " sync"});
    }
  }
}

/// The run's turns per instance in start order, each with its context before it and the prefill
/// it needed; turns overlapping a pause (a sync, or training on a colocated layout) are marked.
/// `unknown` counts the turns of unrecorded trajectories (left out).
std::map<int64_t, std::vector<TurnSpan>> TurnSpans(const RunRecords& records, bool colocated,
                                                   size_t* unknown) {
  std::vector<std::pair<double, double>> pauses;
  for (const records::StepRecord& s : records.steps) {
    const double sync_start = s.end_s - s.sync_s;
    if (s.sync_s > 0) pauses.emplace_back(sync_start, s.end_s);
    if (colocated && s.train_s > 0) pauses.emplace_back(sync_start - s.train_s, sync_start);
  }
  std::map<int64_t, const records::TrajectoryRecord*> trajectories;
  for (const records::TrajectoryRecord& t : records.trajectories) trajectories[t.id] = &t;
  std::map<int64_t, std::vector<TurnSpan>> by_instance;
  int64_t context = 0;
  const records::TurnRecord* previous = nullptr;
  std::vector<const records::TurnRecord*> ordered;
  for (const records::TurnRecord& turn : records.turns) ordered.push_back(&turn);
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    return std::tie(a->trajectory, a->turn) < std::tie(b->trajectory, b->turn);
  });
  for (const records::TurnRecord* turn_record : ordered) {
    const records::TurnRecord& turn = *turn_record;
    auto trajectory = trajectories.find(turn.trajectory);
    if (trajectory == trajectories.end()) {
      ++*unknown;
      continue;
    }
    const bool first = previous == nullptr || previous->trajectory != turn.trajectory;
    TurnSpan span;
    span.turn = &turn;
    if (first) {
      context = trajectory->second->prompt_tokens;
      span.prefill = {context, 0};
    } else if (previous->instance == turn.instance) {
      span.prefill = {previous->tool_output_tokens, context - previous->tool_output_tokens};
    } else {
      span.prefill = {context, 0};  // moved: the context is built again
    }
    span.context_before = context;
    for (const auto& [from, to] : pauses) {
      span.excluded = span.excluded || (turn.start_s < to && turn.end_s > from);
    }
    by_instance[turn.instance].push_back(span);
    context += turn.generated_tokens + turn.tool_output_tokens;
    previous = &turn;
  }
  for (auto& [instance, spans] : by_instance) {
    std::stable_sort(spans.begin(), spans.end(),
                     [](const TurnSpan& a, const TurnSpan& b) { return a.start() < b.start(); });
  }
  return by_instance;
}

/// The decode turn `self` ran as, among the turns `spans` of its instance: the mean batch over
/// its iterations. Every running sequence takes part in every iteration, so another turn shares
/// about as many iterations with this one as it generated tokens while both ran (its tokens
/// spread evenly over its time). Contexts grow linearly.
DecodeTurn TurnAsRun(const std::vector<TurnSpan>& spans, const TurnSpan& self, int tp) {
  const double own_tokens = static_cast<double>(self.turn->generated_tokens);
  double sequences = 0;
  double context_sum = 0;
  DecodeTurn turn;
  turn.tp = tp;
  turn.tokens = self.turn->generated_tokens;
  for (const TurnSpan& other : spans) {
    if (other.start() >= self.end()) break;
    if (other.start() >= self.start()) turn.prefills.push_back(other.prefill);
    const double from = std::max(self.start(), other.start());
    const double to = std::min(self.end(), other.end());
    if (to <= from) continue;
    const double length = other.end() - other.start();
    const double tokens = static_cast<double>(other.turn->generated_tokens);
    const double shared = length > 0 ? tokens * (to - from) / length : 0;
    const double grown = length > 0 ? tokens * ((from + to) / 2 - other.start()) / length : 0;
    sequences += shared / own_tokens;
    context_sum += shared / own_tokens * (static_cast<double>(other.context_before) + grown);
  }
  turn.sequences = std::max<int64_t>(1, std::llround(sequences));
  turn.context_tokens = std::llround(context_sum);
  return turn;
}

/// One rollout measurement per turn (evenly thinned to options.max_turns), when every instance
/// had the same TP degree.
void AddRollout(const RunRecords& records, const std::map<int, RecordedLayout>& layouts,
                const ExtractOptions& options, const std::string& name, MeasurementSet* set) {
  bool colocated = false;
  int tp = 0;
  bool mixed_tp = false;
  for (const auto& [step, l] : layouts) {
    colocated = colocated || l.colocated;
    for (const auto& [degree, count] : l.rollout) {
      if (tp != 0 && degree != tp) mixed_tp = true;
      tp = degree;
    }
  }
  if (tp == 0) return;
  if (mixed_tp) {
    set->notes.push_back(name +
                         ": instances of several TP degrees; the rollout term is left out (the "
                         "records do not say which instance had which)");
    return;
  }
  size_t unknown = 0;
  std::map<int64_t, std::vector<TurnSpan>> by_instance = TurnSpans(records, colocated, &unknown);
  // Candidates, evenly thinned to max_turns.
  std::vector<std::pair<int64_t, size_t>> candidates;
  size_t paused = 0;
  for (const auto& [instance, spans] : by_instance) {
    for (size_t i = 0; i < spans.size(); ++i) {
      const TurnSpan& s = spans[i];
      if (s.turn->generated_tokens < options.min_turn_tokens || s.end() <= s.start()) continue;
      if (s.excluded) {
        ++paused;
        continue;
      }
      candidates.emplace_back(instance, i);
    }
  }
  const size_t stride =
      options.max_turns == 0
          ? 1
          : std::max<size_t>(1, (candidates.size() + options.max_turns - 1) / options.max_turns);
  for (size_t c = 0; c < candidates.size(); c += stride) {
    const std::vector<TurnSpan>& spans = by_instance[candidates[c].first];
    const TurnSpan& self = spans[candidates[c].second];
    set->measurements.push_back(
        Measurement{TurnAsRun(spans, self, tp), self.end() - self.start(),
                    StrFormat("%s trajectory %lld turn %d", name.c_str(),
                              static_cast<long long>(self.turn->trajectory), self.turn->turn)});
  }
  if (paused > 0) {
    set->notes.push_back(StrFormat("%s: %zu %s left out: %s a pause (weight sync%s)", name.c_str(),
                                   paused, paused == 1 ? "turn" : "turns",
                                   paused == 1 ? "it overlaps" : "they overlap",
                                   colocated ? " or train step" : ""));
  }
  if (unknown > 0) {
    set->notes.push_back(
        StrFormat("%s: %zu turns of unrecorded trajectories left out", name.c_str(), unknown));
  }
  if (stride > 1) {
    set->notes.push_back(
        StrFormat("%s: one turn in %zu used (%zu turns)", name.c_str(), stride, candidates.size()));
  }
}

}  // namespace

Result<MeasurementSet> MeasurementsFromRun(const RunRecords& records,
                                           const ExtractOptions& options) {
  const records::RunInfo& run = records.run;
  const std::string name = RunName(run);
  LIBRA_ASSIGN_OR_RETURN(recipe::ParsedRecipe parsed,
                         recipe::ParseRecipe(run.recipe_toml, name + " recipe"));
  if (!parsed.diagnostics.empty()) {
    return Status::InvalidArgument(
        name + ": its recorded recipe does not parse: " + parsed.diagnostics.front().ToString());
  }
  const recipe::Recipe& r = parsed.recipe;
  auto model_context = model::ContextFor(r);
  if (!model_context.ok()) {
    return Status::InvalidArgument(name + ": " + model_context.status().message());
  }
  MeasurementSet set;
  set.source = name + " (" + run.system + ")";
  set.gpu = r.cluster.gpu;
  set.arch = model_context->arch;
  set.gpus_per_node = model_context->gpus_per_node;
  const std::map<int, RecordedLayout> layouts = RecordedLayouts(records, name, &set.notes);
  AddTrainAndSync(records, layouts, r.sim.sync_path, name, &set);
  AddRollout(records, layouts, options, name, &set);
  return set;
}

}  // namespace libra::calibrate
