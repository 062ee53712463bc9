#include "calibrate/tables.h"

#include <gtest/gtest.h>

#include <string>

#include "support/test_util.h"

namespace libra::calibrate {
namespace {

FitResult SampleFit() {
  FitResult fit;
  fit.factors = {
      {"decode_bw_util", Term::kRollout, 0.8, 0.7, FactorOutcome::kPrior, 0, 0, ""},
      {"iteration_overhead_ms", Term::kRollout, 3, 4.5, FactorOutcome::kFitted, 0.25, 120, ""},
      {"train_mfu", Term::kTrain, 0.4, 0.4, FactorOutcome::kKept, 0, 0, "no train measurements"},
  };
  fit.terms = {{Term::kRollout, 120, 1.5, 1.25, 1.5, 0.2, 0.031}};
  return fit;
}

TEST(TablesTest, TermTableShowsPredictedAgainstMeasuredAndTheRemainingError) {
  // One row per term with measurements: means and RMS errors before and after.
  // (Headers wider than their numbers wrap onto two lines.)
  EXPECT_EQ(TermTable(SampleFit()).Render(report::Format::kText),
            "              measured  predicted   error  predicted   error\n"
            "term       n         s   before s  before    after s   after\n"
            "-------  ---  --------  ---------  ------  ---------  ------\n"
            "rollout  120     1.500      1.250   20.0%      1.500    3.1%\n");
}

TEST(TablesTest, FactorTableSaysHowEachFactorWasSet) {
  // Fitted factors have a spread; the others say where their value comes from.
  EXPECT_EQ(FactorTable(SampleFit()).Render(report::Format::kText),
            "factor                 term     before   after      +-  how\n"
            "---------------------  -------  ------  ------  ------  -----------\n"
            "decode_bw_util         rollout  0.8000  0.7000       -  from probes\n"
            "iteration_overhead_ms  rollout   3.000   4.500  0.2500  fitted\n"
            "train_mfu              train    0.4000  0.4000       -  not fitted\n");
}

TEST(TablesTest, ProbeTableListsEveryChangedNumberWithItsSource) {
  // GPU numbers, then decode_bw_util, then the GEMM ceiling (not applied).
  ProbeCalibration probes;
  probes.overrides = {{"h2d_gbps", 25.1, 24, "pinned host-to-device copy, median of 8 GPUs"}};
  probes.decode_bw_util = 0.75;
  probes.decode_bw_source = "device-to-device copy";
  probes.gemm_efficiency = 0.8;
  const std::string text = ProbeTable(probes, 0.8).Render(report::Format::kText);
  EXPECT_EQ(text,
            "number              before  measured  source\n"
            "------------------  ------  --------  "
            "--------------------------------------------------\n"
            "h2d_gbps            25.100    24.000  pinned host-to-device copy, median of 8 GPUs\n"
            "decode_bw_util      0.8000    0.7500  device-to-device copy\n"
            "GEMM / bf16_tflops       -    0.8000  ceiling of prefill_mfu and train_mfu (not "
            "applied)\n");
}

}  // namespace
}  // namespace libra::calibrate
