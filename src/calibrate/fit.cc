#include "calibrate/fit.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/strings.h"

namespace libra::calibrate {
namespace {

/// A factor must have at least this fraction of its sensitivity outside the span of the factors
/// accepted before it to be fitted.
constexpr double kSeparable = 0.05;
/// Root mean square elasticity (d log prediction / d log factor) below which a factor does not
/// change the predictions.
constexpr double kNoEffect = 1e-4;
/// Least squares: at most this many iterations; stop when an iteration improves the objective by
/// less than this fraction and moves no factor by more than this fraction of its range.
/// Finite-difference step, as a fraction of a factor's range.
constexpr int kMaxIterations = 200;
constexpr double kTolerance = 1e-9;
constexpr double kStep = 1e-6;
/// A factor's spread is how far it can move before the sum of squared log ratios grows by this
/// fraction: 0.21 is the root mean square error growing by 10%.
constexpr double kSpreadCost = 0.21;
/// How close to an edge of its range a fitted factor counts as at the edge.
constexpr double kEdge = 1e-4;

/// The measurements of one term, grouped by the set (run) whose model predicts them.
struct Group {
  const MeasurementSet* set = nullptr;
  std::vector<const Measurement*> measurements;
};

std::vector<double> PredictAll(const std::vector<Group>& groups, const ModelPoint& point) {
  std::vector<double> out;
  for (const Group& g : groups) {
    const model::RooflineCostModel model({point.gpu, g.set->arch, g.set->gpus_per_node},
                                         point.params);
    for (const Measurement* m : g.measurements) out.push_back(Predict(model, *m));
  }
  return out;
}

std::vector<double> Measured(const std::vector<Group>& groups) {
  std::vector<double> out;
  for (const Group& g : groups) {
    for (const Measurement* m : g.measurements) out.push_back(m->measured_s);
  }
  return out;
}

/// d log(prediction) / d log(factor) for every measurement, at `point` (the factor's scale is
/// at least 1% of its range, so that a factor at 0 still has one).
std::vector<double> Sensitivity(const std::vector<Group>& groups, ModelPoint point,
                                const Factor& f) {
  const double value = point.params.*f.field;
  const double scale = std::max(std::abs(value), (f.max - f.min) * 0.01);
  const double step = scale * 1e-3;
  const double low = std::max(f.min, value - step);
  const double high = std::min(f.max, value + step);
  point.params.*f.field = low;
  const std::vector<double> at_low = PredictAll(groups, point);
  point.params.*f.field = high;
  const std::vector<double> at_high = PredictAll(groups, point);
  std::vector<double> column(at_low.size());
  for (size_t i = 0; i < column.size(); ++i) {
    column[i] = (std::log(at_high[i]) - std::log(at_low[i])) / (high - low) * scale;
  }
  return column;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

std::vector<double> Residuals(const std::vector<Group>& groups, const std::vector<double>& measured,
                              const ModelPoint& point) {
  std::vector<double> r = PredictAll(groups, point);
  for (size_t i = 0; i < r.size(); ++i) r[i] = std::log(r[i] / measured[i]);
  return r;
}

double SumOfSquares(const std::vector<double>& r) {
  double sum = 0;
  for (double v : r) sum += v * v;
  return sum;
}

/// Solves the k x k system a * x = b by Gaussian elimination with partial pivoting; false when it
/// is singular.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>* x) {
  const size_t k = b.size();
  for (size_t c = 0; c < k; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < k; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (size_t r = c + 1; r < k; ++r) {
      const double m = a[r][c] / a[c][c];
      for (size_t j = c; j < k; ++j) a[r][j] -= m * a[c][j];
      b[r] -= m * b[c];
    }
  }
  x->assign(k, 0);
  for (size_t c = k; c-- > 0;) {
    double sum = b[c];
    for (size_t j = c + 1; j < k; ++j) sum -= a[c][j] * (*x)[j];
    (*x)[c] = sum / a[c][c];
  }
  return true;
}

/// The normal equations of the log-ratio residuals `r` at `point`: J^T J and -J^T r, with J the
/// central-difference Jacobian per unit of each factor's range (so that factors compare).
void NormalEquations(const std::vector<Group>& groups, const std::vector<double>& measured,
                     const ModelPoint& point, const std::vector<const Factor*>& factors,
                     const std::vector<double>& r, std::vector<std::vector<double>>* normal,
                     std::vector<double>* gradient) {
  const size_t k = factors.size();
  std::vector<std::vector<double>> jacobian(k);
  for (size_t j = 0; j < k; ++j) {
    const Factor& f = *factors[j];
    const double range = f.max - f.min;
    const double value = point.params.*f.field;
    const double low = std::max(f.min, value - kStep * range);
    const double high = std::min(f.max, value + kStep * range);
    ModelPoint moved = point;
    moved.params.*f.field = low;
    const std::vector<double> low_r = Residuals(groups, measured, moved);
    moved.params.*f.field = high;
    const std::vector<double> high_r = Residuals(groups, measured, moved);
    jacobian[j].resize(r.size());
    for (size_t i = 0; i < r.size(); ++i) {
      jacobian[j][i] = (high_r[i] - low_r[i]) / ((high - low) / range);
    }
  }
  normal->assign(k, std::vector<double>(k));
  gradient->assign(k, 0);
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) (*normal)[p][q] = Dot(jacobian[p], jacobian[q]);
    (*gradient)[p] = -Dot(jacobian[p], r);
  }
}

