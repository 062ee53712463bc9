#include "calibrate/calibration_file.h"

#include "common/strings.h"

namespace libra::calibrate {
namespace {

/// Six significant digits, always a valid TOML number.
std::string Number(double value) { return StrFormat("%.6g", value); }

void Section(std::string* out, const std::string& name, const std::vector<CalibrationValue>& values,
             const std::vector<std::string>& notes) {
  if (values.empty() && notes.empty()) return;
  *out += "\n[" + name + "]\n";
  for (const CalibrationValue& v : values) {
    *out += "# " + v.source + "\n" + v.key + " = " + Number(v.value) + "\n";
  }
  for (const std::string& note : notes) *out += "# " + note + "\n";
}

}  // namespace

CalibrationFile MakeCalibrationFile(const std::string& gpu_name, const ProbeCalibration* probes,
                                    const FitResult* fit, const std::string& written_by) {
  CalibrationFile file;
  file.header.push_back("libra calibration for " + gpu_name + ", written by " + written_by + ".");
  file.header.push_back("Pull it into a recipe with include = [\"<this file>\"]: its numbers");
  file.header.push_back(
      "override the catalog's and the cost model's defaults; the recipe's own keys win.");
  if (probes != nullptr) {
    file.header.push_back(
        StrFormat("Probes: host %s at %s%s.", probes->host.c_str(), probes->recorded_at.c_str(),
                  probes->device.empty()
                      ? ""
                      : StrFormat(", %d x %s", probes->gpus, probes->device.c_str()).c_str()));
    for (const GpuOverride& o : probes->overrides) {
      file.gpu_spec.push_back({o.key, o.value, "measured: " + o.source});
    }
  }
  if (fit != nullptr) {
    for (const FactorResult& f : fit->factors) {
      if (f.outcome == FactorOutcome::kFitted) {
        std::string source =
            StrFormat("fitted to %d %s measurements", f.measurements, NameOf(f.term).c_str());
        for (const TermResult& t : fit->terms) {
          if (t.term != f.term) continue;
          source += StrFormat(" (RMS error %.1f%% before, %.1f%% after)", t.error_before * 100,
                              t.error_after * 100);
        }
        file.cost_model.push_back({f.key, f.after, source});
      } else if (f.outcome == FactorOutcome::kPrior) {
        std::string source =
            f.key == "decode_bw_util" && probes != nullptr && probes->decode_bw_util
                ? "from probes: " + probes->decode_bw_source
                : "set before the fit";
        if (!f.note.empty()) source += "; not fitted to runs: " + f.note;
        file.cost_model.push_back({f.key, f.after, source});
      } else {
        file.cost_model_notes.push_back(f.key + " not set: " + f.note);
      }
    }
  } else if (probes != nullptr && probes->decode_bw_util) {
    file.cost_model.push_back(
        {"decode_bw_util", *probes->decode_bw_util, "from probes: " + probes->decode_bw_source});
  }
  if (probes != nullptr && probes->gemm_efficiency) {
    file.cost_model_notes.push_back(StrFormat(
        "the bf16 GEMM reaches %.2f of bf16_tflops: prefill_mfu and train_mfu cannot exceed it",
        *probes->gemm_efficiency));
  }
  return file;
}

std::string CalibrationToml(const CalibrationFile& file) {
  std::string out;
  for (const std::string& line : file.header) out += "# " + line + "\n";
  Section(&out, "cluster.gpu_spec", file.gpu_spec, {});
  Section(&out, "cost_model", file.cost_model, file.cost_model_notes);
  return out;
}

}  // namespace libra::calibrate
