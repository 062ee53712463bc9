#include "report/summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/strings.h"

namespace libra::report {

Result<RunView> ReadRunView(store::Store& store, int64_t run_id) {
  RunView view;
  LIBRA_ASSIGN_OR_RETURN(view.run, store.GetRun(run_id));
  LIBRA_ASSIGN_OR_RETURN(view.steps, store.Steps(run_id));
  return view;
}

RunMetrics ComputeMetrics(const RunView& view) {
  RunMetrics m;
  m.steps = static_cast<int>(view.steps.size());
  if (view.steps.empty()) return m;
  double rollout = 0;
  double train = 0;
  double sync = 0;
  double wait = 0;
  double util_s = 0;  // sum of util x step time, over the steps that recorded it
  double util_time = 0;
  for (const store::StepRecord& s : view.steps) {
    if (s.gpu_util) {
      util_s += *s.gpu_util * (s.end_s - s.start_s);
      util_time += s.end_s - s.start_s;
    }
    m.trajectories += s.trajectories;
    m.generated_tokens += s.generated_tokens;
    rollout += s.rollout_s;
    train += s.train_s;
    sync += s.sync_s;
    wait += s.wait_s;
  }
  const double n = static_cast<double>(view.steps.size());
  const double elapsed = view.steps.back().end_s;
  m.elapsed_s = elapsed;
  if (elapsed > 0) {
    m.trajectories_per_s = static_cast<double>(m.trajectories) / elapsed;
    m.tokens_per_s = static_cast<double>(m.generated_tokens) / elapsed;
    if (view.run.gpus > 0) m.tokens_per_s_per_gpu = *m.tokens_per_s / view.run.gpus;
  }
  m.step_s = elapsed / n;
  m.rollout_s = rollout / n;
  m.train_s = train / n;
  m.sync_s = sync / n;
  m.wait_s = wait / n;
  if (util_time > 0) m.gpu_util = util_s / util_time;
  m.final_reward = view.steps.back().reward_mean;
  return m;
}

namespace {

/// A seed as a number (uint64: beyond what Cell::Integer holds).
Cell SeedCell(uint64_t seed) {
  Cell cell = Cell::Integer(0);
  cell.text = std::to_string(seed);
  cell.value = static_cast<double>(seed);
  return cell;
}

/// The reward of each step, averaged with the two before it (fewer at the start).
std::vector<double> SmoothedRewards(const RunView& view) {
  std::vector<double> out;
  for (size_t i = 0; i < view.steps.size(); ++i) {
    double sum = 0;
    size_t n = 0;
    for (size_t j = i >= 2 ? i - 2 : 0; j <= i; ++j, ++n) sum += view.steps[j].reward_mean;
    out.push_back(sum / static_cast<double>(n));
  }
  return out;
}

}  // namespace

std::optional<double> TimeToReward(const RunView& view, double target) {
  const std::vector<double> smoothed = SmoothedRewards(view);
  for (size_t i = 0; i < smoothed.size(); ++i) {
    if (smoothed[i] >= target) return view.steps[i].end_s;
  }
  return std::nullopt;
}

Table SummaryTable(const std::vector<RunView>& runs, std::optional<size_t> baseline,
                   std::optional<double> reward_target) {
  using Shown = Column::Shown;
  std::vector<Column> columns = {
      {"run", "run", true},
      {.key = "name", .header = "name", .shown = Shown::kData},
      {"system", "system", false},
      {.key = "seed", .header = "seed", .right_align = true, .shown = Shown::kData},
      {"status", "status", false},
      {"steps", "steps", true},
      {"elapsed_s", "time s", true},
      {.key = "trajectories", .header = "trajectories", .right_align = true, .shown = Shown::kData},
      {.key = "generated_tokens",
       .header = "generated tokens",
       .right_align = true,
       .shown = Shown::kData},
      {"trajectories_per_s", "traj/s", true},
      {"generated_tokens_per_s_per_gpu", "gen tok/s/GPU", true},
      {"gpu_util", "GPU util", true},
      {"step_s", "step s", true},
      {"rollout_s", "rollout s", true},
      {"train_s", "train s", true},
      {"sync_s", "sync s", true},
      {"wait_s", "wait s", true},
      {"final_reward", "reward", true},
      {"of_bound", "of bound", true},
      {.key = "throughput_bound",
       .header = "bound traj/s",
       .right_align = true,
       .shown = Shown::kData},
  };
  std::optional<double> reference;
  std::optional<double> target = reward_target;  // default: the lowest smoothed-reward peak
  if (baseline && *baseline < runs.size()) {
    columns.push_back({.key = "reward_target",
                       .header = "reward target",
                       .right_align = true,
                       .shown = Shown::kData});
    columns.push_back({"time_to_reward_s", "to reward s", true});
    columns.push_back({"speedup", "speedup", true});
    reference = ComputeMetrics(runs[*baseline]).trajectories_per_s;
    for (const RunView& view : runs) {
      if (reward_target) break;
      const std::vector<double> smoothed = SmoothedRewards(view);
      if (smoothed.empty()) continue;
      const double peak = *std::max_element(smoothed.begin(), smoothed.end());
      target = target ? std::min(*target, peak) : peak;
    }
  }
  Table table(columns);
  for (const RunView& view : runs) {
    const RunMetrics m = ComputeMetrics(view);
    std::vector<Cell> row = {
        Cell::Integer(view.run.id),
        Cell::Text(view.run.name),
        Cell::Text(view.run.system),
        SeedCell(view.run.seed),
        Cell::Text(view.run.status),
        Cell::Integer(m.steps),
        Cell::Number(m.elapsed_s, 1),
        Cell::Integer(m.trajectories),
        Cell::Integer(m.generated_tokens),
        Cell::Number(m.trajectories_per_s, 3),
        Cell::Number(m.tokens_per_s_per_gpu, 1),
        Cell::Number(m.gpu_util, 2),
        Cell::Number(m.step_s, 1),
        Cell::Number(m.rollout_s, 1),
        Cell::Number(m.train_s, 1),
        Cell::Number(m.sync_s, 1),
        Cell::Number(m.wait_s, 1),
        Cell::Number(m.final_reward, 3),
        Cell::Number(m.trajectories_per_s && view.run.throughput_bound
                         ? std::optional<double>(*m.trajectories_per_s / *view.run.throughput_bound)
                         : std::nullopt,
                     2),
        Cell::Number(view.run.throughput_bound, 3),
    };
    if (baseline && *baseline < runs.size()) {
      std::optional<double> speedup;
      if (reference && *reference > 0 && m.trajectories_per_s) {
        speedup = *m.trajectories_per_s / *reference;
      }
      row.push_back(Cell::Number(target, 3));
      row.push_back(Cell::Number(target ? TimeToReward(view, *target) : std::nullopt, 1));
      row.push_back(Cell::Number(speedup, 2));
    }
    table.AddRow(std::move(row));
  }
  return table;
}

Table RepeatTable(const std::vector<RunView>& runs, const std::vector<std::string>& systems,
                  const std::optional<std::string>& baseline) {
  std::vector<Column> columns = {
      {"system", "system", false},
      {"runs", "runs", true},
      {"trajectories_per_s", "traj/s mean", true},
      {"trajectories_per_s_sd", "sd", true},
      {"trajectories_per_s_min", "min", true},
      {"trajectories_per_s_max", "max", true},
  };
  if (baseline) columns.push_back({"speedup", "speedup mean", true});
  // Throughput per (system, seed).
  std::map<std::string, std::map<uint64_t, double>> rate;
  for (const RunView& view : runs) {
    const std::optional<double> t = ComputeMetrics(view).trajectories_per_s;
    if (t && view.run.status == store::kRunOk) rate[view.run.system][view.run.seed] = *t;
  }
  Table table(columns);
  for (const std::string& system : systems) {
    const std::map<uint64_t, double>& by_seed = rate[system];
    std::vector<double> values;
    for (const auto& [seed, t] : by_seed) values.push_back(t);
    std::optional<double> mean, sd, lo, hi, speedup;
    if (!values.empty()) {
      double sum = 0;
      for (double v : values) sum += v;
      mean = sum / static_cast<double>(values.size());
      lo = *std::min_element(values.begin(), values.end());
      hi = *std::max_element(values.begin(), values.end());
      if (values.size() > 1) {
        double sq = 0;
        for (double v : values) sq += (v - *mean) * (v - *mean);
        sd = std::sqrt(sq / static_cast<double>(values.size() - 1));
      }
    }
    if (baseline) {
      double sum = 0;
      int n = 0;
      for (const auto& [seed, t] : by_seed) {
        auto it = rate[*baseline].find(seed);
        if (it != rate[*baseline].end() && it->second > 0) {
          sum += t / it->second;
          ++n;
        }
      }
      if (n > 0) speedup = sum / n;
    }
    std::vector<Cell> row = {
        Cell::Text(system),    Cell::Integer(static_cast<long long>(values.size())),
        Cell::Number(mean, 3), Cell::Number(sd, 3),
        Cell::Number(lo, 3),   Cell::Number(hi, 3)};
    if (baseline) row.push_back(Cell::Number(speedup, 2));
    table.AddRow(std::move(row));
  }
  return table;
}

std::string RepeatCaption(int seeds, uint64_t first_seed,
                          const std::optional<std::string>& baseline) {
  return StrFormat("(%d seeds from %llu; speedup: mean of the per-seed ratios over %s)", seeds,
                   static_cast<unsigned long long>(first_seed), baseline ? baseline->c_str() : "-");
}

Table StepTable(const RunView& view) {
  using Shown = Column::Shown;
  Table table({
      {"step", "step", true},
      {.key = "start_s", .header = "start s", .right_align = true, .shown = Shown::kData},
      {"end_s", "end s", true},
      {.key = "step_s", .header = "step s", .right_align = true, .shown = Shown::kData},
      {"rollout_s", "rollout s", true},
      {"train_s", "train s", true},
      {"sync_s", "sync s", true},
      {"wait_s", "wait s", true},
      {"trajectories", "traj", true},
      {"turns", "turns", true},
      {.key = "tool_calls", .header = "tool calls", .right_align = true, .shown = Shown::kData},
      {.key = "prompt_tokens",
       .header = "prompt tokens",
       .right_align = true,
       .shown = Shown::kData},
      {"generated_tokens", "gen tokens", true},
      {"reward_mean", "reward", true},
      {.key = "policy_version", .header = "version", .right_align = true, .shown = Shown::kData},
      {"max_lag", "max lag", true},
      {.key = "gpus",
       .header = "train/ rollout GPUs",
       .right_align = true,
       .shown = Shown::kReading},
      {.key = "train_gpus", .header = "train GPUs", .right_align = true, .shown = Shown::kData},
      {.key = "rollout_gpus", .header = "rollout GPUs", .right_align = true, .shown = Shown::kData},
      {.key = "gpu_util", .header = "GPU util", .right_align = true, .shown = Shown::kData},
      {.key = "idle_gpu_s", .header = "idle GPU-s", .right_align = true, .shown = Shown::kData},
      {.key = "predicted_step_s",
       .header = "predicted step s",
       .right_align = true,
       .shown = Shown::kData},
  });
  for (const store::StepRecord& s : view.steps) {
    table.AddRow({
        Cell::Integer(s.step),
        Cell::Number(s.start_s, 1),
        Cell::Number(s.end_s, 1),
        Cell::Number(s.end_s - s.start_s, 1),
        Cell::Number(s.rollout_s, 1),
        Cell::Number(s.train_s, 1),
        Cell::Number(s.sync_s, 1),
        Cell::Number(s.wait_s, 1),
        Cell::Integer(s.trajectories),
        Cell::Integer(s.turns),
        Cell::Integer(s.tool_calls),
        Cell::Integer(s.prompt_tokens),
        Cell::Integer(s.generated_tokens),
        Cell::Number(s.reward_mean, 3),
        Cell::Integer(s.policy_version),
        Cell::Integer(s.max_lag),
        Cell::Text(StrFormat("%d/%d", s.train_gpus, s.rollout_gpus)),
        Cell::Integer(s.train_gpus),
        Cell::Integer(s.rollout_gpus),
        Cell::Number(s.gpu_util, 2),
        Cell::Number(s.idle_gpu_s, 1),
        Cell::Number(s.predicted_step_s, 1),
    });
  }
  return table;
}

Table RouterActivityTable(const std::vector<std::tuple<int, std::string, double>>& metrics) {
  Table table(
      {{"metric", "router counter", false}, {"final", "final", true}, {"max", "largest", true}});
  std::map<std::string, std::pair<double, double>> by_name;  // name -> (last, max)
  for (const auto& [step, name, value] : metrics) {
    auto [it, fresh] = by_name.try_emplace(name, value, value);
    it->second.first = value;  // rows come ordered by step
    if (!fresh) it->second.second = std::max(it->second.second, value);
  }
  for (const auto& [name, values] : by_name) {
    table.AddRow({Cell::Text(name), Cell::Number(values.first, 0), Cell::Number(values.second, 0)});
  }
  return table;
}

Table PlannerActivityTable(const std::vector<store::DecisionRecord>& decisions,
                           const std::vector<store::StepRecord>& steps) {
  Table table({{"step", "step", true},
               {"at_s", "at s", true},
               {"trigger", "trigger", false},
               {"applied", "applied", false},
               {.key = "layout", .header = "layout", .wrap = 30},
               {"predicted_step_s", "predicted step s", true},
               {"current_step_s", "current step s", true},
               {"gain_s", "gain s", true},
               {"transition_s", "transition s", true},
               {"measured_step_s", "measured step s", true},
               {.key = "reason", .header = "reason", .below = true}});
  for (size_t i = 0; i < decisions.size(); ++i) {
    const store::DecisionRecord& d = decisions[i];
    std::optional<double> measured;
    if (d.applied) {
      // The steps that started after it and before the next applied decision.
      double next = std::numeric_limits<double>::infinity();
      for (size_t j = i + 1; j < decisions.size(); ++j) {
        if (decisions[j].applied) {
          next = decisions[j].at_s;
          break;
        }
      }
      double sum = 0;
      int n = 0;
      for (const store::StepRecord& s : steps) {
        if (s.start_s + 1e-9 >= d.at_s && s.start_s < next) {
          sum += s.end_s - s.start_s;
          ++n;
        }
      }
      if (n > 0) measured = sum / n;
    }
    table.AddRow({Cell::Integer(d.step), Cell::Number(d.at_s, 1), Cell::Text(d.trigger),
                  Cell::Text(d.applied ? "yes" : "no"), Cell::Text(d.layout),
                  Cell::Number(d.predicted_step_s, 1), Cell::Number(d.current_step_s, 1),
                  Cell::Number(d.gain_s, 1), Cell::Number(d.transition_s, 1),
                  Cell::Number(measured, 1), Cell::Text(d.reason)});
  }
  return table;
}

Table ListTable(const std::vector<store::RunInfo>& runs, const std::map<int64_t, int>& steps_done) {
  using Shown = Column::Shown;
  Table table({
      {"run", "run", true},
      {"name", "name", false},
      {"system", "system", false},
      {"backend", "backend", false},
      {.key = "seed", .header = "seed", .right_align = true, .shown = Shown::kData},
      {"started_at", "started (UTC)", false},
      {.key = "ended_at", .header = "ended (UTC)", .shown = Shown::kData},
      {.key = "steps", .header = "steps", .right_align = true, .shown = Shown::kReading},
      {.key = "steps_done", .header = "steps done", .right_align = true, .shown = Shown::kData},
      {.key = "steps_planned",
       .header = "steps planned",
       .right_align = true,
       .shown = Shown::kData},
      {"status", "status", false},
      {"comparison", "comparison", true},
      {.key = "error", .header = "error", .shown = Shown::kData},
  });
  for (const store::RunInfo& r : runs) {
    std::optional<long long> comparison;
    if (r.comparison_id) comparison = *r.comparison_id;
    const auto done = steps_done.find(r.id);
    const int steps = done == steps_done.end() ? 0 : done->second;
    table.AddRow({
        Cell::Integer(r.id),
        Cell::Text(r.name),
        Cell::Text(r.system),
        Cell::Text(r.backend),
        SeedCell(r.seed),
        Cell::Text(r.started_at),
        r.ended_at.empty() ? Cell::Missing() : Cell::Text(r.ended_at),
        Cell::Text(StrFormat("%d/%d", steps, r.steps_planned)),
        Cell::Integer(steps),
        Cell::Integer(r.steps_planned),
        Cell::Text(r.status),
        Cell::Integer(comparison),
        Cell::Text(r.error),
    });
  }
  return table;
}

std::string RunHeadline(const store::RunInfo& run) {
  std::string line =
      StrFormat("run %lld: %s, system '%s' (%s / %s), %s, seed %llu, %d GPUs: %s",
                static_cast<long long>(run.id), run.name.c_str(), run.system.c_str(),
                run.router.c_str(), run.planner.c_str(), run.backend.c_str(),
                static_cast<unsigned long long>(run.seed), run.gpus, run.status.c_str());
  if (!run.error.empty()) line += " (" + run.error + ")";
  return line;
}

}  // namespace libra::report
