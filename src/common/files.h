// Files: writing a whole file so that readers never see half of it.
#pragma once

#include <string>

#include "common/status.h"

namespace libra {

/// Writes `text` to `path` through a temporary file in the same folder, synced and renamed over
/// it: the old file stays whole until the new one is. kInvalidArgument "<path>: cannot write the
/// <what> (<reason>)" when any part fails (the temporary file is removed).
Status WriteFileAtomically(const std::string& path, const std::string& text,
                           const std::string& what);

}  // namespace libra
