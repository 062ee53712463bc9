#include "store/store.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string_view>
#include <utility>

#include "common/json.h"
#include "common/strings.h"
#include "store/db.h"
#include "store/schema.h"

namespace libra::store {

using records::ComparisonInfo;
using records::DecisionRecord;
using records::EventRecord;
using records::kRunFailed;
using records::kRunInterrupted;
using records::kRunOk;
using records::kRunRunning;
using records::ProbeRecord;
using records::RunInfo;
using records::RunOwner;
using records::StepBatch;
using records::StepRecord;
using records::TrajectoryRecord;
using records::TuningRecord;
using records::TuningTrialRecord;
using records::TurnRecord;
namespace {

// The columns of each table in the order the statements below bind and read them. Inserts and
// selects are built from the same list, so the two cannot drift apart.
constexpr char kRunColumns[] =
    "name, system, router, planner, backend, seed, steps_planned, gpus, recipe_source, "
    "recipe_toml, git_revision, libra_version, started_at, ended_at, status, error, "
    "comparison_id, throughput_bound, configuration, tuning_id, scenario, staleness, eval_initial, "
    "folder, owner_host, owner_pid, owner_start, resolved_recipe";
constexpr char kStepColumns[] =
    "step, start_s, end_s, rollout_s, train_s, sync_s, wait_s, trajectories, turns, tool_calls, "
    "prompt_tokens, generated_tokens, reward_mean, policy_version, max_lag, rollout_gpus, "
    "train_gpus, gpu_util, idle_gpu_s, predicted_step_s, eval_score, logprob_diff, clip_fraction";
constexpr char kTrajectoryColumns[] =
    "id, prompt, sample, step, version, turns, tool_calls, prompt_tokens, generated_tokens, "
    "start_s, end_s, reward, truncated, instances, migrations";
constexpr char kDecisionColumns[] =
    "seq, at_s, step, planner, reason, train_gpus, rollout_gpus, layout, predicted_step_s, "
    "applied, \"trigger\", current_step_s, gain_s, transition_s";
constexpr char kEventColumns[] = "seq, kind, start_s, end_s, resource, trajectory, step, detail";
constexpr char kComparisonPlanColumns[] =
    "systems, seeds, reward_target, recipe_source, recipe_toml, tuned, sensitivity";
constexpr char kProbeColumns[] = "host, gpu, kind, value, unit, detail, recorded_at, libra_version";
constexpr char kTuningColumns[] =
    "key, recipe, system, created_at, budget_runs, steps, seeds, objective, winner, score, "
    "winner_runs, libra_version";
constexpr char kTuningTrialColumns[] = "position, configuration, seed, score, status, error";
constexpr char kTurnColumns[] =
    "trajectory, turn, instance, start_s, end_s, generated_tokens, \"end\", tool, tool_status, "
    "tool_output_tokens, tool_latency_s";

/// "INSERT INTO <table> (<columns>) VALUES (?, ?, ...)" with one parameter per column, for
/// `rows` rows.
std::string InsertSql(std::string_view table, std::string_view columns, int rows = 1) {
  std::string placeholders = "(?";
  for (const char c : columns) {
    if (c == ',') placeholders += ", ?";
  }
  placeholders += ")";
  std::string sql = "INSERT INTO " + std::string(table) + " (" + std::string(columns) + ") VALUES ";
  for (int row = 0; row < rows; ++row) sql += (row > 0 ? ", " : "") + placeholders;
  return sql;
}

/// Rows inserted by one statement where a step has many (trajectories, turns): SQLite's work per
/// statement (step, halt, reset) is then paid once per this many rows.
constexpr int kRowsPerInsert = 32;

/// Inserts `rows` with `many` (kRowsPerInsert rows a statement) and the rest with `one`;
/// `bind(statement, first_parameter, row)` binds one row's columns without copying.
template <typename Row, typename BindRow>
Status InsertRows(Statement& one, Statement& many, int columns, const std::vector<Row>& rows,
                  BindRow bind) {
  size_t next = 0;
  auto run = [&](Statement& statement, size_t count) -> Status {
    struct ResetAfter {
      Statement& s;
      ~ResetAfter() { s.Reset(); }
    } reset{statement};
    for (size_t i = 0; i < count; ++i) {
      LIBRA_RETURN_IF_ERROR(bind(statement, 1 + static_cast<int>(i) * columns, rows[next + i]));
    }
    LIBRA_RETURN_IF_ERROR(statement.Step().status());
    next += count;
    return Status();
  };
  while (rows.size() - next >= static_cast<size_t>(kRowsPerInsert)) {
    LIBRA_RETURN_IF_ERROR(run(many, kRowsPerInsert));
  }
  while (next < rows.size()) LIBRA_RETURN_IF_ERROR(run(one, 1));
  return Status();
}

Status RunNotFound(int64_t run_id, const std::string& path) {
  return Status::NotFound(
      StrFormat("run %lld is not in %s", static_cast<long long>(run_id), path.c_str()));
}

Status ComparisonNotFound(int64_t comparison_id, const std::string& path) {
  return Status::NotFound(StrFormat("comparison %lld is not in %s",
                                    static_cast<long long>(comparison_id), path.c_str()));
}

/// The folder of a new run, relative to the database's folder: "runs/<database stem>-<id>-<8 random
/// hex digits>". The database's name and the run id tell a reader whose it is; the random part
/// keeps a database that was deleted and made again (whose ids start at 1 again) off the folders
/// of the old one.
std::string NewRunFolder(const std::string& db_path, int64_t run_id) {
  std::random_device random;
  const uint32_t salt = random();
  return StrFormat("runs/%s-%lld-%08x", std::filesystem::path(db_path).stem().c_str(),
                   static_cast<long long>(run_id), salt);
}

/// kStore with SQLite's first finding when `PRAGMA integrity_check` finds the file damaged (a
/// damaged file is only ever read, never written: a write could spread the damage).
Status CheckIntegrity(Db& db) {
  LIBRA_ASSIGN_OR_RETURN(const std::string report,
                         db.QueryText("PRAGMA integrity_check(1)", "check the database"));
  if (report == "ok") return Status();
  // The first finding, without the "*** in database main ***" heading.
  std::string first;
  for (const std::string& line : StrSplit(report, '\n')) {
    if (!line.empty() && !StartsWith(line, "***")) {
      first = line;
      break;
    }
  }
  return Status::Store(db.path(), "the database is damaged (integrity_check: " + first +
                                      "); libra does not write to a damaged database. Save what "
                                      "can be read with `sqlite3 " +
                                      db.path() + " .recover`, or use another --db");
}

/// NULL for an empty string (ended_at while a run is running).
std::optional<std::string_view> NullIfEmpty(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return text;
}

RunInfo ReadRun(const Statement& statement) {
  RowReader row(statement);
  RunInfo run;
  run.id = row.Int64();
  run.name = row.Text();
  run.system = row.Text();
  run.router = row.Text();
  run.planner = row.Text();
  run.backend = row.Text();
  run.seed = static_cast<uint64_t>(row.Int64());
  run.steps_planned = row.Int();
  run.gpus = row.Int();
  run.recipe_source = row.Text();
  run.recipe_toml = row.Text();
  run.git_revision = row.Text();
  run.libra_version = row.Text();
  run.started_at = row.Text();
  run.ended_at = row.Text();
  run.status = row.Text();
  run.error = row.Text();
  run.comparison_id = row.OptionalInt64();
  run.throughput_bound = row.OptionalDouble();
  run.configuration = row.Text();
  run.tuning_id = row.OptionalInt64();
  run.scenario = row.Text();
  run.staleness = row.OptionalInt();
  run.eval_initial = row.OptionalDouble();
  run.folder = row.Text();
  run.owner.host = row.Text();
  run.owner.pid = row.Int64();
  run.owner.start = row.Text();
  run.resolved_recipe = row.Text();
  return run;
}

StepRecord ReadStep(const Statement& statement) {
  RowReader row(statement);
  StepRecord step;
  step.step = row.Int();
  step.start_s = row.Double();
  step.end_s = row.Double();
  step.rollout_s = row.Double();
  step.train_s = row.Double();
  step.sync_s = row.Double();
  step.wait_s = row.Double();
  step.trajectories = row.Int();
  step.turns = row.Int64();
  step.tool_calls = row.Int64();
  step.prompt_tokens = row.Int64();
  step.generated_tokens = row.Int64();
  step.reward_mean = row.Double();
  step.policy_version = row.Int();
  step.max_lag = row.Int();
  step.rollout_gpus = row.Int();
  step.train_gpus = row.Int();
  step.gpu_util = row.OptionalDouble();
  step.idle_gpu_s = row.OptionalDouble();
  step.predicted_step_s = row.OptionalDouble();
  step.eval_score = row.OptionalDouble();
  step.logprob_diff = row.OptionalDouble();
  step.clip_fraction = row.OptionalDouble();
  return step;
}

TrajectoryRecord ReadTrajectory(const Statement& statement) {
  RowReader row(statement);
  TrajectoryRecord trajectory;
  trajectory.id = row.Int64();
  trajectory.prompt = row.Int64();
  trajectory.sample = row.Int();
  trajectory.step = row.Int();
  trajectory.version = row.Int();
  trajectory.turns = row.Int();
  trajectory.tool_calls = row.Int();
  trajectory.prompt_tokens = row.Int64();
  trajectory.generated_tokens = row.Int64();
  trajectory.start_s = row.Double();
  trajectory.end_s = row.Double();
  trajectory.reward = row.Double();
  trajectory.truncated = row.Bool();
  trajectory.instances = row.Text();
  trajectory.migrations = row.Int();
  return trajectory;
}

DecisionRecord ReadDecision(const Statement& statement) {
  RowReader row(statement);
  DecisionRecord decision;
  decision.seq = row.Int64();
  decision.at_s = row.Double();
  decision.step = row.Int();
  decision.planner = row.Text();
  decision.reason = row.Text();
  decision.train_gpus = row.Int();
  decision.rollout_gpus = row.Int();
  decision.layout = row.Text();
  decision.predicted_step_s = row.OptionalDouble();
  decision.applied = row.Bool();
  decision.trigger = row.Text();
  decision.current_step_s = row.OptionalDouble();
  decision.gain_s = row.OptionalDouble();
  decision.transition_s = row.OptionalDouble();
  return decision;
}

EventRecord ReadEvent(const Statement& statement) {
  RowReader row(statement);
  EventRecord event;
  event.seq = row.Int64();
  event.kind = row.Text();
  event.start_s = row.Double();
  event.end_s = row.Double();
  event.resource = row.Text();
  event.trajectory = row.OptionalInt64();
  event.step = row.Int();
  event.detail = row.Text();
  return event;
}

TurnRecord ReadTurn(const Statement& statement) {
  RowReader row(statement);
  TurnRecord turn;
  turn.trajectory = row.Int64();
  turn.turn = row.Int();
  turn.instance = row.Int64();
  turn.start_s = row.Double();
  turn.end_s = row.Double();
  turn.generated_tokens = row.Int64();
  turn.end = row.Text();
  turn.tool = row.Text();
  turn.tool_status = row.Text();
  turn.tool_output_tokens = row.Int64();
  turn.tool_latency_s = row.Double();
  return turn;
}

ProbeRecord ReadProbe(const Statement& statement) {
  RowReader row(statement);
  ProbeRecord probe;
  probe.id = row.Int64();
  probe.host = row.Text();
  probe.gpu = row.Int();
  probe.kind = row.Text();
  probe.value = row.Double();
  probe.unit = row.Text();
  probe.detail = row.Text();
  probe.recorded_at = row.Text();
  probe.libra_version = row.Text();
  return probe;
}

ComparisonInfo ReadComparison(const Statement& statement) {
  RowReader row(statement);
  ComparisonInfo comparison;
  comparison.id = row.Int64();
  comparison.name = row.Text();
  comparison.created_at = row.Text();
  // Written by CreateComparison as a JSON array of names; anything else reads as none.
  const Result<JsonValue> systems = ParseJson(row.Text());
  if (systems.ok() && systems->is_array()) {
    for (const JsonValue& name : systems->as_array()) {
      if (name.is_string()) comparison.systems.push_back(name.as_string());
    }
  }
  comparison.seeds = row.Int();
  comparison.reward_target = row.OptionalDouble();
  comparison.recipe_source = row.Text();
  comparison.recipe_toml = row.Text();
  comparison.tuned = row.Bool();
  comparison.sensitivity = row.Bool();
  return comparison;
}

/// Every row of a per-run SELECT, read by `read`.
template <typename T>
Result<std::vector<T>> SelectRunRows(Statement& select, T (*read)(const Statement&),
                                     int64_t run_id) {
  std::vector<T> rows;
  LIBRA_RETURN_IF_ERROR(select.ForEachRow(
      [&](const Statement& row) {
        rows.push_back(read(row));
        return Status();
      },
      run_id));
  return rows;
}

}  // namespace

// Owns the connection and every statement, each prepared once when the store opens.
class Store::Impl {
 public:
  Impl(std::unique_ptr<Db> connection, int version)
      : db(std::move(connection)), schema_version(version) {}

