#include "backend/backend.h"

#include <map>

#include "common/strings.h"

namespace libra::backend {

int Layout::rollout_gpus() const {
  int gpus = 0;
  for (const InstanceSpec& i : instances) gpus += i.tp;
  return gpus;
}

std::string Layout::ToString() const {
  std::map<int, int> by_tp;
  for (const InstanceSpec& i : instances) ++by_tp[i.tp];
  std::vector<std::string> parts;
  for (const auto& [tp, count] : by_tp) parts.push_back(StrFormat("tp%dx%d", tp, count));
  return StrFormat("train %d (%s) | rollout %s%s", train_gpus, train.ToString().c_str(),
                   parts.empty() ? "none" : StrJoin(parts, "+").c_str(),
                   colocated ? " (colocated)" : "");
}

}  // namespace libra::backend
