#include "store/db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "common/strings.h"

namespace libra::store {

void ConnectionCloser::operator()(sqlite3* connection) const { sqlite3_close_v2(connection); }

void StatementFinalizer::operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }

// --- Statement -----------------------------------------------------------------------------------

Statement::Statement(Db* db, std::string name,
                     std::unique_ptr<sqlite3_stmt, StatementFinalizer> handle)
    : db_(db), name_(std::move(name)), handle_(std::move(handle)) {}

Status Statement::BindError(int rc, int index) const {
  return db_->Error(rc, StrFormat("%s (parameter %d)", name_.c_str(), index));
}

Status Statement::BindInt64(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(handle_.get(), index, value);
  return rc == SQLITE_OK ? Status() : BindError(rc, index);
}

Status Statement::BindDouble(int index, double value) {
  if (std::isnan(value)) {
    // SQLite stores NaN as NULL, which would not read back as the value written.
    return Status::Store(name_ + " on " + db_->path(),
                         StrFormat("parameter %d is NaN, which SQLite cannot store", index));
  }
  const int rc = sqlite3_bind_double(handle_.get(), index, value);
  return rc == SQLITE_OK ? Status() : BindError(rc, index);
}

Status Statement::BindText(int index, std::string_view value, bool copy) {
  const int rc = sqlite3_bind_text64(handle_.get(), index, value.data(), value.size(),
                                     copy ? SQLITE_TRANSIENT : SQLITE_STATIC, SQLITE_UTF8);
  return rc == SQLITE_OK ? Status() : BindError(rc, index);
}

Status Statement::BindNull(int index) {
  const int rc = sqlite3_bind_null(handle_.get(), index);
  return rc == SQLITE_OK ? Status() : BindError(rc, index);
}

Result<bool> Statement::Step() {
  const int rc = sqlite3_step(handle_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, name_);
}

void Statement::Reset() {
  // sqlite3_reset repeats the error of the last step, which Step already returned.
  sqlite3_reset(handle_.get());
  sqlite3_clear_bindings(handle_.get());
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(handle_.get(), column) == SQLITE_NULL;
}

int64_t Statement::Int64(int column) const { return sqlite3_column_int64(handle_.get(), column); }

double Statement::Double(int column) const { return sqlite3_column_double(handle_.get(), column); }

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(handle_.get(), column);
  if (text == nullptr) return "";
  const int bytes = sqlite3_column_bytes(handle_.get(), column);
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(bytes));
}

// --- Db ------------------------------------------------------------------------------------------

Db::Db(std::string path, int busy_timeout_ms, std::unique_ptr<sqlite3, ConnectionCloser> connection)
    : path_(std::move(path)),
      busy_timeout_ms_(busy_timeout_ms),
      connection_(std::move(connection)) {}

Db::~Db() = default;

Result<std::unique_ptr<Db>> Db::Open(const std::string& path, const Options& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool create = options.create_if_missing && !options.read_only;
  const bool exists = fs::exists(path, ec);
  if (!exists && !create) {
    return Status::NotFound(path +
                            ": no results database here (record a run first, or pass another "
                            "--db)");
  }
  if (!exists) {
    // One folder is made (results/ of the default path), never a tree: a typo in a path is an
    // error, not a new directory tree somewhere.
    const fs::path parent = fs::path(path).parent_path();
    const fs::path grandparent = parent.parent_path();
    if (!parent.empty() && !fs::exists(parent, ec)) {
      if (!grandparent.empty() && !fs::is_directory(grandparent, ec)) {
        return Status::Store(path, "the folder " + grandparent.string() +
                                       " does not exist (libra makes the database's own folder, "
                                       "not the folders above it)");
      }
      fs::create_directory(parent, ec);
      if (ec) {
        return Status::Store(path,
                             "cannot create the folder " + parent.string() + ": " + ec.message());
      }
    }
  }

  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (create) flags |= SQLITE_OPEN_CREATE;
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Connect(path, path, flags, options));
  // Reading the schema reads the file header: a file that is not a database fails here, before
  // anything is written to it.
  Status readable =
      db->QueryInt64("SELECT count(*) FROM sqlite_master", "read the schema").status();
  const std::string folder =
      fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
  if (!readable.ok() && options.read_only && ::access(folder.c_str(), W_OK) != 0) {
    // A WAL database needs its -shm index, which a read-only connection cannot create in a
    // folder it cannot write; nobody else can write the database there either.
    std::string uri = "file:";
    for (const unsigned char c : fs::absolute(path, ec).string()) {
      uri += std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_'
                 ? std::string(1, static_cast<char>(c))
                 : StrFormat("%%%02X", c);
    }
    LIBRA_ASSIGN_OR_RETURN(
        db, Connect(path, uri + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, options));
    readable = db->QueryInt64("SELECT count(*) FROM sqlite_master", "read the schema").status();
  }
  LIBRA_RETURN_IF_ERROR(readable);
  LIBRA_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys = ON", "enable foreign keys"));
  return db;
}

