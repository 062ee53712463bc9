#include "experiment/runner.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <string_view>

#include "common/files.h"
#include "common/strings.h"
#include "libra/config.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "recipe/limits.h"
#include "sched/la_mlfq.h"
#include "sched/least_conn.h"
#include "sched/length_aware.h"
#include "sched/oracle_length.h"
#include "sched/round_robin.h"
#include "sched/router.h"
#include "sched/sorted.h"
#include "store/run_owner.h"

namespace libra::experiment {
namespace {

/// Writes each step to the store as it finishes.
class StoreRecorder : public Recorder {
 public:
  StoreRecorder(store::Store& store, int64_t run_id) : store_(store), run_id_(run_id) {}

  Status RecordStep(const records::StepBatch& batch) override {
    return store_.RecordStep(run_id_, batch);
  }
  Status RecordEval(int version, double score) override {
    return store_.RecordEval(run_id_, version, score);
  }

 private:
  store::Store& store_;
  int64_t run_id_;
};

/// Resuming by replay: the steps already recorded are run again and checked against their
/// records instead of being recorded twice; the rest are recorded.
class ReplayRecorder : public Recorder {
 public:
  ReplayRecorder(store::Store& store, int64_t run_id, std::vector<records::StepRecord> recorded)
      : inner_(store, run_id), run_id_(run_id), recorded_(std::move(recorded)) {}

  Status RecordStep(const records::StepBatch& batch) override {
    const auto index = static_cast<size_t>(batch.step.step);
    if (index >= recorded_.size()) return inner_.RecordStep(batch);
    const records::StepRecord& was = recorded_[index];
    const records::StepRecord& now = batch.step;
    if (was.trajectories != now.trajectories || was.generated_tokens != now.generated_tokens ||
        std::abs(was.end_s - now.end_s) > 1e-6 * std::max(1.0, std::abs(was.end_s))) {
      return Status::Internal(StrFormat(
          "cannot resume run %lld: replaying step %d gave %d trajectories, %lld tokens, end "
          "%.6f s; the record says %d, %lld, %.6f s (was it recorded by another libra version "
          "or another recipe?)",
          static_cast<long long>(run_id_), now.step, now.trajectories,
          static_cast<long long>(now.generated_tokens), now.end_s, was.trajectories,
          static_cast<long long>(was.generated_tokens), was.end_s));
    }
    return Status();
  }
  Status RecordEval(int version, double score) override {
    return inner_.RecordEval(version, score);
  }

 private:
  StoreRecorder inner_;
  int64_t run_id_;
  std::vector<records::StepRecord> recorded_;
};

/// Where a run resumed from a checkpoint continues, from its records.
Result<ResumeState> ResumeStateOf(store::Store& store, int64_t run_id,
                                  const std::vector<records::StepRecord>& steps,
                                  int prompts_per_step) {
  ResumeState state;
  state.steps_done = static_cast<int>(steps.size());
  state.elapsed_s = steps.empty() ? 0 : steps.back().end_s;
  state.next_prompt = static_cast<int64_t>(state.steps_done) * prompts_per_step;
  for (const records::StepRecord& step : steps) state.trajectories += step.trajectories;
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::TrajectoryRecord> trajectories,
                         store.Trajectories(run_id));
  for (const records::TrajectoryRecord& t : trajectories) {
    state.next_prompt = std::max(state.next_prompt, t.prompt + 1);
    state.next_trajectory = std::max(state.next_trajectory, t.id + 1);
  }
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::EventRecord> events, store.Events(run_id));
  for (const records::EventRecord& e : events) {
    state.next_event_seq = std::max(state.next_event_seq, e.seq + 1);
  }
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::DecisionRecord> decisions, store.Decisions(run_id));
  for (const records::DecisionRecord& d : decisions) {
    state.next_decision_seq = std::max(state.next_decision_seq, d.seq + 1);
  }
  return state;
}

/// Adds `d` unless its key already has a diagnostic (a field is reported once).
void Add(recipe::Diagnostic d, std::vector<recipe::Diagnostic>* diagnostics) {
  const std::string key = d.what.substr(0, d.what.find(':') + 1);
  for (const recipe::Diagnostic& e : *diagnostics) {
    if (!key.empty() && StartsWith(e.what, key)) return;
  }
  diagnostics->push_back(std::move(d));
}

