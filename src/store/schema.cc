#include "store/schema.h"

#include <algorithm>
#include <string>

#include "common/strings.h"

namespace libra::store {
namespace {

// Version 1: every table of the first libra. Column names are the field names of the records in
// store/records.h, so that users can query them by the names they read in the code and the docs
// (docs/schema.md). Times are seconds (REAL) since the run's start; booleans are 0 or 1.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE comparisons (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  name       TEXT    NOT NULL,
  created_at TEXT    NOT NULL
);

CREATE TABLE runs (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  name          TEXT    NOT NULL,
  system        TEXT    NOT NULL,
  router        TEXT    NOT NULL,
  planner       TEXT    NOT NULL,
  backend       TEXT    NOT NULL,
  seed          INTEGER NOT NULL,  -- the uint64 seed's bit pattern as a signed 64-bit integer
  steps_planned INTEGER NOT NULL,
  gpus          INTEGER NOT NULL,
  recipe_source TEXT    NOT NULL,
  recipe_toml   TEXT    NOT NULL,
  git_revision  TEXT    NOT NULL,
  libra_version TEXT    NOT NULL,
  started_at    TEXT    NOT NULL,
  ended_at      TEXT,              -- NULL while running
  status        TEXT    NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'ok', 'failed', 'interrupted')),
  error         TEXT    NOT NULL DEFAULT '',
  comparison_id INTEGER REFERENCES comparisons (id) ON DELETE SET NULL
);
CREATE INDEX idx_runs_comparison ON runs (comparison_id);

CREATE TABLE comparison_runs (
  comparison_id INTEGER NOT NULL REFERENCES comparisons (id) ON DELETE CASCADE,
  run_id        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  position      INTEGER NOT NULL,
  PRIMARY KEY (comparison_id, position),
  UNIQUE (comparison_id, run_id)
);
CREATE INDEX idx_comparison_runs_run ON comparison_runs (run_id);

CREATE TABLE steps (
  run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step             INTEGER NOT NULL,
  start_s          REAL    NOT NULL,
  end_s            REAL    NOT NULL,
  rollout_s        REAL    NOT NULL,
  train_s          REAL    NOT NULL,
  sync_s           REAL    NOT NULL,
  wait_s           REAL    NOT NULL,
  trajectories     INTEGER NOT NULL,
  turns            INTEGER NOT NULL,
  tool_calls       INTEGER NOT NULL,
  prompt_tokens    INTEGER NOT NULL,
  generated_tokens INTEGER NOT NULL,
  reward_mean      REAL    NOT NULL,
  policy_version   INTEGER NOT NULL,
  max_lag          INTEGER NOT NULL,
  rollout_gpus     INTEGER NOT NULL,
  train_gpus       INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE trajectories (
  run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  id               INTEGER NOT NULL,
  prompt           INTEGER NOT NULL,
  sample           INTEGER NOT NULL,
  step             INTEGER NOT NULL,
  version          INTEGER NOT NULL,
  turns            INTEGER NOT NULL,
  tool_calls       INTEGER NOT NULL,
  prompt_tokens    INTEGER NOT NULL,
  generated_tokens INTEGER NOT NULL,
  start_s          REAL    NOT NULL,
  end_s            REAL    NOT NULL,
  reward           REAL    NOT NULL,
  truncated        INTEGER NOT NULL CHECK (truncated IN (0, 1)),
  instances        TEXT    NOT NULL,
  migrations       INTEGER NOT NULL,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE INDEX idx_trajectories_run_step ON trajectories (run_id, step);

CREATE TABLE decisions (
  run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  seq              INTEGER NOT NULL,
  at_s             REAL    NOT NULL,
  step             INTEGER NOT NULL,
  planner          TEXT    NOT NULL,
  reason           TEXT    NOT NULL,
  train_gpus       INTEGER NOT NULL,
  rollout_gpus     INTEGER NOT NULL,
  layout           TEXT    NOT NULL,
  predicted_step_s REAL,             -- NULL when the planner made no prediction
  applied          INTEGER NOT NULL CHECK (applied IN (0, 1)),
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX idx_decisions_run_step ON decisions (run_id, step);

CREATE TABLE events (
  run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  start_s    REAL    NOT NULL,
  end_s      REAL    NOT NULL,
  resource   TEXT    NOT NULL,
  trajectory INTEGER,                -- NULL for events of no trajectory (train, sync)
  step       INTEGER NOT NULL,
  detail     TEXT    NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX idx_events_run_step ON events (run_id, step);
)sql";

// Version 2: the turns of every trajectory, so that a run's trajectories can be exported as a
// trace and replayed (docs/traces.md).
constexpr char kSchemaV2[] = R"sql(
CREATE TABLE turns (
  run_id             INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  trajectory         INTEGER NOT NULL,
  turn               INTEGER NOT NULL,
  instance           INTEGER NOT NULL,
  start_s            REAL    NOT NULL,
  end_s              REAL    NOT NULL,
  generated_tokens   INTEGER NOT NULL,
  "end"              TEXT    NOT NULL,
  tool               TEXT    NOT NULL,
  tool_status        TEXT    NOT NULL,
  tool_output_tokens INTEGER NOT NULL,
  tool_latency_s     REAL    NOT NULL,
  PRIMARY KEY (run_id, trajectory, turn)
) WITHOUT ROWID;
)sql";

// Version 3: per-step GPU utilisation and idle GPU-seconds (NULL when the backend cannot tell).
constexpr char kSchemaV3[] = R"sql(
ALTER TABLE steps ADD COLUMN gpu_util REAL;
ALTER TABLE steps ADD COLUMN idle_gpu_s REAL;
)sql";

// Version 4: the router's counters after every step (routes per bucket, moves, tree size, ...).
constexpr char kSchemaV4[] = R"sql(
CREATE TABLE router_metrics (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  name   TEXT    NOT NULL,
  value  REAL    NOT NULL,
  PRIMARY KEY (run_id, step, name)
) WITHOUT ROWID;
)sql";