Result<std::unique_ptr<Db>> Db::Connect(const std::string& path, const std::string& name, int flags,
                                        const Options& options) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(name.c_str(), &raw, flags, nullptr);
  // Even a failed open may allocate a handle, which must be closed.
  std::unique_ptr<sqlite3, ConnectionCloser> connection(raw);
  if (rc != SQLITE_OK) {
    const std::string message = connection ? sqlite3_errmsg(connection.get()) : sqlite3_errstr(rc);
    return Status::Store(path, "cannot open the database file (" + message + ")");
  }
  sqlite3_extended_result_codes(connection.get(), 1);
  if (const int busy_rc = sqlite3_busy_timeout(connection.get(), options.busy_timeout_ms);
      busy_rc != SQLITE_OK) {
    return Status::Store("set busy timeout on " + path, sqlite3_errmsg(connection.get()));
  }
  return std::unique_ptr<Db>(new Db(path, options.busy_timeout_ms, std::move(connection)));
}

Status Db::Exec(const std::string& sql, const std::string& what) {
  const int rc = sqlite3_exec(connection_.get(), sql.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status() : Error(rc, what);
}

Result<int64_t> Db::QueryInt64(const std::string& sql, const std::string& what) {
  LIBRA_ASSIGN_OR_RETURN(Statement statement, Prepare(sql, what, /*persistent=*/false));
  LIBRA_ASSIGN_OR_RETURN(const bool row, statement.Step());
  if (!row) return Status::Store(what + " on " + path_, "no row returned");
  return statement.Int64(0);
}

Result<std::string> Db::QueryText(const std::string& sql, const std::string& what) {
  LIBRA_ASSIGN_OR_RETURN(Statement statement, Prepare(sql, what, /*persistent=*/false));
  LIBRA_ASSIGN_OR_RETURN(const bool row, statement.Step());
  if (!row) return Status::Store(what + " on " + path_, "no row returned");
  return statement.Text(0);
}

Result<Statement> Db::Prepare(const std::string& sql, const std::string& name, bool persistent) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc =
      sqlite3_prepare_v3(connection_.get(), sql.c_str(), static_cast<int>(sql.size() + 1),
                         persistent ? SQLITE_PREPARE_PERSISTENT : 0, &raw, &tail);
  std::unique_ptr<sqlite3_stmt, StatementFinalizer> handle(raw);
  if (rc != SQLITE_OK) return Error(rc, "prepare " + name);
  if (handle == nullptr) return Status::Internal("prepare " + name + ": empty SQL");
  for (; tail != nullptr && *tail != '\0'; ++tail) {
    if (std::isspace(static_cast<unsigned char>(*tail)) == 0 && *tail != ';') {
      return Status::Internal("prepare " + name + ": more than one statement in \"" + sql + "\"");
    }
  }
  return Statement(this, name, std::move(handle));
}

int64_t Db::LastInsertRowid() const { return sqlite3_last_insert_rowid(connection_.get()); }

int64_t Db::Changes() const { return sqlite3_changes64(connection_.get()); }

bool Db::InAutocommit() const { return sqlite3_get_autocommit(connection_.get()) != 0; }

Status Db::Error(int rc, const std::string& what) const {
  const std::string sqlite_message = sqlite3_errmsg(connection_.get());
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Store(
          what + " on " + path_,
          StrFormat("the database is locked by another process (gave up after waiting %d ms); "
                    "wait for the other libra to finish, or use another --db",
                    busy_timeout_ms_));
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return Status::Store(path_,
                           "not a libra results database: the file is not an SQLite "
                           "database, or it is corrupt (" +
                               sqlite_message + "); use another --db");
    default:
      return Status::Store(what + " on " + path_, sqlite_message);
  }
}

// --- Transaction ---------------------------------------------------------------------------------

Result<Transaction> Transaction::Begin(Db& db, Mode mode) {
  if (mode == Mode::kWrite) {
    LIBRA_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE", "begin a write transaction"));
  } else {
    LIBRA_RETURN_IF_ERROR(db.Exec("BEGIN", "begin a read transaction"));
  }
  return Transaction(&db);
}

Transaction::~Transaction() {
  // SQLite rolls some failed transactions back by itself; only roll back one still open.
  if (db_ != nullptr && !done_ && !db_->InAutocommit()) {
    // A failed ROLLBACK leaves nothing to do: SQLite then rolls back when the connection closes.
    static_cast<void>(db_->Exec("ROLLBACK", "roll back"));
  }
}

Status Transaction::Commit() {
  LIBRA_CHECK(db_ != nullptr && !done_) << "Commit on a finished transaction";
  LIBRA_RETURN_IF_ERROR(db_->Exec("COMMIT", "commit"));
  done_ = true;
  return Status();
}

}  // namespace libra::store
