#include "records/records.h"

#include "common/strings.h"

namespace libra::records {

std::string RunOwner::ToString() const {
  return StrFormat("pid %lld on host %s", static_cast<long long>(pid), host.c_str());
}

}  // namespace libra::records