// Version 5: the planner's predicted step time next to the measured one, and what triggered a
// planner decision with its predicted times (current plan, gain over the remaining steps net of
// the transition, the transition itself).
constexpr char kSchemaV5[] = R"sql(
ALTER TABLE steps ADD COLUMN predicted_step_s REAL;
ALTER TABLE decisions ADD COLUMN "trigger" TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN current_step_s REAL;
ALTER TABLE decisions ADD COLUMN gain_s REAL;
ALTER TABLE decisions ADD COLUMN transition_s REAL;
)sql";

// Version 6: the perfect-balance throughput bound of a run's cluster, model and workload
// (trajectories/s; NULL when the backend has none), so reports show the fraction reached.
constexpr char kSchemaV6[] = R"sql(
ALTER TABLE runs ADD COLUMN throughput_bound REAL;
)sql";

// Version 7: GPU measurements from `libra probe` (docs/calibration.md), one row per probe; a
// session is the rows of one host and one recorded_at.
constexpr char kSchemaV7[] = R"sql(
CREATE TABLE probes (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  host          TEXT    NOT NULL,
  gpu           INTEGER NOT NULL,  -- CUDA device index; -1 for a node-wide probe (NCCL)
  kind          TEXT    NOT NULL,
  value         REAL    NOT NULL,
  unit          TEXT    NOT NULL,
  detail        TEXT    NOT NULL,  -- JSON object: how it was measured
  recorded_at   TEXT    NOT NULL,
  libra_version TEXT    NOT NULL
);
CREATE INDEX idx_probes_host_recorded ON probes (host, recorded_at);
)sql";

// Version 8: each run's own folder (unique per run and database, so that two databases in one
// folder never share run files), the libra process recording it (so that a run left `running` by
// a libra that died can be resumed), and what a comparison was asked to run (so that an
// interrupted one can be continued).
constexpr char kSchemaV8[] = R"sql(
ALTER TABLE runs ADD COLUMN folder      TEXT    NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_host  TEXT    NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_pid   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN owner_start TEXT    NOT NULL DEFAULT '';
ALTER TABLE comparisons ADD COLUMN systems       TEXT    NOT NULL DEFAULT '[]';
ALTER TABLE comparisons ADD COLUMN seeds         INTEGER NOT NULL DEFAULT 1;
ALTER TABLE comparisons ADD COLUMN reward_target REAL;
ALTER TABLE comparisons ADD COLUMN recipe_source TEXT    NOT NULL DEFAULT '';
ALTER TABLE comparisons ADD COLUMN recipe_toml   TEXT    NOT NULL DEFAULT '';
)sql";

