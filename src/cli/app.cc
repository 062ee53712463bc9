// The command line: CLI11 wiring for every subcommand. The only file that includes CLI11.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <limits>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "planner/planner.h"
#include "sched/router.h"

namespace libra::cli {
namespace {

constexpr const char* kDescription =
    "libra: an experiment orchestrator for agentic RL post-training.\n"
    "Runs a recipe (cluster, model, workload, RL pipeline, system under test) on the built-in\n"
    "cluster simulator, records it in SQLite, and compares systems side by side.";

constexpr const char* kFooter =
    "Exit codes: 0 ok, 1 run failed, 2 usage or recipe error, 130 interrupted.\n"
    "Docs: docs/recipes.md (recipe fields), docs/schema.md (the database).";

void AddRewardTarget(CLI::App* sub, std::optional<double>* target) {
  sub->add_option("--reward-target", *target,
                  "Evaluation score that \"to target s\" times; default: per seed, [eval]\n"
                  "target_fraction (0.8) of the way from the initial score to the best final\n"
                  "score among the runs")
      ->type_name("R");
}

/// An integer in [min, 2^63 - 1] written in decimal: CLI11 alone would clamp a larger one to
/// the largest int64 (two different seeds would run the same experiment).
CLI::Validator Int64AtLeast(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || value < min) {
          return StrFormat(
              "must be an integer in [%lld, %lld] (got %s)", static_cast<long long>(min),
              static_cast<long long>(std::numeric_limits<int64_t>::max()), text.c_str());
        }
        return "";
      },
      "");
}