  Status PrepareStatements();
  Status PrepareWrites();
  Status PrepareReads();

  /// kNotFound unless the run exists.
  Status RequireRun(int64_t run_id);
  /// kNotFound unless the comparison exists.
  Status RequireComparison(int64_t comparison_id);
  Status InsertDecisions(int64_t run_id, const std::vector<DecisionRecord>& decisions);
  /// The runs of a comparison, in the order they were added.
  Result<std::vector<int64_t>> ComparisonRunIds(int64_t comparison_id);

  // The connection comes first, so that it is closed after every statement below is finalized.
  std::unique_ptr<Db> db;
  int schema_version;
  // Write path.
  std::optional<Statement> insert_run;
  std::optional<Statement> finish_run;
  std::optional<Statement> set_run_folder;
  std::optional<Statement> set_eval_initial;
  std::optional<Statement> set_eval_score;
  std::optional<Statement> reopen_run;
  std::optional<Statement> insert_step;
  std::optional<Statement> insert_trajectory;
  std::optional<Statement> insert_trajectories;  // kRowsPerInsert rows
  std::optional<Statement> insert_decision;
  std::optional<Statement> insert_event;
  std::optional<Statement> insert_turn;
  std::optional<Statement> insert_turns;  // kRowsPerInsert rows
  std::optional<Statement> insert_router_metric;
  std::optional<Statement> insert_comparison;
  std::optional<Statement> append_comparison_run;
  std::optional<Statement> set_run_comparison;
  std::optional<Statement> insert_probe;
  std::optional<Statement> insert_tuning;
  std::optional<Statement> insert_tuning_trial;
  // Read path.
  std::optional<Statement> run_exists;
  std::optional<Statement> comparison_exists;
  std::optional<Statement> select_runs;
  std::optional<Statement> select_run;
  std::optional<Statement> select_steps;
  std::optional<Statement> select_step_counts;
  std::optional<Statement> select_trajectories;
  std::optional<Statement> select_decisions;
  std::optional<Statement> select_events;
  std::optional<Statement> select_turns;
  std::optional<Statement> select_router_metrics;
  std::optional<Statement> select_comparisons;
  std::optional<Statement> select_comparison;
  std::optional<Statement> select_comparison_runs;
  std::optional<Statement> select_probes;
  std::optional<Statement> select_tunings;
  std::optional<Statement> select_tuning_trials;

