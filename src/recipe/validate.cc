// ValidateRecipe: the checks on a Recipe that need no TOML and no registry.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <tuple>

#include "common/strings.h"
#include "recipe/limits.h"
#include "recipe/recipe.h"

namespace libra::recipe {
namespace {

class Checker {
 public:
  Checker(const Recipe& recipe, std::vector<Diagnostic>* diagnostics)
      : recipe_(recipe), diagnostics_(diagnostics) {}

  /// Reports `what` for `key` unless `ok`, and unless the key already has a diagnostic (a
  /// missing or mistyped field is reported once, by the parser).
  void Check(bool ok, const std::string& key, const std::string& what) {
    if (ok) return;
    const std::string prefix = key + ":";
    for (const Diagnostic& d : *diagnostics_) {
      if (StartsWith(d.what, prefix)) return;
    }
    diagnostics_->push_back(Diagnostic{recipe_.Where(key), key + ": " + what});
  }

  void AtLeast(int64_t value, int64_t min, const std::string& key) {
    Check(value >= min, key,
          StrFormat("must be at least %lld (got %lld)", static_cast<long long>(min),
                    static_cast<long long>(value)));
  }

  /// `value` is at most libra's limit `max` for `key` (docs/recipes.md lists the limits).
  void AtMost(int64_t value, int64_t max, const std::string& key) {
    Check(value <= max, key,
          StrFormat("must be at most %lld, libra's limit (got %lld)", static_cast<long long>(max),
                    static_cast<long long>(value)));
  }

  void InRange(double value, double min, double max, const std::string& key) {
    Check(value >= min && value <= max, key,
          StrFormat("must be in [%g, %g] (got %g)", min, max, value));
  }

  void Positive(double value, const std::string& key) {
    Check(value > 0, key, StrFormat("must be positive (got %g)", value));
  }