/// Splits a multi-line kInvalidRecipe message ("where: what" per line) into diagnostics.
void AppendStatus(const Status& status, const std::string& fallback_where,
                  std::vector<recipe::Diagnostic>* diagnostics) {
  for (const std::string& line : StrSplit(status.message(), '\n')) {
    // "file:line:col: key: what" -> where = "file:line:col".
    size_t colon = std::string::npos;
    int seen = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == ':' && ++seen == 3) {
        colon = i;
        break;
      }
    }
    if (status.code() == StatusCode::kInvalidRecipe && colon != std::string::npos &&
        colon + 2 <= line.size()) {
      Add(recipe::Diagnostic{line.substr(0, colon), line.substr(colon + 2)}, diagnostics);
    } else {
      Add(recipe::Diagnostic{fallback_where, line}, diagnostics);
    }
  }
}

/// The decode floor of `tokens` generated one after another from a context of `context`: the
/// trapezoid over the first and the last token's contexts, at most the sum over every token (the
/// cost model's decode floor is affine, roofline, or concave, reference, in the context).
double DecodeFloorGpuSeconds(const model::CostModel& cost, int64_t context, int64_t tokens,
                             int max_num_seqs) {
  if (tokens <= 0) return 0;
  return static_cast<double>(tokens) / 2 *
         (cost.DecodeGpuSecondsLowerBound(context, max_num_seqs) +
          cost.DecodeGpuSecondsLowerBound(context + tokens - 1, max_num_seqs));
}

/// Whether `system` trains stream batches (the first groups to finish).
bool StreamBatches(const recipe::Recipe& recipe, const recipe::SystemSpec& system) {
  return recipe.BatchingFor(system) == recipe::Batching::kStream;
}

/// Where `router` sends a turn that returns from a tool call, as the planner's rollout model
/// sees it (docs/planner.md, "Routers without turn affinity"): round-robin in rotation;
/// least-conn, and the length-based routers, which place a turn on the least loaded instance
/// they admit it to, by load; C-MLFQ (and heddle, whose own planner reads no model) kept.
planner::ReturnPlacement ReturnsOf(std::string_view router) {
  if (router == sched::kRoundRobinName) return planner::ReturnPlacement::kRotated;
  for (const std::string_view by_load :
       {sched::kLeastConnName, sched::kSortedName, sched::kLengthAwareName,
        sched::kOracleLengthName, sched::kLaMlfqName}) {
    if (router == by_load) return planner::ReturnPlacement::kLeastLoaded;
  }
  return planner::ReturnPlacement::kKept;
}

}  // namespace

std::vector<const recipe::SystemSpec*> AllSystems(const recipe::Recipe& recipe) {
  std::vector<const recipe::SystemSpec*> systems = {&recipe.system};
  for (const recipe::SystemSpec& b : recipe.baselines) systems.push_back(&b);
  return systems;
}

planner::PlanContext MakePlanContext(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                                     const model::CostModel* cost,
                                     std::optional<SequenceSizes> sizes) {
  planner::PlanContext context;
  context.nodes = recipe.cluster.nodes;
  context.gpus_per_node = recipe.cluster.gpus_per_node;
  context.batch_trajectories = recipe.rl.prompts_per_step * recipe.rl.group_size;
  context.staleness = recipe.StalenessFor(system);
  context.cost = cost;
  context.steps = recipe.steps;
  context.sync_path = recipe.sim.sync_path;
  context.max_num_seqs = recipe.sim.max_num_seqs;
  context.sync_interval = recipe.rl.sync_interval;
  context.kv_policy = recipe.sim.kv_policy;
  context.returns = ReturnsOf(system.router);
  context.stream_batches = StreamBatches(recipe, system);
  context.group_size = std::max(1, recipe.rl.group_size);
  if (sizes) {
    if (context.stream_batches) context.group_profile = sizes->group_profile;
    context.typical_sequence_tokens = sizes->typical;
    context.max_sequence_tokens = sizes->max;
    context.history = sizes->profile;
    context.tool_latencies_s = sizes->profile_tool_latencies_s;
  }
  return context;
}

