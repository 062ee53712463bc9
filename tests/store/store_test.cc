#include "store/store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "store/db.h"
#include "store/schema.h"
#include "support/test_util.h"

namespace libra::store {
namespace {

using records::ComparisonInfo;
using records::DecisionRecord;
using records::EventRecord;
using records::ProbeRecord;
using records::RunInfo;
using records::StepBatch;
using records::StepRecord;
using records::TrajectoryRecord;
using records::TurnRecord;
using records::kRunFailed;
using records::kRunInterrupted;
using records::kRunOk;
using records::kRunRunning;

using ::libra::test::ReadFile;
using ::libra::test::ScopedTempDir;
using ::libra::test::WriteFile;

// --- Builders ------------------------------------------------------------------------------------

RunInfo MakeRun(const std::string& system, uint64_t seed) {
  RunInfo run;
  run.name = "quickstart";
  run.system = system;
  run.router = "least-loaded";
  run.planner = "static";
  run.backend = "sim";
  run.seed = seed;
  run.steps_planned = 4;
  run.gpus = 16;
  run.recipe_source = "recipes/quickstart.toml";
  run.recipe_toml = "[run]\nname = \"quickstart\"\nnote = 'it''s'\n";
  run.git_revision = "0123456789ab-dirty";
  run.libra_version = "0.1.0";
  run.started_at = "2024-05-01T12:00:00Z";
  return run;
}

/// Records a step the way the coordinator does, from its parts.
Status RecordStepOf(Store& store, int64_t run_id, StepRecord step,
                    std::vector<TrajectoryRecord> trajectories, std::vector<EventRecord> events,
                    std::vector<DecisionRecord> decisions, std::vector<TurnRecord> turns = {}) {
  return store.RecordStep(run_id, StepBatch{std::move(step),
                                            std::move(trajectories),
                                            std::move(turns),
                                            std::move(events),
                                            std::move(decisions),
                                            {}});
}

StepRecord MakeStep(int step) {
  StepRecord s;
  s.step = step;
  s.start_s = 10.0 * step;
  s.end_s = 10.0 * step + 9.75;
  s.rollout_s = 6.125;
  s.train_s = 2.5;
  s.sync_s = step % 2 == 0 ? 0.0 : 0.375;
  s.wait_s = 1.0 / 3.0;
  s.trajectories = 64;
  s.turns = 512;
  s.tool_calls = 448;
  s.prompt_tokens = int64_t{1} << 40;
  s.generated_tokens = (int64_t{1} << 41) + 3;
  s.reward_mean = -0.1;
  s.policy_version = step;
  s.max_lag = 1;
  s.rollout_gpus = 12;
  s.train_gpus = 4;
  return s;
}

TrajectoryRecord MakeTrajectory(int64_t id, int step) {
  TrajectoryRecord t;
  t.id = id;
  t.prompt = id / 8;
  t.sample = static_cast<int>(id % 8);
  t.step = step;
  t.version = step > 0 ? step - 1 : 0;
  t.turns = 3;
  t.tool_calls = 2;
  t.prompt_tokens = 1000 + id;
  t.generated_tokens = 2000 + id;
  t.start_s = 0.5 * static_cast<double>(id);
  t.end_s = 0.5 * static_cast<double>(id) + 4.0;
  t.reward = id % 2 == 0 ? 1.0 : 0.0;
  t.truncated = id % 3 == 0;
  t.instances = "0,1,1";
  t.migrations = 1;
  return t;
}

EventRecord MakeEvent(int64_t seq, int step, std::optional<int64_t> trajectory) {
  EventRecord e;
  e.seq = seq;
  e.kind = trajectory ? "turn" : "train";
  e.start_s = 1.5 * static_cast<double>(seq);
  e.end_s = 1.5 * static_cast<double>(seq) + 1.0;
  e.resource = trajectory ? "instance 3" : "trainer";
  e.trajectory = trajectory;
  e.step = step;
  e.detail = "tokens=128";
  return e;
}

DecisionRecord MakeDecision(int64_t seq, int step, std::optional<double> predicted_step_s) {
  DecisionRecord d;
  d.seq = seq;
  d.at_s = 2.0 * static_cast<double>(seq);
  d.step = step;
  d.planner = "static";
  d.reason = "initial plan";
  d.train_gpus = 4;
  d.rollout_gpus = 12;
  d.layout = "train 4 | rollout tp1x12";
  d.predicted_step_s = predicted_step_s;
  d.applied = seq % 2 == 0;
  return d;
}

// --- Helpers -------------------------------------------------------------------------------------

std::unique_ptr<Store> OpenOrDie(const std::string& path) {
  auto store = Store::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

/// A second, independent connection to the same file, as another process would have.
std::unique_ptr<Db> RawOpen(const std::string& path) {
  auto db = Db::Open(path, Db::Options());
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

/// Column names of `table` in order, read through a raw connection.
std::vector<std::string> Columns(const std::string& path, const std::string& table) {
  std::vector<std::string> names;
  auto db = RawOpen(path);
  if (db == nullptr) return names;
  auto info = db->Prepare("SELECT name FROM pragma_table_info(?) ORDER BY cid", "columns", false);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return names;
  EXPECT_OK(info->ForEachRow(
      [&names](const Statement& row) {
        names.push_back(row.Text(0));
        return Status();
      },
      table));
  return names;
}

bool Contains(const Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

// --- Opening -------------------------------------------------------------------------------------

TEST(StoreTest, FreshDatabaseIsAtLatestVersionWithAllTables) {
  // A new file is created with its folder, migrated to the newest version, and has every table.
  ScopedTempDir dir;
  const std::string path = dir.File("results/libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), SchemaMigrations().back().version);
  EXPECT_EQ(store->path(), path);
  for (const char* table : {"runs", "steps", "trajectories", "turns", "decisions", "events",
                            "router_metrics", "comparisons", "comparison_runs", "probes"}) {
    EXPECT_FALSE(Columns(path, table).empty()) << table;
  }
  auto user_version = RawOpen(path)->QueryInt64("PRAGMA user_version", "version");
  ASSERT_OK(user_version);
  EXPECT_EQ(*user_version, store->schema_version());
}

TEST(StoreTest, ColumnsAreNamedAfterTheRecordFields) {
  // Users query columns by the record field names, so the names and order are part of the API.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  ASSERT_NE(OpenOrDie(path), nullptr);
  using Names = std::vector<std::string>;
  EXPECT_EQ(Columns(path, "runs"), (Names{"id",
                                          "name",
                                          "system",
                                          "router",
                                          "planner",
                                          "backend",
                                          "seed",
                                          "steps_planned",
                                          "gpus",
                                          "recipe_source",
                                          "recipe_toml",
                                          "git_revision",
                                          "libra_version",
                                          "started_at",
                                          "ended_at",
                                          "status",
                                          "error",
                                          "comparison_id",
                                          "throughput_bound",
                                          "folder",
                                          "owner_host",
                                          "owner_pid",
                                          "owner_start",
                                          "configuration",
                                          "tuning_id",
                                          "scenario",
                                          "staleness",
                                          "eval_initial",
                                          "resolved_recipe"}));
  EXPECT_EQ(Columns(path, "steps"),
            (Names{"run_id",           "step",        "start_s",        "end_s",
                   "rollout_s",        "train_s",     "sync_s",         "wait_s",
                   "trajectories",     "turns",       "tool_calls",     "prompt_tokens",
                   "generated_tokens", "reward_mean", "policy_version", "max_lag",
                   "rollout_gpus",     "train_gpus",  "gpu_util",       "idle_gpu_s",
                   "predicted_step_s", "eval_score",  "logprob_diff",   "clip_fraction"}));
  EXPECT_EQ(Columns(path, "trajectories"),
            (Names{"run_id", "id", "prompt", "sample", "step", "version", "turns", "tool_calls",
                   "prompt_tokens", "generated_tokens", "start_s", "end_s", "reward", "truncated",
                   "instances", "migrations"}));
  EXPECT_EQ(Columns(path, "decisions"),
            (Names{"run_id", "seq", "at_s", "step", "planner", "reason", "train_gpus",
                   "rollout_gpus", "layout", "predicted_step_s", "applied", "trigger",
                   "current_step_s", "gain_s", "transition_s"}));
  EXPECT_EQ(Columns(path, "events"), (Names{"run_id", "seq", "kind", "start_s", "end_s", "resource",
                                            "trajectory", "step", "detail"}));
  EXPECT_EQ(Columns(path, "turns"), (Names{"run_id", "trajectory", "turn", "instance", "start_s",
                                           "end_s", "generated_tokens", "end", "tool",
                                           "tool_status", "tool_output_tokens", "tool_latency_s"}));
  EXPECT_EQ(Columns(path, "comparisons"),
            (Names{"id", "name", "created_at", "systems", "seeds", "reward_target", "recipe_source",
                   "recipe_toml", "tuned", "sensitivity"}));
  EXPECT_EQ(Columns(path, "comparison_runs"), (Names{"comparison_id", "run_id", "position"}));
  EXPECT_EQ(Columns(path, "probes"), (Names{"id", "host", "gpu", "kind", "value", "unit", "detail",
                                            "recorded_at", "libra_version"}));
  EXPECT_EQ(Columns(path, "tunings"),
            (Names{"id", "key", "recipe", "system", "created_at", "budget_runs", "steps", "seeds",
                   "objective", "winner", "score", "winner_runs", "libra_version"}));
  EXPECT_EQ(Columns(path, "tuning_trials"),
            (Names{"tuning_id", "position", "configuration", "seed", "score", "status", "error"}));
}

TEST(StoreTest, UsesWriteAheadLogging) {
  // The file is in WAL mode, as seen from another connection.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto raw = RawOpen(path);
  ASSERT_NE(raw, nullptr);
  auto mode = raw->QueryText("PRAGMA journal_mode", "journal mode");
  ASSERT_OK(mode);
  EXPECT_EQ(*mode, "wal");
}

TEST(StoreTest, MissingFileWithoutCreateIsNotFound) {
  // With create_if_missing=false a missing file is kNotFound and no file appears.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  Store::Options options;
  options.create_if_missing = false;
  auto store = Store::Open(path, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(store.status(), path + ": no results database here"))
      << store.status().message();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StoreTest, ExistingFileOpensWithoutCreate) {
  // create_if_missing=false opens a database that exists, with its data.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->BeginRun(MakeRun("a", 1)));
  }
  Store::Options options;
  options.create_if_missing = false;
  auto store = Store::Open(path, options);
  ASSERT_OK(store);
  auto runs = (*store)->ListRuns();
  ASSERT_OK(runs);
  EXPECT_EQ(runs->size(), 1u);
}

TEST(StoreTest, GarbageFileIsRefusedAndLeftUnchanged) {
  // A file that is not SQLite gives kStore naming it, and is not modified or joined by WAL files.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  std::string garbage;
  for (int i = 0; i < 5000; ++i) garbage += static_cast<char>((i * 7919 + 13) % 256);
  WriteFile(path, garbage);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(store.status(), path + ": not a libra results database"))
      << store.status().message();
  EXPECT_TRUE(Contains(store.status(), "not an SQLite database, or it is corrupt"))
      << store.status().message();
  EXPECT_EQ(ReadFile(path), garbage);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
  EXPECT_FALSE(std::filesystem::exists(path + "-journal"));
}

TEST(StoreTest, ShortTextFileIsRefusedAndLeftUnchanged) {
  // A small text file (say, a results path mistaken for a recipe) is refused just the same.
  ScopedTempDir dir;
  const std::string path = dir.File("notes.txt");
  const std::string text = "these are my notes\n";
  WriteFile(path, text);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kStore);
  EXPECT_EQ(ReadFile(path), text);
}

TEST(StoreTest, EmptyFileBecomesADatabase) {
  // A zero-byte file is an empty SQLite database and is simply migrated.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  WriteFile(path, "");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), SchemaMigrations().back().version);
}

TEST(StoreTest, ForeignSqliteDatabaseIsRefusedAndLeftUnchanged) {
  // An SQLite file with other tables and no libra stamp is refused before any write.
  ScopedTempDir dir;
  const std::string path = dir.File("app.db");
  {
    auto other = RawOpen(path);
    ASSERT_NE(other, nullptr);
    ASSERT_OK(other->Exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)", "create"));
  }
  const std::string before = ReadFile(path);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(store.status(), "not a libra results database (table users)"))
      << store.status().message();
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(StoreTest, NewerSchemaIsRefused) {
  // A database written by a newer libra (higher user_version) is refused with a clear message.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  ASSERT_NE(OpenOrDie(path), nullptr);
  {
    auto raw = RawOpen(path);
    ASSERT_NE(raw, nullptr);
    ASSERT_OK(
        raw->Exec(StrFormat("PRAGMA user_version = %d", SchemaMigrations().back().version + 1),
                  "set version"));
  }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kStore);
  EXPECT_EQ(
      store.status().message(),
      path + StrFormat(": schema version %d is newer than this libra supports (%d); use a "
                       "newer libra or another --db",
                       SchemaMigrations().back().version + 1, SchemaMigrations().back().version));
}

TEST(StoreTest, StagedMigrationKeepsDataAndAppliesTheChange) {
  // A file at this libra's version with data is moved one version on by a longer list; the data
  // is kept and the new column exists with its default.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  std::vector<Migration> current = SchemaMigrations();
  const int latest = current.back().version;
  std::vector<Migration> next = current;
  next.push_back({latest + 1, "add runs.note",
                  "ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT 'none';"
                  "CREATE INDEX idx_runs_note ON runs (note);"});
  int64_t run_id = 0;
  {
    auto store = Store::OpenWithMigrations(path, Store::Options(), current);
    ASSERT_OK(store);
    EXPECT_EQ((*store)->schema_version(), latest);
    auto id = (*store)->BeginRun(MakeRun("a", 5));
    ASSERT_OK(id);
    run_id = *id;
    ASSERT_OK(RecordStepOf(**store, run_id, MakeStep(0), {MakeTrajectory(0, 0)}, {}, {}));
  }
  auto store = Store::OpenWithMigrations(path, Store::Options(), next);
  ASSERT_OK(store);
  EXPECT_EQ((*store)->schema_version(), latest + 1);
  auto run = (*store)->GetRun(run_id);
  ASSERT_OK(run);
  RunInfo expected = MakeRun("a", 5);
  expected.id = run_id;
  expected.folder = run->folder;  // assigned by the store
  EXPECT_EQ(*run, expected);
  auto steps = (*store)->Steps(run_id);
  ASSERT_OK(steps);
  EXPECT_EQ(*steps, std::vector<StepRecord>{MakeStep(0)});

  auto raw = RawOpen(path);
  ASSERT_NE(raw, nullptr);
  auto note = raw->QueryText("SELECT note FROM runs", "read note");
  ASSERT_OK(note);
  EXPECT_EQ(*note, "none");
  auto version = raw->QueryInt64("PRAGMA user_version", "version");
  ASSERT_OK(version);
  EXPECT_EQ(*version, latest + 1);
  // Writes still work against the migrated schema.
  EXPECT_OK((*store)->BeginRun(MakeRun("b", 6)));
}

TEST(StoreTest, OldLibraRefusesTheMigratedFile) {
  // After a file moved past this libra's version, this libra refuses it.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  std::vector<Migration> next = SchemaMigrations();
  const int latest = next.back().version;
  next.push_back({latest + 1, "add a table", "CREATE TABLE extra (x INTEGER);"});
  ASSERT_OK(Store::OpenWithMigrations(path, Store::Options(), next));
  auto store = Store::OpenWithMigrations(path, Store::Options(), SchemaMigrations());
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(Contains(store.status(), StrFormat("schema version %d is newer than this libra "
                                                 "supports (%d)",
                                                 latest + 1, latest)))
      << store.status().message();
}

TEST(StoreTest, MalformedMigrationListIsInternalError) {
  // A migration list that skips a version is a bug, reported before the file is touched.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = Store::OpenWithMigrations(path, Store::Options(),
                                         {SchemaMigrations().at(0), {3, "skip", "SELECT 1"}});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInternal);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StoreTest, WriteFailsWhileAnotherProcessHoldsTheLock) {
  // With another connection inside BEGIN EXCLUSIVE, a write gives up after the busy timeout with
  // kStore saying the file is locked; reads still work (WAL), and writes work after the unlock.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  ASSERT_NE(OpenOrDie(path), nullptr);
  auto holder = RawOpen(path);
  ASSERT_NE(holder, nullptr);
  ASSERT_OK(holder->Exec("BEGIN EXCLUSIVE", "lock"));

  Store::Options options;
  options.busy_timeout_ms = 20;
  auto store = Store::Open(path, options);
  ASSERT_OK(store);
  auto id = (*store)->BeginRun(MakeRun("a", 1));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(id.status(), path + ": the database is locked by another process"))
      << id.status().message();
  EXPECT_OK((*store)->ListRuns());

  ASSERT_OK(holder->Exec("COMMIT", "unlock"));
  EXPECT_OK((*store)->BeginRun(MakeRun("a", 1)));
}

