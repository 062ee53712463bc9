// `libra report`: tables from the results database.
#include <algorithm>
#include <filesystem>
#include <ostream>
#include <set>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/files.h"
#include "common/strings.h"
#include "libra/config.h"
#include "recipe/recipe_parser.h"
#include "report/charts.h"
#include "report/summary.h"
#include "report/trace_events.h"
#include "store/store.h"
#include "workload/trace.h"

namespace libra::cli {
namespace {

/// The index of --baseline (a system name or a run id) among `views`.
Result<std::optional<size_t>> FindBaseline(const std::string& baseline,
                                           const std::vector<report::RunView>& views) {
  if (baseline.empty()) {
    if (views.size() > 1) return std::optional<size_t>(1);  // the first baseline
    return std::optional<size_t>();
  }
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].run.system == baseline || std::to_string(views[i].run.id) == baseline) {
      return std::optional<size_t>(i);
    }
  }
  return Status::InvalidArgument("--baseline '" + baseline +
                                 "' is neither a system nor a run id of this report");
}

/// How convergence is read: --reward-target, else the fraction of the first run's recipe
/// ([eval] target_fraction; 0.8 when it cannot be read).
report::Convergence ConvergenceOf(const ReportOptions& options,
                                  const std::vector<report::RunView>& views) {
  report::Convergence convergence;
  convergence.target = options.reward_target;
  if (!views.empty()) {
    auto parsed =
        recipe::ParseRecipe(views.front().run.recipe_toml, views.front().run.recipe_source, {});
    if (parsed.ok()) convergence.fraction = parsed->recipe.eval.target_fraction;
  }
  return convergence;
}

/// Writes one run's trajectories, with their turns, as a trace.
Status ExportTrajectories(store::Store& store, int64_t run_id, const std::string& path,
                          const Io& io) {
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::TrajectoryRecord> trajectories,
                         store.Trajectories(run_id));
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::TurnRecord> turns, store.Turns(run_id));
  std::vector<workload::TraceRecord> records;
  size_t next_turn = 0;
  for (const records::TrajectoryRecord& t : trajectories) {
    workload::TraceRecord r;
    r.prompt = t.prompt;
    r.sample = t.sample;
    r.prompt_tokens = t.prompt_tokens;
    r.reward = t.reward;
    r.version = t.version;
    // Turns come ordered by trajectory id, as the trajectories do.
    for (; next_turn < turns.size() && turns[next_turn].trajectory == t.id; ++next_turn) {
      const records::TurnRecord& turn = turns[next_turn];
      workload::TurnScript script;
      script.generated_tokens = turn.generated_tokens;
      script.tool = turn.tool;
      script.tool_output_tokens = turn.tool_output_tokens;
      script.tool_latency_s = turn.tool_latency_s;
      const std::optional<workload::TurnEnd> end = EnumNames<workload::TurnEnd>::Find(turn.end);
      const std::optional<workload::ToolStatus> tool_status =
          turn.tool_status.empty() ? script.tool_status
                                   : EnumNames<workload::ToolStatus>::Find(turn.tool_status);
      if (!end || !tool_status) {
        return Status::Store(store.path(), StrFormat("run %lld, trajectory %lld, turn %d: "
                                                     "unreadable turn record",
                                                     static_cast<long long>(run_id),
                                                     static_cast<long long>(t.id), turn.turn));
      }
      script.end = *end;
      script.tool_status = *tool_status;
      r.turns.push_back(script);
    }
    if (r.turns.empty()) {
      return Status::NotFound(StrFormat(
          "run %lld has no turn records (it was recorded by a libra older than the turns table)",
          static_cast<long long>(run_id)));
    }
    records.push_back(std::move(r));
  }
  if (records.empty()) {
    return Status::NotFound(
        StrFormat("run %lld has no finished trajectory to export", static_cast<long long>(run_id)));
  }
  LIBRA_RETURN_IF_ERROR(workload::WriteTrace(path, records));
  io.out << StrFormat("wrote %zu trajectories of run %lld to %s\n", records.size(),
                      static_cast<long long>(run_id), path.c_str());
  return Status();
}

