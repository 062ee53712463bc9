#include "calibrate/calibration_file.h"

#include <gtest/gtest.h>

#include <string>

#include "recipe/recipe_parser.h"
#include "support/test_util.h"

namespace libra::calibrate {
namespace {

/// Probes of an A800 that changed two GPU numbers and set decode_bw_util.
ProbeCalibration A800Probes() {
  ProbeCalibration p;
  p.host = "gpu-01";
  p.recorded_at = "2026-01-01T00:00:00Z";
  p.gpus = 8;
  p.device = "NVIDIA A800-SXM4-80GB";
  p.gpu = *model::FindGpu("A800-80G");
  p.gpu.allreduce_bandwidth = 161.25e9;
  p.gpu.allreduce_latency_s = 14.5e-6;
  p.overrides = {{"allreduce_gbps", 150, 161.25, "NCCL all-reduce bus bandwidth, 8 GPUs, 256 MiB"},
                 {"allreduce_latency_us", 8, 14.5, "NCCL all-reduce of 8 bytes, 8 GPUs"}};
  p.decode_bw_util = 0.8421875;
  p.decode_bw_source = "device-to-device copy, median of 8 GPUs: 1717 GB/s over hbm_gbps 2039";
  p.gemm_efficiency = 0.85;
  return p;
}

/// A fit that moved three factors, took decode_bw_util from the probes and kept the rest.
FitResult SampleFit() {
  FitResult fit;
  fit.factors = {
      {"decode_bw_util", Term::kRollout, 0.8, 0.8421875, FactorOutcome::kPrior, 0, 120,
       "cannot be told apart from iteration_overhead_ms"},
      {"iteration_overhead_ms", Term::kRollout, 3, 4.123456789, FactorOutcome::kFitted, 0.2, 120,
       ""},
      {"prefill_mfu", Term::kRollout, 0.55, 0.55, FactorOutcome::kKept, 0, 120,
       "does not change the predictions of these 120 rollout measurements"},
      {"train_mfu", Term::kTrain, 0.4, 0.3125, FactorOutcome::kFitted, 0.01, 10, ""},
      {"engine_restart_s", Term::kSync, 30, 30, FactorOutcome::kKept, 0, 9,
       "does not change the predictions of these 9 sync measurements"},
      {"load_tensor_overhead_us", Term::kSync, 50, 62.5, FactorOutcome::kFitted, 3, 9, ""},
  };
  fit.terms = {{Term::kRollout, 120, 1.5, 1.4, 1.5, 0.081, 0.032},
               {Term::kTrain, 10, 5, 4, 5, 0.2, 0.01},
               {Term::kSync, 9, 0.1, 0.1, 0.1, 0.05, 0.001}};
  return fit;
}

TEST(CalibrationFileTest, TomlSaysWhereEveryNumberComesFrom) {
  // The exact text: header, measured GPU numbers, fitted and probed factors, and why the others
  // are not set.
  const ProbeCalibration probes = A800Probes();
  const FitResult fit = SampleFit();
  const CalibrationFile file = MakeCalibrationFile("A800-80G", &probes, &fit,
                                                   "libra 0.1.0 calibrate on 2026-01-02T00:00:00Z");
  EXPECT_EQ(
      CalibrationToml(file),
      R"(# libra calibration for A800-80G, written by libra 0.1.0 calibrate on 2026-01-02T00:00:00Z.
# Pull it into a recipe with include = ["<this file>"]: its numbers
# override the catalog's and the cost model's defaults; the recipe's own keys win.
# Probes: host gpu-01 at 2026-01-01T00:00:00Z, 8 x NVIDIA A800-SXM4-80GB.

[cluster.gpu_spec]
# measured: NCCL all-reduce bus bandwidth, 8 GPUs, 256 MiB
allreduce_gbps = 161.25
# measured: NCCL all-reduce of 8 bytes, 8 GPUs
allreduce_latency_us = 14.5

[cost_model]
# from probes: device-to-device copy, median of 8 GPUs: 1717 GB/s over hbm_gbps 2039; not fitted to runs: cannot be told apart from iteration_overhead_ms
decode_bw_util = 0.842187
# fitted to 120 rollout measurements (RMS error 8.1% before, 3.2% after)
iteration_overhead_ms = 4.12346
# fitted to 10 train measurements (RMS error 20.0% before, 1.0% after)
train_mfu = 0.3125
# fitted to 9 sync measurements (RMS error 5.0% before, 0.1% after)
load_tensor_overhead_us = 62.5
# prefill_mfu not set: does not change the predictions of these 120 rollout measurements
# engine_restart_s not set: does not change the predictions of these 9 sync measurements
# the bf16 GEMM reaches 0.85 of bf16_tflops: prefill_mfu and train_mfu cannot exceed it
)");
}

TEST(CalibrationFileTest, RoundTripsThroughARecipeInclude) {
  // What calibrate writes, a recipe includes: its cost model then has the written GPU numbers and
  // factors (to the six significant digits written), and the recipe's own keys still win.
  const ProbeCalibration probes = A800Probes();
  const FitResult fit = SampleFit();
  const std::string toml = CalibrationToml(MakeCalibrationFile("A800-80G", &probes, &fit, "test"));
  test::ScopedTempDir dir;
  test::WriteFile(dir.File("calibration.toml"), toml);
  const std::string quickstart = test::ReadFile(test::SourcePath("recipes/quickstart.toml"));
  const std::string text = "include = [\"calibration.toml\"]\n" + quickstart;

  auto parsed = recipe::ParseRecipe(text, dir.File("r.toml"));
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->diagnostics.empty()) << parsed->diagnostics.front().ToString();
  auto point = ModelPointFor(parsed->recipe);
  ASSERT_OK(point);
  EXPECT_EQ(point->gpu, probes.gpu);
  EXPECT_NEAR(point->params.decode_bw_util, 0.842187, 1e-12);
  EXPECT_NEAR(point->params.iteration_overhead_s, 4.12346e-3, 1e-12);
  EXPECT_DOUBLE_EQ(point->params.train_mfu, 0.3125);
  EXPECT_DOUBLE_EQ(point->params.load_tensor_overhead_s, 62.5e-6);
  EXPECT_DOUBLE_EQ(point->params.prefill_mfu, model::RooflineParams().prefill_mfu);
  EXPECT_DOUBLE_EQ(point->params.engine_restart_s, model::RooflineParams().engine_restart_s);