 private:
  Status Prepare(std::optional<Statement>& slot, const std::string& sql, const std::string& name);
};

Status Store::Impl::Prepare(std::optional<Statement>& slot, const std::string& sql,
                            const std::string& name) {
  LIBRA_ASSIGN_OR_RETURN(Statement statement, db->Prepare(sql, name, /*persistent=*/true));
  slot.emplace(std::move(statement));
  return Status();
}

Status Store::Impl::PrepareStatements() {
  LIBRA_RETURN_IF_ERROR(PrepareWrites());
  return PrepareReads();
}

Status Store::Impl::PrepareWrites() {
  const std::string runs = kRunColumns;
  LIBRA_RETURN_IF_ERROR(Prepare(insert_run, InsertSql("runs", runs), "insert into runs"));
  LIBRA_RETURN_IF_ERROR(Prepare(finish_run,
                                "UPDATE runs SET status = ?, error = ?, ended_at = ? WHERE id = ?",
                                "finish the run"));
  LIBRA_RETURN_IF_ERROR(Prepare(set_run_folder, "UPDATE runs SET folder = ? WHERE id = ?",
                                "set the folder of the run"));
  LIBRA_RETURN_IF_ERROR(Prepare(set_eval_initial, "UPDATE runs SET eval_initial = ? WHERE id = ?",
                                "set the initial evaluation score of the run"));
  LIBRA_RETURN_IF_ERROR(Prepare(set_eval_score,
                                "UPDATE steps SET eval_score = ? WHERE run_id = ? AND step = ?",
                                "set the evaluation score of a step"));
  LIBRA_RETURN_IF_ERROR(Prepare(reopen_run,
                                "UPDATE runs SET status = 'running', error = '', ended_at = NULL, "
                                "owner_host = ?, owner_pid = ?, owner_start = ? WHERE id = ? AND "
                                "status = ? AND owner_host = ? AND owner_pid = ? AND "
                                "owner_start = ?",
                                "reopen the run"));
  LIBRA_RETURN_IF_ERROR(Prepare(insert_step,
                                InsertSql("steps", std::string("run_id, ") + kStepColumns),
                                "insert into steps"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      insert_trajectory, InsertSql("trajectories", std::string("run_id, ") + kTrajectoryColumns),
      "insert into trajectories"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      insert_trajectories,
      InsertSql("trajectories", std::string("run_id, ") + kTrajectoryColumns, kRowsPerInsert),
      "insert into trajectories"));
  LIBRA_RETURN_IF_ERROR(Prepare(insert_decision,
                                InsertSql("decisions", std::string("run_id, ") + kDecisionColumns),
                                "insert into decisions"));
  LIBRA_RETURN_IF_ERROR(Prepare(insert_event,
                                InsertSql("events", std::string("run_id, ") + kEventColumns),
                                "insert into events"));
  LIBRA_RETURN_IF_ERROR(Prepare(insert_turn,
                                InsertSql("turns", std::string("run_id, ") + kTurnColumns),
                                "insert into turns"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      insert_turns, InsertSql("turns", std::string("run_id, ") + kTurnColumns, kRowsPerInsert),
      "insert into turns"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_router_metric,
              "INSERT INTO router_metrics (run_id, step, name, value) VALUES (?, ?, ?, ?)",
              "insert into router_metrics"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_comparison,
              InsertSql("comparisons", std::string("name, created_at, ") + kComparisonPlanColumns),
              "insert into comparisons"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(append_comparison_run,
              "INSERT INTO comparison_runs (comparison_id, run_id, position) "
              "SELECT ?1, ?2, coalesce(max(position) + 1, 0) FROM comparison_runs "
              "WHERE comparison_id = ?1",
              "insert into comparison_runs"));
  LIBRA_RETURN_IF_ERROR(Prepare(set_run_comparison,
                                "UPDATE runs SET comparison_id = ? WHERE id = ?",
                                "set the comparison of the run"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_probe, InsertSql("probes", kProbeColumns), "insert into probes"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_tuning, InsertSql("tunings", kTuningColumns), "insert into tunings"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_tuning_trial,
              InsertSql("tuning_trials", std::string("tuning_id, ") + kTuningTrialColumns),
              "insert into tuning_trials"));
  return Status();
}

Status Store::Impl::PrepareReads() {
  const std::string runs = kRunColumns;
  LIBRA_RETURN_IF_ERROR(Prepare(run_exists, "SELECT 1 FROM runs WHERE id = ?", "look up the run"));
  LIBRA_RETURN_IF_ERROR(Prepare(comparison_exists, "SELECT 1 FROM comparisons WHERE id = ?",
                                "look up the comparison"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(select_runs, "SELECT id, " + runs + " FROM runs ORDER BY id", "select from runs"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(select_run, "SELECT id, " + runs + " FROM runs WHERE id = ?", "select from runs"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(select_steps,
              std::string("SELECT ") + kStepColumns + " FROM steps WHERE run_id = ? ORDER BY step",
              "select from steps"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_step_counts,
                                "SELECT run_id, count(*) FROM steps GROUP BY run_id",
                                "count the steps of each run"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_trajectories,
                                std::string("SELECT ") + kTrajectoryColumns +
                                    " FROM trajectories WHERE run_id = ? ORDER BY id",
                                "select from trajectories"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      select_decisions,
      std::string("SELECT ") + kDecisionColumns + " FROM decisions WHERE run_id = ? ORDER BY seq",
      "select from decisions"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(select_events,
              std::string("SELECT ") + kEventColumns + " FROM events WHERE run_id = ? ORDER BY seq",
              "select from events"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_turns,
                                std::string("SELECT ") + kTurnColumns +
                                    " FROM turns WHERE run_id = ? ORDER BY trajectory, turn",
                                "select from turns"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_router_metrics,
                                "SELECT step, name, value FROM router_metrics WHERE run_id = ? "
                                "ORDER BY step, name",
                                "select from router_metrics"));
  const std::string comparison_columns =
      std::string("id, name, created_at, ") + kComparisonPlanColumns;
  LIBRA_RETURN_IF_ERROR(Prepare(select_comparisons,
                                "SELECT " + comparison_columns + " FROM comparisons ORDER BY id",
                                "select from comparisons"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_comparison,
                                "SELECT " + comparison_columns + " FROM comparisons WHERE id = ?",
                                "select from comparisons"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      select_probes, std::string("SELECT id, ") + kProbeColumns + " FROM probes ORDER BY id",
      "select from probes"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      select_tunings, std::string("SELECT id, ") + kTuningColumns + " FROM tunings ORDER BY id",
      "select from tunings"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_tuning_trials,
                                std::string("SELECT ") + kTuningTrialColumns +
                                    " FROM tuning_trials WHERE tuning_id = ? ORDER BY position",
                                "select from tuning_trials"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(select_comparison_runs,
              "SELECT run_id FROM comparison_runs WHERE comparison_id = ? ORDER BY position",
              "select from comparison_runs"));
  return Status();
}

Status Store::Impl::RequireRun(int64_t run_id) {
  bool found = false;
  LIBRA_RETURN_IF_ERROR(run_exists->ForEachRow(
      [&found](const Statement&) {
        found = true;
        return Status();
      },
      run_id));
  if (!found) return RunNotFound(run_id, db->path());
  return Status();
}

Status Store::Impl::RequireComparison(int64_t comparison_id) {
  bool found = false;
  LIBRA_RETURN_IF_ERROR(comparison_exists->ForEachRow(
      [&found](const Statement&) {
        found = true;
        return Status();
      },
      comparison_id));
  if (!found) return ComparisonNotFound(comparison_id, db->path());
  return Status();
}

Status Store::Impl::InsertDecisions(int64_t run_id, const std::vector<DecisionRecord>& decisions) {
  for (const DecisionRecord& d : decisions) {
    LIBRA_RETURN_IF_ERROR(insert_decision->Execute(
        run_id, d.seq, d.at_s, d.step, d.planner, d.reason, d.train_gpus, d.rollout_gpus, d.layout,
        d.predicted_step_s, d.applied, d.trigger, d.current_step_s, d.gain_s, d.transition_s));
  }
  return Status();
}

Result<std::vector<int64_t>> Store::Impl::ComparisonRunIds(int64_t comparison_id) {
  std::vector<int64_t> run_ids;
  LIBRA_RETURN_IF_ERROR(select_comparison_runs->ForEachRow(
      [&run_ids](const Statement& row) {
        run_ids.push_back(row.Int64(0));
        return Status();
      },
      comparison_id));
  return run_ids;
}

// --- Opening -------------------------------------------------------------------------------------

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const Options& options) {
  return OpenWithMigrations(path, options, SchemaMigrations());
}

Result<std::unique_ptr<Store>> Store::OpenWithMigrations(const std::string& path,
                                                         const Options& options,
                                                         const std::vector<Migration>& migrations) {
  LIBRA_RETURN_IF_ERROR(ValidateMigrations(migrations));
  if (path.empty()) {
    // SQLite would open a temporary database, deleted at exit: nothing recorded would be kept.
    return Status::InvalidArgument("the results database needs a path (--db PATH), not ''");
  }
  Db::Options db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.busy_timeout_ms = options.busy_timeout_ms;
  db_options.read_only = options.read_only;
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(path, db_options));
  // Refuse foreign, newer and damaged files before the first write (the switch to WAL below).
  LIBRA_ASSIGN_OR_RETURN(int version, CheckSchema(*db, migrations));
  LIBRA_RETURN_IF_ERROR(CheckIntegrity(*db));
  if (options.read_only && version < migrations.back().version) {
    // An older file is brought up to date first, which needs a writable connection.
    db.reset();
    db_options.read_only = false;
    db_options.create_if_missing = false;
    LIBRA_ASSIGN_OR_RETURN(db, Db::Open(path, db_options));
    LIBRA_ASSIGN_OR_RETURN(version, CheckSchema(*db, migrations));
  }
  if (!options.read_only || version < migrations.back().version) {
    // WAL lets reports read while a run writes. The mode is stored in the file; synchronous is
    // per connection (NORMAL is durable at every checkpoint and safe against corruption in WAL).
    LIBRA_RETURN_IF_ERROR(
        db->QueryText("PRAGMA journal_mode = WAL", "switch to write-ahead logging").status());
    LIBRA_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous = NORMAL", "set synchronous"));
    LIBRA_ASSIGN_OR_RETURN(version, ApplyMigrations(*db, migrations));
  }

  auto impl = std::make_unique<Impl>(std::move(db), version);
  LIBRA_RETURN_IF_ERROR(impl->PrepareStatements());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store::~Store() = default;

int Store::schema_version() const { return impl_->schema_version; }

const std::string& Store::path() const { return impl_->db->path(); }

// --- Writing -------------------------------------------------------------------------------------

Result<int64_t> Store::BeginRun(const RunInfo& run) {
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->insert_run->Execute(
      run.name, run.system, run.router, run.planner, run.backend,
      static_cast<int64_t>(run.seed),  // the bit pattern: uint64 seeds above 2^63 read back exactly
      run.steps_planned, run.gpus, run.recipe_source, run.recipe_toml, run.git_revision,
      run.libra_version, run.started_at, NullIfEmpty(run.ended_at), run.status, run.error,
      run.comparison_id, run.throughput_bound, run.configuration, run.tuning_id, run.scenario,
      run.staleness, run.eval_initial, "", run.owner.host, run.owner.pid, run.owner.start,
      NullIfEmpty(run.resolved_recipe)));
  const int64_t id = db.LastInsertRowid();
  LIBRA_RETURN_IF_ERROR(impl_->set_run_folder->Execute(NewRunFolder(db.path(), id), id));
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return id;
}

Status Store::RecordStep(int64_t run_id, const StepBatch& batch) {
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->RequireRun(run_id));
  const StepRecord& s = batch.step;
  LIBRA_RETURN_IF_ERROR(impl_->insert_step->Execute(
      run_id, s.step, s.start_s, s.end_s, s.rollout_s, s.train_s, s.sync_s, s.wait_s,
      s.trajectories, s.turns, s.tool_calls, s.prompt_tokens, s.generated_tokens, s.reward_mean,
      s.policy_version, s.max_lag, s.rollout_gpus, s.train_gpus, s.gpu_util, s.idle_gpu_s,
      s.predicted_step_s, s.eval_score, s.logprob_diff, s.clip_fraction));
  LIBRA_RETURN_IF_ERROR(
      InsertRows(*impl_->insert_trajectory, *impl_->insert_trajectories, 16, batch.trajectories,
                 [run_id](Statement& statement, int first, const TrajectoryRecord& t) {
                   return statement.BindFrom(first, run_id, t.id, t.prompt, t.sample, t.step,
                                             t.version, t.turns, t.tool_calls, t.prompt_tokens,
                                             t.generated_tokens, t.start_s, t.end_s, t.reward,
                                             t.truncated, t.instances, t.migrations);
                 }));
  LIBRA_RETURN_IF_ERROR(InsertRows(*impl_->insert_turn, *impl_->insert_turns, 12, batch.turns,
                                   [run_id](Statement& statement, int first, const TurnRecord& t) {
                                     return statement.BindFrom(
                                         first, run_id, t.trajectory, t.turn, t.instance, t.start_s,
                                         t.end_s, t.generated_tokens, t.end, t.tool, t.tool_status,
                                         t.tool_output_tokens, t.tool_latency_s);
                                   }));
  for (const EventRecord& e : batch.events) {
    LIBRA_RETURN_IF_ERROR(impl_->insert_event->Execute(run_id, e.seq, e.kind, e.start_s, e.end_s,
                                                       e.resource, e.trajectory, e.step, e.detail));
  }
  for (const auto& [name, value] : batch.router_metrics) {
    LIBRA_RETURN_IF_ERROR(impl_->insert_router_metric->Execute(run_id, s.step, name, value));
  }
  LIBRA_RETURN_IF_ERROR(impl_->InsertDecisions(run_id, batch.decisions));
  return transaction.Commit();
}

Status Store::RecordDecisions(int64_t run_id, const std::vector<DecisionRecord>& decisions) {
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->RequireRun(run_id));
  LIBRA_RETURN_IF_ERROR(impl_->InsertDecisions(run_id, decisions));
  return transaction.Commit();
}

Status Store::FinishRun(int64_t run_id, const std::string& status, const std::string& error,
                        const std::string& ended_at) {
  if (status != kRunOk && status != kRunFailed && status != kRunInterrupted &&
      status != kRunRunning) {
    return Status::InvalidArgument(StrFormat(
        "FinishRun(run %lld): status must be \"%s\", \"%s\", \"%s\" or \"%s\", not \"%s\"",
        static_cast<long long>(run_id), kRunOk, kRunFailed, kRunInterrupted, kRunRunning,
        status.c_str()));
  }
  if (status == kRunRunning && (!error.empty() || !ended_at.empty())) {
    return Status::InvalidArgument(
        StrFormat("FinishRun(run %lld): a run reopened as \"%s\" has no error and no end time",
                  static_cast<long long>(run_id), kRunRunning));
  }
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->finish_run->Execute(status, error, NullIfEmpty(ended_at), run_id));
  if (db.Changes() == 0) {
    return RunNotFound(run_id, db.path());
  }
  return transaction.Commit();
}

Status Store::RecordEval(int64_t run_id, int version, double score) {
  if (version < 0 || !std::isfinite(score)) {
    return Status::InvalidArgument(StrFormat("RecordEval(run %lld): version %d, score %g",
                                             static_cast<long long>(run_id), version, score));
  }
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  if (version == 0) {
    LIBRA_RETURN_IF_ERROR(impl_->set_eval_initial->Execute(score, run_id));
    if (db.Changes() == 0) return RunNotFound(run_id, db.path());
  } else {
    LIBRA_RETURN_IF_ERROR(impl_->set_eval_score->Execute(score, run_id, version - 1));
    if (db.Changes() == 0) {
      return Status::NotFound(
          StrFormat("%s: run %lld has no step %d to record the evaluation of "
                    "version %d with",
                    db.path().c_str(), static_cast<long long>(run_id), version - 1, version));
    }
  }
  return transaction.Commit();
}

Status Store::ReopenRun(const RunInfo& was, const RunOwner& owner) {
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->RequireRun(was.id));
  LIBRA_RETURN_IF_ERROR(impl_->reopen_run->Execute(owner.host, owner.pid, owner.start, was.id,
                                                   was.status, was.owner.host, was.owner.pid,
                                                   was.owner.start));
  if (db.Changes() == 0) {
    return Status::InvalidArgument(
        StrFormat("run %lld changed in %s while this libra was resuming it (another libra took "
                  "it over?)",
                  static_cast<long long>(was.id), db.path().c_str()));
  }
  return transaction.Commit();
}

std::string Store::RunFolder(const RunInfo& run) const {
  const std::filesystem::path folder = std::filesystem::path(path()).parent_path();
  if (run.folder.empty()) return (folder / "runs" / std::to_string(run.id)).string();
  return (folder / run.folder).string();
}

Result<int64_t> Store::CreateComparison(const std::string& name, const std::string& created_at) {
  ComparisonInfo comparison;
  comparison.name = name;
  comparison.created_at = created_at;
  return CreateComparison(comparison);
}

Result<int64_t> Store::CreateComparison(const ComparisonInfo& c) {
  Db& db = *impl_->db;
  JsonValue systems = JsonValue::MakeArray();
  for (const std::string& name : c.systems) systems.Append(name);
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->insert_comparison->Execute(c.name, c.created_at, ToJson(systems),
                                                          c.seeds, c.reward_target, c.recipe_source,
                                                          c.recipe_toml, c.tuned, c.sensitivity));
  const int64_t id = db.LastInsertRowid();
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return id;
}