/// Writes the plots of `views` into `dir` (created when missing; its parent must exist); the
/// files written, in order.
Result<std::vector<std::string>> WritePlots(store::Store& store,
                                            const std::vector<report::RunView>& views,
                                            const report::Convergence& convergence,
                                            const std::string& dir, const std::string& flag) {
  LIBRA_RETURN_IF_ERROR(MakeFolder(dir, flag));
  std::vector<report::PlotRun> runs;
  for (const report::RunView& view : views) {
    report::PlotRun run{view, {}, {}, {}};
    LIBRA_ASSIGN_OR_RETURN(run.trajectories, store.Trajectories(view.run.id));
    LIBRA_ASSIGN_OR_RETURN(run.decisions, store.Decisions(view.run.id));
    LIBRA_ASSIGN_OR_RETURN(run.events, store.Events(view.run.id));
    runs.push_back(std::move(run));
  }
  std::vector<std::string> names;
  for (const report::PlotFile& plot : report::BuildPlots(runs, convergence)) {
    LIBRA_RETURN_IF_ERROR(
        WriteFileAtomically((std::filesystem::path(dir) / plot.name).string(), plot.svg, "plot"));
    names.push_back(plot.name);
  }
  return names;
}

Status WriteTimeline(store::Store& store, const report::RunView& view, const std::string& path,
                     const Io& io) {
  report::TimelineInput input;
  input.run = view.run;
  LIBRA_ASSIGN_OR_RETURN(input.turns, store.Turns(view.run.id));
  LIBRA_ASSIGN_OR_RETURN(input.events, store.Events(view.run.id));
  LIBRA_ASSIGN_OR_RETURN(input.decisions, store.Decisions(view.run.id));
  LIBRA_RETURN_IF_ERROR(WriteFileAtomically(path, report::TimelineJson(input), "timeline"));
  io.out << StrFormat("wrote the timeline of run %lld (%zu turns, %zu events) to %s\n",
                      static_cast<long long>(view.run.id), input.turns.size(), input.events.size(),
                      path.c_str());
  return Status();
}

/// One run's steps, planner decisions and router counters, under names prefixed by `prefix`
/// (tables of several runs in one document) and headings after `heading` ("steps" etc. alone
/// when empty).
Status AddRunTables(store::Store& store, const report::RunView& view, const std::string& prefix,
                    const std::string& heading, report::Document* doc) {
  LIBRA_ASSIGN_OR_RETURN(std::vector<records::DecisionRecord> decisions,
                         store.Decisions(view.run.id));
  LIBRA_ASSIGN_OR_RETURN(auto metrics, store.RouterMetrics(view.run.id));
  const std::string of = heading.empty() ? "" : " of " + heading;
  doc->AddTable(prefix + "steps", heading.empty() ? "" : heading, report::StepTable(view));
  doc->AddTable(prefix + "planner_decisions", "planner decisions (" + view.run.planner + ")" + of,
                report::PlannerActivityTable(decisions, view.steps),
                report::Document::Shown::kWhenNotEmpty);
  doc->AddTable(prefix + "router_counters", "router counters (" + view.run.router + ")" + of,
                report::RouterActivityTable(metrics), report::Document::Shown::kWhenNotEmpty);
  return Status();
}

/// The summary of `views`: a sensitivity study (`compare --sensitivity`) as one again, or the
/// repeat table first when they are a comparison of several seeds; and a note when simulated and
/// real runs sit side by side.
void AddSummary(const std::vector<report::RunView>& views, const Selection& selection,
                std::optional<size_t> baseline, const ReportOptions& options,
                report::Document* doc) {
  const report::Convergence convergence = ConvergenceOf(options, views);
  const bool sensitivity = std::any_of(
      views.begin(), views.end(), [](const report::RunView& v) { return !v.run.scenario.empty(); });
  const bool repeat =
      !sensitivity && selection.comparison && selection.comparison->seeds > 1 && !views.empty();
  if (sensitivity) {
    std::vector<std::string> systems;
    for (const report::RunView& v : views) {
      if (std::find(systems.begin(), systems.end(), v.run.system) == systems.end()) {
        systems.push_back(v.run.system);
      }
    }
    doc->AddTable("sensitivity_matrix", "", report::SensitivityMatrix(views, systems));
    doc->AddTable("sensitivity", "", report::SensitivityTable(views, systems));
  } else if (repeat) {
    const size_t per_seed = views.size() / static_cast<size_t>(selection.comparison->seeds);
    std::vector<std::string> systems;
    for (size_t i = 0; i < per_seed; ++i) systems.push_back(views[i].run.system);
    std::optional<std::string> base;
    if (systems.size() > 1) base = systems[1];
    doc->AddTable("repeat", "", report::RepeatTable(views, systems, base, convergence));
    doc->AddNote(report::RepeatCaption(selection.comparison->seeds, views.front().run.seed, base));
  }
  // After a repeat or a sensitivity study, the table of every run is for scripts; the text shows
  // the tables over seeds and scenarios.
  // A single run without a selection title is shown under its headline (RunHeadline).
  const bool headlined = selection.title.empty() && views.size() == 1;
  doc->AddTable("summary", "", report::SummaryTable(views, baseline, convergence, headlined),
                repeat || sensitivity ? report::Document::Shown::kDataOnly
                                      : report::Document::Shown::kAlways);
  // Simulated and real runs side by side: say which numbers were measured.
  std::vector<std::string> simulated;
  std::vector<std::string> real;
  for (const report::RunView& v : views) {
    (v.run.Simulated() ? simulated : real).push_back(std::to_string(v.run.id));
  }
  if (!simulated.empty() && !real.empty()) {
    doc->AddNote(StrFormat(
        "simulated (times simulated, rewards modelled): run %s; measured on real processes "
        "(backend cluster): run %s",
        StrJoin(simulated, ", ").c_str(), StrJoin(real, ", ").c_str()));
  }
}