TEST(StoreTest, OpenFailsWhileAnotherProcessLocksANewFile) {
  // A new (not yet WAL) file locked by another connection cannot be migrated: kStore, locked.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto holder = RawOpen(path);
  ASSERT_NE(holder, nullptr);
  ASSERT_OK(holder->Exec("BEGIN EXCLUSIVE", "lock"));
  Store::Options options;
  options.busy_timeout_ms = 20;
  auto store = Store::Open(path, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(store.status(), "locked by another process")) << store.status().message();
  ASSERT_OK(holder->Exec("ROLLBACK", "unlock"));
  EXPECT_OK(Store::Open(path, options));
}

// --- Runs ----------------------------------------------------------------------------------------

TEST(StoreTest, RunsRoundTripInOrderWithLargeSeeds) {
  // Every field of a run reads back as written, including seeds above 2^63 and a NULL
  // comparison; ids count up and ListRuns is oldest first.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  const std::vector<RunInfo> written = {MakeRun("a", 0), MakeRun("b", (uint64_t{1} << 63) + 12345),
                                        MakeRun("c", UINT64_MAX), MakeRun("d", 42)};
  std::vector<RunInfo> expected;
  for (const RunInfo& run : written) {
    auto id = store->BeginRun(run);
    ASSERT_OK(id);
    expected.push_back(run);
    expected.back().id = *id;
  }
  EXPECT_LT(expected[0].id, expected[1].id);
  auto runs = store->ListRuns();
  ASSERT_OK(runs);
  ASSERT_EQ(runs->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    // The store gives each run a folder of its own: "runs/<database>-<id>-<8 hex digits>".
    const std::string prefix = "runs/libra-" + std::to_string(expected[i].id) + "-";
    EXPECT_TRUE((*runs)[i].folder.starts_with(prefix)) << (*runs)[i].folder;
    EXPECT_EQ((*runs)[i].folder.size(), prefix.size() + 8) << (*runs)[i].folder;
    expected[i].folder = (*runs)[i].folder;
  }
  EXPECT_EQ(*runs, expected);
  auto one = store->GetRun(expected[2].id);
  ASSERT_OK(one);
  EXPECT_EQ(*one, expected[2]);
  EXPECT_EQ(one->seed, UINT64_MAX);
  EXPECT_EQ(one->ended_at, "");
  EXPECT_EQ(one->status, kRunRunning);
  EXPECT_EQ(one->comparison_id, std::nullopt);
}

