#include "report/summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/strings.h"

namespace libra::report {

std::string ConfiguredBy(const records::RunInfo& run) {
  if (run.tuning_id) return "tuned";
  if (run.configuration == "planner") return "planner";
  return "as written";
}

std::string RunConfiguration(const RunView& view) {
  std::string text = view.start_layout.empty() ? "-" : view.start_layout;
  if (view.run.staleness) text += StrFormat(", s%d", *view.run.staleness);
  return text;
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
  for (const records::StepRecord& s : view.steps) {
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

}  // namespace

std::vector<std::pair<double, double>> EvalCurve(const RunView& view) {
  std::vector<std::pair<double, double>> curve;
  if (view.run.eval_initial) curve.emplace_back(0.0, *view.run.eval_initial);
  for (const records::StepRecord& s : view.steps) {
    if (s.eval_score) curve.emplace_back(s.end_s, *s.eval_score);
  }
  return curve;
}

std::optional<double> TimeToTarget(const RunView& view, double target) {
  const std::vector<std::pair<double, double>> curve = EvalCurve(view);
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].second < target) continue;
    if (i == 0) return curve[i].first;
    const auto& [t0, v0] = curve[i - 1];
    const auto& [t1, v1] = curve[i];
    return t0 + (t1 - t0) * (target - v0) / (v1 - v0);
  }
  return std::nullopt;
}

std::map<uint64_t, double> EvalTargets(const std::vector<RunView>& runs,
                                       const Convergence& convergence) {
  std::map<uint64_t, std::pair<double, double>> range;  // seed -> (initial, best final)
  for (const RunView& view : runs) {
    const std::vector<std::pair<double, double>> curve = EvalCurve(view);
    if (curve.empty() || !view.run.eval_initial) continue;
    auto [it, fresh] =
        range.try_emplace(view.run.seed, *view.run.eval_initial, curve.back().second);
    if (!fresh) it->second.second = std::max(it->second.second, curve.back().second);
  }
  std::map<uint64_t, double> targets;
  for (const auto& [seed, r] : range) {
    targets[seed] = convergence.target ? *convergence.target
                                       : r.first + convergence.fraction * (r.second - r.first);
  }
  return targets;
}

namespace {

std::optional<double> Lookup(const std::map<uint64_t, double>& m, uint64_t key) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::optional<double> FinalEval(const RunView& view) {
  const std::vector<std::pair<double, double>> curve = EvalCurve(view);
  if (curve.empty()) return std::nullopt;
  return curve.back().second;
}

}  // namespace

namespace {

/// The summary table's columns; `with_speedup`: a speedup over the baseline run.
std::vector<Column> SummaryColumns(bool headlined, bool with_speedup) {
  using Shown = Column::Shown;
  // Under a headline that names the run, its system and status (RunHeadline), text leaves them
  // out: a single run's table then fits a terminal.
  const Shown named = headlined ? Shown::kData : Shown::kEverywhere;
  std::vector<Column> columns = {
      {.key = "run", .header = "run", .right_align = true, .shown = named},
      {.key = "name", .header = "name", .shown = Shown::kData},
      {.key = "system", .header = "system", .shown = named},
      {.key = "seed", .header = "seed", .right_align = true, .shown = Shown::kData},
      {.key = "status", .header = "status", .shown = named},
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
      {"final_reward", "batch reward", true},
      {"final_eval", "eval", true},
      {.key = "eval_target", .header = "target", .right_align = true, .shown = Shown::kData},
      {"time_to_target_s", "to target s", true},
      {"of_bound", "of bound", true},
      {.key = "throughput_bound",
       .header = "bound traj/s",
       .right_align = true,
       .shown = Shown::kData},
  };
  // How each run was configured and what it ran: two fields for scripts; in text one line under
  // the row, so that the table fits a terminal.
  columns.push_back({.key = "configured_by", .header = "config", .shown = Shown::kData});
  columns.push_back(
      {.key = "configuration", .header = "layout at start, staleness", .shown = Shown::kData});
  if (with_speedup) columns.push_back({"speedup", "speedup", true});
  columns.push_back({.key = "configured",
                     .header = "config: layout at start, staleness",
                     .shown = Shown::kReading,
                     .below = true});
  return columns;
}

}  // namespace

