// The command line: CLI11 wiring for every subcommand. The only file that includes CLI11.
//
// Each subcommand is one Add* function below: its options, the flags that cannot go together,
// and the Run* function (commands.h) its callback calls. A new subcommand is one more Add*
// function and one line in Cli::Cli; `libra help`, "did you mean" and `libra completion` pick it
// up from CLI11's tree.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <limits>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "libra/config.h"
#include "report/table.h"

namespace libra::cli {
namespace {

constexpr const char* kDescription =
    "libra: an experiment orchestrator for agentic RL post-training.\n"
    "Runs a recipe (cluster, model, workload, RL pipeline, system under test) on the built-in\n"
    "cluster simulator or on real nodes, records it in SQLite, and compares systems side by side.";

constexpr const char* kFooter =
    "Exit codes: 0 ok, 1 run failed, 2 usage, recipe or database error, 130 interrupted.\n"
    "Docs: docs/recipes.md (recipe fields), docs/reports.md (output), docs/schema.md (the\n"
    "database). `libra help COMMAND` shows a command's options.";

/// Help text wrapped at 72 columns (CLI11 does not wrap), keeping explicit line breaks.
std::string Help(const std::string& text) {
  std::vector<std::string> lines;
  for (const std::string& paragraph : StrSplit(text, '\n')) {
    for (std::string& line : report::WrapText(paragraph, 72)) lines.push_back(std::move(line));
  }
  return StrJoin(lines, "\n");
}

std::string Footer(const std::string& text) { return text + "\n\n" + kFooter; }

/// A check that adds nothing to --help (CLI11 would show e.g. "K:INT in [1 - 1000]").
CLI::Validator Quiet(const CLI::Validator& check) { return check.description(""); }

/// Each item of a comma-separated list, with the spaces around it removed ("a, b" is "a" and
/// "b"); an empty item is an error.
CLI::Validator TrimmedItem() {
  return CLI::Validator(
      [](std::string& item) {
        const size_t first = item.find_first_not_of(" \t");
        if (first == std::string::npos) return std::string("an empty item in the list");
        item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
        return std::string();
      },
      "", "trimmed");
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

const std::vector<std::string> kOutputFormats = {"text", "md", "csv", "json"};

/// CLI11's help layout without its internals: no "Excludes: ..." lists (a conflicting pair is a
/// usage error that names both), no "..." after a comma-separated list's A,B,... .
class Formatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_type_size() == 0) return out;
    const std::string type = opt->get_type_name();
    if (!type.empty()) out += " " + type;
    if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size &&
        type.find(",...") == std::string::npos) {
      out += " ...";
    }
    if (opt->get_required()) out += " REQUIRED";
    return out;
  }
};

class Cli {
 public:
  explicit Cli(const Io& io);
  int Main(int argc, char** argv);

 private:
  template <typename T>
  T* Keep() {
    auto kept = std::make_shared<T>();
    kept_.push_back(kept);
    return kept.get();
  }
  CLI::App* Command(const std::string& name, const std::string& help, const std::string& footer);
  /// `values`: the option's choices, for completion.
  void Choices(CLI::Option* option, std::vector<std::string> values) {
    choices_[option] = std::move(values);
  }
  void AddRecipeOptions(CLI::App* sub, RecipeOptions* o, bool recipe_required = true);
  void AddDb(CLI::App* sub, std::string* db, const std::string& help);
  void AddOutputOptions(CLI::App* sub, OutputOptions* o);
  CLI::Option* AddList(CLI::App* sub, const std::string& name, std::vector<std::string>* values,
                       const std::string& help);
  void AddRewardTarget(CLI::App* sub, std::optional<double>* target);

  void AddRun();
  void AddCompare();
  void AddTune();
  void AddReport();
  void AddExport();
  void AddPlan();
  void AddValidate();
  void AddCost();
  void AddWorkload();
  void AddProbe();
  void AddCalibrate();
  void AddVersion();
  void AddHelp();
  void AddCompletion();