SequenceSizes SampleSequenceSizes(const workload::Workload& workload, int group_size, int steps,
                                  bool groups) {
  constexpr int kSamples = 1024;
  const int group = std::max(1, group_size);
  double total = 0;
  SequenceSizes sizes;
  for (int i = 0; i < kSamples; ++i) {
    const int version =
        steps <= 1 ? 0 : static_cast<int>(static_cast<int64_t>(i) * steps / kSamples);
    const workload::TrajectoryScript script =
        workload.Script(i / group, i % group, version, workload.skill_params().initial);
    const int64_t tokens = workload.Prompt(i / group).prompt_tokens + script.generated_tokens() +
                           script.tool_output_tokens();
    total += static_cast<double>(tokens);
    sizes.max = std::max(sizes.max, tokens);
  }
  sizes.typical = std::max<int64_t>(1, static_cast<int64_t>(total / kSamples));
  // A sample can miss the tail; a capped context bounds it for sure.
  if (const std::optional<int64_t> cap = workload.MaxContextTokens()) sizes.max = *cap;
  // The startup profile: prompts far beyond any run's, at the initial policy, one trajectory
  // each. A prompt sets its samples' difficulty, so the recipe's groups would make it a sample of
  // kProfile / group_size prompts; 1,024 keep the predicted step within a few percent from one
  // seed to the next (docs/planner.md, "The startup profile was 32 prompts").
  constexpr int kProfile = 1024;
  constexpr int64_t kFirstProfilePrompt = int64_t{1} << 40;
  auto size_of = [&](int64_t prompt, int sample, std::vector<double>* tool_latencies) {
    const workload::TrajectoryScript script =
        workload.Script(prompt, sample, 0, workload.skill_params().initial);
    planner::TrajectorySize size{workload.Prompt(prompt).prompt_tokens, script.generated_tokens(),
                                 script.tool_output_tokens()};
    size.turns = static_cast<int>(script.turns.size());
    for (const workload::TurnScript& turn : script.turns) {
      if (turn.end != workload::TurnEnd::kToolCall) continue;
      size.tool_s += turn.tool_latency_s;
      if (tool_latencies != nullptr) tool_latencies->push_back(turn.tool_latency_s);
    }
    return size;
  };
  for (int i = 0; i < kProfile; ++i) {
    sizes.profile.push_back(size_of(kFirstProfilePrompt + i, 0, &sizes.profile_tool_latencies_s));
  }
  // Stream batches reject whole groups, by their slowest sample: 256 groups of the prompts after
  // the profile's, each with all its samples (docs/planner.md, "Stream batches").
  constexpr int kGroupProfile = 256;
  for (int i = 0; groups && i < kGroupProfile; ++i) {
    for (int s = 0; s < group; ++s) {
      sizes.group_profile.push_back(size_of(kFirstProfilePrompt + kProfile + i, s, nullptr));
    }
  }
  return sizes;
}

bool AnyStreamBatches(const recipe::Recipe& recipe) {
  const std::vector<const recipe::SystemSpec*> systems = AllSystems(recipe);
  return std::any_of(systems.begin(), systems.end(), [&](const recipe::SystemSpec* system) {
    return StreamBatches(recipe, *system);
  });
}

double PerfectBalanceBound(const recipe::Recipe& recipe, const model::CostModel& cost,
                           const workload::Workload& workload) {
  // Trajectories sampled evenly over the run's prompts, each at the policy version of its step
  // (the workload drifts with them); the first few dozen prompts of a long-tailed workload left
  // the bound 2x apart between seeds.
  constexpr int64_t kSamples = 1024;
  const int group = std::max(1, recipe.rl.group_size);
  const int64_t per_step = std::max(1, recipe.rl.prompts_per_step);
  const int64_t prompts = std::max<int64_t>(1, per_step * std::max(1, recipe.steps));
  const model::TrainPasses passes;
  double rollout = 0;
  double train = 0;
  for (int64_t i = 0; i < kSamples; ++i) {
    const int64_t prompt = i * prompts / kSamples;
    const int sample = static_cast<int>(i % group);
    const int64_t prompt_tokens = workload.Prompt(prompt).prompt_tokens;
    const workload::TrajectoryScript script = workload.Script(
        prompt, sample, static_cast<int>(prompt / per_step), workload.skill_params().initial);
    // Every token of context is prefilled at least once; every generated token is decoded at
    // its context, at the best batching the engine allows.
    int64_t context = prompt_tokens;
    double gpu_s = static_cast<double>(prompt_tokens) * cost.PrefillGpuSecondsLowerBound();
    for (const workload::TurnScript& turn : script.turns) {
      gpu_s += DecodeFloorGpuSeconds(cost, context, turn.generated_tokens, recipe.sim.max_num_seqs);
      context += turn.generated_tokens + turn.tool_output_tokens;
      gpu_s += static_cast<double>(turn.tool_output_tokens) * cost.PrefillGpuSecondsLowerBound();
    }
    rollout += gpu_s;
    train += cost.TrainGpuSecondsLowerBound(context, passes);
  }
  const double per_trajectory = (rollout + train) / kSamples;
  return per_trajectory > 0 ? recipe.cluster.total_gpus() / per_trajectory : 0;
}