void AddRecipeOptions(CLI::App* sub, RecipeOptions* o, bool recipe_required = true) {
  CLI::Option* recipe =
      sub->add_option("recipe", o->recipe, "Recipe file (TOML), e.g. recipes/quickstart.toml")
          ->type_name("RECIPE");
  if (recipe_required) recipe->required();
  sub->add_option("--db", o->db, "Results database (created if missing)")
      ->capture_default_str()
      ->type_name("PATH");
  sub->add_option("--seed", o->seed, "Override the recipe's seed")
      ->check(Int64AtLeast(0))
      ->type_name("N");
  sub->add_option("--steps", o->steps, "Override the recipe's number of training steps")
      ->check(Int64AtLeast(1))
      ->type_name("N");
  sub->add_option("--set", o->sets,
                  "Override any recipe field, checked like the file; repeatable.\n"
                  "e.g. --set rl.group_size=16 --set system.router=round-robin\n"
                  "     --set baselines[0].planner_options.train_gpus=8")
      ->type_name("KEY.PATH=VALUE")
      ->take_all()
      ->allow_extra_args(false);
  sub->add_flag("-q,--quiet", o->quiet, "Print nothing but errors");
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app(kDescription, "libra");
  app.require_subcommand(1);
  app.footer(kFooter);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  Io io{std::cout, std::cerr, isatty(STDOUT_FILENO) == 1};
  int exit_code = kExitOk;

  auto run = std::make_shared<RecipeOptions>();
  CLI::App* run_cmd = app.add_subcommand("run", "Run the recipe's [system] and record it");
  run_cmd->footer(
      "Prints a summary; `libra report` shows the steps. A progress line is drawn when stdout\n"
      "is a terminal. Ctrl-C stops cleanly: the run is recorded as interrupted, and\n"
      "`libra run --resume RUN` continues it (the simulator replays the recorded steps and\n"
      "checks them; the cluster backend restarts from the last step's checkpoint).\n\n" +
      std::string(kFooter));
  AddRecipeOptions(run_cmd, run.get(), /*recipe_required=*/false);
  run_cmd
      ->add_option("--resume", run->resume,
                   "Continue this interrupted or failed run of --db, or one whose libra\n"
                   "died (its recorded recipe and system; no RECIPE)")
      ->type_name("RUN");
  run_cmd->add_flag("--take-over", run->take_over,
                    "With --resume: take over a run recorded as running by a libra on\n"
                    "another host, which this one cannot check (make sure it is gone)");
  run_cmd->callback([&] { exit_code = RunRun(*run, io); });

  auto compare = std::make_shared<CompareOptions>();
  CLI::App* compare_cmd =
      app.add_subcommand("compare", "Run [system] and every [[baselines]] entry side by side");
  compare_cmd->footer(
      "Every system runs on the identical workload (same seed, same trajectories). The runs\n"
      "are recorded as one comparison; the table shows the speedup over the first baseline.\n\n" +
      std::string(kFooter));
  AddRecipeOptions(compare_cmd, &compare->common, /*recipe_required=*/false);
  compare_cmd
      ->add_option("--resume", compare->resume,
                   "Continue this comparison of --db as recorded (no RECIPE): show the\n"
                   "finished runs, resume unfinished ones, run the rest")
      ->type_name("COMPARISON");
  compare_cmd->add_flag("--take-over", compare->common.take_over,
                        "With --resume: take over runs recorded as running by a libra on\n"
                        "another host (make sure it is gone)");
  compare_cmd
      ->add_option("--systems", compare->systems,
                   "Only these systems, in this order (comma separated)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->type_name("A,B,...");
  compare_cmd
      ->add_option("--repeat", compare->repeat,
                   "Run every system with K seeds (the recipe's and the next ones); report the "
                   "mean and spread")
      ->check(CLI::Range(1, 1000))
      ->type_name("K");
  AddRewardTarget(compare_cmd, &compare->reward_target);
  compare_cmd->add_flag("--tuned", compare->tuned,
                        "Run every peer at its tuned configuration (`libra tune`; tuned first\n"
                        "where the database holds no tuning for this recipe). Libra's systems\n"
                        "run as their planner decides");
  compare_cmd->add_flag("--as-written", compare->as_written,
                        "Run every system as the recipe writes it, even when its [tuning]\n"
                        "sets compare_tuned");
  compare_cmd->add_flag("--sensitivity", compare->sensitivity,
                        "Rerun the comparison under the standard perturbations of the constants\n"
                        "the simulator cannot measure; print each system's range and how often\n"
                        "it is first (docs/results.md, \"Robustness\")");
  compare_cmd->callback([&] { exit_code = RunCompare(*compare, io); });

  auto tune = std::make_shared<TuneOptions>();
  CLI::App* tune_cmd = app.add_subcommand(
      "tune", "Search a peer's knobs by simulation and record its best configuration");
  tune_cmd->footer(
      "Each peer declares the knobs its real system exposes (rollout TP, the train/rollout\n"
      "split, staleness where users can set it, its scheduler's thresholds). The search spends\n"
      "the same budget of simulated runs on every system, on seeds that are never reporting\n"
      "seeds, and records every configuration tried; `libra compare --tuned` then runs the peer\n"
      "at the winner. Libra's systems are never tuned. docs/recipes.md, \"Tuning\".\n\n" +
      std::string(kFooter));
  AddRecipeOptions(tune_cmd, &tune->common);
  tune_cmd
      ->add_option("--system", tune->systems,
                   "The systems to tune, the recipe's or named systems (comma separated;\n"
                   "default: every system of the recipe with knobs)")
      ->delimiter(',')
      ->type_name("A,B,...");
  tune_cmd
      ->add_option("--budget", tune->budget,
                   "Simulated runs per system (default: [tuning] budget_runs, 24)")
      ->check(CLI::Range(1, 100000))
      ->type_name("N");
  tune_cmd->callback([&] { exit_code = RunTune(*tune, io); });

  auto report = std::make_shared<ReportOptions>();
  CLI::App* report_cmd = app.add_subcommand("report", "Show recorded runs and comparisons");
  report_cmd->footer(
      "With no run ids: the latest comparison, or the latest run with its steps. With ids:\n"
      "those runs side by side. --list: what the database holds.\n\n" +
      std::string(kFooter));
  report_cmd
      ->add_option("runs", report->runs,
                   "Run ids, a comparison's name (its latest) or a system's name (its latest run)")
      ->type_name("RUN|NAME");
  report_cmd->add_option("--db", report->db, "Results database")
      ->capture_default_str()
      ->type_name("PATH");
  report_cmd->add_flag("--list", report->list, "List every run in the database");
  report_cmd->add_flag("--steps", report->steps, "Only the per-step table of one run");
  report_cmd->add_option("--format", report->format, "Output format: text, md, csv or json")
      ->capture_default_str()
      ->type_name("FORMAT");
  report_cmd
      ->add_option("--baseline", report->baseline,
                   "System name or run id that speedups are relative to\n"
                   "(default: the second run, i.e. the first baseline)")
      ->type_name("NAME|RUN");
  AddRewardTarget(report_cmd, &report->reward_target);
  report_cmd
      ->add_option("--plots", report->plots,
                   "Write SVG plots of the runs into DIR (reward and throughput over time,\n"
                   "step-time breakdown, GPU allocation, trajectory lengths)")
      ->type_name("DIR");
  report_cmd
      ->add_option("--markdown", report->markdown,
                   "Write a self-contained Markdown report (tables, links to the plots, which\n"
                   "go to --plots or to FILE's name without .md plus -plots/)")
      ->type_name("FILE");
  report_cmd
      ->add_option(
          "--timeline", report->timeline,
          "Write one run's timeline as Chrome trace-event JSON (Perfetto, chrome://tracing)")
      ->type_name("FILE");
  report_cmd
      ->add_option("--export-trajectories", report->export_trajectories,
                   "Write the runs' trajectories as a JSONL trace (docs/traces.md) that\n"
                   "[workload] kind = \"trace\" can replay")
      ->type_name("FILE");
  report_cmd->callback([&] { exit_code = RunReport(*report, io); });

  auto plan = std::make_shared<PlanOptions>();
  CLI::App* plan_cmd =
      app.add_subcommand("plan", "The planner alone: each system's GPU split and layout");
  plan_cmd->footer(
      "Shows the training / rollout split and rollout layout that each system's planner\n"
      "chooses for the recipe's cluster, and why; for planners that search (grp, no-ehp,\n"
      "libra-ref), their best candidates with predicted times. Runs nothing, except that\n"
      "--check simulates each plan (docs/planner.md, \"Checking a plan\").\n\n" +
      std::string(kFooter));
  AddRecipeOptions(plan_cmd, &plan->common);
  plan_cmd->add_option("--systems", plan->systems, "Only these systems (comma separated)")
      ->delimiter(',')
      ->type_name("A,B,...");
  plan_cmd->add_flag("--explain", plan->explain,
                     "Also print the search: training budgets, what was pruned and why");
  plan_cmd->add_flag("--check", plan->check,
                     "Simulate each plan that comes with predicted phases and print predicted\n"
                     "against measured (rollout, train, sync, step); exit 1 when the step is off\n"
                     "by more than 10% or a phase by more than 15%");
  plan_cmd->callback([&] { exit_code = RunPlan(*plan, io); });

  auto validate = std::make_shared<RecipeOptions>();
  CLI::App* validate_cmd = app.add_subcommand("validate", "Check a recipe without running it");
  validate_cmd->footer(
      "Every error (unknown keys, wrong types, missing fields, impossible values, unknown\n"
      "policies or options) is printed as file:line:column: key.path: problem.\n\n" +
      std::string(kFooter));
  AddRecipeOptions(validate_cmd, validate.get());
  validate_cmd->callback([&] { exit_code = RunValidate(*validate, io); });

  auto cost = std::make_shared<CostOptions>();
  CLI::App* cost_cmd =
      app.add_subcommand("cost", "The cost model's numbers for the recipe's GPU and model");
  cost_cmd->footer(
      "Per rollout TP degree: KV capacity, single-sequence decode speed, saturated decode\n"
      "throughput per GPU and prefill speed; training step time and memory for the layouts of\n"
      "the training GPUs; weight-sync and role-switch times. Check these before trusting a plan.\n"
      "The [cost_model] table of the recipe (or --set cost_model.KEY=VALUE) changes them.\n\n" +
      std::string(kFooter));
  AddRecipeOptions(cost_cmd, &cost->common);
  cost_cmd->add_option("--contexts", cost->contexts, "Context lengths of the decode columns")
      ->delimiter(',')
      ->capture_default_str()
      ->type_name("N,N,...");
  cost_cmd
      ->add_option("--max-seqs", cost->max_sequences,
                   "Sequences an instance runs at once at most (max_num_seqs)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  cost_cmd->add_option("--train-tokens", cost->train_tokens, "Tokens per training sequence")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  cost_cmd
      ->add_option("--train-gpus", cost->train_gpus, "Training GPUs (default: half the cluster)")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  cost_cmd->callback([&] { exit_code = RunCost(*cost, io); });

  auto wl = std::make_shared<WorkloadOptions>();
  CLI::App* workload_cmd = app.add_subcommand(
      "workload", "The distribution of the recipe's trajectories, per policy version");
  workload_cmd->footer(
      "Generates the recipe's workload for a few policy versions (no simulation) and prints\n"
      "p50/p90/p99/max of turns, generated tokens, tool output and tool latency, and the\n"
      "tool-failure, timeout, truncation and success rates: check a preset or a trace before\n"
      "using it. Success rates are modelled (docs/workloads.md).\n\n" +
      std::string(kFooter));
  AddRecipeOptions(workload_cmd, &wl->common);
  workload_cmd
      ->add_option("--versions", wl->versions,
                   "Policy versions (default: 0 and every quarter of the steps)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber)
      ->type_name("V,V,...");
  workload_cmd
      ->add_option("--prompts", wl->prompts, "Prompts per version (default: rl.prompts_per_step)")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  workload_cmd
      ->add_option("--skill", wl->skill,
                   "The policy's modelled skill in [0, 1] (default: the initial one)")
      ->check(CLI::Range(0.0, 1.0))
      ->type_name("X");
  workload_cmd->callback([&] { exit_code = RunWorkload(*wl, io); });

  auto probe = std::make_shared<ProbeOptions>();
  CLI::App* probe_cmd =
      app.add_subcommand("probe", "Measure this node's GPUs (or import probes) for calibration");
  probe_cmd->footer(
      "Inventory, HBM copy bandwidth, bf16 GEMM throughput, host<->device bandwidth and NCCL\n"
      "all-reduce / broadcast bus bandwidth across this node's GPUs; recorded in --db. Needs a\n"
      "libra built with -DLIBRA_WITH_CUDA=ON (and -DLIBRA_WITH_NCCL=ON for NCCL); otherwise it\n"
      "exits 1 and probes measured elsewhere can be imported with --import. With --hosts,\n"
      "every node of the recipe's [launcher] is probed (libra probe runs there, local or over\n"
      "ssh), then NCCL across the nodes, one process per node joined through the unique id\n"
      "that node 0 prints and libra hands to the others. docs/calibration.md.\n\n" +
      std::string(kFooter));
  probe_cmd
      ->add_option("recipe", probe->recipe,
                   "Recipe whose GPU numbers --calibration starts from (default: the catalog\n"
                   "GPU the device name matches)")
      ->type_name("RECIPE");
  probe_cmd->add_option("--db", probe->db, "Results database (created if missing)")
      ->capture_default_str()
      ->type_name("PATH");
  probe_cmd
      ->add_option("--json", probe->json,
                   "Also write the probes as JSON (for --import); -: to stdout, instead of the "
                   "table")
      ->type_name("FILE");
  probe_cmd
      ->add_option("--import", probe->import,
                   "Record probes from a JSON file written by --json instead of measuring")
      ->type_name("FILE");
  probe_cmd
      ->add_option("--calibration", probe->calibration,
                   "Write a calibration TOML from these probes for a recipe to include")
      ->type_name("FILE");
  probe_cmd->add_option("--gpus", probe->gpus, "Only these device indices (comma separated)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber)
      ->type_name("N,N,...");
  probe_cmd->add_flag("--quick", probe->quick,
                      "Small sizes, few repetitions: a smoke test, not a measurement");
  probe_cmd->add_flag("-q,--quiet", probe->quiet, "Print nothing but errors");
  probe_cmd->add_flag("--hosts", probe->hosts,
                      "Probe every node of the recipe's [launcher], and NCCL across them");
  probe_cmd
      ->add_option("--libra", probe->libra,
                   "With --hosts: the libra program on the nodes (default: this one's path)")
      ->type_name("PATH");
  probe_cmd->add_option("--timeout", probe->timeout_s, "With --hosts: seconds for all probes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->type_name("S");
  probe_cmd->add_flag("--no-record", probe->no_record,
                      "Measure and print only; record nothing (what --hosts runs on a node)");
  const std::string internal = "Across nodes (started by --hosts)";
  probe_cmd->add_option("--nccl-nodes", probe->nccl_nodes, "Nodes of a probe across nodes")
      ->check(CLI::Range(2, 4096))
      ->type_name("N")
      ->group(internal);
  probe_cmd->add_option("--nccl-node", probe->nccl_node, "This process's node (0: makes the id)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("K")
      ->group(internal);
  probe_cmd->add_option("--nccl-gpus-per-node", probe->nccl_gpus_per_node, "GPUs of each node")
      ->check(CLI::PositiveNumber)
      ->type_name("G")
      ->group(internal);
  probe_cmd->add_option("--nccl-id", probe->nccl_id, "Node 0's NCCL unique id (hex)")
      ->type_name("HEX")
      ->group(internal);
  probe_cmd->callback([&] { exit_code = RunProbe(*probe, io); });

  auto calibrate = std::make_shared<CalibrateOptions>();
  CLI::App* calibrate_cmd = app.add_subcommand(
      "calibrate", "Fit the cost model's efficiency factors to recorded runs and probes");
  calibrate_cmd->footer(
      "Derives measurements from the runs in --db (turn times, train steps, weight syncs) and,\n"
      "with --probes, takes the GPU numbers of the newest probe session; fits the roofline\n"
      "model's factors and prints predicted against measured per term, before and after, with\n"
      "the remaining error. Factors the data cannot identify are left as they are, and say why.\n"
      "--write FILE saves the result for a recipe's include = [...]. docs/calibration.md.\n\n" +
      std::string(kFooter));
  calibrate_cmd
      ->add_option("recipe", calibrate->common.recipe,
                   "Recipe whose GPU, model and cost model are calibrated")
      ->required()
      ->type_name("RECIPE");
  calibrate_cmd->add_option("--db", calibrate->common.db, "Results database")
      ->capture_default_str()
      ->type_name("PATH");
  calibrate_cmd->add_option("--set", calibrate->common.sets, "Override a recipe field; repeatable")
      ->type_name("KEY.PATH=VALUE")
      ->take_all()
      ->allow_extra_args(false);
  calibrate_cmd
      ->add_option("--runs", calibrate->runs,
                   "Run ids to fit to (default: every finished run on the recipe's GPU)")
      ->delimiter(',')
      ->type_name("ID,ID,...");
  calibrate_cmd->add_flag("--probes", calibrate->probes,
                          "Also use the newest probe session in the database");
  calibrate_cmd->add_option("--write", calibrate->write, "Write the calibration TOML to FILE")
      ->type_name("FILE");
  calibrate_cmd->callback([&] { exit_code = RunCalibrate(*calibrate, io); });

  CLI::App* version_cmd =
      app.add_subcommand("version", "Version, source revision, build features and policies");
  version_cmd->callback([&] { exit_code = RunVersion(io); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return exit_code;
}

}  // namespace libra::cli
