// Issue 24: reliability. One test (or a few) per finding, each failing on the code before its fix.
// Items 3 and 8 (cluster trainer restarts, resumed sync times) are in issue_24_cluster_test.cc.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_fixture.h"
#include "cli/common.h"
#include "cluster/cluster_test_util.h"
#include "cluster/http_transport.h"
#include "cluster/sandbox.h"
#include "common/files.h"
#include "common/strings.h"
#include "model/cost_model.h"
#include "recipe/recipe_parser.h"
#include "store/run_owner.h"
#include "store/store.h"
#include "support/http_test_server.h"
#include "support/test_util.h"
#include "workload/workload.h"

namespace libra::test {
namespace {

// A small recipe replaying the trace `trace`.
std::string TraceRecipe(const std::string& trace) {
  return "name = \"trace\"\nsteps = 2\n[cluster]\nnodes = 1\ngpus_per_node = 8\n"
         "[model]\nname = \"Qwen3-1.7B\"\n[workload]\nkind = \"trace\"\ntrace = \"" +
         trace + "\"\n[rl]\nprompts_per_step = 2\ngroup_size = 2\n";
}

bool IsCharDevice(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISCHR(info.st_mode);
}

// --- 1. Report writers replace device nodes ------------------------------------------------------

TEST(Issue24Test, AtomicWritesWriteIntoDevicesInsteadOfReplacingThem) {
  // /dev/null stays the device; before the fix the write tried to rename a file over it (and as
  // root succeeded, breaking /dev/null for every other program).
  ASSERT_TRUE(IsCharDevice("/dev/null"));
  EXPECT_OK(WriteFileAtomically("/dev/null", "discarded\n", "report"));
  EXPECT_TRUE(IsCharDevice("/dev/null"));
}

TEST(Issue24Test, AtomicWritesWriteIntoPipesInsteadOfReplacingThem) {
  ScopedTempDir dir;
  const std::string fifo = dir.File("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  EXPECT_OK(WriteFileAtomically(fifo, "through the pipe\n", "trace file"));
  char buffer[64] = {};
  EXPECT_EQ(::read(reader, buffer, sizeof(buffer)), 17);
  EXPECT_EQ(std::string(buffer), "through the pipe\n");
  ::close(reader);
  struct stat info {};
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
}

TEST(Issue24Test, AtomicWritesKeepSymbolicLinksAndRefuseFolders) {
  ScopedTempDir dir;
  WriteFile(dir.File("real.md"), "old\n");
  ASSERT_EQ(::symlink("real.md", dir.File("link.md").c_str()), 0);
  EXPECT_OK(WriteFileAtomically(dir.File("link.md"), "new\n", "report"));
  struct stat info {};
  ASSERT_EQ(::lstat(dir.File("link.md").c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  EXPECT_EQ(ReadFile(dir.File("real.md")), "new\n");

  const Status folder = WriteFileAtomically(dir.path().string(), "x", "report");
  EXPECT_EQ(folder.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(folder.message().find("Is a directory"), std::string::npos) << folder.message();
}

// --- 2. Two databases in one folder share runs/<id>/ ------------------------------------------

class Issue24CliTest : public CliFixture {
 protected:
  void SetUp() override { CopyRecipe("quickstart.toml"); }
  std::unique_ptr<store::Store> OpenStore(const std::string& db) {
    auto opened = store::Store::Open(dir_.File(db), store::Store::Options{.read_only = true});
    EXPECT_OK(opened);
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
};

TEST_F(Issue24CliTest, RunFoldersAreUniquePerRunAndDatabase) {
  // Run 1 of a.db and run 1 of b.db, in one folder, keep their files apart.
  for (const std::string db : {"a.db", "b.db"}) {
    const CommandResult r = Libra({"run", "quickstart.toml", "--steps", "1", "-q", "--db", db});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto a = OpenStore("a.db");
  auto b = OpenStore("b.db");
  ASSERT_TRUE(a && b);
  const auto run_a = a->GetRun(1);
  const auto run_b = b->GetRun(1);
  ASSERT_OK(run_a);
  ASSERT_OK(run_b);
  EXPECT_NE(a->RunFolder(*run_a), b->RunFolder(*run_b));
  EXPECT_TRUE(run_a->folder.starts_with("runs/a-1-")) << run_a->folder;
  EXPECT_TRUE(run_b->folder.starts_with("runs/b-1-")) << run_b->folder;
}

TEST(Issue24Test, AClusterRunRefusesAFolderHoldingAnotherRunsFiles) {
  // Run 1 of b.db resumed in the folder where run 1 of a.db keeps its weights: refused before
  // any process starts, instead of training on a.db's weights.
  ScopedTempDir dir;
  auto parsed = recipe::ParseRecipeFile(SourcePath("recipes/cpu-local.toml"));
  ASSERT_OK(parsed);
  const recipe::Recipe& recipe = parsed->recipe;
  auto workload = workload::MakeWorkload(recipe.workload, recipe.seed);
  ASSERT_OK(workload);
  auto cost = model::MakeCostModel(recipe);
  ASSERT_OK(cost);
  const std::string folder = dir.File("runs/1");
  ASSERT_OK(ClaimFolder(folder, "run 1 of a.db, started 2026-01-01T00:00:00Z"));
  WriteFile(folder + "/weights/v2.pt", "a.db's weights");
  experiment::BackendContext context;
  context.run_id = 1;
  context.start_version = 2;
  context.run_dir = folder;
  context.run_key = "run 1 of b.db, started 2026-01-02T00:00:00Z";
  const auto backend = cli::MakeBackendFactory()(recipe, **workload, **cost, context);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("holds the files of run 1 of a.db"), std::string::npos)
      << backend.status().message();
  EXPECT_EQ(ReadFile(folder + "/weights/v2.pt"), "a.db's weights");
}

// --- 4. A 62 KB recipe crashes validate ----------------------------------------------------------

TEST_F(Issue24CliTest, DeeplyNestedRecipesAreRefusedNotCrashed) {
  // A dotted key and a table header 31,000 deep (62 KB), and an option table nested past the
  // limit: each refused with its position, exit code 2, in well under a second.
  std::string deep_key;
  for (int i = 0; i < 31000; ++i) deep_key += i == 0 ? "a" : ".a";
  WriteFile(dir_.File("dotted.toml"), "name = \"x\"\n" + deep_key + " = 1\n");
  std::string header = "[";
  for (int i = 0; i < 31000; ++i) header += i == 0 ? "t" : ".t";
  WriteFile(dir_.File("header.toml"), header + "]\n");
  std::string options = ReadFile(dir_.File("quickstart.toml")) + "\n[system.router_options]\n";
  for (int i = 0; i < 4000; ++i) options += i == 0 ? "k" : ".k";
  WriteFile(dir_.File("options.toml"), options + " = 1\n");
  for (const std::string file : {"dotted.toml", "header.toml", "options.toml"}) {
    SCOPED_TRACE(file);
    const auto start = std::chrono::steady_clock::now();
    const CommandResult r = Libra({"validate", file});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(file + ":"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("nested deeper than libra's limit of 32 levels"), std::string::npos)
        << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - start, Deadline(std::chrono::seconds(10)));
  }
}

// --- 5. Sizes are not bounded --------------------------------------------------------------------

TEST_F(Issue24CliTest, SizesBeyondTheLimitsAreRefusedAtValidation) {
  // Each of these passed validation and then exhausted memory, or kept validate busy for minutes;
  // now each is refused at once, naming the limit.
  WriteFile(dir_.File("zero.toml"),
            "include = [\"/dev/zero\"]\n" + ReadFile(dir_.File("quickstart.toml")));
  WriteFile(dir_.File("urandom.toml"), TraceRecipe("/dev/urandom"));
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--set", "cluster.nodes=100000000"}, "cluster.nodes: must be at most 1024, libra's limit"},
      {{"--set", "cluster.gpus_per_node=100000"},
       "cluster.gpus_per_node: must be at most 64, libra's limit"},
      {{"--set", "rl.prompts_per_step=1000000000"},
       "rl.prompts_per_step: must be at most 65536, libra's limit"},
      {{"--set", "rl.group_size=1000000000"}, "rl.group_size: must be at most 4096, libra's limit"},
      {{"--set", "rl.prompts_per_step=65536", "--set", "rl.group_size=4096"},
       "trajectories per step, more than libra's limit of 1048576"},
      {{"--set", "cluster.nodes=2147483647", "--set", "cluster.gpus_per_node=8"},
       "cluster.nodes: must be at most 1024"},
      {{"--set", "cluster.nodes=1024", "--set", "cluster.gpus_per_node=16"},
       "1024 nodes of 16 GPUs are 16384 GPUs, more than libra's limit of 8192"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::vector<std::string> args = {"validate", "quickstart.toml"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto start = std::chrono::steady_clock::now();
    const CommandResult r = Libra(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    // Integer overflow printed negative counts ("[1, -9] of -8 GPUs").
    EXPECT_EQ(r.err.find(" -"), std::string::npos) << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - start, Deadline(std::chrono::seconds(10)));
  }
  const CommandResult zero = Libra({"validate", "zero.toml"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("/dev/zero: the included file is larger than libra's limit of 1048576 "
                          "bytes"),
            std::string::npos)
      << zero.err;
  const CommandResult urandom = Libra({"validate", "urandom.toml"});
  EXPECT_EQ(urandom.exit_code, 2);
  EXPECT_NE(urandom.err.find("/dev/urandom: the trace file is larger than libra's limit"),
            std::string::npos)
      << urandom.err;
}

// --- 6. Trace values that pass the trace rules -----------------------------------------------

TEST_F(Issue24CliTest, TheLargestClusterValidates) {
  // At the limit, validation plans every system of the paper recipe (the heddle planner's
  // ranking of TP mixes did not finish at 1,024 nodes, and took 202 s at 128) and the 8,192-GPU
  // benchmark recipe.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"validate", SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml"),
                                 "--set", "cluster.nodes=1024"},
        std::vector<std::string>{"validate", SourcePath("bench/large-8192.toml")}}) {
    const CommandResult r = Libra(args);
    EXPECT_EQ(r.exit_code, 0) << args[1] << ": " << r.err;
  }
}

TEST_F(Issue24CliTest, TraceValuesBeyondTheLimitsAreRefused) {
  // generated_tokens = 2^63 - 1 made `run` spin forever; tool_output_tokens = 2^63 - 1 aborted in
  // the event queue. Both are refused when the trace is read, naming the field and the limit.
  WriteFile(dir_.File("trace.toml"), TraceRecipe("t.jsonl"));
  const std::string max = std::to_string(std::numeric_limits<int64_t>::max());
  WriteFile(dir_.File("t.jsonl"),
            "{\"prompt\":0,\"sample\":0,\"prompt_tokens\":5,\"reward\":1,\"turns\":["
            "{\"generated_tokens\":" +
                max +
                ",\"end\":\"stop\"}]}\n"
                "{\"prompt\":1,\"sample\":0,\"prompt_tokens\":5,\"reward\":1,\"turns\":["
                "{\"generated_tokens\":1,\"end\":\"tool_call\",\"tool\":\"t\","
                "\"tool_output_tokens\":" +
                max + "},{\"generated_tokens\":1,\"end\":\"stop\"}]}\n");
  const CommandResult r = Libra({"run", "trace.toml", "--db", "t.db"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("t.jsonl:1: turns[0].generated_tokens: must be at most 100000000"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("t.jsonl:2: turns[0].tool_output_tokens: must be at most 100000000"),
            std::string::npos)
      << r.err;
}

// --- 7. A run whose libra was killed can never be resumed or closed ----------------------------

// A process that has exited: the owner of a run whose libra was killed.
records::RunOwner DeadOwner() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  records::RunOwner owner = store::ThisProcess();
  owner.pid = pid;
  waitpid(pid, nullptr, 0);
  return owner;
}

TEST_F(Issue24CliTest, ARunLeftRunningByADeadLibraResumes) {
  ASSERT_EQ(Libra({"run", "quickstart.toml", "--steps", "3", "-q"}).exit_code, 0);
  {
    // What SIGKILL leaves: the run `running`, recorded by a process that is gone.
    auto opened = store::Store::Open(dir_.File("results/libra.db"));
    ASSERT_OK(opened);
    auto run = (*opened)->GetRun(1);
    ASSERT_OK(run);
    ASSERT_OK((*opened)->ReopenRun(*run, DeadOwner()));
  }
  const CommandResult r = Libra({"run", "--resume", "1", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto store = OpenStore("results/libra.db");
  ASSERT_TRUE(store);
  const auto run = store->GetRun(1);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, records::kRunOk);
  const auto steps = store->Steps(1);
  ASSERT_OK(steps);
  EXPECT_EQ(steps->size(), 3u);
}

TEST_F(Issue24CliTest, ARunStillBeingRecordedOrOnAnotherHostIsNotTakenOver) {
  ASSERT_EQ(Libra({"run", "quickstart.toml", "--steps", "2", "-q"}).exit_code, 0);
  auto opened = store::Store::Open(dir_.File("results/libra.db"));
  ASSERT_OK(opened);
  store::Store& store = **opened;
  auto run = store.GetRun(1);
  ASSERT_OK(run);
  // Recorded by a live process (this test).
  ASSERT_OK(store.ReopenRun(*run, store::ThisProcess()));
  CommandResult r = Libra({"run", "--resume", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("run 1 is still being recorded by libra pid " + std::to_string(getpid())),
            std::string::npos)
      << r.err;
  // Recorded on another host: only --take-over resumes it.
  run = store.GetRun(1);
  ASSERT_OK(run);
  ASSERT_OK(store.ReopenRun(*run, records::RunOwner{"elsewhere", 4242, "boot/1"}));
  r = Libra({"run", "--resume", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pid 4242 on host elsewhere, which this libra cannot check"),
            std::string::npos)
      << r.err;
  r = Libra({"run", "--resume", "1", "--take-over", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --- 9. Reading a damaged or hostile database crashes reports ---------------------------------

TEST_F(Issue24CliTest, ARunIdBeyondInt64IsNotFound) {
  ASSERT_EQ(Libra({"run", "quickstart.toml", "--steps", "1", "-q"}).exit_code, 0);
  const CommandResult r = Libra({"report", "99999999999999999999"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("run 99999999999999999999 is not in results/libra.db"), std::string::npos)
      << r.err;
}

TEST_F(Issue24CliTest, HostileValuesInADatabaseDoNotCrashReports) {
  // steps.end_s = inf and a decision layout "tp99999999999x8": reports, plots and the timeline
  // are written.
  {
    auto opened = store::Store::Open(dir_.File("results/libra.db"));
    ASSERT_OK(opened);
    records::RunInfo info;
    info.name = "hostile";
    info.system = "s";
    info.router = "least-conn";
    info.planner = "static";
    info.backend = "sim";
    info.steps_planned = 2;
    info.gpus = 8;
    info.started_at = "2026-01-01T00:00:00Z";
    auto id = (*opened)->BeginRun(info);
    ASSERT_OK(id);
    for (int step = 0; step < 2; ++step) {
      records::StepBatch batch;
      batch.step.step = step;
      batch.step.start_s = step == 0 ? 0 : std::numeric_limits<double>::infinity();
      batch.step.end_s = std::numeric_limits<double>::infinity();
      batch.step.trajectories = 4;
      batch.step.rollout_gpus = 4;
      batch.step.train_gpus = 4;
      records::DecisionRecord decision;
      decision.seq = step;
      decision.step = step;
      decision.applied = true;
      decision.layout = "train 4 | rollout tp99999999999x8 tp4x99999999999";
      batch.decisions.push_back(decision);
      ASSERT_OK((*opened)->RecordStep(*id, batch));
    }
  }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"report", "1"},
                                               {"report", "1", "--markdown", "r.md"},
                                               {"report", "1", "--plots", "plots"},
                                               {"report", "1", "--timeline", "t.json"}}) {
    SCOPED_TRACE(args.back());
    const CommandResult r = Libra(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST_F(Issue24CliTest, ADamagedDatabaseIsRefusedAndNotWritten) {
  ASSERT_EQ(
      Libra({"run", "quickstart.toml", "--steps", "3", "-q", "--set", "sim.record_events=true"})
          .exit_code,
      0);
  // 200 flipped bytes in the first table leaf page past the schema's pages: its cell pointers
  // and cells, which the integrity check reads (a page chosen by number may be free or hold
  // only record payload, whose damage no check can see).
  const std::string db = dir_.File("results/libra.db");
  std::string bytes = ReadFile(db);
  ASSERT_GT(bytes.size(), 30u * 4096);
  size_t page = 0;
  for (size_t p = 10; (p + 1) * 4096 <= bytes.size() && page == 0; ++p) {
    if (bytes[p * 4096] == 0x0D) page = p;  // a table b-tree leaf
  }
  ASSERT_NE(page, 0u);
  for (int i = 0; i < 200; ++i) bytes[page * 4096 + 8 + 17 * i] ^= static_cast<char>(0xFF);
  WriteFile(db, bytes);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"report"}, {"run", "quickstart.toml", "--steps", "1"}}) {
    SCOPED_TRACE(args.front());
    const CommandResult r = Libra(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(r.err.find("the database is damaged (integrity_check: ") != std::string::npos ||
                r.err.find("it is corrupt") != std::string::npos)
        << r.err;
    EXPECT_EQ(ReadFile(db), bytes) << "the damaged file was written to";
  }
}

// --- 10. Sandboxed tools can outlive the run and fork without limit ----------------------------

class Issue24SandboxTest : public ::testing::Test {
 protected:
  Issue24SandboxTest() {
    loop_ = std::move(cluster::EventLoop::Create()).value();
    processes_ = std::make_unique<cluster::ProcessSet>(loop_.get());
    sandbox_ = std::make_unique<cluster::Sandbox>(loop_.get(), processes_.get(), Scratch());
  }
  std::string Scratch() const { return scratch_.File("calls"); }

  Result<std::string> RunCall(const cluster::SandboxCall& call) {
    std::optional<Result<std::string>> result;
    sandbox_->Run(call, [&](Result<std::string> r) { result = std::move(r); });
    EXPECT_OK(
        loop_->RunUntil([&] { return result.has_value(); },
                        cluster::EventLoop::Clock::now() + Deadline(std::chrono::seconds(60))));
    if (!result.has_value()) return Status::Internal("the call did not finish");
    return *std::move(result);
  }

  static cluster::SandboxCall Shell(const std::string& name, const std::string& script) {
    cluster::SandboxCall call;
    call.name = name;
    call.argv = {"sh", "-c", script};
    return call;
  }

  // The pids listed in `path`, one per line.
  static std::vector<pid_t> Pids(const std::string& path) {
    std::vector<pid_t> pids;
    for (const std::string& line : StrSplit(ReadIfExists(path), '\n')) {
      if (!line.empty()) pids.push_back(static_cast<pid_t>(std::stol(line)));
    }
    return pids;
  }

  ScopedTempDir scratch_;
  ScopedTempDir dir_;
  std::unique_ptr<cluster::EventLoop> loop_;
  std::unique_ptr<cluster::ProcessSet> processes_;
  std::unique_ptr<cluster::Sandbox> sandbox_;
};

TEST_F(Issue24SandboxTest, NothingATooLStartsOutlivesItsCall) {
  // `setsid sleep 300` (a session of its own), a double fork, and a plain background child:
  // none is left once the call has returned.
  const std::string pids = dir_.File("pids");
  const auto result =
      RunCall(Shell("escape", "setsid sh -c 'echo $$ >> " + pids +
                                  "; exec sleep 300' & "
                                  "(sh -c 'echo $$ >> " +
                                  pids +
                                  "; exec sleep 300' &) ; "
                                  "sleep 300 & echo $! >> " +
                                  pids +
                                  "; "
                                  "while [ $(wc -l < " +
                                  pids + ") -lt 3 ]; do sleep 0.01; done; echo done"));
  ASSERT_OK(result);
  EXPECT_EQ(*result, "done\n");
  const std::vector<pid_t> left = Pids(pids);
  ASSERT_EQ(left.size(), 3u);
  for (const pid_t pid : left) {
    EXPECT_TRUE(Eventually([&] { return !IsAlive(pid); })) << pid << " outlived its call";
    if (IsAlive(pid)) kill(pid, SIGKILL);
  }
}

TEST_F(Issue24SandboxTest, ACallCannotForkWithoutLimit) {
  // 300 forks with room for 8: the forks past the limit fail (RLIMIT_NPROC), or, for root, to
  // whom the kernel does not apply it, the call is stopped; either way nothing is left.
  const std::string pids = dir_.File("pids");
  cluster::SandboxCall call =
      Shell("bomb", "i=0; while [ $i -lt 300 ]; do sleep 300 & echo $! >> " + pids +
                        "; i=$((i+1)); done; echo forked");
  call.limits.max_processes = 8;
  const auto result = RunCall(call);
  if (getuid() == 0) {
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().message().find("ran more than 8 processes at once"),
              std::string::npos)
        << result.status().ToString();
  } else {
    EXPECT_LE(Pids(pids).size(), 8u + 64u) << "forks past the limit succeeded";
  }
  for (const pid_t pid : Pids(pids)) {
    EXPECT_TRUE(Eventually([&] { return !IsAlive(pid); })) << pid << " outlived its call";
    if (IsAlive(pid)) kill(pid, SIGKILL);
  }
}

TEST_F(Issue24SandboxTest, ACallSeesOnlyItsOwnScratchFolder) {
  // Two calls at once: each lists the scratch folder and finds only its own folder, where the
  // platform allows a mount namespace (always for root).
  std::vector<Result<std::string>> results;
  for (const std::string name : {"a", "b"}) {
    sandbox_->Run(Shell(name, "touch " + dir_.File(name) + "; while [ ! -e " + dir_.File("a") +
                                  " ] || [ ! -e " + dir_.File("b") +
                                  " ]; do sleep 0.01; done; "
                                  "ls " +
                                  Scratch()),
                  [&](Result<std::string> r) { results.push_back(std::move(r)); });
  }
  ASSERT_OK(loop_->RunUntil([&] { return results.size() == 2; },
                            cluster::EventLoop::Clock::now() + Deadline(std::chrono::seconds(60))));
  for (const Result<std::string>& r : results) {
    ASSERT_OK(r);
    const std::vector<std::string> entries = StrSplit(*r, '\n');
    // Without a mount namespace both folders are listed: the documented fallback.
    if (entries.size() == 3) GTEST_SKIP() << "this platform allows no mount namespace: " << *r;
    ASSERT_EQ(entries.size(), 2u) << *r;  // one folder, then the final ""
    EXPECT_TRUE(entries[0].starts_with("a.") || entries[0].starts_with("b.")) << *r;
  }
}

TEST(Issue24SandboxCrashTest, ACrashedLibraLeavesNoToolAndNoScratchFolder) {
  // A "libra" (a forked copy of this test) runs a call whose tool starts `setsid sleep 300`, and
  // dies by SIGKILL: the tool, its escaped child and the call's folder are gone all the same.
  ScopedTempDir scratch;
  ScopedTempDir dir;
  const std::string pids = dir.File("pids");
  const pid_t libra = fork();
  ASSERT_GE(libra, 0);
  if (libra == 0) {
    auto loop = std::move(cluster::EventLoop::Create()).value();
    auto* processes = new cluster::ProcessSet(loop.get());  // never destroyed: a crash
    auto* sandbox = new cluster::Sandbox(loop.get(), processes, scratch.File("calls"));
    cluster::SandboxCall call;
    call.name = "tool";
    call.argv = {"sh", "-c",
                 "echo $$ >> " + pids + "; setsid sh -c 'echo $$ >> " + pids +
                     "; exec sleep 300' & exec sleep 300"};
    call.limits.timeout_s = 600;
    sandbox->Run(call, [](Result<std::string>) {});
    // The loop only wakes for its own events: look at the file between short runs of it.
    for (int i = 0; i < 1200 && StrSplit(ReadIfExists(pids), '\n').size() < 3; ++i) {
      static_cast<void>(loop->RunUntil(
          [] { return false; }, cluster::EventLoop::Clock::now() + std::chrono::milliseconds(50)));
    }
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(libra, &status, 0), libra);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::vector<pid_t> left;
  for (const std::string& line : StrSplit(ReadIfExists(pids), '\n')) {
    if (!line.empty()) left.push_back(static_cast<pid_t>(std::stol(line)));
  }
  ASSERT_EQ(left.size(), 2u);
  for (const pid_t pid : left) {
    EXPECT_TRUE(Eventually([&] { return !IsAlive(pid); })) << pid << " outlived its libra";
    if (IsAlive(pid)) kill(pid, SIGKILL);
  }
  EXPECT_TRUE(Eventually([&] {
    // The call's folder is removed, and with it the scratch folder (its last call).
    std::error_code error;
    return !std::filesystem::exists(scratch.File("calls"), error) ||
           std::filesystem::is_empty(scratch.File("calls"), error);
  })) << "the call's folder outlived its libra";
}

// --- 5. (HTTP replies are input too) ------------------------------------------------------------

TEST(Issue24Test, AnHttpReplyBeyondTheLimitFailsItsRequest) {
  // A server answering with more than kMaxReplyBytes made libra allocate without bound.
  auto loop = std::move(cluster::EventLoop::Create()).value();
  auto transport = std::move(cluster::HttpTransport::Create(loop.get())).value();
  auto server = test::HttpTestServer::Start(loop.get(), [](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.body = std::string(cluster::kMaxReplyBytes + 1, 'x');
    return reply;
  });
  ASSERT_OK(server);
  std::optional<Result<cluster::HttpResponse>> reply;
  transport->Send(cluster::HttpRequest{.method = "GET",
                                       .url = (*server)->Url("/big"),
                                       .body = "",
                                       .headers = {},
                                       .timeout_s = 0},
                  [&](Result<cluster::HttpResponse> r) { reply = std::move(r); });
  ASSERT_OK(loop->RunUntil([&] { return reply.has_value(); },
                           cluster::EventLoop::Clock::now() + Deadline(std::chrono::seconds(60))));
  ASSERT_FALSE(reply->ok());
  EXPECT_NE(reply->status().message().find("the reply is larger than libra's limit of 67108864 "
                                           "bytes"),
            std::string::npos)
      << reply->status().ToString();
}

// --- 11. A busy machine fails CI
// ------------------------------------------------------------------

TEST(Issue24Test, TestDeadlinesStretchByTheEnvironmentsFactor) {
  // HttpTransportTest.ThousandsOfRequestsInFlightAtOnce failed on a fixed 5 s deadline beside
  // other builds. Deadlines are now generous and stretch by LIBRA_TEST_TIME_SCALE.
  const char* was = std::getenv("LIBRA_TEST_TIME_SCALE");
  const std::string saved = was == nullptr ? "" : was;
  setenv("LIBRA_TEST_TIME_SCALE", "3", 1);
  EXPECT_EQ(Deadline(std::chrono::seconds(2)), std::chrono::milliseconds(6000));
  setenv("LIBRA_TEST_TIME_SCALE", "fast", 1);
  EXPECT_EQ(Deadline(std::chrono::seconds(2)), std::chrono::milliseconds(2000));
  if (was == nullptr) {
    unsetenv("LIBRA_TEST_TIME_SCALE");
  } else {
    setenv("LIBRA_TEST_TIME_SCALE", saved.c_str(), 1);
  }
}

// --- Smaller findings ---------------------------------------------------------------------------

TEST_F(Issue24CliTest, SeedsBeyondInt64AreRefusedNotClamped) {
  // 2^63 and 2^64 - 1 both ran as 2^63 - 1: two seeds, one experiment.
  for (const std::string seed : {"9223372036854775808", "18446744073709551615"}) {
    const CommandResult r = Libra({"validate", "quickstart.toml", "--seed", seed});
    EXPECT_EQ(r.exit_code, 2) << seed;
    EXPECT_NE(r.err.find("must be an integer in [0, 9223372036854775807] (got " + seed + ")"),
              std::string::npos)
        << r.err;
  }
  const CommandResult r = Libra({"compare", "quickstart.toml", "--seed", "9223372036854775807",
                                 "--repeat", "2", "--steps", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("beyond the largest seed"), std::string::npos) << r.err;
}

TEST_F(Issue24CliTest, AnEmptyDatabasePathIsRefused) {
  // --db '' ran, printed "recorded in ", and kept nothing.
  const CommandResult r = Libra({"run", "quickstart.toml", "--steps", "1", "--db", ""});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the results database needs a path"), std::string::npos) << r.err;
}

TEST_F(Issue24CliTest, EchoedValuesKeepOneProblemPerLineAndNoEscapeSequences) {
  // A value holding a newline split its problem over two lines, the second without file:line;
  // one holding ESC reached the terminal raw.
  WriteFile(dir_.File("bad.toml"), ReadFile(dir_.File("quickstart.toml")) +
                                       "\n[sim]\nkv_policy = \"a\\nb\\u001b[31mred\"\n");
  const CommandResult r = Libra({"validate", "bad.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  for (const std::string& line : StrSplit(r.err, '\n')) {
    if (line.empty() || line.starts_with("libra: ")) continue;
    EXPECT_TRUE(line.starts_with("bad.toml:")) << line;
  }
  EXPECT_NE(r.err.find("(got 'a\\nb\\x1b[31mred')"), std::string::npos) << r.err;
}

TEST_F(Issue24CliTest, SshHostsAndUsersThatSshWouldReadAsOptionsFailValidation) {
  // They passed `validate` and were refused only when the run started.
  WriteFile(dir_.File("cpu-local.toml"), ReadFile(SourcePath("recipes/cpu-local.toml")));
  WriteFile(dir_.File("cpu-ssh.toml"), ReadFile(SourcePath("recipes/cpu-ssh.toml")));
  for (const std::string set :
       {"launcher.hosts[0].host=-oProxyCommand=x", "launcher.hosts[0].user=-lroot"}) {
    const CommandResult r = Libra({"validate", "cpu-ssh.toml", "--set", set});
    EXPECT_EQ(r.exit_code, 2) << set;
    EXPECT_NE(r.err.find("must not start with '-'"), std::string::npos) << r.err;
  }
}

TEST_F(Issue24CliTest, AnInterruptedComparisonContinuesAsAComparison) {
  // A comparison of three systems whose libra died during the second run, before the third: it
  // could only be continued run by run. `compare --resume` shows the first, resumes the second
  // and runs the third, all in the one comparison.
  ASSERT_EQ(Libra({"compare", "quickstart.toml", "--steps", "2", "-q", "--systems",
                   "async-split,sync-colocated"})
                .exit_code,
            0);
  {
    auto opened = store::Store::Open(dir_.File("results/libra.db"));
    ASSERT_OK(opened);
    store::Store& store = **opened;
    auto first = store.GetComparison(1);
    ASSERT_OK(first);
    records::ComparisonInfo plan = *first;
    plan.systems.push_back("sync-split");
    auto id = store.CreateComparison(plan);
    ASSERT_OK(id);
    ASSERT_OK(store.AddToComparison(*id, 1));
    ASSERT_OK(store.AddToComparison(*id, 2));
    auto second = store.GetRun(2);
    ASSERT_OK(second);
    ASSERT_OK(store.ReopenRun(*second, DeadOwner()));
  }
  const CommandResult r = Libra({"compare", "--resume", "2", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto store = OpenStore("results/libra.db");
  ASSERT_TRUE(store);
  auto comparison = store->GetComparison(2);
  ASSERT_OK(comparison);
  ASSERT_EQ(comparison->run_ids.size(), 3u);
  std::vector<std::string> systems;
  for (const int64_t id : comparison->run_ids) {
    auto run = store->GetRun(id);
    ASSERT_OK(run);
    EXPECT_EQ(run->status, records::kRunOk) << id;
    systems.push_back(run->system);
  }
  EXPECT_EQ(systems, (std::vector<std::string>{"async-split", "sync-colocated", "sync-split"}));
  EXPECT_EQ(comparison->run_ids[0], 1);
  EXPECT_EQ(comparison->run_ids[1], 2);
}

TEST_F(Issue24CliTest, SetErrorsNameTheOverrideNotTheFile) {
  // A table that only an override made was blamed on quickstart.toml:1:1.
  const CommandResult r = Libra({"validate", "quickstart.toml", "--set", "nosuch.key=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--set nosuch.key=1: nosuch: unknown key"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("quickstart.toml:1:1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace libra::test