Table SummaryTable(const std::vector<RunView>& runs, std::optional<size_t> baseline,
                   const Convergence& convergence, bool headlined) {
  const bool with_speedup = baseline && *baseline < runs.size();
  std::optional<double> reference;
  if (with_speedup) reference = ComputeMetrics(runs[*baseline]).trajectories_per_s;
  const std::map<uint64_t, double> targets = EvalTargets(runs, convergence);
  Table table(SummaryColumns(headlined, with_speedup));
  for (const RunView& view : runs) {
    const RunMetrics m = ComputeMetrics(view);
    const std::optional<double> target = Lookup(targets, view.run.seed);
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
        Cell::Number(FinalEval(view), 3),
        Cell::Number(target, 3),
        Cell::Number(target ? TimeToTarget(view, *target) : std::nullopt, 1),
        Cell::Number(m.trajectories_per_s && view.run.throughput_bound
                         ? std::optional<double>(*m.trajectories_per_s / *view.run.throughput_bound)
                         : std::nullopt,
                     2),
        Cell::Number(view.run.throughput_bound, 3),
    };
    row.push_back(Cell::Text(ConfiguredBy(view.run)));
    row.push_back(Cell::Text(RunConfiguration(view)));
    if (with_speedup) {
      std::optional<double> speedup;
      if (reference && *reference > 0 && m.trajectories_per_s) {
        speedup = *m.trajectories_per_s / *reference;
      }
      row.push_back(Cell::Number(speedup, 2));
    }
    row.push_back(Cell::Text(ConfiguredBy(view.run) + ": " + RunConfiguration(view)));
    table.AddRow(std::move(row));
  }
  return table;
}

namespace {

std::vector<Column> RepeatColumns(bool with_speedup) {
  std::vector<Column> columns = {
      {"system", "system", false},
      {"runs", "runs", true},
      {"trajectories_per_s", "traj/s mean", true},
      {"trajectories_per_s_sd", "sd", true},
      {"trajectories_per_s_min", "min", true},
      {"trajectories_per_s_max", "max", true},
  };
  if (with_speedup) columns.push_back({"speedup", "speedup mean", true});
  // Trajectories count alike whatever their length, so a system whose batches favour the short
  // ones trains more of them a second; the tokens show it.
  columns.push_back({"generated_tokens_per_s_per_gpu", "gen tok/s/GPU mean", true});
  columns.push_back({"generated_tokens_per_trajectory", "tok/traj mean", true});
  columns.push_back({"final_eval", "eval mean", true});
  columns.push_back({"time_to_target_s", "to target s mean", true});
  columns.push_back({"time_to_target_s_sd", "sd", true});
  using Shown = Column::Shown;
  columns.push_back(
      {.key = "reached", .header = "reached", .right_align = true, .shown = Shown::kReading});
  columns.push_back({.key = "reached_target",
                     .header = "reached target",
                     .right_align = true,
                     .shown = Shown::kData});
  columns.push_back(
      {.key = "evaluated", .header = "evaluated", .right_align = true, .shown = Shown::kData});
  columns.push_back({"configured_by", "config", false});
  columns.push_back({"configuration", "layout at start (first seed), staleness", false});
  return columns;
}

/// The mean and the sample standard deviation (with two or more values) of `v`.
struct MeanSd {
  std::optional<double> mean, sd;
};
MeanSd Stats(const std::vector<double>& v) {
  MeanSd out;
  if (v.empty()) return out;
  double sum = 0;
  for (double x : v) sum += x;
  out.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - *out.mean) * (x - *out.mean);
    out.sd = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  return out;
}

/// What the repeat table shows of each system, over its seeds.
struct RepeatStats {
  /// Throughput per (system, seed) of the runs that finished, and each system's first run.
  std::map<std::string, std::map<uint64_t, double>> rate;
  /// Per system, over the same runs: generated tokens trained per second per GPU, and per
  /// trained trajectory.
  std::map<std::string, std::vector<double>> token_rate, token_length;
  std::map<std::string, const RunView*> first;
  /// Evaluation per system: final scores, times to target, and runs evaluated.
  std::map<std::string, std::vector<double>> finals, times;
  std::map<std::string, int> evaluated;
};

