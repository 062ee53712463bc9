#include "store/run_owner.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <string>
#include <vector>

#include "common/files.h"

namespace libra::store {

using records::RunOwner;
namespace {

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

/// Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot; "" when
/// there is no such process, or only its zombie.
std::string StartTicks(int64_t pid) {
  const std::vector<std::string> fields = ProcessStatFields(pid);
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return "";
  return fields[19];
}

}  // namespace

RunOwner ThisProcess() {
  const int64_t pid = ::getpid();
  return RunOwner{HostName(), pid, BootId() + "/" + StartTicks(pid)};
}

OwnerState CheckOwner(const RunOwner& owner) {
  if (owner.pid <= 0 || owner.host.empty() || owner.host != HostName()) {
    return OwnerState::kUnknown;
  }
  const size_t slash = owner.start.find('/');
  const std::string boot = slash == std::string::npos ? "" : owner.start.substr(0, slash);
  if (boot.empty() || boot != BootId()) return OwnerState::kGone;
  if (::kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno == ESRCH) return OwnerState::kGone;
  const std::string ticks = StartTicks(owner.pid);
  if (ticks.empty() || ticks != owner.start.substr(slash + 1)) return OwnerState::kGone;
  return OwnerState::kAlive;
}

}  // namespace libra::store
