// `libra report`: tables from the results database.
#include <algorithm>
#include <charconv>
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

/// What the report shows: the runs, and a title when they are a comparison.
struct Selection {
  std::vector<int64_t> ids;
  std::string title;
};

std::string ComparisonTitle(const store::ComparisonInfo& c) {
  return StrFormat("comparison %lld: %s, %zu runs (%s)", static_cast<long long>(c.id),
                   c.name.c_str(), c.run_ids.size(), c.created_at.c_str());
}

/// Resolves the command line's runs: ids, comparison names, system names; none means the latest
/// comparison (or run).
Result<Selection> Select(store::Store& store, const std::vector<store::RunInfo>& runs,
                         const std::vector<std::string>& args, const std::string& db) {
  Selection selection;
  if (runs.empty()) {
    return Status::NotFound(db + " holds no run yet; `libra run RECIPE` records one");
  }
  if (args.empty()) {
    const store::RunInfo& latest = runs.back();
    if (!latest.comparison_id) return Selection{{latest.id}, ""};
    LIBRA_ASSIGN_OR_RETURN(store::ComparisonInfo comparison,
                           store.GetComparison(*latest.comparison_id));
    return Selection{comparison.run_ids, ComparisonTitle(comparison)};
  }
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::ComparisonInfo> comparisons, store.ListComparisons());
  for (const std::string& arg : args) {
    if (!arg.empty() &&
        std::all_of(arg.begin(), arg.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      int64_t id = 0;
      if (std::from_chars(arg.data(), arg.data() + arg.size(), id).ec != std::errc()) {
        return Status::NotFound("run " + arg + " is not in " + db);
      }
      selection.ids.push_back(id);
      continue;
    }
    auto comparison = std::find_if(comparisons.rbegin(), comparisons.rend(),
                                   [&](const store::ComparisonInfo& c) { return c.name == arg; });
    if (comparison != comparisons.rend()) {
      selection.ids.insert(selection.ids.end(), comparison->run_ids.begin(),
                           comparison->run_ids.end());
      if (args.size() == 1) selection.title = ComparisonTitle(*comparison);
      continue;
    }
    auto run = std::find_if(runs.rbegin(), runs.rend(),
                            [&](const store::RunInfo& r) { return r.system == arg; });
    if (run != runs.rend()) {
      selection.ids.push_back(run->id);
      continue;
    }
    std::set<std::string> names;
    for (const store::ComparisonInfo& c : comparisons) names.insert(c.name);
    for (const store::RunInfo& r : runs) names.insert(r.system);
    std::string what =
        "'" + arg + "' is neither a run id, a comparison nor a system in " + db +
        " (names: " + StrJoin(std::vector<std::string>(names.begin(), names.end()), ", ") + ")";
    const std::string hint =
        ClosestMatch(arg, std::vector<std::string>(names.begin(), names.end()));
    if (!hint.empty()) what += "; did you mean '" + hint + "'?";
    return Status::NotFound(what);
  }
  return selection;
}

/// How convergence is read: --reward-target, else the fraction of the first run's recipe
/// ([eval] target_fraction; 0.8 when it cannot be read).
report::Convergence ConvergenceOf(const ReportOptions& options,
                                  const std::vector<report::RunView>& views) {
  report::Convergence convergence;
  convergence.target = options.reward_target;
  if (!views.empty()) {
    auto parsed = recipe::ParseRecipe(views.front().run.recipe_toml,
                                      views.front().run.recipe_source, {});
    if (parsed.ok()) convergence.fraction = parsed->recipe.eval.target_fraction;
  }
  return convergence;
}