Status Store::AddToComparison(int64_t comparison_id, int64_t run_id) {
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->RequireComparison(comparison_id));
  LIBRA_RETURN_IF_ERROR(impl_->RequireRun(run_id));
  LIBRA_RETURN_IF_ERROR(impl_->append_comparison_run->Execute(comparison_id, run_id));
  LIBRA_RETURN_IF_ERROR(impl_->set_run_comparison->Execute(comparison_id, run_id));
  return transaction.Commit();
}

Result<std::vector<int64_t>> Store::RecordProbes(const std::vector<ProbeRecord>& probes) {
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  std::vector<int64_t> ids;
  for (const ProbeRecord& p : probes) {
    LIBRA_RETURN_IF_ERROR(impl_->insert_probe->Execute(p.host, p.gpu, p.kind, p.value, p.unit,
                                                       p.detail, p.recorded_at, p.libra_version));
    ids.push_back(db.LastInsertRowid());
  }
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return ids;
}

Result<int64_t> Store::RecordTuning(const TuningRecord& tuning) {
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  std::vector<std::string> seeds;
  for (uint64_t seed : tuning.seeds) seeds.push_back(std::to_string(seed));
  LIBRA_RETURN_IF_ERROR(impl_->insert_tuning->Execute(
      tuning.key, tuning.recipe, tuning.system, tuning.created_at, tuning.budget_runs, tuning.steps,
      StrJoin(seeds, ","), tuning.objective, tuning.winner, tuning.score, tuning.winner_runs,
      tuning.libra_version));
  const int64_t id = db.LastInsertRowid();
  for (size_t i = 0; i < tuning.trials.size(); ++i) {
    const TuningTrialRecord& t = tuning.trials[i];
    std::optional<int64_t> seed;
    if (t.seed) seed = static_cast<int64_t>(*t.seed);  // the bit pattern, as runs.seed
    LIBRA_RETURN_IF_ERROR(impl_->insert_tuning_trial->Execute(
        id, static_cast<int64_t>(i), t.configuration, seed, t.score, t.status, t.error));
  }
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return id;
}

