#include "model/roofline_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "support/test_util.h"

namespace libra::model {
namespace {

/// The assumptions of performance.md §5 (its roofline tables): 90% of HBM usable, 2 GB reserve,
/// no fragmentation, 85% of HBM bandwidth, no fixed overheads.
RooflineParams Section5() {
  RooflineParams p;
  p.gpu_memory_utilization = 0.9;
  p.reserve_bytes = 2e9;
  p.kv_fragmentation = 0;
  p.decode_bw_util = 0.85;
  p.iteration_overhead_s = 0;
  p.sequence_overhead_s = 0;
  return p;
}

RooflineCostModel Make(const std::string& gpu, const std::string& model,
                       const RooflineParams& params = Section5()) {
  CostModelContext context;
  context.gpu = *FindGpu(gpu);
  context.arch = *FindModel(model);
  context.gpus_per_node = 8;
  return RooflineCostModel(context, params);
}

TEST(RooflineCostModelTest, SaturatedDecodeMatchesTheSection5Roofline) {
  // Qwen3-14B on A800: decode tok/s per GPU at full KV occupancy (batch <= 1024), within 1% of
  // performance.md §5.1.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B");
  struct Case {
    int64_t context;
    int tp;
    double expected;
  };
  const std::vector<Case> cases = {
      {4608, 1, 1351}, {4608, 2, 1767}, {4608, 4, 1905}, {4608, 8, 1844},
      {32768, 1, 185}, {32768, 2, 251}, {32768, 4, 283}, {32768, 8, 295},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "ctx " << c.context << " tp " << c.tp);
    EXPECT_NEAR(SaturatedDecodeRatePerGpu(m, c.tp, c.context, 1024) / c.expected, 1, 0.01);
  }
}

TEST(RooflineCostModelTest, SingleSequenceSpeedMatchesTheSection5Roofline) {
  // Tokens/s of one sequence (the tail), within 1% of performance.md §5.1.
  struct Case {
    std::string gpu;
    int64_t context;
    int tp;
    double expected;
  };
  const std::vector<Case> cases = {
      {"A800-80G", 4096, 1, 60},   {"A800-80G", 4096, 2, 112},  {"A800-80G", 4096, 4, 209},
      {"A800-80G", 4096, 8, 368},  {"A800-80G", 32768, 1, 52},  {"A800-80G", 32768, 2, 97},
      {"A800-80G", 32768, 4, 183}, {"A800-80G", 32768, 8, 327}, {"H100-80G", 4096, 1, 99},
      {"H100-80G", 4096, 2, 190},  {"H100-80G", 4096, 4, 362},  {"H100-80G", 4096, 8, 666},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.gpu << " ctx " << c.context << " tp " << c.tp);
    const RooflineCostModel m = Make(c.gpu, "Qwen3-14B");
    EXPECT_NEAR(SingleSequenceDecodeRate(m, c.tp, c.context) / c.expected, 1, 0.01);
  }
}

TEST(RooflineCostModelTest, KvCapacityPerGpuWithReplicatedHeads) {
  // Qwen3-14B TP1 on A800: (72 - 2 - 29.54) GB over 160 KiB per token; at TP 16 > 8 KV heads
  // the heads are replicated, so per-GPU KV bytes stop shrinking.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B");
  const double weights = m.arch().WeightBytes();
  EXPECT_EQ(m.KvCapacityTokens(1), static_cast<int64_t>((70e9 - weights) / 163840));
  EXPECT_EQ(m.KvCapacityTokens(4), static_cast<int64_t>((70e9 - weights / 4) / 40960));
  EXPECT_DOUBLE_EQ(m.KvBytesPerTokenPerGpu(8), 20480);
  EXPECT_DOUBLE_EQ(m.KvBytesPerTokenPerGpu(16), 20480);
  // Qwen3-32B does not fit one A800 with room for KV at a lower utilisation.
  RooflineParams tight = Section5();
  tight.gpu_memory_utilization = 0.8;
  EXPECT_EQ(Make("A800-80G", "Qwen3-32B", tight).KvCapacityTokens(1), 0);
}

