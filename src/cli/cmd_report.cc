// `libra report`: tables from the results database.
#include <algorithm>
#include <ostream>
#include <set>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "report/summary.h"
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
      selection.ids.push_back(std::stoll(arg));
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

}  // namespace

int RunReport(const ReportOptions& options, const Io& io) {
  const std::optional<report::Format> format = report::ParseFormat(options.format);
  if (!format) {
    return Fail(io, Status::InvalidArgument("--format must be text, md, csv or json (got '" +
                                            options.format + "')"));
  }
  store::Store::Options open;
  open.create_if_missing = false;
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

  if (options.steps && views.size() != 1) {
    return Fail(io, Status::InvalidArgument("--steps shows one run; name exactly one run id"));
  }
  if (*format == report::Format::kCsv || *format == report::Format::kJson) {
    io.out << (options.steps ? report::StepTable(views.front())
                             : report::SummaryTable(views, *baseline, options.reward_target))
                  .Render(*format);
    return kExitOk;
  }

  const bool markdown = *format == report::Format::kMarkdown;
  if (!title.empty()) io.out << (markdown ? "## " : "") << title << "\n\n";
  if (views.size() == 1)
    io.out << (markdown ? "## " : "") << report::RunHeadline(views.front().run) << "\n\n";
  if (!options.steps) {
    io.out << report::SummaryTable(views, *baseline, options.reward_target).Render(*format);
  }
  if (views.size() == 1) {
    if (!options.steps) io.out << "\n";
    io.out << report::StepTable(views.front()).Render(*format);
  }
  return kExitOk;
}

}  // namespace libra::cli