// --- Reading -------------------------------------------------------------------------------------

Result<std::vector<RunInfo>> Store::ListRuns() {
  std::vector<RunInfo> runs;
  LIBRA_RETURN_IF_ERROR(impl_->select_runs->ForEachRow([&runs](const Statement& row) {
    runs.push_back(ReadRun(row));
    return Status();
  }));
  return runs;
}

Result<RunInfo> Store::GetRun(int64_t run_id) {
  std::optional<RunInfo> run;
  LIBRA_RETURN_IF_ERROR(impl_->select_run->ForEachRow(
      [&run](const Statement& row) {
        run = ReadRun(row);
        return Status();
      },
      run_id));
  if (!run) {
    return RunNotFound(run_id, path());
  }
  return *std::move(run);
}

Result<std::map<int64_t, int>> Store::StepCounts() {
  std::map<int64_t, int> counts;
  LIBRA_RETURN_IF_ERROR(impl_->select_step_counts->ForEachRow([&counts](const Statement& row) {
    RowReader r(row);
    const int64_t run = r.Int64();
    counts[run] = r.Int();
    return Status();
  }));
  return counts;
}

Result<std::vector<StepRecord>> Store::Steps(int64_t run_id) {
  return SelectRunRows(*impl_->select_steps, &ReadStep, run_id);
}

