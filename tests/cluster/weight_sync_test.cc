// WeightSync against fake engines and a fake trainer: the start version saved, a disk sync that
// every serving engine reloads, and a distributed sync whose group is set up once per set of
// serving engines, and one that an engine refuses failing at once. No torch needed.
#include "cluster/weight_sync.h"

#include "cluster/fake_cluster.h"
#include "gtest/gtest.h"

namespace libra::test {
namespace {

class WeightSyncTest : public ::testing::Test {
 protected:
  WeightSyncTest()
      : engines_(f_.loop.get(), f_.options.engine.base_port, 4),
        trainer_server_(f_.loop.get(), f_.options.trainer.port),
        supervisor_(f_.runtime, versions_),
        trainer_(f_.runtime, 0),
        sync_(f_.runtime, supervisor_, trainer_, versions_) {
    trainer_.Start();
    EXPECT_TRUE(f_.RunUntil([&] { return trainer_.ready(); }));
    std::optional<Status> saved;
    sync_.SaveInitial(0, [&](Status s) { saved = s; });
    EXPECT_TRUE(f_.RunUntil([&] { return saved.has_value(); }));
    EXPECT_TRUE(saved->ok()) << saved->message();
  }

  int64_t Started(int first) {
    const int64_t key = supervisor_.Add(backend::InstanceSpec{InstanceId(0), 1, 0, first}).key;
    std::optional<Status> ready;
    supervisor_.Launch(key, [&](Status s) { ready = s; });
    EXPECT_TRUE(f_.RunUntil([&] { return ready.has_value(); }));
    return key;
  }

  Status Sync(int version) {
    std::optional<Status> done;
    sync_.Sync(version, [&](Status s) { done = s; });
    EXPECT_TRUE(f_.RunUntil([&] { return done.has_value(); }));
    return done.value_or(Status::Internal("no answer"));
  }

  FakeRuntime f_;
  FakeEngines engines_;
  FakeTrainer trainer_server_;
  cluster::WeightVersions versions_;
  cluster::EngineSupervisor supervisor_;
  cluster::TrainerSupervisor trainer_;
  cluster::WeightSync sync_;
};

TEST_F(WeightSyncTest, TheStartVersionIsSavedAsPolicyAndCheckpoint) {
  EXPECT_TRUE(std::filesystem::exists(f_.runtime.PolicyPath()));
  EXPECT_TRUE(std::filesystem::exists(f_.runtime.CheckpointPath(0)));
}

TEST_F(WeightSyncTest, DiskSyncReloadsEveryServingEngine) {
  const int64_t a = Started(0);
  const int64_t b = Started(1);
  ASSERT_TRUE(Sync(1).ok());
  EXPECT_EQ(versions_.policy, 1);
  EXPECT_EQ(engines_.Count("/update_weights_from_disk"), 2);
  EXPECT_EQ(supervisor_.at(a).weights, 1);
  EXPECT_EQ(supervisor_.at(b).weights, 1);
  const Received& last = engines_.received.back();
  EXPECT_EQ(last.body.Find("model_path")->as_string(), f_.runtime.PolicyPath());
  EXPECT_EQ(last.body.Find("weight_version")->as_string(), "1");
}

TEST_F(WeightSyncTest, DistributedSyncSetsUpItsGroupOncePerServingSet) {
  f_.options.trainer.weight_sync = cluster::WeightSyncMode::kDistributed;
  f_.options.engine.group_rank_per_gpu = false;
  const int64_t a = Started(0);
  Started(1);
  ASSERT_TRUE(Sync(1).ok());
  ASSERT_TRUE(Sync(2).ok());
  EXPECT_EQ(trainer_server_.Count("/init_weight_update_group"), 1);
  EXPECT_EQ(trainer_server_.Count("/broadcast_weights"), 2);
  EXPECT_EQ(engines_.Count("/init_weights_update_group"), 2);
  EXPECT_EQ(engines_.Count("/update_weights_from_distributed"), 4);
  EXPECT_EQ(supervisor_.at(a).weights, 2);
  // Another serving set: a new group.
  sync_.Invalidate();
  ASSERT_TRUE(Sync(3).ok());
  EXPECT_EQ(trainer_server_.Count("/init_weight_update_group"), 2);
}

TEST_F(WeightSyncTest, AnEngineThatRefusesTheGroupFailsTheSyncWithoutWaitingForTheTrainer) {
  // Issue 21: the trainer's side of the group waits for every rank (a real one until its
  // rendezvous timeout, minutes); an engine that refuses to join fails the sync at once.
  f_.options.trainer.weight_sync = cluster::WeightSyncMode::kDistributed;
  f_.options.engine.group_rank_per_gpu = false;
  Started(0);
  trainer_server_.control = [](const std::string& path) -> std::optional<TestHttpReply> {
    if (path != "/init_weight_update_group") return std::nullopt;
    TestHttpReply never;
    never.kind = TestHttpReply::Kind::kSilent;
    return never;
  };
  engines_.control = [](int, const std::string& path) -> std::optional<TestHttpReply> {
    if (path != "/init_weights_update_group") return std::nullopt;
    return FakeEngines::NotFound();
  };
  const Status s = Sync(1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/init_weights_update_group"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace libra::test