  CompletionSpec Spec() const;
  /// "did you mean" for a first argument that is no subcommand; nullopt when it is one.
  std::optional<int> CheckSubcommand(const std::string& name) const;
  std::vector<std::string> SubcommandNames() const;

  CLI::App app_;
  Io io_;
  int exit_code_ = kExitOk;
  std::vector<std::shared_ptr<void>> kept_;
  std::map<const CLI::Option*, std::vector<std::string>> choices_;
};

Cli::Cli(const Io& io) : app_(kDescription, "libra"), io_(io) {
  app_.formatter(std::make_shared<Formatter>());
  app_.require_subcommand(1);
  app_.footer(kFooter);
  app_.set_version_flag("--version",
                        std::string("libra ") + LIBRA_VERSION + " (" + LIBRA_GIT_REVISION + ")",
                        "Print the version and exit");
  AddRun();
  AddCompare();
  AddTune();
  AddReport();
  AddExport();
  AddPlan();
  AddValidate();
  AddCost();
  AddWorkload();
  AddProbe();
  AddCalibrate();
  AddVersion();
  AddHelp();
  AddCompletion();
}

CLI::App* Cli::Command(const std::string& name, const std::string& help,
                       const std::string& footer) {
  CLI::App* sub = app_.add_subcommand(name, help);
  if (!footer.empty()) sub->footer(Footer(footer));
  return sub;
}

void Cli::AddDb(CLI::App* sub, std::string* db, const std::string& help) {
  sub->add_option("--db", *db, help)->capture_default_str()->type_name("PATH");
}

void Cli::AddOutputOptions(CLI::App* sub, OutputOptions* o) {
  CLI::Option* format =
      sub->add_option("--format", o->format,
                      Help("Output format: text, md (Markdown), csv or json. csv and json carry "
                           "every table at full precision, under the field names of "
                           "docs/reports.md"))
          ->capture_default_str()
          ->type_name("FORMAT");
  Choices(format, kOutputFormats);
  sub->add_flag("--json", o->json, "Print JSON: the same as --format json")->excludes(format);
  sub->add_option("--table", o->table,
                  Help("Print only this table (csv: plain CSV; json: an array of its rows)"))
      ->type_name("NAME");
}

void Cli::AddRecipeOptions(CLI::App* sub, RecipeOptions* o, bool recipe_required) {
  CLI::Option* recipe =
      sub->add_option("recipe", o->recipe, "Recipe file (TOML), e.g. recipes/quickstart.toml")
          ->type_name("RECIPE");
  if (recipe_required) recipe->required();
  AddDb(sub, &o->db, "Results database (created if missing)");
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
  AddOutputOptions(sub, &o->output);
}

CLI::Option* Cli::AddList(CLI::App* sub, const std::string& name, std::vector<std::string>* values,
                          const std::string& help) {
  return sub->add_option(name, *values, help)
      ->delimiter(',')
      ->transform(TrimmedItem())
      ->allow_extra_args(false)
      ->type_name("A,B,...");
}

void Cli::AddRewardTarget(CLI::App* sub, std::optional<double>* target) {
  sub->add_option("--reward-target", *target,
                  Help("Evaluation score that \"to target s\" times; default: per seed, [eval] "
                       "target_fraction (0.8) of the way from the initial score to the best "
                       "final score among the runs"))
      ->type_name("R");
}

