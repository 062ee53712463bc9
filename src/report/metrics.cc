#include "report/metrics.h"

#include <ctime>
#include <map>

namespace libra::report {
namespace {

// Indices into ExportedMetrics(), in its order.
enum Metric {
  kGlobalStep,
  kTimingStep,
  kTimingGen,
  kTimingUpdateActor,
  kTimingUpdateWeights,
  kPerfTimePerStep,
  kPerfTotalNumTokens,
  kPerfThroughput,
  kResponseLength,
  kPromptLength,
  kScore,
  kRewards,
  kTrainerIdleRatio,
  kStaleTrajectories,
  kTrajectoriesPerS,
  kGeneratedTokensPerSPerGpu,
  kWaitS,
  kTurns,
  kToolCalls,
  kGpuUtil,
  kMaxLag,
  kTrainGpus,
  kRolloutGpus,
  kCount,
};

}  // namespace

const std::vector<MetricDef>& ExportedMetrics() {
  static const std::vector<MetricDef>* const metrics = new std::vector<MetricDef>{
      {"training/global_step", "", "the step, counted from 1 as verl counts its global steps"},
      {"timing_s/step", "s",
       "the step: from the end of the previous train step to the end of "
       "this one's train and weight sync"},
      {"timing_s/gen", "s",
       "rollout of the step's batch: its first turn started to its last "
       "trajectory done (in asynchronous runs it overlaps earlier steps)"},
      {"timing_s/update_actor", "s",
       "the train step; it includes the old log-prob and reference passes that verl times as "
       "timing_s/old_log_prob and timing_s/ref"},
      {"timing_s/update_weights", "s", "the weight sync after the step (0 when there was none)"},
      {"perf/time_per_step", "s", "as timing_s/step"},
      {"perf/total_num_tokens", "tokens",
       "prompt + response tokens of the batch, as verl counts them: each trajectory's prompt, "
       "generated tokens and tool outputs (a multi-turn response holds the tool outputs)"},
      {"perf/throughput", "tokens/s/GPU",
       "perf/total_num_tokens / (timing_s/step x the run's GPUs): verl's definition, prompt and "
       "response tokens over every GPU; not libra's \"gen tok/s/GPU\""},
      {"response_length/mean", "tokens",
       "generated + tool output tokens per trajectory (verl's response length covers the tool "
       "outputs of a multi-turn response)"},
      {"prompt_length/mean", "tokens", "prompt tokens per trajectory"},
      {"critic/score/mean", "", "mean reward of the batch (modelled in simulated runs)"},
      {"critic/rewards/mean", "", "as critic/score/mean: libra applies no KL penalty"},
      {"trainer/idle_ratio", "fraction",
       "the trainer's wait for the batch over the step (verl's fully-async trainer metric)"},
      {"fully_async/count/stale_trajectory_processed", "trajectories",
       "trajectories trained so far that an older policy generated (lag > 0), a running total"},
      {"libra/trajectories_per_s", "trajectories/s", "trajectories trained per second of the step"},
      {"libra/generated_tokens_per_s_per_gpu", "tokens/s/GPU",
       "generated tokens of the batch per second of the step per GPU: libra's \"gen tok/s/GPU\", "
       "generated tokens only"},
      {"libra/wait_s", "s", "how long the trainer idled waiting for the batch"},
      {"libra/turns_per_trajectory", "turns", "model calls per trajectory"},
      {"libra/tool_calls_per_trajectory", "calls", "tool calls per trajectory"},
      {"libra/gpu_util", "fraction",
       "busy GPU-seconds (generating or training) over the cluster's in the step; absent when the "
       "backend cannot tell"},
      {"libra/max_lag", "versions", "the largest policy lag of a trajectory in the batch"},
      {"libra/train_gpus", "GPUs", "GPUs training during the step"},
      {"libra/rollout_gpus", "GPUs", "GPUs serving rollouts during the step"},
  };
  return *metrics;
}

std::vector<StepMetrics> MetricsPerStep(const RunView& view,
                                        const std::vector<records::TrajectoryRecord>& trajectories,
                                        const std::vector<records::TurnRecord>& turns) {
  // Tool output tokens per trajectory, then per step: a step's response tokens are its
  // trajectories' generated tokens and tool outputs.
  std::map<int64_t, int64_t> tool_tokens;
  for (const records::TurnRecord& t : turns) tool_tokens[t.trajectory] += t.tool_output_tokens;
  std::map<int, int64_t> step_tool_tokens;
  std::map<int, int64_t> step_stale;
  std::map<int, bool> step_has_trajectories;
  for (const records::TrajectoryRecord& t : trajectories) {
    step_tool_tokens[t.step] += tool_tokens[t.id];
    step_stale[t.step] += t.version < t.step ? 1 : 0;
    step_has_trajectories[t.step] = true;
  }
  std::vector<StepMetrics> out;
  int64_t stale = 0;
  for (const records::StepRecord& s : view.steps) {
    StepMetrics m;
    m.step = s.step;
    m.end_s = s.end_s;
    m.values.assign(kCount, std::nullopt);
    const double step_s = s.end_s - s.start_s;
    const double n = s.trajectories;
    auto per_trajectory = [&](double total) -> std::optional<double> {
      return n > 0 ? std::optional<double>(total / n) : std::nullopt;
    };
    auto per_second = [&](double total) -> std::optional<double> {
      return step_s > 0 ? std::optional<double>(total / step_s) : std::nullopt;
    };
    const bool known = step_has_trajectories.count(s.step) > 0;
    const double tools = static_cast<double>(step_tool_tokens[s.step]);
    const double response = static_cast<double>(s.generated_tokens) + tools;
    const double total = static_cast<double>(s.prompt_tokens) + response;
    stale += step_stale[s.step];
    m.values[kGlobalStep] = s.step + 1;
    m.values[kTimingStep] = step_s;
    m.values[kTimingGen] = s.rollout_s;
    m.values[kTimingUpdateActor] = s.train_s;
    m.values[kTimingUpdateWeights] = s.sync_s;
    m.values[kPerfTimePerStep] = step_s;
    // Whole sequences need the tool outputs of the turns; without the step's trajectories (a
    // database that has none) they are unknown, not the generated tokens alone.
    if (known && !turns.empty()) {
      m.values[kPerfTotalNumTokens] = total;
      if (view.run.gpus > 0 && step_s > 0)
        m.values[kPerfThroughput] = total / step_s / view.run.gpus;
      m.values[kResponseLength] = per_trajectory(response);
    }
    m.values[kPromptLength] = per_trajectory(static_cast<double>(s.prompt_tokens));
    m.values[kScore] = s.reward_mean;
    m.values[kRewards] = s.reward_mean;
    if (step_s > 0) m.values[kTrainerIdleRatio] = s.wait_s / step_s;
    if (known) m.values[kStaleTrajectories] = static_cast<double>(stale);
    m.values[kTrajectoriesPerS] = per_second(n);
    if (view.run.gpus > 0 && step_s > 0) {
      m.values[kGeneratedTokensPerSPerGpu] =
          static_cast<double>(s.generated_tokens) / step_s / view.run.gpus;
    }
    m.values[kWaitS] = s.wait_s;
    m.values[kTurns] = per_trajectory(static_cast<double>(s.turns));
    m.values[kToolCalls] = per_trajectory(static_cast<double>(s.tool_calls));
    m.values[kGpuUtil] = s.gpu_util;
    m.values[kMaxLag] = s.max_lag;
    m.values[kTrainGpus] = s.train_gpus;
    m.values[kRolloutGpus] = s.rollout_gpus;
    out.push_back(std::move(m));
  }
  return out;
}

std::optional<double> EpochSeconds(const std::string& iso8601) {
  std::tm tm{};
  const char* end = strptime(iso8601.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

}  // namespace libra::report