TEST(StoreTest, RunningRunHasNullEndTime) {
  // ended_at is NULL in the table while a run is running, and set by FinishRun.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  auto raw = RawOpen(path);
  ASSERT_NE(raw, nullptr);
  auto nulls = raw->QueryInt64("SELECT count(*) FROM runs WHERE ended_at IS NULL", "count");
  ASSERT_OK(nulls);
  EXPECT_EQ(*nulls, 1);
}

TEST(StoreTest, UnknownRunIsNotFound) {
  // GetRun of an id that does not exist is kNotFound naming the id and the file.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto run = store->GetRun(42);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(run.status().message(), "run 42 is not in " + path);
}

TEST(StoreTest, FinishRunSetsStatusErrorAndEndTime) {
  // FinishRun records the final status, the error text and the end time; others are untouched.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto ok_id = store->BeginRun(MakeRun("a", 1));
  auto failed_id = store->BeginRun(MakeRun("b", 2));
  auto running_id = store->BeginRun(MakeRun("c", 3));
  ASSERT_OK(ok_id);
  ASSERT_OK(failed_id);
  ASSERT_OK(running_id);
  ASSERT_OK(store->FinishRun(*ok_id, kRunOk, "", "2024-05-01T12:10:00Z"));
  ASSERT_OK(store->FinishRun(*failed_id, kRunFailed, "instance 3 lost", "2024-05-01T12:11:00Z"));

  auto ok_run = store->GetRun(*ok_id);
  ASSERT_OK(ok_run);
  EXPECT_EQ(ok_run->status, kRunOk);
  EXPECT_EQ(ok_run->error, "");
  EXPECT_EQ(ok_run->ended_at, "2024-05-01T12:10:00Z");
  auto failed_run = store->GetRun(*failed_id);
  ASSERT_OK(failed_run);
  EXPECT_EQ(failed_run->status, kRunFailed);
  EXPECT_EQ(failed_run->error, "instance 3 lost");
  EXPECT_EQ(failed_run->ended_at, "2024-05-01T12:11:00Z");
  RunInfo expected_running = MakeRun("c", 3);
  expected_running.id = *running_id;
  auto running = store->GetRun(*running_id);
  ASSERT_OK(running);
  expected_running.folder = running->folder;
  EXPECT_EQ(*running, expected_running);
}

