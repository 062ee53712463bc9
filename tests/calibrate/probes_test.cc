#include "calibrate/probes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/probe.h"
#include "support/test_util.h"

namespace libra::calibrate {
namespace {

records::ProbeRecord Probe(std::string_view kind, int gpu, double value,
                           std::string detail = "{}") {
  records::ProbeRecord p;
  p.host = "gpu-01";
  p.recorded_at = "2026-01-01T00:00:00Z";
  p.libra_version = "0.1.0";
  p.kind = std::string(kind);
  p.gpu = gpu;
  p.value = value;
  p.unit = std::string(gpu::FindProbeKind(kind)->unit);
  p.detail = std::move(detail);
  return p;
}

/// Two H100s: inventory, copy, GEMM, host links; NCCL across both.
std::vector<records::ProbeRecord> H100Session() {
  const std::string inventory = R"({"name":"NVIDIA H100 80GB HBM3","sms":132})";
  return {
      Probe(gpu::kInventory, 0, 85.0e9, inventory),
      Probe(gpu::kInventory, 1, 84.0e9, inventory),
      Probe(gpu::kHbmCopy, 0, 2.60e12),
      Probe(gpu::kHbmCopy, 1, 2.70e12),
      Probe(gpu::kGemmBf16, 0, 7.0e14),
      Probe(gpu::kGemmBf16, 1, 7.2e14),
      Probe(gpu::kH2d, 0, 53e9),
      Probe(gpu::kH2d, 1, 55e9),
      Probe(gpu::kD2h, 0, 54e9),
      Probe(gpu::kD2h, 1, 54e9),
      Probe(gpu::kAllReduce, -1, 3.6e11, R"({"gpus":2,"sizes":[{"bytes":268435456}]})"),
      Probe(gpu::kAllReduceLatency, -1, 1.2e-5, R"({"gpus":2,"bytes":8})"),
      Probe(gpu::kBroadcast, -1, 3.4e11, R"({"gpus":2,"sizes":[{"bytes":268435456}]})"),
  };
}

const GpuOverride* Override(const ProbeCalibration& c, const std::string& key) {
  for (const GpuOverride& o : c.overrides) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

TEST(ProbesTest, MeasuredNumbersReplaceTheCatalogsAchievedFigures) {
  // Medians over the GPUs (memory: the smallest) replace the achieved figures; decode_bw_util is
  // copy / hbm_gbps; the GEMM is a ceiling only; the datasheet peaks stay.
  const model::GpuSpec h100 = *model::FindGpu("H100-80G");
  auto c = CalibrateFromProbes(H100Session(), h100);
  ASSERT_OK(c);
  EXPECT_EQ(c->host, "gpu-01");
  EXPECT_EQ(c->gpus, 2);
  EXPECT_EQ(c->device, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(c->notes.empty()) << c->notes.front();
  EXPECT_DOUBLE_EQ(c->gpu.hbm_bytes, 84.0e9);
  EXPECT_DOUBLE_EQ(c->gpu.h2d_bandwidth, 54e9);
  EXPECT_DOUBLE_EQ(c->gpu.d2h_bandwidth, 54e9);
  EXPECT_DOUBLE_EQ(c->gpu.allreduce_bandwidth, 3.6e11);
  EXPECT_DOUBLE_EQ(c->gpu.allreduce_latency_s, 1.2e-5);
  EXPECT_DOUBLE_EQ(c->gpu.nvlink_bandwidth, 3.4e11);
  EXPECT_DOUBLE_EQ(c->gpu.hbm_bandwidth, h100.hbm_bandwidth);
  EXPECT_DOUBLE_EQ(c->gpu.bf16_flops, h100.bf16_flops);
  ASSERT_TRUE(c->decode_bw_util.has_value());
  EXPECT_DOUBLE_EQ(*c->decode_bw_util, 2.65e12 / h100.hbm_bandwidth);
  EXPECT_EQ(c->decode_bw_source,
            "device-to-device copy, median of 2 GPUs: 2650 GB/s over hbm_gbps 3350");
  ASSERT_TRUE(c->gemm_efficiency.has_value());
  EXPECT_DOUBLE_EQ(*c->gemm_efficiency, 7.1e14 / h100.bf16_flops);

  // Overrides are in the recipe's units, with the value they replace and their source.
  const GpuOverride* allreduce = Override(*c, "allreduce_gbps");
  ASSERT_NE(allreduce, nullptr);
  EXPECT_DOUBLE_EQ(allreduce->before, 340);
  EXPECT_DOUBLE_EQ(allreduce->value, 360);
  EXPECT_EQ(allreduce->source, "NCCL all-reduce bus bandwidth, 2 GPUs, 256 MiB");
  const GpuOverride* latency = Override(*c, "allreduce_latency_us");
  ASSERT_NE(latency, nullptr);
  EXPECT_NEAR(latency->value, 12, 1e-9);
  EXPECT_EQ(Override(*c, "hbm_gb")->source,
            "GPU memory the CUDA runtime reports (smallest of 2 GPUs)");
  EXPECT_EQ(Override(*c, "hbm_gbps"), nullptr);
  EXPECT_EQ(Override(*c, "bf16_tflops"), nullptr);
}

TEST(ProbesTest, NcclAcrossNodesSetsTheInterNodeBandwidth) {
  // The all-reduce across nodes (libra probe --hosts) becomes inter_node_gbps; without it the
  // catalog's number stays.
  const model::GpuSpec h100 = *model::FindGpu("H100-80G");
  std::vector<records::ProbeRecord> session = H100Session();
  session.push_back(Probe(gpu::kAllReduceNodes, -1, 3.2e11,
                          R"({"nodes":2,"gpus_per_node":2,"sizes":[{"bytes":268435456}]})"));
  session.push_back(Probe(gpu::kBroadcastNodes, -1, 4.0e10, R"({"nodes":2})"));
  auto c = CalibrateFromProbes(session, h100);
  ASSERT_OK(c);
  EXPECT_DOUBLE_EQ(c->gpu.inter_node_bandwidth, 3.2e11);
  const GpuOverride* inter = Override(*c, "inter_node_gbps");
  ASSERT_NE(inter, nullptr);
  EXPECT_DOUBLE_EQ(inter->before, h100.inter_node_bandwidth / 1e9);
  EXPECT_DOUBLE_EQ(inter->value, 320);
  EXPECT_EQ(inter->source, "NCCL all-reduce bus bandwidth across 2 nodes x 2 GPUs, 256 MiB");

  auto single = CalibrateFromProbes(H100Session(), h100);
  ASSERT_OK(single);
  EXPECT_EQ(Override(*single, "inter_node_gbps"), nullptr);
  EXPECT_DOUBLE_EQ(single->gpu.inter_node_bandwidth, h100.inter_node_bandwidth);
}

TEST(ProbesTest, APeakTheProbeBeatsIsReplacedAndSaid) {
  // A GPU described with too low a bandwidth and too few FLOP/s: the measurements become the
  // peaks, decode_bw_util is 1, and the notes say the GPU's numbers were wrong.
  model::GpuSpec custom = *model::FindGpu("H100-80G");
  custom.name = "my-h100";
  custom.hbm_bandwidth = 2.0e12;
  custom.bf16_flops = 5e14;
  auto c = CalibrateFromProbes(H100Session(), custom);
  ASSERT_OK(c);
  EXPECT_DOUBLE_EQ(c->gpu.hbm_bandwidth, 2.65e12);
  EXPECT_DOUBLE_EQ(*c->decode_bw_util, 1);
  EXPECT_DOUBLE_EQ(c->gpu.bf16_flops, 7.1e14);
  ASSERT_EQ(c->notes.size(), 3u);
  // A GPU the recipe describes itself may be a variant: only a note that the names differ.
  EXPECT_EQ(c->notes[0],
            "the probed GPUs are NVIDIA H100 80GB HBM3 (catalog H100-80G), not the recipe's "
            "my-h100");
  EXPECT_EQ(c->notes[1],
            "the device copy (2650 GB/s) beats the GPU's HBM bandwidth (2000 GB/s): its numbers "
            "are wrong, so hbm_gbps becomes the measurement");
  EXPECT_NE(c->notes[2].find("bf16_tflops becomes the measurement"), std::string::npos);
}

TEST(ProbesTest, ProbesOfAnotherCatalogGpuAreRejected) {
  // H100 probes cannot calibrate an A800 recipe: its numbers would become an H100's.
  auto c = CalibrateFromProbes(H100Session(), *model::FindGpu("A800-80G"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "the probed GPUs are NVIDIA H100 80GB HBM3 (catalog H100-80G), not the recipe's "
            "A800-80G: probe that GPU, or calibrate a recipe whose cluster.gpu is H100-80G");
}

TEST(ProbesTest, MissingProbesLeaveTheirNumbersAndSaySo) {
  // One GPU without NCCL and without a copy probe: those numbers keep their values, with notes.
  std::vector<records::ProbeRecord> session = {
      Probe(gpu::kInventory, 0, 85.0e9, R"({"name":"NVIDIA H100 80GB HBM3"})"),
      Probe(gpu::kGemmBf16, 0, 7.0e14)};
  auto c = CalibrateFromProbes(session, *model::FindGpu("H100-80G"));
  ASSERT_OK(c);
  EXPECT_FALSE(c->decode_bw_util.has_value());
  EXPECT_DOUBLE_EQ(c->gpu.allreduce_bandwidth, model::FindGpu("H100-80G")->allreduce_bandwidth);
  ASSERT_EQ(c->notes.size(), 2u);
  EXPECT_EQ(c->notes[0], "no device-copy probe: decode_bw_util is not set from probes");
  EXPECT_EQ(c->notes[1],
            "no NCCL probes (one GPU, or libra built without NCCL): allreduce_gbps, "
            "allreduce_latency_us and nvlink_gbps keep their values");
}

TEST(ProbesTest, EmptyOrNonPositiveProbesAreErrors) {
  // Nothing to calibrate from, or a value no probe can measure.
  const model::GpuSpec h100 = *model::FindGpu("H100-80G");
  EXPECT_EQ(CalibrateFromProbes({}, h100).status().message(), "no probes to calibrate from");
  std::vector<records::ProbeRecord> bad = {Probe(gpu::kHbmCopy, 0, 0)};
  bad[0].id = 7;
  EXPECT_EQ(CalibrateFromProbes(bad, h100).status().message(),
            "probe 7 (hbm_copy) has value 0: not positive");
}

TEST(ProbesTest, NewestSessionIsTheRowsOfTheHighestId) {
  // Two sessions of one host and one of another: the newest is the host + time of the last row.
  std::vector<records::ProbeRecord> all;
  int64_t id = 0;
  for (const auto& [host, at] : std::vector<std::pair<std::string, std::string>>{
           {"a", "t1"}, {"b", "t1"}, {"a", "t2"}, {"a", "t2"}}) {
    records::ProbeRecord p = Probe(gpu::kHbmCopy, 0, 1e12);
    p.id = ++id;
    p.host = host;
    p.recorded_at = at;
    all.push_back(p);
  }
  const std::vector<records::ProbeRecord> newest = NewestProbeSession(all);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].id, 3);
  EXPECT_EQ(newest[1].id, 4);
  EXPECT_TRUE(NewestProbeSession({}).empty());
}

TEST(ProbesTest, CatalogGpuForDeviceMatchesTheModelNumber) {
  // CUDA device names carry the model number of exactly one catalog entry, or none.
  struct Case {
    std::string device;
    std::string expected;  // empty: no match
  };
  for (const Case& c : std::vector<Case>{{"NVIDIA H100 80GB HBM3", "H100-80G"},
                                         {"NVIDIA H200", "H200"},
                                         {"NVIDIA A800-SXM4-80GB", "A800-80G"},
                                         {"NVIDIA A100-SXM4-80GB", "A100-80G"},
                                         {"NVIDIA H800", "H800"},
                                         {"NVIDIA GeForce RTX 4090", ""},
                                         {"", ""}}) {
    SCOPED_TRACE(c.device);
    const std::optional<model::GpuSpec> gpu = CatalogGpuForDevice(c.device);
    EXPECT_EQ(gpu ? gpu->name : "", c.expected);
  }
}

}  // namespace
}  // namespace libra::calibrate
