// Helpers shared by the tests: Status assertions, temporary folders, golden files, and running the
// built libra binary.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

#define EXPECT_OK(expr)                                             \
  do {                                                              \
    const ::libra::Status libra_s_ = ::libra::test::ToStatus(expr); \
    EXPECT_TRUE(libra_s_.ok()) << libra_s_.ToString();              \
  } while (false)
#define ASSERT_OK(expr)                                             \
  do {                                                              \
    const ::libra::Status libra_s_ = ::libra::test::ToStatus(expr); \
    ASSERT_TRUE(libra_s_.ok()) << libra_s_.ToString();              \
  } while (false)

namespace libra::test {

/// How much slower than an idle machine this one may be: LIBRA_TEST_TIME_SCALE from the
/// environment (a number >= 1; default 1, and anything unreadable is 1). Deadlines of tests are
/// multiplied by it (Deadline), so that a machine busy with other builds (scripts/stress-ci.sh)
/// passes the same tests, only slower.
double TimeScale();

/// `budget` stretched by TimeScale(). A test's deadline only bounds how long a failing wait
/// takes, never what passes: choose budgets many times what an idle machine needs.
template <typename Rep, typename Period>
std::chrono::milliseconds Deadline(std::chrono::duration<Rep, Period> budget) {
  const double ms = std::chrono::duration<double, std::milli>(budget).count() * TimeScale();
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

inline Status ToStatus(const Status& s) { return s; }
template <typename T>
Status ToStatus(const Result<T>& r) {
  return r.status();
}

/// A fresh folder under the system temp dir, removed (with its contents) on destruction.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// path() / name, as a string.
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Writes `text` to `path`, creating parent folders.
void WriteFile(const std::string& path, const std::string& text);
/// The whole file; fails the test when it cannot be read.
std::string ReadFile(const std::string& path);

/// A path under the source tree, e.g. SourcePath("recipes/quickstart.toml").
std::string SourcePath(const std::string& relative);

/// Compares `actual` with the golden file tests/golden/<name>. The file starts with '#' header
/// lines (name, description), then a line "----", then the expected text. With
/// LIBRA_UPDATE_GOLDEN=1 in the environment the file is rewritten instead (keeping its header).
void ExpectGolden(const std::string& name, const std::string& description,
                  const std::string& actual);

/// The result of running the built libra binary.
struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

/// Runs `libra <args>` in `cwd` (the source tree when empty), with stdin closed.
CommandResult RunLibra(const std::vector<std::string>& args, const std::string& cwd = "");

/// Runs argv[0] (looked up on PATH) with the rest as its arguments in `cwd` (the source tree
/// when empty), stdin from `stdin_path` (/dev/null when empty); exit code 127 when it cannot be
/// started.
CommandResult RunProgram(const std::vector<std::string>& argv, const std::string& cwd = "",
                         const std::string& stdin_path = "");

/// The first of `count` consecutive TCP ports of 127.0.0.1 that nothing holds now, or 0. They lie
/// below the kernel's ephemeral range, so no outgoing connection takes one before a server binds
/// it. Each port returned is claimed for the rest of this process (a lock file per port under the
/// temporary folder), so no two calls, in this process or in any test running beside it, return
/// overlapping blocks, even of ports nobody has bound yet; the search starts at a place that
/// depends on the process id, so side-by-side tests rarely even try the same ports.
int FreePorts(int count);
/// FreePorts(1).
inline int FreePort() { return FreePorts(1); }

}  // namespace libra::test
