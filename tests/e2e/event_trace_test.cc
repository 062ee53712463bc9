// The quickstart's event trace on the simulator, as a golden: every event the simulated backend
// hands the coordinator, in order, with its time at full precision (the first 150 in the file,
// then how many there were and a hash of them all). The simulations are deterministic, so any
// change to the simulator, the cost model, the coordinator, a router or a planner that moves one
// event shows here; a change meant to keep behaviour (a refactoring, a speed-up) must leave this
// file as it is.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/strings.h"
#include "experiment/coordinator.h"
#include "experiment/runner.h"
#include "model/cost_model.h"
#include "recipe/recipe_parser.h"
#include "sim/cluster_sim.h"
#include "support/components.h"
#include "support/test_util.h"
#include "workload/workload.h"

namespace libra::test {
namespace {

/// One line per event: its time and what it is, numbers at full precision.
std::string Describe(const backend::Event& e) {
  const std::string at = StrFormat("%.17g ", e.at);
  return at + std::visit(
                  [](const auto& w) -> std::string {
                    using T = std::decay_t<decltype(w)>;
                    if constexpr (std::is_same_v<T, backend::TurnDone>) {
                      return StrFormat("turn t%lld i%lld tokens %lld %s reward %.17g started %.17g",
                                       static_cast<long long>(w.trajectory.value),
                                       static_cast<long long>(w.instance.value),
                                       static_cast<long long>(w.generated_tokens),
                                       NameOf(w.end).c_str(), w.reward, w.started_at);
                    } else if constexpr (std::is_same_v<T, backend::ToolDone>) {
                      return StrFormat("tool t%lld %s out %lld started %.17g",
                                       static_cast<long long>(w.trajectory.value),
                                       NameOf(w.status).c_str(),
                                       static_cast<long long>(w.output_tokens), w.started_at);
                    } else if constexpr (std::is_same_v<T, backend::TrainDone>) {
                      return StrFormat("train %d started %.17g", w.step, w.started_at);
                    } else if constexpr (std::is_same_v<T, backend::SyncDone>) {
                      return StrFormat("sync v%d started %.17g", w.version, w.started_at);
                    } else if constexpr (std::is_same_v<T, backend::LayoutApplied>) {
                      return std::string("layout applied");
                    } else {
                      return std::string("other");  // real backends only
                    }
                  },
                  e.what);
}

/// The simulator, with every event it hands out written down.
class TracingBackend : public backend::Backend {
 public:
  TracingBackend(std::unique_ptr<backend::Backend> inner, std::vector<std::string>* lines)
      : inner_(std::move(inner)), lines_(lines) {}
  std::string_view Name() const override { return inner_->Name(); }
  Status Submit(const backend::Action& action) override { return inner_->Submit(action); }
  Result<std::vector<backend::Event>> Wait() override {
    LIBRA_ASSIGN_OR_RETURN(std::vector<backend::Event> events, inner_->Wait());
    for (const backend::Event& e : events) lines_->push_back(Describe(e));
    return events;
  }
  std::optional<int64_t> OracleTrajectoryTokens(const backend::StartTurn& turn) const override {
    return inner_->OracleTrajectoryTokens(turn);
  }
  std::optional<double> RolloutBusyGpuSeconds() const override {
    return inner_->RolloutBusyGpuSeconds();
  }

 private:
  std::unique_ptr<backend::Backend> inner_;
  std::vector<std::string>* lines_;
};

class NullRecorder : public experiment::Recorder {
 public:
  Status RecordStep(const records::StepBatch&) override { return Status(); }
};

/// The system's events on the simulator: how many, their hash, and the first 150.
std::string Trace(const recipe::Recipe& r, const recipe::SystemSpec& system,
                  const workload::Workload& workload, const model::CostModel& cost) {
  std::vector<std::string> lines;
  const experiment::Components factory = test::WithBackend(
      [&lines](const recipe::Recipe& recipe, const workload::Workload& w, const model::CostModel& c,
               const experiment::BackendContext&) -> Result<std::unique_ptr<backend::Backend>> {
        return std::unique_ptr<backend::Backend>(std::make_unique<TracingBackend>(
            std::make_unique<sim::ClusterSim>(recipe.sim, w, c), &lines));
      });
  NullRecorder recorder;
  auto summary = experiment::RunCoordinator(r, system, workload, cost, cost, factory, {},
                                            std::nullopt, recorder, {}, {});
  EXPECT_OK(summary);
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a over every line
  for (const std::string& line : lines) {
    for (unsigned char ch : line + "\n") hash = (hash ^ ch) * 1099511628211ULL;
  }
  std::string text =
      StrFormat("system %s, %d steps, %zu events, FNV-1a %016llx\n", system.name.c_str(), r.steps,
                lines.size(), static_cast<unsigned long long>(hash));
  for (size_t i = 0; i < lines.size() && i < 150; ++i) text += lines[i] + "\n";
  return text;
}

TEST(EventTraceTest, TheQuickstartsEventsOnTheSimulatorAreGolden) {
  auto parsed = recipe::ParseRecipeFile(SourcePath("recipes/quickstart.toml"), {"steps=3"});
  ASSERT_OK(parsed);
  const recipe::Recipe& r = parsed->recipe;
  auto workload = workload::MakeWorkload(r.workload, r.seed).value();
  auto cost = model::MakeCostModel(r).value();
  std::string text;
  // The recipe's own system, and Libra (its planner re-plans, C-MLFQ routes).
  for (const recipe::SystemSpec* system : experiment::AllSystems(r)) {
    if (system != &r.system && system->name != "libra") continue;
    text += Trace(r, *system, *workload, *cost);
  }
  ExpectGolden("sim/quickstart_event_trace.txt",
               "every event the simulator hands the coordinator on the quickstart, 3 steps, for "
               "its own system and for libra",
               text);
}

}  // namespace
}  // namespace libra::test
