// The subcommands of `libra`. Each Run* function does the work of one subcommand and returns its
// exit code; the CLI11 wiring lives in app.cc, the only file that includes CLI11.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace libra::cli {

/// Options every recipe command shares.
struct RecipeOptions {
  std::string recipe;
  std::string db = "results/libra.db";
  std::optional<int64_t> seed;
  std::optional<int64_t> steps;
  std::vector<std::string> sets;
  bool quiet = false;
  /// `libra run --resume RUN`: continue that run of the database.
  std::optional<int64_t> resume;
  /// `--take-over`: resume RUN even when it is recorded as running by a libra on another host.
  bool take_over = false;
};

struct CompareOptions {
  RecipeOptions common;
  /// Only these systems, by name, in this order (default: all of the recipe).
  std::vector<std::string> systems;
  /// Run every system with this many seeds (the recipe's, then the next ones) and report the
  /// mean and spread.
  int repeat = 1;
  /// The evaluation score whose first arrival the "to target s" column times (default: per
  /// seed, [eval] target_fraction of the way from the initial to the best final score).
  std::optional<double> reward_target;
  /// Run every peer at its tuned configuration (tuning it first where none is recorded); the
  /// recipe's [tuning] compare_tuned sets it by default.
  bool tuned = false;
  /// Run the systems as the recipe writes them, even when [tuning] compare_tuned is set.
  bool as_written = false;
  /// Rerun the comparison under the standard perturbations (experiment/sensitivity.h) and print
  /// per system its throughput range and how often it is first.
  bool sensitivity = false;
  /// `libra compare --resume COMPARISON`: continue that comparison of the database.
  std::optional<int64_t> resume;
};

struct TuneOptions {
  RecipeOptions common;
  /// The systems to tune (the recipe's or named systems); default: every system with knobs.
  std::vector<std::string> systems;
  /// Simulated runs per system (default: the recipe's [tuning] budget_runs).
  std::optional<int> budget;
};

struct ReportOptions {
  std::string db = "results/libra.db";
  /// Run ids, comparison names (the latest comparison of that name) or system names (the latest
  /// run of that system); empty: the latest comparison, or the latest run.
  std::vector<std::string> runs;
  bool list = false;
  bool steps = false;
  std::string format = "text";
  /// Name or run id of the run that speedups are relative to.
  std::string baseline;
  /// As CompareOptions::reward_target.
  std::optional<double> reward_target;
  /// Write the plots (SVG) of the runs into this folder.
  std::string plots;
  /// Write one Markdown report (tables and links to the plots) to this file.
  std::string markdown;
  /// Write a Chrome trace-event / Perfetto JSON timeline of one run to this file.
  std::string timeline;
  /// Write the runs' trajectories as a JSONL trace to this file instead of printing tables.
  std::string export_trajectories;
};

struct PlanOptions {
  RecipeOptions common;
  std::vector<std::string> systems;
  /// Also print each searching planner's search summary (budgets, prunes, best per budget).
  bool explain = false;
  /// Simulate each predicting planner's plan and print predicted against measured per phase;
  /// exit 1 when a phase is outside its limit.
  bool check = false;
};

struct CostOptions {
  RecipeOptions common;
  /// Context lengths (tokens) of the decode columns.
  std::vector<int64_t> contexts = {2048, 8192, 32768};
  /// Sequences an instance runs at once at most (the engine's max_num_seqs).
  int64_t max_sequences = 256;
  /// Tokens per training sequence.
  int64_t train_tokens = 8192;
  /// Training GPUs (0: half the cluster).
  int train_gpus = 0;
};

struct WorkloadOptions {
  RecipeOptions common;
  /// Policy versions to summarise (default: 0 and every quarter of the recipe's steps).
  std::vector<int> versions;
  /// Prompts per version (default: the recipe's prompts_per_step).
  int prompts = 0;
  /// The policy's modelled skill (default: the workload's initial skill).
  double skill = -1;
};

struct ProbeOptions {
  /// Optional recipe: the GPU whose numbers --calibration starts from (default: the catalog GPU
  /// the device name matches).
  std::string recipe;
  std::string db = "results/libra.db";
  /// Also write the probes as JSON to this file (for `libra probe --import` elsewhere).
  std::string json;
  /// Import probes from this JSON file instead of measuring.
  std::string import;
  /// Write a calibration TOML from these probes to this file.
  std::string calibration;
  /// Device indices (default: every GPU).
  std::vector<int> gpus;
  /// Small sizes and few repetitions: a smoke test, not a measurement.
  bool quick = false;
  bool quiet = false;
  /// Probe every node of the recipe's [launcher] (and NCCL across them) instead of this one.
  bool hosts = false;
  /// The libra program on the nodes (default: this program's path, as on a shared filesystem).
  std::string libra;
  /// How long the probes of all hosts may take, seconds.
  double timeout_s = 1800;
  /// Measure and print, record nothing (what --hosts runs on each node).
  bool no_record = false;
  /// One process of a probe across nodes (started by --hosts): its node, the number of nodes,
  /// the GPUs each drives, and node 0's NCCL unique id (empty on node 0, which makes it).
  int nccl_node = 0;
  int nccl_nodes = 0;
  int nccl_gpus_per_node = 0;
  std::string nccl_id;
};

struct CalibrateOptions {
  /// The recipe (its GPU, model and cost model are what is calibrated), --db and --set.
  RecipeOptions common;
  /// Run ids to fit to (default: every finished run of the recipe's GPU in the database).
  std::vector<int64_t> runs;
  /// Also use the newest probe session in the database.
  bool probes = false;
  /// Write the calibration TOML to this file.
  std::string write;
};

/// Where output goes: stdout and stderr, swappable in tests.
struct Io {
  std::ostream& out;
  std::ostream& err;
  /// Whether stdout is a terminal (progress lines are drawn only then).
  bool tty = false;
};

int RunRun(const RecipeOptions& options, const Io& io);
int RunCompare(const CompareOptions& options, const Io& io);
int RunTune(const TuneOptions& options, const Io& io);
int RunReport(const ReportOptions& options, const Io& io);
int RunPlan(const PlanOptions& options, const Io& io);
int RunValidate(const RecipeOptions& options, const Io& io);
int RunVersion(const Io& io);
int RunCost(const CostOptions& options, const Io& io);
int RunWorkload(const WorkloadOptions& options, const Io& io);
int RunProbe(const ProbeOptions& options, const Io& io);
int RunCalibrate(const CalibrateOptions& options, const Io& io);

/// Parses the command line and runs the subcommand; returns the exit code.
int Main(int argc, char** argv);

}  // namespace libra::cli