TEST(StoreTest, FinishRunRefusesBadStatusAndUnknownRun) {
  // A status other than ok/failed/interrupted (or running, to reopen) is kInvalidArgument; an
  // unknown run is kNotFound.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  EXPECT_EQ(store->FinishRun(*id, "done", "", "t").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->FinishRun(*id, kRunRunning, "", "t").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->FinishRun(*id + 100, kRunInterrupted, "", "t").code(), StatusCode::kNotFound);
  EXPECT_OK(store->FinishRun(*id, kRunInterrupted, "Ctrl-C", "t"));
  // Reopened to be resumed: running again, with no error and no end time.
  EXPECT_OK(store->FinishRun(*id, kRunRunning, "", ""));
  auto run = store->GetRun(*id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, kRunRunning);
  EXPECT_EQ(run->ended_at, "");
}

TEST(StoreTest, BadRunStatusIsRefusedByTheSchema) {
  // BeginRun with a status outside the documented values fails the table's CHECK.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  RunInfo run = MakeRun("a", 1);
  run.status = "sleeping";
  auto id = store->BeginRun(run);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(id.status(), "insert into runs on ")) << id.status().message();
  EXPECT_TRUE(Contains(id.status(), "CHECK constraint failed")) << id.status().message();
}

// --- Steps ---------------------------------------------------------------------------------------