  // The recipe's own [cost_model] key wins over the included one.
  auto own = recipe::ParseRecipe(text + "\n[cost_model]\ntrain_mfu = 0.25\n", dir.File("r.toml"));
  ASSERT_OK(own);
  ASSERT_TRUE(own->diagnostics.empty()) << own->diagnostics.front().ToString();
  EXPECT_DOUBLE_EQ(ModelPointFor(own->recipe)->params.train_mfu, 0.25);
  EXPECT_NEAR(ModelPointFor(own->recipe)->params.decode_bw_util, 0.842187, 1e-12);
}

TEST(CalibrationFileTest, ProbesAloneSetTheGpuAndDecodeBandwidth) {
  // `libra probe --calibration`: no fit, so [cost_model] holds only decode_bw_util.
  const ProbeCalibration probes = A800Probes();
  const CalibrationFile file = MakeCalibrationFile("A800-80G", &probes, nullptr, "test");
  ASSERT_EQ(file.gpu_spec.size(), 2u);
  ASSERT_EQ(file.cost_model.size(), 1u);
  EXPECT_EQ(file.cost_model[0].key, "decode_bw_util");
  EXPECT_EQ(file.cost_model[0].source, "from probes: " + probes.decode_bw_source);
  EXPECT_EQ(file.cost_model_notes.size(), 1u);
}

TEST(CalibrationFileTest, AFitAloneHasNoGpuSection) {
  // `libra calibrate` without --probes: no [cluster.gpu_spec], and the file still parses.
  const FitResult fit = SampleFit();
  const std::string toml = CalibrationToml(MakeCalibrationFile("A800-80G", nullptr, &fit, "test"));
  EXPECT_EQ(toml.find("[cluster.gpu_spec]"), std::string::npos);
  EXPECT_NE(toml.find("# set before the fit; not fitted to runs: cannot be told apart"),
            std::string::npos)
      << toml;
  test::ScopedTempDir dir;
  test::WriteFile(dir.File("c.toml"), toml);
  auto parsed = recipe::ParseRecipe(
      "include = [\"c.toml\"]\n" + test::ReadFile(test::SourcePath("recipes/quickstart.toml")),
      dir.File("r.toml"));
  ASSERT_OK(parsed);
  EXPECT_TRUE(parsed->diagnostics.empty());
}

}  // namespace
}  // namespace libra::calibrate