/// Least squares on the log ratios over `factors` from `point` (Levenberg-Marquardt, each factor
/// kept within its range); returns the optimum.
ModelPoint Minimise(const std::vector<Group>& groups, const std::vector<double>& measured,
                    ModelPoint point, const std::vector<const Factor*>& factors) {
  const size_t k = factors.size();
  if (k == 0) return point;
  std::vector<double> r = Residuals(groups, measured, point);
  double cost = SumOfSquares(r);
  double lambda = 1e-3;
  for (int iteration = 0; iteration < kMaxIterations; ++iteration) {
    std::vector<std::vector<double>> normal;
    std::vector<double> gradient;
    NormalEquations(groups, measured, point, factors, r, &normal, &gradient);
    bool moved_on = false;
    while (lambda < 1e12) {
      std::vector<std::vector<double>> damped = normal;
      for (size_t p = 0; p < k; ++p) damped[p][p] += lambda * (normal[p][p] + 1e-12);
      std::vector<double> delta;
      if (!Solve(damped, gradient, &delta)) {
        lambda *= 4;
        continue;
      }
      ModelPoint trial = point;
      double largest_step = 0;
      for (size_t j = 0; j < k; ++j) {
        const Factor& f = *factors[j];
        const double value = point.params.*f.field;
        const double next = std::clamp(value + delta[j] * (f.max - f.min), f.min, f.max);
        trial.params.*f.field = next;
        largest_step = std::max(largest_step, std::abs(next - value) / (f.max - f.min));
      }
      std::vector<double> trial_r = Residuals(groups, measured, trial);
      const double trial_cost = SumOfSquares(trial_r);
      if (trial_cost < cost) {
        const double gain = (cost - trial_cost) / cost;
        point = trial;
        r = std::move(trial_r);
        cost = trial_cost;
        lambda = std::max(lambda / 3, 1e-9);
        moved_on = gain > kTolerance || largest_step > kTolerance;
        break;
      }
      lambda *= 4;
    }
    if (!moved_on) break;
  }
  return point;
}

/// How far each factor (in field units) can move, the others following, before the sum of
/// squares grows by kSpreadCost of itself: sqrt(allowance * (J^T J)^-1_jj) in the quadratic
/// approximation at the optimum `point`. 0 when the fit is exact.
std::vector<double> Spreads(const std::vector<Group>& groups, const std::vector<double>& measured,
                            const ModelPoint& point, const std::vector<const Factor*>& factors) {
  const size_t k = factors.size();
  const std::vector<double> r = Residuals(groups, measured, point);
  const double allowance = kSpreadCost * SumOfSquares(r);
  std::vector<std::vector<double>> normal;
  std::vector<double> gradient;
  NormalEquations(groups, measured, point, factors, r, &normal, &gradient);
  std::vector<double> spreads(k, 0);
  for (size_t j = 0; j < k; ++j) {
    std::vector<double> unit(k, 0);
    unit[j] = 1;
    std::vector<double> column;
    if (!Solve(normal, unit, &column) || column[j] < 0) continue;
    spreads[j] = std::sqrt(allowance * column[j]) * (factors[j]->max - factors[j]->min);
  }
  return spreads;
}

