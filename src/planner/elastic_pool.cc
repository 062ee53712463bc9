#include "planner/elastic_pool.h"

#include <algorithm>

#include "common/check.h"
#include "common/strings.h"

namespace libra::planner {

std::vector<bool> KeptInstances(const backend::Layout& from, const backend::Layout& to) {
  std::vector<bool> kept(from.instances.size(), false);
  for (size_t i = 0; i < from.instances.size() && i < to.instances.size(); ++i) {
    kept[i] = from.instances[i] == to.instances[i];
  }
  return kept;
}

ElasticPool::ElasticPool(backend::Layout current) : current_(std::move(current)) {}

Status ElasticPool::Begin(backend::Layout target) {
  if (phase_ != PoolPhase::kIdle) {
    return Status::InvalidArgument(StrFormat("a transition to %s is already %s",
                                             target_->ToString().c_str(), NameOf(phase_).c_str()));
  }
  if (target == current_) {
    return Status::InvalidArgument("the target is the current layout: " + target.ToString());
  }
  // A layout without training GPUs is a lend: every current instance stays and the training
  // GPUs roll out until the trainer takes them back.
  const std::vector<bool> keeps = KeptInstances(current_, target);
  const bool lend = target.train_gpus == 0 && target.instances.size() > current_.instances.size() &&
                    std::count(keeps.begin(), keeps.end(), false) == 0;
  if (target.instances.empty() || (target.train_gpus <= 0 && !lend)) {
    return Status::InvalidArgument("a layout needs rollout instances and training GPUs: " +
                                   target.ToString());
  }
  if (target.colocated != current_.colocated) {
    return Status::InvalidArgument("the pool cannot switch between colocated and split layouts");
  }
  const int used =
      current_.colocated ? current_.train_gpus : current_.train_gpus + current_.rollout_gpus();
  const int wanted =
      target.colocated ? target.train_gpus : target.train_gpus + target.rollout_gpus();
  if (wanted > used) {
    return Status::InvalidArgument(StrFormat("%s uses %d GPUs, more than the %d of %s",
                                             target.ToString().c_str(), wanted, used,
                                             current_.ToString().c_str()));
  }
  const int replica = current_.train.tp * current_.train.pp;
  if (target.train.tp == current_.train.tp && target.train.pp == current_.train.pp &&
      (target.train_gpus - current_.train_gpus) % replica != 0) {
    return Status::InvalidArgument(StrFormat(
        "training changes by %d GPUs, not a whole number of %d-GPU replicas (%s)",
        target.train_gpus - current_.train_gpus, replica, current_.train.ToString().c_str()));
  }
  const std::vector<bool> kept = KeptInstances(current_, target);
  leaving_.clear();
  for (size_t i = 0; i < kept.size(); ++i) {
    if (!kept[i]) leaving_.push_back(i);
  }
  target_ = std::move(target);
  phase_ = PoolPhase::kDraining;
  return Status();
}

bool ElasticPool::Accepting(size_t index) const {
  return index < current_.instances.size() &&
         std::find(leaving_.begin(), leaving_.end(), index) == leaving_.end();
}

std::optional<backend::Layout> ElasticPool::Ready(std::span<const int> active, bool step_boundary) {
  if (phase_ != PoolPhase::kDraining || !step_boundary) return std::nullopt;
  for (size_t i : leaving_) {
    if (i < active.size() && active[i] > 0) return std::nullopt;
  }
  phase_ = PoolPhase::kSwitching;
  return target_;
}

void ElasticPool::Applied() {
  LIBRA_CHECK(phase_ == PoolPhase::kSwitching) << "Applied() while " << NameOf(phase_);
  current_ = std::move(*target_);
  target_.reset();
  leaving_.clear();
  phase_ = PoolPhase::kIdle;
}

void ElasticPool::Cancel() {
  LIBRA_CHECK(phase_ != PoolPhase::kSwitching) << "Cancel() while switching";
  target_.reset();
  leaving_.clear();
  phase_ = PoolPhase::kIdle;
}

}  // namespace libra::planner
