// Status and Result<T>: how every fallible libra function reports failure.
//
// A Status is a code plus a message. OK carries nothing. Errors read "where: what" when a location
// is known (a recipe position, a host and command, an SQL statement), so the user sees at once
// which input is wrong and why. Exceptions never cross a module boundary: the few libraries that
// throw (toml++, CLI11) are caught where they are called and turned into a Status.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <variant>

#include "common/check.h"

namespace libra {

/// The small, fixed set of error kinds. Callers branch on the code, users read the message.
enum class StatusCode {
  kOk = 0,
  /// A recipe, an override or a policy option is invalid. The CLI exits with 2.
  kInvalidRecipe,
  /// A command-line argument or an API argument is invalid. The CLI exits with 2.
  kInvalidArgument,
  /// A named thing (policy, run, file) does not exist.
  kNotFound,
  /// A plan cannot fit on this cluster, ever (not "busy now").
  kUnschedulable,
  /// The backend (simulator or real processes) failed.
  kBackend,
  /// Something did not answer in time.
  kTimeout,
  /// The results database failed: corrupt, locked, too new, or an SQL error.
  kStore,
  /// The user interrupted the run (Ctrl-C). The CLI exits with 130.
  kInterrupted,
  /// A bug in libra.
  kInternal,
};

/// Name of a code for messages and tests, e.g. "invalid recipe".
const char* StatusCodeName(StatusCode code);

class Status {
 public:
  /// OK.
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status InvalidRecipe(const std::string& where, const std::string& what) {
    return Status(StatusCode::kInvalidRecipe, Join(where, what));
  }
  static Status InvalidArgument(const std::string& what) {
    return Status(StatusCode::kInvalidArgument, what);
  }
  static Status NotFound(const std::string& what) { return Status(StatusCode::kNotFound, what); }
  static Status Unschedulable(const std::string& what) {
    return Status(StatusCode::kUnschedulable, what);
  }
  static Status Backend(const std::string& where, const std::string& what) {
    return Status(StatusCode::kBackend, Join(where, what));
  }
  static Status Store(const std::string& where, const std::string& what) {
    return Status(StatusCode::kStore, Join(where, what));
  }
  static Status Interrupted(const std::string& what) {
    return Status(StatusCode::kInterrupted, what);
  }
  static Status Internal(const std::string& what) { return Status(StatusCode::kInternal, what); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  /// The human-readable message ("where: what"); empty for OK.
  const std::string& message() const { return message_; }
  /// "OK" or "<code name>: <message>", for logs and test failures.
  std::string ToString() const;

  bool operator==(const Status&) const = default;

 private:
  static std::string Join(const std::string& where, const std::string& what) {
    return where.empty() ? what : where + ": " + what;
  }

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Prints a Status in test failure messages.
inline void PrintTo(const Status& status, std::ostream* os) { *os << status.ToString(); }

/// Holds either a T or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    LIBRA_CHECK(!std::get<Status>(state_).ok()) << "Result constructed from an OK status";
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  /// The error; OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(state_); }

  /// REQUIRES: ok().
  const T& value() const& {
    LIBRA_CHECK(ok()) << "value() on an error: " << std::get<Status>(state_).ToString();
    return std::get<T>(state_);
  }
  T& value() & {
    LIBRA_CHECK(ok()) << "value() on an error: " << std::get<Status>(state_).ToString();
    return std::get<T>(state_);
  }
  T&& value() && {
    LIBRA_CHECK(ok()) << "value() on an error: " << std::get<Status>(state_).ToString();
    return std::get<T>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace libra

#define LIBRA_STATUS_CONCAT_INNER_(a, b) a##b
#define LIBRA_STATUS_CONCAT_(a, b) LIBRA_STATUS_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function when it is not OK.
#define LIBRA_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::libra::Status libra_status_ = (expr);        \
    if (!libra_status_.ok()) return libra_status_; \
  } while (false)

/// `LIBRA_ASSIGN_OR_RETURN(auto x, F());` declares x from F()'s value or returns its error.
#define LIBRA_ASSIGN_OR_RETURN(lhs, expr) \
  LIBRA_ASSIGN_OR_RETURN_IMPL_(LIBRA_STATUS_CONCAT_(libra_result_, __LINE__), lhs, expr)
#define LIBRA_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                 \
  if (!result.ok()) return result.status();             \
  lhs = std::move(result).value()