std::string Shown(const Factor& f, double field_value) {
  return StrFormat("%g", field_value * f.scale);
}

/// Fits the factors of `term` (measurements in `groups`), updating `point` and the notes of
/// `results` (indexed like Factors()).
void FitTerm(Term term, const std::vector<Group>& groups, ModelPoint* point,
             std::vector<FactorResult>* results, std::vector<bool>* fitted) {
  const std::vector<Factor>& all = Factors();
  const std::vector<double> measured = Measured(groups);
  const size_t n = measured.size();
  std::vector<size_t> candidates;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].term != term) continue;
    candidates.push_back(i);
    (*results)[i].measurements = static_cast<int>(n);
    if (n == 0) {
      (*results)[i].note = "no " + NameOf(term) + " measurements";
    }
  }
  if (n == 0) return;

  // 1. Identifiability at the starting point.
  std::vector<std::vector<double>> basis;
  std::vector<std::string> accepted_names;
  std::vector<size_t> accepted;
  for (size_t i : candidates) {
    const Factor& f = all[i];
    std::vector<double> column = Sensitivity(groups, *point, f);
    const double norm = std::sqrt(Dot(column, column));
    if (norm / std::sqrt(static_cast<double>(n)) < kNoEffect) {
      (*results)[i].note = StrFormat("does not change the predictions of these %zu %s measurements",
                                     n, NameOf(term).c_str());
      continue;
    }
    for (const std::vector<double>& q : basis) {
      const double along = Dot(q, column);
      for (size_t k = 0; k < n; ++k) column[k] -= along * q[k];
    }
    const double outside = std::sqrt(Dot(column, column));
    if (outside < kSeparable * norm) {
      (*results)[i].note = "cannot be told apart from " + StrJoin(accepted_names, " and ") +
                           " with these measurements (whose fitted value" +
                           (accepted_names.size() > 1 ? "s take" : " takes") + " up its effect)";
      continue;
    }
    for (double& v : column) v /= outside;
    basis.push_back(std::move(column));
    accepted_names.emplace_back(f.key);
    accepted.push_back(i);
  }

  // 2. and 3. Fit; drop factors whose optimum is an edge of their range, and refit the others.
  const ModelPoint start = *point;
  while (true) {
    std::vector<const Factor*> factors;
    for (size_t i : accepted) factors.push_back(&all[i]);
    ModelPoint fitted_point = Minimise(groups, measured, start, factors);
    std::vector<size_t> kept;
    for (size_t i : accepted) {
      const Factor& f = all[i];
      const double v = fitted_point.params.*f.field;
      const double edge = kEdge * (f.max - f.min);
      const bool at_min = v - f.min < edge && !f.min_is_plausible;
      const bool at_max = f.max - v < edge;
      if (at_min || at_max) {
        (*results)[i].note = "the best fit is the edge of its range (" +
                             Shown(f, at_min ? f.min : f.max) +
                             "): the model cannot explain these measurements with it; check the "
                             "GPU's numbers";
      } else {
        kept.push_back(i);
      }
    }
    if (kept.size() == accepted.size()) {
      *point = fitted_point;
      const std::vector<double> spreads = Spreads(groups, measured, fitted_point, factors);
      for (size_t j = 0; j < accepted.size(); ++j) {
        (*fitted)[accepted[j]] = true;
        (*results)[accepted[j]].spread = spreads[j] * all[accepted[j]].scale;
      }
      return;
    }
    accepted = kept;
  }
}

double Rms(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double sum = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const double e = predicted[i] / measured[i] - 1;
    sum += e * e;
  }
  return std::sqrt(sum / static_cast<double>(predicted.size()));
}

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace

