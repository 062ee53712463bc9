// Db, Statement, Transaction: a thin RAII layer over the SQLite C API, private to src/store.
//
// Db owns one connection (closed with sqlite3_close_v2), Statement one prepared statement
// (finalized on destruction), Transaction one BEGIN ... COMMIT that rolls back unless committed.
// Every SQLite result code is checked and turned into a Status that names the operation and the
// database file; "locked" and "not a database" get their own plain-language messages. Values are
// only ever bound to statements, never spliced into SQL text.
//
// This header does not include sqlite3.h (the handles are forward-declared), so the rest of
// libra, and its tests, never see the SQLite API. Nothing here is thread-safe: one connection
// belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace libra::store {

struct ConnectionCloser {
  void operator()(sqlite3* connection) const;
};
struct StatementFinalizer {
  void operator()(sqlite3_stmt* statement) const;
};

class Db;

/// One prepared statement: Bind, Step (repeated), Reset; or Execute / ForEachRow for the whole
/// cycle. Errors read "<name> on <path>: <sqlite message>".
class Statement {
 public:
  Statement(Db* db, std::string name, std::unique_ptr<sqlite3_stmt, StatementFinalizer> handle);
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;
  ~Statement() = default;

  /// What the statement does, for messages (e.g. "insert into steps").
  const std::string& name() const { return name_; }

  /// Binds `args` to the parameters 1, 2, ... in order. Each argument is a bool, an integer up to
  /// 64 bits (signed; convert uint64_t explicitly), a double (NaN is refused: SQLite would store
  /// NULL), a string, std::nullopt (NULL), or a std::optional of those (NULL when unset).
  template <typename... Args>
  Status Bind(const Args&... args) {
    return BindAll(1, /*copy=*/true, args...);
  }

  /// As Bind, to the parameters first, first + 1, ..., without copying strings: they must stay
  /// alive until the statement is reset (for multi-row statements stepped at once).
  template <typename... Args>
  Status BindFrom(int first, const Args&... args) {
    return BindAll(first, /*copy=*/false, args...);
  }

  /// Runs one step: true when a row is ready to be read, false when the statement is done.
  Result<bool> Step();
  /// Makes the statement ready to run again and clears its bindings. Never fails: an error of
  /// the last step was already returned by Step.
  void Reset();

  /// Binds `args`, runs the statement to completion (rows, if any, are ignored) and resets it.
  template <typename... Args>
  Status Execute(const Args&... args) {
    ResetOnExit reset(this);
    LIBRA_RETURN_IF_ERROR(BindFrom(1, args...));  // the arguments outlive the statement's run
    while (true) {
      LIBRA_ASSIGN_OR_RETURN(const bool row, Step());
      if (!row) return Status();
    }
  }

  /// Binds `args`, calls `on_row(*this)` (returning Status) for each row, then resets. Stops at
  /// the first error, of SQLite or of `on_row`.
  template <typename OnRow, typename... Args>
  Status ForEachRow(OnRow&& on_row, const Args&... args) {
    ResetOnExit reset(this);
    LIBRA_RETURN_IF_ERROR(BindFrom(1, args...));
    while (true) {
      LIBRA_ASSIGN_OR_RETURN(const bool row, Step());
      if (!row) return Status();
      LIBRA_RETURN_IF_ERROR(on_row(*this));
    }
  }

  // Columns of the current row, 0-based. REQUIRES: the last Step returned true.
  bool IsNull(int column) const;
  int64_t Int64(int column) const;
  double Double(int column) const;
  /// The column as text; "" for NULL.
  std::string Text(int column) const;

  // Low-level binding, 1-based.
  Status BindInt64(int index, int64_t value);
  Status BindDouble(int index, double value);
  /// `copy` false: `value` must stay alive until the statement is reset.
  Status BindText(int index, std::string_view value, bool copy = true);
  Status BindNull(int index);

 private:
  class ResetOnExit {
   public:
    explicit ResetOnExit(Statement* statement) : statement_(statement) {}
    ~ResetOnExit() { statement_->Reset(); }
    ResetOnExit(const ResetOnExit&) = delete;
    ResetOnExit& operator=(const ResetOnExit&) = delete;

   private:
    Statement* statement_;
  };

  template <typename... Args>
  Status BindAll(int first, [[maybe_unused]] bool copy, const Args&... args) {
    [[maybe_unused]] int index = first - 1;
    Status status;
    ((status.ok() ? (status = BindOne(++index, args, copy), 0) : 0), ...);
    return status;
  }

