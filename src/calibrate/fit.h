// Fitting the roofline cost model's efficiency factors to measurements.
//
// Each term (rollout, train, sync) has the factors it can inform, in order of priority:
//   rollout  decode_bw_util, iteration_overhead_ms, prefill_mfu
//   train    train_mfu
//   sync     engine_restart_s (disk path), load_tensor_overhead_us
// Terms are fitted in that order, each starting from the factors the terms before it settled
// (decode_bw_util also times the optimizer step and the weight load of a sync).
//
// Algorithm, per term with measurements m_i (seconds) and the model's predictions p_i(θ):
//   1. Identifiability, at the starting factors: the sensitivity of every log p_i to each factor
//      (central differences). A factor whose sensitivities are all ~0 does not change these
//      predictions: not fitted. A factor less than 5% of whose sensitivity vector lies outside
//      the span of the factors already accepted cannot be told apart from them: not fitted.
//   2. Least squares on the log ratios: minimise sum_i log(p_i(θ) / m_i)^2 over the accepted
//      factors, each within its range (Levenberg-Marquardt, central-difference Jacobian;
//      deterministic). Each fitted factor gets a spread: how far it can move, the others
//      following, before the RMS error grows by 10% (quadratic approximation at the optimum).
//   3. A factor whose optimum is the edge of its range (an efficiency of 1, say) is not trusted:
//      the model cannot explain the measurements with it, so it keeps its starting value and the
//      others are refitted without it.
// Every factor that is not fitted keeps its value and says why: the output never invents one.
// Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "calibrate/measurements.h"
#include "model/roofline_model.h"
#include "recipe/recipe.h"

namespace libra::calibrate {

/// A roofline parameter calibration can fit.
struct Factor {
  /// Its [cost_model] key, e.g. "iteration_overhead_ms".
  std::string_view key{};
  double model::RooflineParams::*field = nullptr;
  /// Key units per field unit (1e3 for a key in ms over a field in s).
  double scale = 1;
  Term term = Term::kRollout;
  /// The range searched, in field units (within what RooflineCostModel::Create accepts).
  double min = 0;
  double max = 1;
  /// Whether `min` is a plausible value rather than a limit the model hit (an overhead of 0).
  bool min_is_plausible = false;
};

/// Every factor, by term and priority (the table above).
const std::vector<Factor>& Factors();
const Factor* FindFactor(std::string_view key);

/// A GPU and the factors: what predictions are made with.
struct ModelPoint {
  model::GpuSpec gpu{};
  model::RooflineParams params{};
};

/// The GPU and factors of a recipe's cost model. kInvalidRecipe as model::MakeCostModel;
/// kInvalidArgument when the recipe's cost model is not "roofline" (only its factors are fitted).
Result<ModelPoint> ModelPointFor(const recipe::Recipe& recipe);

enum class FactorOutcome {
  /// Fitted to measurements.
  kFitted,
  /// Set before the fit (from probes) and not fitted.
  kPrior,
  /// Unchanged: no measurements, not identifiable from them, or the fit hit its range.
  kKept,
};

struct FactorResult {
  std::string key;
  Term term = Term::kRollout;
  /// In key units.
  double before = 0;
  double after = 0;
  FactorOutcome outcome = FactorOutcome::kKept;
  /// For a fitted factor: how far it can move (key units, either way), the other factors
  /// following, before the term's RMS error grows by 10%. Small: the data pin it down; large: a
  /// wide range of values explains the measurements about as well.
  double spread = 0;
  /// Measurements of its term.
  int measurements = 0;
  /// Why it was not fitted; empty when it was.
  std::string note;
};

/// Predictions against measurements for one term.
struct TermResult {
  Term term = Term::kRollout;
  int measurements = 0;
  /// Means over the measurements, seconds.
  double measured_s = 0;
  double before_s = 0;
  double after_s = 0;
  /// Root mean square of predicted / measured - 1, before and after the fit.
  double error_before = 0;
  double error_after = 0;
};

struct FitResult {
  ModelPoint before;
  ModelPoint after;
  /// One per factor of Factors(), in its order.
  std::vector<FactorResult> factors;
  /// One per term that has measurements, in term order.
  std::vector<TermResult> terms;
};

/// Fits the factors to `sets`. `before` is the recipe's model (the "before" predictions);
/// `start` is where fitting starts, e.g. with a GPU and decode_bw_util from probes (factors that
/// differ from `before` and are not fitted are reported as kPrior). Predictions "after" use
/// start.gpu. Measurements whose prediction is not a positive finite number are left out.
FitResult Fit(const std::vector<MeasurementSet>& sets, const ModelPoint& before,
              const ModelPoint& start);

}  // namespace libra::calibrate
