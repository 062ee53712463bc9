// End to end: `libra probe`. Without a GPU only --import can be exercised; the example file
// tests/testdata/probes/example-h100x8.json is illustrative (plausible 8x H100 numbers), not a
// measurement.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_fixture.h"
#include "common/strings.h"
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
    const records::ProbeRecord& p = (*probes)[i];
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
  EXPECT_EQ(missing.err,
            "libra: error: nope.json: cannot read the probe file (No such file or directory)\n");
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
  // The default build measures nothing: exit 1, how to build the probes, and --import into the
  // same --db.
  if (gpu::BuiltWithCuda()) GTEST_SKIP() << "built with CUDA: probing measures this node";
  const CommandResult r = Libra({"probe", "--db", "p.db"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "libra: error: gpu: built without CUDA (configure with -DLIBRA_WITH_CUDA=ON)\n"
            "libra: probes measured on another machine can be imported with `libra probe "
            "--import FILE --db p.db`\n");
}

// A two-node recipe of 8 x H100 each, both nodes on this machine (the local launcher).
constexpr const char* kTwoNodes = R"(name = "two-nodes"
[cluster]
gpu = "H100-80G"
nodes = 2
gpus_per_node = 8
[model]
name = "Qwen3-8B"
[workload]
kind = "agentic"
preset = "search-r1"
[rl]
prompts_per_step = 8
group_size = 4
[launcher]
kind = "local"
)";

// What node 0 of the probe across nodes reports (illustrative numbers, not a measurement).
constexpr const char* kAcross =
    R"({"format":"libra-probes","version":1,"host":"node-0","recorded_at":"2026-01-15T09:31:00Z",)"
    R"("libra_version":"0.1.0","probes":[)"
    R"({"kind":"allreduce_nodes","gpu":-1,"value":3.6e11,"unit":"B/s","detail":{"nodes":2,)"
    R"("gpus_per_node":8,"sizes":[{"bytes":268435456,"busbw":3.6e11}]}},)"
    R"({"kind":"broadcast_nodes","gpu":-1,"value":4.1e10,"unit":"B/s","detail":{"nodes":2,)"
    R"("gpus_per_node":8,"sizes":[{"bytes":268435456,"busbw":4.1e10}]}}]})";

