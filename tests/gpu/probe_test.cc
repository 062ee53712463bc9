#include "gpu/probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "support/test_util.h"

namespace libra::gpu {
namespace {

ProbeReport SampleReport() {
  ProbeReport report;
  report.host = "gpu-01";
  report.recorded_at = "2026-01-01T00:00:00Z";
  report.libra_version = "0.1.0";
  report.results = {
      {std::string(kInventory), 0, 85899345920.0, "B",
       JsonValue::MakeObject({{"name", "NVIDIA H100 80GB HBM3"}, {"sms", 132}})},
      {std::string(kHbmCopy), 0, 2.9e12, "B/s",
       JsonValue::MakeObject({{"bytes", int64_t{1} << 30}, {"median_s", 7.4e-4}})},
      {std::string(kGemmBf16), 0, 7.1e14, "FLOP/s", JsonValue::MakeObject()},
      {std::string(kAllReduce), -1, 3.6e11, "B/s",
       JsonValue::MakeObject({{"gpus", 8},
                              {"sizes", JsonValue::MakeArray({JsonValue::MakeObject(
                                            {{"bytes", 268435456}, {"busbw", 3.6e11}})})}})},
      {std::string(kAllReduceLatency), -1, 2.1e-5, "s", JsonValue::MakeObject()},
  };
  return report;
}

/// A probe document around one probe object.
std::string WithProbe(const std::string& probe) {
  return R"({"format": "libra-probes", "version": 1, "host": "h", "recorded_at": "t",
             "libra_version": "0.1.0", "probes": [)" +
         probe + "]}";
}

TEST(ProbeTest, ReportRoundTripsThroughJson) {
  // What --json writes, --import reads back unchanged, details included.
  const ProbeReport report = SampleReport();
  const std::string json = ProbeReportToJson(report);
  auto parsed = ParseProbeReport(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, report);
  // One probe per line, so that files diff well.
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 2 + 5 + 2);
}

TEST(ProbeTest, EveryKindHasAUnitAndIsFound) {
  // The kinds are distinct, known by name, and per GPU or node-wide as documented.
  for (const ProbeKind& kind : ProbeKinds()) {
    SCOPED_TRACE(std::string(kind.name));
    EXPECT_EQ(FindProbeKind(kind.name), &kind);
    EXPECT_FALSE(kind.unit.empty());
  }
  EXPECT_EQ(FindProbeKind("hbm"), nullptr);
  EXPECT_FALSE(FindProbeKind(kAllReduce)->per_gpu);
  EXPECT_TRUE(FindProbeKind(kHbmCopy)->per_gpu);
}

TEST(ProbeTest, MalformedDocumentsAreRejectedWithTheField) {
  // Every way a probe file can be wrong names the field and the problem.
  struct Case {
    std::string name;
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"not JSON", "{\"format\": ", "line 1, column 12: "},
      {"not an object", "[1]", "expected a JSON object (got an array)"},
      {"other format", R"({"format": "x", "version": 1})",
       "format: expected \"libra-probes\" (got \"x\"): not a libra probe file"},
      {"newer version",
       R"({"format": "libra-probes", "version": 2, "host": "h", "recorded_at": "t",
           "libra_version": "", "probes": []})",
       "version: this libra reads version 1 (got 2)"},
      {"unknown top-level key", R"({"format": "libra-probes", "version": 1, "hots": "h"})",
       "unknown key 'hots'; did you mean 'host'?"},
      {"missing host",
       R"({"format": "libra-probes", "version": 1, "recorded_at": "t", "libra_version": "",
           "probes": []})",
       "missing key 'host'"},
      {"no probes",
       R"({"format": "libra-probes", "version": 1, "host": "h", "recorded_at": "t",
           "libra_version": "", "probes": []})",
       "probes: no probes"},
      {"probe not an object", WithProbe("3"), "probes[0]: expected an object (got an integer)"},
      {"unknown kind", WithProbe(R"({"kind": "hbm_cpy", "gpu": 0, "value": 1, "unit": "B/s"})"),
       "probes[0].kind: unknown probe kind 'hbm_cpy' (known: inventory, hbm_copy, gemm_bf16, "
       "h2d, d2h, allreduce, allreduce_latency, broadcast, allreduce_nodes, broadcast_nodes); did "
       "you mean 'hbm_copy'?"},
      {"wrong unit", WithProbe(R"({"kind": "hbm_copy", "gpu": 0, "value": 1, "unit": "GB/s"})"),
       "probes[0].unit: \"GB/s\" is not the unit of hbm_copy (B/s)"},
      {"value not a number",
       WithProbe(R"({"kind": "hbm_copy", "gpu": 0, "value": "fast", "unit": "B/s"})"),
       "probes[0].value: expected a positive number (got \"fast\")"},
      {"value not positive",
       WithProbe(R"({"kind": "hbm_copy", "gpu": 0, "value": 0, "unit": "B/s"})"),
       "probes[0].value: expected a positive number (got 0)"},
      {"per-GPU kind without a GPU",
       WithProbe(R"({"kind": "hbm_copy", "gpu": -1, "value": 1, "unit": "B/s"})"),
       "probes[0].gpu: a hbm_copy probe needs a device index"},
      {"node-wide kind with a GPU",
       WithProbe(R"({"kind": "allreduce", "gpu": 3, "value": 1, "unit": "B/s"})"),
       "probes[0].gpu: a allreduce probe is node-wide: its gpu must be -1"},
      {"gpu not an integer",
       WithProbe(R"({"kind": "hbm_copy", "gpu": 0.5, "value": 1, "unit": "B/s"})"),
       "probes[0].gpu: expected a device index in [0, 1023], or -1 for the node (got 0.5)"},
      {"detail not an object",
       WithProbe(R"({"kind": "hbm_copy", "gpu": 0, "value": 1, "unit": "B/s", "detail": []})"),
       "probes[0].detail: expected an object (got an array)"},
      {"unknown probe key",
       WithProbe(R"({"kind": "hbm_copy", "gpu": 0, "value": 1, "unit": "B/s", "note": ""})"),
       "probes[0]: unknown key 'note'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto parsed = ParseProbeReport(c.text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.error), std::string::npos)
        << parsed.status().message();
  }
}