void Cli::AddRun() {
  RecipeOptions* run = Keep<RecipeOptions>();
  CLI::App* sub = Command(
      "run", "Run the recipe's [system] and record it",
      "Prints a summary; `libra report` shows the steps. On a terminal a progress line is\n"
      "drawn; otherwise one line per finished step is printed (--log-format json: one JSON\n"
      "object per line; on stderr with --json). Ctrl-C stops cleanly: the run is recorded as\n"
      "interrupted, and `libra run --resume RUN` continues it (the simulator replays the\n"
      "recorded steps and checks them; the cluster backend restarts from the last step's\n"
      "checkpoint). `libra report RUN --recipe` prints a run's resolved recipe, which\n"
      "`libra run` repeats bit for bit.");
  AddRecipeOptions(sub, run, /*recipe_required=*/false);
  CLI::Option* resume =
      sub->add_option("--resume", run->resume,
                      Help("Continue this interrupted or failed run of --db, or one whose "
                           "libra died (its recorded recipe and system; no RECIPE)"))
          ->type_name("RUN");
  for (const char* name : {"recipe", "--seed", "--steps", "--set"}) {
    resume->excludes(sub->get_option(name));
  }
  sub->add_flag("--take-over", run->take_over,
                Help("With --resume: take over a run recorded as running by a libra on another "
                     "host, which this one cannot check (make sure it is gone)"));
  Choices(sub->add_option("--log-format", run->log_format,
                          "text or json: the line printed per step when stdout is no terminal")
              ->capture_default_str()
              ->type_name("FORMAT"),
          {"text", "json"});
  sub->callback([this, run] { exit_code_ = RunRun(*run, io_); });
}

void Cli::AddCompare() {
  CompareOptions* compare = Keep<CompareOptions>();
  CLI::App* sub = Command(
      "compare", "Run [system] and every [[baselines]] entry side by side",
      "Every system runs on the identical workload (same seed, same trajectories). The runs\n"
      "are recorded as one comparison; the table shows the speedup over the first baseline.\n"
      "Steps are logged as for `libra run`.");
  AddRecipeOptions(sub, &compare->common, /*recipe_required=*/false);
  sub->add_option("--resume", compare->resume,
                  Help("Continue this comparison of --db as recorded (no RECIPE): show the "
                       "finished runs, resume unfinished ones, run the rest"))
      ->type_name("COMPARISON");
  sub->add_flag("--take-over", compare->common.take_over,
                Help("With --resume: take over runs recorded as running by a libra on another "
                     "host (make sure it is gone)"));
  AddList(sub, "--systems", &compare->systems,
          Help("Only these systems, in this order (comma separated): the recipe's, or named "
               "systems (`libra version` lists them)"));
  sub->add_option("--repeat", compare->repeat,
                  Help("Run every system with K seeds (the recipe's and the next ones); report "
                       "the mean and spread (1 to 1000)"))
      ->check(Quiet(CLI::Range(1, 1000)))
      ->type_name("K");
  AddRewardTarget(sub, &compare->reward_target);
  sub->add_flag("--tuned", compare->tuned,
                Help("Run every peer at its tuned configuration (`libra tune`; tuned first where "
                     "the database holds no tuning for this recipe). Libra's systems run as their "
                     "planner decides"));
  sub->add_flag("--as-written", compare->as_written,
                Help("Run every system as the recipe writes it, even when its [tuning] sets "
                     "compare_tuned"));
  sub->add_flag("--sensitivity", compare->sensitivity,
                Help("Rerun the comparison under the standard perturbations of the constants the "
                     "simulator cannot measure; print each system's range and how often it is "
                     "first (docs/results.md, \"Robustness\")"));
  Choices(sub->add_option("--log-format", compare->common.log_format,
                          "text or json: the line printed per step when stdout is no terminal")
              ->capture_default_str()
              ->type_name("FORMAT"),
          {"text", "json"});
  sub->callback([this, compare] { exit_code_ = RunCompare(*compare, io_); });
}

