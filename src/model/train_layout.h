// TrainLayout: how the trainer's GPUs are used. A value type apart from the CostModel interface,
// so that the backend seam (a Layout holds one) does not include it.
#pragma once

#include <string>

#include "common/strings.h"

namespace libra::model {

/// A training layout: tensor, pipeline and data parallel sizes and the micro-batch (sequences).
struct TrainLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int micro_batch = 1;

  int gpus() const { return tp * pp * dp; }
  /// "tp4 pp1 dp2 mb1".
  std::string ToString() const { return StrFormat("tp%d pp%d dp%d mb%d", tp, pp, dp, micro_batch); }
  bool operator==(const TrainLayout&) const = default;
};

}  // namespace libra::model