TEST(ProbeTest, WithoutCudaEveryProbeSaysHowToBuildThem) {
  // The default build has no probes: a clear error, not a crash.
  if (BuiltWithCuda()) GTEST_SKIP() << "built with CUDA";
  EXPECT_FALSE(BuiltWithNccl());
  auto count = CountGpus();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().message(),
            "gpu: built without CUDA (configure with -DLIBRA_WITH_CUDA=ON)");
  auto report = ProbeLocalNode(ProbeOptions::Quick(), nullptr);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kBackend);
}

TEST(ProbeTest, HexCarriesAnyBytesBothWays) {
  // How node 0's NCCL unique id travels on the other nodes' command lines.
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  const std::string hex = HexEncode(bytes);
  EXPECT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(504), "fcfdfeff");
  auto back = HexDecode(hex);
  ASSERT_OK(back);
  EXPECT_EQ(*back, bytes);
  EXPECT_EQ(*HexDecode("ABcd"), "\xab\xcd");
  EXPECT_EQ(HexDecode("abc").status().message(), "odd number of hex digits (3)");
  EXPECT_EQ(HexDecode("0g").status().message(), "not a hex digit at 1: 'g'");
}

TEST(ProbeTest, WithoutNcclTheProbeAcrossNodesSaysHowToBuildIt) {
  if (BuiltWithNccl()) GTEST_SKIP() << "built with NCCL";
  auto results = ProbeAcrossNodes(NcclPeer{}, ProbeOptions::Quick(), nullptr, nullptr);
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().code(), StatusCode::kBackend);
  EXPECT_NE(results.status().message().find("built without"), std::string::npos);
}