void Cli::AddTune() {
  TuneOptions* tune = Keep<TuneOptions>();
  CLI::App* sub = Command(
      "tune", "Search a peer's knobs by simulation and record its best configuration",
      "Each peer declares the knobs its real system exposes (rollout TP, the train/rollout\n"
      "split, staleness where users can set it, its scheduler's thresholds). The search spends\n"
      "the same budget of simulated runs on every system, on seeds that are never reporting\n"
      "seeds, and records every configuration tried; `libra compare --tuned` then runs the peer\n"
      "at the winner. Libra's systems are never tuned. docs/recipes.md, \"Tuning\".");
  AddRecipeOptions(sub, &tune->common);
  AddList(sub, "--system", &tune->systems,
          Help("The systems to tune, the recipe's or named systems (comma separated; default: "
               "every system of the recipe with knobs)"));
  sub->add_option("--budget", tune->budget,
                  "Simulated runs per system (default: [tuning] budget_runs, 24)")
      ->check(Quiet(CLI::Range(1, 100000)))
      ->type_name("N");
  sub->callback([this, tune] { exit_code_ = RunTune(*tune, io_); });
}

void Cli::AddReport() {
  ReportOptions* report = Keep<ReportOptions>();
  CLI::App* sub = Command(
      "report", "Show recorded runs and comparisons",
      "With no run ids: the latest comparison, or the latest run with its steps. With ids or\n"
      "names: those runs side by side. --list: what the database holds. --plots, --markdown,\n"
      "--timeline and --export-trajectories write files instead of printing tables.");
  CLI::Option* runs =
      sub->add_option("runs", report->runs,
                      Help("Run ids, a comparison's name (its latest) or a system's name (its "
                           "latest run)"))
          ->type_name("RUN|NAME");
  AddDb(sub, &report->db, "Results database");
  CLI::Option* list =
      sub->add_flag("--list", report->list, "List every run in the database: steps done, status");
  CLI::Option* steps =
      sub->add_flag("--steps", report->steps, "Only the per-step table of one run");
  CLI::Option* recipe = sub->add_flag(
      "--recipe", report->recipe,
      Help("Print one run's fully resolved recipe (every default filled in, its own [system]); "
           "`libra run` on it repeats the run"));
  AddOutputOptions(sub, &report->output);
  CLI::Option* baseline = sub->add_option("--baseline", report->baseline,
                                          "System name or run id that speedups are relative to\n"
                                          "(default: the second run, i.e. the first baseline)")
                              ->type_name("NAME|RUN");
  AddRewardTarget(sub, &report->reward_target);
  CLI::Option* target = sub->get_option("--reward-target");
  CLI::Option* plots =
      sub->add_option("--plots", report->plots,
                      Help("Write SVG plots of the runs into DIR (created; its parent must "
                           "exist): reward and throughput, step-time breakdown, where the "
                           "GPU-seconds went, GPU allocation over time, trajectory lengths"))
          ->type_name("DIR");
  CLI::Option* markdown =
      sub->add_option("--markdown", report->markdown,
                      Help("Write a self-contained Markdown report (tables, links to the plots, "
                           "which go to --plots or to FILE's name without .md plus -plots/); "
                           "FILE's folder must exist"))
          ->type_name("FILE");
  CLI::Option* timeline =
      sub->add_option("--timeline", report->timeline,
                      Help("Write one run's timeline as Chrome trace-event JSON (Perfetto, "
                           "chrome://tracing)"))
          ->type_name("FILE");
  CLI::Option* trajectories =
      sub->add_option("--export-trajectories", report->export_trajectories,
                      Help("Write one run's trajectories as a JSONL trace (docs/traces.md) that "
                           "[workload] kind = \"trace\" can replay"))
          ->type_name("FILE");
  CLI::Option* format = sub->get_option("--format");
  CLI::Option* json = sub->get_option("--json");
  CLI::Option* table = sub->get_option("--table");
  // Flags that cannot go together: each pair is a usage error naming both.
  const std::vector<CLI::Option*> files = {plots, markdown, timeline, trajectories};
  for (CLI::Option* other :
       {runs, steps, recipe, baseline, target, plots, markdown, timeline, trajectories, table}) {
    list->excludes(other);
  }
  for (CLI::Option* other :
       {steps, baseline, target, plots, markdown, timeline, trajectories, format, json, table}) {
    recipe->excludes(other);
  }
  for (CLI::Option* other : {baseline, target, plots, markdown, timeline, trajectories}) {
    steps->excludes(other);
  }
  for (CLI::Option* file : files) {
    for (CLI::Option* output : {format, json, table}) file->excludes(output);
  }
  trajectories->excludes(plots)->excludes(markdown)->excludes(timeline);
  sub->callback([this, report] { exit_code_ = RunReport(*report, io_); });
}

