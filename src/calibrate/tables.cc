#include "calibrate/tables.h"

#include <string>

#include "common/strings.h"

namespace libra::calibrate {
namespace {

report::Cell Percent(double fraction) {
  return report::Cell::Text(StrFormat("%.1f%%", fraction * 100));
}

/// Enough decimals for a factor's value: three significant digits at least.
report::Cell Value(double value) {
  if (value == 0) return report::Cell::Number(0, 0);
  int decimals = 3;
  for (double v = std::abs(value); v < 1 && decimals < 9; v *= 10) ++decimals;
  if (std::abs(value) >= 100) decimals = 1;
  return report::Cell::Number(value, decimals);
}

}  // namespace

report::Table TermTable(const FitResult& fit) {
  report::Table table({{"term", "term", false},
                       {"measurements", "n", true},
                       {"measured_s", "measured s", true},
                       {"before_s", "predicted before s", true},
                       {"error_before", "error before", true},
                       {"after_s", "predicted after s", true},
                       {"error_after", "error after", true}});
  for (const TermResult& t : fit.terms) {
    table.AddRow({report::Cell::Text(NameOf(t.term)), report::Cell::Integer(t.measurements),
                  Value(t.measured_s), Value(t.before_s), Percent(t.error_before), Value(t.after_s),
                  Percent(t.error_after)});
  }
  return table;
}

report::Table FactorTable(const FitResult& fit) {
  report::Table table({{"factor", "factor", false},
                       {"term", "term", false},
                       {"before", "before", true},
                       {"after", "after", true},
                       {"spread", "+-", true},
                       {"how", "how", false}});
  for (const FactorResult& f : fit.factors) {
    const char* how = f.outcome == FactorOutcome::kFitted  ? "fitted"
                      : f.outcome == FactorOutcome::kPrior ? "from probes"
                                                           : "not fitted";
    table.AddRow({report::Cell::Text(f.key), report::Cell::Text(NameOf(f.term)), Value(f.before),
                  Value(f.after),
                  f.outcome == FactorOutcome::kFitted ? Value(f.spread) : report::Cell::Missing(),
                  report::Cell::Text(how)});
  }
  return table;
}

report::Table ProbeTable(const ProbeCalibration& probes, double decode_bw_util_before) {
  report::Table table({{"number", "number", false},
                       {"before", "before", true},
                       {"measured", "measured", true},
                       {"source", "source", false}});
  for (const GpuOverride& o : probes.overrides) {
    table.AddRow(
        {report::Cell::Text(o.key), Value(o.before), Value(o.value), report::Cell::Text(o.source)});
  }
  if (probes.decode_bw_util) {
    table.AddRow({report::Cell::Text("decode_bw_util"), Value(decode_bw_util_before),
                  Value(*probes.decode_bw_util), report::Cell::Text(probes.decode_bw_source)});
  }
  if (probes.gemm_efficiency) {
    table.AddRow({report::Cell::Text("GEMM / bf16_tflops"), report::Cell::Missing(),
                  Value(*probes.gemm_efficiency),
                  report::Cell::Text("ceiling of prefill_mfu and train_mfu (not applied)")});
  }
  return table;
}

}  // namespace libra::calibrate