TEST(RooflineCostModelTest, TrainingFlopsOfAn8kSequence) {
  // performance.md §5.2: 6NT = 6.88e14; with recompute and old log-probs 1.28e15; without
  // recompute 1.03e15 (Qwen3-14B, 8192 tokens).
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B");
  TrainPasses passes{true, true, false};
  EXPECT_NEAR(m.TrainFlops(8192, passes) / 1.28e15, 1, 0.01);
  passes.activation_recompute = false;
  EXPECT_NEAR(m.TrainFlops(8192, passes) / 1.03e15, 1, 0.01);
  EXPECT_NEAR(6 * m.arch().ActiveMatmulParams() * 8192 / 6.88e14, 1, 0.01);
}

TEST(RooflineCostModelTest, MoreTpIsNeverSlowerPerToken) {
  // For every catalog model of 1.7B parameters or more and every GPU, a single sequence decodes
  // at least as fast on more GPUs.
  for (const GpuSpec& gpu : GpuCatalog()) {
    for (const ModelArch& arch : ModelCatalog()) {
      if (arch.TotalParams() < 1e9) continue;  // see TinyModelsGainNothingFromTp
      CostModelContext context{gpu, arch, 8};
      const RooflineCostModel m(context, RooflineParams());
      for (int64_t context_tokens : {512, 8192, 32768}) {
        double previous = 0;
        for (int tp : {1, 2, 4, 8}) {
          SCOPED_TRACE(testing::Message() << gpu.name << " " << arch.name << " tp " << tp);
          const double rate = SingleSequenceDecodeRate(m, tp, context_tokens);
          EXPECT_GE(rate, previous);
          previous = rate;
        }
      }
    }
  }
}

TEST(RooflineCostModelTest, TinyModelsGainNothingFromTp) {
  // Qwen3-0.6B on A800: halving a 1.2 GB weight read saves less than the 56 all-reduce latencies
  // TP 2 adds, so a single short sequence is slower at TP 2 (as engines serving tiny models
  // find); from TP 2 on, more TP helps again.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-0.6B", RooflineParams());
  EXPECT_LT(SingleSequenceDecodeRate(m, 2, 512), SingleSequenceDecodeRate(m, 1, 512));
  EXPECT_GT(SingleSequenceDecodeRate(m, 4, 512), SingleSequenceDecodeRate(m, 2, 512));
}

TEST(RooflineCostModelTest, ThroughputFallsWithContext) {
  // Saturated decode throughput per GPU falls as contexts grow, for every TP.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-8B", RooflineParams());
  for (int tp : {1, 2, 4, 8}) {
    double previous = 1e18;
    for (int64_t context : {1024, 2048, 4096, 8192, 16384, 32768}) {
      SCOPED_TRACE(testing::Message() << "tp " << tp << " ctx " << context);
      const double rate = SaturatedDecodeRatePerGpu(m, tp, context, 256);
      EXPECT_LT(rate, previous);
      previous = rate;
    }
  }
}

TEST(RooflineCostModelTest, IterationIsMemoryOrComputeBound) {
  // A big prefill is compute-bound (time ~ FLOPs), a small decode batch memory-bound; an empty
  // iteration costs nothing and overheads add per iteration and per sequence.
  RooflineParams p = Section5();
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B", p);
  IterationLoad prefill;
  prefill.AddPrefill(8192, 0);
  const double flops =
      2 * m.arch().ActiveMatmulParams() * 8192 + 4.0 * 40 * 40 * 128 * (8192.0 * 4096);
  EXPECT_NEAR(m.IterationTime(1, prefill), flops / (0.55 * 312e12), 1e-9);
  IterationLoad decode;
  decode.AddDecode(1000);
  const double bytes = 2 * m.arch().ActiveMatmulParams() + 1000 * 163840.0;
  EXPECT_NEAR(m.IterationTime(1, decode), bytes / (0.85 * 2039e9), 1e-12);
  EXPECT_EQ(m.IterationTime(1, IterationLoad()), 0);
  p.iteration_overhead_s = 0.003;
  p.sequence_overhead_s = 1e-5;
  const RooflineCostModel slow = Make("A800-80G", "Qwen3-14B", p);
  EXPECT_NEAR(slow.IterationTime(1, decode) - m.IterationTime(1, decode), 0.003 + 1e-5, 1e-12);
}