void Cli::AddExport() {
  ExportOptions* ex = Keep<ExportOptions>();
  CLI::App* sub = Command(
      "export", "Write runs' per-step metrics for TensorBoard, or as CSV or JSONL",
      "Per-step metrics under the names verl users know (timing_s/gen, perf/throughput, ...;\n"
      "the mapping is in docs/reports.md), so that libra's runs sit beside verl or AReaL runs\n"
      "in TensorBoard (and tools that import its logs) or any dashboard that reads CSV.\n"
      "tensorboard: one event file per run under OUT/<system>-run<N>/; csv and jsonl: one\n"
      "file OUT/metrics.csv or OUT/metrics.jsonl (--out -: stdout).");
  sub->add_option("runs", ex->runs,
                  Help("Run ids, a comparison's name or a system's name (default: the latest "
                       "comparison, or the latest run)"))
      ->type_name("RUN|NAME");
  AddDb(sub, &ex->db, "Results database");
  Choices(sub->add_option("--format", ex->format, "tensorboard, csv or jsonl")
              ->capture_default_str()
              ->type_name("FORMAT"),
          {"tensorboard", "csv", "jsonl"});
  sub->add_option("--out", ex->out,
                  Help("Folder to write into (created; its parent must exist); - writes csv or "
                       "jsonl to stdout"))
      ->capture_default_str()
      ->type_name("DIR");
  sub->callback([this, ex] { exit_code_ = RunExport(*ex, io_); });
}

void Cli::AddPlan() {
  PlanOptions* plan = Keep<PlanOptions>();
  CLI::App* sub =
      Command("plan", "The planner alone: each system's GPU split and layout",
              "Shows the training / rollout split and rollout layout that each system's planner\n"
              "chooses for the recipe's cluster, and why; for planners that search (grp, no-ehp,\n"
              "libra-ref), their best candidates with predicted times. Runs nothing, except that\n"
              "--check simulates each plan (docs/planner.md, \"Checking a plan\").");
  AddRecipeOptions(sub, &plan->common);
  AddList(sub, "--systems", &plan->systems, "Only these systems (comma separated)");
  sub->add_flag("--explain", plan->explain,
                "Also print the search: training budgets, what was pruned and why");
  sub->add_flag("--check", plan->check,
                "Simulate each plan that comes with predicted phases and print predicted\n"
                "against measured (rollout, train, sync, step); exit 1 when the step is off\n"
                "by more than 10% or a phase by more than 15%");
  sub->callback([this, plan] { exit_code_ = RunPlan(*plan, io_); });
}

void Cli::AddValidate() {
  RecipeOptions* validate = Keep<RecipeOptions>();
  CLI::App* sub =
      Command("validate", "Check a recipe without running it",
              "Every error (unknown keys, wrong types, missing fields, impossible values, unknown\n"
              "policies or options) is printed as file:line:column: key.path: problem.");
  AddRecipeOptions(sub, validate);
  sub->callback([this, validate] { exit_code_ = RunValidate(*validate, io_); });
}