  template <typename T>
  Status BindOne(int index, const T& value, bool copy) {
    if constexpr (std::is_same_v<T, bool>) {
      return BindInt64(index, value ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      static_assert(std::is_signed_v<T> || sizeof(T) < sizeof(int64_t),
                    "convert uint64_t to int64_t explicitly (bit pattern) before binding");
      return BindInt64(index, static_cast<int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      return BindDouble(index, static_cast<double>(value));
    } else if constexpr (std::is_same_v<T, std::nullopt_t>) {
      return BindNull(index);
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      return BindText(index, std::string_view(value), copy);
    } else {
      // std::optional<U>: NULL when unset.
      if (!value.has_value()) return BindNull(index);
      return BindOne(index, *value, copy);
    }
  }

  Status BindError(int rc, int index) const;

  Db* db_;
  std::string name_;
  std::unique_ptr<sqlite3_stmt, StatementFinalizer> handle_;
};

/// Reads the columns of the current row left to right, so that reading mirrors the column list
/// of the SELECT.
class RowReader {
 public:
  explicit RowReader(const Statement& statement) : statement_(statement) {}

  int64_t Int64() { return statement_.Int64(next_++); }
  int Int() { return static_cast<int>(statement_.Int64(next_++)); }
  bool Bool() { return statement_.Int64(next_++) != 0; }
  double Double() { return statement_.Double(next_++); }
  std::string Text() { return statement_.Text(next_++); }
  std::optional<int64_t> OptionalInt64() {
    const int column = next_++;
    if (statement_.IsNull(column)) return std::nullopt;
    return statement_.Int64(column);
  }
  std::optional<int> OptionalInt() {
    const int column = next_++;
    if (statement_.IsNull(column)) return std::nullopt;
    return static_cast<int>(statement_.Int64(column));
  }
  std::optional<double> OptionalDouble() {
    const int column = next_++;
    if (statement_.IsNull(column)) return std::nullopt;
    return statement_.Double(column);
  }

 private:
  const Statement& statement_;
  int next_ = 0;
};

/// One connection to a database file.
class Db {
 public:
  struct Options {
    /// Create the file (and its parent folders) when missing; otherwise a missing file is
    /// kNotFound. Default: true.
    bool create_if_missing = true;
    /// How long a statement waits for another connection's lock before failing. Default: 5000.
    int busy_timeout_ms = 5000;
    /// Open for reading only (implies !create_if_missing): nothing is ever written, not even the
    /// WAL index. A WAL database in a folder this process cannot write is then opened as
    /// immutable (no other process can be writing it there either). Default: false.
    bool read_only = false;
  };

  /// Opens `path`, sets the busy timeout and foreign_keys=ON, and reads the schema once, so that
  /// a file that is not an SQLite database (or is corrupt) fails here, unchanged. Does not
  /// change the file: journal mode and schema are the caller's business.
  static Result<std::unique_ptr<Db>> Open(const std::string& path, const Options& options);

  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  const std::string& path() const { return path_; }
  int busy_timeout_ms() const { return busy_timeout_ms_; }
  sqlite3* handle() const { return connection_.get(); }

  /// Runs one or more statements without parameters (DDL, pragmas, BEGIN). `what` names the
  /// operation in errors.
  Status Exec(const std::string& sql, const std::string& what);
  /// Runs a statement that returns one value (e.g. "PRAGMA user_version") and returns it.
  Result<int64_t> QueryInt64(const std::string& sql, const std::string& what);
  Result<std::string> QueryText(const std::string& sql, const std::string& what);

  /// Compiles one statement. `persistent` hints SQLite that it will be reused many times
  /// (SQLITE_PREPARE_PERSISTENT): use it for statements prepared once per store.
  Result<Statement> Prepare(const std::string& sql, const std::string& name, bool persistent);

  /// The rowid of the last successful INSERT on this connection.
  int64_t LastInsertRowid() const;
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  /// Whether the connection is outside an explicit transaction.
  bool InAutocommit() const;

  /// The Status for a failed SQLite call with result code `rc` during `what`: kStore with a
  /// message naming the file, and saying plainly when the file is locked by another process or
  /// is not a database.
  Status Error(int rc, const std::string& what) const;

 private:
  Db(std::string path, int busy_timeout_ms, std::unique_ptr<sqlite3, ConnectionCloser> connection);
  /// sqlite3_open_v2(name, flags) for the database at `path`, with the busy timeout set.
  static Result<std::unique_ptr<Db>> Connect(const std::string& path, const std::string& name,
                                             int flags, const Options& options);

  std::string path_;
  int busy_timeout_ms_;
  std::unique_ptr<sqlite3, ConnectionCloser> connection_;
};

/// A transaction: BEGIN on Begin, COMMIT on Commit, ROLLBACK on destruction unless committed.
class Transaction {
 public:
  enum class Mode {
    /// BEGIN IMMEDIATE: takes the write lock at once, waiting up to the busy timeout, so a
    /// writer never fails half way through on a lock upgrade. For every write.
    kWrite,
    /// BEGIN (deferred): one consistent snapshot for several reads.
    kRead,
  };

  static Result<Transaction> Begin(Db& db, Mode mode);

  Transaction(Transaction&& other) noexcept
      : db_(std::exchange(other.db_, nullptr)), done_(other.done_) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  /// Commits. On failure the transaction is still open and rolls back on destruction.
  Status Commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}

  Db* db_;
  bool done_ = false;
};

}  // namespace libra::store
