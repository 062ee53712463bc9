#include "experiment/runner.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "common/strings.h"
#include "libra/config.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "sched/router.h"

namespace libra::experiment {
namespace {

/// Writes each step to the store as it finishes.
class StoreRecorder : public Recorder {
 public:
  StoreRecorder(store::Store& store, int64_t run_id) : store_(store), run_id_(run_id) {}

  Status RecordStep(const store::StepBatch& batch) override {
    return store_.RecordStep(run_id_, batch);
  }

 private:
  store::Store& store_;
  int64_t run_id_;
};

/// Resuming by replay: the steps already recorded are run again and checked against their
/// records instead of being recorded twice; the rest are recorded.
class ReplayRecorder : public Recorder {
 public:
  ReplayRecorder(store::Store& store, int64_t run_id, std::vector<store::StepRecord> recorded)
      : inner_(store, run_id), run_id_(run_id), recorded_(std::move(recorded)) {}

  Status RecordStep(const store::StepBatch& batch) override {
    const auto index = static_cast<size_t>(batch.step.step);
    if (index >= recorded_.size()) return inner_.RecordStep(batch);
    const store::StepRecord& was = recorded_[index];
    const store::StepRecord& now = batch.step;
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

 private:
  StoreRecorder inner_;
  int64_t run_id_;
  std::vector<store::StepRecord> recorded_;
};

/// Where a run resumed from a checkpoint continues, from its records.
Result<ResumeState> ResumeStateOf(store::Store& store, int64_t run_id,
                                  const std::vector<store::StepRecord>& steps,
                                  int prompts_per_step) {
  ResumeState state;
  state.steps_done = static_cast<int>(steps.size());
  state.elapsed_s = steps.empty() ? 0 : steps.back().end_s;
  state.next_prompt = static_cast<int64_t>(state.steps_done) * prompts_per_step;
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::TrajectoryRecord> trajectories,
                         store.Trajectories(run_id));
  for (const store::TrajectoryRecord& t : trajectories) {
    state.next_prompt = std::max(state.next_prompt, t.prompt + 1);
    state.next_trajectory = std::max(state.next_trajectory, t.id + 1);
  }
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::EventRecord> events, store.Events(run_id));
  for (const store::EventRecord& e : events) {
    state.next_event_seq = std::max(state.next_event_seq, e.seq + 1);
  }
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::DecisionRecord> decisions, store.Decisions(run_id));
  for (const store::DecisionRecord& d : decisions) {
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
  context.sync_path =
      recipe.sim.sync_path == "disk" ? model::SyncPath::kDisk : model::SyncPath::kNccl;
  context.max_num_seqs = recipe.sim.max_num_seqs;
  if (sizes) {
    context.typical_sequence_tokens = sizes->typical;
    context.max_sequence_tokens = sizes->max;
    context.history = sizes->profile;
  }
  return context;
}

SequenceSizes SampleSequenceSizes(const workload::Workload& workload, int group_size, int steps) {
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
  // The startup profile: prompts far beyond any run's, at the initial policy.
  constexpr int kProfile = 256;
  constexpr int64_t kFirstProfilePrompt = int64_t{1} << 40;
  for (int i = 0; i < kProfile; ++i) {
    const int64_t prompt = kFirstProfilePrompt + i / group;
    const workload::TrajectoryScript script =
        workload.Script(prompt, i % group, 0, workload.skill_params().initial);
    sizes.profile.push_back({workload.Prompt(prompt).prompt_tokens, script.generated_tokens(),
                             script.tool_output_tokens()});
  }
  return sizes;
}

double PerfectBalanceBound(const recipe::Recipe& recipe, const model::CostModel& cost,
                           const workload::Workload& workload) {
  // Sample trajectories across the run's policy versions (the workload drifts with them).
  constexpr int kSamples = 256;
  const model::TrainPasses passes;
  double rollout = 0;
  double train = 0;
  for (int i = 0; i < kSamples; ++i) {
    const int version = recipe.steps <= 1 ? 0 : i * recipe.steps / kSamples;
    const int64_t prompt = i / std::max(1, recipe.rl.group_size);
    const int sample = i % std::max(1, recipe.rl.group_size);
    const int64_t prompt_tokens = workload.Prompt(prompt).prompt_tokens;
    const workload::TrajectoryScript script =
        workload.Script(prompt, sample, version, workload.skill_params().initial);
    // Every token of context is prefilled at least once; every generated token is decoded at
    // its context, at the best batching the engine allows.
    int64_t context = prompt_tokens;
    double gpu_s = static_cast<double>(prompt_tokens) * cost.PrefillGpuSecondsLowerBound();
    for (const workload::TurnScript& turn : script.turns) {
      for (int64_t k = 0; k < turn.generated_tokens; k += 64) {
        const int64_t tokens = std::min<int64_t>(64, turn.generated_tokens - k);
        gpu_s += static_cast<double>(tokens) *
                 cost.DecodeGpuSecondsLowerBound(context + k, recipe.sim.max_num_seqs);
      }
      context += turn.generated_tokens + turn.tool_output_tokens;
      gpu_s += static_cast<double>(turn.tool_output_tokens) * cost.PrefillGpuSecondsLowerBound();
    }
    rollout += gpu_s;
    train += cost.TrainGpuSecondsLowerBound(context, passes);
  }
  const double per_trajectory = (rollout + train) / kSamples;
  return per_trajectory > 0 ? recipe.cluster.total_gpus() / per_trajectory : 0;
}

void ValidateWithRegistries(const recipe::Recipe& recipe,
                            std::vector<recipe::Diagnostic>* diagnostics) {
  std::unique_ptr<model::CostModel> cost;
  if (recipe.cluster.gpus_per_node >= 1) {
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
  if (workload) sizes = SampleSequenceSizes(*workload, recipe.rl.group_size, recipe.steps);
  for (const recipe::SystemSpec* system : AllSystems(recipe)) {
    const std::string router_key = system->path + ".router";
    const std::string planner_key = system->path + ".planner";
    const sched::RouterRegistry& routers = sched::BuiltinRouters();
    if (!routers.Contains(system->router)) {
      Add({recipe.Where(router_key), router_key + ": " + routers.UnknownMessage(system->router)},
          diagnostics);
    } else if (auto r = routers.Create(system->router, system->router_options,
                                       sched::RouterDeps{cost.get()});
               !r.ok()) {
      AppendStatus(r.status(), recipe.Where(router_key), diagnostics);
    }
    const planner::PlannerRegistry& planners = planner::BuiltinPlanners();
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
    if (recipe.cluster.nodes < 1 || recipe.cluster.gpus_per_node < 1 || !cost) continue;
    auto plan = (*p)->Initial(MakePlanContext(recipe, *system, cost.get(), sizes));
    if (!plan.ok()) {
      Add(recipe::Diagnostic{recipe.Where(system->path + ".planner_options"),
                             system->path + ".planner_options: no plan fits the cluster: " +
                                 plan.status().message()},
          diagnostics);
    }
  }
}

std::string NowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

Result<RunOutcome> RunSystem(store::Store& store, const RunRequest& request,
                             const BackendFactory& make_backend) {
  const recipe::Recipe& recipe = *request.recipe;
  const recipe::SystemSpec& system = *request.system;

  store::RunInfo info;
  info.name = recipe.name;
  info.system = system.name;
  info.router = system.router;
  info.planner = system.planner;
  info.backend = recipe.backend;
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
  // Built once: the bound recorded with the run needs them, and so does the run. A failure to
  // build them is recorded as the run's failure below.
  Result<std::unique_ptr<workload::Workload>> made_workload =
      workload::MakeWorkload(recipe.workload, recipe.seed);
  Result<std::unique_ptr<model::CostModel>> made_cost = model::MakeCostModel(recipe);
  if (recipe.backend == "sim" && made_workload.ok() && made_cost.ok()) {
    info.throughput_bound = PerfectBalanceBound(recipe, **made_cost, **made_workload);
  }
  int64_t run_id = 0;
  // A resumed run: its recorded steps, and whether the backend replays them.
  std::vector<store::StepRecord> recorded;
  const bool replay = recipe.backend == "sim";
  if (request.resume_run) {
    run_id = *request.resume_run;
    LIBRA_ASSIGN_OR_RETURN(store::RunInfo was, store.GetRun(run_id));
    if (was.status == store::kRunOk || was.status == store::kRunRunning) {
      return Status::InvalidArgument(StrFormat(
          "run %lld is %s: only an interrupted or failed run can be resumed",
          static_cast<long long>(run_id),
          was.status == store::kRunOk ? "complete" : "still running (or its libra was killed)"));
    }
    if (was.system != system.name) {
      return Status::InvalidArgument(StrFormat("run %lld ran system '%s', not '%s'",
                                               static_cast<long long>(run_id), was.system.c_str(),
                                               system.name.c_str()));
    }
    LIBRA_ASSIGN_OR_RETURN(recorded, store.Steps(run_id));
    LIBRA_RETURN_IF_ERROR(store.FinishRun(run_id, store::kRunRunning, "", ""));
  } else {
    LIBRA_ASSIGN_OR_RETURN(run_id, store.BeginRun(info));
    if (request.comparison_id) {
      LIBRA_RETURN_IF_ERROR(store.AddToComparison(*request.comparison_id, run_id));
    }
  }

  RunOutcome outcome;
  outcome.run_id = run_id;
  auto run = [&]() -> Result<RunSummary> {
    LIBRA_ASSIGN_OR_RETURN(auto workload, std::move(made_workload));
    LIBRA_ASSIGN_OR_RETURN(auto cost, std::move(made_cost));
    LIBRA_ASSIGN_OR_RETURN(auto router,
                           sched::BuiltinRouters().Create(system.router, system.router_options,
                                                          sched::RouterDeps{cost.get()}));
    LIBRA_ASSIGN_OR_RETURN(
        auto planner, planner::BuiltinPlanners().Create(system.planner, system.planner_options));
    BackendContext context;
    context.run_id = run_id;
    std::optional<ResumeState> resume;
    if (request.resume_run && !replay && !recorded.empty()) {
      LIBRA_ASSIGN_OR_RETURN(resume,
                             ResumeStateOf(store, run_id, recorded, recipe.rl.prompts_per_step));
      context.start_version = resume->steps_done;
    }
    LIBRA_ASSIGN_OR_RETURN(auto backend, make_backend(recipe, *workload, *cost, context));
    CoordinatorConfig config;
    config.resume = resume;
    config.steps = recipe.steps;
    config.prompts_per_step = recipe.rl.prompts_per_step;
    config.group_size = recipe.rl.group_size;
    config.staleness = recipe.StalenessFor(system);
    config.stream_batches = recipe.BatchingFor(system) == "stream";
    config.partial_rollout = recipe.PartialRolloutFor(system);
    config.sync_interval = recipe.rl.sync_interval;
    config.plan =
        MakePlanContext(recipe, system, cost.get(),
                        SampleSequenceSizes(*workload, recipe.rl.group_size, recipe.steps));
    config.record_events = recipe.sim.record_events;
    config.throughput_bound = info.throughput_bound;
    std::unique_ptr<Recorder> recorder;
    if (request.resume_run && replay) {
      recorder = std::make_unique<ReplayRecorder>(store, run_id, recorded);
    } else {
      recorder = std::make_unique<StoreRecorder>(store, run_id);
    }
    Coordinator coordinator(config, *workload, *router, *planner, *backend, *recorder);
    std::function<void(const Progress&)> progress;
    if (request.progress) {
      progress = [&](const Progress& p) {
        Progress with_id = p;
        with_id.run_id = run_id;
        request.progress(with_id);
      };
    }
    return coordinator.Run(request.interrupted, progress);
  };
  Result<RunSummary> summary = run();
  const char* status = store::kRunOk;
  if (summary.ok()) {
    outcome.summary = *summary;
  } else {
    outcome.status = summary.status();
    status = outcome.status.code() == StatusCode::kInterrupted ? store::kRunInterrupted
                                                               : store::kRunFailed;
  }
  LIBRA_RETURN_IF_ERROR(store.FinishRun(run_id, status, outcome.status.message(), NowIso8601()));
  return outcome;
}

}  // namespace libra::experiment
