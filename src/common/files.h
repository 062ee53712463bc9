// Files: writing a whole file so that readers never see half of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace libra {

/// Writes `text` to `path`. A regular file, or a path that names nothing yet, is written through
/// a temporary file in the same folder, synced and renamed over it: the old file stays whole
/// until the new one is. A symbolic link to a regular file stays a link; the file it points to is
/// replaced. Anything else that is not a folder (a device such as /dev/null, a named pipe, a
/// terminal) is opened and written into as it is: it is never replaced by a file. kInvalidArgument
/// "<path>: cannot write the <what> (<reason>)" when any part fails (for a folder: "Is a
/// directory"); no temporary file is left behind.
Status WriteFileAtomically(const std::string& path, const std::string& text,
                           const std::string& what);

/// Reads the file at `path` whole, refusing one larger than `max_bytes` (no more than
/// max_bytes + 1 bytes are ever read, so /dev/zero or /dev/urandom end there). kNotFound
/// "<path>: cannot read the <what> (<reason>)"; kInvalidArgument "<path>: the <what> is larger
/// than libra's limit of <max_bytes> bytes".
Result<std::string> ReadFileBounded(const std::string& path, size_t max_bytes,
                                    const std::string& what);

/// Makes `dir` (and its parents) the folder of `owner`, a one-line text naming who keeps files
/// there (e.g. "run 3 of libra.db, started 2026-05-01T12:00:00Z"): writes it to `dir`/.owner, or,
/// when that file exists, checks that it names the same owner. kInvalidArgument "<dir> holds the
/// files of <other>, not of <owner>; ..." when it names another, so that nobody uses (or
/// overwrites) another's files, and when the folder or file cannot be made or read.
Status ClaimFolder(const std::string& dir, const std::string& owner);

/// Whether `name` can name a file inside a folder and nothing else: not empty, neither "." nor
/// "..", only letters, digits, '-', '_' and '.' (so no '/').
bool IsPlainFileName(std::string_view name);

/// The fields of /proc/`pid`/stat after the command's name, which may hold anything: [0] is field
/// 3 (the state: "R", "S", "Z", ...), [6] field 9 (the kernel's flags), [19] field 22 (the start
/// time). Empty when there is no such process or no /proc.
std::vector<std::string> ProcessStatFields(int64_t pid);

}  // namespace libra
