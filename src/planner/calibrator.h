// Calibrator: how far the cost model's predictions are from what the backend measures, as a
// factor (measured / predicted) that later predictions are multiplied by. An exponentially
// weighted moving average of log(measured / predicted), reset when the error jumps (a change
// point: the workload drifted, a node slowed down), so predictions converge to what the backend
// actually does and follow it when it changes.
//
// Algorithm, per observation r = log(measured / predicted):
//   * change point: with at least `min_history` past values in the window, when
//     |r - mean| > sigma * max(stddev, floor) of the window, the average restarts at r
//     (counted in resets());
//   * otherwise: average = alpha * r + (1 - alpha) * average (the first value sets it);
//   * the window keeps the last `window` values of r.
// factor() = exp(average), 1 before any observation. Non-positive or non-finite values are
// ignored (a step that measured nothing says nothing about the model).
#pragma once

#include <deque>

namespace libra::planner {

struct CalibratorOptions {
  double alpha = 0.3;
  double sigma = 3.0;
  int window = 20;
  int min_history = 3;
  /// Smallest spread (in log units) the change-point test assumes: noise below 5% never resets.
  double floor = 0.05;
};

class Calibrator {
 public:
  explicit Calibrator(CalibratorOptions options = {}) : options_(options) {}

  /// Records one predicted/measured pair; returns true when it was a change point.
  bool Observe(double predicted, double measured);
  /// measured / predicted, smoothed; 1 before any observation.
  double factor() const;
  int observations() const { return observations_; }
  int resets() const { return resets_; }

 private:
  CalibratorOptions options_;
  std::deque<double> window_;
  double average_ = 0;
  int observations_ = 0;
  int resets_ = 0;
};

}  // namespace libra::planner
