// Store: the results database (SQLite). The only module that includes sqlite3.h.
//
// One file holds every run, comparison, step, trajectory, planner decision and event, and the GPU
// probes of `libra probe`. It is opened in WAL mode so that reports can read while a run writes.
// The schema version lives in PRAGMA user_version and is moved forward by an ordered list of
// migrations; a database from a newer libra is refused, and a corrupt or locked file gives a clear
// error and is never overwritten. Every write of a step happens in one transaction, so a crash
// never leaves half a step behind.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "records/records.h"

namespace libra::store {

/// One schema change: applied in its own transaction, then user_version = version.
struct Migration {
  int version = 0;
  std::string description;
  std::string sql;
};

/// The migrations of this libra, in order (version 1, 2, ...).
const std::vector<Migration>& SchemaMigrations();

class Store {
 public:
  struct Options {
    /// Create the file (and its parent folders) when missing. When false, a missing file is
    /// kNotFound. Default: true.
    bool create_if_missing = true;
    /// How long to wait for another writer's lock before failing with kStore. Default: 5000.
    int busy_timeout_ms = 5000;
    /// Only read (reports): nothing is written to a file already at the latest schema version,
    /// which may then lie in a folder this process cannot write. An older file is migrated
    /// first, as by a writer. Implies !create_if_missing. Default: false.
    bool read_only = false;
  };

  /// Opens (or creates) the database at `path` and migrates it to the latest schema.
  /// Errors (kStore unless noted): not a database / corrupt, damaged (PRAGMA integrity_check
  /// fails: its first finding is in the message, and nothing is written), locked by another
  /// process, schema newer than this libra; kNotFound when missing and !create_if_missing.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const Options& options);
  static Result<std::unique_ptr<Store>> Open(const std::string& path) {
    return Open(path, Options());
  }
  /// As Open, with a given migration list (tests use it to stage old schema versions).
  static Result<std::unique_ptr<Store>> OpenWithMigrations(
      const std::string& path, const Options& options, const std::vector<Migration>& migrations);

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// The schema version of the open database (user_version).
  int schema_version() const;
  const std::string& path() const;

  // --- Writing ---------------------------------------------------------------------------------

  /// Inserts a run (its id and folder are ignored: the store assigns both) and returns its new id.
  Result<int64_t> BeginRun(const records::RunInfo& run);
  /// Records one step with its trajectories, turns, events and decisions in one transaction.
  Status RecordStep(int64_t run_id, const records::StepBatch& batch);
  /// Records a measured evaluation score of policy `version` (measured after its step was
  /// recorded): version 0 is the run's initial score (records::RunInfo::eval_initial), version v >
  /// 0 the score of step v - 1. kNotFound when that step is not recorded.
  Status RecordEval(int64_t run_id, int version, double score);
  /// Records decisions or events outside a step (for example the initial plan).
  Status RecordDecisions(int64_t run_id, const std::vector<records::DecisionRecord>& decisions);
  /// Sets the final status (records::kRunOk, records::kRunFailed, records::kRunInterrupted), error
  /// text and end time; records::kRunRunning (with no error and no end time) reopens a run that is
  /// being resumed.
  Status FinishRun(int64_t run_id, const std::string& status, const std::string& error,
                   const std::string& ended_at);
  /// Marks a run that is being resumed `running` again (no error, no end time), recorded by
  /// `owner`; `was` is the run as the caller read it. kInvalidArgument when its status or owner
  /// changed since (two libras resuming one run: only the first gets it); kNotFound.
  Status ReopenRun(const records::RunInfo& was, const records::RunOwner& owner);
  /// The run's folder: its `folder` under the database's folder (or "runs/<id>" there for a run
  /// recorded before schema version 8). Only a path: nothing is created.
  std::string RunFolder(const records::RunInfo& run) const;
  /// Creates a comparison (its id and run_ids are ignored) and returns its id.
  Result<int64_t> CreateComparison(const records::ComparisonInfo& comparison);
  /// A comparison with only a name and a creation time.
  Result<int64_t> CreateComparison(const std::string& name, const std::string& created_at);
  /// Adds a run to a comparison (appended after the runs already in it).
  Status AddToComparison(int64_t comparison_id, int64_t run_id);
  /// Records a tuning with its trials (ids ignored) in one transaction; returns its new id.
  Result<int64_t> RecordTuning(const records::TuningRecord& tuning);
  /// Records probes (their ids are ignored) in one transaction; returns their new ids in order.
  Result<std::vector<int64_t>> RecordProbes(const std::vector<records::ProbeRecord>& probes);

  // --- Reading ---------------------------------------------------------------------------------

  /// All runs, oldest first.
  Result<std::vector<records::RunInfo>> ListRuns();
  /// kNotFound for an unknown id.
  Result<records::RunInfo> GetRun(int64_t run_id);
  /// How many steps each run has recorded, by run id (runs without steps are absent).
  Result<std::map<int64_t, int>> StepCounts();
  /// The steps of a run, by step.
  Result<std::vector<records::StepRecord>> Steps(int64_t run_id);
  /// The trajectories of a run, by id.
  Result<std::vector<records::TrajectoryRecord>> Trajectories(int64_t run_id);
  /// The turns of a run, by trajectory and turn.
  Result<std::vector<records::TurnRecord>> Turns(int64_t run_id);
  /// The router counters of a run: (step, name) -> value, by step and name.
  Result<std::vector<std::tuple<int, std::string, double>>> RouterMetrics(int64_t run_id);
  /// The decisions of a run, by seq.
  Result<std::vector<records::DecisionRecord>> Decisions(int64_t run_id);
  /// The events of a run, by seq.
  Result<std::vector<records::EventRecord>> Events(int64_t run_id);
  /// Every probe, oldest first (by id).
  Result<std::vector<records::ProbeRecord>> Probes();
  /// Every tuning with its trials, oldest first.
  Result<std::vector<records::TuningRecord>> Tunings();
  /// The newest tuning of `system` recorded under `key`; nullopt when there is none.
  Result<std::optional<records::TuningRecord>> LatestTuning(const std::string& key,
                                                            const std::string& system);
  /// All comparisons, oldest first.
  Result<std::vector<records::ComparisonInfo>> ListComparisons();
  /// kNotFound for an unknown id.
  Result<records::ComparisonInfo> GetComparison(int64_t comparison_id);

 private:
  class Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace libra::store