void Cli::AddCost() {
  CostOptions* cost = Keep<CostOptions>();
  CLI::App* sub = Command(
      "cost", "The cost model's numbers for the recipe's GPU and model",
      "Per rollout TP degree: KV capacity, single-sequence decode speed, saturated decode\n"
      "throughput per GPU and prefill speed; training step time and memory for the layouts of\n"
      "the training GPUs; weight-sync and role-switch times. Check these before trusting a plan.\n"
      "The [cost_model] table of the recipe (or --set cost_model.KEY=VALUE) changes them.");
  AddRecipeOptions(sub, &cost->common);
  sub->add_option("--contexts", cost->contexts, "Context lengths of the decode columns")
      ->delimiter(',')
      ->capture_default_str()
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("N,N,...");
  sub->add_option("--max-seqs", cost->max_sequences,
                  "Sequences an instance runs at once at most (max_num_seqs)")
      ->capture_default_str()
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("N");
  sub->add_option("--train-tokens", cost->train_tokens, "Tokens per training sequence")
      ->capture_default_str()
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("N");
  sub->add_option("--train-gpus", cost->train_gpus, "Training GPUs (default: half the cluster)")
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("N");
  sub->callback([this, cost] { exit_code_ = RunCost(*cost, io_); });
}

void Cli::AddWorkload() {
  WorkloadOptions* wl = Keep<WorkloadOptions>();
  CLI::App* sub = Command(
      "workload", "The distribution of the recipe's trajectories, per policy version",
      "Generates the recipe's workload for a few policy versions (no simulation) and prints\n"
      "p50/p90/p99/max of turns, generated tokens, tool output and tool latency, and the\n"
      "tool-failure, timeout, truncation and success rates: check a preset or a trace before\n"
      "using it. Each version gets the skill the reward model gives it after that many\n"
      "on-policy steps; versions whose trajectories are the same share a row. Success rates\n"
      "are modelled (docs/workloads.md).");
  AddRecipeOptions(sub, &wl->common);
  sub->add_option("--versions", wl->versions,
                  "Policy versions (default: 0 and every quarter of the steps)")
      ->delimiter(',')
      ->check(Quiet(CLI::NonNegativeNumber))
      ->type_name("V,V,...");
  sub->add_option("--prompts", wl->prompts, "Prompts per version (default: rl.prompts_per_step)")
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("N");
  sub->add_option("--skill", wl->skill,
                  "The policy's modelled skill, from 0 to 1, for every version")
      ->check(Quiet(CLI::Range(0.0, 1.0)))
      ->type_name("X");
  sub->callback([this, wl] { exit_code_ = RunWorkload(*wl, io_); });
}