// Version 9: tuned peers (`libra tune`, docs/results.md "Fair peers"): each tuning with what it
// tried, and per run the configuration it ran, the tuning it came from and the sensitivity
// scenario it belongs to.
constexpr char kSchemaV9[] = R"sql(
CREATE TABLE tunings (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  key           TEXT    NOT NULL,  -- recipe, cluster, model, system and budget, hashed
  recipe        TEXT    NOT NULL,
  system        TEXT    NOT NULL,
  created_at    TEXT    NOT NULL,
  budget_runs   INTEGER NOT NULL,
  steps         INTEGER NOT NULL,
  seeds         TEXT    NOT NULL,  -- the tuning seeds, comma separated
  objective     TEXT    NOT NULL,  -- what the search maximised ("traj/s")
  winner        TEXT    NOT NULL,  -- JSON object: knob -> value
  score         REAL    NOT NULL,  -- the winner's mean objective over winner_runs seeds
  winner_runs   INTEGER NOT NULL,
  libra_version TEXT    NOT NULL
);
CREATE INDEX idx_tunings_key ON tunings (key, system);
CREATE TABLE tuning_trials (
  tuning_id     INTEGER NOT NULL REFERENCES tunings (id) ON DELETE CASCADE,
  position      INTEGER NOT NULL,
  configuration TEXT    NOT NULL,  -- JSON object: knob -> value
  seed          INTEGER,           -- NULL for a configuration found infeasible without a run
  score         REAL,
  status        TEXT    NOT NULL,  -- ok, failed, infeasible
  error         TEXT    NOT NULL,
  PRIMARY KEY (tuning_id, position)
);
ALTER TABLE runs ADD COLUMN configuration TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN tuning_id INTEGER REFERENCES tunings (id);
ALTER TABLE runs ADD COLUMN scenario TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN staleness INTEGER;
ALTER TABLE steps ADD COLUMN eval_score REAL;
ALTER TABLE runs ADD COLUMN eval_initial REAL;
ALTER TABLE comparisons ADD COLUMN tuned       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comparisons ADD COLUMN sensitivity INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 10: what makes a run repeatable: each run's fully resolved recipe (every default filled
// in, its own system as [system]; NULL for runs recorded before).
constexpr char kSchemaV10[] = R"sql(
ALTER TABLE runs ADD COLUMN resolved_recipe TEXT;
)sql";

// Version 11: per train step, how far the trainer's log-probabilities of the trained tokens are
// from the engines' (cluster runs; NULL elsewhere).
constexpr char kSchemaV11[] = R"sql(
ALTER TABLE steps ADD COLUMN logprob_diff REAL;
ALTER TABLE steps ADD COLUMN clip_fraction REAL;
)sql";

Result<int> UserVersion(Db& db) {
  LIBRA_ASSIGN_OR_RETURN(const int64_t version,
                         db.QueryInt64("PRAGMA user_version", "read the schema version"));
  return static_cast<int>(version);
}

}  // namespace

const std::vector<Migration>& SchemaMigrations() {
  static const std::vector<Migration>* const migrations = new std::vector<Migration>{
      {1, "runs, steps, trajectories, decisions, events, comparisons", kSchemaV1},
      {2, "turns", kSchemaV2},
      {3, "steps.gpu_util, steps.idle_gpu_s", kSchemaV3},
      {4, "router_metrics", kSchemaV4},
      {5, "steps.predicted_step_s, decisions.trigger/current_step_s/gain_s/transition_s",
       kSchemaV5},
      {6, "runs.throughput_bound", kSchemaV6},
      {7, "probes", kSchemaV7},
      {8, "runs.folder, runs.owner_*, comparisons.systems/seeds/reward_target/recipe_*", kSchemaV8},
      {9,
       "tunings, tuning_trials, runs.configuration/tuning_id/scenario/staleness, steps.eval_score, "
       "runs.eval_initial, comparisons.tuned/sensitivity",
       kSchemaV9},
      {10, "runs.resolved_recipe", kSchemaV10},
      {11, "steps.logprob_diff, steps.clip_fraction", kSchemaV11},
  };
  return *migrations;
}

