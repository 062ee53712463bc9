#include "store/schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/strings.h"
#include "store/db.h"
#include "support/test_util.h"

namespace libra::store {
namespace {

using ::libra::test::ReadFile;
using ::libra::test::ScopedTempDir;

std::unique_ptr<Db> OpenOrDie(const std::string& path) {
  auto db = Db::Open(path, Db::Options());
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

int64_t QueryOrDie(Db& db, const std::string& sql) {
  auto value = db.QueryInt64(sql, "query");
  EXPECT_TRUE(value.ok()) << value.status().ToString();
  return value.ok() ? *value : -1;
}

/// The names of the tables, in alphabetical order.
std::vector<std::string> Tables(Db& db) {
  std::vector<std::string> names;
  auto list = db.Prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
      "ORDER BY name",
      "list tables", false);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  if (!list.ok()) return names;
  EXPECT_OK(list->ForEachRow([&names](const Statement& row) {
    names.push_back(row.Text(0));
    return Status();
  }));
  return names;
}

TEST(SchemaTest, LibraMigrationsAreWellFormed) {
  // The built-in list starts at version 1 and counts up by one, each with a description.
  const std::vector<Migration>& migrations = SchemaMigrations();
  ASSERT_FALSE(migrations.empty());
  EXPECT_OK(ValidateMigrations(migrations));
  for (const Migration& migration : migrations) {
    EXPECT_FALSE(migration.description.empty()) << migration.version;
    EXPECT_FALSE(migration.sql.empty()) << migration.version;
  }
}

TEST(SchemaTest, ValidateRefusesGapsDisorderAndEmptyLists) {
  // Versions must be exactly 1, 2, 3, ...; anything else is a bug reported as kInternal.
  struct Case {
    std::string name;
    std::vector<int> versions;
  };
  const std::vector<Case> cases = {
      {"empty", {}}, {"starts at 2", {2}}, {"gap", {1, 3}}, {"repeat", {1, 1}}, {"down", {2, 1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Migration> migrations;
    for (const int version : c.versions) migrations.push_back({version, "m", "SELECT 1"});
    EXPECT_EQ(ValidateMigrations(migrations).code(), StatusCode::kInternal);
  }
}

TEST(SchemaTest, NewFileIsVersionZeroAndMigratesToTheLatest) {
  // An empty database is accepted at version 0 and brought to the newest version with every
  // table, stamped with libra's application id.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("r.db"));
  ASSERT_NE(db, nullptr);
  auto version = CheckSchema(*db, SchemaMigrations());
  ASSERT_OK(version);
  EXPECT_EQ(*version, 0);

  auto migrated = ApplyMigrations(*db, SchemaMigrations());
  ASSERT_OK(migrated);
  EXPECT_EQ(*migrated, SchemaMigrations().back().version);
  EXPECT_EQ(QueryOrDie(*db, "PRAGMA user_version"), SchemaMigrations().back().version);
  EXPECT_EQ(QueryOrDie(*db, "PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(Tables(*db), (std::vector<std::string>{"comparison_runs", "comparisons", "decisions",
                                                   "events", "probes", "router_metrics", "runs",
                                                   "steps", "trajectories", "tuning_trials",
                                                   "tunings", "turns"}));
  // Once libra's, the file passes the check at its version.
  auto again = CheckSchema(*db, SchemaMigrations());
  ASSERT_OK(again);
  EXPECT_EQ(*again, SchemaMigrations().back().version);
}

TEST(SchemaTest, ApplyingTwiceChangesNothing) {
  // Migrations already applied are skipped.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("r.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(ApplyMigrations(*db, SchemaMigrations()));
  auto second = ApplyMigrations(*db, SchemaMigrations());
  ASSERT_OK(second);
  EXPECT_EQ(*second, SchemaMigrations().back().version);
}

TEST(SchemaTest, FailedMigrationIsRolledBackWhole) {
  // A migration whose second statement fails leaves neither its first statement nor a new
  // user_version behind; earlier migrations stay applied.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("r.db"));
  ASSERT_NE(db, nullptr);
  const std::vector<Migration> migrations = {
      {1, "one", "CREATE TABLE one (x INTEGER)"},
      {2, "two", "CREATE TABLE two (x INTEGER); INSERT INTO nowhere VALUES (1)"},
  };
  auto version = ApplyMigrations(*db, migrations);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), StatusCode::kStore);
  EXPECT_NE(version.status().message().find("schema migration 2 (two)"), std::string::npos)
      << version.status().message();
  EXPECT_EQ(QueryOrDie(*db, "PRAGMA user_version"), 1);
  EXPECT_EQ(Tables(*db), std::vector<std::string>{"one"});
}

TEST(SchemaTest, NewerVersionIsRefused) {
  // A libra database from a newer libra is refused with both versions in the message.
  ScopedTempDir dir;
  const std::string path = dir.File("r.db");
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  ASSERT_OK(ApplyMigrations(*db, SchemaMigrations()));
  const int newer = SchemaMigrations().back().version + 1;
  ASSERT_OK(db->Exec(StrFormat("PRAGMA user_version = %d", newer), "set version"));
  auto version = CheckSchema(*db, SchemaMigrations());
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), StatusCode::kStore);
  EXPECT_EQ(version.status().message(),
            path + StrFormat(": schema version %d is newer than this libra supports (%d); use a "
                             "newer libra or another --db",
                             newer, newer - 1));
}

TEST(SchemaTest, ForeignDatabaseIsRefusedUnchanged) {
  // An SQLite file with someone else's tables (no libra stamp) is refused and not written.
  ScopedTempDir dir;
  const std::string path = dir.File("other.db");
  {
    auto other = OpenOrDie(path);
    ASSERT_NE(other, nullptr);
    ASSERT_OK(other->Exec("CREATE TABLE customers (id INTEGER); CREATE TABLE orders (id INTEGER)",
                          "create"));
  }
  const std::string before = ReadFile(path);
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  auto version = CheckSchema(*db, SchemaMigrations());
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), StatusCode::kStore);
  EXPECT_NE(version.status().message().find(path + ": an SQLite database, but not a libra"),
            std::string::npos)
      << version.status().message();
  EXPECT_NE(version.status().message().find("table customers, table orders"), std::string::npos)
      << version.status().message();
  db.reset();
  EXPECT_EQ(ReadFile(path), before);
}

TEST(SchemaTest, OtherApplicationIdIsRefused) {
  // A file stamped by another application is refused even when it has no tables.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("other.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->Exec("PRAGMA application_id = 1234", "stamp"));
  auto version = CheckSchema(*db, SchemaMigrations());
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), StatusCode::kStore);
  EXPECT_NE(version.status().message().find("application_id 0x000004d2"), std::string::npos)
      << version.status().message();
}

TEST(SchemaTest, UnstampedVersionIsRefused) {
  // user_version set by someone else on a file without libra's stamp is not libra's.
  ScopedTempDir dir;
  auto db = OpenOrDie(dir.File("other.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->Exec("PRAGMA user_version = 3", "set version"));
  auto version = CheckSchema(*db, SchemaMigrations());
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("user_version 3 but no tables"), std::string::npos)
      << version.status().message();
}

}  // namespace
}  // namespace libra::store
