// `libra export`: runs' per-step metrics under the names verl users know, as TensorBoard event
// files, CSV or JSONL (report/metrics.h has the mapping).
#include <filesystem>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/files.h"
#include "common/json.h"
#include "common/strings.h"
#include "report/metrics.h"
#include "report/tensorboard.h"

namespace libra::cli {
namespace {

/// A run's metrics with what the files need of the run.
struct Exported {
  records::RunInfo run;
  std::vector<report::StepMetrics> steps;
};

report::Table CsvTable(const std::vector<Exported>& runs) {
  std::vector<report::Column> columns = {
      {"run", "run", true}, {"system", "system", false}, {"step", "step", true}};
  for (const report::MetricDef& m : report::ExportedMetrics())
    columns.push_back({m.name, m.name, true});
  report::Table table(columns);
  for (const Exported& e : runs) {
    for (const report::StepMetrics& s : e.steps) {
      std::vector<report::Cell> row = {report::Cell::Integer(e.run.id),
                                       report::Cell::Text(e.run.system),
                                       report::Cell::Integer(s.step)};
      for (const std::optional<double>& v : s.values) row.push_back(report::Cell::Number(v, 6));
      table.AddRow(std::move(row));
    }
  }
  return table;
}

std::string Jsonl(const std::vector<Exported>& runs) {
  std::string out;
  const std::vector<report::MetricDef>& metrics = report::ExportedMetrics();
  for (const Exported& e : runs) {
    for (const report::StepMetrics& s : e.steps) {
      JsonValue::Object line = {{"run", e.run.id}, {"system", e.run.system}, {"step", s.step}};
      for (size_t i = 0; i < metrics.size(); ++i) {
        line.emplace_back(metrics[i].name, s.values[i] ? JsonValue(*s.values[i]) : JsonValue());
      }
      out += ToJson(JsonValue::MakeObject(std::move(line))) + "\n";
    }
  }
  return out;
}

/// The folder of a run in a TensorBoard log dir: TensorBoard names the run after it.
std::string RunFolder(const records::RunInfo& run) {
  std::string name;
  for (char c : run.system)
    name +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  return StrFormat("%s-run%lld", name.c_str(), static_cast<long long>(run.id));
}

/// One run's event file; its name, relative to `out`.
Result<std::string> WriteEvents(const Exported& e, const std::string& out) {
  // Wall-clock: the run's start plus each step's end (simulated seconds for simulated runs, so
  // that TensorBoard's relative time axis reads as the run's own clock).
  const double start = report::EpochSeconds(e.run.started_at).value_or(0);
  const std::vector<report::MetricDef>& metrics = report::ExportedMetrics();
  std::vector<report::ScalarStep> steps;
  for (const report::StepMetrics& s : e.steps) {
    report::ScalarStep step;
    step.wall_time = start + s.end_s;
    step.step = s.step + 1;  // verl counts global steps from 1
    for (size_t i = 0; i < metrics.size(); ++i) {
      if (s.values[i]) step.values.emplace_back(metrics[i].name, static_cast<float>(*s.values[i]));
    }
    steps.push_back(std::move(step));
  }
  const std::string folder = RunFolder(e.run);
  LIBRA_RETURN_IF_ERROR(MakeFolder((std::filesystem::path(out) / folder).string(), "--out"));
  const std::string file =
      folder + "/" + StrFormat("events.out.tfevents.%lld.libra", static_cast<long long>(start));
  LIBRA_RETURN_IF_ERROR(WriteFileAtomically((std::filesystem::path(out) / file).string(),
                                            report::EventFile(start, steps), "event file"));
  return file;
}

}  // namespace

int RunExport(const ExportOptions& options, const Io& io) {
  if (options.format != "tensorboard" && options.format != "csv" && options.format != "jsonl") {
    return Fail(io, Status::InvalidArgument("--format must be tensorboard, csv or jsonl (got '" +
                                            options.format + "')"));
  }
  const bool to_stdout = options.out == "-";
  if (to_stdout && options.format == "tensorboard") {
    return Fail(io, Status::InvalidArgument(
                        "--out - writes csv or jsonl to stdout; TensorBoard needs a folder"));
  }
  if (!to_stdout) {
    if (Status s = MakeFolder(options.out, "--out"); !s.ok()) return Fail(io, s);
  }
  auto store = OpenStore(options.db, StoreAccess::kRead);
  if (!store.ok()) return Fail(io, store.status());
  auto selected = Select(**store, options.runs, options.db);
  if (!selected.ok()) return Fail(io, selected.status());
  auto views = ReadViews(**store, selected->ids);
  if (!views.ok()) return Fail(io, views.status());
  std::vector<Exported> runs;
  for (const report::RunView& view : *views) {
    auto trajectories = (*store)->Trajectories(view.run.id);
    if (!trajectories.ok()) return Fail(io, trajectories.status());
    auto turns = (*store)->Turns(view.run.id);
    if (!turns.ok()) return Fail(io, turns.status());
    runs.push_back({view.run, report::MetricsPerStep(view, *trajectories, *turns)});
  }

  std::string text;
  std::string file;
  if (options.format == "csv") {
    text = CsvTable(runs).Render(report::Format::kCsv);
    file = "metrics.csv";
  } else if (options.format == "jsonl") {
    text = Jsonl(runs);
    file = "metrics.jsonl";
  }
  if (to_stdout) {
    io.out << text;
    return kExitOk;
  }
  std::vector<std::string> written;
  if (options.format == "tensorboard") {
    for (const Exported& e : runs) {
      auto name = WriteEvents(e, options.out);
      if (!name.ok()) return Fail(io, name.status());
      written.push_back(*name);
    }
  } else {
    const std::string path = (std::filesystem::path(options.out) / file).string();
    if (Status s = WriteFileAtomically(path, text, "export"); !s.ok()) return Fail(io, s);
    written.push_back(file);
  }
  size_t steps = 0;
  for (const Exported& e : runs) steps += e.steps.size();
  io.out << StrFormat("wrote %zu steps of %zu runs to %s: %s\n", steps, runs.size(),
                      options.out.c_str(), StrJoin(written, ", ").c_str());
  if (options.format == "tensorboard") {
    io.out << "view them: tensorboard --logdir " << options.out << "\n";
  }
  return kExitOk;
}

}  // namespace libra::cli