TEST(StoreTest, TurnsRoundTripInOrder) {
  // Turns come back ordered by trajectory and turn, whatever order they were written in.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  TurnRecord tool_turn{3, 0, 1, 0.5, 2.5, 100, "tool_call", "search", "timeout", 12, 30.0};
  TurnRecord last_turn{3, 1, 2, 33.0, 34.0, 7, "stop", "", "", 0, 0};
  TurnRecord other{1, 0, 0, 0, 1, 5, "truncated", "", "", 0, 0};
  ASSERT_OK(RecordStepOf(*store, *id, MakeStep(0), {MakeTrajectory(1, 0), MakeTrajectory(3, 0)}, {},
                         {}, {last_turn, tool_turn, other}));
  auto turns = store->Turns(*id);
  ASSERT_OK(turns);
  EXPECT_EQ(*turns, (std::vector<TurnRecord>{other, tool_turn, last_turn}));
}

TEST(StoreTest, AMeasuredEvaluationIsWrittenToItsStepOrTheRun) {
  // Issue 19: a real backend's score arrives after its step was recorded. Version 0 is the run's
  // initial score, version v the score of step v - 1; a version without its step is refused.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  ASSERT_OK(RecordStepOf(*store, *id, MakeStep(0), {}, {}, {}, {}));
  ASSERT_OK(store->RecordEval(*id, 0, 0.25));
  ASSERT_OK(store->RecordEval(*id, 1, 0.5));
  auto run = store->GetRun(*id);
  ASSERT_OK(run);
  EXPECT_EQ(run->eval_initial, 0.25);
  auto steps = store->Steps(*id);
  ASSERT_OK(steps);
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0].eval_score, 0.5);
  EXPECT_EQ(store->RecordEval(*id, 2, 0.75).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->RecordEval(*id + 1, 0, 0.75).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->RecordEval(*id, 1, std::nan("")).code(), StatusCode::kInvalidArgument);
}

TEST(StoreTest, RouterMetricsRoundTrip) {
  // A step's router counters come back by step and name.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  StepBatch batch;
  batch.step = MakeStep(0);
  batch.router_metrics = {{"routes/short", 12}, {"moves/tree", 3}};
  ASSERT_OK(store->RecordStep(*id, batch));
  batch.step = MakeStep(1);
  batch.router_metrics = {{"routes/short", 20}};
  ASSERT_OK(store->RecordStep(*id, batch));
  auto metrics = store->RouterMetrics(*id);
  ASSERT_OK(metrics);
  using Row = std::tuple<int, std::string, double>;
  EXPECT_EQ(*metrics, (std::vector<Row>{Row{0, "moves/tree", 3}, Row{0, "routes/short", 12},
                                        Row{1, "routes/short", 20}}));
}