double TrajectoryFloorGpuSeconds(const model::CostModel& cost, const planner::TrajectorySize& size,
                                 int group_size, int max_num_seqs) {
  // The k-th generated token is decoded at a context of at least prompt + k.
  const double decode =
      DecodeFloorGpuSeconds(cost, size.prompt_tokens, size.generated_tokens, max_num_seqs);
  // A prompt's prefill may be shared by its group's samples (the prefix cache); tool outputs
  // are each trajectory's own.
  const double prefilled = static_cast<double>(size.prompt_tokens) / std::max(1, group_size) +
                           static_cast<double>(size.tool_tokens);
  return prefilled * cost.PrefillGpuSecondsLowerBound() + decode +
         cost.TrainGpuSecondsLowerBound(size.total(), model::TrainPasses{});
}

void ValidateWithRegistries(const recipe::Recipe& recipe, const Components& parts,
                            std::vector<recipe::Diagnostic>* diagnostics, bool plan_systems) {
  // The sampled workload and the plans are only worked out for a recipe whose fields are all
  // sound (a planner given an oversized cluster could run for minutes), and the cost model for a
  // cluster within libra's limits.
  const bool sound = diagnostics->empty();
  std::unique_ptr<model::CostModel> cost;
  if (recipe.cluster.gpus_per_node >= 1 &&
      recipe.cluster.gpus_per_node <= recipe::kMaxGpusPerNode && recipe.cluster.nodes >= 1 &&
      recipe.cluster.nodes <= recipe::kMaxNodes) {
    auto made = model::MakeCostModel(recipe);
    if (made.ok()) {
      cost = std::move(made).value();
    } else {
      AppendStatus(made.status(), recipe.Where("cost_model"), diagnostics);
    }
  }
  std::unique_ptr<workload::Workload> workload;
  if (auto made = workload::MakeWorkload(recipe.workload, recipe.seed); made.ok()) {
    workload = std::move(made).value();
  } else {
    AppendStatus(made.status(), recipe.Where("workload"), diagnostics);
  }
  std::optional<SequenceSizes> sizes;
  if (workload && sound) {
    sizes = SampleSequenceSizes(*workload, recipe.rl.group_size, recipe.steps,
                                AnyStreamBatches(recipe));
  }
  for (const recipe::SystemSpec* system : AllSystems(recipe)) {
    const std::string router_key = system->path + ".router";
    const std::string planner_key = system->path + ".planner";
    const sched::RouterRegistry& routers = *parts.routers;
    if (!routers.Contains(system->router)) {
      Add({recipe.Where(router_key), router_key + ": " + routers.UnknownMessage(system->router)},
          diagnostics);
    } else if (auto r = routers.Create(system->router, system->router_options,
                                       RouterDepsFor(cost.get()));
               !r.ok()) {
      AppendStatus(r.status(), recipe.Where(router_key), diagnostics);
    }
    const planner::PlannerRegistry& planners = *parts.planners;
    if (!planners.Contains(system->planner)) {
      Add({recipe.Where(planner_key),
           planner_key + ": " + planners.UnknownMessage(system->planner)},
          diagnostics);
      continue;
    }
    auto p = planners.Create(system->planner, system->planner_options);
    if (!p.ok()) {
      AppendStatus(p.status(), recipe.Where(planner_key), diagnostics);
      continue;
    }
    // Without a cluster or a cost model (already reported) a plan says nothing more.
    if (!plan_systems || !sound || !cost) continue;
    auto plan = (*p)->Initial(MakePlanContext(recipe, *system, cost.get(), sizes));
    if (!plan.ok()) {
      Add(recipe::Diagnostic{recipe.Where(system->path + ".planner_options"),
                             system->path + ".planner_options: no plan fits the cluster: " +
                                 plan.status().message()},
          diagnostics);
    }
  }
}

