// End to end: `libra run` and `libra compare` on the built binary.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cli/cli_fixture.h"
#include "common/json.h"
#include "common/strings.h"
#include "store/store.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

class CmdRunTest : public CliFixture {};

TEST_F(CmdRunTest, RunPrintsSummaryAndRecordsSteps) {
  // `libra run recipes/quickstart.toml`: a summary on stdout, the steps in the database.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"run", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ExpectGolden("cli/run_quickstart.txt", "libra run quickstart.toml (default database)", r.out);
  const CommandResult steps = Libra({"report", "--steps", "--format", "csv", "1"});
  ASSERT_EQ(steps.exit_code, 0) << steps.err;
  EXPECT_EQ(StrSplit(steps.out, '\n').size(), 12u);  // header + 10 steps + trailing newline
}

TEST_F(CmdRunTest, SameSeedRecordsIdenticalNumbers) {
  // Two runs with the same seed record the same steps; another seed records different ones.
  CopyRecipe("quickstart.toml");
  ASSERT_EQ(Libra({"run", "-q", "quickstart.toml"}).exit_code, 0);
  ASSERT_EQ(Libra({"run", "-q", "quickstart.toml"}).exit_code, 0);
  ASSERT_EQ(Libra({"run", "-q", "--seed", "2", "quickstart.toml"}).exit_code, 0);
  const std::string a = Libra({"report", "--steps", "--format", "csv", "1"}).out;
  const std::string b = Libra({"report", "--steps", "--format", "csv", "2"}).out;
  const std::string c = Libra({"report", "--steps", "--format", "csv", "3"}).out;
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(CmdRunTest, QuietPrintsNothing) {
  // --quiet: no output on success.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"run", "--quiet", "--steps", "2", "quickstart.toml"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

TEST_F(CmdRunTest, CompareRunsEverySystemOnOneWorkload) {
  // `libra compare`: one table, speedups over the first baseline, one comparison recorded.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"compare", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/compare_quickstart.txt", "libra compare quickstart.toml", r.out);
  const CommandResult list = Libra({"report", "--list", "--format", "csv"});
  EXPECT_NE(list.out.find("3,quickstart,sync-split,sim,"), std::string::npos) << list.out;
}

TEST_F(CmdRunTest, CompareSystemsSelectsAndOrders) {
  // --systems picks systems by name and order; an unknown name is a usage error.
  CopyRecipe("quickstart.toml");
  const CommandResult r =
      Libra({"compare", "--steps", "2", "--systems", "sync-split,async-split", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.out.find("run 1: quickstart, system 'sync-split'"),
            r.out.find("run 2: quickstart, system 'async-split'"));
  const CommandResult bad = Libra({"compare", "--systems", "nope", "quickstart.toml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "libra: error: --systems: 'nope' is neither a system of quickstart.toml (async-split, "
            "sync-colocated, sync-split, libra) nor a named system (libra, libra-no-ehp, "
            "libra-ref, libra-homogeneous, verl-sync, disagg-static, verl-dynamic, areal-async, "
            "sortedrl, heddle)\n");
}

TEST_F(CmdRunTest, CompareRunsNamedSystemsTheRecipeDoesNotList) {
  // A named system joins the comparison on the same workload: verl-sync is synchronous
  // (staleness 0, so no lag), disagg-static one step stale.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"compare", "--steps", "3", "--systems",
                                 "async-split,verl-sync,disagg-static", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("system 'verl-sync' (least-conn / colocated)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("system 'disagg-static' (least-conn / static)"), std::string::npos);
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  for (int64_t run : {2, 3}) {
    auto steps = (*store)->Steps(run);
    ASSERT_OK(steps);
    int lag = 0;
    for (const records::StepRecord& s : *steps) lag = std::max(lag, s.max_lag);
    EXPECT_EQ(lag, run == 2 ? 0 : 1) << run;
  }
}

TEST_F(CmdRunTest, CompareRepeatReportsMeanAndSpreadOverSeeds) {
  // --repeat K runs every system with seeds 1..K and prints one row per system; the same
  // command twice prints the same table.
  CopyRecipe("quickstart.toml");
  const std::vector<std::string> args = {
      "compare",        "--steps", "3", "--repeat", "2", "--systems", "async-split,sync-colocated",
      "quickstart.toml"};
  const CommandResult r = Libra(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/compare_repeat_quickstart.txt",
               "libra compare --steps 3 --repeat 2 --systems async-split,sync-colocated "
               "quickstart.toml",
               r.out);
  auto table = [](const std::string& out) {
    const size_t begin = out.find("\nsystem ");
    return out.substr(begin, out.find("(2 seeds") - begin);
  };
  EXPECT_EQ(table(Libra(args).out), table(r.out));
  const CommandResult bad = Libra({"compare", "--repeat", "0", "quickstart.toml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--repeat: Value 0 not in range 1 to 1000"), std::string::npos) << bad.err;
}

TEST_F(CmdRunTest, OneLinePerStepWhenStdoutIsNotATerminal) {
  // Under nohup or a pipe, each finished step prints a line (the progress line is for
  // terminals); --log-format json prints JSON objects; with --json the lines go to stderr and
  // stdout holds the JSON document alone.
  CopyRecipe("quickstart.toml");
  const CommandResult text = Libra({"run", "--steps", "3", "quickstart.toml"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (int step = 1; step <= 3; ++step) {
    EXPECT_NE(text.out.find(StrFormat("quickstart/async-split: run 1 step %d/3 done at ", step)),
              std::string::npos)
        << text.out;
  }
  const CommandResult json =
      Libra({"run", "--steps", "3", "--log-format", "json", "--json", "quickstart.toml"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto document = ParseJson(json.out);
  ASSERT_OK(document);
  EXPECT_EQ(document->Find("runs")->as_array().size(), 1u);
  EXPECT_EQ(document->Find("tables")->Find("summary")->as_array().size(), 1u);
  const std::vector<std::string> lines = StrSplit(json.err, '\n');
  ASSERT_EQ(lines.size(), 5u) << json.err;  // three steps, the run, the final newline
  for (size_t i = 0; i < 4; ++i) {
    auto line = ParseJson(lines[i]);
    ASSERT_OK(line);
    EXPECT_EQ(line->Find("event")->as_string(), i < 3 ? "step" : "run");
    EXPECT_EQ(line->Find("run")->as_int(), 2);
  }
  EXPECT_EQ(Libra({"run", "--log-format", "xml", "quickstart.toml"}).exit_code, 2);
}

TEST_F(CmdRunTest, HintsCarryTheDatabase) {
  // "`libra report` shows it again" must work as printed when --db was given.
  CopyRecipe("quickstart.toml");
  const CommandResult compare =
      Libra({"compare", "--steps", "2", "--db", "q.db", "quickstart.toml"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find("comparison 1 recorded in q.db; `libra report --db q.db` shows it "
                             "again"),
            std::string::npos)
      << compare.out;
  EXPECT_EQ(Libra({"report", "--db", "q.db"}).exit_code, 0);
  const CommandResult run = Libra({"run", "--steps", "2", "--db", "q.db", "quickstart.toml"});
  EXPECT_NE(run.out.find("recorded in q.db; `libra report 5 --db q.db` shows the steps"),
            std::string::npos)
      << run.out;
  // The default database needs no flag.
  const CommandResult plain = Libra({"run", "--steps", "2", "quickstart.toml"});
  EXPECT_NE(plain.out.find("`libra report 1` shows the steps"), std::string::npos) << plain.out;
}

TEST_F(CmdRunTest, TuneSearchesEveryPeerAndRecordsIt) {
  // `libra tune`: every system with knobs is searched with the same budget, its trials printed
  // best first and recorded; Libra is not tuned.
  CopyRecipe("quickstart.toml");
  const std::vector<std::string> args = {
      "tune", "--steps", "2", "--set", "tuning.budget_runs=5", "quickstart.toml"};
  const CommandResult r = Libra(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/tune_quickstart.txt",
               "libra tune --steps 2 --set tuning.budget_runs=5 quickstart.toml", r.out);
  EXPECT_EQ(r.out.find("libra:"), std::string::npos);
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  auto tunings = (*store)->Tunings();
  ASSERT_OK(tunings);
  ASSERT_EQ(tunings->size(), 3u);  // async-split, sync-colocated, sync-split; not libra
  for (const records::TuningRecord& t : *tunings) {
    int runs = 0;
    for (const records::TuningTrialRecord& trial : t.trials) runs += trial.seed.has_value();
    EXPECT_EQ(runs, 5) << t.system;  // the same budget for every system
  }
}

TEST_F(CmdRunTest, CompareTunedRunsPeersAtTheirTunedConfiguration) {
  // --tuned tunes where no tuning is recorded, then reuses it; the table says how each row was
  // configured and what it ran.
  CopyRecipe("quickstart.toml");
  const std::vector<std::string> args = {"compare",
                                         "--steps",
                                         "2",
                                         "--tuned",
                                         "--set",
                                         "tuning.budget_runs=4",
                                         "--systems",
                                         "libra,async-split,sync-colocated",
                                         "quickstart.toml"};
  const CommandResult first = Libra(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ExpectGolden("cli/compare_tuned_quickstart.txt",
               "libra compare --steps 2 --tuned --set tuning.budget_runs=4 --systems "
               "libra,async-split,sync-colocated quickstart.toml (first: tunes)",
               first.out);
  const CommandResult again = Libra(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("async-split: reusing tuning 1:"), std::string::npos) << again.out;
  auto store = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(store);
  auto tunings = (*store)->Tunings();
  ASSERT_OK(tunings);
  EXPECT_EQ(tunings->size(), 2u);  // tuned once
  auto run = (*store)->GetRun(2);
  ASSERT_OK(run);
  EXPECT_EQ(run->tuning_id, 1);
  EXPECT_FALSE(run->configuration.empty());
}

TEST_F(CmdRunTest, TuningRefusesWhatItCannotTune) {
  // Bad input: a knob range that cannot fit the cluster, an unknown system, --tuned where no
  // system has a knob: clear errors, exit 2, nothing recorded.
  CopyRecipe("quickstart.toml");
  const CommandResult range =
      Libra({"tune", "--set", "system.tune.train_gpus=[4, 64]", "quickstart.toml"});
  EXPECT_EQ(range.exit_code, 2);
  EXPECT_NE(range.err.find("system.tune.train_gpus: 64 training GPUs cannot fit the cluster: "
                           "it has 16 GPUs (2 x 8)"),
            std::string::npos)
      << range.err;
  const CommandResult unknown = Libra({"tune", "--system", "areal-asynk", "quickstart.toml"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("did you mean 'areal-async'?"), std::string::npos) << unknown.err;
  const CommandResult none =
      Libra({"compare", "--tuned", "--systems", "libra,libra-no-ehp", "quickstart.toml"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--tuned: none of the systems compared (libra, libra-no-ehp) has a "
                          "knob to tune"),
            std::string::npos)
      << none.err;
  const CommandResult both = Libra({"compare", "--tuned", "--as-written", "quickstart.toml"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("results/libra.db")) &&
               store::Store::Open(dir_.File("results/libra.db")).ok() &&
               !(*store::Store::Open(dir_.File("results/libra.db")))->Tunings()->empty());
}

TEST_F(CmdRunTest, CompareSensitivityPrintsFirstKOfN) {
  // --sensitivity reruns the comparison under every standard perturbation and prints the
  // throughput matrix and, per system, its range and how often it was first; report shows it
  // again.
  CopyRecipe("quickstart.toml");
  const CommandResult r = Libra({"compare", "--steps", "2", "--sensitivity", "--systems",
                                 "async-split,libra", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string table = r.out.substr(r.out.find("\nSensitivity"));
  ExpectGolden("cli/compare_sensitivity_quickstart.txt",
               "libra compare --steps 2 --sensitivity --systems async-split,libra "
               "quickstart.toml (tables only)",
               table);
  const CommandResult again = Libra({"report"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("first"), std::string::npos);
  EXPECT_NE(again.out.find("tool latency x2"), std::string::npos) << again.out;
}

TEST_F(CmdRunTest, BadRecipeExitsTwoWithEveryError) {
  // Recipe errors: exit 2, every problem on stderr, nothing recorded.
  WriteFile(dir_.File("bad.toml"), "name = \"b\"\nstesp = 3\n[cluster]\nnodes = 0\n");
  const CommandResult r = Libra({"run", "bad.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "bad.toml:1:1: model.name: required field is missing\n"
            "bad.toml:1:1: rl.prompts_per_step: required field is missing\n"
            "bad.toml:1:1: rl.group_size: required field is missing\n"
            "bad.toml:2:9: stesp: unknown key; did you mean 'steps'?\n"
            "bad.toml:3:1: cluster.gpus_per_node: required field is missing\n"
            "bad.toml:4:9: cluster.nodes: must be at least 1 (got 0)\n"
            "libra: the recipe has 6 errors\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("results/libra.db")));
}

TEST_F(CmdRunTest, MissingRecipeIsAUsageError) {
  // A recipe path that does not exist: exit 2 and the path in the message.
  const CommandResult r = Libra({"run", "nowhere.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "libra: error: nowhere.toml: cannot read the recipe file (No such file or directory)\n");
}

TEST_F(CmdRunTest, CorruptDatabaseIsRefusedAndKept) {
  // A --db that is not a database: exit 2 (a bad --db is the caller's to fix, whatever is wrong
  // with it), a clear error, the file untouched.
  CopyRecipe("quickstart.toml");
  WriteFile(dir_.File("junk.db"), std::string(4096, 'x'));
  const CommandResult r = Libra({"run", "--db", "junk.db", "quickstart.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("junk.db"), std::string::npos) << r.err;
  EXPECT_EQ(ReadFile(dir_.File("junk.db")), std::string(4096, 'x'));
}

TEST_F(CmdRunTest, CtrlCStopsCleanlyAndMarksTheRunInterrupted) {
  // SIGINT during a long run: exit 130, the run recorded as interrupted with its steps so far.
  CopyRecipe("quickstart.toml");
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir_.path().c_str()) != 0) _exit(127);
    const int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execl(LIBRA_BINARY, LIBRA_BINARY, "run", "--steps", "1000000", "quickstart.toml",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the run has recorded a step or two.
  const auto deadline = std::chrono::steady_clock::now() + test::Deadline(std::chrono::seconds(60));
  bool started = false;
  while (!started && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const CommandResult steps = Libra({"report", "--steps", "--format", "csv", "1"});
    started = steps.exit_code == 0 && StrSplit(steps.out, '\n').size() > 3;
  }
  ASSERT_TRUE(started) << "the run did not start recording";
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const CommandResult list = Libra({"report", "--list", "--format", "csv"});
  EXPECT_NE(list.out.find(",interrupted,"), std::string::npos) << list.out;
}

}  // namespace
}  // namespace libra::test
