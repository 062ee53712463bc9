#include "workload/agentic_workload.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/check.h"
#include "common/rng.h"
#include "common/strings.h"

namespace libra::workload {
namespace {

// Stream tags for Rng::ForKey: one stream per prompt, per trajectory and per turn.
constexpr uint64_t kPromptStream = 0x70726f6d7074;  // "prompt"
constexpr uint64_t kTrajectoryStream = 0x7472616a;  // "traj"
constexpr uint64_t kTurnStream = 0x7475726e;        // "turn"

// Latent correlation between a tool outcome and the trajectory's work at causal_strength 1.
constexpr double kMaxCausalCorrelation = 0.9;

// Caps that keep extreme draws finite when converted to integers.
constexpr double kMaxDrawnTokens = 1e15;

// Standard normal CDF.
double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// median * exp(sigma * z), rounded and clamped to [lo, hi].
int64_t LogNormalTokens(double median, double sigma, double z, int64_t lo, int64_t hi) {
  if (median <= 0) return std::clamp<int64_t>(0, lo, hi);
  const double x = std::min(median * std::exp(sigma * z), kMaxDrawnTokens);
  return std::clamp<int64_t>(std::llround(x), lo, hi);
}

double DefaultDriftFactor(DriftMode mode) {
  switch (mode) {
    case DriftMode::kNone:
      return 1;
    case DriftMode::kGrowth:
      return 3;  // performance.md §3.3: growth x3 over 200 steps
    case DriftMode::kShrink:
      return 0.5;  // performance.md §3.3: shrink to 0.5x
    case DriftMode::kUShape:
      return 0.5;
    case DriftMode::kStep:
      return 2;
  }
  return 1;
}

double ResolvedDriftFactor(const AgenticParams& p) {
  return p.drift_factor == 0 ? DefaultDriftFactor(p.drift) : p.drift_factor;
}

ToolParams MakeTool(std::string name, double weight, double latency_median_s, double latency_sigma,
                    double timeout_s, double failure_rate, double output_tokens_median,
                    double output_tokens_sigma, int64_t output_tokens_max) {
  ToolParams t;
  t.name = std::move(name);
  t.weight = weight;
  t.latency_median_s = latency_median_s;
  t.latency_sigma = latency_sigma;
  t.timeout_s = timeout_s;
  t.failure_rate = failure_rate;
  t.output_tokens_median = output_tokens_median;
  t.output_tokens_sigma = output_tokens_sigma;
  t.output_tokens_max = output_tokens_max;
  return t;
}

ToolParams* MutableTool(AgenticParams& p, const std::string& name) {
  for (ToolParams& t : p.tools) {
    if (t.name == name) return &t;
  }
  LIBRA_CHECK(false) << "no tool " << name;
  return nullptr;
}

// Each preset's parameters; the sources are in docs/workloads.md and the comments below.

// R2E-Gym as the Libra authors run it (libra-reference §6.3, §7.4; performance.md §3.1 row
// "Libra R2E-Gym"): an issue-writing task with an in-process validator, prompts <= 2,048 tokens,
// <= 12 turns, <= 30,000 new tokens, per-call max_tokens about 2,545. The defaults of
// AgenticParams are this preset.
AgenticParams R2eGym() { return AgenticParams{}; }

// Search-R1 (performance.md §3.1 row "Search-R1 (original)", libra-reference §6.4): responses
// <= 500 tokens per turn, observations <= 500, <= 3 searches (max_turns 4 = 3 searches and the
// answer), initial prompt <= 2,048, a local E5+FAISS retriever (sub-second; assumption).
AgenticParams SearchR1() {
  AgenticParams p;
  p.prompt_tokens_median = 300;
  p.prompt_tokens_sigma = 0.3;
  p.prompt_tokens_max = 2048;
  p.tokens_median = 550;
  p.tokens_sigma = 0.6;
  p.turn_tokens_median = 300;
  p.turn_tokens_sigma = 0.4;
  p.max_turn_tokens = 500;
  p.max_turns = 4;
  p.max_new_tokens = 2000;
  MutableTool(p, "validator")->weight = 0;
  MutableTool(p, "retriever")->weight = 1;
  p.skill.initial = 0.25;
  p.skill.final = 0.45;
  p.skill.half_gap_samples = 100000;  // about 40 steps of 512 prompts x 5 samples
  return p;
}

// DAPO-Math-17K as long-CoT RLVR (performance.md §3.1 row "Long-CoT math", libra-reference §6.5):
// one long turn, max 20,480 new tokens (16k + 4k overlong buffer), prompts <= 2,048, no tools.
AgenticParams DapoMath() {
  AgenticParams p;
  p.prompt_tokens_median = 200;
  p.prompt_tokens_sigma = 0.5;
  p.prompt_tokens_max = 2048;
  p.tokens_median = 4000;
  p.turn_tokens_median = 4000;
  p.max_turn_tokens = 20480;
  p.max_turns = 1;
  p.max_new_tokens = 20480;
  for (ToolParams& t : p.tools) t.weight = 0;
  p.skill.initial = 0.3;
  p.skill.final = 0.6;
  p.skill.half_gap_samples = 200000;  // about 25 steps of 512 prompts x 16 samples
  return p;
}

// Long-horizon SWE agents (performance.md §3.1 row "SWE (R2E-Gym / DeepSWE)", §3.5): about 86
// steps per trajectory on average, capped at 100; 64k context; docker shell commands (300 s
// timeout) and test runs (900 s timeout) with large, variable outputs.
AgenticParams SweLong() {
  AgenticParams p;
  p.prompt_tokens_median = 3000;
  p.prompt_tokens_sigma = 0.4;
  p.prompt_tokens_max = 8192;
  p.tokens_median = 27000;
  p.tokens_sigma = 0.35;
  p.turn_tokens_median = 250;
  p.turn_tokens_sigma = 0.6;
  p.max_turn_tokens = 4096;
  p.max_turns = 100;
  p.max_new_tokens = 65536;
  MutableTool(p, "validator")->weight = 0;
  MutableTool(p, "shell")->weight = 0.85;
  MutableTool(p, "test")->weight = 0.15;
  p.skill.initial = 0.2;
  p.skill.final = 0.45;
  p.skill.half_gap_samples = 30000;
  return p;
}

struct Preset {
  const char* name;
  AgenticParams (*make)();
};
constexpr Preset kPresets[] = {
    {"r2e-gym", R2eGym},
    {"search-r1", SearchR1},
    {"dapo-math", DapoMath},
    {"swe-long", SweLong},
};

std::string UnknownPresetMessage(const std::string& preset) {
  std::string what = "unknown preset '" + preset + "'";
  const std::string hint = ClosestMatch(preset, AgenticPresetNames());
  if (!hint.empty()) what += "; did you mean '" + hint + "'?";
  return what + " (known: " + StrJoin(AgenticPresetNames(), ", ") + ")";
}

}  // namespace

std::vector<ToolParams> AgenticToolCatalogue() {
  // performance.md §3.5; medians marked there as assumptions are assumptions here too.
  return {
      // Libra's in-process issue validator: ~0 s, payload about 100-150 tokens (libra-reference
      // §2.9). A "failure" is a validation below the stop reward: the trajectory goes on.
      MakeTool("validator", 1, 0.005, 0.5, 0, 0.8, 125, 0.1, 150),
      // Python sandbox: mean 0.3 s (rStar2-Agent), timeout 10 s (Libra's code executor).
      MakeTool("python", 0, 0.2, 0.9, 10, 0.3, 100, 1.0, 2000),
      // Local dense retrieval (Search-R1 E5+FAISS, top-3): 0.1-0.5 s, observations <= 500.
      MakeTool("retriever", 0, 0.3, 0.5, 0, 0.02, 400, 0.15, 500),
      // Web search (SearXNG/Google): 1-5 s, 30 s client timeout.
      MakeTool("web_search", 0, 2, 0.6, 30, 0.05, 400, 0.3, 1000),
      // SWE shell command in docker: 1-30 s, 300 s timeout, highly variable output.
      MakeTool("shell", 0, 5, 1.5, 300, 0.25, 400, 1.3, 16000),
      // SWE test run: 10-300 s, 900 s timeout.
      MakeTool("test", 0, 60, 1.0, 900, 0.6, 1000, 1.0, 16000),
  };
}

const ToolParams* AgenticParams::Tool(const std::string& name) const {
  for (const ToolParams& t : tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool AgenticParams::has_tools() const {
  return std::any_of(tools.begin(), tools.end(), [](const ToolParams& t) { return t.weight > 0; });
}

const std::vector<std::string>& AgenticPresetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Preset& p : kPresets) v.push_back(p.name);
    return v;
  }();
  return names;
}