TEST(StoreTest, Version1FileGainsTheTurnsTable) {
  // A database written by a libra at schema version 1 opens, is migrated to the latest version,
  // keeps its runs, and records turns from then on.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  {
    auto db = Db::Open(path, Db::Options());
    ASSERT_OK(db);
    const std::vector<Migration> v1 = {SchemaMigrations().at(0)};
    ASSERT_OK(CheckSchema(**db, v1));
    ASSERT_OK(ApplyMigrations(**db, v1));
    ASSERT_OK((*db)->Exec(
        "INSERT INTO runs (name, system, router, planner, backend, seed, steps_planned, gpus, "
        "recipe_source, recipe_toml, git_revision, libra_version, started_at, status) VALUES "
        "('old', 's', 'least-conn', 'static', 'sim', 1, 2, 8, 'r.toml', '', 'abc', '0.1.0', "
        "'2026-01-01T00:00:00Z', 'ok')",
        "insert an old run"));
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), SchemaMigrations().back().version);
  auto runs = store->ListRuns();
  ASSERT_OK(runs);
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().name, "old");
  auto turns = store->Turns(runs->front().id);
  ASSERT_OK(turns);
  EXPECT_TRUE(turns->empty());
}

TEST(StoreTest, StepRecordsRoundTripInOrder) {
  // Steps, trajectories, events and decisions read back equal to what was written, sorted by
  // step / id / seq, with optional fields both set and unset, and separated by run.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  auto other = store->BeginRun(MakeRun("b", 2));
  ASSERT_OK(id);
  ASSERT_OK(other);

  const std::vector<TrajectoryRecord> step0_trajectories = {MakeTrajectory(3, 0),
                                                            MakeTrajectory(0, 0)};
  const std::vector<EventRecord> step0_events = {MakeEvent(1, 0, 3), MakeEvent(0, 0, std::nullopt)};
  const std::vector<DecisionRecord> step0_decisions = {MakeDecision(1, 0, 9.5),
                                                       MakeDecision(0, 0, std::nullopt)};
  ASSERT_OK(
      RecordStepOf(*store, *id, MakeStep(0), step0_trajectories, step0_events, step0_decisions));
  ASSERT_OK(
      RecordStepOf(*store, *id, MakeStep(1), {MakeTrajectory(1, 1)}, {MakeEvent(2, 1, 1)}, {}));
  ASSERT_OK(RecordStepOf(*store, *other, MakeStep(0), {MakeTrajectory(0, 0)}, {}, {}));

  auto steps = store->Steps(*id);
  ASSERT_OK(steps);
  EXPECT_EQ(*steps, (std::vector<StepRecord>{MakeStep(0), MakeStep(1)}));
  auto trajectories = store->Trajectories(*id);
  ASSERT_OK(trajectories);
  EXPECT_EQ(*trajectories, (std::vector<TrajectoryRecord>{
                               MakeTrajectory(0, 0), MakeTrajectory(1, 1), MakeTrajectory(3, 0)}));
  auto events = store->Events(*id);
  ASSERT_OK(events);
  EXPECT_EQ(*events, (std::vector<EventRecord>{MakeEvent(0, 0, std::nullopt), MakeEvent(1, 0, 3),
                                               MakeEvent(2, 1, 1)}));
  auto decisions = store->Decisions(*id);
  ASSERT_OK(decisions);
  EXPECT_EQ(*decisions, (std::vector<DecisionRecord>{MakeDecision(0, 0, std::nullopt),
                                                     MakeDecision(1, 0, 9.5)}));

  auto other_trajectories = store->Trajectories(*other);
  ASSERT_OK(other_trajectories);
  EXPECT_EQ(other_trajectories->size(), 1u);
  auto none = store->Steps(*other + 100);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

TEST(StoreTest, DuplicateStepLeavesNothingOfTheCallBehind) {
  // Recording a step twice fails, and none of the second call's trajectories, events or
  // decisions are stored: the step is written whole or not at all.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  ASSERT_OK(RecordStepOf(*store, *id, MakeStep(0), {MakeTrajectory(0, 0)}, {MakeEvent(0, 0, 0)},
                         {MakeDecision(0, 0, 1.0)}));
  const Status duplicate =
      RecordStepOf(*store, *id, MakeStep(0), {MakeTrajectory(1, 0), MakeTrajectory(2, 0)},
                   {MakeEvent(1, 0, 1)}, {MakeDecision(1, 0, 2.0)});
  EXPECT_EQ(duplicate.code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(duplicate, "insert into steps on " + path)) << duplicate.message();
  EXPECT_TRUE(Contains(duplicate, "UNIQUE constraint failed: steps.run_id, steps.step"))
      << duplicate.message();

  EXPECT_EQ(store->Steps(*id)->size(), 1u);
  EXPECT_EQ(*store->Trajectories(*id), std::vector<TrajectoryRecord>{MakeTrajectory(0, 0)});
  EXPECT_EQ(store->Events(*id)->size(), 1u);
  EXPECT_EQ(store->Decisions(*id)->size(), 1u);
}