const std::vector<Factor>& Factors() {
  using P = model::RooflineParams;
  static const std::vector<Factor>* const factors = new std::vector<Factor>{
      {"decode_bw_util", &P::decode_bw_util, 1, Term::kRollout, 0.01, 1, false},
      {"iteration_overhead_ms", &P::iteration_overhead_s, 1e3, Term::kRollout, 0, 0.1, true},
      {"prefill_mfu", &P::prefill_mfu, 1, Term::kRollout, 0.01, 1, false},
      {"train_mfu", &P::train_mfu, 1, Term::kTrain, 0.01, 1, false},
      {"engine_restart_s", &P::engine_restart_s, 1, Term::kSync, 0, 1000, true},
      {"load_tensor_overhead_us", &P::load_tensor_overhead_s, 1e6, Term::kSync, 0, 0.01, true},
  };
  return *factors;
}

const Factor* FindFactor(std::string_view key) {
  for (const Factor& f : Factors()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

Result<ModelPoint> ModelPointFor(const recipe::Recipe& recipe) {
  if (recipe.cost_model.name != model::kRooflineName) {
    return Status::InvalidArgument(
        "calibration fits the factors of the roofline cost model; the recipe's cost_model.name "
        "is '" +
        recipe.cost_model.name + "'");
  }
  LIBRA_ASSIGN_OR_RETURN(const model::CostModelContext context, model::ContextFor(recipe));
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<model::CostModel> cost,
                         model::RooflineCostModel::Create(context, recipe.cost_model.options));
  return ModelPoint{context.gpu, static_cast<const model::RooflineCostModel&>(*cost).params()};
}

FitResult Fit(const std::vector<MeasurementSet>& sets, const ModelPoint& before,
              const ModelPoint& start) {
  // Group the usable measurements by term and set.
  const std::vector<Term> terms = {Term::kRollout, Term::kTrain, Term::kSync};
  std::vector<std::vector<Group>> groups(terms.size());
  for (const MeasurementSet& set : sets) {
    const model::RooflineCostModel at_start({start.gpu, set.arch, set.gpus_per_node}, start.params);
    const model::RooflineCostModel at_before({before.gpu, set.arch, set.gpus_per_node},
                                             before.params);
    std::vector<Group> mine(terms.size());
    for (const Measurement& m : set.measurements) {
      const double p = Predict(at_start, m);
      const double q = Predict(at_before, m);
      if (!(m.measured_s > 0) || !std::isfinite(m.measured_s) || !(p > 0) || !std::isfinite(p) ||
          !(q > 0) || !std::isfinite(q)) {
        continue;
      }
      Group& g = mine[static_cast<size_t>(TermOf(m))];
      g.set = &set;
      g.measurements.push_back(&m);
    }
    for (size_t t = 0; t < terms.size(); ++t) {
      if (!mine[t].measurements.empty()) groups[t].push_back(std::move(mine[t]));
    }
  }

  const std::vector<Factor>& all = Factors();
  FitResult result;
  result.before = before;
  result.factors.resize(all.size());
  std::vector<bool> fitted(all.size(), false);
  ModelPoint point = start;
  for (size_t t = 0; t < terms.size(); ++t) {
    FitTerm(terms[t], groups[t], &point, &result.factors, &fitted);
  }
  result.after = point;

  for (size_t i = 0; i < all.size(); ++i) {
    const Factor& f = all[i];
    FactorResult& r = result.factors[i];
    r.key = std::string(f.key);
    r.term = f.term;
    r.before = before.params.*f.field * f.scale;
    r.after = point.params.*f.field * f.scale;
    if (fitted[i]) {
      r.outcome = FactorOutcome::kFitted;
      r.note.clear();
    } else {
      r.outcome = start.params.*f.field != before.params.*f.field ? FactorOutcome::kPrior
                                                                  : FactorOutcome::kKept;
    }
  }
  for (size_t t = 0; t < terms.size(); ++t) {
    if (groups[t].empty()) continue;
    const std::vector<double> measured = Measured(groups[t]);
    const std::vector<double> predicted_before = PredictAll(groups[t], before);
    const std::vector<double> predicted_after = PredictAll(groups[t], point);
    TermResult r;
    r.term = terms[t];
    r.measurements = static_cast<int>(measured.size());
    r.measured_s = Mean(measured);
    r.before_s = Mean(predicted_before);
    r.after_s = Mean(predicted_after);
    r.error_before = Rms(predicted_before, measured);
    r.error_after = Rms(predicted_after, measured);
    result.terms.push_back(r);
  }
  return result;
}

}  // namespace libra::calibrate
