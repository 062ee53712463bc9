#include "store/db.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::store {
namespace {

using ::libra::test::ReadFile;
using ::libra::test::ScopedTempDir;
using ::libra::test::WriteFile;

std::unique_ptr<Db> OpenOrDie(const std::string& path, int busy_timeout_ms = 5000) {
  Db::Options options;
  options.busy_timeout_ms = busy_timeout_ms;
  auto db = Db::Open(path, options);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

int64_t Count(Db& db, const std::string& table) {
  auto count = db.QueryInt64("SELECT count(*) FROM " + table, "count");
  EXPECT_TRUE(count.ok()) << count.status().ToString();
  return count.ok() ? *count : -1;
}

TEST(DbTest, CreatesTheFileAndItsFolder) {
  // A path in a folder that does not exist yet (results/ by default) is created when
  // create_if_missing is set.
  ScopedTempDir dir;
  const std::string path = dir.File("a/results.db");
  auto db = Db::Open(path, Db::Options());
  ASSERT_OK(db);
  EXPECT_EQ((*db)->path(), path);
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(DbTest, NeverCreatesAFolderTree) {
  // A mistyped path two folders deep is an error naming the missing folder; nothing is created.
  ScopedTempDir dir;
  const std::string path = dir.File("typo/b/results.db");
  auto db = Db::Open(path, Db::Options());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().message(), path + ": the folder " + dir.File("typo") +
                                       " does not exist (libra makes the database's own folder, "
                                       "not the folders above it)");
  EXPECT_FALSE(std::filesystem::exists(dir.File("typo")));
}

TEST(DbTest, MissingFileWithoutCreateIsNotFound) {
  // Without create_if_missing a missing file is kNotFound, and nothing is created.
  ScopedTempDir dir;
  const std::string path = dir.File("missing/results.db");
  Db::Options options;
  options.create_if_missing = false;
  auto db = Db::Open(path, options);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kNotFound);
  EXPECT_NE(db.status().message().find(path + ": no results database here"), std::string::npos)
      << db.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir.File("missing")));
}

TEST(DbTest, GarbageFileIsNotADatabaseAndStaysUnchanged) {
  // Opening a file that is not SQLite fails at once with kStore and does not touch the file.
  ScopedTempDir dir;
  const std::string path = dir.File("garbage.db");
  const std::string garbage(8192, 'x');
  WriteFile(path, garbage);
  auto db = Db::Open(path, Db::Options());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kStore);
  EXPECT_NE(db.status().message().find(path + ": not a libra results database"), std::string::npos)
      << db.status().message();
  EXPECT_EQ(ReadFile(path), garbage);
}

TEST(DbTest, FolderInsteadOfFileCannotBeOpened) {
  // A path that is a folder gives kStore naming the path.
  ScopedTempDir dir;
  auto db = Db::Open(dir.path().string(), Db::Options());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kStore);
  EXPECT_NE(db.status().message().find(dir.path().string()), std::string::npos);
}

TEST(DbTest, ForeignKeysAreOn) {
  // Every connection enforces foreign keys.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(db, nullptr);
  auto on = db->QueryInt64("PRAGMA foreign_keys", "read foreign_keys");
  ASSERT_OK(on);
  EXPECT_EQ(*on, 1);
}

TEST(DbTest, ExecErrorNamesTheOperationAndPath) {
  // A failing statement reports "<what> on <path>: <sqlite message>".
  ScopedTempDir dir;
  const std::string path = dir.File("t.db");
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  const Status status = db->Exec("SELECT * FROM no_such_table", "read the table");
  EXPECT_EQ(status.code(), StatusCode::kStore);
  EXPECT_EQ(status.message(), "read the table on " + path + ": no such table: no_such_table");
}

