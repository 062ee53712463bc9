// The probe and calibration readers: a probe report (`libra probe --import`) -> its records ->
// the calibration they give for a catalog GPU; and the recorded layouts calibration reads from
// a database, and the hex fields of probe details.
#include "calibrate/measurements.h"
#include "calibrate/probes.h"
#include "common/json.h"
#include "fuzz/fuzz_util.h"
#include "gpu/probe.h"
#include "model/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  const std::string text(fuzz::AsText(data, size));
  static_cast<void>(calibrate::ParseRecordedLayout(text));
  static_cast<void>(gpu::HexDecode(text));
  auto report = gpu::ParseProbeReport(text);
  if (!report.ok()) return 0;
  static_cast<void>(gpu::ProbeReportToJson(*report));
  std::vector<records::ProbeRecord> records;
  int64_t id = 0;
  for (const gpu::ProbeResult& p : report->results) {
    records::ProbeRecord r;
    r.id = ++id;
    r.host = report->host;
    r.gpu = p.gpu;
    r.kind = p.kind;
    r.value = p.value;
    r.unit = p.unit;
    r.detail = ToJson(p.detail);
    r.recorded_at = report->recorded_at;
    r.libra_version = report->libra_version;
    records.push_back(std::move(r));
  }
  const auto gpu = model::FindGpu("H100-80G");
  if (gpu.ok()) static_cast<void>(calibrate::CalibrateFromProbes(records, *gpu));
  return 0;
}