TEST(RooflineCostModelTest, DecodeSpanClosedFormMatchesTheSum) {
  // The closed form equals the sum of single iterations: memory-bound, compute-bound and spans
  // that cross from one to the other, dense and MoE, with and without TP.
  RooflineParams crossing = RooflineParams();
  crossing.prefill_mfu = 0.01;  // makes big batches compute-bound while short contexts last
  struct Case {
    std::string model;
    RooflineParams params;
    int tp;
    int64_t sequences;
    int64_t context;
    int64_t iterations;
  };
  const std::vector<Case> cases = {
      {"Qwen3-14B", RooflineParams(), 1, 1, 200, 5000},
      {"Qwen3-14B", RooflineParams(), 4, 64, 64 * 3000, 700},
      {"Qwen3-8B", crossing, 2, 256, 256 * 10, 3000},
      {"Qwen3-30B-A3B", RooflineParams(), 2, 32, 32 * 1000, 900},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " tp " + std::to_string(c.tp));
    const RooflineCostModel m = Make("A800-80G", c.model, c.params);
    const double closed = m.DecodeSpanTime(c.tp, c.sequences, c.context, c.iterations);
    const double summed = m.CostModel::DecodeSpanTime(c.tp, c.sequences, c.context, c.iterations);
    EXPECT_NEAR(closed / summed, 1, 1e-9);
  }
}

TEST(RooflineCostModelTest, LowerBoundsAreBelowWhatIterationsCost) {
  // Per token, decode, prefill and training never cost less than their lower bounds.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B", RooflineParams());
  for (int tp : {1, 2, 4, 8}) {
    for (int64_t n : {1, 16, 256}) {
      IterationLoad load;
      load.decode_sequences = n;
      load.decode_context_tokens = n * 4000;
      EXPECT_GE(tp * m.IterationTime(tp, load) / n, m.DecodeGpuSecondsLowerBound(4000, 256));
    }
    EXPECT_GE(tp * m.PrefillTime(tp, 8192, 0) / 8192, m.PrefillGpuSecondsLowerBound());
  }
  // The decode bound rises with the context, and no faster than linearly (the planner sums it
  // over trajectories of different contexts).
  const auto bound = [&](int64_t context) { return m.DecodeGpuSecondsLowerBound(context, 256); };
  for (int64_t context : {500, 4000, 30000}) {
    EXPECT_LE(bound(context - 500), bound(context));
    EXPECT_GE(2 * bound(context) * (1 + 1e-12), bound(context - 500) + bound(context + 500));
  }
  const TrainPasses passes;
  const TrainEstimate e = m.TrainStep({8, 1, 1, 1}, passes, std::vector<int64_t>{8192});
  EXPECT_GE(e.step_s * 8, m.TrainGpuSecondsLowerBound(8192, passes));
}

TEST(RooflineCostModelTest, MoeReadsOnlyTouchedExperts) {
  // One token touches 8 of 128 experts per layer; a large batch touches nearly all of them.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-30B-A3B");
  IterationLoad one;
  one.AddDecode(0);
  IterationLoad many;
  for (int i = 0; i < 256; ++i) many.AddDecode(0);
  const double bw = 0.85 * 2039e9;
  const double active_bytes = 2 * m.arch().ActiveMatmulParams();
  EXPECT_NEAR(m.IterationTime(1, one) * bw, active_bytes, active_bytes * 1e-9);
  EXPECT_GT(m.IterationTime(1, many) * bw, 0.99 * (m.arch().WeightBytes() - 2 * 151936.0 * 2048));
}

TEST(RooflineCostModelTest, PrefillIsChunked) {
  // A 20k-token context on a new instance is built in chunks of 8192 (8192, 8192, 3616), each
  // attending over what came before.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B");
  double expected = 0;
  for (auto [q, p] :
       std::vector<std::pair<int64_t, int64_t>>{{8192, 0}, {8192, 8192}, {3616, 16384}}) {
    IterationLoad load;
    load.AddPrefill(q, p);
    expected += m.IterationTime(2, load);
  }
  EXPECT_DOUBLE_EQ(m.PrefillTime(2, 20000, 0), expected);
  EXPECT_GT(m.PrefillTime(2, 1000, 20000), m.PrefillTime(2, 1000, 0));
  EXPECT_NEAR(PrefillRate(m, 2, 8192), 8192 / m.PrefillTime(2, 8192, 0), 1e-9);
}