TEST(StatementTest, BindsAndReadsEveryType) {
  // Integers at both ends of int64, doubles, text with odd bytes, NULL and optionals round-trip.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(
      db->Exec("CREATE TABLE t (a INTEGER, b INTEGER, c REAL, d TEXT, e, f, g INTEGER)", "create"));
  auto insert = db->Prepare("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", "insert", true);
  ASSERT_OK(insert);
  constexpr char kText[] = "comma, quote ' and \"; nul \0 end";
  const std::string text(kText, sizeof(kText) - 1);
  const std::optional<int64_t> unset;
  const std::optional<double> set = 2.5;
  ASSERT_OK(insert->Execute(std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), -1.25e-300, text, unset, set,
                            true));
  ASSERT_OK(insert->Execute(int64_t{0}, 7, 0.0, std::string(), std::nullopt, std::nullopt, false));

  auto select = db->Prepare("SELECT a, b, c, d, e, f, g FROM t ORDER BY rowid", "select", false);
  ASSERT_OK(select);
  std::vector<std::string> seen;
  int rows = 0;
  ASSERT_OK(select->ForEachRow([&](const Statement& statement) {
    RowReader row(statement);
    if (rows++ == 0) {
      EXPECT_EQ(row.Int64(), std::numeric_limits<int64_t>::min());
      EXPECT_EQ(row.Int64(), std::numeric_limits<int64_t>::max());
      EXPECT_EQ(row.Double(), -1.25e-300);
      EXPECT_EQ(row.Text(), text);
      EXPECT_EQ(row.OptionalInt64(), std::nullopt);
      EXPECT_EQ(row.OptionalDouble(), std::optional<double>(2.5));
      EXPECT_TRUE(row.Bool());
    } else {
      EXPECT_EQ(row.Int64(), 0);
      EXPECT_EQ(row.Int(), 7);
      EXPECT_EQ(row.Double(), 0.0);
      EXPECT_EQ(row.Text(), "");
      EXPECT_EQ(row.OptionalInt64(), std::nullopt);
      EXPECT_EQ(row.OptionalDouble(), std::nullopt);
      EXPECT_FALSE(row.Bool());
    }
    return Status();
  }));
  EXPECT_EQ(rows, 2);
}

TEST(StatementTest, NaNIsRefused) {
  // SQLite would turn NaN into NULL, so binding it is an error naming the parameter.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->Exec("CREATE TABLE t (x REAL)", "create"));
  auto insert = db->Prepare("INSERT INTO t VALUES (?)", "insert into t", true);
  ASSERT_OK(insert);
  const Status status = insert->Execute(std::nan(""));
  EXPECT_EQ(status.code(), StatusCode::kStore);
  EXPECT_NE(status.message().find("insert into t on "), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("parameter 1 is NaN"), std::string::npos) << status.message();
  EXPECT_EQ(Count(*db, "t"), 0);
}

TEST(StatementTest, ConstraintErrorNamesTheStatementAndCanBeReused) {
  // A failed step reports the statement's name; the statement is reset and works again.
  ScopedTempDir dir;
  const std::string path = dir.File("t.db");
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER PRIMARY KEY)", "create"));
  auto insert = db->Prepare("INSERT INTO t VALUES (?)", "insert into t", true);
  ASSERT_OK(insert);
  ASSERT_OK(insert->Execute(1));
  const Status duplicate = insert->Execute(1);
  EXPECT_EQ(duplicate.code(), StatusCode::kStore);
  EXPECT_EQ(duplicate.message(), "insert into t on " + path + ": UNIQUE constraint failed: t.x");
  EXPECT_OK(insert->Execute(2));
  EXPECT_EQ(Count(*db, "t"), 2);
}

TEST(StatementTest, PrepareRefusesTwoStatements) {
  // Prepare compiles exactly one statement; trailing SQL would be silently ignored otherwise.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(db, nullptr);
  auto two = db->Prepare("SELECT 1; SELECT 2", "two", false);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kInternal);
  EXPECT_OK(db->Prepare("SELECT 1;  ", "one", false));
}