const std::vector<std::string>& AgenticToolNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const ToolParams& t : AgenticToolCatalogue()) v.push_back(t.name);
    return v;
  }();
  return names;
}

Result<AgenticParams> PresetParams(const std::string& preset) {
  for (const Preset& p : kPresets) {
    if (preset == p.name) return p.make();
  }
  return Status::InvalidRecipe("workload.preset", UnknownPresetMessage(preset));
}

Result<AgenticParams> ReadAgenticParams(const AgenticParams& defaults,
                                        const recipe::OptionTable& overrides) {
  recipe::OptionReader r(overrides);
  const AgenticParams& d = defaults;
  AgenticParams p = defaults;
  p.prompt_tokens_median = r.Double("prompt_tokens_median", d.prompt_tokens_median, 1, 1e8);
  p.prompt_tokens_sigma = r.Double("prompt_tokens_sigma", d.prompt_tokens_sigma, 0, 5);
  p.prompt_tokens_max = r.Int("prompt_tokens_max", d.prompt_tokens_max, 1, 100000000);
  p.tokens_median = r.Double("tokens_median", d.tokens_median, 1, 1e9);
  p.tokens_sigma = r.Double("tokens_sigma", d.tokens_sigma, 0, 5);
  p.group_correlation = r.Double("group_correlation", d.group_correlation, 0, 1);
  p.difficulty_length_weight =
      r.Double("difficulty_length_weight", d.difficulty_length_weight, 0, 1);
  p.turn_tokens_median = r.Double("turn_tokens_median", d.turn_tokens_median, 1, 1e9);
  p.turn_tokens_sigma = r.Double("turn_tokens_sigma", d.turn_tokens_sigma, 0, 5);
  p.max_turn_tokens = r.Int("max_turn_tokens", d.max_turn_tokens, 1, 1000000000);
  p.max_turns = static_cast<int>(r.Int("max_turns", d.max_turns, 1, 100000));
  p.max_new_tokens = r.Int("max_new_tokens", d.max_new_tokens, 1, 10000000000);
  p.max_context_tokens = r.Int("max_context_tokens", d.max_context_tokens, 0, 10000000000);
  p.causal_strength = r.Double("causal_strength", d.causal_strength, 0, 1);
  p.drift = r.Enum("drift", d.drift);
  p.drift_factor = r.Double("drift_factor", d.drift_factor, 0, 1000);
  p.drift_steps = static_cast<int>(r.Int("drift_steps", d.drift_steps, 1, 100000000));
  p.drift_step_at = static_cast<int>(r.Int("drift_step_at", d.drift_step_at, 0, 100000000));
  p.timeout_output_tokens = r.Int("timeout_output_tokens", d.timeout_output_tokens, 0, 100000000);
  for (ToolParams& t : p.tools) {
    const std::string& n = t.name;
    t.weight = r.Double(n + "_weight", t.weight, 0, 1e6);
    t.latency_median_s = r.Double(n + "_latency_median_s", t.latency_median_s, 0, 1e7);
    t.latency_sigma = r.Double(n + "_latency_sigma", t.latency_sigma, 0, 5);
    t.timeout_s = r.Double(n + "_timeout_s", t.timeout_s, 0, 1e7);
    t.failure_rate = r.Double(n + "_failure_rate", t.failure_rate, 0, 1);
    t.output_tokens_median = r.Double(n + "_output_tokens_median", t.output_tokens_median, 0, 1e8);
    t.output_tokens_sigma = r.Double(n + "_output_tokens_sigma", t.output_tokens_sigma, 0, 5);
    t.output_tokens_max = r.Int(n + "_output_tokens_max", t.output_tokens_max, 0, 100000000);
  }
  p.skill = ReadSkillParams(r, d.skill);

  // Cross-field checks.
  const double factor = ResolvedDriftFactor(p);
  const auto require = [&](bool ok, const char* what) {
    if (!ok) {
      r.Error("drift_factor", StrFormat("must be %s for drift = '%s' (got %g)", what,
                                        NameOf(p.drift).c_str(), factor));
    }
  };
  switch (p.drift) {
    case DriftMode::kNone:
    case DriftMode::kStep:
      break;
    case DriftMode::kGrowth:
      require(factor > 1, "> 1");
      break;
    case DriftMode::kShrink:
    case DriftMode::kUShape:
      require(factor < 1, "< 1");
      break;
  }
  if (p.max_turns > 1 && !p.has_tools()) {
    r.Error("max_turns",
            StrFormat("is %d but no tool has a weight > 0, and only a tool call starts another "
                      "turn: set max_turns = 1 or give a tool a weight (e.g. python_weight = 1)",
                      p.max_turns));
  }
  LIBRA_RETURN_IF_ERROR(r.Finish());
  return p;
}

