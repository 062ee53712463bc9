// `libra probe`: measures this node's GPUs (or imports a probe file measured elsewhere, or runs
// itself on every node of a recipe and NCCL across them), records the probes in the results
// database, and optionally writes them as JSON and as a calibration TOML that a recipe includes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
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
#include "cluster/cluster_options.h"
#include "cluster/node_commands.h"
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
  LIBRA_ASSIGN_OR_RETURN(const std::string text,
                         ReadFileBounded(path, gpu::kMaxProbeReportBytes, "probe file"));
  auto report = gpu::ParseProbeReport(text);
  if (!report.ok()) return Status::InvalidArgument(path + ": " + report.status().message());
  return report;
}

std::vector<records::ProbeRecord> ToRecords(const gpu::ProbeReport& report) {
  std::vector<records::ProbeRecord> records;
  for (const gpu::ProbeResult& p : report.results) {
    records::ProbeRecord r;
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
    const bool across = p.kind == gpu::kAllReduceNodes || p.kind == gpu::kBroadcastNodes;
    table.AddRow({report::Cell::Text(across      ? "nodes"
                                     : p.gpu < 0 ? "node"
                                                 : std::to_string(p.gpu)),
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

std::string HostName() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
}

gpu::ProbeOptions MeasureOptions(const ProbeOptions& options) {
  gpu::ProbeOptions probe = options.quick ? gpu::ProbeOptions::Quick() : gpu::ProbeOptions();
  probe.gpus = options.gpus;
  return probe;
}

/// Records `reports` in order (the last is the newest session, the one `libra calibrate --probes`
/// and --calibration take), prints them, and writes --json and --calibration.
int Conclude(const ProbeOptions& options, const std::optional<recipe::Recipe>& recipe,
             const std::vector<gpu::ProbeReport>& reports, const Io& io) {
  const bool json_to_stdout = options.json == "-";
  std::vector<records::ProbeRecord> records;
  for (const gpu::ProbeReport& report : reports) {
    records = ToRecords(report);
    if (!options.quiet && !json_to_stdout) {
      io.out << ReportTitle(report) << "\n" << ResultTable(report).Render(report::Format::kText);
    }
    if (options.no_record) continue;
    auto store = store::Store::Open(options.db);
    if (!store.ok()) return Fail(io, store.status());
    if (auto ids = (*store)->RecordProbes(records); !ids.ok()) return Fail(io, ids.status());
    if (!options.quiet && !json_to_stdout) {
      io.out << StrFormat("recorded %zu probes in %s\n", records.size(), options.db.c_str());
    }
  }
  const gpu::ProbeReport& report = reports.back();
  if (json_to_stdout) {
    io.out << gpu::ProbeReportToJson(report);
  } else if (!options.json.empty()) {
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

/// One process of a probe across nodes: node 0 prints "nccl-id HEX" as soon as the id exists,
/// then, once every node has joined and the collectives ran, its probes as JSON.
int RunNcclPeer(const ProbeOptions& options, const Io& io) {
  if (options.nccl_gpus_per_node < 1 || options.nccl_node >= options.nccl_nodes) {
    return Fail(io, Status::InvalidArgument(
                        "--nccl-nodes needs --nccl-gpus-per-node and a --nccl-node below it"));
  }
  const gpu::NcclPeer peer{options.nccl_id, options.nccl_node, options.nccl_nodes,
                           options.nccl_gpus_per_node};
  auto results = gpu::ProbeAcrossNodes(
      peer, MeasureOptions(options),
      [&](const std::string& id) { io.out << "nccl-id " << id << std::endl; },
      [&](const std::string& line) {
        if (!options.quiet) io.err << "probe: " << line << "\n";
      });
  if (!results.ok()) return Fail(io, results.status());
  if (peer.node != 0) return kExitOk;
  const gpu::ProbeReport report{HostName(), experiment::NowIso8601(), LIBRA_VERSION,
                                std::move(*results)};
  io.out << gpu::ProbeReportToJson(report);
  return kExitOk;
}

std::string ThisProgram() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "libra" : self.string();
}

/// The probe a node ran: its report, or why there is none (naming the node).
Result<gpu::ProbeReport> ReportOf(const cluster::NodeCommands& nodes,
                                  const cluster::NodeOutput& output, size_t skip_lines = 0) {
  const std::string where = nodes.Describe(output.node);
  if (!output.exit.success()) {
    return Status::Backend(where, "libra probe failed (" + output.exit.ToString() +
                                      "): " + cluster::OutputTail(output.err));
  }
  std::string_view text = output.out;
  for (size_t i = 0; i < skip_lines; ++i) {
    const size_t end = text.find('\n');
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  auto report = gpu::ParseProbeReport(text);
  if (!report.ok()) {
    return Status::Backend(where, "its probes cannot be read: " + report.status().message());
  }
  return report;
}

/// A --hosts session: the nodes, the probe arguments every node gets, and the deadline.
struct HostSession {
  cluster::NodeCommands& nodes;
  std::vector<std::string> common;
  std::chrono::steady_clock::time_point deadline;
  /// Time left until the deadline (at least 1 ms).
  std::chrono::milliseconds Left() const {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  }
};

/// NCCL across the nodes: node 0 makes the unique id and prints it; the others get it. Node 0's
/// results join its report; every failure joins `errors`.
void ProbeAcrossNodes(const HostSession& s, int gpus_per_node,
                      std::vector<std::optional<gpu::ProbeReport>>& reports,
                      std::vector<Status>& errors) {
  const size_t count = s.nodes.nodes();
  auto peer = [&](size_t node, const std::string& id) -> Status {
    std::vector<std::string> argv = s.common;
    argv.insert(argv.end(),
                {"--nccl-nodes", std::to_string(count), "--nccl-node", std::to_string(node),
                 "--nccl-gpus-per-node", std::to_string(gpus_per_node)});
    if (!id.empty()) argv.insert(argv.end(), {"--nccl-id", id});
    return s.nodes.Start(node, StrFormat("nccl-%zu", node), argv).status();
  };
  Status across = peer(0, "");
  Result<std::string> line = across.ok() ? s.nodes.FirstLine(count, s.Left()) : across;
  constexpr std::string_view kIdPrefix = "nccl-id ";
  if (line.ok() && line->rfind(kIdPrefix, 0) != 0) {
    line = Status::Backend(s.nodes.Describe(0), "expected 'nccl-id HEX' first, got '" +
                                                    cluster::OutputTail(*line) + "'");
  }
  across = line.status();
  for (size_t node = 1; node < count && across.ok(); ++node) {
    across = peer(node, line->substr(kIdPrefix.size()));
  }
  // A node that failed stops the others (they would wait for it in ncclCommInitRank).
  auto ended = s.nodes.Wait(across.ok() ? s.Left() : std::chrono::milliseconds(0),
                            /*stop_on_failure=*/true);
  if (!ended.ok() && across.ok()) across = ended.status();
  if (!across.ok()) {
    errors.push_back(across);
    return;
  }
  for (size_t i = count; i < ended->size(); ++i) {
    const cluster::NodeOutput& output = (*ended)[i];
    if (output.node != 0) {  // only node 0 reports; the others just have to succeed
      if (!output.exit.success()) errors.push_back(ReportOf(s.nodes, output).status());
      continue;
    }
    auto report = ReportOf(s.nodes, output, /*skip_lines=*/1);
    if (!report.ok()) {
      errors.push_back(report.status());
      continue;
    }
    for (gpu::ProbeResult& r : report->results) reports[0]->results.push_back(std::move(r));
  }
}

/// --hosts: `libra probe` on every node of the recipe's [launcher] at once, then NCCL across the
/// nodes. Node 0's session is recorded last, with the probes across nodes in it.
int RunHostProbes(const ProbeOptions& options, const recipe::Recipe& recipe, const Io& io) {
  if (!options.import.empty() || !options.json.empty()) {
    return Fail(io, Status::InvalidArgument(
                        "--hosts records every node's probes in --db: it takes neither --import "
                        "nor --json"));
  }
  auto launcher = cluster::DecodeLauncherOptions(recipe);
  if (!launcher.ok()) return Fail(io, launcher.status());
  std::string stamp = experiment::NowIso8601();
  stamp.erase(std::remove(stamp.begin(), stamp.end(), ':'), stamp.end());
  const std::string log_dir =
      (std::filesystem::path(options.db).parent_path() / "probes" / stamp).string();
  auto nodes = cluster::NodeCommands::Create(*launcher, log_dir);
  if (!nodes.ok()) return Fail(io, nodes.status());
  const size_t count = (*nodes)->nodes();
  HostSession session{
      **nodes,
      {options.libra.empty() ? ThisProgram() : options.libra, "probe", "--no-record", "-q"},
      std::chrono::steady_clock::now() +
          std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000))};
  auto progress = [&](const std::string& line) {
    if (!options.quiet) io.err << "probe: " << line << "\n";
  };
  if (options.quick) session.common.push_back("--quick");
  if (!options.gpus.empty()) {
    std::vector<std::string> gpus;
    for (const int g : options.gpus) gpus.push_back(std::to_string(g));
    session.common.push_back("--gpus");
    session.common.push_back(StrJoin(gpus, ","));
  }
  progress(StrFormat("%zu node(s), logs in %s", count, log_dir.c_str()));
  for (size_t node = 0; node < count; ++node) {
    progress("probing " + (*nodes)->Describe(node));
    std::vector<std::string> argv = session.common;
    argv.insert(argv.end(), {"--json", "-"});
    if (auto started = (*nodes)->Start(node, StrFormat("probe-%zu", node), argv); !started.ok()) {
      return Fail(io, started.status());
    }
  }
  auto outputs = (*nodes)->Wait(session.Left());
  if (!outputs.ok()) return Fail(io, outputs.status());
  std::vector<std::optional<gpu::ProbeReport>> reports(count);
  std::vector<Status> errors;
  for (const cluster::NodeOutput& output : *outputs) {
    auto report = ReportOf(**nodes, output);
    if (report.ok()) {
      reports[output.node] = std::move(*report);
    } else {
      errors.push_back(report.status());
    }
  }
  const int gpus_per_node =
      options.gpus.empty() ? recipe.cluster.gpus_per_node : static_cast<int>(options.gpus.size());
  if (errors.empty() && count >= 2) {
    progress(StrFormat("NCCL across %zu nodes x %d GPUs", count, gpus_per_node));
    ProbeAcrossNodes(session, gpus_per_node, reports, errors);
  }

  std::vector<gpu::ProbeReport> recorded;
  for (size_t node = 1; node <= count; ++node) {
    if (auto& r = reports[node % count]) recorded.push_back(std::move(*r));
  }
  if (!recorded.empty()) {
    const int code = Conclude(options, recipe, recorded, io);
    if (code != kExitOk) return code;
  }
  for (size_t i = 0; i + 1 < errors.size(); ++i) {
    io.err << "libra: error: " << errors[i].message() << "\n";
  }
  if (!errors.empty()) return Fail(io, errors.back());
  return kExitOk;
}

}  // namespace

int RunProbe(const ProbeOptions& options, const Io& io) {
  if (options.nccl_nodes > 0) return RunNcclPeer(options, io);
  std::optional<recipe::Recipe> recipe;
  if (!options.recipe.empty()) {
    RecipeOptions recipe_options;
    recipe_options.recipe = options.recipe;
    auto loaded = LoadRecipe(recipe_options);
    if (!loaded.ok()) return Fail(io, loaded.status());
    recipe = std::move(*loaded);
  }
  if (options.hosts) {
    if (!recipe) {
      return Fail(io, Status::InvalidArgument("--hosts probes the nodes of a recipe: give one"));
    }
    return RunHostProbes(options, *recipe, io);
  }

  gpu::ProbeReport report;
  if (!options.import.empty()) {
    auto imported = Import(options.import);
    if (!imported.ok()) return Fail(io, imported.status());
    report = std::move(*imported);
  } else {
    if (recipe && recipe->cluster.nodes > 1 && !options.quiet) {
      io.err << "libra: probing this node only; --hosts probes every node of the recipe\n";
    }
    auto probed = gpu::ProbeLocalNode(MeasureOptions(options), [&](const std::string& line) {
      if (!options.quiet) io.err << "probe: " << line << "\n";
    });
    if (!probed.ok()) {
      const int code = Fail(io, probed.status());
      if (!gpu::BuiltWithCuda()) {
        io.err << "libra: probes measured on another machine can be imported with "
                  "`libra probe --import FILE"
               << DbFlag(options.db) << "`\n";
      }
      return code;
    }
    report = std::move(*probed);
    report.recorded_at = experiment::NowIso8601();
    report.libra_version = LIBRA_VERSION;
  }
  return Conclude(options, recipe, {report}, io);
}

}  // namespace libra::cli