 private:
  const Recipe& recipe_;
  std::vector<Diagnostic>* diagnostics_;
};

}  // namespace

std::string Recipe::Where(const std::string& key_path) const {
  for (std::string p = key_path; !p.empty();) {
    auto it = locations.find(p);
    if (it != locations.end()) return it->second;
    const size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
  return source.empty() ? "<recipe>" : source + ":1:1";
}

namespace {

/// (0, line, column) for "file:line:col", (1, 0, 0) for anything else (overrides).
std::tuple<int, long, long> SortKey(const std::string& where) {
  const std::vector<std::string> parts = StrSplit(where, ':');
  if (parts.size() >= 3) {
    char* end_line = nullptr;
    char* end_column = nullptr;
    const std::string& line = parts[parts.size() - 2];
    const std::string& column = parts[parts.size() - 1];
    const long l = std::strtol(line.c_str(), &end_line, 10);
    const long c = std::strtol(column.c_str(), &end_column, 10);
    if (!line.empty() && !column.empty() && *end_line == '\0' && *end_column == '\0') {
      return {0, l, c};
    }
  }
  return {1, 0, 0};
}

}  // namespace

void SortDiagnostics(std::vector<Diagnostic>* diagnostics) {
  std::stable_sort(
      diagnostics->begin(), diagnostics->end(),
      [](const Diagnostic& a, const Diagnostic& b) { return SortKey(a.where) < SortKey(b.where); });
}

Status DiagnosticsToStatus(const std::vector<Diagnostic>& diagnostics) {
  if (diagnostics.empty()) return Status();
  std::vector<std::string> lines;
  // One problem per line, even when it echoes a value holding a newline or an escape sequence.
  for (const Diagnostic& d : diagnostics) lines.push_back(EscapeControl(d.ToString()));
  return Status(StatusCode::kInvalidRecipe, StrJoin(lines, "\n"));
}

namespace {

/// Trajectories per step (each factor may be out of its bounds: checked apart).
int64_t PerStep(const Recipe& r) { return int64_t{r.rl.prompts_per_step} * r.rl.group_size; }

void CheckRunAndCluster(const Recipe& r, Checker& c) {
  c.Check(!r.name.empty(), "name", "must not be empty");
  c.AtLeast(r.steps, 1, "steps");
  c.AtMost(r.steps, kMaxSteps, "steps");
  c.Check(r.seed <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "seed",
          StrFormat("must be at most %lld (got %llu)",
                    static_cast<long long>(std::numeric_limits<int64_t>::max()),
                    static_cast<unsigned long long>(r.seed)));

  c.Check(!r.cluster.gpu.empty(), "cluster.gpu", "must not be empty");
  c.AtLeast(r.cluster.nodes, 1, "cluster.nodes");
  c.AtMost(r.cluster.nodes, kMaxNodes, "cluster.nodes");
  c.AtLeast(r.cluster.gpus_per_node, 1, "cluster.gpus_per_node");
  c.AtMost(r.cluster.gpus_per_node, kMaxGpusPerNode, "cluster.gpus_per_node");
  if (r.cluster.nodes <= kMaxNodes && r.cluster.gpus_per_node <= kMaxGpusPerNode) {
    c.Check(r.cluster.total_gpus() <= kMaxGpus, "cluster.nodes",
            StrFormat("%d nodes of %d GPUs are %d GPUs, more than libra's limit of %d",
                      r.cluster.nodes, r.cluster.gpus_per_node, r.cluster.total_gpus(), kMaxGpus));
  }
  c.Check(!r.model.name.empty(), "model.name", "must not be empty");

  c.Check(r.workload.kind != WorkloadKind::kTrace || !r.workload.trace.empty(), "workload.trace",
          "required when workload.kind = \"trace\"");
}

void CheckRl(const Recipe& r, Checker& c) {
  c.AtLeast(r.rl.prompts_per_step, 1, "rl.prompts_per_step");
  c.AtMost(r.rl.prompts_per_step, kMaxPromptsPerStep, "rl.prompts_per_step");
  c.AtLeast(r.rl.group_size, 1, "rl.group_size");
  c.AtMost(r.rl.group_size, kMaxGroupSize, "rl.group_size");
  const int64_t per_step = PerStep(r);
  if (r.rl.prompts_per_step <= kMaxPromptsPerStep && r.rl.group_size <= kMaxGroupSize) {
    c.Check(per_step <= kMaxTrajectoriesPerStep, "rl.group_size",
            StrFormat("%d prompts of %d samples are %lld trajectories per step, more than "
                      "libra's limit of %lld",
                      r.rl.prompts_per_step, r.rl.group_size, static_cast<long long>(per_step),
                      static_cast<long long>(kMaxTrajectoriesPerStep)));
  }
  c.AtLeast(r.rl.staleness, 0, "rl.staleness");
  c.AtMost(r.rl.staleness, kMaxStaleness, "rl.staleness");
  c.AtLeast(r.rl.sync_interval, 1, "rl.sync_interval");
  c.AtMost(r.rl.sync_interval, kMaxStaleness + 1, "rl.sync_interval");
  c.AtLeast(r.eval.interval, 1, "eval.interval");
  c.Check(r.eval.prompts >= 1 && r.eval.prompts <= 100000, "eval.prompts",
          StrFormat("must be in [1, 100000] (got %d)", r.eval.prompts));
  c.Check(r.eval.target_fraction > 0 && r.eval.target_fraction <= 1, "eval.target_fraction",
          StrFormat("must be in (0, 1] (got %g)", r.eval.target_fraction));
}

void CheckSimAndTuning(const Recipe& r, Checker& c) {
  c.AtLeast(r.sim.max_num_seqs, 1, "sim.max_num_seqs");
  c.AtMost(r.sim.max_num_seqs, kMaxNumSeqs, "sim.max_num_seqs");
  c.AtLeast(r.sim.max_batched_tokens, 1, "sim.max_batched_tokens");
  c.AtMost(r.sim.max_batched_tokens, kMaxBatchedTokens, "sim.max_batched_tokens");
  c.AtLeast(r.sim.tool_concurrency, 0, "sim.tool_concurrency");
  c.Check(r.tuning.budget_runs >= 1 && r.tuning.budget_runs <= 100000, "tuning.budget_runs",
          StrFormat("must be in [1, 100000] (got %d)", r.tuning.budget_runs));
  c.AtLeast(r.tuning.steps, 0, "tuning.steps");
  c.AtMost(r.sim.tool_concurrency, kMaxToolConcurrency, "sim.tool_concurrency");
  c.Check(
      r.baselines.size() <= static_cast<size_t>(kMaxBaselines), "baselines",
      StrFormat("%zu entries, more than libra's limit of %d", r.baselines.size(), kMaxBaselines));
}

/// Each system: a unique name, its overrides in range, and a staleness its sync interval and
/// libra's limits allow.
void CheckSystems(const Recipe& r, Checker& c) {
  const int64_t per_step = PerStep(r);
  std::vector<const SystemSpec*> systems = {&r.system};
  for (const SystemSpec& b : r.baselines) systems.push_back(&b);
  std::set<std::string> names;
  for (const SystemSpec* s : systems) {
    c.Check(!s->name.empty(), s->path + ".name", "must not be empty");
    c.Check(names.insert(s->name).second || s->name.empty(), s->path + ".name",
            "'" + s->name + "' names another system of this recipe already");
    if (s->staleness) {
      c.AtLeast(*s->staleness, 0, s->path + ".staleness");
      c.AtMost(*s->staleness, kMaxStaleness, s->path + ".staleness");
    }
    const int bound = std::clamp(r.StalenessFor(*s), 0, kMaxStaleness);
    const int64_t in_flight =
        (int64_t{bound} + 1) * std::clamp<int64_t>(per_step, 0, kMaxTrajectoriesPerStep);
    c.Check(in_flight <= kMaxTrajectoriesInFlight,
            s->staleness ? s->path + ".staleness" : "rl.staleness",
            StrFormat("staleness %d lets %lld trajectories be in flight at once (%d steps of "
                      "%lld), more than libra's limit of %lld",
                      bound, static_cast<long long>(in_flight), bound + 1,
                      static_cast<long long>(per_step),
                      static_cast<long long>(kMaxTrajectoriesInFlight)));
    const int staleness = r.StalenessFor(*s);
    // Rollouts for step k need weights of version k - staleness; with fewer syncs the pipeline
    // would wait forever.
    if (staleness >= 0 && staleness <= kMaxStaleness && r.rl.sync_interval >= 1) {
      c.Check(r.rl.sync_interval <= staleness + 1,
              s->staleness ? s->path + ".staleness" : "rl.sync_interval",
              StrFormat("sync_interval %d needs a staleness bound of at least %d (system '%s' "
                        "has %d): rollouts for step k need the weights of step k - staleness",
                        r.rl.sync_interval, r.rl.sync_interval - 1, s->name.c_str(), staleness));
    }
  }
}

}  // namespace

void ValidateRecipe(const Recipe& r, std::vector<Diagnostic>* diagnostics) {
  Checker c(r, diagnostics);
  CheckRunAndCluster(r, c);
  CheckRl(r, c);
  CheckSimAndTuning(r, c);
  CheckSystems(r, c);
}

}  // namespace libra::recipe
