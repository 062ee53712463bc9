// Summary tables of recorded runs: what `libra run`, `libra compare` and `libra report` print.
// Everything here is computed from the store's rows, so a report of an old run shows the same
// numbers as the run printed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "records/records.h"
#include "report/table.h"

namespace libra::report {

/// A run with its steps.
struct RunView {
  records::RunInfo run;
  std::vector<records::StepRecord> steps;
  /// The layout it started with (its initial planner decision); empty when none was recorded.
  std::string start_layout;
};

/// Totals and rates of one run; missing when the run recorded no step.
struct RunMetrics {
  int steps = 0;
  std::optional<double> elapsed_s;
  int64_t trajectories = 0;
  int64_t generated_tokens = 0;
  std::optional<double> trajectories_per_s;
  std::optional<double> tokens_per_s;
  std::optional<double> tokens_per_s_per_gpu;
  std::optional<double> step_s;
  std::optional<double> rollout_s;
  std::optional<double> train_s;
  std::optional<double> sync_s;
  std::optional<double> wait_s;
  /// GPU utilisation over the run: busy GPU-seconds over the cluster's, from the steps that
  /// recorded it (time-weighted); missing when none did.
  std::optional<double> gpu_util;
  /// Mean reward of the last step's batch.
  std::optional<double> final_reward;
};

RunMetrics ComputeMetrics(const RunView& view);

/// How convergence is read from the evaluation scores (RunInfo::eval_initial and
/// StepRecord::eval_score): the time a run's score first reaches a target, by default per seed
/// `fraction` of the way from the initial score to the best final score among the runs of that
/// seed; `target` sets an absolute score instead.
struct Convergence {
  std::optional<double> target;
  double fraction = 0.8;
};

/// The run's evaluation score over time: (0, initial score) when recorded, then (end of step,
/// score) for every evaluated step.
std::vector<std::pair<double, double>> EvalCurve(const RunView& view);

/// Seconds until the run's evaluation score first reaches `target`, interpolated linearly
/// between evaluations; 0 when it starts there; missing when it never does.
std::optional<double> TimeToTarget(const RunView& view, double target);

/// The target score of each seed among `runs` (Convergence); seeds without an evaluated run
/// have none.
std::map<uint64_t, double> EvalTargets(const std::vector<RunView>& runs,
                                       const Convergence& convergence);

/// One row per run. `baseline` (an index into `runs`) adds a speedup column (throughput in
/// trajectories/s over the baseline's). "batch reward" is the mean reward of the last batch the
/// run trained on (what the system chose to train on: biased by it); "eval" is the last
/// evaluation score and "to target s" when the score first reached its seed's target.
/// `headlined`: the text sits under a headline naming the one run (RunHeadline), so its run id,
/// system and status are left out of the text (the data formats keep them).
Table SummaryTable(const std::vector<RunView>& runs, std::optional<size_t> baseline,
                   const Convergence& convergence = {}, bool headlined = false);

/// One row per system over repeated runs (seeds): runs, throughput mean, standard deviation
/// (sample, n - 1; missing for one run), min and max, and with `baseline` (a system name) the
/// mean of the per-seed speedups over that system's run of the same seed. `runs` hold the
/// systems in order for each seed in turn; `systems` is the order of the rows.
Table RepeatTable(const std::vector<RunView>& runs, const std::vector<std::string>& systems,
                  const std::optional<std::string>& baseline, const Convergence& convergence = {});

/// How a run was configured, in a table cell: "tuned" (a peer at the configuration `libra tune`
/// found), "planner" (Libra: its planner decides) or "as written".
std::string ConfiguredBy(const records::RunInfo& run);

/// What a run ran: its starting layout and staleness bound, e.g.
/// "train 32 (tp1 pp4 dp8) | rollout tp8x2, s2"; tuned knobs are in the layout.
std::string RunConfiguration(const RunView& view);

/// The sensitivity study of a comparison (`compare --sensitivity`): `runs` carry their scenario
/// (RunInfo::scenario, the first scenario seen being the recipe as written). One row per system:
/// throughput under the recipe as written (mean over seeds), the lowest and highest scenario
/// mean with the scenario, and "first": in how many of the (scenario, seed) trials it had the
/// highest throughput, of how many. `systems` is the order of the rows.
Table SensitivityTable(const std::vector<RunView>& runs, const std::vector<std::string>& systems);

/// The same study as a matrix: one row per scenario, one column per system (mean traj/s over
/// seeds), and the system with the highest mean.
Table SensitivityMatrix(const std::vector<RunView>& runs, const std::vector<std::string>& systems);

/// The line under a repeat table: "(3 seeds from 1; speedup: mean of the per-seed ratios over
/// sync-split)".
std::string RepeatCaption(int seeds, uint64_t first_seed,
                          const std::optional<std::string>& baseline);

/// One row per step of a run.
Table StepTable(const RunView& view);

/// The router's counters (store::Store::RouterMetrics rows: step, name, value; each a running
/// total or a gauge as the router reports it): one row per counter with its value after the
/// last step and its largest value.
Table RouterActivityTable(const std::vector<std::tuple<int, std::string, double>>& metrics);

/// One row per planner decision, with what the planner predicted and, for an applied one, the
/// measured mean step time of the steps it governed (until the next applied decision), so that
/// predicted and measured can be read side by side.
Table PlannerActivityTable(const std::vector<records::DecisionRecord>& decisions,
                           const std::vector<records::StepRecord>& steps);

/// One row per run: what the database holds, with the steps each has recorded (`steps_done`, by
/// run id; a run missing from it has none) out of those planned.
Table ListTable(const std::vector<records::RunInfo>& runs,
                const std::map<int64_t, int>& steps_done);

/// "run 3: quickstart, system 'baseline' (least-conn / static), sim, seed 1, 16 GPUs: ok".
std::string RunHeadline(const records::RunInfo& run);

}  // namespace libra::report