namespace {

/// Drops what a run produces: a simulation whose outcome is only its summary.
class NullRecorder : public Recorder {
 public:
  Status RecordStep(const records::StepBatch&) override { return Status(); }
  bool KeepsTurns() const override { return false; }
};

}  // namespace

Result<RunSummary> RunCoordinator(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                                  const workload::Workload& workload, const model::CostModel& cost,
                                  const model::CostModel& plan_cost, const Components& parts,
                                  const BackendContext& context, std::optional<ResumeState> resume,
                                  Recorder& recorder, const std::function<bool()>& interrupted,
                                  const std::function<void(const Progress&)>& progress) {
  LIBRA_ASSIGN_OR_RETURN(auto router, parts.routers->Create(system.router, system.router_options,
                                                            RouterDepsFor(&plan_cost)));
  LIBRA_ASSIGN_OR_RETURN(auto planner,
                         parts.planners->Create(system.planner, system.planner_options));
  LIBRA_ASSIGN_OR_RETURN(auto backend, parts.make_backend(recipe, workload, cost, context));
  CoordinatorConfig config;
  config.resume = std::move(resume);
  config.steps = recipe.steps;
  config.prompts_per_step = recipe.rl.prompts_per_step;
  config.group_size = recipe.rl.group_size;
  config.staleness = recipe.StalenessFor(system);
  config.stream_batches = StreamBatches(recipe, system);
  config.partial_rollout = recipe.PartialRolloutFor(system);
  config.objective = recipe.ObjectiveFor(system);
  config.eval_interval = recipe.eval.interval;
  config.eval_prompts = recipe.eval.prompts;
  config.sync_interval = recipe.rl.sync_interval;
  config.plan = MakePlanContext(
      recipe, system, &plan_cost,
      SampleSequenceSizes(workload, recipe.rl.group_size, recipe.steps, config.stream_batches));
  config.record_events = recipe.sim.record_events;
  if (recipe.Simulated()) {
    // Fidelity: the simulator and its cost model must agree (a real cluster has no such floor).
    config.trajectory_floor_gpu_s = [&cost, &recipe](const planner::TrajectorySize& size) {
      return TrajectoryFloorGpuSeconds(cost, size, recipe.rl.group_size, recipe.sim.max_num_seqs);
    };
  }
  Coordinator coordinator(config, workload, *router, *planner, *backend, recorder);
  return coordinator.Run(interrupted, progress);
}

Result<RunSummary> SimulateSystem(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                                  const Components& parts,
                                  const std::function<bool()>& interrupted) {
  LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(recipe.workload, recipe.seed));
  LIBRA_ASSIGN_OR_RETURN(auto cost, model::MakeCostModel(recipe));
  NullRecorder recorder;
  return RunCoordinator(recipe, system, *workload, *cost, *cost, parts, BackendContext{},
                        std::nullopt, recorder, interrupted, {});
}

Status CheckInitialPlan(const recipe::Recipe& recipe, const recipe::SystemSpec& system,
                        const Components& parts) {
  LIBRA_ASSIGN_OR_RETURN(auto workload, workload::MakeWorkload(recipe.workload, recipe.seed));
  LIBRA_ASSIGN_OR_RETURN(auto cost, model::MakeCostModel(recipe));
  LIBRA_ASSIGN_OR_RETURN(auto planner,
                         parts.planners->Create(system.planner, system.planner_options));
  LIBRA_ASSIGN_OR_RETURN(planner::Plan plan,
                         planner->Initial(MakePlanContext(
                             recipe, system, cost.get(),
                             SampleSequenceSizes(*workload, recipe.rl.group_size, recipe.steps,
                                                 StreamBatches(recipe, system)))));
  (void)plan;
  return Status();
}

std::string NowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

