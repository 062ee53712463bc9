// End to end: `libra probe`. Without a GPU only --import can be exercised; the example file
// tests/testdata/probes/example-h100x8.json is illustrative (plausible 8x H100 numbers), not a
// measurement.
#include "cli/cli_fixture.h"
#include "gpu/probe.h"
#include "store/store.h"

namespace libra::test {
namespace {

class CmdProbeTest : public CliFixture {
 protected:
  void CopyExample() {
    WriteFile(dir_.File("example.json"),
              ReadFile(SourcePath("tests/testdata/probes/example-h100x8.json")));
  }
};

TEST_F(CmdProbeTest, ImportPrintsAndRecordsTheProbes) {
  // --import: one row per probe in people's units, every probe recorded in --db as it was.
  CopyExample();
  const CommandResult r = Libra({"probe", "--import", "example.json", "--db", "probes.db"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ExpectGolden("cli/probe_import.txt",
               "libra probe --import tests/testdata/probes/example-h100x8.json --db probes.db",
               r.out);

  auto store = store::Store::Open(dir_.File("probes.db"));
  ASSERT_OK(store);
  auto probes = (*store)->Probes();
  ASSERT_OK(probes);
  auto report = gpu::ParseProbeReport(ReadFile(dir_.File("example.json")));
  ASSERT_OK(report);
  ASSERT_EQ(probes->size(), report->results.size());
  for (size_t i = 0; i < probes->size(); ++i) {
    const store::ProbeRecord& p = (*probes)[i];
    EXPECT_EQ(p.id, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(p.host, "example-h100-node");
    EXPECT_EQ(p.recorded_at, "2026-01-15T09:30:00Z");
    EXPECT_EQ(p.kind, report->results[i].kind);
    EXPECT_EQ(p.gpu, report->results[i].gpu);
    EXPECT_EQ(p.value, report->results[i].value);
  }
}

TEST_F(CmdProbeTest, CalibrationFromImportedProbes) {
  // --calibration: what the probes change for the catalog GPU the device name matches, written
  // as a TOML that a recipe on that GPU includes.
  CopyExample();
  const CommandResult r = Libra({"probe", "-q", "--import", "example.json", "--db", "probes.db",
                                 "--calibration", "h100.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  ExpectGolden("cli/probe_calibration_h100.toml",
               "libra probe --import tests/testdata/probes/example-h100x8.json --calibration "
               "h100.toml: the file written",
               ReadFile(dir_.File("h100.toml")));

  const CommandResult shown =
      Libra({"probe", "--import", "example.json", "--db", "probes.db", "--calibration", "h.toml"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const std::string tail = shown.out.substr(shown.out.find("\nWhat the probes change"));
  ExpectGolden("cli/probe_calibration.txt",
               "libra probe --import tests/testdata/probes/example-h100x8.json --calibration "
               "h.toml (after the probe table)",
               tail);

  // A recipe on H100s includes it: its cost model uses the measured numbers.
  CopyRecipe("quickstart.toml");
  WriteFile(dir_.File("h100-quickstart.toml"),
            "include = [\"h100.toml\"]\n" + ReadFile(dir_.File("quickstart.toml")));
  const CommandResult cost =
      Libra({"cost", "--set", "cluster.gpu=H100-80G", "h100-quickstart.toml"});
  ASSERT_EQ(cost.exit_code, 0) << cost.err;
  const CommandResult plain = Libra({"cost", "--set", "cluster.gpu=H100-80G", "quickstart.toml"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(cost.out, plain.out);
}

TEST_F(CmdProbeTest, JsonReimportsUnchanged) {
  // --json writes what --import reads: the same probes, recorded again.
  CopyExample();
  ASSERT_EQ(
      Libra({"probe", "-q", "--import", "example.json", "--db", "a.db", "--json", "copy.json"})
          .exit_code,
      0);
  auto original = gpu::ParseProbeReport(ReadFile(dir_.File("example.json")));
  auto copy = gpu::ParseProbeReport(ReadFile(dir_.File("copy.json")));
  ASSERT_OK(original);
  ASSERT_OK(copy);
  EXPECT_EQ(*copy, *original);
}

TEST_F(CmdProbeTest, RecipeOfAnotherGpuIsRefused) {
  // H100 probes do not calibrate the quickstart's A800s: exit 2, saying why.
  CopyExample();
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"probe", "quickstart.toml", "--import", "example.json", "--db",
                                 "probes.db", "-q", "--calibration", "c.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "libra: error: the probed GPUs are NVIDIA H100 80GB HBM3 (catalog H100-80G), not the "
            "recipe's A800-80G: probe that GPU, or calibrate a recipe whose cluster.gpu is "
            "H100-80G\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("c.toml")));
}

TEST_F(CmdProbeTest, BadImportsAreUsageErrors) {
  // A missing file, or one that is not a probe document: exit 2 with the file and the field.
  const CommandResult missing = Libra({"probe", "--import", "nope.json", "--db", "p.db"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "libra: error: nope.json: cannot read the probe file\n");
  WriteFile(
      dir_.File("bad.json"),
      R"({"format":"libra-probes","version":1,"host":"h","recorded_at":"t",)"
      R"("libra_version":"x","probes":[{"kind":"hbm_copy","gpu":0,"value":1,"unit":"GB/s"}]})");
  const CommandResult bad = Libra({"probe", "--import", "bad.json", "--db", "p.db"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "libra: error: bad.json: probes[0].unit: \"GB/s\" is not the unit of hbm_copy (B/s)\n");
}

TEST_F(CmdProbeTest, WithoutCudaSaysHowToGetProbes) {
  // The default build measures nothing: exit 1, how to build the probes, and --import.
  if (gpu::BuiltWithCuda()) GTEST_SKIP() << "built with CUDA: probing measures this node";
  const CommandResult r = Libra({"probe", "--db", "p.db"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "libra: error: gpu: built without CUDA (configure with -DLIBRA_WITH_CUDA=ON)\n"
            "libra: probes measured on another machine can be imported with `libra probe "
            "--import FILE`\n");
}

}  // namespace
}  // namespace libra::test