/// Writes one run's trajectories, with their turns, as a trace.
Status ExportTrajectories(store::Store& store, int64_t run_id, const std::string& path,
                          const Io& io) {
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::TrajectoryRecord> trajectories,
                         store.Trajectories(run_id));
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::TurnRecord> turns, store.Turns(run_id));
  std::vector<workload::TraceRecord> records;
  size_t next_turn = 0;
  for (const store::TrajectoryRecord& t : trajectories) {
    workload::TraceRecord r;
    r.prompt = t.prompt;
    r.sample = t.sample;
    r.prompt_tokens = t.prompt_tokens;
    r.reward = t.reward;
    r.version = t.version;
    // Turns come ordered by trajectory id, as the trajectories do.
    for (; next_turn < turns.size() && turns[next_turn].trajectory == t.id; ++next_turn) {
      const store::TurnRecord& turn = turns[next_turn];
      workload::TurnScript script;
      script.generated_tokens = turn.generated_tokens;
      script.tool = turn.tool;
      script.tool_output_tokens = turn.tool_output_tokens;
      script.tool_latency_s = turn.tool_latency_s;
      if (!workload::ParseTurnEnd(turn.end, &script.end) ||
          (!turn.tool_status.empty() &&
           !workload::ParseToolStatus(turn.tool_status, &script.tool_status))) {
        return Status::Store(store.path(), StrFormat("run %lld, trajectory %lld, turn %d: "
                                                     "unreadable turn record",
                                                     static_cast<long long>(run_id),
                                                     static_cast<long long>(t.id), turn.turn));
      }
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

/// Writes the plots of `views` into `dir` (created when missing); the files written, in order.
Result<std::vector<std::string>> WritePlots(store::Store& store,
                                            const std::vector<report::RunView>& views,
                                            const std::string& dir) {
  std::vector<report::PlotRun> runs;
  for (const report::RunView& view : views) {
    report::PlotRun run{view, {}, {}};
    LIBRA_ASSIGN_OR_RETURN(run.trajectories, store.Trajectories(view.run.id));
    LIBRA_ASSIGN_OR_RETURN(run.decisions, store.Decisions(view.run.id));
    runs.push_back(std::move(run));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::InvalidArgument(dir + ": cannot create the plots folder (" + ec.message() + ")");
  std::vector<std::string> names;
  for (const report::PlotFile& plot : report::BuildPlots(runs)) {
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

/// The planner's decisions and the router's counters of one run, each with a heading; nothing
/// for a table that would be empty.
Result<std::string> ActivityTables(store::Store& store, const report::RunView& view,
                                   report::Format format, const std::string& heading) {
  std::string out;
  LIBRA_ASSIGN_OR_RETURN(std::vector<store::DecisionRecord> decisions,
                         store.Decisions(view.run.id));
  LIBRA_ASSIGN_OR_RETURN(auto metrics, store.RouterMetrics(view.run.id));
  if (!decisions.empty()) {
    out += "\n" + heading + "planner decisions (" + view.run.planner + ")\n\n" +
           report::PlannerActivityTable(decisions, view.steps).Render(format);
  }
  if (!metrics.empty()) {
    out += "\n" + heading + "router counters (" + view.run.router + ")\n\n" +
           report::RouterActivityTable(metrics).Render(format);
  }
  return out;
}

/// One Markdown document: the summary, the plots (written to `plots_dir`) and each run's steps
/// and activity.
Status WriteMarkdown(store::Store& store, const std::vector<report::RunView>& views,
                     std::optional<size_t> baseline, const ReportOptions& options,
                     const std::string& title, const std::string& plots_dir, const Io& io) {
  LIBRA_ASSIGN_OR_RETURN(std::vector<std::string> plots, WritePlots(store, views, plots_dir));
  const std::filesystem::path base =
      std::filesystem::path(options.markdown).parent_path().lexically_normal();
  const std::filesystem::path link =
      std::filesystem::path(plots_dir).lexically_normal().lexically_relative(
          base.empty() ? std::filesystem::path(".") : base);
  const bool simulated = std::any_of(
      views.begin(), views.end(), [](const report::RunView& v) { return v.run.backend == "sim"; });
  std::string md = "# " + (title.empty() ? report::RunHeadline(views.front().run) : title) + "\n\n";
  md += StrFormat("From `%s` by libra %s (%s).%s\n\n", options.db.c_str(), LIBRA_VERSION,
                  LIBRA_GIT_REVISION,
                  simulated ? " Simulated runs: times are simulated seconds and rewards are "
                              "modelled (the skill model), not measured."
                            : "");
  md += "## Summary\n\n" + report::SummaryTable(views, baseline, ConvergenceOf(options, views))
                               .Render(report::Format::kMarkdown);
  md += "\n## Plots\n\n";
  for (const std::string& plot : plots) {
    md += "![" + plot + "](" + (link / plot).generic_string() + ")\n\n";
  }
  for (const report::RunView& view : views) {
    md += "## " + report::RunHeadline(view.run) + "\n\n" +
          report::StepTable(view).Render(report::Format::kMarkdown);
    LIBRA_ASSIGN_OR_RETURN(std::string activity,
                           ActivityTables(store, view, report::Format::kMarkdown, "### "));
    md += activity + "\n";
  }
  LIBRA_RETURN_IF_ERROR(WriteFileAtomically(options.markdown, md, "report"));
  io.out << StrFormat("wrote %s with %zu runs and %zu plots in %s\n", options.markdown.c_str(),
                      views.size(), plots.size(), plots_dir.c_str());
  return Status();
}

}  // namespace

int RunReport(const ReportOptions& options, const Io& io) {
  const std::optional<report::Format> format = report::ParseFormat(options.format);
  if (!format) {
    return Fail(io, Status::InvalidArgument("--format must be text, md, csv or json (got '" +
                                            options.format + "')"));
  }
  store::Store::Options open;
  open.read_only = true;
  auto store = store::Store::Open(options.db, open);
  if (!store.ok()) return Fail(io, store.status());

  auto runs = (*store)->ListRuns();
  if (!runs.ok()) return Fail(io, runs.status());
  if (options.list) {
    io.out << report::ListTable(*runs).Render(*format);
    return kExitOk;
  }

  if (!options.export_trajectories.empty()) {
    if (options.runs.size() > 1) {
      return Fail(io, Status::InvalidArgument("--export-trajectories writes one run; name one"));
    }
    if (runs->empty()) return Fail(io, Status::NotFound(options.db + " holds no run yet"));
    int64_t run = runs->back().id;
    if (!options.runs.empty()) {
      auto selected = Select(**store, *runs, options.runs, options.db);
      if (!selected.ok()) return Fail(io, selected.status());
      if (selected->ids.size() != 1) {
        return Fail(io, Status::InvalidArgument("--export-trajectories writes one run; '" +
                                                options.runs.front() + "' names " +
                                                std::to_string(selected->ids.size())));
      }
      run = selected->ids.front();
    }
    if (auto info = (*store)->GetRun(run); !info.ok()) return Fail(io, info.status());
    return Fail(io, ExportTrajectories(**store, run, options.export_trajectories, io));
  }

  auto selected = Select(**store, *runs, options.runs, options.db);
  if (!selected.ok()) return Fail(io, selected.status());
  const std::vector<int64_t>& ids = selected->ids;
  const std::string& title = selected->title;

  std::vector<report::RunView> views;
  for (int64_t id : ids) {
    auto view = report::ReadRunView(**store, id);
    if (!view.ok()) return Fail(io, view.status());
    views.push_back(std::move(*view));
  }
  auto baseline = FindBaseline(options.baseline, views);
  if (!baseline.ok()) return Fail(io, baseline.status());
  const report::Convergence convergence = ConvergenceOf(options, views);
  // A sensitivity study (`compare --sensitivity`) is shown as one again.
  const bool sensitivity = std::any_of(views.begin(), views.end(), [](const report::RunView& v) {
    return !v.run.scenario.empty();
  });
  std::vector<std::string> systems;
  for (const report::RunView& v : views) {
    if (std::find(systems.begin(), systems.end(), v.run.system) == systems.end()) {
      systems.push_back(v.run.system);
    }
  }

  if (options.steps && views.size() != 1) {
    return Fail(io, Status::InvalidArgument("--steps shows one run; name exactly one run id"));
  }
  if (!options.timeline.empty() || !options.plots.empty() || !options.markdown.empty()) {
    if (!options.timeline.empty()) {
      if (views.size() != 1) {
        return Fail(io, Status::InvalidArgument(StrFormat(
                            "--timeline draws one run; this report has %zu (name one run id)",
                            views.size())));
      }
      if (Status s = WriteTimeline(**store, views.front(), options.timeline, io); !s.ok()) {
        return Fail(io, s);
      }
    }
    if (!options.markdown.empty()) {
      std::string plots_dir = options.plots;
      if (plots_dir.empty()) {
        std::filesystem::path path(options.markdown);
        plots_dir = (path.parent_path() / (path.stem().string() + "-plots")).string();
      }
      if (Status s = WriteMarkdown(**store, views, *baseline, options, title, plots_dir, io);
          !s.ok()) {
        return Fail(io, s);
      }
    } else if (!options.plots.empty()) {
      auto plots = WritePlots(**store, views, options.plots);
      if (!plots.ok()) return Fail(io, plots.status());
      io.out << StrFormat("wrote %zu plots to %s: %s\n", plots->size(), options.plots.c_str(),
                          StrJoin(*plots, ", ").c_str());
    }
    return kExitOk;
  }
  if (*format == report::Format::kCsv || *format == report::Format::kJson) {
    io.out << (options.steps ? report::StepTable(views.front())
                             : report::SummaryTable(views, *baseline, convergence))
                  .Render(*format);
    return kExitOk;
  }

  const bool markdown = *format == report::Format::kMarkdown;
  if (!title.empty()) io.out << (markdown ? "## " : "") << title << "\n\n";
  if (views.size() == 1)
    io.out << (markdown ? "## " : "") << report::RunHeadline(views.front().run) << "\n\n";
  if (!options.steps) {
    if (sensitivity) {
      io.out << report::SensitivityMatrix(views, systems).Render(*format) << "\n"
             << report::SensitivityTable(views, systems).Render(*format);
    } else {
      io.out << report::SummaryTable(views, *baseline, convergence).Render(*format);
    }
    // Simulated and real runs side by side: say which numbers were measured.
    std::vector<std::string> simulated;
    std::vector<std::string> real;
    for (const report::RunView& v : views) {
      (v.run.backend == "sim" ? simulated : real).push_back(std::to_string(v.run.id));
    }
    if (!simulated.empty() && !real.empty()) {
      io.out << StrFormat(
          "\nsimulated (times simulated, rewards modelled): run %s; measured on real processes "
          "(backend cluster): run %s\n",
          StrJoin(simulated, ", ").c_str(), StrJoin(real, ", ").c_str());
    }
  }
  if (views.size() == 1) {
    if (!options.steps) io.out << "\n";
    io.out << report::StepTable(views.front()).Render(*format);
    if (!options.steps) {
      auto activity = ActivityTables(**store, views.front(), *format, markdown ? "## " : "");
      if (!activity.ok()) return Fail(io, activity.status());
      io.out << *activity;
    }
  }
  return kExitOk;
}

}  // namespace libra::cli
