// `libra probe`: measures this node's GPUs (or imports a probe file measured elsewhere), records
// the probes in the results database, and optionally writes them as JSON and as a calibration
// TOML that a recipe includes.
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>

#include "calibrate/calibration_file.h"
#include "calibrate/fit.h"
#include "calibrate/probes.h"
#include "calibrate/tables.h"
#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/files.h"
#include "common/strings.h"
#include "gpu/probe.h"
#include "libra/config.h"
#include "model/cost_model.h"
#include "model/roofline_model.h"
#include "store/store.h"

namespace libra::cli {
namespace {

Result<gpu::ProbeReport> Import(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot read the probe file");
  std::ostringstream text;
  text << in.rdbuf();
  auto report = gpu::ParseProbeReport(text.str());
  if (!report.ok()) return Status::InvalidArgument(path + ": " + report.status().message());
  return report;
}

std::vector<store::ProbeRecord> ToRecords(const gpu::ProbeReport& report) {
  std::vector<store::ProbeRecord> records;
  for (const gpu::ProbeResult& p : report.results) {
    store::ProbeRecord r;
    r.host = report.host;
    r.gpu = p.gpu;
    r.kind = p.kind;
    r.value = p.value;
    r.unit = p.unit;
    r.detail = ToJson(p.detail);
    r.recorded_at = report.recorded_at;
    r.libra_version = report.libra_version;
    records.push_back(std::move(r));
  }
  return records;
}

/// A string field of a probe's detail, or "".
std::string DetailString(const gpu::ProbeResult& p, const std::string& key) {
  const JsonValue* v = p.detail.Find(key);
  if (v == nullptr) return "";
  return v->is_string() ? v->as_string() : ToJson(*v);
}

/// The value in the unit people read: GB, GB/s, TFLOP/s, us.
std::pair<double, const char*> Human(const gpu::ProbeResult& p) {
  if (p.unit == "B") return {p.value / 1e9, "GB"};
  if (p.unit == "B/s") return {p.value / 1e9, "GB/s"};
  if (p.unit == "FLOP/s") return {p.value / 1e12, "TFLOP/s"};
  return {p.value / 1e-6, "us"};
}

std::string ReportTitle(const gpu::ProbeReport& report) {
  int gpus = 0;
  std::string device;
  std::string versions;
  for (const gpu::ProbeResult& p : report.results) {
    if (p.kind != gpu::kInventory) continue;
    ++gpus;
    device = DetailString(p, "name");
    versions = "driver " + DetailString(p, "driver_version") + ", runtime " +
               DetailString(p, "runtime_version");
  }
  std::string title = "Probes of " + report.host + " at " + report.recorded_at + " (libra " +
                      report.libra_version + ")";
  if (gpus > 0) title += StrFormat(": %d x %s, %s", gpus, device.c_str(), versions.c_str());
  return title;
}

report::Table ResultTable(const gpu::ProbeReport& report) {
  report::Table table({{"gpu", "gpu", false},
                       {"probe", "probe", false},
                       {"value", "value", true},
                       {"unit", "unit", false},
                       {"what", "what", false}});
  for (const gpu::ProbeResult& p : report.results) {
    const auto [value, unit] = Human(p);
    const gpu::ProbeKind* kind = gpu::FindProbeKind(p.kind);
    table.AddRow({report::Cell::Text(p.gpu < 0 ? "node" : std::to_string(p.gpu)),
                  report::Cell::Text(p.kind), report::Cell::Number(value, 1),
                  report::Cell::Text(unit),
                  report::Cell::Text(kind != nullptr ? std::string(kind->description) : "")});
  }
  return table;
}

/// The GPU whose numbers a calibration starts from: the recipe's, or the catalog's entry for the
/// probed device.
Result<model::GpuSpec> CalibrationGpu(const std::optional<recipe::Recipe>& recipe,
                                      const gpu::ProbeReport& report) {
  if (recipe) {
    LIBRA_ASSIGN_OR_RETURN(model::CostModelContext context, model::ContextFor(*recipe));
    return context.gpu;
  }
  std::string device;
  for (const gpu::ProbeResult& p : report.results) {
    if (p.kind == gpu::kInventory) device = DetailString(p, "name");
  }
  if (auto gpu = calibrate::CatalogGpuForDevice(device)) return *gpu;
  return Status::InvalidArgument(
      "--calibration: the probed GPU ('" + device +
      "') is not one catalog entry; give a recipe whose [cluster] names or describes it: "
      "libra probe RECIPE --calibration FILE");
}

}  // namespace

int RunProbe(const ProbeOptions& options, const Io& io) {
  std::optional<recipe::Recipe> recipe;
  if (!options.recipe.empty()) {
    RecipeOptions recipe_options;
    recipe_options.recipe = options.recipe;
    auto loaded = LoadRecipe(recipe_options);
    if (!loaded.ok()) return Fail(io, loaded.status());
    recipe = std::move(*loaded);
  }

  gpu::ProbeReport report;
  if (!options.import.empty()) {
    auto imported = Import(options.import);
    if (!imported.ok()) return Fail(io, imported.status());
    report = std::move(*imported);
  } else {
    if (recipe && recipe->cluster.nodes > 1 && !options.quiet) {
      io.err << "libra: probing this node only: probing the recipe's other hosts needs the "
                "cluster backend, which is not built yet\n";
    }
    gpu::ProbeOptions probe = options.quick ? gpu::ProbeOptions::Quick() : gpu::ProbeOptions();
    probe.gpus = options.gpus;
    auto probed = gpu::ProbeLocalNode(probe, [&](const std::string& line) {
      if (!options.quiet) io.err << "probe: " << line << "\n";
    });
    if (!probed.ok()) {
      const int code = Fail(io, probed.status());
      if (!gpu::BuiltWithCuda()) {
        io.err << "libra: probes measured on another machine can be imported with "
                  "`libra probe --import FILE`\n";
      }
      return code;
    }
    report = std::move(*probed);
    report.recorded_at = experiment::NowIso8601();
    report.libra_version = LIBRA_VERSION;
  }

  const std::vector<store::ProbeRecord> records = ToRecords(report);
  auto store = store::Store::Open(options.db);
  if (!store.ok()) return Fail(io, store.status());
  if (auto ids = (*store)->RecordProbes(records); !ids.ok()) return Fail(io, ids.status());
  if (!options.quiet) {
    io.out << ReportTitle(report) << "\n" << ResultTable(report).Render(report::Format::kText);
    io.out << StrFormat("recorded %zu probes in %s\n", records.size(), options.db.c_str());
  }
  if (!options.json.empty()) {
    const Status written =
        WriteFileAtomically(options.json, gpu::ProbeReportToJson(report), "probe file");
    if (!written.ok()) return Fail(io, written);
    if (!options.quiet) io.out << "wrote " << options.json << "\n";
  }
  if (!options.calibration.empty()) {
    auto gpu = CalibrationGpu(recipe, report);
    if (!gpu.ok()) return Fail(io, gpu.status());
    auto calibration = calibrate::CalibrateFromProbes(records, *gpu);
    if (!calibration.ok()) return Fail(io, calibration.status());
    const calibrate::CalibrationFile file = calibrate::MakeCalibrationFile(
        gpu->name, &*calibration, nullptr,
        StrFormat("libra %s probe on %s", LIBRA_VERSION, report.recorded_at.c_str()));
    const Status written = WriteFileAtomically(
        options.calibration, calibrate::CalibrationToml(file), "calibration file");
    if (!written.ok()) return Fail(io, written);
    if (!options.quiet) {
      double decode_bw_util = model::RooflineParams().decode_bw_util;
      if (recipe) {
        if (auto point = calibrate::ModelPointFor(*recipe); point.ok()) {
          decode_bw_util = point->params.decode_bw_util;
        }
      }
      io.out << "\nWhat the probes change for " << gpu->name << "\n"
             << calibrate::ProbeTable(*calibration, decode_bw_util).Render(report::Format::kText);
      for (const std::string& note : calibration->notes) io.out << "note: " << note << "\n";
      io.out << "wrote " << options.calibration << ": pull it into a recipe with include = [\""
             << options.calibration << "\"]\n";
    }
  }
  return kExitOk;
}

}  // namespace libra::cli
