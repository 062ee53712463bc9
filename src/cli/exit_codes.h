// The process exit codes of `libra`, fixed for scripts and CI.
#pragma once

#include "common/status.h"

namespace libra::cli {

inline constexpr int kExitOk = 0;
/// The run (or the command) failed.
inline constexpr int kExitFailed = 1;
/// Bad usage, a bad recipe, or something named that does not exist.
inline constexpr int kExitUsage = 2;
/// Interrupted by Ctrl-C; the run is marked interrupted in the store.
inline constexpr int kExitInterrupted = 130;

/// The exit code for a status.
inline int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidRecipe:
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return kExitUsage;
    case StatusCode::kInterrupted:
      return kExitInterrupted;
    default:
      return kExitFailed;
  }
}

}  // namespace libra::cli
