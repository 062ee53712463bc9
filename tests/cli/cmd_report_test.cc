// End to end: `libra report`.
#include <algorithm>

#include "cli/cli_fixture.h"

namespace libra::test {
namespace {

class CmdReportTest : public CliFixture {
 protected:
  void SetUp() override {
    CopyRecipe("quickstart.toml");
    ASSERT_EQ(Libra({"run", "-q", "--steps", "3", "quickstart.toml"}).exit_code, 0);
  }
};

TEST_F(CmdReportTest, LatestRunWithSteps) {
  // No arguments after a run: that run's summary and its steps.
  const CommandResult r = Libra({"report"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/report_run.txt", "libra report after libra run --steps 3", r.out);
}

TEST_F(CmdReportTest, LatestComparison) {
  // After a comparison, no arguments show the comparison.
  ASSERT_EQ(Libra({"compare", "-q", "--steps", "3", "quickstart.toml"}).exit_code, 0);
  const CommandResult r = Libra({"report", "--format", "md"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("## comparison 1: quickstart, 4 runs (", 0), 0u) << r.out;
  const size_t table = r.out.find("| run |");
  ASSERT_NE(table, std::string::npos);
  ExpectGolden("cli/report_comparison.md", "libra report --format md after a comparison",
               r.out.substr(table));
}

TEST_F(CmdReportTest, FormatsAndBaseline) {
  // JSON and CSV summaries of chosen runs, with speedups over a named baseline.
  ASSERT_EQ(Libra({"run", "-q", "--steps", "3", "--set", "system.name=other", "--set",
                   "rl.staleness=0", "quickstart.toml"})
                .exit_code,
            0);
  const CommandResult json = Libra({"report", "--format", "json", "--baseline", "other", "1", "2"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  ExpectGolden("cli/report_two_runs.json", "libra report --format json --baseline other 1 2",
               json.out);
  const CommandResult csv = Libra({"report", "--format", "csv", "2"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  ExpectGolden("cli/report_run2.csv", "libra report --format csv 2", csv.out);
}

TEST_F(CmdReportTest, List) {
  // --list shows every run; the start time varies, so only the shape is checked.
  const CommandResult r = Libra({"report", "--list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("run  name        system       backend  started (UTC)", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  1  quickstart  async-split  sim      "), std::string::npos) << r.out;
}

TEST_F(CmdReportTest, ExportedTrajectoriesReplay) {
  // A run's trajectories exported as a trace replay as a workload: same count per step, and the
  // same trajectories again when exported from the replay.
  const CommandResult exported = Libra({"report", "--export-trajectories", "trace.jsonl"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.out, "wrote 384 trajectories of run 1 to trace.jsonl\n");
  const std::string trace = ReadFile(dir_.File("trace.jsonl"));
  EXPECT_EQ(std::count(trace.begin(), trace.end(), '\n'), 384);
  const CommandResult replay = Libra({"run", "-q", "--steps", "3", "--set", "workload.kind=trace",
                                      "--set", "workload.trace=trace.jsonl", "quickstart.toml"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  const CommandResult again = Libra({"report", "--export-trajectories", "again.jsonl", "2"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::string replayed = ReadFile(dir_.File("again.jsonl"));
  EXPECT_EQ(std::count(replayed.begin(), replayed.end(), '\n'), 384);
}

TEST_F(CmdReportTest, Errors) {
  // Unknown run, bad format, bad baseline, missing database: usage errors with clear messages.
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"report", "9"}, "libra: error: run 9 is not in results/libra.db\n"},
      {{"report", "--format", "xml"},
       "libra: error: --format must be text, md, csv or json (got 'xml')\n"},
      {{"report", "--baseline", "zzz"},
       "libra: error: --baseline 'zzz' is neither a system nor a run id of this report\n"},
      {{"report", "--db", "none.db"}, ""},
      {{"report", "--export-trajectories", "x.jsonl", "1", "2"},
       "libra: error: --export-trajectories writes one run; name one\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args.back());
    const CommandResult r = Libra(c.args);
    EXPECT_EQ(r.exit_code, 2);
    if (!c.err.empty()) {
      EXPECT_EQ(r.err, c.err);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.File("none.db")));
}

}  // namespace
}  // namespace libra::test
