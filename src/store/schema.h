// The results database schema: libra's migrations, and the checks and steps that bring an opened
// database file to the newest version. Private to src/store.
//
// A libra database carries PRAGMA application_id = kApplicationId and its schema version in
// PRAGMA user_version; both are written in the same transaction as each migration, so a file is
// always at exactly one version. A file that is someone else's SQLite database, or that comes
// from a newer libra, is refused before anything is written to it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "store/db.h"
#include "store/store.h"

namespace libra::store {

/// PRAGMA application_id of a libra results database: "LBRA" in ASCII.
inline constexpr int32_t kApplicationId = 0x4C425241;

/// Checks that `migrations` is well formed: not empty, versions 1, 2, 3, ... in order.
/// kInternal otherwise (a bug in libra or in a test).
Status ValidateMigrations(const std::vector<Migration>& migrations);

/// Reads the schema version of `db` and refuses (kStore) a database that is not libra's (another
/// application_id, or tables without a libra version) or whose version is newer than the last of
/// `migrations`. Only reads: a refused file is left as it was. An empty database is version 0.
Result<int> CheckSchema(Db& db, const std::vector<Migration>& migrations);

/// Applies, in order, every migration newer than the database's version, each in its own write
/// transaction that also sets user_version (and application_id). A failed migration is rolled
/// back whole and the database stays at the version before it. Returns the new version.
/// REQUIRES: CheckSchema(db, migrations) succeeded.
Result<int> ApplyMigrations(Db& db, const std::vector<Migration>& migrations);

}  // namespace libra::store
