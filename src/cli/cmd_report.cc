// `libra report`: tables from the results database.
#include <algorithm>
#include <ostream>

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
    if (options.runs.empty() && runs->empty()) {
      return Fail(io, Status::NotFound(options.db + " holds no run yet"));
    }
    const int64_t run = options.runs.empty() ? runs->back().id : options.runs.front();
    if (auto info = (*store)->GetRun(run); !info.ok()) return Fail(io, info.status());
    return Fail(io, ExportTrajectories(**store, run, options.export_trajectories, io));
  }

  std::vector<int64_t> ids = options.runs;
  std::string title;
  if (ids.empty()) {
    if (runs->empty()) {
      return Fail(io, Status::NotFound(options.db + " holds no run yet; `libra run RECIPE` "
                                                    "records one"));
    }
    const store::RunInfo& latest = runs->back();
    if (latest.comparison_id) {
      auto comparison = (*store)->GetComparison(*latest.comparison_id);
      if (!comparison.ok()) return Fail(io, comparison.status());
      ids = comparison->run_ids;
      title = StrFormat("comparison %lld: %s, %zu runs (%s)",
                        static_cast<long long>(comparison->id), comparison->name.c_str(),
                        comparison->run_ids.size(), comparison->created_at.c_str());
    } else {
      ids = {latest.id};
    }
  }

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