TEST(StatementTest, PrepareErrorNamesTheStatement) {
  // SQL that does not compile reports "prepare <name> on <path>".
  ScopedTempDir dir;
  const std::string path = dir.File("t.db");
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  auto bad = db->Prepare("SELECT x FROM nowhere", "select x", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kStore);
  EXPECT_EQ(bad.status().message(), "prepare select x on " + path + ": no such table: nowhere");
}

TEST(TransactionTest, RollsBackUnlessCommitted) {
  // Rows written in a transaction that is not committed are gone after its destruction.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER)", "create"));
  {
    auto transaction = Transaction::Begin(*db, Transaction::Mode::kWrite);
    ASSERT_OK(transaction);
    ASSERT_OK(db->Exec("INSERT INTO t VALUES (1)", "insert"));
    EXPECT_FALSE(db->InAutocommit());
  }
  EXPECT_TRUE(db->InAutocommit());
  EXPECT_EQ(Count(*db, "t"), 0);
  {
    auto transaction = Transaction::Begin(*db, Transaction::Mode::kWrite);
    ASSERT_OK(transaction);
    ASSERT_OK(db->Exec("INSERT INTO t VALUES (1)", "insert"));
    ASSERT_OK(transaction->Commit());
  }
  EXPECT_EQ(Count(*db, "t"), 1);
}

TEST(TransactionTest, MovedTransactionRollsBackOnce) {
  // Moving a transaction hands over the rollback; the moved-from one does nothing.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("t.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER)", "create"));
  {
    auto begun = Transaction::Begin(*db, Transaction::Mode::kWrite);
    ASSERT_OK(begun);
    Transaction moved(std::move(begun).value());
    ASSERT_OK(db->Exec("INSERT INTO t VALUES (1)", "insert"));
    ASSERT_OK(moved.Commit());
  }
  EXPECT_EQ(Count(*db, "t"), 1);
}

TEST(TransactionTest, WriteFailsWhenAnotherConnectionHoldsTheLock) {
  // BEGIN IMMEDIATE waits for the busy timeout, then says the file is locked by another process.
  ScopedTempDir dir;
  const std::string path = dir.File("t.db");
  auto holder = OpenOrDie(path);
  ASSERT_NE(holder, nullptr);
  // In WAL mode readers go on past the lock, so the open succeeds and the write waits.
  ASSERT_OK(holder->Exec("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER)", "create"));
  ASSERT_OK(holder->Exec("BEGIN EXCLUSIVE", "lock"));
  auto db = OpenOrDie(path, /*busy_timeout_ms=*/20);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Count(*db, "t"), 0);
  auto transaction = Transaction::Begin(*db, Transaction::Mode::kWrite);
  ASSERT_FALSE(transaction.ok());
  EXPECT_EQ(transaction.status().code(), StatusCode::kStore);
  EXPECT_NE(transaction.status().message().find("locked by another process"), std::string::npos)
      << transaction.status().message();
  EXPECT_NE(transaction.status().message().find(path), std::string::npos);
  ASSERT_OK(holder->Exec("ROLLBACK", "unlock"));
}

TEST(TransactionTest, OpenFailsWhileAnotherConnectionHoldsAnExclusiveLock) {
  // In rollback-journal mode an exclusive lock blocks even reading the schema on open.
  ScopedTempDir dir;
  const std::string path = dir.File("t.db");
  auto holder = OpenOrDie(path);
  ASSERT_NE(holder, nullptr);
  ASSERT_OK(holder->Exec("CREATE TABLE t (x INTEGER)", "create"));
  ASSERT_OK(holder->Exec("BEGIN EXCLUSIVE", "lock"));
  Db::Options options;
  options.busy_timeout_ms = 20;
  auto db = Db::Open(path, options);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kStore);
  EXPECT_NE(db.status().message().find("locked by another process"), std::string::npos)
      << db.status().message();
  ASSERT_OK(holder->Exec("ROLLBACK", "unlock"));
}

}  // namespace
}  // namespace libra::store
