// The Slurm launcher against a real Slurm: Debian's slurmctld, slurmd and munge, started on this
// machine by scripts/slurm-local.sh (scripts/test.sh does it in CI, as root, and exports
// SLURM_CONF). Skipped where no Slurm controller answers.
#include "cluster/slurm_launcher.h"

#include <cstdlib>
#include <memory>
#include <optional>

#include "cluster/cluster_test_util.h"
#include "cluster/event_loop.h"
#include "cluster/process.h"
#include "gtest/gtest.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

using cluster::SlurmAllocation;
using cluster::SlurmLauncher;

// Why Slurm cannot be used here, or nullopt when a controller answers.
std::optional<std::string> SlurmUnavailable() {
  if (std::getenv("SLURM_CONF") == nullptr) {
    return "no SLURM_CONF (scripts/slurm-local.sh starts a local Slurm)";
  }
  if (std::system("sinfo -h >/dev/null 2>&1") != 0) return "sinfo fails: no Slurm controller";
  return std::nullopt;
}

class SlurmLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = SlurmUnavailable()) GTEST_SKIP() << *why;
    auto loop = cluster::EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    processes_ = std::make_unique<cluster::ProcessSet>(loop_.get());
    cluster::SlurmOptions options;
    options.allocation_timeout = std::chrono::seconds(120);
    auto allocation = SlurmAllocation::Acquire(options, 1);
    ASSERT_TRUE(allocation.ok()) << allocation.status().message();
    allocation_ = *allocation;
    ASSERT_EQ(allocation_->nodes().size(), 1u);
  }
  void TearDown() override {
    if (processes_) processes_->StopAll(std::chrono::milliseconds(10000));
  }

  std::optional<cluster::ExitStatus> RunToEnd(const cluster::ProcessSpec& spec) {
    SlurmLauncher launcher(allocation_, allocation_->nodes()[0]);
    auto wrapped = launcher.Wrap(spec);
    EXPECT_TRUE(wrapped.ok()) << wrapped.status().message();
    std::optional<cluster::ExitStatus> exit;
    auto id = processes_->Spawn(*wrapped, [&](const cluster::ExitStatus& s) { exit = s; });
    EXPECT_TRUE(id.ok()) << id.status().message();
    EXPECT_TRUE(loop_
                    ->RunUntil([&] { return exit.has_value(); },
                               cluster::EventLoop::Clock::now() + std::chrono::seconds(120))
                    .ok());
    return exit;
  }

  ScopedTempDir dir_;
  std::unique_ptr<cluster::EventLoop> loop_;
  std::unique_ptr<cluster::ProcessSet> processes_;
  std::shared_ptr<SlurmAllocation> allocation_;
};

TEST_F(SlurmLauncherTest, AStepRunsOnItsNodeWithItsVariablesAndLogs) {
  cluster::ProcessSpec spec =
      Shell("echo-step", "echo \"$GREETING from $SLURM_STEP_ID\"; exit 3", dir_.File("logs"));
  spec.env["GREETING"] = "hello; $(no shell)";
  const std::optional<cluster::ExitStatus> exit = RunToEnd(spec);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code, 3);
  EXPECT_NE(ReadIfExists(dir_.File("logs/echo-step.out")).find("hello; $(no shell) from"),
            std::string::npos)
      << ReadIfExists(dir_.File("logs/echo-step.err"));
}

TEST_F(SlurmLauncherTest, StoppingTheProcessEndsItsStep) {
  SlurmLauncher launcher(allocation_, allocation_->nodes()[0]);
  // The step's command has a child of its own, which must end with the step too.
  const std::string child_pid = dir_.File("child.pid");
  auto wrapped = launcher.Wrap(
      Shell("sleeper", "sh -c 'echo $$ > " + child_pid + "; exec sleep 300'", dir_.File("logs")));
  ASSERT_TRUE(wrapped.ok());
  std::optional<cluster::ExitStatus> exit;
  auto id = processes_->Spawn(*wrapped, [&](const cluster::ExitStatus& s) { exit = s; });
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(Eventually(
      [&] {
        auto steps = allocation_->Steps();
        return steps.ok() && steps->size() == 1;
      },
      std::chrono::seconds(60)));
  ASSERT_TRUE(Eventually([&] { return !ReadIfExists(child_pid).empty(); }));
  const pid_t child = std::stoi(ReadIfExists(child_pid));
  processes_->Stop(*id, std::chrono::milliseconds(10000));
  ASSERT_TRUE(loop_
                  ->RunUntil([&] { return exit.has_value(); },
                             cluster::EventLoop::Clock::now() + std::chrono::seconds(60))
                  .ok());
  EXPECT_TRUE(Eventually(
      [&] {
        auto steps = allocation_->Steps();
        return steps.ok() && steps->empty();
      },
      std::chrono::seconds(60)));
  EXPECT_TRUE(Eventually([&] { return !IsAlive(child); }, std::chrono::seconds(60)))
      << "the step's child " << child << " outlived it";
}

TEST_F(SlurmLauncherTest, TheAllocationLibraRequestedIsReleasedWithItsSteps) {
  // The launcher shares the allocation: it goes with libra's end too.
  auto launcher = std::make_unique<SlurmLauncher>(allocation_, allocation_->nodes()[0]);
  auto wrapped = launcher->Wrap(Shell("left", "sleep 300", dir_.File("logs")));
  ASSERT_TRUE(wrapped.ok());
  auto id = processes_->Spawn(*wrapped, [](const cluster::ExitStatus&) {});
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(Eventually(
      [&] {
        auto steps = allocation_->Steps();
        return steps.ok() && steps->size() == 1;
      },
      std::chrono::seconds(60)));
  const std::string job = allocation_->job_id();
  launcher.reset();
  allocation_.reset();  // libra ends with a step still running
  const std::string command = "squeue -h -j " + job + " 2>/dev/null | grep -q .";
  EXPECT_TRUE(
      Eventually([&] { return std::system(command.c_str()) != 0; }, std::chrono::seconds(60)))
      << "job " << job << " is still known to Slurm";
}

}  // namespace
}  // namespace libra::test