Status ValidateMigrations(const std::vector<Migration>& migrations) {
  if (migrations.empty()) return Status::Internal("the list of schema migrations is empty");
  for (size_t i = 0; i < migrations.size(); ++i) {
    const int expected = static_cast<int>(i) + 1;
    if (migrations[i].version != expected) {
      return Status::Internal(StrFormat(
          "schema migration %zu (\"%s\") has version %d, expected %d: versions must be 1, 2, 3, "
          "... in order",
          i, migrations[i].description.c_str(), migrations[i].version, expected));
    }
  }
  return Status();
}

Result<int> CheckSchema(Db& db, const std::vector<Migration>& migrations) {
  LIBRA_ASSIGN_OR_RETURN(const int64_t application_id,
                         db.QueryInt64("PRAGMA application_id", "read the application id"));
  LIBRA_ASSIGN_OR_RETURN(const int version, UserVersion(db));

  if (application_id != kApplicationId) {
    // Not stamped by libra. Only an empty database (a new file) may become one.
    std::vector<std::string> names;
    LIBRA_ASSIGN_OR_RETURN(
        Statement list,
        db.Prepare("SELECT type || ' ' || name FROM sqlite_master "
                   "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name",
                   "list the schema", /*persistent=*/false));
    LIBRA_RETURN_IF_ERROR(list.ForEachRow([&names](const Statement& row) {
      names.push_back(row.Text(0));
      return Status();
    }));
    if (application_id != 0 || version != 0 || !names.empty()) {
      std::string holds;
      if (application_id != 0) {
        holds = StrFormat("application_id 0x%08llx",
                          static_cast<unsigned long long>(static_cast<uint32_t>(application_id)));
      } else if (names.empty()) {
        holds = StrFormat("user_version %d but no tables", version);
      } else {
        constexpr size_t kShown = 5;
        std::vector<std::string> shown(names.begin(),
                                       names.begin() + std::min(names.size(), kShown));
        holds = StrJoin(shown, ", ");
        if (names.size() > kShown) holds += StrFormat(", and %zu more", names.size() - kShown);
      }
      return Status::Store(db.path(), "an SQLite database, but not a libra results database (" +
                                          holds + "); libra leaves it unchanged, use another --db");
    }
  }

  const int newest = migrations.empty() ? 0 : migrations.back().version;
  if (version > newest) {
    return Status::Store(db.path(),
                         StrFormat("schema version %d is newer than this libra supports (%d); use "
                                   "a newer libra or another --db",
                                   version, newest));
  }
  return version;
}

Result<int> ApplyMigrations(Db& db, const std::vector<Migration>& migrations) {
  LIBRA_RETURN_IF_ERROR(ValidateMigrations(migrations));
  LIBRA_ASSIGN_OR_RETURN(int version, UserVersion(db));
  for (const Migration& migration : migrations) {
    if (migration.version <= version) continue;
    const std::string what =
        StrFormat("schema migration %d (%s)", migration.version, migration.description.c_str());
    LIBRA_ASSIGN_OR_RETURN(Transaction transaction,
                           Transaction::Begin(db, Transaction::Mode::kWrite));
    // Another process may have migrated the file between our read and our write lock.
    LIBRA_ASSIGN_OR_RETURN(version, UserVersion(db));
    if (migration.version <= version) continue;
    LIBRA_RETURN_IF_ERROR(db.Exec(migration.sql, what));
    // PRAGMAs take no parameters; both values are integers from this file, not user input.
    LIBRA_RETURN_IF_ERROR(db.Exec(StrFormat("PRAGMA user_version = %d; PRAGMA application_id = %d",
                                            migration.version, kApplicationId),
                                  what + ": set the schema version"));
    LIBRA_RETURN_IF_ERROR(transaction.Commit());
    version = migration.version;
  }
  return version;
}

}  // namespace libra::store
