#include "cluster/layout_assignment.h"

#include <set>

#include "common/strings.h"

namespace libra::cluster {
namespace {

bool SameGpus(const backend::InstanceSpec& a, const backend::InstanceSpec& b) {
  return a.node == b.node && a.first_gpu == b.first_gpu && a.tp == b.tp;
}

bool Overlap(const backend::InstanceSpec& a, const backend::InstanceSpec& b) {
  return a.node == b.node && a.first_gpu < b.first_gpu + b.tp && b.first_gpu < a.first_gpu + a.tp;
}

const EngineView* Find(const std::vector<EngineView>& engines, int64_t key) {
  for (const EngineView& e : engines) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

}  // namespace

std::string EngineChange::ToString() const {
  switch (kind) {
    case Kind::kSleep:
      return StrFormat("sleep engine %lld", static_cast<long long>(engine));
    case Kind::kWake:
      return StrFormat("wake engine %lld for instance %d", static_cast<long long>(engine),
                       instance);
    case Kind::kStop:
      return StrFormat("stop engine %lld", static_cast<long long>(engine));
    case Kind::kStart:
      return StrFormat("start instance %d", instance);
  }
  return "?";
}

LayoutAssignment AssignEngines(const std::vector<int64_t>& current,
                               const std::vector<EngineView>& engines,
                               const std::vector<backend::InstanceSpec>& instances) {
  LayoutAssignment out;
  out.serving.resize(instances.size());
  std::set<int64_t> taken;
  // 1. The same engine at the same index, on the same GPUs.
  for (size_t i = 0; i < instances.size() && i < current.size(); ++i) {
    const EngineView* e = Find(engines, current[i]);
    if (e != nullptr && SameGpus(e->spec, instances[i])) {
      out.serving[i] = e->key;
      taken.insert(e->key);
    }
  }
  // 2. Another live engine of the old layout, or a sleeping one, on the same GPUs.
  for (size_t i = 0; i < instances.size(); ++i) {
    if (out.serving[i]) continue;
    for (const EngineView& e : engines) {
      if (taken.count(e.key) || e.dead) continue;
      if (SameGpus(e.spec, instances[i]) && (e.in_layout || e.sleeping)) {
        out.serving[i] = e.key;
        taken.insert(e.key);
        break;
      }
    }
  }
  // Engines of the old layout that serve no new instance sleep.
  for (int64_t key : current) {
    const EngineView* e = Find(engines, key);
    if (e == nullptr || taken.count(key) || e->dead) continue;
    out.changes.push_back({EngineChange::Kind::kSleep, key, -1});
  }
  // 3. Wakes, and new engines (sleeping engines on their GPUs give them up for good).
  std::set<int64_t> stopped;
  for (size_t i = 0; i < instances.size(); ++i) {
    const int instance = static_cast<int>(i);
    if (out.serving[i]) {
      const EngineView* e = Find(engines, *out.serving[i]);
      if (e->sleeping) out.changes.push_back({EngineChange::Kind::kWake, e->key, instance});
      continue;
    }
    for (const EngineView& e : engines) {
      if (e.sleeping && !e.dead && !taken.count(e.key) && !stopped.count(e.key) &&
          Overlap(e.spec, instances[i])) {
        stopped.insert(e.key);
        out.changes.push_back({EngineChange::Kind::kStop, e.key, -1});
      }
    }
    out.changes.push_back({EngineChange::Kind::kStart, -1, instance});
  }
  return out;
}

}  // namespace libra::cluster