void Cli::AddProbe() {
  ProbeOptions* probe = Keep<ProbeOptions>();
  CLI::App* sub = Command(
      "probe", "Measure this node's GPUs (or import probes) for calibration",
      "Inventory, HBM copy bandwidth, bf16 GEMM throughput, host<->device bandwidth and NCCL\n"
      "all-reduce / broadcast bus bandwidth across this node's GPUs; recorded in --db. Needs a\n"
      "libra built with -DLIBRA_WITH_CUDA=ON (and -DLIBRA_WITH_NCCL=ON for NCCL); otherwise it\n"
      "exits 1 and probes measured elsewhere can be imported with --import. With --hosts,\n"
      "every node of the recipe's [launcher] is probed (libra probe runs there, local or over\n"
      "ssh), then NCCL across the nodes, one process per node joined through the unique id\n"
      "that node 0 prints and libra hands to the others. docs/calibration.md.");
  sub->add_option("recipe", probe->recipe,
                  "Recipe whose GPU numbers --calibration starts from (default: the catalog\n"
                  "GPU the device name matches)")
      ->type_name("RECIPE");
  AddDb(sub, &probe->db, "Results database (created if missing)");
  sub->add_option("--json", probe->json,
                  "Also write the probes as JSON (for --import); -: to stdout, instead of the "
                  "table")
      ->type_name("FILE");
  sub->add_option("--import", probe->import,
                  "Record probes from a JSON file written by --json instead of measuring")
      ->type_name("FILE");
  sub->add_option("--calibration", probe->calibration,
                  "Write a calibration TOML from these probes for a recipe to include")
      ->type_name("FILE");
  sub->add_option("--gpus", probe->gpus, "Only these device indices (comma separated)")
      ->delimiter(',')
      ->check(Quiet(CLI::NonNegativeNumber))
      ->type_name("N,N,...");
  sub->add_flag("--quick", probe->quick,
                "Small sizes, few repetitions: a smoke test, not a measurement");
  sub->add_flag("-q,--quiet", probe->quiet, "Print nothing but errors");
  sub->add_flag("--hosts", probe->hosts,
                "Probe every node of the recipe's [launcher], and NCCL across them");
  sub->add_option("--libra", probe->libra,
                  "With --hosts: the libra program on the nodes (default: this one's path)")
      ->type_name("PATH");
  sub->add_option("--timeout", probe->timeout_s, "With --hosts: seconds for all probes")
      ->capture_default_str()
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("S");
  sub->add_flag("--no-record", probe->no_record,
                "Measure and print only; record nothing (what --hosts runs on a node)");
  const std::string internal = "Across nodes (started by --hosts)";
  sub->add_option("--nccl-nodes", probe->nccl_nodes, "Nodes of a probe across nodes (2 to 4096)")
      ->check(Quiet(CLI::Range(2, 4096)))
      ->type_name("N")
      ->group(internal);
  sub->add_option("--nccl-node", probe->nccl_node, "This process's node (0: makes the id)")
      ->check(Quiet(CLI::NonNegativeNumber))
      ->type_name("K")
      ->group(internal);
  sub->add_option("--nccl-gpus-per-node", probe->nccl_gpus_per_node, "GPUs of each node")
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("G")
      ->group(internal);
  sub->add_option("--nccl-id", probe->nccl_id, "Node 0's NCCL unique id (hex)")
      ->type_name("HEX")
      ->group(internal);
  sub->callback([this, probe] { exit_code_ = RunProbe(*probe, io_); });
}

void Cli::AddCalibrate() {
  CalibrateOptions* calibrate = Keep<CalibrateOptions>();
  CLI::App* sub = Command(
      "calibrate", "Fit the cost model's efficiency factors to recorded runs and probes",
      "Derives measurements from the runs in --db (turn times, train steps, weight syncs) and,\n"
      "with --probes, takes the GPU numbers of the newest probe session; fits the roofline\n"
      "model's factors and prints predicted against measured per term, before and after, with\n"
      "the remaining error. Factors the data cannot identify are left as they are, and say why.\n"
      "--write FILE saves the result for a recipe's include = [...]. docs/calibration.md.");
  sub->add_option("recipe", calibrate->common.recipe,
                  "Recipe whose GPU, model and cost model are calibrated")
      ->required()
      ->type_name("RECIPE");
  AddDb(sub, &calibrate->common.db, "Results database");
  sub->add_option("--set", calibrate->common.sets, "Override a recipe field; repeatable")
      ->type_name("KEY.PATH=VALUE")
      ->take_all()
      ->allow_extra_args(false);
  sub->add_option("--runs", calibrate->runs,
                  "Run ids to fit to (default: every finished run on the recipe's GPU)")
      ->delimiter(',')
      ->type_name("ID,ID,...");
  sub->add_flag("--probes", calibrate->probes, "Also use the newest probe session in the database");
  sub->add_option("--write", calibrate->write, "Write the calibration TOML to FILE")
      ->type_name("FILE");
  sub->callback([this, calibrate] { exit_code_ = RunCalibrate(*calibrate, io_); });
}

void Cli::AddVersion() {
  CLI::App* sub = Command("version", "Version, source revision, build features and policies", "");
  sub->callback([this] { exit_code_ = RunVersion(io_); });
}