namespace {

/// OK when `run`, recorded as running, may be resumed: its libra is gone from this host, or
/// `take_over` says it is gone from another. Otherwise why not, and what to do.
Status CheckAbandoned(const records::RunInfo& run, bool take_over) {
  const long long id = static_cast<long long>(run.id);
  switch (store::CheckOwner(run.owner)) {
    case store::OwnerState::kGone:
      return Status();
    case store::OwnerState::kAlive:
      return Status::InvalidArgument(
          StrFormat("run %lld is still being recorded by libra %s; wait for it, or stop it "
                    "(Ctrl-C or kill %lld) and resume then",
                    id, run.owner.ToString().c_str(), static_cast<long long>(run.owner.pid)));
    case store::OwnerState::kUnknown:
      break;
  }
  if (take_over) return Status();
  const std::string who =
      run.owner.pid > 0 ? "libra " + run.owner.ToString() : "a libra that recorded no process id";
  return Status::InvalidArgument(StrFormat(
      "run %lld is recorded as running by %s, which this libra cannot check; resume it on that "
      "host, or, once sure that libra is gone, here with --take-over",
      id, who.c_str()));
}

/// What a run records about itself when it begins.
records::RunInfo RunInfoFor(const RunRequest& request) {
  const recipe::Recipe& recipe = *request.recipe;
  const recipe::SystemSpec& system = *request.system;
  records::RunInfo info;
  info.name = recipe.name;
  info.system = system.name;
  info.router = system.router;
  info.planner = system.planner;
  info.backend = NameOf(recipe.backend);
  info.seed = recipe.seed;
  info.steps_planned = recipe.steps;
  info.gpus = recipe.cluster.total_gpus();
  info.recipe_source = recipe.source;
  info.recipe_toml = recipe.effective_toml;
  info.resolved_recipe = request.resolved_recipe;
  info.git_revision = LIBRA_GIT_REVISION;
  info.libra_version = LIBRA_VERSION;
  info.started_at = NowIso8601();
  info.comparison_id = request.comparison_id;
  info.configuration = request.configuration;
  info.tuning_id = request.tuning_id;
  info.scenario = request.scenario;
  info.staleness = recipe.StalenessFor(system);
  info.owner = store::ThisProcess();
  return info;
}

/// The run as the store holds it once this libra owns it, and the steps it recorded before (a
/// resumed run's).
struct OpenedRun {
  records::RunInfo info;
  std::vector<records::StepRecord> recorded;
};

/// Begins the run, or reopens the one to resume (refusing one that is complete, of another
/// system, or still owned by a live libra).
Result<OpenedRun> OpenRun(store::Store& store, const RunRequest& request,
                          const records::RunInfo& info) {
  OpenedRun opened;
  int64_t run_id = 0;
  if (request.resume_run) {
    run_id = *request.resume_run;
    LIBRA_ASSIGN_OR_RETURN(records::RunInfo was, store.GetRun(run_id));
    if (was.status == records::kRunOk) {
      return Status::InvalidArgument(StrFormat(
          "run %lld is complete: only an interrupted or failed run, or one whose libra died, can "
          "be resumed",
          static_cast<long long>(run_id)));
    }
    if (was.status == records::kRunRunning) {
      LIBRA_RETURN_IF_ERROR(CheckAbandoned(was, request.take_over));
    }
    if (was.system != request.system->name) {
      return Status::InvalidArgument(StrFormat("run %lld ran system '%s', not '%s'",
                                               static_cast<long long>(run_id), was.system.c_str(),
                                               request.system->name.c_str()));
    }
    LIBRA_ASSIGN_OR_RETURN(opened.recorded, store.Steps(run_id));
    LIBRA_RETURN_IF_ERROR(store.ReopenRun(was, info.owner));
  } else {
    LIBRA_ASSIGN_OR_RETURN(run_id, store.BeginRun(info));
    if (request.comparison_id) {
      LIBRA_RETURN_IF_ERROR(store.AddToComparison(*request.comparison_id, run_id));
    }
  }
  LIBRA_ASSIGN_OR_RETURN(opened.info, store.GetRun(run_id));
  return opened;
}

/// Runs the opened run to its end: a resumed simulation replays its recorded steps, a resumed
/// real run starts from its last checkpoint.
Result<RunSummary> Execute(store::Store& store, const RunRequest& request, const OpenedRun& run,
                           Result<std::unique_ptr<workload::Workload>> made_workload,
                           Result<std::unique_ptr<model::CostModel>> made_cost,
                           const Components& parts) {
  const recipe::Recipe& recipe = *request.recipe;
  const int64_t run_id = run.info.id;
  const bool replay = recipe.Simulated();
  LIBRA_ASSIGN_OR_RETURN(auto workload, std::move(made_workload));
  LIBRA_ASSIGN_OR_RETURN(auto cost, std::move(made_cost));
  BackendContext context;
  context.run_id = run_id;
  context.run_dir = store.RunFolder(run.info);
  context.run_key = StrFormat("run %lld of %s, started %s", static_cast<long long>(run_id),
                              std::filesystem::path(store.path()).filename().c_str(),
                              run.info.started_at.c_str());
  std::optional<ResumeState> resume;
  if (request.resume_run && !replay && !run.recorded.empty()) {
    LIBRA_ASSIGN_OR_RETURN(resume,
                           ResumeStateOf(store, run_id, run.recorded, recipe.rl.prompts_per_step));
    context.start_version = resume->steps_done;
  }
  std::unique_ptr<Recorder> recorder;
  if (request.resume_run && replay) {
    recorder = std::make_unique<ReplayRecorder>(store, run_id, run.recorded);
  } else {
    recorder = std::make_unique<StoreRecorder>(store, run_id);
  }
  std::unique_ptr<model::CostModel> belief;
  if (request.planning_recipe != nullptr) {
    LIBRA_ASSIGN_OR_RETURN(belief, model::MakeCostModel(*request.planning_recipe));
  }
  std::function<void(const Progress&)> progress;
  if (request.progress) {
    progress = [&](const Progress& p) {
      Progress with_id = p;
      with_id.run_id = run_id;
      request.progress(with_id);
    };
  }
  return RunCoordinator(recipe, *request.system, *workload, *cost, belief ? *belief : *cost, parts,
                        context, resume, *recorder, request.interrupted, progress);
}

}  // namespace

