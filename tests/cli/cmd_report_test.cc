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
  EXPECT_EQ(lines[1].rfind("1,quickstart,async-split,", 0), 0u) << mixed.out;
  EXPECT_EQ(lines[2].rfind("5,quickstart,libra,", 0), 0u) << mixed.out;
  const CommandResult typo = Libra({"report", "libar"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("'libar' is neither a run id, a comparison nor a system in "
                          "results/libra.db (names: async-split, libra, quickstart, "
                          "sync-colocated, sync-split); did you mean 'libra'?"),
            std::string::npos)
      << typo.err;
}

TEST_F(CmdReportTest, DataFormatsCarryEveryTableAtFullPrecision) {
  // JSON and CSV carry every table the text shows (summary, steps, planner decisions, router
  // counters), with the recorded values (not "0.0" for a sync of 0.04 s) and numbers as numbers
  // (GPUs as two integers, not "8/8").
  ASSERT_EQ(
      Libra({"compare", "-q", "--steps", "3", "--systems", "libra", "quickstart.toml"}).exit_code,
      0);
  const CommandResult text = Libra({"report", "2"});
  const CommandResult json = Libra({"report", "--format", "json", "2"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto doc = ParseJson(json.out);
  ASSERT_OK(doc);
  const JsonValue* tables = doc->Find("tables");
  ASSERT_NE(tables, nullptr);
  for (const char* name : {"summary", "steps", "planner_decisions", "router_counters"}) {
    EXPECT_NE(tables->Find(name), nullptr) << name;
  }
  EXPECT_NE(text.out.find("router counters (cmlfq)"), std::string::npos) << text.out;
  EXPECT_FALSE(tables->Find("router_counters")->as_array().empty());
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  auto steps = (*store)->Steps(2);
  ASSERT_OK(steps);
  const JsonValue::Array& rows = tables->Find("steps")->as_array();
  ASSERT_EQ(rows.size(), steps->size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].Find("sync_s")->as_double(), (*steps)[i].sync_s);
    EXPECT_EQ(rows[i].Find("end_s")->as_double(), (*steps)[i].end_s);
    EXPECT_EQ(rows[i].Find("train_gpus")->as_int(), (*steps)[i].train_gpus);
    EXPECT_EQ(rows[i].Find("rollout_gpus")->as_int(), (*steps)[i].rollout_gpus);
    EXPECT_EQ(rows[i].Find("gpus"), nullptr);  // the "8/8" text is for reading
  }
  const CommandResult csv = Libra({"report", "--format", "csv", "2"});
  for (const char* section :
       {"# summary\n", "\n# steps\n", "\n# planner_decisions\n", "\n# router_counters\n"}) {
    EXPECT_NE(csv.out.find(section), std::string::npos) << section << csv.out;
  }
  const CommandResult one = Libra({"report", "--format", "csv", "--table", "steps", "2"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out.rfind("step,start_s,end_s,step_s,", 0), 0u) << one.out;
}

TEST_F(CmdReportTest, SingleRunTablesFitATerminal) {
  // Long headers wrap over their numbers, long layouts wrap, reasons go under their rows: no
  // line of `libra report RUN` for a searching planner is wider than 120 columns.
  ASSERT_EQ(
      Libra({"compare", "-q", "--steps", "4", "--systems", "libra", "quickstart.toml"}).exit_code,
      0);
  const CommandResult r = Libra({"report", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("planner decisions (grp)"), std::string::npos) << r.out;
  for (const std::string& line : StrSplit(r.out, '\n')) EXPECT_LE(line.size(), 120u) << line;
}

TEST_F(CmdReportTest, ListShowsStepsDoneAndStatus) {
  // A run that stopped after 1 of 5 steps lists as 1/5, not as its plan.
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  records::RunInfo run;
  run.name = "short";
  run.system = "stopped";
  run.backend = "sim";
  run.steps_planned = 5;
  run.gpus = 8;
  auto id = (*store)->BeginRun(run);
  ASSERT_OK(id);
  records::StepBatch batch;
  batch.step.end_s = 3;
  ASSERT_OK((*store)->RecordStep(*id, batch));
  ASSERT_OK((*store)->FinishRun(*id, records::kRunInterrupted, "", "2026-12-03T00:00:00Z"));
  const CommandResult r = Libra({"report", "--list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  3/3  ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  1/5  interrupted"), std::string::npos) << r.out;
}

TEST_F(CmdReportTest, ResolvedRecipeRepeatsTheRunBitForBit) {
  // Every run stores its resolved recipe with its own [system]; `libra run` on what `report
  // --recipe` prints records identical steps and trajectories, from another folder too (paths
  // are absolute). A baseline's recipe runs the baseline, not the recipe's [system].
  ASSERT_EQ(Libra({"compare", "-q", "--steps", "3", "quickstart.toml"}).exit_code, 0);
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  std::filesystem::create_directories(dir_.File("elsewhere"));
  for (int64_t run = 2; run <= 5; ++run) {
    SCOPED_TRACE(run);
    const CommandResult recipe = Libra({"report", "--recipe", std::to_string(run)});
    ASSERT_EQ(recipe.exit_code, 0) << recipe.err;
    auto info = (*store)->GetRun(run);
    ASSERT_OK(info);
    EXPECT_NE(recipe.out.find("[system]\nname = \"" + info->system + "\""), std::string::npos)
        << recipe.out;
    EXPECT_EQ(recipe.out.find("[[baselines]]"), std::string::npos);
    const std::string file = dir_.File("elsewhere/run.toml");
    WriteFile(file, recipe.out);
    const CommandResult again =
        RunLibra({"run", "-q", "--db", dir_.File("again.db"), file}, dir_.File("elsewhere"));
    ASSERT_EQ(again.exit_code, 0) << again.err;
    auto copy = store::Store::Open(dir_.File("again.db"));
    ASSERT_OK(copy);
    auto runs = (*copy)->ListRuns();
    ASSERT_OK(runs);
    const int64_t repeated = runs->back().id;
    EXPECT_EQ(runs->back().system, info->system);
    EXPECT_EQ((*copy)->Steps(repeated).value(), (*store)->Steps(run).value());
    EXPECT_EQ((*copy)->Trajectories(repeated).value(), (*store)->Trajectories(run).value());
    EXPECT_EQ((*copy)->Decisions(repeated).value(), (*store)->Decisions(run).value());
    // And the repeat resolves to the same recipe.
    EXPECT_EQ(runs->back().resolved_recipe, info->resolved_recipe);
  }
}

TEST_F(CmdReportTest, RepeatSummaryIsShownAgain) {
  // `compare --repeat` prints its table over seeds; `libra report` of that comparison prints it
  // again (the comparison records its seeds).
  const CommandResult compare = Libra({"compare", "--steps", "2", "--repeat", "2", "--systems",
                                       "async-split,sync-split", "quickstart.toml"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  // The table and its caption: from the blank line before it to the hint after it.
  const size_t caption = compare.out.find("(2 seeds from 1");
  ASSERT_NE(caption, std::string::npos) << compare.out;
  const size_t begin = compare.out.rfind("\n\n", caption) + 2;
  const size_t end = compare.out.find("\ncomparison 1 recorded");
  const std::string table = compare.out.substr(begin, end - begin);
  EXPECT_NE(table.find("(2 seeds from 1; speedup: mean of the per-seed ratios over sync-split)"),
            std::string::npos)
      << table;
  const CommandResult report = Libra({"report"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find(table), std::string::npos) << report.out << "\n---\n" << table;
  EXPECT_EQ(report.out.rfind("comparison 1: quickstart, 4 runs (2 seeds) (", 0), 0u) << report.out;
}

TEST_F(CmdReportTest, FilesOnlyIntoFoldersThatExist) {
  // --markdown into a missing folder is refused (nothing created); --plots creates its folder
  // when the parent exists; --export-trajectories of a comparison refuses like --timeline.
  const CommandResult md = Libra({"report", "--markdown", "missing/dir/r.md"});
  EXPECT_EQ(md.exit_code, 2);
  EXPECT_EQ(md.err,
            "libra: error: --markdown missing/dir/r.md: the folder missing/dir does not exist\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("missing")));
  const CommandResult plots = Libra({"report", "--plots", "nowhere/p"});
  EXPECT_EQ(plots.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("nowhere")));
  ASSERT_EQ(Libra({"compare", "-q", "--steps", "2", "quickstart.toml"}).exit_code, 0);
  const CommandResult trajectories = Libra({"report", "--export-trajectories", "t.jsonl"});
  EXPECT_EQ(trajectories.exit_code, 2);
  EXPECT_EQ(trajectories.err,
            "libra: error: --export-trajectories writes one run; this report has 4 (name one run "
            "id)\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("t.jsonl")));
}

TEST_F(CmdReportTest, EveryBadDatabaseIsAUsageError) {
  // Missing, a folder, not a database, from a newer libra: exit 2 for each, with the reason.
  std::filesystem::create_directories(dir_.File("folder.db"));
  WriteFile(dir_.File("junk.db"), std::string(4096, 'x'));
  {
    auto db = store::Db::Open(dir_.File("newer.db"), store::Db::Options());
    ASSERT_OK(db);
    ASSERT_OK((*db)->Exec("PRAGMA application_id = 1279414849; PRAGMA user_version = 999",
                          "stamp a newer version"));
  }
  for (const char* db : {"none.db", "folder.db", "junk.db", "newer.db"}) {
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"report", "--db", db},
             {"export", "--db", db, "--out", "-", "--format", "csv"},
             {"run", "--resume", "1", "--db", db}}) {
      SCOPED_TRACE(std::string(db) + " " + args.front());
      const CommandResult r = Libra(args);
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_NE(r.err.find(db), std::string::npos) << r.err;
    }
  }
}

TEST_F(CmdReportTest, ReadsWhileARunIsStillWriting) {
  // A run that is still going (status "running", steps recorded so far) reports like any other,
  // through a second connection while the writer's connection stays open (WAL).
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  records::RunInfo run;
  run.name = "live";
  run.system = "writer";
  run.backend = "sim";
  run.steps_planned = 5;
  run.gpus = 8;
  auto id = (*store)->BeginRun(run);
  ASSERT_OK(id);
  records::StepBatch batch;
  batch.step.step = 0;
  batch.step.end_s = 10;
  batch.step.trajectories = 4;
  ASSERT_OK((*store)->RecordStep(*id, batch));
  const CommandResult r = Libra({"report", "--format", "csv", "writer"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(",writer,0,running,1,10.0,4,0,0.4,"), std::string::npos) << r.out;
  batch.step.step = 1;
  batch.step.start_s = 10;
  batch.step.end_s = 20;
  ASSERT_OK((*store)->RecordStep(*id, batch));  // the writer goes on after the reader
  const CommandResult again = Libra({"report", "--format", "csv", "writer"});
  EXPECT_NE(again.out.find(",writer,0,running,2,20.0,8,0,0.4,"), std::string::npos) << again.out;
}

TEST_F(CmdReportTest, SimulatedAndRealRunsSideBySide) {
  // A simulated run and a run of the cluster backend in one table, with a line saying which
  // numbers were measured.
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  records::RunInfo run;
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
    records::StepBatch batch;
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
  ASSERT_OK((*store)->FinishRun(*id, records::kRunOk, "", "2026-12-03T00:00:00Z"));
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
  const CommandResult r =
      Libra({"report", "--db", "old.db", "--format", "csv", "--table", "summary"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "run,name,system,seed,status,steps,elapsed_s,trajectories,generated_tokens,"
            "trajectories_per_s,generated_tokens_per_s_per_gpu,gpu_util,step_s,rollout_s,train_s,"
            "sync_s,wait_s,final_reward,final_eval,eval_target,time_to_target_s,of_bound,"
            "throughput_bound,configured_by,configuration\n"
            "1,old,sys,1,ok,1,20.0,8,4000,0.4,25.0,,20.0,12.0,6.0,1.0,1.0,0.5,,,,,,as written,-\n");
}

TEST_F(CmdReportTest, PlotsMarkdownAndTimeline) {
  // --markdown writes the report and its plots (linked relative to it); --plots the SVGs alone;
  // --timeline one run's trace. Every plot is well-formed; the trace is valid JSON.
  ASSERT_EQ(
      Libra({"compare", "-q", "--steps", "3", "--set", "sim.record_events=true", "quickstart.toml"})
          .exit_code,
      0);
  std::filesystem::create_directories(dir_.File("out"));
  const CommandResult md = Libra({"report", "--markdown", "out/report.md"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(md.out, "wrote out/report.md with 4 runs and 14 plots in out/report-plots\n");
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
  EXPECT_EQ(linked, 14);
  EXPECT_NE(text.find("### planner decisions (grp)"), std::string::npos);

  const CommandResult plots = Libra({"report", "--plots", "p", "5"});
  ASSERT_EQ(plots.exit_code, 0) << plots.err;
  EXPECT_EQ(plots.out,
            "wrote 8 plots to p: eval.svg, time-to-target.svg, reward.svg, throughput.svg, "
            "breakdown.svg, gpu-seconds.svg, allocation-run5.svg, lengths-run5.svg\n");

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
  EXPECT_NE(r.out.find("  3/3  ok"), std::string::npos) << r.out;
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
      {{"report", "--export-trajectories", "x.jsonl", "1", "1"},
       "libra: error: --export-trajectories writes one run; this report has 2 (name one run "
       "id)\n"},
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