void Cli::AddHelp() {
  std::string* name = Keep<std::string>();
  CLI::App* sub = Command("help", "Help for libra, or for one of its commands", "");
  sub->add_option("command", *name, "The command")->type_name("COMMAND");
  sub->callback([this, name] {
    if (name->empty()) {
      io_.out << app_.get_formatter()->make_help(&app_, "libra", CLI::AppFormatMode::Normal);
      return;
    }
    if (std::optional<int> bad = CheckSubcommand(*name)) {
      exit_code_ = *bad;
      return;
    }
    io_.out << app_.get_subcommand(*name)->help("libra");
  });
}

void Cli::AddCompletion() {
  std::string* shell = Keep<std::string>();
  CLI::App* sub =
      Command("completion", "Print the shell completion script (bash or zsh)",
              "bash: add `source <(libra completion bash)` to ~/.bashrc.\n"
              "zsh: `libra completion zsh > \"${fpath[1]}/_libra\"`, then start a new shell.");
  Choices(sub->add_option("shell", *shell, "bash or zsh")->required()->type_name("SHELL"),
          {"bash", "zsh"});
  sub->callback([this, shell] {
    Result<std::string> script = CompletionScript(Spec(), *shell);
    if (!script.ok()) {
      io_.err << "libra: error: " << script.status().message() << "\n";
      exit_code_ = kExitUsage;
      return;
    }
    io_.out << *script;
  });
}

std::vector<std::string> Cli::SubcommandNames() const {
  std::vector<std::string> names;
  for (const CLI::App* sub : app_.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

std::optional<int> Cli::CheckSubcommand(const std::string& name) const {
  const std::vector<std::string> names = SubcommandNames();
  if (std::find(names.begin(), names.end(), name) != names.end()) return std::nullopt;
  std::string message = "libra: '" + name + "' is not a libra command";
  const std::string hint = ClosestMatch(name, names);
  if (!hint.empty()) message += "; did you mean '" + hint + "'?";
  io_.err << message << "\n`libra help` lists the commands: " << StrJoin(names, ", ") << "\n";
  return kExitUsage;
}

CompletionSpec Cli::Spec() const {
  auto option_spec = [this](const CLI::Option* o) {
    CompletionSpec::Option spec;
    for (const std::string& s : o->get_snames()) spec.names.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) spec.names.push_back("--" + l);
    spec.help = StrSplit(o->get_description(), '\n').front();
    spec.takes_value = o->get_items_expected_max() > 0;  // a flag expects none
    if (auto it = choices_.find(o); it != choices_.end()) spec.values = it->second;
    const std::string type = o->get_type_name();
    if (type == "RECIPE") spec.files = "*.toml";
    if (type == "FILE" || type == "PATH") spec.files = "*";
    spec.dirs = type == "DIR";
    return spec;
  };
  CompletionSpec spec;
  for (const CLI::Option* o : app_.get_options()) {
    if (o->nonpositional()) spec.global.push_back(option_spec(o));
  }
  for (const CLI::App* sub : app_.get_subcommands({})) {
    CompletionSpec::Command command;
    command.name = sub->get_name();
    command.help = sub->get_description();
    for (const CLI::Option* o : sub->get_options()) {
      if (o->nonpositional()) {
        command.options.push_back(option_spec(o));
        continue;
      }
      const CompletionSpec::Option positional = option_spec(o);
      if (!positional.files.empty()) command.positional_files = positional.files;
      if (!positional.values.empty()) command.positional_values = positional.values;
      if (command.name == "help") command.positional_values = SubcommandNames();
    }
    spec.commands.push_back(std::move(command));
  }
  return spec;
}

int Cli::Main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    if (std::optional<int> bad = CheckSubcommand(argv[1])) return *bad;
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app_.exit(e, io_.out, io_.err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return exit_code_;
}

}  // namespace

int Main(int argc, char** argv) {
  const Io io{std::cout, std::cerr, isatty(STDOUT_FILENO) == 1};
  return Cli(io).Main(argc, argv);
}

}  // namespace libra::cli