/// One Markdown document: the summary, the plots (written to `plots_dir`) and each run's steps
/// and activity.
Status WriteMarkdown(store::Store& store, const std::vector<report::RunView>& views,
                     const Selection& selection, std::optional<size_t> baseline,
                     const ReportOptions& options, const std::string& plots_dir, const Io& io) {
  LIBRA_ASSIGN_OR_RETURN(
      std::vector<std::string> plots,
      WritePlots(store, views, ConvergenceOf(options, views), plots_dir, "--plots"));
  const std::filesystem::path base =
      std::filesystem::path(options.markdown).parent_path().lexically_normal();
  const std::filesystem::path link =
      std::filesystem::path(plots_dir).lexically_normal().lexically_relative(
          base.empty() ? std::filesystem::path(".") : base);
  const bool simulated = std::any_of(views.begin(), views.end(),
                                     [](const report::RunView& v) { return v.run.Simulated(); });
  const std::string& title = selection.title;
  std::string md = "# " + (title.empty() ? report::RunHeadline(views.front().run) : title) + "\n\n";
  md += StrFormat("From `%s` by libra %s (%s).%s\n\n", options.db.c_str(), LIBRA_VERSION,
                  LIBRA_GIT_REVISION,
                  simulated ? " Simulated runs: times are simulated seconds and rewards are "
                              "modelled (the skill model), not measured."
                            : "");
  report::Document summary;
  AddSummary(views, selection, baseline, options, &summary);
  md += "## Summary\n\n" + summary.Render(report::Format::kMarkdown);
  md += "\n## Plots\n\n";
  for (const std::string& plot : plots) {
    md += "![" + plot + "](" + (link / plot).generic_string() + ")\n\n";
  }
  for (const report::RunView& view : views) {
    report::Document run(report::RunHeadline(view.run));
    LIBRA_RETURN_IF_ERROR(AddRunTables(store, view, "", "", &run));
    md += run.Render(report::Format::kMarkdown) + "\n";
  }
  LIBRA_RETURN_IF_ERROR(WriteFileAtomically(options.markdown, md, "report"));
  io.out << StrFormat("wrote %s with %zu runs and %zu plots in %s\n", options.markdown.c_str(),
                      views.size(), plots.size(), plots_dir.c_str());
  return Status();
}

/// The file-writing modes: --timeline, --markdown, --plots.
int WriteFiles(store::Store& store, const std::vector<report::RunView>& views,
               const Selection& selection, std::optional<size_t> baseline,
               const ReportOptions& options, const Io& io) {
  if (!options.timeline.empty()) {
    if (views.size() != 1) {
      return Fail(io, Status::InvalidArgument(StrFormat(
                          "--timeline draws one run; this report has %zu (name one run id)",
                          views.size())));
    }
    if (Status s = CheckFolderOf(options.timeline, "--timeline"); !s.ok()) return Fail(io, s);
  }
  std::string plots_dir = options.plots;
  if (!options.markdown.empty()) {
    if (Status s = CheckFolderOf(options.markdown, "--markdown"); !s.ok()) return Fail(io, s);
    if (plots_dir.empty()) {
      std::filesystem::path path(options.markdown);
      plots_dir = (path.parent_path() / (path.stem().string() + "-plots")).string();
    }
  }
  if (!options.timeline.empty()) {
    if (Status s = WriteTimeline(store, views.front(), options.timeline, io); !s.ok()) {
      return Fail(io, s);
    }
  }
  if (!options.markdown.empty()) {
    return Fail(io, WriteMarkdown(store, views, selection, baseline, options, plots_dir, io));
  }
  if (!options.plots.empty()) {
    auto plots = WritePlots(store, views, ConvergenceOf(options, views), options.plots, "--plots");
    if (!plots.ok()) return Fail(io, plots.status());
    io.out << StrFormat("wrote %zu plots to %s: %s\n", plots->size(), options.plots.c_str(),
                        StrJoin(*plots, ", ").c_str());
  }
  return kExitOk;
}

