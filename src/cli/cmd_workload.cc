// `libra workload`: the distribution of the trajectories a recipe's workload generates, per policy
// version, so that a user can check a preset (or a trace) before using it.
#include <algorithm>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "report/table.h"
#include "workload/summary.h"
#include "workload/workload.h"

namespace libra::cli {
namespace {

std::vector<report::Cell> QuantileCells(const workload::Quantiles& q, int decimals, bool with_p90) {
  std::vector<report::Cell> cells = {report::Cell::Number(q.p50, decimals)};
  if (with_p90) cells.push_back(report::Cell::Number(q.p90, decimals));
  cells.push_back(report::Cell::Number(q.p99, decimals));
  cells.push_back(report::Cell::Number(q.max, decimals));
  return cells;
}

std::string Percent(double fraction) { return StrFormat("%.1f%%", 100 * fraction); }

}  // namespace

int RunWorkload(const WorkloadOptions& options, const Io& io) {
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  auto made = workload::MakeWorkload(recipe->workload, recipe->seed);
  if (!made.ok()) return Fail(io, made.status());
  const workload::Workload& w = **made;

  std::vector<int> versions = options.versions;
  if (versions.empty()) {
    for (int quarter = 0; quarter <= 4; ++quarter) versions.push_back(recipe->steps * quarter / 4);
    versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  }
  const int prompts = options.prompts > 0 ? options.prompts : recipe->rl.prompts_per_step;
  const double skill = options.skill >= 0 ? options.skill : w.skill_params().initial;
  const std::vector<workload::VersionSummary> summaries =
      workload::Summarize(w, prompts, recipe->rl.group_size, versions, skill);

  io.out << StrFormat("%s: %d prompts x %d samples per policy version, seed %llu, skill %.2f\n\n",
                      w.Describe().c_str(), prompts, recipe->rl.group_size,
                      static_cast<unsigned long long>(recipe->seed), skill);
  report::Table lengths({
      {"version", "version", true},
      {"turns_p50", "turns p50", true},
      {"turns_p99", "p99", true},
      {"turns_max", "max", true},
      {"generated_p50", "gen tokens p50", true},
      {"generated_p90", "p90", true},
      {"generated_p99", "p99", true},
      {"generated_max", "max", true},
      {"tool_output_p50", "tool out p50", true},
      {"tool_output_p99", "p99", true},
      {"tool_output_max", "max", true},
  });
  report::Table tools({
      {"version", "version", true},
      {"tool_calls_mean", "tool calls", true},
      {"latency_p50", "latency s p50", true},
      {"latency_p90", "p90", true},
      {"latency_p99", "p99", true},
      {"latency_max", "max", true},
      {"tool_failure", "failure", true},
      {"tool_timeout", "timeout", true},
      {"truncated", "truncated", true},
      {"success", "success", true},
  });
  for (const workload::VersionSummary& v : summaries) {
    std::vector<report::Cell> row = {report::Cell::Integer(v.version)};
    for (auto& c : QuantileCells(v.turns, 0, false)) row.push_back(c);
    for (auto& c : QuantileCells(v.generated_tokens, 0, true)) row.push_back(c);
    for (auto& c : QuantileCells(v.tool_output_tokens, 0, false)) row.push_back(c);
    lengths.AddRow(std::move(row));
    std::vector<report::Cell> tool_row = {report::Cell::Integer(v.version),
                                          report::Cell::Number(v.tool_calls.mean, 2)};
    for (auto& c : QuantileCells(v.tool_latency_s, 2, true)) tool_row.push_back(c);
    tool_row.push_back(report::Cell::Text(Percent(v.tool_failure_fraction)));
    tool_row.push_back(report::Cell::Text(Percent(v.tool_timeout_fraction)));
    tool_row.push_back(report::Cell::Text(Percent(v.truncated_fraction)));
    tool_row.push_back(report::Cell::Text(Percent(v.success_fraction)));
    tools.AddRow(std::move(tool_row));
  }
  io.out << "Lengths per trajectory (tokens)\n"
         << lengths.Render(report::Format::kText) << "\nTools and outcomes\n"
         << tools.Render(report::Format::kText);
  return kExitOk;
}

}  // namespace libra::cli
