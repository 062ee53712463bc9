// Measurements: what was run and how long it took, one value per measured thing, in the terms of
// the cost model (src/model) so that the model can predict each of them. Three terms:
//
//   rollout  one turn's generation on an instance: its tokens were decoded while other sequences
//            shared the instance and prefills of new context were mixed in;
//   train    one optimizer step over the batch's sequences, with the layout it ran on;
//   sync     one weight push from the trainer to the rollout engines.
//
// MeasurementsFromRun derives them from a recorded run (its effective recipe, steps, trajectories,
// turns and planner decisions), and says what it had to leave out and why. Pure: no I/O, no
// clock. Role switches are not measured: the store records no switch spans (the simulator folds
// the switches of a colocated layout into its train steps, which the train term accounts for).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/enum_names.h"
#include "common/status.h"
#include "model/cost_model.h"
#include "records/records.h"

namespace libra::calibrate {

/// The part of the cost model a measurement tests.
enum class Term { kRollout, kTrain, kSync };

/// "rollout", "train", "sync".
constexpr std::array<EnumName<Term>, 3> EnumTable(Term) {
  return {{{Term::kRollout, "rollout"}, {Term::kTrain, "train"}, {Term::kSync, "sync"}}};
}

/// A prefill of `new_tokens` after `prior_tokens` already in the KV cache.
struct PrefillChunk {
  int64_t new_tokens = 0;
  int64_t prior_tokens = 0;
  bool operator==(const PrefillChunk&) const = default;
};

/// One turn generated on a TP-`tp` rollout instance. The instance's load while the turn ran is
/// summarised as `sequences` sequences decoding together (the turn included; the time-weighted
/// mean, rounded) whose contexts sum to `context_tokens` on average, plus the prefills that
/// started on the instance during the turn (its own included). Predicted as `tokens` decode
/// iterations of that batch, plus what each prefill adds to the iteration it joins.
struct DecodeTurn {
  int tp = 1;
  int64_t sequences = 1;
  int64_t context_tokens = 0;
  int64_t tokens = 0;
  std::vector<PrefillChunk> prefills;
  bool operator==(const DecodeTurn&) const = default;
};

/// One train step over sequences of these lengths (tokens). A colocated layout's step includes
/// the two role switches of its TP-`rollout_tp` instances (offload and reload).
struct TrainStep {
  model::TrainLayout layout;
  std::vector<int64_t> sequence_tokens;
  bool colocated = false;
  int rollout_tp = 1;
  bool operator==(const TrainStep&) const = default;
};

/// One weight sync.
struct WeightSync {
  model::SyncRequest request;
  bool operator==(const WeightSync& other) const {
    return request.path == other.request.path && request.train == other.request.train &&
           request.rollout_tp == other.request.rollout_tp &&
           request.cross_node == other.request.cross_node;
  }
};

/// What ran, and the seconds it took.
struct Measurement {
  std::variant<DecodeTurn, TrainStep, WeightSync> what;
  double measured_s = 0;
  /// Where it comes from, for messages: "run 3 step 2", "run 3 trajectory 17 turn 2".
  std::string source;
  bool operator==(const Measurement&) const = default;
};

Term TermOf(const Measurement& m);

/// What `model` says the measurement takes, in seconds.
double Predict(const model::CostModel& model, const Measurement& m);

/// The measurements of one run, with what the model needs besides the GPU to predict them.
struct MeasurementSet {
  /// "run 3 (async-split)".
  std::string source;
  /// The run's GPU name (its recipe's cluster.gpu): measurements only calibrate that GPU.
  std::string gpu;
  model::ModelArch arch;
  int gpus_per_node = 8;
  std::vector<Measurement> measurements;
  /// What was left out and why ("run 3: 12 turns overlap a weight sync").
  std::vector<std::string> notes;
};

/// Everything the store holds about one run that calibration reads.
struct RunRecords {
  records::RunInfo run;
  std::vector<records::StepRecord> steps;
  std::vector<records::TrajectoryRecord> trajectories;
  std::vector<records::TurnRecord> turns;
  std::vector<records::DecisionRecord> decisions;
};

struct ExtractOptions {
  /// Turns that generated fewer tokens are left out: their time is mostly prefill and
  /// scheduling. Default: 16.
  int64_t min_turn_tokens = 16;
  /// At most this many turns per run, evenly spaced (fitting time grows with them). Default: 2000.
  size_t max_turns = 2000;
};

/// Derives the measurements of a finished run. Turns that overlap a weight sync (every instance
/// pauses for it) or, in a colocated layout, a train step are left out, and so is the rollout
/// term when instances of several TP degrees ran at once (the records do not say which instance
/// had which). kInvalidArgument when the run's recorded recipe does not parse or names an unknown
/// model.
Result<MeasurementSet> MeasurementsFromRun(const RunRecords& records,
                                           const ExtractOptions& options = {});

/// A layout as backend::Layout::ToString writes it into the decisions table:
/// "train 8 (tp4 pp1 dp2 mb1) | rollout tp1x8+tp2x4 (colocated)".
struct RecordedLayout {
  model::TrainLayout train;
  /// TP degree -> instances.
  std::vector<std::pair<int, int>> rollout;
  bool colocated = false;
  bool operator==(const RecordedLayout&) const = default;
};

/// Parses a recorded layout; kInvalidArgument quoting it when it is not in that form.
Result<RecordedLayout> ParseRecordedLayout(const std::string& text);

}  // namespace libra::calibrate
