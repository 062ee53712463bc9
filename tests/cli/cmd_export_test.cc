// End to end: `libra export`: per-step metrics under verl's names, as CSV, JSONL and TensorBoard
// event files; the event files are read back by an independent decoder (python3-protobuf with
// message definitions written from TensorFlow's published .proto files).
#include <filesystem>

#include "cli/cli_fixture.h"
#include "common/json.h"
#include "common/strings.h"

namespace libra::test {
namespace {

class CmdExportTest : public CliFixture {
 protected:
  void SetUp() override {
    CopyRecipe("quickstart.toml");
    ASSERT_EQ(Libra({"compare", "-q", "--steps", "3", "--systems", "async-split,sync-colocated",
                     "quickstart.toml"})
                  .exit_code,
              0);
  }
};

TEST_F(CmdExportTest, CsvAndJsonlToStdout) {
  // One row per step of each run of the latest comparison, the metrics under verl's names.
  const CommandResult csv = Libra({"export", "--format", "csv", "--out", "-"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::vector<std::string> lines = StrSplit(csv.out, '\n');
  ASSERT_EQ(lines.size(), 8u) << csv.out;  // header, 2 runs x 3 steps, final newline
  EXPECT_EQ(lines[0].rfind("run,system,step,training/global_step,timing_s/step,timing_s/gen,"
                           "timing_s/update_actor,timing_s/update_weights,perf/time_per_step,"
                           "perf/total_num_tokens,perf/throughput,",
                           0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("1,async-split,0,1.0,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[4].rfind("2,sync-colocated,0,1.0,", 0), 0u) << lines[4];
  const CommandResult jsonl = Libra({"export", "--format", "jsonl", "--out", "-", "2"});
  ASSERT_EQ(jsonl.exit_code, 0) << jsonl.err;
  const std::vector<std::string> objects = StrSplit(jsonl.out, '\n');
  ASSERT_EQ(objects.size(), 4u);
  auto first = ParseJson(objects[0]);
  ASSERT_OK(first);
  EXPECT_EQ(first->Find("system")->as_string(), "sync-colocated");
  // verl's perf/throughput counts prompt and response tokens over every GPU; libra's generated
  // tokens per GPU-second are fewer.
  EXPECT_GT(first->Find("perf/throughput")->as_double(),
            first->Find("libra/generated_tokens_per_s_per_gpu")->as_double());
  EXPECT_EQ(first->Find("perf/throughput")->as_double(),
            first->Find("perf/total_num_tokens")->as_double() /
                first->Find("timing_s/step")->as_double() / 16);
}

TEST_F(CmdExportTest, TensorboardEventFilesDecodeIndependently) {
  // One event file per run under OUT/<system>-run<N>/; python3-protobuf reads every record
  // (checking the masked CRCs) and finds each step's scalars as the CSV has them.
  const CommandResult r = Libra({"export", "--out", "tb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("wrote 6 steps of 2 runs to tb: async-split-run1/events.out.tfevents.", 0),
            0u)
      << r.out;
  const CommandResult csv = Libra({"export", "--format", "csv", "--out", "-", "1"});
  const std::vector<std::string> header = StrSplit(StrSplit(csv.out, '\n')[0], ',');
  const std::vector<std::string> step1 = StrSplit(StrSplit(csv.out, '\n')[2], ',');
  std::string file;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.File("tb/async-split-run1"))) {
    file = entry.path().string();
  }
  ASSERT_NE(file.find("events.out.tfevents."), std::string::npos) << file;
  const CommandResult decoded =
      RunProgram({"/usr/bin/python3", SourcePath("tests/support/tfevents_decode.py"), file});
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err << " (python3-protobuf: scripts/install-deps.sh)";
  const std::vector<std::string> events = StrSplit(decoded.out, '\n');
  ASSERT_EQ(events.size(), 5u) << decoded.out;  // file_version, 3 steps, final newline
  auto version = ParseJson(events[0]);
  ASSERT_OK(version);
  EXPECT_EQ(version->Find("file_version")->as_string(), "brain.Event:2");
  auto second = ParseJson(events[2]);
  ASSERT_OK(second);
  EXPECT_EQ(second->Find("step")->as_int(), 2);  // verl's global steps count from 1
  const JsonValue* values = second->Find("values");
  ASSERT_NE(values, nullptr);
  size_t compared = 0;
  for (size_t i = 3; i < header.size(); ++i) {
    if (step1[i].empty()) {
      EXPECT_EQ(values->Find(header[i]), nullptr) << header[i];  // missing stays missing
      continue;
    }
    const JsonValue* v = values->Find(header[i]);
    ASSERT_NE(v, nullptr) << header[i];
    EXPECT_EQ(static_cast<float>(v->as_double()), static_cast<float>(std::stod(step1[i])))
        << header[i];
    ++compared;
  }
  EXPECT_GT(compared, 15u);
  const CommandResult rerun = Libra({"export", "--out", "tb"});  // rewrites the same files
  EXPECT_EQ(rerun.out, r.out);
}

TEST_F(CmdExportTest, Errors) {
  const CommandResult format = Libra({"export", "--format", "wandb"});
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_EQ(format.err, "libra: error: --format must be tensorboard, csv or jsonl (got 'wandb')\n");
  const CommandResult stdout_tb = Libra({"export", "--out", "-"});
  EXPECT_EQ(stdout_tb.exit_code, 2);
  const CommandResult missing = Libra({"export", "--out", "no/such/dir"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("no")));
  const CommandResult unknown = Libra({"export", "async-splt", "--out", "-", "--format", "csv"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("did you mean 'async-split'?"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace libra::test