sched::RouterDeps RouterDepsFor(const model::CostModel* cost) {
  sched::RouterDeps deps;
  deps.cost = cost;
  deps.read_file = [](const std::string& path) {
    return ReadFileBounded(path, recipe::kMaxPolicyFileBytes, "router file");
  };
  return deps;
}

Result<RunOutcome> RunSystem(store::Store& store, const RunRequest& request,
                             const Components& parts) {
  const recipe::Recipe& recipe = *request.recipe;
  records::RunInfo info = RunInfoFor(request);
  // Built once: the bound recorded with the run needs them, and so does the run. A failure to
  // build them is recorded as the run's failure below.
  Result<std::unique_ptr<workload::Workload>> made_workload =
      workload::MakeWorkload(recipe.workload, recipe.seed);
  Result<std::unique_ptr<model::CostModel>> made_cost = model::MakeCostModel(recipe);
  if (recipe.Simulated() && made_workload.ok() && made_cost.ok()) {
    info.throughput_bound = PerfectBalanceBound(recipe, **made_cost, **made_workload);
  }
  if (recipe.Simulated() && made_workload.ok()) {
    const workload::SkillModel skill((*made_workload)->skill_params());
    info.eval_initial =
        skill.EvalScore(0, HeldOutDifficulties(**made_workload, recipe.eval.prompts));
  }
  LIBRA_ASSIGN_OR_RETURN(const OpenedRun run, OpenRun(store, request, info));
  RunOutcome outcome;
  outcome.run_id = run.info.id;
  Result<RunSummary> summary =
      Execute(store, request, run, std::move(made_workload), std::move(made_cost), parts);
  const char* status = records::kRunOk;
  if (summary.ok()) {
    outcome.summary = *summary;
  } else {
    outcome.status = summary.status();
    status = outcome.status.code() == StatusCode::kInterrupted ? records::kRunInterrupted
                                                               : records::kRunFailed;
  }
  LIBRA_RETURN_IF_ERROR(
      store.FinishRun(run.info.id, status, outcome.status.message(), NowIso8601()));
  return outcome;
}

}  // namespace libra::experiment