/// Skips the test unless this build has CUDA and the runtime sees a GPU.
#define LIBRA_REQUIRE_GPU()                                                             \
  do {                                                                                  \
    if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA (-DLIBRA_WITH_CUDA=OFF)"; \
    auto gpus = CountGpus();                                                            \
    if (!gpus.ok()) GTEST_SKIP() << "no GPU: " << gpus.status().message();              \
  } while (false)

TEST(ProbeGpuTest, QuickProbesMeasureEveryGpu) {
  // On a GPU node: every per-GPU kind once per device, plausible values, and a report that
  // round-trips through JSON.
  LIBRA_REQUIRE_GPU();
  const int gpus = *CountGpus();
  std::vector<std::string> lines;
  auto report = ProbeLocalNode(ProbeOptions::Quick(),
                               [&](const std::string& line) { lines.push_back(line); });
  ASSERT_OK(report);
  EXPECT_FALSE(report->host.empty());
  EXPECT_FALSE(lines.empty());
  for (std::string_view kind : {kInventory, kHbmCopy, kGemmBf16, kH2d, kD2h}) {
    SCOPED_TRACE(std::string(kind));
    int seen = 0;
    for (const ProbeResult& r : report->results) {
      if (r.kind != kind) continue;
      ++seen;
      EXPECT_GT(r.value, 0);
      EXPECT_EQ(r.unit, FindProbeKind(kind)->unit);
    }
    EXPECT_EQ(seen, gpus);
  }
  for (const ProbeResult& r : report->results) {
    if (r.kind == kHbmCopy) {
      EXPECT_GT(r.value, 50e9);  // any datacentre GPU copies faster than 50 GB/s
      EXPECT_LT(r.value, 20e12);
    }
    if (r.kind == kGemmBf16) {
      EXPECT_GT(r.value, 1e12);
      EXPECT_LT(r.value, 5e15);
    }
  }
  report->recorded_at = "t";
  auto back = ParseProbeReport(ProbeReportToJson(*report));
  ASSERT_OK(back);
  EXPECT_EQ(*back, *report);
}

TEST(ProbeGpuTest, NcclBusBandwidthAcrossTheNode) {
  // With NCCL and two GPUs or more: all-reduce and broadcast bus bandwidth and the latency.
  LIBRA_REQUIRE_GPU();
  if (!BuiltWithNccl()) GTEST_SKIP() << "built without NCCL (-DLIBRA_WITH_NCCL=OFF)";
  if (*CountGpus() < 2) GTEST_SKIP() << "NCCL probes need at least two GPUs";
  auto report = ProbeLocalNode(ProbeOptions::Quick(), nullptr);
  ASSERT_OK(report);
  int collectives = 0;
  for (const ProbeResult& r : report->results) {
    if (r.kind == kAllReduce || r.kind == kBroadcast || r.kind == kAllReduceLatency) {
      ++collectives;
      EXPECT_EQ(r.gpu, -1);
      EXPECT_GT(r.value, 0);
    }
  }
  EXPECT_EQ(collectives, 3);
}

TEST(ProbeGpuTest, NcclAcrossTwoProcessesOfThisNode) {
  // The probe across nodes with both "nodes" on this machine, one GPU each: node 0 makes the id,
  // node 1 (a thread here, a process started by libra there) joins with it.
  LIBRA_REQUIRE_GPU();
  if (!BuiltWithNccl()) GTEST_SKIP() << "built without NCCL (-DLIBRA_WITH_NCCL=OFF)";
  if (*CountGpus() < 2) GTEST_SKIP() << "needs two GPUs";
  std::promise<std::string> id;
  Result<std::vector<ProbeResult>> other = Status::Internal("not run");
  std::thread node1([&] {
    ProbeOptions options = ProbeOptions::Quick();
    options.gpus = {1};
    other = ProbeAcrossNodes(NcclPeer{id.get_future().get(), 1, 2, 1}, options, nullptr, nullptr);
  });
  ProbeOptions options = ProbeOptions::Quick();
  options.gpus = {0};
  bool sent = false;
  auto results = ProbeAcrossNodes(
      NcclPeer{"", 0, 2, 1}, options,
      [&](const std::string& hex) {
        id.set_value(hex);
        sent = true;
      },
      nullptr);
  if (!sent) id.set_value("");  // node 0 failed before: node 1 fails on the empty id
  node1.join();
  ASSERT_OK(results);
  ASSERT_OK(other);
  EXPECT_TRUE(other->empty());
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ((*results)[0].kind, kAllReduceNodes);
  EXPECT_EQ((*results)[1].kind, kBroadcastNodes);
  for (const ProbeResult& r : *results) EXPECT_GT(r.value, 0);
}

TEST(ProbeGpuTest, UnknownGpuIndexIsAnError) {
  // --gpus naming a device the node lacks is refused before anything runs.
  LIBRA_REQUIRE_GPU();
  ProbeOptions options = ProbeOptions::Quick();
  options.gpus = {*CountGpus()};
  auto report = ProbeLocalNode(options, nullptr);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace libra::gpu