Result<std::vector<TrajectoryRecord>> Store::Trajectories(int64_t run_id) {
  return SelectRunRows(*impl_->select_trajectories, &ReadTrajectory, run_id);
}

Result<std::vector<DecisionRecord>> Store::Decisions(int64_t run_id) {
  return SelectRunRows(*impl_->select_decisions, &ReadDecision, run_id);
}

Result<std::vector<TurnRecord>> Store::Turns(int64_t run_id) {
  return SelectRunRows(*impl_->select_turns, &ReadTurn, run_id);
}

Result<std::vector<std::tuple<int, std::string, double>>> Store::RouterMetrics(int64_t run_id) {
  std::vector<std::tuple<int, std::string, double>> rows;
  LIBRA_RETURN_IF_ERROR(impl_->select_router_metrics->ForEachRow(
      [&](const Statement& row) {
        RowReader r(row);
        const int step = r.Int();
        std::string name = r.Text();
        rows.emplace_back(step, std::move(name), r.Double());
        return Status();
      },
      run_id));
  return rows;
}

Result<std::vector<EventRecord>> Store::Events(int64_t run_id) {
  return SelectRunRows(*impl_->select_events, &ReadEvent, run_id);
}

Result<std::vector<ProbeRecord>> Store::Probes() {
  std::vector<ProbeRecord> probes;
  LIBRA_RETURN_IF_ERROR(impl_->select_probes->ForEachRow([&probes](const Statement& row) {
    probes.push_back(ReadProbe(row));
    return Status();
  }));
  return probes;
}

