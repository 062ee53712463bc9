#include "planner/calibrator.h"

#include <algorithm>
#include <cmath>

namespace libra::planner {

bool Calibrator::Observe(double predicted, double measured) {
  if (!(predicted > 0) || !(measured > 0) || !std::isfinite(predicted) ||
      !std::isfinite(measured)) {
    return false;
  }
  const double r = std::log(measured / predicted);
  bool change = false;
  if (static_cast<int>(window_.size()) >= options_.min_history) {
    double mean = 0;
    for (double x : window_) mean += x;
    mean /= static_cast<double>(window_.size());
    double var = 0;
    for (double x : window_) var += (x - mean) * (x - mean);
    const double sd = std::sqrt(var / static_cast<double>(window_.size()));
    change = std::abs(r - mean) > options_.sigma * std::max(sd, options_.floor);
  }
  if (observations_ == 0 || change) {
    average_ = r;
    if (change) {
      ++resets_;
      window_.clear();
    }
  } else {
    average_ = options_.alpha * r + (1 - options_.alpha) * average_;
  }
  window_.push_back(r);
  while (static_cast<int>(window_.size()) > options_.window) window_.pop_front();
  ++observations_;
  return change;
}

double Calibrator::factor() const { return observations_ == 0 ? 1.0 : std::exp(average_); }

}  // namespace libra::planner
