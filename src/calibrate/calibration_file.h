// The calibration file: a recipe fragment that a recipe pulls in with
// `include = ["calibration.toml"]`. It holds a [cluster.gpu_spec] table (the GPU numbers probes
// measured, overriding the catalog entry the recipe names, key by key) and a [cost_model] table
// (the fitted factors), each value with a comment saying where it came from, and comments for the
// factors that were not set and why. Values are written in the recipe's units (GB/s, us, ms).
// The recipe's own keys win over the file's (docs/calibration.md). Pure: the text is returned.
#pragma once

#include <string>
#include <vector>

#include "calibrate/fit.h"
#include "calibrate/probes.h"

namespace libra::calibrate {

/// One key = value with its source.
struct CalibrationValue {
  std::string key;
  double value = 0;
  std::string source;
  bool operator==(const CalibrationValue&) const = default;
};

struct CalibrationFile {
  /// Comment lines at the top (without "# ").
  std::vector<std::string> header;
  std::vector<CalibrationValue> gpu_spec;
  std::vector<CalibrationValue> cost_model;
  /// Comment lines after [cost_model]: factors not set, and why.
  std::vector<std::string> cost_model_notes;
  bool operator==(const CalibrationFile&) const = default;
};

/// The file for `gpu_name` from probes and a fit (either may be null). `written_by` goes into the
/// header ("libra 0.1.0 calibrate on 2026-01-01T00:00:00Z").
CalibrationFile MakeCalibrationFile(const std::string& gpu_name, const ProbeCalibration* probes,
                                    const FitResult* fit, const std::string& written_by);

/// The TOML text. Numbers keep six significant digits.
std::string CalibrationToml(const CalibrationFile& file);

}  // namespace libra::calibrate
