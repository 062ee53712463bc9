// The tables `libra calibrate` and `libra probe` print: predictions against measurements per
// term, the factors before and after, and what probes changed. Pure: report::Table values.
#pragma once

#include "calibrate/fit.h"
#include "calibrate/probes.h"
#include "report/table.h"

namespace libra::calibrate {

/// Per term: measurements, mean measured and predicted seconds before and after the fit, and the
/// RMS relative error before and after (the remaining error).
report::Table TermTable(const FitResult& fit);

/// Per factor: value before and after, the spread of a fitted one (how far it can move before
/// the RMS error grows by 10%), and how it was set ("fitted", "from probes", "not fitted"); the
/// reasons are FactorResult::note.
report::Table FactorTable(const FitResult& fit);

/// The GPU numbers and factors probes set: the value before, the measured one, and its source.
report::Table ProbeTable(const ProbeCalibration& probes, double decode_bw_util_before);

}  // namespace libra::calibrate