TEST(StoreTest, FailureLateInAStepRollsBackTheStep) {
  // A bad row at the end of a step (a repeated event seq) undoes the step row and its
  // trajectories written before it in the same call.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  const Status status =
      RecordStepOf(*store, *id, MakeStep(0), {MakeTrajectory(0, 0), MakeTrajectory(1, 0)},
                   {MakeEvent(5, 0, 0), MakeEvent(5, 0, 1)}, {});
  EXPECT_EQ(status.code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(status, "events.run_id, events.seq")) << status.message();
  EXPECT_TRUE(store->Steps(*id)->empty());
  EXPECT_TRUE(store->Trajectories(*id)->empty());
  EXPECT_TRUE(store->Events(*id)->empty());
  // The same step can then be recorded correctly.
  EXPECT_OK(
      RecordStepOf(*store, *id, MakeStep(0), {MakeTrajectory(0, 0)}, {MakeEvent(5, 0, 0)}, {}));
}

TEST(StoreTest, NaNInAStepIsRefusedWhole) {
  // A NaN anywhere in the step's records fails the call instead of being stored as NULL.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  TrajectoryRecord bad = MakeTrajectory(1, 0);
  bad.reward = std::numeric_limits<double>::quiet_NaN();
  const Status status = RecordStepOf(*store, *id, MakeStep(0), {MakeTrajectory(0, 0), bad}, {}, {});
  EXPECT_EQ(status.code(), StatusCode::kStore);
  EXPECT_TRUE(Contains(status, "insert into trajectories")) << status.message();
  EXPECT_TRUE(store->Steps(*id)->empty());
}

TEST(StoreTest, StepOfUnknownRunIsNotFound) {
  // Recording for a run id that does not exist is kNotFound and writes nothing.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  const Status status = RecordStepOf(*store, 7, MakeStep(0), {MakeTrajectory(0, 0)}, {}, {});
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "run 7 is not in " + path);
  EXPECT_EQ(store->RecordDecisions(7, {MakeDecision(0, 0, 1.0)}).code(), StatusCode::kNotFound);
}

TEST(StoreTest, DecisionsOutsideAStepAreRecorded) {
  // RecordDecisions stores decisions with no step row (e.g. the initial plan).
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto id = store->BeginRun(MakeRun("a", 1));
  ASSERT_OK(id);
  const std::vector<DecisionRecord> plan = {MakeDecision(0, 0, 12.25),
                                            MakeDecision(1, 0, std::nullopt)};
  ASSERT_OK(store->RecordDecisions(*id, plan));
  EXPECT_EQ(*store->Decisions(*id), plan);
  EXPECT_TRUE(store->Steps(*id)->empty());
}

TEST(StoreTest, DataSurvivesReopening) {
  // Everything written is there after the store is closed and opened again.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  int64_t id = 0;
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    auto begun = store->BeginRun(MakeRun("a", 9));
    ASSERT_OK(begun);
    id = *begun;
    ASSERT_OK(RecordStepOf(*store, id, MakeStep(0), {MakeTrajectory(0, 0)}, {MakeEvent(0, 0, 0)},
                           {MakeDecision(0, 0, 3.0)}));
    ASSERT_OK(store->FinishRun(id, kRunOk, "", "2024-05-01T13:00:00Z"));
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto run = store->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, kRunOk);
  EXPECT_EQ(*store->Steps(id), std::vector<StepRecord>{MakeStep(0)});
  EXPECT_EQ(*store->Trajectories(id), std::vector<TrajectoryRecord>{MakeTrajectory(0, 0)});
  EXPECT_EQ(*store->Events(id), std::vector<EventRecord>{MakeEvent(0, 0, 0)});
  EXPECT_EQ(*store->Decisions(id), std::vector<DecisionRecord>{MakeDecision(0, 0, 3.0)});
}

// --- Comparisons ---------------------------------------------------------------------------------

TEST(StoreTest, ComparisonsKeepTheOrderRunsWereAdded) {
  // Runs of a comparison come back in the order they were added (not by id), each run points
  // at its comparison, and comparisons are listed oldest first.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> run_ids;
  for (const char* system : {"a", "b", "c"}) {
    auto id = store->BeginRun(MakeRun(system, 1));
    ASSERT_OK(id);
    run_ids.push_back(*id);
  }
  auto first = store->CreateComparison("baseline vs libra", "2024-05-01T12:00:00Z");
  auto second = store->CreateComparison("empty", "2024-05-02T12:00:00Z");
  ASSERT_OK(first);
  ASSERT_OK(second);
  ASSERT_OK(store->AddToComparison(*first, run_ids[2]));
  ASSERT_OK(store->AddToComparison(*first, run_ids[0]));
  ASSERT_OK(store->AddToComparison(*first, run_ids[1]));

  ComparisonInfo expected_first;
  expected_first.id = *first;
  expected_first.name = "baseline vs libra";
  expected_first.created_at = "2024-05-01T12:00:00Z";
  expected_first.run_ids = {run_ids[2], run_ids[0], run_ids[1]};
  ComparisonInfo expected_second;
  expected_second.id = *second;
  expected_second.name = "empty";
  expected_second.created_at = "2024-05-02T12:00:00Z";
  auto got = store->GetComparison(*first);
  ASSERT_OK(got);
  EXPECT_EQ(*got, expected_first);
  auto all = store->ListComparisons();
  ASSERT_OK(all);
  EXPECT_EQ(*all, (std::vector<ComparisonInfo>{expected_first, expected_second}));
  for (const int64_t run_id : run_ids) {
    EXPECT_EQ(store->GetRun(run_id)->comparison_id, std::optional<int64_t>(*first));
  }
}

