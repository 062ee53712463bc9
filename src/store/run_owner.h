// RunOwner: which libra process is recording a run, so that a run left `running` by a libra that
// died (SIGKILL, OOM, power loss) can be told from one still being recorded. Reads /proc and the
// host name; knows nothing of the database (the store keeps the record in `runs.owner_*`).
#pragma once

#include <cstdint>
#include <string>

#include "records/records.h"

namespace libra::store {

/// This process.
records::RunOwner ThisProcess();

enum class OwnerState {
  /// The process is alive on this host.
  kAlive,
  /// The process is gone: it ran on this host, and no process with its pid and start time
  /// exists (or the host rebooted since).
  kGone,
  /// It ran on another host (or is not recorded at all): this process cannot tell.
  kUnknown,
};

/// Whether `owner` still runs, as far as this host can tell.
OwnerState CheckOwner(const records::RunOwner& owner);

}  // namespace libra::store
