// End to end: `libra report`.
#include <algorithm>

#include "cli/cli_fixture.h"
#include "common/json.h"
#include "common/strings.h"
#include "store/db.h"
#include "store/schema.h"
#include "store/store.h"
#include "support/xml_wellformed.h"

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

TEST_F(CmdReportTest, RunsByName) {
  // A comparison's name selects its latest comparison; a system's name its latest run; ids and
  // names mix.
  ASSERT_EQ(Libra({"compare", "-q", "--steps", "3", "quickstart.toml"}).exit_code, 0);
  const CommandResult comparison = Libra({"report", "quickstart"});
  ASSERT_EQ(comparison.exit_code, 0) << comparison.err;
  EXPECT_EQ(comparison.out.rfind("comparison 1: quickstart, 4 runs (", 0), 0u) << comparison.out;
  const CommandResult mixed = Libra({"report", "--format", "csv", "1", "libra"});
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  const std::vector<std::string> lines = StrSplit(mixed.out, '\n');
  ASSERT_EQ(lines.size(), 4u) << mixed.out;  // header, two rows, the final newline
  EXPECT_EQ(lines[1].rfind("1,async-split,", 0), 0u) << mixed.out;
  EXPECT_EQ(lines[2].rfind("5,libra,", 0), 0u) << mixed.out;
  const CommandResult typo = Libra({"report", "libar"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("'libar' is neither a run id, a comparison nor a system in "
                          "results/libra.db (names: async-split, libra, quickstart, "
                          "sync-colocated, sync-split); did you mean 'libra'?"),
            std::string::npos)
      << typo.err;
}

TEST_F(CmdReportTest, ReadsWhileARunIsStillWriting) {
  // A run that is still going (status "running", steps recorded so far) reports like any other,
  // through a second connection while the writer's connection stays open (WAL).
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  store::RunInfo run;
  run.name = "live";
  run.system = "writer";
  run.backend = "sim";
  run.steps_planned = 5;
  run.gpus = 8;
  auto id = (*store)->BeginRun(run);
  ASSERT_OK(id);
  store::StepBatch batch;
  batch.step.step = 0;
  batch.step.end_s = 10;
  batch.step.trajectories = 4;
  ASSERT_OK((*store)->RecordStep(*id, batch));
  const CommandResult r = Libra({"report", "--format", "csv", "writer"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(",writer,running,1,10.0,0.400,"), std::string::npos) << r.out;
  batch.step.step = 1;
  batch.step.start_s = 10;
  batch.step.end_s = 20;
  ASSERT_OK((*store)->RecordStep(*id, batch));  // the writer goes on after the reader
  const CommandResult again = Libra({"report", "--format", "csv", "writer"});
  EXPECT_NE(again.out.find(",writer,running,2,20.0,0.400,"), std::string::npos) << again.out;
}

TEST_F(CmdReportTest, SimulatedAndRealRunsSideBySide) {
  // A simulated run and a run of the cluster backend in one table, with a line saying which
  // numbers were measured.
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  store::RunInfo run;
  run.name = "cpu-local";
  run.system = "libra-cpu";
  run.router = "cmlfq";
  run.planner = "static";
  run.backend = "cluster";
  run.steps_planned = 2;
  run.gpus = 4;
  auto id = (*store)->BeginRun(run);
  ASSERT_OK(id);
  for (int step = 0; step < 2; ++step) {
    store::StepBatch batch;
    batch.step.step = step;
    batch.step.start_s = 10.0 * step;
    batch.step.end_s = 10.0 * (step + 1);
    batch.step.rollout_s = 6;
    batch.step.train_s = 2;
    batch.step.trajectories = 32;
    batch.step.generated_tokens = 256;
    batch.step.reward_mean = 0.3 + 0.1 * step;
    batch.step.policy_version = step;
    batch.step.rollout_gpus = 3;
    batch.step.train_gpus = 1;
    ASSERT_OK((*store)->RecordStep(*id, batch));
  }
  ASSERT_OK((*store)->FinishRun(*id, store::kRunOk, "", "2026-12-03T00:00:00Z"));
  const CommandResult r = Libra({"report", "1", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/report_sim_and_cluster.txt", "libra report 1 2: a sim run and a cluster run",
               r.out);
}

TEST_F(CmdReportTest, ReadsADatabaseOfSchemaVersion1) {
  // A run recorded by a libra at schema version 1 (no GPU utilisation, bound or predictions)
  // reports with those values missing, not zero.
  const std::string path = dir_.File("old.db");
  {
    auto db = store::Db::Open(path, store::Db::Options());
    ASSERT_OK(db);
    const std::vector<store::Migration> v1 = {store::SchemaMigrations().at(0)};
    ASSERT_OK(store::CheckSchema(**db, v1));
    ASSERT_OK(store::ApplyMigrations(**db, v1));
    ASSERT_OK((*db)->Exec(
        "INSERT INTO runs (id, name, system, router, planner, backend, seed, steps_planned, gpus, "
        "recipe_source, recipe_toml, git_revision, libra_version, started_at, status) VALUES "
        "(1, 'old', 'sys', 'least-conn', 'static', 'sim', 1, 1, 8, 'r.toml', '', 'abc', '0.1.0', "
        "'2026-01-01T00:00:00Z', 'ok');"
        "INSERT INTO steps VALUES (1, 0, 0, 20, 12, 6, 1, 1, 8, 20, 12, 800, 4000, 0.5, 0, 0, 4, "
        "4);",
        "insert an old run"));
  }
  const CommandResult r = Libra({"report", "--db", "old.db", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "run,system,status,steps,elapsed_s,trajectories_per_s,tokens_per_s_per_gpu,gpu_util,"
            "step_s,rollout_s,train_s,sync_s,wait_s,final_reward,final_eval,time_to_target_s,of_bound,"
            "configured_by,configuration\n"
            "1,sys,ok,1,20.0,0.400,25.0,,20.0,12.0,6.0,1.0,1.0,0.500,,,,as written,-\n");
}

TEST_F(CmdReportTest, PlotsMarkdownAndTimeline) {
  // --markdown writes the report and its plots (linked relative to it); --plots the SVGs alone;
  // --timeline one run's trace. Every plot is well-formed; the trace is valid JSON.
  ASSERT_EQ(
      Libra({"compare", "-q", "--steps", "3", "--set", "sim.record_events=true", "quickstart.toml"})
          .exit_code,
      0);
  const CommandResult md = Libra({"report", "--markdown", "out/report.md"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(md.out, "wrote out/report.md with 4 runs and 11 plots in out/report-plots\n");
  const std::string text = ReadFile(dir_.File("out/report.md"));
  EXPECT_EQ(text.rfind("# comparison 1: quickstart, 4 runs (", 0), 0u) << text;
  int linked = 0;
  for (size_t at = text.find("](report-plots/"); at != std::string::npos;
       at = text.find("](report-plots/", at + 1)) {
    const size_t end = text.find(')', at);
    const std::string svg = ReadFile(dir_.File("out/" + text.substr(at + 2, end - at - 2)));
    EXPECT_EQ(XmlWellFormed(svg), "") << text.substr(at, end - at);
    ++linked;
  }
  EXPECT_EQ(linked, 11);
  EXPECT_NE(text.find("### planner decisions (grp)"), std::string::npos);

  const CommandResult plots = Libra({"report", "--plots", "p", "5"});
  ASSERT_EQ(plots.exit_code, 0) << plots.err;
  EXPECT_EQ(plots.out,
            "wrote 5 plots to p: reward.svg, throughput.svg, breakdown.svg, allocation-run5.svg, "
            "lengths-run5.svg\n");

  const CommandResult timeline = Libra({"report", "--timeline", "t.json", "libra"});
  ASSERT_EQ(timeline.exit_code, 0) << timeline.err;
  EXPECT_EQ(timeline.out.rfind("wrote the timeline of run 5 (", 0), 0u) << timeline.out;
  EXPECT_OK(ParseJson(ReadFile(dir_.File("t.json"))));
  const CommandResult two = Libra({"report", "--timeline", "t.json"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_EQ(two.err,
            "libra: error: --timeline draws one run; this report has 4 (name one run id)\n");
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