TEST(RooflineCostModelTest, TrainingGrowsWithTokensAndModelSize) {
  // More or longer sequences, or a larger model, never train faster.
  const TrainLayout layout{4, 1, 2, 1};
  const TrainPasses passes;
  double previous = 0;
  for (const char* name :
       {"Qwen3-0.6B", "Qwen3-1.7B", "Qwen3-4B", "Qwen3-8B", "Qwen3-14B", "Qwen3-32B"}) {
    SCOPED_TRACE(name);
    const RooflineCostModel m = Make("H100-80G", name, RooflineParams());
    const std::vector<int64_t> batch(64, 8192);
    const double step = m.TrainStep(layout, passes, batch).step_s;
    EXPECT_GT(step, previous);
    previous = step;
    const std::vector<int64_t> longer(64, 16384);
    const std::vector<int64_t> more(128, 8192);
    EXPECT_GT(m.TrainStep(layout, passes, longer).step_s, step);
    EXPECT_GT(m.TrainStep(layout, passes, more).step_s, step);
  }
}

TEST(RooflineCostModelTest, TrainStepParts) {
  // Compute is FLOPs over G * MFU * peak on the busiest rank; LPT packing sets the imbalance;
  // one rank alone has no DP cost; TP adds communication; memory gives the OOM verdict.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B", RooflineParams());
  const TrainPasses passes{true, true, false};
  const std::vector<int64_t> batch = {8192, 8192, 8192, 8192};
  const TrainEstimate one = m.TrainStep({8, 1, 1, 1}, passes, batch);
  EXPECT_NEAR(one.compute_s, 4 * m.TrainFlops(8192, passes) / (8 * 0.40 * 312e12), 1e-9);
  EXPECT_DOUBLE_EQ(one.imbalance, 1);
  EXPECT_EQ(one.dp_comm_s, 0);
  EXPECT_GT(one.tp_comm_s, 0);
  EXPECT_GT(one.optimizer_s, 0);
  EXPECT_NEAR(one.step_s,
              one.compute_s + one.tp_comm_s + one.dp_comm_s + one.pp_bubble_s + one.optimizer_s,
              1e-12);
  const TrainEstimate skewed =
      m.TrainStep({8, 1, 2, 1}, passes, std::vector<int64_t>{30000, 1000, 1000});
  EXPECT_GT(skewed.imbalance, 1.5);
  EXPECT_GT(skewed.dp_comm_s, 0);
  const TrainEstimate pipelined = m.TrainStep({4, 2, 1, 1}, passes, batch);
  EXPECT_GT(pipelined.pp_bubble_s, 0);
  // Qwen3-14B's full training state does not fit one A800; sharded over 8 GPUs it does.
  EXPECT_TRUE(m.TrainStep({1, 1, 1, 1}, passes, batch).oom());
  EXPECT_FALSE(one.oom());
  EXPECT_NEAR(one.memory_limit_bytes, 78e9, 1);
}

TEST(RooflineCostModelTest, ForTrainBatchAnswersAsTrainStep) {
  // A planner asks one batch about many layouts: the batch's answers (the packing remembered per
  // data-parallel degree) are TrainStep's, bit for bit, in any order of asking and of the batch.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B", RooflineParams());
  for (const TrainPasses& passes :
       {TrainPasses{true, true, false}, TrainPasses{false, false, true}}) {
    const std::vector<int64_t> batch = {900, 30000, 4000, 4000, 12000, 700, 8192, 1, 2500};
    const std::unique_ptr<TrainBatchCosts> costs = m.ForTrainBatch(passes, batch);
    for (const TrainLayout& layout :
         {TrainLayout{8, 1, 1, 1}, TrainLayout{4, 1, 3, 2}, TrainLayout{2, 2, 3, 1},
          TrainLayout{1, 1, 16, 1}, TrainLayout{4, 2, 3, 4}, TrainLayout{8, 1, 1, 1}}) {
      const TrainEstimate want = m.TrainStep(layout, passes, batch);
      const TrainEstimate got = costs->TrainStep(layout);
      EXPECT_EQ(got.step_s, want.step_s) << layout.ToString();
      EXPECT_EQ(got.compute_s, want.compute_s);
      EXPECT_EQ(got.tp_comm_s, want.tp_comm_s);
      EXPECT_EQ(got.pp_bubble_s, want.pp_bubble_s);
      EXPECT_EQ(got.dp_comm_s, want.dp_comm_s);
      EXPECT_EQ(got.optimizer_s, want.optimizer_s);
      EXPECT_EQ(got.flops, want.flops);
      EXPECT_EQ(got.imbalance, want.imbalance);
      EXPECT_EQ(got.memory_bytes, want.memory_bytes);
    }
  }
}

