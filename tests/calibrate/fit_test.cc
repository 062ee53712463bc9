#include "calibrate/fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/rng.h"
#include "support/test_util.h"

namespace libra::calibrate {
namespace {

/// The factors the synthetic measurements are made with.
model::RooflineParams TrueParams() {
  model::RooflineParams p;
  p.decode_bw_util = 0.62;
  p.iteration_overhead_s = 0.004;
  p.prefill_mfu = 0.45;
  p.train_mfu = 0.33;
  p.load_tensor_overhead_s = 80e-6;
  return p;
}

ModelPoint Point(const model::RooflineParams& params) {
  return ModelPoint{*model::FindGpu("A800-80G"), params};
}

MeasurementSet EmptySet() {
  MeasurementSet set;
  set.source = "synthetic";
  set.gpu = "A800-80G";
  set.arch = *model::FindModel("Qwen3-14B");
  set.gpus_per_node = 8;
  return set;
}

/// Measured = the true model's prediction times lognormal noise of `noise` (relative).
void Measure(MeasurementSet* set, std::vector<Measurement> what, double noise, uint64_t seed) {
  const model::RooflineCostModel truth({Point(TrueParams()).gpu, set->arch, set->gpus_per_node},
                                       TrueParams());
  Rng rng(seed);
  for (Measurement& m : what) {
    m.measured_s = Predict(truth, m) * std::exp(noise * rng.Normal());
    set->measurements.push_back(std::move(m));
  }
}

/// Decode turns under loads from one sequence to a full instance, with prefills mixed in.
std::vector<Measurement> DecodeTurns(int count, uint64_t seed, bool vary) {
  Rng rng(seed);
  std::vector<Measurement> out;
  for (int i = 0; i < count; ++i) {
    DecodeTurn turn;
    turn.tp = vary && rng.Bernoulli(0.5) ? 2 : 1;
    turn.sequences = vary ? rng.UniformInt(1, 96) : 32;
    turn.context_tokens = turn.sequences * (vary ? rng.UniformInt(500, 20000) : 4000);
    turn.tokens = vary ? rng.UniformInt(32, 600) : 200;
    const int64_t prefills = vary ? rng.UniformInt(0, 4) : 0;
    for (int64_t p = 0; p < prefills; ++p) {
      turn.prefills.push_back({rng.UniformInt(1000, 8000), rng.UniformInt(0, 8000)});
    }
    out.push_back(Measurement{turn, 0, "turn " + std::to_string(i)});
  }
  return out;
}

std::vector<Measurement> TrainSteps(int count, uint64_t seed) {
  Rng rng(seed);
  std::vector<Measurement> out;
  const std::vector<model::TrainLayout> layouts = {{4, 1, 2, 1}, {8, 1, 1, 1}, {2, 2, 2, 1}};
  for (int i = 0; i < count; ++i) {
    TrainStep step;
    step.layout = layouts[static_cast<size_t>(i) % layouts.size()];
    for (int s = 0; s < 64; ++s) step.sequence_tokens.push_back(rng.UniformInt(1000, 16000));
    out.push_back(Measurement{step, 0, "step " + std::to_string(i)});
  }
  return out;
}

std::vector<Measurement> Syncs(int count) {
  std::vector<Measurement> out;
  for (int i = 0; i < count; ++i) {
    WeightSync sync;
    sync.request.train = {4, 1, 2, 1};
    sync.request.rollout_tp = 1 << (i % 3);
    sync.request.cross_node = i % 2 == 0;
    out.push_back(Measurement{sync, 0, "sync " + std::to_string(i)});
  }
  return out;
}

const FactorResult& FactorNamed(const FitResult& fit, const std::string& key) {
  for (const FactorResult& f : fit.factors) {
    if (f.key == key) return f;
  }
  ADD_FAILURE() << "no factor " << key;
  return fit.factors.front();
}

TEST(FitTest, RecoversKnownFactorsFromNoisyMeasurements) {
  // Measurements made with known factors and 5% noise: the fit, started from the defaults, finds
  // the factors again, and the remaining error is about the noise.
  MeasurementSet set = EmptySet();
  Measure(&set, DecodeTurns(400, 1, true), 0.05, 11);
  Measure(&set, TrainSteps(30, 2), 0.05, 12);
  Measure(&set, Syncs(20), 0.05, 13);
  const ModelPoint defaults = Point(model::RooflineParams());
  const FitResult fit = Fit({set}, defaults, defaults);

  const model::RooflineParams truth = TrueParams();
  EXPECT_NEAR(fit.after.params.decode_bw_util, truth.decode_bw_util, 0.03 * truth.decode_bw_util);
  EXPECT_NEAR(fit.after.params.iteration_overhead_s, truth.iteration_overhead_s,
              0.1 * truth.iteration_overhead_s);
  EXPECT_NEAR(fit.after.params.prefill_mfu, truth.prefill_mfu, 0.05 * truth.prefill_mfu);
  EXPECT_NEAR(fit.after.params.train_mfu, truth.train_mfu, 0.02 * truth.train_mfu);
  EXPECT_NEAR(fit.after.params.load_tensor_overhead_s, truth.load_tensor_overhead_s,
              0.15 * truth.load_tensor_overhead_s);
  for (const char* key : {"decode_bw_util", "iteration_overhead_ms", "prefill_mfu", "train_mfu",
                          "load_tensor_overhead_us"}) {
    SCOPED_TRACE(key);
    const FactorResult& f = FactorNamed(fit, key);
    EXPECT_EQ(f.outcome, FactorOutcome::kFitted);
    EXPECT_TRUE(f.note.empty());
    // The truth is within the reported spread.
    const Factor& factor = *FindFactor(key);
    EXPECT_GT(f.spread, 0);
    EXPECT_LE(std::abs(f.after - truth.*factor.field * factor.scale), f.spread);
  }
  // Nothing took the disk path, so the engine restart cannot be learned.
  EXPECT_EQ(FactorNamed(fit, "engine_restart_s").outcome, FactorOutcome::kKept);
  EXPECT_EQ(FactorNamed(fit, "engine_restart_s").note,
            "does not change the predictions of these 20 sync measurements");
  EXPECT_DOUBLE_EQ(FactorNamed(fit, "engine_restart_s").after, 30);

  ASSERT_EQ(fit.terms.size(), 3u);
  for (const TermResult& t : fit.terms) {
    SCOPED_TRACE(NameOf(t.term));
    EXPECT_GT(t.error_before, t.error_after);
    EXPECT_LT(t.error_after, 0.07);  // about the 5% noise
  }
  EXPECT_EQ(fit.terms[0].measurements, 400);
  EXPECT_EQ(fit.terms[1].measurements, 30);
}

TEST(FitTest, ExactMeasurementsAreMatchedExactly) {
  // Without noise the fit reproduces the measurements and the factors.
  MeasurementSet set = EmptySet();
  Measure(&set, TrainSteps(5, 3), 0, 1);
  model::RooflineParams start = TrueParams();
  start.train_mfu = 0.5;
  const FitResult fit = Fit({set}, Point(start), Point(start));
  EXPECT_NEAR(fit.after.params.train_mfu, TrueParams().train_mfu, 1e-7);
  ASSERT_EQ(fit.terms.size(), 1u);
  EXPECT_LT(fit.terms[0].error_after, 1e-7);
  EXPECT_EQ(FactorNamed(fit, "decode_bw_util").note, "no rollout measurements");
  EXPECT_EQ(FactorNamed(fit, "load_tensor_overhead_us").note, "no sync measurements");
}

TEST(FitTest, FactorsTheDataCannotSeparateAreNotFitted) {
  // Every turn under the same load and without prefills: a fixed overhead and the bandwidth
  // scale all turns alike, so only the first is fitted, and prefill_mfu changes nothing.
  MeasurementSet set = EmptySet();
  Measure(&set, DecodeTurns(50, 4, false), 0.02, 5);
  const ModelPoint defaults = Point(model::RooflineParams());
  const FitResult fit = Fit({set}, defaults, defaults);
  EXPECT_EQ(FactorNamed(fit, "decode_bw_util").outcome, FactorOutcome::kFitted);
  EXPECT_EQ(FactorNamed(fit, "iteration_overhead_ms").outcome, FactorOutcome::kKept);
  EXPECT_EQ(FactorNamed(fit, "iteration_overhead_ms").note,
            "cannot be told apart from decode_bw_util with these measurements (whose fitted "
            "value takes up its effect)");
  EXPECT_EQ(FactorNamed(fit, "iteration_overhead_ms").after, 3);
  EXPECT_EQ(FactorNamed(fit, "prefill_mfu").note,
            "does not change the predictions of these 50 rollout measurements");
  // The measurements are still reproduced: decode_bw_util absorbs the overhead's difference.
  EXPECT_LT(fit.terms[0].error_after, 0.03);
}

TEST(FitTest, AFactorPushedToTheEdgeOfItsRangeIsKept) {
  // Train steps measured faster than the GPU's peak allows: train_mfu would have to exceed 1, so
  // it is not trusted and keeps its value, with a reason.
  MeasurementSet set = EmptySet();
  Measure(&set, TrainSteps(5, 6), 0, 1);
  for (Measurement& m : set.measurements) m.measured_s /= 10;
  const ModelPoint defaults = Point(model::RooflineParams());
  const FitResult fit = Fit({set}, defaults, defaults);
  const FactorResult& mfu = FactorNamed(fit, "train_mfu");
  EXPECT_EQ(mfu.outcome, FactorOutcome::kKept);
  EXPECT_DOUBLE_EQ(mfu.after, 0.4);
  EXPECT_EQ(mfu.note,
            "the best fit is the edge of its range (1): the model cannot explain these "
            "measurements with it; check the GPU's numbers");
}

TEST(FitTest, ProbePriorsStartTheFitAndAreReportedWhenNotFitted) {
  // decode_bw_util set from probes and no rollout measurements: it is reported as a prior, and
  // the "after" predictions use the probed GPU.
  MeasurementSet set = EmptySet();
  Measure(&set, Syncs(6), 0, 1);
  const ModelPoint defaults = Point(model::RooflineParams());
  ModelPoint start = defaults;
  start.params.decode_bw_util = 0.7;
  start.gpu.nvlink_bandwidth = 150e9;
  const FitResult fit = Fit({set}, defaults, start);
  EXPECT_EQ(FactorNamed(fit, "decode_bw_util").outcome, FactorOutcome::kPrior);
  EXPECT_DOUBLE_EQ(FactorNamed(fit, "decode_bw_util").after, 0.7);
  EXPECT_EQ(fit.after.gpu.nvlink_bandwidth, 150e9);
  EXPECT_EQ(fit.before.gpu.nvlink_bandwidth, defaults.gpu.nvlink_bandwidth);
}

TEST(FitTest, EveryFactorIsARecipeKeyWithinTheModelsRange) {
  // The written keys are the ones RooflineCostModel::Create reads, and the searched ranges are
  // within what it accepts, so a calibration file always parses.
  const model::CostModelContext context{*model::FindGpu("A800-80G"), *model::FindModel("Qwen3-8B"),
                                        8};
  for (const Factor& f : Factors()) {
    SCOPED_TRACE(std::string(f.key));
    EXPECT_EQ(FindFactor(f.key), &f);
    for (const double v : {f.min, f.max}) {
      recipe::OptionTable table;
      recipe::OptionValue value;
      value.kind = recipe::OptionValue::Kind::kDouble;
      value.double_value = v * f.scale;
      table.entries.push_back({std::string(f.key), value});
      auto model = model::RooflineCostModel::Create(context, table);
      ASSERT_OK(model);
      const auto& roofline = static_cast<const model::RooflineCostModel&>(**model);
      EXPECT_NEAR(roofline.params().*f.field, v, 1e-12);
    }
  }
}

}  // namespace
}  // namespace libra::calibrate
