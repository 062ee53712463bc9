#include "store/store.h"

#include <optional>
#include <string_view>
#include <utility>

#include "common/strings.h"
#include "store/db.h"
#include "store/schema.h"

namespace libra::store {
namespace {

// The columns of each table in the order the statements below bind and read them. Inserts and
// selects are built from the same list, so the two cannot drift apart.
constexpr char kRunColumns[] =
    "name, system, router, planner, backend, seed, steps_planned, gpus, recipe_source, "
    "recipe_toml, git_revision, libra_version, started_at, ended_at, status, error, "
    "comparison_id, throughput_bound";
constexpr char kStepColumns[] =
    "step, start_s, end_s, rollout_s, train_s, sync_s, wait_s, trajectories, turns, tool_calls, "
    "prompt_tokens, generated_tokens, reward_mean, policy_version, max_lag, rollout_gpus, "
    "train_gpus, gpu_util, idle_gpu_s, predicted_step_s, logprob_diff, clip_fraction";
constexpr char kTrajectoryColumns[] =
    "id, prompt, sample, step, version, turns, tool_calls, prompt_tokens, generated_tokens, "
    "start_s, end_s, reward, truncated, instances, migrations";
constexpr char kDecisionColumns[] =
    "seq, at_s, step, planner, reason, train_gpus, rollout_gpus, layout, predicted_step_s, "
    "applied, \"trigger\", current_step_s, gain_s, transition_s";
constexpr char kEventColumns[] = "seq, kind, start_s, end_s, resource, trajectory, step, detail";
constexpr char kProbeColumns[] = "host, gpu, kind, value, unit, detail, recorded_at, libra_version";
constexpr char kTurnColumns[] =
    "trajectory, turn, instance, start_s, end_s, generated_tokens, \"end\", tool, tool_status, "
    "tool_output_tokens, tool_latency_s";

/// "INSERT INTO <table> (<columns>) VALUES (?, ?, ...)" with one parameter per column.
std::string InsertSql(std::string_view table, std::string_view columns) {
  std::string placeholders = "?";
  for (const char c : columns) {
    if (c == ',') placeholders += ", ?";
  }
  return "INSERT INTO " + std::string(table) + " (" + std::string(columns) + ") VALUES (" +
         placeholders + ")";
}

Status RunNotFound(int64_t run_id, const std::string& path) {
  return Status::NotFound(
      StrFormat("run %lld is not in %s", static_cast<long long>(run_id), path.c_str()));
}

Status ComparisonNotFound(int64_t comparison_id, const std::string& path) {
  return Status::NotFound(StrFormat("comparison %lld is not in %s",
                                    static_cast<long long>(comparison_id), path.c_str()));
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
  std::optional<Statement> insert_step;
  std::optional<Statement> insert_trajectory;
  std::optional<Statement> insert_decision;
  std::optional<Statement> insert_event;
  std::optional<Statement> insert_turn;
  std::optional<Statement> insert_router_metric;
  std::optional<Statement> insert_comparison;
  std::optional<Statement> append_comparison_run;
  std::optional<Statement> set_run_comparison;
  std::optional<Statement> insert_probe;
  // Read path.
  std::optional<Statement> run_exists;
  std::optional<Statement> comparison_exists;
  std::optional<Statement> select_runs;
  std::optional<Statement> select_run;
  std::optional<Statement> select_steps;
  std::optional<Statement> select_trajectories;
  std::optional<Statement> select_decisions;
  std::optional<Statement> select_events;
  std::optional<Statement> select_turns;
  std::optional<Statement> select_router_metrics;
  std::optional<Statement> select_comparisons;
  std::optional<Statement> select_comparison;
  std::optional<Statement> select_comparison_runs;
  std::optional<Statement> select_probes;

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
  const std::string runs = kRunColumns;
  LIBRA_RETURN_IF_ERROR(Prepare(insert_run, InsertSql("runs", runs), "insert into runs"));
  LIBRA_RETURN_IF_ERROR(Prepare(finish_run,
                                "UPDATE runs SET status = ?, error = ?, ended_at = ? WHERE id = ?",
                                "finish the run"));
  LIBRA_RETURN_IF_ERROR(Prepare(insert_step,
                                InsertSql("steps", std::string("run_id, ") + kStepColumns),
                                "insert into steps"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      insert_trajectory, InsertSql("trajectories", std::string("run_id, ") + kTrajectoryColumns),
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
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_router_metric,
              "INSERT INTO router_metrics (run_id, step, name, value) VALUES (?, ?, ?, ?)",
              "insert into router_metrics"));
  LIBRA_RETURN_IF_ERROR(Prepare(insert_comparison,
                                "INSERT INTO comparisons (name, created_at) VALUES (?, ?)",
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
  LIBRA_RETURN_IF_ERROR(Prepare(select_comparisons,
                                "SELECT id, name, created_at FROM comparisons ORDER BY id",
                                "select from comparisons"));
  LIBRA_RETURN_IF_ERROR(Prepare(select_comparison,
                                "SELECT id, name, created_at FROM comparisons WHERE id = ?",
                                "select from comparisons"));
  LIBRA_RETURN_IF_ERROR(
      Prepare(insert_probe, InsertSql("probes", kProbeColumns), "insert into probes"));
  LIBRA_RETURN_IF_ERROR(Prepare(
      select_probes, std::string("SELECT id, ") + kProbeColumns + " FROM probes ORDER BY id",
      "select from probes"));
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
  Db::Options db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.busy_timeout_ms = options.busy_timeout_ms;
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(path, db_options));
  // Refuse foreign and newer files before the first write (the switch to WAL below).
  LIBRA_RETURN_IF_ERROR(CheckSchema(*db, migrations).status());
  // WAL lets reports read while a run writes. The mode is stored in the file; synchronous is
  // per connection (NORMAL is durable at every checkpoint and safe against corruption in WAL).
  LIBRA_RETURN_IF_ERROR(
      db->QueryText("PRAGMA journal_mode = WAL", "switch to write-ahead logging").status());
  LIBRA_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous = NORMAL", "set synchronous"));
  LIBRA_ASSIGN_OR_RETURN(const int version, ApplyMigrations(*db, migrations));

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
      run.comparison_id, run.throughput_bound));
  const int64_t id = db.LastInsertRowid();
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
      s.predicted_step_s, s.logprob_diff, s.clip_fraction));
  for (const TrajectoryRecord& t : batch.trajectories) {
    LIBRA_RETURN_IF_ERROR(impl_->insert_trajectory->Execute(
        run_id, t.id, t.prompt, t.sample, t.step, t.version, t.turns, t.tool_calls, t.prompt_tokens,
        t.generated_tokens, t.start_s, t.end_s, t.reward, t.truncated, t.instances, t.migrations));
  }
  for (const TurnRecord& t : batch.turns) {
    LIBRA_RETURN_IF_ERROR(impl_->insert_turn->Execute(
        run_id, t.trajectory, t.turn, t.instance, t.start_s, t.end_s, t.generated_tokens, t.end,
        t.tool, t.tool_status, t.tool_output_tokens, t.tool_latency_s));
  }
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

Result<int64_t> Store::CreateComparison(const std::string& name, const std::string& created_at) {
  Db& db = *impl_->db;
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(db, Transaction::Mode::kWrite));
  LIBRA_RETURN_IF_ERROR(impl_->insert_comparison->Execute(name, created_at));
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

Result<std::vector<ComparisonInfo>> Store::ListComparisons() {
  // One snapshot for the comparisons and their runs.
  LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                         Transaction::Begin(*impl_->db, Transaction::Mode::kRead));
  std::vector<ComparisonInfo> comparisons;
  LIBRA_RETURN_IF_ERROR(
      impl_->select_comparisons->ForEachRow([&comparisons](const Statement& statement) {
        RowReader row(statement);
        ComparisonInfo comparison;
        comparison.id = row.Int64();
        comparison.name = row.Text();
        comparison.created_at = row.Text();
        comparisons.push_back(std::move(comparison));
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
        RowReader row(statement);
        comparison.emplace();
        comparison->id = row.Int64();
        comparison->name = row.Text();
        comparison->created_at = row.Text();
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