class CmdProbeHostsTest : public CmdProbeTest {
 protected:
  // A stand-in for libra on the nodes: logs how it was called, and prints what `libra probe`
  // prints there (the example probes under the node's name; for the probe across nodes, the
  // unique id first, then, once node 1 has been started with that id, node 0's probes).
  void WriteFakeLibra(const std::string& id_line = "nccl-id 00ff10ab") {
    CopyExample();
    WriteFile(dir_.File("across.json"), kAcross);
    WriteFile(dir_.File("two-nodes.toml"), kTwoNodes);
    const std::string d = dir_.path().string();
    WriteFile(dir_.File("fake-libra"),
              "#!/bin/sh\n"
              "echo \"$LIBRA_NODE $*\" >> " +
                  d +
                  "/calls.txt\n"
                  "case \" $* \" in\n"
                  "  *\" --nccl-node 0 \"*)\n"
                  "    echo '" +
                  id_line +
                  "'\n"
                  "    for i in $(seq 100); do\n"
                  "      grep -q -- '--nccl-id' " +
                  d +
                  "/calls.txt && break; sleep 0.1\n"
                  "    done\n"
                  "    cat " +
                  d +
                  "/across.json ;;\n"
                  "  *\" --nccl-node \"*) ;;\n"
                  "  *) sed \"s/example-h100-node/node-$LIBRA_NODE/\" " +
                  d +
                  "/example.json ;;\n"
                  "esac\n");
    std::filesystem::permissions(dir_.File("fake-libra"), std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
  }

  std::vector<std::string> Calls() {
    std::vector<std::string> lines = StrSplit(ReadFile(dir_.File("calls.txt")), '\n');
    lines.erase(std::remove(lines.begin(), lines.end(), ""), lines.end());
    std::sort(lines.begin(), lines.end());
    return lines;
  }
};

TEST_F(CmdProbeHostsTest, ProbesEveryNodeThenNcclAcrossThem) {
  // --hosts: libra probe on each node of the recipe through its launcher, then one process per
  // node for NCCL across them, node 1 started with the unique id node 0 printed. Every node's
  // probes recorded, node 0's last with the probes across nodes; inter_node_gbps calibrated.
  WriteFakeLibra();
  const CommandResult r = Libra({"probe", "two-nodes.toml", "--hosts", "--libra", "./fake-libra",
                                 "--db", "probes.db", "--calibration", "h100.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/probe_hosts.txt",
               "libra probe two-nodes.toml --hosts --calibration h100.toml, each node printing "
               "the example probes (tests/cli/cmd_probe_test.cc)",
               r.out);
  EXPECT_EQ(Calls(),
            (std::vector<std::string>{
                "0 probe --no-record -q --json -",
                "0 probe --no-record -q --nccl-nodes 2 --nccl-node 0 --nccl-gpus-per-node 8",
                "1 probe --no-record -q --json -",
                "1 probe --no-record -q --nccl-nodes 2 --nccl-node 1 --nccl-gpus-per-node 8 "
                "--nccl-id 00ff10ab"}));

  auto store = store::Store::Open(dir_.File("probes.db"));
  ASSERT_OK(store);
  auto probes = (*store)->Probes();
  ASSERT_OK(probes);
  auto example = gpu::ParseProbeReport(ReadFile(dir_.File("example.json")));
  ASSERT_OK(example);
  const size_t per_node = example->results.size();
  ASSERT_EQ(probes->size(), 2 * per_node + 2);
  EXPECT_EQ(probes->front().host, "node-1");
  EXPECT_EQ((*probes)[per_node].host, "node-0");
  EXPECT_EQ(probes->back().host, "node-0");
  EXPECT_EQ(probes->back().recorded_at, (*probes)[per_node].recorded_at);
  EXPECT_EQ((*probes)[probes->size() - 2].kind, "allreduce_nodes");
  EXPECT_EQ(probes->back().kind, "broadcast_nodes");
  EXPECT_NE(ReadFile(dir_.File("h100.toml")).find("inter_node_gbps = 360"), std::string::npos)
      << ReadFile(dir_.File("h100.toml"));
}

TEST_F(CmdProbeHostsTest, ProbesTheNodesOfASlurmRecipeAsJobSteps) {
  // --hosts through the Slurm launcher (scripts/slurm-local.sh: one node): libra probe runs as a
  // job step of the allocation libra requests, and its probes are recorded under the node.
  if (std::getenv("SLURM_CONF") == nullptr || std::system("sinfo -h >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no local Slurm (SLURM_CONF, scripts/slurm-local.sh)";
  }
  WriteFakeLibra();
  std::string recipe = kTwoNodes;
  recipe.replace(recipe.find("nodes = 2"), 9, "nodes = 1");
  recipe.replace(recipe.find("kind = \"local\""), 14,
                 "kind = \"slurm\"\nsalloc_args = [\"--time=5\"]\n"
                 "[[launcher.hosts]]\naddress = \"127.0.0.1\"");
  WriteFile(dir_.File("slurm.toml"), recipe);
  const CommandResult r = Libra(
      {"probe", "slurm.toml", "--hosts", "--libra", dir_.File("fake-libra"), "--db", "probes.db"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Calls(), (std::vector<std::string>{"0 probe --no-record -q --json -"}));
  auto store = store::Store::Open(dir_.File("probes.db"));
  ASSERT_OK(store);
  auto probes = (*store)->Probes();
  ASSERT_OK(probes);
  ASSERT_FALSE(probes->empty());
  EXPECT_EQ(probes->front().host, "node-0");
}

TEST_F(CmdProbeHostsTest, ANodeThatPrintsNoIdIsAnErrorAndTheNodesProbesStayRecorded) {
  WriteFakeLibra("hello");
  const CommandResult r = Libra(
      {"probe", "two-nodes.toml", "--hosts", "--libra", "./fake-libra", "--db", "probes.db", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "libra: error: node 0 (local): expected 'nccl-id HEX' first, got 'hello'\n");
  auto store = store::Store::Open(dir_.File("probes.db"));
  ASSERT_OK(store);
  auto probes = (*store)->Probes();
  ASSERT_OK(probes);
  auto example = gpu::ParseProbeReport(ReadFile(dir_.File("example.json")));
  ASSERT_OK(example);
  EXPECT_EQ(probes->size(), 2 * example->results.size());
}

TEST_F(CmdProbeHostsTest, WithoutCudaEveryNodeSaysSo) {
  // The real libra on both nodes: each node's failure, named, with what libra said there.
  if (gpu::BuiltWithCuda()) GTEST_SKIP() << "built with CUDA: the nodes would measure";
  WriteFile(dir_.File("two-nodes.toml"), kTwoNodes);
  const CommandResult r = Libra({"probe", "two-nodes.toml", "--hosts", "--db", "probes.db", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  for (const char* node : {"node 0 (local)", "node 1 (local)"}) {
    EXPECT_NE(r.err.find(std::string("libra: error: ") + node +
                         ": libra probe failed (exit code 1): libra: error: gpu: built without "
                         "CUDA (configure with -DLIBRA_WITH_CUDA=ON)"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(CmdProbeHostsTest, HostsNeedARecipeAndTakeNoFiles) {
  const CommandResult none = Libra({"probe", "--hosts", "--db", "p.db"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "libra: error: --hosts probes the nodes of a recipe: give one\n");
  WriteFile(dir_.File("two-nodes.toml"), kTwoNodes);
  const CommandResult json =
      Libra({"probe", "two-nodes.toml", "--hosts", "--json", "x.json", "--db", "p.db"});
  EXPECT_EQ(json.exit_code, 2);
  EXPECT_EQ(json.err,
            "libra: error: --hosts records every node's probes in --db: it takes neither "
            "--import nor --json\n");
}

}  // namespace
}  // namespace libra::test