TEST(RooflineCostModelTest, ABatchKnowsSomeLayoutsDoNotFitBeforePackingIt) {
  // Qwen3-32B on 80 GB: the states alone overflow one GPU and two, so those layouts are known not
  // to fit without packing the batch; a layout is never called out of memory when TrainStep fits
  // it; and with one pipeline stage (one micro-batch in flight whatever the packing) the answer
  // is exact. OutOfMemory is TrainStep's verdict, packing the batch only with several stages.
  const RooflineCostModel m = Make("H100-80G", "Qwen3-32B", RooflineParams());
  const TrainPasses passes{true, true, false};
  const std::vector<int64_t> batch = {900, 30000, 4000, 4000, 12000, 700, 8192, 1, 2500};
  const std::unique_ptr<TrainBatchCosts> costs = m.ForTrainBatch(passes, batch);
  int surely = 0;
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 4, 8}) {
      for (int micro : {1, 2, 4}) {
        const TrainLayout layout{tp, pp, 2, micro};
        const bool oom = m.TrainStep(layout, passes, batch).oom();
        SCOPED_TRACE(layout.ToString());
        if (costs->SurelyOutOfMemory(layout)) {
          ++surely;
          EXPECT_TRUE(oom);
        }
        if (pp == 1) {
          EXPECT_EQ(costs->SurelyOutOfMemory(layout), oom);
        }
        EXPECT_EQ(costs->OutOfMemory(layout), oom);  // packed only with several stages
      }
    }
  }
  EXPECT_TRUE(costs->SurelyOutOfMemory({1, 1, 2, 1}));
  EXPECT_GT(surely, 3);
  EXPECT_LT(surely, 48);
}

TEST(RooflineCostModelTest, SyncAndSwitchTimes) {
  // NCCL within a node is faster than across nodes, which is faster than the disk path; role
  // switches move the engine weights and the trainer state over the host link.
  const RooflineCostModel m = Make("A800-80G", "Qwen3-14B", RooflineParams());
  const TrainLayout train{8, 1, 2, 1};
  SyncRequest sync;
  sync.train = train;
  sync.rollout_tp = 1;
  sync.cross_node = false;
  const double local = m.WeightSyncTime(sync);
  sync.cross_node = true;
  const double remote = m.WeightSyncTime(sync);
  sync.path = SyncPath::kDisk;
  const double disk = m.WeightSyncTime(sync);
  EXPECT_LT(local, remote);
  EXPECT_LT(remote, disk);
  EXPECT_GT(disk, 30);  // includes the engine restart
  // Broadcast over 100 GB/s inter-node: about 0.3 s for 29.5 GB (performance.md §1.4c).
  EXPECT_NEAR(remote - local, m.arch().WeightBytes() / 100e9 - m.arch().WeightBytes() / 200e9,
              1e-9);
  SwitchRequest to_train{SwitchDirection::kRolloutToTrain, 1, train};
  SwitchRequest to_rollout{SwitchDirection::kTrainToRollout, 1, train};
  EXPECT_GT(m.RoleSwitchTime(to_train), 2);
  EXPECT_GT(m.RoleSwitchTime(to_rollout), 2);
  // Engine weights at TP1: 29.5 GB over 25.1 GB/s, about 1.2 s each way (performance.md §1.4d).
  EXPECT_NEAR(m.arch().WeightBytes() / m.gpu().d2h_bandwidth, 1.18, 0.01);
}

TEST(RooflineCostModelTest, OptionsOverrideDefaults) {
  // Recipe options replace defaults in their human units; unknown keys are errors.
  CostModelContext context{*FindGpu("A800-80G"), *FindModel("Qwen3-14B"), 8};
  recipe::OptionTable options;
  options.path = "cost_model";
  recipe::OptionValue v;
  v.kind = recipe::OptionValue::Kind::kDouble;
  v.double_value = 0.7;
  options.entries = {{"decode_bw_util", v}};
  v.double_value = 5;
  options.entries.push_back({"iteration_overhead_ms", v});
  auto model = RooflineCostModel::Create(context, options);
  ASSERT_OK(model);
  const auto* roofline = dynamic_cast<const RooflineCostModel*>(model->get());
  ASSERT_NE(roofline, nullptr);
  EXPECT_DOUBLE_EQ(roofline->params().decode_bw_util, 0.7);
  EXPECT_DOUBLE_EQ(roofline->params().iteration_overhead_s, 0.005);
  options.entries.push_back({"decode_bw", v});
  auto bad = RooflineCostModel::Create(context, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cost_model.decode_bw: unknown option; did you mean "
                                        "'decode_bw_util'?"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace libra::model