/// --recipe: the run's fully resolved recipe, as `libra run` takes it.
int PrintRecipe(const report::RunView& view, const ReportOptions& options, const Io& io) {
  if (!view.run.resolved_recipe.empty()) {
    io.out << view.run.resolved_recipe;
    return kExitOk;
  }
  // Recorded before resolved recipes were kept: the recipe as given, which says so.
  io.err << StrFormat(
      "libra: run %lld was recorded by a libra that did not keep resolved recipes; this is the "
      "recipe as given%s, with all its systems (the run's is '%s'), not resolved\n",
      static_cast<long long>(view.run.id),
      view.run.recipe_source.empty() ? "" : (" (" + view.run.recipe_source + ")").c_str(),
      view.run.system.c_str());
  io.out << view.run.recipe_toml;
  (void)options;
  return kExitOk;
}

}  // namespace

int RunReport(const ReportOptions& options, const Io& io) {
  auto format = ChosenFormat(options.output);
  if (!format.ok()) return Fail(io, format.status());
  auto store = OpenStore(options.db, StoreAccess::kRead);
  if (!store.ok()) return Fail(io, store.status());

  if (options.list) {
    auto runs = (*store)->ListRuns();
    if (!runs.ok()) return Fail(io, runs.status());
    auto done = (*store)->StepCounts();
    if (!done.ok()) return Fail(io, done.status());
    report::Document doc;
    doc.AddField("db", options.db);
    doc.AddTable("runs", "", report::ListTable(*runs, *done));
    return Print(io, doc, options.output);
  }

  auto selected = Select(**store, options.runs, options.db);
  if (!selected.ok()) return Fail(io, selected.status());
  auto views = ReadViews(**store, selected->ids);
  if (!views.ok()) return Fail(io, views.status());
  auto one = [&](const char* flag, const char* what) -> Status {
    if (views->size() == 1) return Status();
    return Status::InvalidArgument(StrFormat("%s %s one run; this report has %zu (name one run id)",
                                             flag, what, views->size()));
  };

  if (options.recipe) {
    if (Status s = one("--recipe", "prints"); !s.ok()) return Fail(io, s);
    return PrintRecipe(views->front(), options, io);
  }
  if (!options.export_trajectories.empty()) {
    if (Status s = one("--export-trajectories", "writes"); !s.ok()) return Fail(io, s);
    if (Status s = CheckFolderOf(options.export_trajectories, "--export-trajectories"); !s.ok()) {
      return Fail(io, s);
    }
    return Fail(
        io, ExportTrajectories(**store, views->front().run.id, options.export_trajectories, io));
  }
  if (options.steps) {
    if (Status s = one("--steps", "shows"); !s.ok()) return Fail(io, s);
    report::Document doc(report::RunHeadline(views->front().run));
    doc.AddField("run", views->front().run.id);
    doc.AddTable("steps", "", report::StepTable(views->front()));
    return Print(io, doc, options.output);
  }
  auto baseline = FindBaseline(options.baseline, *views);
  if (!baseline.ok()) return Fail(io, baseline.status());
  if (!options.timeline.empty() || !options.plots.empty() || !options.markdown.empty()) {
    return WriteFiles(**store, *views, *selected, *baseline, options, io);
  }

  report::Document doc(selected->title.empty() && views->size() == 1
                           ? report::RunHeadline(views->front().run)
                           : selected->title);
  doc.AddField("db", options.db);
  std::vector<int64_t> ids;
  for (const report::RunView& v : *views) ids.push_back(v.run.id);
  doc.AddField("runs", JsonValue::MakeArray({ids.begin(), ids.end()}));
  if (selected->comparison) doc.AddField("comparison", selected->comparison->id);
  AddSummary(*views, *selected, *baseline, options, &doc);
  if (views->size() == 1) {
    if (Status s = AddRunTables(**store, views->front(), "", "", &doc); !s.ok()) {
      return Fail(io, s);
    }
  }
  return Print(io, doc, options.output);
}

}  // namespace libra::cli
