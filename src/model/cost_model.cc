#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/strings.h"

namespace libra::model {

namespace {

/// The base class's TrainBatchCosts: TrainStep, asked each time.
class AskEachTime : public TrainBatchCosts {
 public:
  AskEachTime(const CostModel& model, const TrainPasses& passes, std::vector<int64_t> tokens)
      : model_(model), passes_(passes), tokens_(std::move(tokens)) {}
  TrainEstimate TrainStep(const TrainLayout& layout) override {
    return model_.TrainStep(layout, passes_, tokens_);
  }

 private:
  const CostModel& model_;
  TrainPasses passes_;
  std::vector<int64_t> tokens_;
};

}  // namespace

std::unique_ptr<TrainBatchCosts> CostModel::ForTrainBatch(
    const TrainPasses& passes, std::vector<int64_t> sequence_tokens) const {
  return std::make_unique<AskEachTime>(*this, passes, std::move(sequence_tokens));
}

double CostModel::DecodeSpanTime(int tp, int64_t sequences, int64_t context_tokens,
                                 int64_t iterations) const {
  double total = 0;
  IterationLoad load;
  load.decode_sequences = sequences;
  for (int64_t i = 0; i < iterations; ++i) {
    load.decode_context_tokens = context_tokens + i * sequences;
    total += IterationTime(tp, load);
  }
  return total;
}

int64_t DecodeIterationsWithin(const CostModel& model, int tp, int64_t sequences,
                               int64_t context_tokens, int64_t max_iterations, double seconds) {
  // The span time grows with the iterations: binary search for the last that fits.
  int64_t lo = 0;
  int64_t hi = max_iterations;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (model.DecodeSpanTime(tp, sequences, context_tokens, mid) <= seconds) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

double SingleSequenceDecodeRate(const CostModel& model, int tp, int64_t context) {
  IterationLoad load;
  load.AddDecode(context);
  return 1.0 / model.IterationTime(tp, load);
}

double SaturatedDecodeRatePerGpu(const CostModel& model, int tp, int64_t context,
                                 int64_t max_sequences) {
  const int64_t fit = context > 0 ? model.KvCapacityTokens(tp) / context : max_sequences;
  const int64_t sequences = std::min(fit, max_sequences);
  if (sequences <= 0) return 0;
  IterationLoad load;
  load.decode_sequences = sequences;
  load.decode_context_tokens = sequences * context;
  return static_cast<double>(sequences) / model.IterationTime(tp, load) / tp;
}

double PrefillRate(const CostModel& model, int tp, int64_t tokens) {
  return static_cast<double>(tokens) / model.PrefillTime(tp, tokens, 0);
}

}  // namespace libra::model
