#include "model/cost_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "support/test_util.h"

namespace libra::model {
namespace {

/// A cost model with round numbers: an iteration costs 1 ms per sequence plus 1 us per context
/// token; a prefill costs 1 us per token; capacity 1000 tokens per GPU.
class FakeModel : public CostModel {
 public:
  std::string_view Name() const override { return "fake"; }
  const GpuSpec& gpu() const override { return gpu_; }
  const ModelArch& arch() const override { return arch_; }
  int64_t KvCapacityTokens(int tp) const override { return 1000 * tp; }
  double IterationTime(int, const IterationLoad& load) const override {
    return 1e-3 * static_cast<double>(load.decode_sequences) +
           1e-6 * static_cast<double>(load.decode_context_tokens);
  }
  double PrefillTime(int, int64_t tokens, int64_t) const override { return 1e-6 * tokens; }
  /// 1 ms per token, spread over the layout's GPUs.
  TrainEstimate TrainStep(const TrainLayout& layout, const TrainPasses&,
                          std::span<const int64_t> tokens) const override {
    TrainEstimate e;
    for (int64_t t : tokens) e.step_s += 1e-3 * static_cast<double>(t);
    e.step_s /= layout.gpus();
    return e;
  }
  double DecodeGpuSecondsLowerBound(int64_t, int64_t) const override { return 0; }
  double PrefillGpuSecondsLowerBound() const override { return 0; }
  double TrainGpuSecondsLowerBound(int64_t, const TrainPasses&) const override { return 0; }
  double WeightSyncTime(const SyncRequest&) const override { return 0; }
  double RoleSwitchTime(const SwitchRequest&) const override { return 0; }

 private:
  GpuSpec gpu_;
  ModelArch arch_;
};

TEST(CostModelTest, IterationLoadKeepsTheSums) {
  // Decodes add their contexts; prefill chunks add tokens, KV touched and attention work.
  IterationLoad load;
  EXPECT_TRUE(load.empty());
  load.AddDecode(100);
  load.AddDecode(300);
  load.AddPrefill(50, 1000);
  EXPECT_FALSE(load.empty());
  EXPECT_EQ(load.decode_sequences, 2);
  EXPECT_EQ(load.decode_context_tokens, 400);
  EXPECT_EQ(load.prefill_chunks, 1);
  EXPECT_EQ(load.prefill_tokens, 50);
  EXPECT_EQ(load.prefill_kv_tokens, 1050);
  EXPECT_DOUBLE_EQ(load.prefill_attention, 50 * (1000 + 25.0));
}

TEST(CostModelTest, TrainLayoutPrints) {
  // The layout's name and GPU count.
  const TrainLayout layout{4, 2, 3, 1};
  EXPECT_EQ(layout.gpus(), 24);
  EXPECT_EQ(layout.ToString(), "tp4 pp2 dp3 mb1");
}

TEST(CostModelTest, DerivedRates) {
  // Single sequence: 1 / (1 ms + 1 us * context). Saturated: as many sequences as the KV holds
  // (capped), per GPU. Prefill: tokens over prefill time.
  const FakeModel m;
  EXPECT_DOUBLE_EQ(SingleSequenceDecodeRate(m, 1, 1000), 1 / 0.002);
  // TP 2 holds 2000 tokens: 4 sequences of 500 -> 4 / (4 ms + 2 ms) / 2 GPUs.
  EXPECT_DOUBLE_EQ(SaturatedDecodeRatePerGpu(m, 2, 500, 100), 4 / 0.006 / 2);
  EXPECT_DOUBLE_EQ(SaturatedDecodeRatePerGpu(m, 2, 500, 2), 2 / 0.003 / 2);
  EXPECT_EQ(SaturatedDecodeRatePerGpu(m, 1, 5000, 100), 0);
  EXPECT_DOUBLE_EQ(PrefillRate(m, 1, 4096), 1e6);
}

TEST(CostModelTest, DecodeSpanSumsIterations) {
  // The base span is the sum of its iterations: 3 iterations of 2 sequences from 100 tokens are
  // (2 ms + 100 us) + (2 ms + 102 us) + (2 ms + 104 us).
  const FakeModel m;
  EXPECT_NEAR(m.DecodeSpanTime(1, 2, 100, 3), 0.006 + 306e-6, 1e-15);
  EXPECT_EQ(m.DecodeSpanTime(1, 2, 100, 0), 0);
}

TEST(CostModelTest, ForTrainBatchAsksTrainStepByDefault) {
  // The base class keeps its own copy of the batch and asks TrainStep for each layout.
  const FakeModel m;
  std::vector<int64_t> batch = {1000, 3000};
  const std::unique_ptr<TrainBatchCosts> costs = m.ForTrainBatch(TrainPasses(), batch);
  batch.clear();
  EXPECT_DOUBLE_EQ(costs->TrainStep({1, 1, 1, 1}).step_s, 4);
  EXPECT_DOUBLE_EQ(costs->TrainStep({2, 1, 2, 1}).step_s, 1);
}

TEST(CostModelTest, DecodeIterationsWithinInvertsTheSpan) {
  // The most iterations that fit in a time, capped by the span's length.
  const FakeModel m;
  const double three = m.DecodeSpanTime(1, 2, 100, 3);
  EXPECT_EQ(DecodeIterationsWithin(m, 1, 2, 100, 10, three), 3);
  EXPECT_EQ(DecodeIterationsWithin(m, 1, 2, 100, 10, three - 1e-9), 2);
  EXPECT_EQ(DecodeIterationsWithin(m, 1, 2, 100, 2, three), 2);
  EXPECT_EQ(DecodeIterationsWithin(m, 1, 2, 100, 10, 0), 0);
}

}  // namespace
}  // namespace libra::model