Result<std::vector<TuningRecord>> Store::Tunings() {
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kRead));
  std::vector<TuningRecord> tunings;
  LIBRA_RETURN_IF_ERROR(impl_->select_tunings->ForEachRow([&](const Statement& statement) {
    RowReader row(statement);
    TuningRecord t;
    t.id = row.Int64();
    t.key = row.Text();
    t.recipe = row.Text();
    t.system = row.Text();
    t.created_at = row.Text();
    t.budget_runs = row.Int();
    t.steps = row.Int();
    const std::string seeds = row.Text();
    for (const std::string& seed : StrSplit(seeds, ',')) {
      if (seed.empty()) continue;
      char* end = nullptr;
      errno = 0;
      const unsigned long long value = std::strtoull(seed.c_str(), &end, 10);
      if (errno != 0 || end == seed.c_str() || *end != '\0') {
        return Status::Store(impl_->db->path(),
                             StrFormat("tuning %lld: seeds '%s' is not a list of integers",
                                       static_cast<long long>(t.id), seeds.c_str()));
      }
      t.seeds.push_back(value);
    }
    t.objective = row.Text();
    t.winner = row.Text();
    t.score = row.Double();
    t.winner_runs = row.Int();
    t.libra_version = row.Text();
    tunings.push_back(std::move(t));
    return Status();
  }));
  for (TuningRecord& t : tunings) {
    LIBRA_RETURN_IF_ERROR(impl_->select_tuning_trials->ForEachRow(
        [&t](const Statement& statement) {
          RowReader row(statement);
          row.Int64();  // position: the rows come in its order
          TuningTrialRecord trial;
          trial.configuration = row.Text();
          if (std::optional<int64_t> seed = row.OptionalInt64()) {
            trial.seed = static_cast<uint64_t>(*seed);
          }
          trial.score = row.OptionalDouble();
          trial.status = row.Text();
          trial.error = row.Text();
          t.trials.push_back(std::move(trial));
          return Status();
        },
        t.id));
  }
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return tunings;
}

