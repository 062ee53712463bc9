#include "experiment/sensitivity.h"

#include <algorithm>

#include "common/strings.h"
#include "model/catalog.h"
#include "model/roofline_model.h"
#include "workload/agentic_workload.h"

namespace libra::experiment {
namespace {

using recipe::OptionTable;
using recipe::OptionValue;

/// The number under `key`, or `fallback` when the table does not set it.
double NumberOr(const OptionTable& table, const std::string& key, double fallback) {
  const OptionValue* v = table.Find(key);
  if (v == nullptr) return fallback;
  if (v->kind == OptionValue::Kind::kInt) return static_cast<double>(v->int_value);
  if (v->kind == OptionValue::Kind::kDouble) return v->double_value;
  return fallback;
}

void SetNumber(OptionTable& table, const std::string& key, double value,
               const std::string& scenario) {
  OptionValue v;
  v.kind = OptionValue::Kind::kDouble;
  v.double_value = value;
  v.where = "sensitivity scenario '" + scenario + "'";
  for (recipe::OptionEntry& e : table.entries) {
    if (e.key == key) {
      e.value = v;
      return;
    }
  }
  table.entries.push_back({key, v});
}

Status NeedRoofline(const recipe::Recipe& r, const Perturbation& p) {
  if (r.cost_model.name == "roofline") return Status();
  return Status::InvalidArgument(StrFormat(
      "sensitivity scenario '%s' changes the roofline cost model's %s, and %s uses cost model "
      "'%s'",
      p.name.c_str(), p.constant.c_str(), r.source.c_str(), r.cost_model.name.c_str()));
}

Result<workload::AgenticParams> Agentic(const recipe::Recipe& r, const Perturbation& p) {
  if (r.workload.kind != recipe::WorkloadKind::kAgentic) {
    return Status::InvalidArgument(
        StrFormat("sensitivity scenario '%s' changes the agentic workload model, and %s replays "
                  "a trace",
                  p.name.c_str(), r.source.c_str()));
  }
  LIBRA_ASSIGN_OR_RETURN(workload::AgenticParams preset, workload::PresetParams(r.workload.preset));
  return workload::ReadAgenticParams(preset, r.workload.options);
}

}  // namespace

const std::vector<Perturbation>& StandardPerturbations() {
  static const std::vector<Perturbation> set = {
      {"as written", "", 1},
      {"overhead x0.5", "iteration_overhead", 0.5},
      {"overhead x2", "iteration_overhead", 2},
      {"train MFU x0.8", "train_mfu", 0.8},
      {"train MFU x1.2", "train_mfu", 1.2},
      {"decode BW x0.8", "decode_bw_util", 0.8},
      {"decode BW x1.2", "decode_bw_util", 1.2},
      {"all-reduce x0.5", "allreduce_latency", 0.5},
      {"all-reduce x2", "allreduce_latency", 2},
      {"tool latency x0.5", "tool_latency", 0.5},
      {"tool latency x2", "tool_latency", 2},
      {"length tail x0.8", "length_tail", 0.8},
      {"length tail x1.25", "length_tail", 1.25},
  };
  return set;
}

Result<recipe::Recipe> ApplyPerturbation(const recipe::Recipe& recipe, const Perturbation& p) {
  recipe::Recipe r = recipe;
  const model::RooflineParams defaults;
  if (p.constant.empty()) return r;
  if (p.constant == "iteration_overhead") {
    LIBRA_RETURN_IF_ERROR(NeedRoofline(r, p));
    const double ms = NumberOr(r.cost_model.options, "iteration_overhead_ms",
                               defaults.iteration_overhead_s * 1e3);
    SetNumber(r.cost_model.options, "iteration_overhead_ms", ms * p.factor, p.name);
  } else if (p.constant == "train_mfu" || p.constant == "decode_bw_util") {
    LIBRA_RETURN_IF_ERROR(NeedRoofline(r, p));
    const double fallback =
        p.constant == "train_mfu" ? defaults.train_mfu : defaults.decode_bw_util;
    const double value = NumberOr(r.cost_model.options, p.constant, fallback);
    SetNumber(r.cost_model.options, p.constant, std::min(1.0, value * p.factor), p.name);
  } else if (p.constant == "allreduce_latency") {
    LIBRA_RETURN_IF_ERROR(NeedRoofline(r, p));
    Result<model::GpuSpec> base = model::FindGpu(r.cluster.gpu);
    LIBRA_ASSIGN_OR_RETURN(
        model::GpuSpec gpu,
        model::GpuFromOptions(r.cluster.gpu, r.cluster.gpu_spec, base.ok() ? &*base : nullptr));
    SetNumber(r.cluster.gpu_spec, "allreduce_latency_us", gpu.allreduce_latency_s * 1e6 * p.factor,
              p.name);
  } else if (p.constant == "tool_latency") {
    LIBRA_ASSIGN_OR_RETURN(workload::AgenticParams params, Agentic(r, p));
    for (const workload::ToolParams& t : params.tools) {
      SetNumber(r.workload.options, t.name + "_latency_median_s", t.latency_median_s * p.factor,
                p.name);
    }
  } else if (p.constant == "length_tail") {
    LIBRA_ASSIGN_OR_RETURN(workload::AgenticParams params, Agentic(r, p));
    SetNumber(r.workload.options, "tokens_sigma", std::min(5.0, params.tokens_sigma * p.factor),
              p.name);
  } else {
    return Status::Internal("unknown sensitivity constant '" + p.constant + "'");
  }
  return r;
}

}  // namespace libra::experiment
