#include "model/catalog.h"

#include <gtest/gtest.h>

#include "support/test_util.h"

namespace libra::model {
namespace {

recipe::OptionValue Number(double v) {
  recipe::OptionValue o;
  o.kind = recipe::OptionValue::Kind::kDouble;
  o.double_value = v;
  o.where = "r.toml:9:1";
  return o;
}

recipe::OptionValue Integer(int64_t v) {
  recipe::OptionValue o;
  o.kind = recipe::OptionValue::Kind::kInt;
  o.int_value = v;
  o.where = "r.toml:9:1";
  return o;
}

TEST(CatalogTest, ParameterCountsMatchTheModelCards) {
  // Totals and active matmul parameters computed from the shapes agree with the published
  // figures (performance.md §2.2, model cards) within 1%.
  struct Case {
    std::string name;
    double total;
    double active;  // N_mm: layers plus LM head
    double kv_bytes;
  };
  const std::vector<Case> cases = {
      {"Qwen3-0.6B", 0.596e9, 0.596e9, 114688},  {"Qwen3-1.7B", 1.72e9, 1.72e9, 114688},
      {"Qwen3-4B", 4.02e9, 4.02e9, 147456},      {"Qwen3-8B", 8.19e9, 7.57e9, 147456},
      {"Qwen3-14B", 14.77e9, 13.99e9, 163840},   {"Qwen3-32B", 32.76e9, 31.98e9, 262144},
      {"Qwen3-30B-A3B", 30.53e9, 3.04e9, 98304}, {"Qwen2.5-7B", 7.62e9, 7.07e9, 57344},
      {"Llama-3-8B", 8.03e9, 7.50e9, 131072},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto arch = FindModel(c.name);
    ASSERT_OK(arch);
    EXPECT_NEAR(arch->TotalParams() / c.total, 1.0, 0.01);
    EXPECT_NEAR(arch->ActiveMatmulParams() / c.active, 1.0, 0.01);
    EXPECT_DOUBLE_EQ(arch->KvBytesPerToken(), c.kv_bytes);
    EXPECT_DOUBLE_EQ(arch->WeightBytes(), 2 * arch->TotalParams());
  }
}

TEST(CatalogTest, MoeCountsExpertsSeparately) {
  // Qwen3-30B-A3B: 128 experts of 3 x 2048 x 768 per layer; a token uses 8 of them.
  auto arch = FindModel("Qwen3-30B-A3B");
  ASSERT_OK(arch);
  EXPECT_TRUE(arch->moe());
  EXPECT_DOUBLE_EQ(arch->ExpertParams(), 48.0 * 128 * 3 * 2048 * 768);
  auto dense = FindModel("Qwen3-14B");
  ASSERT_OK(dense);
  EXPECT_FALSE(dense->moe());
  EXPECT_EQ(dense->ExpertParams(), 0);
}

TEST(CatalogTest, GpuNumbers) {
  // Spot checks against the datasheets: A800 is an A100 with 400 GB/s NVLink.
  auto a800 = FindGpu("A800-80G");
  auto a100 = FindGpu("A100-80G");
  ASSERT_OK(a800);
  ASSERT_OK(a100);
  EXPECT_DOUBLE_EQ(a800->bf16_flops, 312e12);
  EXPECT_DOUBLE_EQ(a800->hbm_bandwidth, a100->hbm_bandwidth);
  EXPECT_DOUBLE_EQ(a800->nvlink_bandwidth * 2, 400e9);
  EXPECT_DOUBLE_EQ(a100->nvlink_bandwidth * 2, 600e9);
  auto h200 = FindGpu("H200");
  ASSERT_OK(h200);
  EXPECT_DOUBLE_EQ(h200->hbm_bytes, 141e9);
  EXPECT_EQ(GpuCatalog().size(), 5u);
  EXPECT_EQ(ModelCatalog().size(), 9u);
}

TEST(CatalogTest, UnknownNamesListTheCatalog) {
  // A typo is not found, and the message suggests the entry meant.
  auto gpu = FindGpu("A80-80G");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(gpu.status().message(),
            "unknown GPU 'A80-80G' (known: A100-80G, A800-80G, H100-80G, H800, H200; or describe "
            "it in a custom table); did you mean 'A800-80G'?");
  auto model = FindModel("Qwen3-14b");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("did you mean 'Qwen3-14B'?"), std::string::npos);
}

TEST(CatalogTest, CustomGpuTable) {
  // Human units in, SI out; D2H defaults to H2D; missing fields are errors.
  recipe::OptionTable table;
  table.path = "cluster.gpu_spec";
  table.where = "r.toml:8:1";
  table.entries = {{"bf16_tflops", Number(100)},   {"hbm_gbps", Number(1000)},
                   {"hbm_gb", Integer(48)},        {"nvlink_gbps", Number(50)},
                   {"allreduce_gbps", Number(40)}, {"inter_node_gbps", Number(25)},
                   {"h2d_gbps", Number(12)},       {"allreduce_latency_us", Number(10)}};
  auto gpu = GpuFromOptions("L40-ish", table);
  ASSERT_OK(gpu);
  EXPECT_EQ(gpu->name, "L40-ish");
  EXPECT_DOUBLE_EQ(gpu->bf16_flops, 100e12);
  EXPECT_DOUBLE_EQ(gpu->hbm_bytes, 48e9);
  EXPECT_DOUBLE_EQ(gpu->allreduce_latency_s, 10e-6);
  EXPECT_DOUBLE_EQ(gpu->d2h_bandwidth, 12e9);

  table.entries.erase(table.entries.begin());
  table.entries.push_back({"hbm_tb", Number(1)});
  auto bad = GpuFromOptions("x", table);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "r.toml:8:1: cluster.gpu_spec.bf16_tflops: required field is missing\n"
            "r.toml:9:1: cluster.gpu_spec.hbm_tb: unknown option; did you mean 'hbm_gb'? (known: "
            "allreduce_gbps, allreduce_latency_us, bf16_tflops, d2h_gbps, h2d_gbps, hbm_gb, "
            "hbm_gbps, inter_node_gbps, nvlink_gbps)");
}

TEST(CatalogTest, CustomModelTable) {
  // A custom table reproduces a catalog entry exactly; shape errors are reported.
  recipe::OptionTable table;
  table.path = "model.arch";
  table.where = "r.toml:5:1";
  table.entries = {{"layers", Integer(40)},   {"hidden", Integer(5120)},  {"heads", Integer(40)},
                   {"kv_heads", Integer(8)},  {"head_dim", Integer(128)}, {"ffn", Integer(17408)},
                   {"vocab", Integer(151936)}};
  auto arch = ModelFromOptions("Qwen3-14B", table);
  ASSERT_OK(arch);
  EXPECT_EQ(*arch, *FindModel("Qwen3-14B"));

  table.entries[3].value = Integer(7);             // kv_heads that do not divide heads
  table.entries.erase(table.entries.begin() + 5);  // no ffn
  auto bad = ModelFromOptions("x", table);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "r.toml:5:1: model.arch.ffn: required for a dense model\n"
            "r.toml:9:1: model.arch.kv_heads: must divide heads = 40");
}

}  // namespace
}  // namespace libra::model
