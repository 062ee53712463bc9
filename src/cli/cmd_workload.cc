// `libra workload`: the distribution of the trajectories a recipe's workload generates, per policy
// version, so that a user can check a preset (or a trace) before using it.
#include <algorithm>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "report/document.h"
#include "report/table.h"
#include "workload/skill.h"
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

/// Whether two summaries hold the same lengths (turns, tokens, tool outputs).
bool SameLengths(const workload::VersionSummary& a, const workload::VersionSummary& b) {
  return a.turns == b.turns && a.generated_tokens == b.generated_tokens &&
         a.tool_output_tokens == b.tool_output_tokens;
}

/// The modelled skill of each policy version after that many on-policy steps of the recipe's
/// batch (the skill model of docs/workloads.md), or `fixed` for every version when given.
std::vector<double> SkillOfVersions(const workload::Workload& w, const recipe::Recipe& recipe,
                                    const std::vector<int>& versions, double fixed) {
  std::vector<double> skills;
  workload::SkillModel model(w.skill_params());
  const std::vector<double> fresh(
      static_cast<size_t>(recipe.rl.prompts_per_step) * static_cast<size_t>(recipe.rl.group_size),
      0.0);
  for (int v : versions) {
    if (fixed >= 0) {
      skills.push_back(fixed);
      continue;
    }
    while (model.steps() < v) model.RecordStep(model.steps(), fresh, 0);
    skills.push_back(model.Skill(v));
  }
  return skills;
}

/// Lengths per trajectory: versions whose trajectories have the same lengths share a row (a
/// workload without drift has one row).
report::Table LengthsTable(const std::vector<int>& versions,
                           const std::vector<workload::VersionSummary>& summaries) {
  using Shown = report::Column::Shown;
  report::Table lengths({
      {.key = "versions", .header = "versions", .right_align = true, .shown = Shown::kReading},
      {.key = "from_version", .header = "from", .right_align = true, .shown = Shown::kData},
      {.key = "to_version", .header = "to", .right_align = true, .shown = Shown::kData},
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
  for (size_t first = 0; first < summaries.size();) {
    size_t last = first;
    while (last + 1 < summaries.size() && SameLengths(summaries[first], summaries[last + 1])) {
      ++last;
    }
    const workload::VersionSummary& v = summaries[first];
    std::vector<report::Cell> row = {
        report::Cell::Text(last == first ? std::to_string(versions[first])
                                         : StrFormat("%d-%d", versions[first], versions[last])),
        report::Cell::Integer(versions[first]), report::Cell::Integer(versions[last])};
    for (auto& c : QuantileCells(v.turns, 0, false)) row.push_back(c);
    for (auto& c : QuantileCells(v.generated_tokens, 0, true)) row.push_back(c);
    for (auto& c : QuantileCells(v.tool_output_tokens, 0, false)) row.push_back(c);
    lengths.AddRow(std::move(row));
    first = last + 1;
  }
  return lengths;
}

/// Tools and outcomes: a row per version for scripts (`tools`), and for reading (`shown`) the
/// versions that show the same numbers (the skill aside) share a row.
void AddToolTables(const std::vector<int>& versions,
                   const std::vector<workload::VersionSummary>& summaries,
                   const std::vector<double>& skills, report::Document* doc) {
  report::Table tools({
      {"version", "version", true},
      {"skill", "skill", true},
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
  report::Table shown = tools;
  std::vector<std::vector<report::Cell>> rows;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const workload::VersionSummary& v = summaries[i];
    std::vector<report::Cell> row = {report::Cell::Integer(v.version),
                                     report::Cell::Number(skills[i], 3),
                                     report::Cell::Number(v.tool_calls.mean, 2)};
    for (auto& c : QuantileCells(v.tool_latency_s, 2, true)) row.push_back(c);
    row.push_back(report::Cell::Percent(v.tool_failure_fraction, 1));
    row.push_back(report::Cell::Percent(v.tool_timeout_fraction, 1));
    row.push_back(report::Cell::Percent(v.truncated_fraction, 1));
    row.push_back(report::Cell::Percent(v.success_fraction, 1));
    tools.AddRow(row);
    rows.push_back(std::move(row));
  }
  auto same_shown = [](const std::vector<report::Cell>& a, const std::vector<report::Cell>& b) {
    for (size_t c = 2; c < a.size(); ++c) {
      if (a[c].text != b[c].text) return false;
    }
    return true;
  };
  for (size_t first = 0; first < rows.size();) {
    size_t last = first;
    while (last + 1 < rows.size() && same_shown(rows[first], rows[last + 1])) ++last;
    std::vector<report::Cell> row = rows[first];
    if (last > first) {
      row[0] = report::Cell::Text(StrFormat("%d-%d", versions[first], versions[last]));
      if (rows[first][1].text != rows[last][1].text) {
        row[1] = report::Cell::Text(rows[first][1].text + "-" + rows[last][1].text);
      }
    }
    shown.AddRow(std::move(row));
    first = last + 1;
  }
  doc->AddTable("tools", "Tools and outcomes", std::move(tools),
                report::Document::Shown::kDataOnly);
  doc->AddTable("tools_by_versions", "Tools and outcomes", std::move(shown),
                report::Document::Shown::kReadingOnly);
}

}  // namespace

int RunWorkload(const WorkloadOptions& options, const Io& io) {
  auto format = ChosenFormat(options.common.output);
  if (!format.ok()) return Fail(io, format.status());
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
  const std::vector<double> skills = SkillOfVersions(w, *recipe, versions, options.skill);
  std::vector<workload::VersionSummary> summaries;
  for (size_t i = 0; i < versions.size(); ++i) {
    summaries.push_back(
        workload::Summarize(w, prompts, recipe->rl.group_size, {versions[i]}, skills[i]).front());
  }

  report::Document doc(StrFormat(
      "%s: %d prompts x %d samples per policy version, seed %llu, %s", w.Describe().c_str(),
      prompts, recipe->rl.group_size, static_cast<unsigned long long>(recipe->seed),
      options.skill >= 0 ? StrFormat("skill %.2f", options.skill).c_str()
                         : "skill from the reward model after each version's on-policy steps"));
  report::Table lengths = LengthsTable(versions, summaries);
  const bool no_drift = versions.size() > 1 && lengths.rows() == 1;
  doc.AddTable("lengths", "Lengths per trajectory (tokens)", std::move(lengths));
  if (no_drift) doc.AddNote("(the same lengths at every version: this workload does not drift)");
  AddToolTables(versions, summaries, skills, &doc);
  return Print(io, doc, options.common.output);
}

}  // namespace libra::cli