TEST(StoreTest, AddToComparisonRefusesUnknownIdsAndRepeats) {
  // An unknown comparison or run is kNotFound; adding the same run twice is a kStore error.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto run = store->BeginRun(MakeRun("a", 1));
  auto comparison = store->CreateComparison("c", "t");
  ASSERT_OK(run);
  ASSERT_OK(comparison);
  const Status no_comparison = store->AddToComparison(*comparison + 5, *run);
  EXPECT_EQ(no_comparison.code(), StatusCode::kNotFound);
  EXPECT_EQ(no_comparison.message(),
            "comparison " + std::to_string(*comparison + 5) + " is not in " + path);
  EXPECT_EQ(store->AddToComparison(*comparison, *run + 5).code(), StatusCode::kNotFound);
  ASSERT_OK(store->AddToComparison(*comparison, *run));
  EXPECT_EQ(store->AddToComparison(*comparison, *run).code(), StatusCode::kStore);
  EXPECT_EQ(store->GetComparison(*comparison)->run_ids, std::vector<int64_t>{*run});
}

TEST(StoreTest, UnknownComparisonIsNotFound) {
  // GetComparison of an id that does not exist is kNotFound naming the id and the file.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  auto comparison = store->GetComparison(3);
  ASSERT_FALSE(comparison.ok());
  EXPECT_EQ(comparison.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(comparison.status().message(), "comparison 3 is not in " + path);
}

TEST(StoreTest, RunCreatedInAComparisonKeepsItsId) {
  // BeginRun stores a given comparison_id, and refuses one that does not exist.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  auto comparison = store->CreateComparison("c", "t");
  ASSERT_OK(comparison);
  RunInfo run = MakeRun("a", 1);
  run.comparison_id = *comparison;
  auto id = store->BeginRun(run);
  ASSERT_OK(id);
  EXPECT_EQ(store->GetRun(*id)->comparison_id, std::optional<int64_t>(*comparison));
  run.comparison_id = *comparison + 10;
  auto bad = store->BeginRun(run);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status(), "FOREIGN KEY constraint failed")) << bad.status().message();
}

ProbeRecord MakeProbe(int gpu, const std::string& kind, double value) {
  ProbeRecord p;
  p.host = "gpu-01";
  p.gpu = gpu;
  p.kind = kind;
  p.value = value;
  p.unit = "B/s";
  p.detail = R"({"bytes":1073741824})";
  p.recorded_at = "2026-01-01T00:00:00Z";
  p.libra_version = "0.1.0";
  return p;
}

TEST(StoreTest, ProbesRoundTripInOrder) {
  // Probes read back as written, oldest first, with their new ids.
  ScopedTempDir dir;
  auto store = OpenOrDie(dir.File("libra.db"));
  ASSERT_NE(store, nullptr);
  ProbeRecord copy = MakeProbe(0, "hbm_copy", 2.9e12);
  ProbeRecord allreduce = MakeProbe(-1, "allreduce", 3.6e11);
  auto ids = store->RecordProbes({copy, allreduce});
  ASSERT_OK(ids);
  ASSERT_EQ(ids->size(), 2u);
  copy.id = (*ids)[0];
  allreduce.id = (*ids)[1];
  EXPECT_LT(copy.id, allreduce.id);
  auto probes = store->Probes();
  ASSERT_OK(probes);
  EXPECT_EQ(*probes, (std::vector<ProbeRecord>{copy, allreduce}));
}

TEST(StoreTest, Version6FileGainsTheProbesTable) {
  // A database at schema version 6 with a run opens, migrates to the latest version, keeps the
  // run, and records probes from then on.
  ScopedTempDir dir;
  const std::string path = dir.File("libra.db");
  {
    auto db = Db::Open(path, Db::Options());
    ASSERT_OK(db);
    const std::vector<Migration> v6(SchemaMigrations().begin(), SchemaMigrations().begin() + 6);
    ASSERT_EQ(v6.back().version, 6);
    ASSERT_OK(CheckSchema(**db, v6));
    ASSERT_OK(ApplyMigrations(**db, v6));
    ASSERT_OK((*db)->Exec(
        "INSERT INTO runs (name, system, router, planner, backend, seed, steps_planned, gpus, "
        "recipe_source, recipe_toml, git_revision, libra_version, started_at, status) VALUES "
        "('old', 's', 'least-conn', 'static', 'sim', 1, 2, 8, 'r.toml', '', 'abc', '0.1.0', "
        "'2026-01-01T00:00:00Z', 'ok')",
        "insert an old run"));
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), SchemaMigrations().back().version);
  auto runs = store->ListRuns();
  ASSERT_OK(runs);
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().name, "old");
  auto probes = store->Probes();
  ASSERT_OK(probes);
  EXPECT_TRUE(probes->empty());
  ASSERT_OK(store->RecordProbes({MakeProbe(0, "h2d", 2.5e10)}));
}

}  // namespace
}  // namespace libra::store