Result<std::optional<TuningRecord>> Store::LatestTuning(const std::string& key,
                                                        const std::string& system) {
  LIBRA_ASSIGN_OR_RETURN(std::vector<TuningRecord> tunings, Tunings());
  for (auto it = tunings.rbegin(); it != tunings.rend(); ++it) {
    if (it->key == key && it->system == system) return std::optional<TuningRecord>(*it);
  }
  return std::optional<TuningRecord>();
}

Result<std::vector<ComparisonInfo>> Store::ListComparisons() {
  // One snapshot for the comparisons and their runs.
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kRead));
  std::vector<ComparisonInfo> comparisons;
  LIBRA_RETURN_IF_ERROR(
      impl_->select_comparisons->ForEachRow([&comparisons](const Statement& statement) {
        comparisons.push_back(ReadComparison(statement));
        return Status();
      }));
  for (ComparisonInfo& comparison : comparisons) {
    LIBRA_ASSIGN_OR_RETURN(comparison.run_ids, impl_->ComparisonRunIds(comparison.id));
  }
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return comparisons;
}

Result<ComparisonInfo> Store::GetComparison(int64_t comparison_id) {
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kRead));
  std::optional<ComparisonInfo> comparison;
  LIBRA_RETURN_IF_ERROR(impl_->select_comparison->ForEachRow(
      [&comparison](const Statement& statement) {
        comparison = ReadComparison(statement);
        return Status();
      },
      comparison_id));
  if (!comparison) {
    return ComparisonNotFound(comparison_id, path());
  }
  LIBRA_ASSIGN_OR_RETURN(comparison->run_ids, impl_->ComparisonRunIds(comparison_id));
  LIBRA_RETURN_IF_ERROR(transaction.Commit());
  return *std::move(comparison);
}

}  // namespace libra::store