double DriftFactor(const AgenticParams& params, int version) {
  const double factor = ResolvedDriftFactor(params);
  const double v = std::max(version, 0);
  const double x = std::min(v / std::max(params.drift_steps, 1), 1.0);
  switch (params.drift) {
    case DriftMode::kNone:
      return 1;
    case DriftMode::kGrowth:
    case DriftMode::kShrink:
      return 1 + (factor - 1) * x;
    case DriftMode::kUShape:
      return 1 + (factor - 1) * (1 - std::abs(2 * x - 1));
    case DriftMode::kStep:
      return version >= params.drift_step_at ? factor : 1;
  }
  return 1;
}

AgenticWorkload::AgenticWorkload(std::string name, const AgenticParams& params, uint64_t seed)
    : name_(std::move(name)), params_(params), seed_(seed), skill_(params.skill) {
  double total = 0;
  for (const ToolParams& t : params_.tools) {
    total += t.weight;
    tool_cumulative_weight_.push_back(total);
  }
}

std::string AgenticWorkload::Describe() const { return name_; }

AgenticWorkload::PromptLatent AgenticWorkload::Latent(int64_t index) const {
  Rng rng = Rng::ForKey(seed_, kPromptStream, static_cast<uint64_t>(index));
  const double z_difficulty = rng.Normal();
  const double z_other = rng.Normal();
  const double z_prompt = rng.Normal();
  PromptLatent latent;
  latent.info.index = index;
  latent.info.difficulty = Phi(z_difficulty);
  latent.info.prompt_tokens =
      LogNormalTokens(params_.prompt_tokens_median, params_.prompt_tokens_sigma, z_prompt, 1,
                      params_.prompt_tokens_max);
  const double w = params_.difficulty_length_weight;
  latent.shared_z = std::sqrt(w) * z_difficulty + std::sqrt(1 - w) * z_other;
  return latent;
}