RepeatStats GatherRepeats(const std::vector<RunView>& runs, const Convergence& convergence) {
  RepeatStats r;
  const std::map<uint64_t, double> targets = EvalTargets(runs, convergence);
  for (const RunView& view : runs) {
    const std::string& system = view.run.system;
    r.first.try_emplace(system, &view);
    if (view.run.status == records::kRunOk) {
      if (std::optional<double> f = FinalEval(view)) {
        r.finals[system].push_back(*f);
        ++r.evaluated[system];
        if (std::optional<double> target = Lookup(targets, view.run.seed)) {
          if (std::optional<double> t = TimeToTarget(view, *target)) r.times[system].push_back(*t);
        }
      }
    }
    const RunMetrics m = ComputeMetrics(view);
    if (m.trajectories_per_s && view.run.status == records::kRunOk) {
      r.rate[system][view.run.seed] = *m.trajectories_per_s;
      if (m.tokens_per_s_per_gpu) r.token_rate[system].push_back(*m.tokens_per_s_per_gpu);
      if (m.trajectories > 0) {
        r.token_length[system].push_back(static_cast<double>(m.generated_tokens) /
                                         static_cast<double>(m.trajectories));
      }
    }
  }
  return r;
}

/// The mean over the seeds both ran of a system's throughput over the baseline's.
std::optional<double> MeanSpeedup(const std::map<uint64_t, double>& by_seed,
                                  const std::map<uint64_t, double>& baseline) {
  double sum = 0;
  int n = 0;
  for (const auto& [seed, t] : by_seed) {
    auto it = baseline.find(seed);
    if (it != baseline.end() && it->second > 0) {
      sum += t / it->second;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

}  // namespace

Table RepeatTable(const std::vector<RunView>& runs, const std::vector<std::string>& systems,
                  const std::optional<std::string>& baseline, const Convergence& convergence) {
  RepeatStats r = GatherRepeats(runs, convergence);
  Table table(RepeatColumns(baseline.has_value()));
  for (const std::string& system : systems) {
    const std::map<uint64_t, double>& by_seed = r.rate[system];
    std::vector<double> values;
    for (const auto& [seed, t] : by_seed) values.push_back(t);
    const MeanSd rates = Stats(values);
    std::optional<double> lo, hi;
    if (!values.empty()) {
      lo = *std::min_element(values.begin(), values.end());
      hi = *std::max_element(values.begin(), values.end());
    }
    std::vector<Cell> row = {
        Cell::Text(system),          Cell::Integer(static_cast<long long>(values.size())),
        Cell::Number(rates.mean, 3), Cell::Number(rates.sd, 3),
        Cell::Number(lo, 3),         Cell::Number(hi, 3)};
    if (baseline) row.push_back(Cell::Number(MeanSpeedup(by_seed, r.rate[*baseline]), 2));
    row.push_back(Cell::Number(Stats(r.token_rate[system]).mean, 1));
    row.push_back(Cell::Number(Stats(r.token_length[system]).mean, 0));
    const std::vector<double>& times = r.times[system];
    row.push_back(Cell::Number(Stats(r.finals[system]).mean, 3));
    // The mean time to target only when every evaluated run reached it; "reached" says how many.
    const bool all = !times.empty() && times.size() == r.finals[system].size();
    const MeanSd to_target = all ? Stats(times) : MeanSd();
    row.push_back(Cell::Number(to_target.mean, 1));
    row.push_back(Cell::Number(to_target.sd, 1));
    row.push_back(Cell::Text(StrFormat("%zu/%d", times.size(), r.evaluated[system])));
    row.push_back(Cell::Integer(static_cast<long long>(times.size())));
    row.push_back(Cell::Integer(r.evaluated[system]));
    auto f = r.first.find(system);
    row.push_back(Cell::Text(f == r.first.end() ? "-" : ConfiguredBy(f->second->run)));
    row.push_back(Cell::Text(f == r.first.end() ? "-" : RunConfiguration(*f->second)));
    table.AddRow(std::move(row));
  }
  return table;
}

namespace {

/// Mean throughput per (scenario, system, seed) of a sensitivity study, scenarios in order.
struct Study {
  std::vector<std::string> scenarios;
  std::map<std::string, std::map<std::string, std::map<uint64_t, double>>> rate;
  std::set<uint64_t> seeds;
};

Study ReadStudy(const std::vector<RunView>& runs) {
  Study study;
  for (const RunView& view : runs) {
    const std::string& scenario = view.run.scenario;
    if (std::find(study.scenarios.begin(), study.scenarios.end(), scenario) ==
        study.scenarios.end()) {
      study.scenarios.push_back(scenario);
    }
    const std::optional<double> t = ComputeMetrics(view).trajectories_per_s;
    if (t && view.run.status == records::kRunOk) {
      study.rate[scenario][view.run.system][view.run.seed] = *t;
      study.seeds.insert(view.run.seed);
    }
  }
  return study;
}

std::optional<double> MeanOf(const std::map<uint64_t, double>& values) {
  if (values.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& [seed, v] : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace

Table SensitivityTable(const std::vector<RunView>& runs, const std::vector<std::string>& systems) {
  const Study study = ReadStudy(runs);
  Table table({{"system", "system", false},
               {"as_written", "as written traj/s", true},
               {"min", "min", true},
               {"min_scenario", "min under", false},
               {"max", "max", true},
               {"max_scenario", "max under", false},
               {"first", "first", true},
               {"trials", "of", true}});
  // Firsts: per (scenario, seed), every system with the highest throughput.
  std::map<std::string, int> firsts;
  int trials = 0;
  for (const std::string& scenario : study.scenarios) {
    auto by_system = study.rate.find(scenario);
    if (by_system == study.rate.end()) continue;
    for (uint64_t seed : study.seeds) {
      std::optional<double> best;
      for (const auto& [system, by_seed] : by_system->second) {
        auto it = by_seed.find(seed);
        if (it != by_seed.end() && (!best || it->second > *best)) best = it->second;
      }
      if (!best) continue;
      ++trials;
      for (const auto& [system, by_seed] : by_system->second) {
        auto it = by_seed.find(seed);
        if (it != by_seed.end() && it->second == *best) ++firsts[system];
      }
    }
  }
  for (const std::string& system : systems) {
    std::optional<double> written, lo, hi;
    std::string lo_at, hi_at;
    for (const std::string& scenario : study.scenarios) {
      auto by_system = study.rate.find(scenario);
      if (by_system == study.rate.end()) continue;
      auto it = by_system->second.find(system);
      if (it == by_system->second.end()) continue;
      const std::optional<double> mean = MeanOf(it->second);
      if (!mean) continue;
      if (scenario == study.scenarios.front()) written = mean;
      if (!lo || *mean < *lo) lo = mean, lo_at = scenario;
      if (!hi || *mean > *hi) hi = mean, hi_at = scenario;
    }
    table.AddRow({Cell::Text(system), Cell::Number(written, 3), Cell::Number(lo, 3),
                  Cell::Text(lo_at), Cell::Number(hi, 3), Cell::Text(hi_at),
                  Cell::Integer(firsts[system]), Cell::Integer(trials)});
  }
  return table;
}

Table SensitivityMatrix(const std::vector<RunView>& runs, const std::vector<std::string>& systems) {
  const Study study = ReadStudy(runs);
  std::vector<Column> columns = {{"scenario", "scenario", false}};
  for (const std::string& system : systems) columns.push_back({system, system, true});
  columns.push_back({"first", "first", false});
  Table table(columns);
  for (const std::string& scenario : study.scenarios) {
    std::vector<std::optional<double>> means;
    std::optional<double> best;
    for (const std::string& system : systems) {
      std::optional<double> mean;
      auto by_system = study.rate.find(scenario);
      if (by_system != study.rate.end()) {
        auto it = by_system->second.find(system);
        if (it != by_system->second.end()) mean = MeanOf(it->second);
      }
      means.push_back(mean);
      if (mean && (!best || *mean > *best)) best = mean;
    }
    std::vector<Cell> row = {Cell::Text(scenario)};
    std::vector<std::string> first;
    for (size_t i = 0; i < means.size(); ++i) {
      row.push_back(Cell::Number(means[i], 3));
      if (means[i] && best && *means[i] == *best) first.push_back(systems[i]);
    }
    row.push_back(Cell::Text(StrJoin(first, ", ")));
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
      {"reward_mean", "batch reward", true},
      {"eval_score", "eval", true},
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
  for (const records::StepRecord& s : view.steps) {
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
        Cell::Number(s.eval_score, 3),
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

Table PlannerActivityTable(const std::vector<records::DecisionRecord>& decisions,
                           const std::vector<records::StepRecord>& steps) {
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
    const records::DecisionRecord& d = decisions[i];
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
      for (const records::StepRecord& s : steps) {
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

Table ListTable(const std::vector<records::RunInfo>& runs,
                const std::map<int64_t, int>& steps_done) {
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
  for (const records::RunInfo& r : runs) {
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

std::string RunHeadline(const records::RunInfo& run) {
  std::string line =
      StrFormat("run %lld: %s, system '%s' (%s / %s), %s, seed %llu, %d GPUs: %s",
                static_cast<long long>(run.id), run.name.c_str(), run.system.c_str(),
                run.router.c_str(), run.planner.c_str(), run.backend.c_str(),
                static_cast<unsigned long long>(run.seed), run.gpus, run.status.c_str());
  if (!run.error.empty()) line += " (" + run.error + ")";
  return line;
}

}  // namespace libra::report
