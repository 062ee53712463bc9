// The probes of a build without CUDA (the default): each says how to get the real ones.
#include "gpu/probe.h"

namespace libra::gpu {
namespace {

Status NotBuilt() {
  return Status::Backend("gpu", "built without CUDA (configure with -DLIBRA_WITH_CUDA=ON)");
}

}  // namespace

bool BuiltWithCuda() { return false; }
bool BuiltWithNccl() { return false; }

Result<int> CountGpus() { return NotBuilt(); }

Result<ProbeReport> ProbeLocalNode(const ProbeOptions& /*options*/, const ProbeLog& /*log*/) {
  return NotBuilt();
}

Result<std::vector<ProbeResult>> ProbeAcrossNodes(
    const NcclPeer& /*peer*/, const ProbeOptions& /*options*/,
    const std::function<void(const std::string&)>& /*on_unique_id*/, const ProbeLog& /*log*/) {
  return NotBuilt();
}

}  // namespace libra::gpu
