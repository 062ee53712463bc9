#include "cluster/weight_sync.h"

#include <filesystem>
#include <memory>

#include "common/strings.h"

namespace libra::cluster {

WeightSync::WeightSync(Runtime& runtime, EngineSupervisor& engines, TrainerSupervisor& trainer,
                       WeightVersions& versions)
    : runtime_(runtime), engines_(engines), trainer_(trainer), versions_(versions) {}

void WeightSync::SaveInitial(int start_version, Done done) {
  const std::string policy = runtime_.PolicyPath();
  runtime_.Control(
      trainer_.client().SaveWeights(policy, start_version),
      [this, policy](const HttpResponse& r) {
        return trainer_.client().ParseSaveWeights(policy, r).status();
      },
      [this, policy, start_version, done = std::move(done)](Status saved) {
        if (saved.ok()) {
          versions_.policy = versions_.synced = start_version;
          if (start_version == 0) {
            std::error_code ignored;
            std::filesystem::copy_file(policy, runtime_.CheckpointPath(0),
                                       std::filesystem::copy_options::overwrite_existing, ignored);
          }
        }
        done(saved);
      });
}

void WeightSync::Sync(int version, Done done) {
  const std::string policy = runtime_.PolicyPath();
  runtime_.Control(
      trainer_.client().SaveWeights(policy, version),
      [this, policy](const HttpResponse& r) {
        return trainer_.client().ParseSaveWeights(policy, r).status();
      },
      [this, policy, version, done = std::move(done)](Status saved) {
        if (!saved.ok()) return done(saved);
        versions_.policy = version;
        if (runtime_.options->trainer.weight_sync == WeightSyncMode::kDistributed) {
          return Distribute(version, done);
        }
        if (runtime_.options->trainer.weight_sync == WeightSyncMode::kRestart) {
          // Engines that cannot load weights: each serving one starts again on policy.pt.
          std::vector<AsyncStep> restarts;
          for (const auto& [key, e] : engines_.engines()) {
            if (e.state != EngineState::kReady) continue;
            restarts.push_back([this, key = key](Done d) { engines_.Restart(key, std::move(d)); });
          }
          return RunAll(*runtime_.loop, std::move(restarts), done);
        }
        std::vector<AsyncStep> steps;
        for (const auto& [key, e] : engines_.engines()) {
          if (e.state != EngineState::kReady) continue;
          Result<HttpRequest> update = e.client->UpdateWeightsFromDisk(policy, version);
          if (!update.ok()) return runtime_.Fail(update.status());
          steps.push_back([this, key = key, update = *update, version](Done d) {
            runtime_.Control(
                update,
                [this, key, update](const HttpResponse& r) {
                  return engines_.at(key).client->ParseAck(update, r);
                },
                [this, key, version, d = std::move(d)](Status s) {
                  Engine& engine = engines_.at(key);
                  if (s.ok()) {
                    engine.weights = version;
                  } else if (engine.state != EngineState::kReady) {
                    s = Status();  // it died meanwhile: it loads policy.pt when restarted
                  }
                  d(s);
                });
          });
        }
        RunAll(*runtime_.loop, std::move(steps), done);
      });
}

void WeightSync::Broadcast(const std::vector<int64_t>& members, int version, Done done) {
  std::vector<AsyncStep> steps;
  const WeightUpdateGroup group = *group_;
  const HttpRequest send = trainer_.client().BroadcastWeights(group, version);
  steps.push_back([this, send](Done d) {
    runtime_.Control(
        send,
        [this](const HttpResponse& r) {
          return trainer_.client().ParseBroadcastWeights(r).status();
        },
        std::move(d));
  });
  for (int64_t key : members) {
    const HttpRequest receive =
        engines_.at(key).client->UpdateWeightsFromDistributed(group, tensors_, version);
    steps.push_back([this, key, receive, version](Done d) {
      runtime_.Control(
          receive,
          [this, key, receive](const HttpResponse& r) {
            return engines_.at(key).client->ParseAck(receive, r);
          },
          [this, key, version, d = std::move(d)](Status s) {
            if (s.ok()) engines_.at(key).weights = version;
            d(s);
          });
    });
  }
  RunAll(*runtime_.loop, std::move(steps), std::move(done));
}

void WeightSync::Distribute(int version, Done done) {
  const ClusterOptions& options = *runtime_.options;
  std::vector<int64_t> members;
  std::vector<int> gpus;
  for (const auto& [key, e] : engines_.engines()) {
    if (e.state != EngineState::kReady) continue;
    members.push_back(key);
    gpus.push_back(options.engine.group_rank_per_gpu ? e.spec.tp : 1);
  }
  if (members.empty()) return done(Status());
  const std::set<int64_t> wanted(members.begin(), members.end());
  if (group_ && wanted == members_) return Broadcast(members, version, std::move(done));
  // A new group for the engines serving now.
  Result<WeightUpdateRanks> ranks = LayOutWeightUpdateRanks(gpus);
  if (!ranks.ok()) return done(ranks.status());
  WeightUpdateGroup group;
  group.master_address = runtime_.Address(options.trainer.node);
  group.master_port = options.trainer.master_port + (generation_ % 100);
  group.world_size = ranks->world_size;
  group.group_name = StrFormat("libra-weights-%d", generation_++);
  group.backend = options.trainer.group_backend;
  group_ = group;
  members_.clear();
  auto tensors = std::make_shared<std::vector<TensorSpec>>();
  std::vector<AsyncStep> steps;
  const HttpRequest init = trainer_.client().InitWeightUpdateGroup(group);
  steps.push_back([this, init, tensors](Done d) {
    runtime_.transport->Send(init, [this, tensors, d = std::move(d)](Result<HttpResponse> r) {
      if (!r.ok()) return d(r.status());
      Result<std::vector<TensorSpec>> specs = trainer_.client().ParseInitWeightUpdateGroup(*r);
      if (!specs.ok()) return d(specs.status());
      *tensors = std::move(*specs);
      d(Status());
    });
  });
  for (size_t i = 0; i < members.size(); ++i) {
    const int64_t key = members[i];
    const HttpRequest join =
        engines_.at(key).client->InitWeightUpdateGroup(group, ranks->rank_offsets[i]);
    steps.push_back([this, key, join](Done d) {
      runtime_.Control(
          join,
          [this, key, join](const HttpResponse& r) {
            return engines_.at(key).client->ParseAck(join, r);
          },
          std::move(d));
    });
  }
  // An engine that refuses to join fails the sync at once: the trainer's rendezvous would wait
  // for it until its timeout.
  RunAllFailFast(*runtime_.loop, std::move(steps),
                 [this, wanted, members, tensors, version, done = std::move(done)](Status s) {
                   if (!s.ok()) return done(s);
                   members_ = wanted;
                   tensors_ = *tensors;
                   Broadcast(members, version, done);
                 });
}

}  // namespace libra::cluster