PromptInfo AgenticWorkload::Prompt(int64_t index) const { return Latent(index).info; }

void AgenticWorkload::CallTool(double target, double work_term, double c_rest, double z_latency,
                               double z_failure, double z_output, TurnScript* turn) const {
  const AgenticParams& p = params_;
  size_t pick = 0;
  while (pick + 1 < tool_cumulative_weight_.size() &&
         (tool_cumulative_weight_[pick] <= target || p.tools[pick].weight <= 0)) {
    ++pick;
  }
  const ToolParams& tool = p.tools[pick];
  turn->end = TurnEnd::kToolCall;
  turn->tool = tool.name;
  const double latency =
      tool.latency_median_s <= 0
          ? 0
          : tool.latency_median_s * std::exp(tool.latency_sigma * (work_term + c_rest * z_latency));
  if (tool.timeout_s > 0 && latency >= tool.timeout_s) {
    turn->tool_status = ToolStatus::kTimeout;
    turn->tool_latency_s = tool.timeout_s;
    turn->tool_output_tokens = p.timeout_output_tokens;
    return;
  }
  // Fails when the correlated normal lies in the top failure_rate of its distribution.
  const bool failed = Phi(-(work_term + c_rest * z_failure)) < tool.failure_rate;
  turn->tool_status = failed ? ToolStatus::kFailure : ToolStatus::kSuccess;
  turn->tool_latency_s = latency;
  turn->tool_output_tokens = LogNormalTokens(tool.output_tokens_median, tool.output_tokens_sigma,
                                             z_output, 0, tool.output_tokens_max);
}

TrajectoryScript AgenticWorkload::Script(int64_t prompt, int sample, int policy_version,
                                         double skill) const {
  const AgenticParams& p = params_;
  const PromptLatent latent = Latent(prompt);
  Rng rng = Rng::ForKey(seed_, kTrajectoryStream, static_cast<uint64_t>(prompt),
                        static_cast<uint64_t>(sample));
  const double z_sample = rng.Normal();
  const double u_reward = rng.Uniform();

  // The trajectory's latent work: standard normal, correlated within the group.
  const double rho = p.group_correlation;
  const double z_work = std::sqrt(rho) * latent.shared_z + std::sqrt(1 - rho) * z_sample;
  const double work =
      p.tokens_median * DriftFactor(p, policy_version) * std::exp(p.tokens_sigma * z_work);
  int64_t remaining = std::max<int64_t>(1, std::llround(std::min(work, kMaxDrawnTokens)));

  // Tool outcomes read the latent work through a Gaussian copula: marginal rates stay as given.
  const double c = kMaxCausalCorrelation * p.causal_strength;
  const double c_rest = std::sqrt(1 - c * c);
  const bool tools = p.has_tools();
  const double total_weight = tool_cumulative_weight_.empty() ? 0 : tool_cumulative_weight_.back();

  TrajectoryScript script;
  int64_t used = 0;
  int64_t context = latent.info.prompt_tokens;
  for (int t = 0;; ++t) {
    int64_t budget = p.max_new_tokens - used;
    if (p.max_context_tokens > 0) {
      budget = std::max<int64_t>(0, std::min(budget, p.max_context_tokens - context));
    }
    TurnScript turn;
    if (!tools) {
      const int64_t cap = std::min(p.max_turn_tokens, budget);
      turn.generated_tokens = std::min(remaining, cap);
      turn.end = remaining <= cap ? TurnEnd::kStop : TurnEnd::kTruncated;
      script.turns.push_back(turn);
      break;
    }
    Rng turn_rng = Rng::ForKey(seed_, kTurnStream | (static_cast<uint64_t>(t) << 32),
                               static_cast<uint64_t>(prompt), static_cast<uint64_t>(sample));
    const double z_turn = turn_rng.Normal();
    const double u_tool = turn_rng.Uniform();
    const double z_latency = turn_rng.Normal();
    const double z_failure = turn_rng.Normal();
    const double z_output = turn_rng.Normal();

    const int64_t want =
        LogNormalTokens(p.turn_tokens_median, p.turn_tokens_sigma, z_turn, 1, p.max_turn_tokens);
    if (remaining <= want && remaining <= budget) {
      turn.generated_tokens = remaining;
      turn.end = TurnEnd::kStop;
      script.turns.push_back(turn);
      break;
    }
    // Work remains after this turn: it calls a tool, unless a limit ends the trajectory here.
    turn.generated_tokens = std::min(want, budget);
    if (turn.generated_tokens == budget || t + 1 >= p.max_turns) {
      turn.end = TurnEnd::kTruncated;
      script.turns.push_back(turn);
      break;
    }
    remaining -= turn.generated_tokens;
    used += turn.generated_tokens;
    context += turn.generated_tokens;

    CallTool(u_tool * total_weight, c * z_work, c_rest, z_latency, z_failure, z_output, &turn);
    if (p.max_context_tokens > 0) {
      // A tool reply that would not fit the context is cut to what does.
      turn.tool_output_tokens =
          std::max<int64_t>(0, std::min(turn.tool_output_tokens, p.max_context_tokens - context));
    }
    context += turn.tool_output_tokens;
    script.turns.push_back(turn);
  }

  const bool success =
      !script.truncated() && u_reward < skill_.SuccessProbability(skill, latent.info.difficulty);
  script.reward = success ? 1 : 0;
  return script;
}

Result<std::unique_ptr<Workload>> MakeAgenticWorkload(const std::string& preset,
                                                      const recipe::OptionTable& overrides,
                                                      uint64_t seed) {
  auto defaults = PresetParams(preset);
  if (!defaults.ok()) {
    const std::string path = (overrides.path.empty() ? "workload" : overrides.path) + ".preset";
    const std::string where = overrides.where.empty() ? path : overrides.where + ": " + path;
    return Status::InvalidRecipe(where, UnknownPresetMessage(preset));
  }
  LIBRA_ASSIGN_OR_RETURN(AgenticParams params, ReadAgenticParams(*defaults, overrides));
  return std::unique_ptr<Workload>(std::make_unique<AgenticWorkload>(preset, params, seed));
}

}  // namespace libra::workload
