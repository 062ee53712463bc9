// AgenticWorkload: the generative model of agentic RL rollouts. Per prompt a latent
// difficulty shared by its GRPO group; per trajectory a long-tailed amount of work, spent in turns
// that each end with a tool call (whose outcome, output size and latency are drawn per tool type)
// or with the end of the trajectory; limits truncate it; drift with the policy version scales the
// work; a skill model decides the reward. docs/workloads.md explains every parameter and where its
// value comes from. This module only draws numbers: it knows nothing of engines, time or
// scheduling, and never reads files.
//
// Determinism: Script(prompt, sample, version, skill) depends only on (seed, prompt, sample,
// version, skill). Every draw comes from an Rng::ForKey stream keyed by the prompt, the sample and
// the turn, never from call order; the version only rescales the trajectory's work, so the same
// sample at two versions is the same trajectory stretched or shrunk.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "recipe/options.h"
#include "workload/skill.h"
#include "workload/workload.h"

namespace libra::workload {

/// How the length scale changes with the policy version (performance.md §3.3).
enum class DriftMode {
  kNone,    // stationary
  kGrowth,  // rises linearly to drift_factor (> 1) at drift_steps, then stays
  kShrink,  // falls linearly to drift_factor (< 1) at drift_steps, then stays
  kUShape,  // falls to drift_factor (< 1) at drift_steps / 2, back to 1 at drift_steps
  kStep,    // 1 before drift_step_at, drift_factor from then on
};
/// "none", "growth", "shrink", "u-shape", "step".
constexpr std::array<EnumName<DriftMode>, 5> EnumTable(DriftMode) {
  return {{{DriftMode::kNone, "none"},
           {DriftMode::kGrowth, "growth"},
           {DriftMode::kShrink, "shrink"},
           {DriftMode::kUShape, "u-shape"},
           {DriftMode::kStep, "step"}}};
}

/// One tool type. The key of each field in a recipe is "<name>_<field>", e.g. shell_timeout_s.
struct ToolParams {
  /// Tool name, as recorded in TurnScript::tool and used as the key prefix.
  std::string name;
  /// Relative share of tool calls that go to this tool (0 = never called). Default: 0.
  double weight = 0;
  /// Median latency of a call in seconds (0 = instantaneous). Default: 1.
  double latency_median_s = 1;
  /// Log-normal sigma of the latency. Default: 1.
  double latency_sigma = 1;
  /// A call whose drawn latency reaches this times out (status timeout, latency = timeout_s);
  /// 0 = no timeout. Default: 0.
  double timeout_s = 0;
  /// Chance that a call that did not time out fails. Default: 0.
  double failure_rate = 0;
  /// Median tokens the tool returns into the context. Default: 100.
  double output_tokens_median = 100;
  /// Log-normal sigma of the output tokens. Default: 1.
  double output_tokens_sigma = 1;
  /// Cap on the output tokens of one call. Default: 4096.
  int64_t output_tokens_max = 4096;

  bool operator==(const ToolParams&) const = default;
};

/// The tool catalogue (AgenticToolNames(), in that order) with each tool's default numbers
/// (performance.md §3.5) and the r2e-gym weights: validator 1, every other tool 0.
std::vector<ToolParams> AgenticToolCatalogue();

/// Every parameter of the model. The recipe key of a field is its name (tools: see ToolParams;
/// skill: the reward_* keys of ReadSkillParams). A default-constructed AgenticParams is the
/// r2e-gym preset; PresetParams gives the others.
struct AgenticParams {
  // --- Prompts --------------------------------------------------------------------------------
  /// Median prompt length in tokens (log-normal). Default: 1500.
  double prompt_tokens_median = 1500;
  /// Log-normal sigma of the prompt length. Default: 0.5.
  double prompt_tokens_sigma = 0.5;
  /// Prompts are cut to this many tokens (the dataset loader's cap). Default: 2048.
  int64_t prompt_tokens_max = 2048;

  // --- Length (total generated tokens of a trajectory, before any cap) -------------------------
  /// Median total generated tokens of a trajectory at version 0. Default: 3500.
  double tokens_median = 3500;
  /// Log-normal sigma of the total; ln(10)/2.326 makes p99 = 10 x p50. Default: 0.98994.
  double tokens_sigma = 2.302585092994046 / 2.326;
  /// Correlation of log total tokens between two samples of the same prompt. Default: 0.6.
  double group_correlation = 0.6;
  /// Share of the group's common length component explained by the prompt's difficulty (harder
  /// prompts run longer); 0 = length independent of difficulty. Default: 0.5.
  double difficulty_length_weight = 0.5;

  // --- Turns -----------------------------------------------------------------------------------
  /// Median tokens a turn generates before it calls a tool (log-normal). Default: 1200.
  double turn_tokens_median = 1200;
  /// Log-normal sigma of the tokens per turn. Default: 0.6.
  double turn_tokens_sigma = 0.6;
  /// Cap on the tokens one turn generates (the per-call max_tokens). Default: 2560.
  int64_t max_turn_tokens = 2560;
  /// Cap on turns; work left after the last allowed turn truncates the trajectory. Default: 12.
  int max_turns = 12;
  /// Cap on generated tokens over the whole trajectory. Default: 30000.
  int64_t max_new_tokens = 30000;
  /// Cap on the whole context (prompt, generated and tool output tokens: the engine's
  /// max_model_len); a trajectory that reaches it is truncated. 0: no cap. Default: 0.
  int64_t max_context_tokens = 0;

  // --- Causality -------------------------------------------------------------------------------
  /// How much tool outcomes (failures, timeouts, slow calls) reveal about the work still to do:
  /// 0 = nothing, 1 = strongly (latent correlation 0.9). Marginal rates do not change. Default:
  /// 0.5.
  double causal_strength = 0.5;

  // --- Drift with the policy version ------------------------------------------------------------
  /// How the length scale moves with the policy version. Default: kNone.
  DriftMode drift = DriftMode::kNone;
  /// Extreme factor of the drift; 0 = the mode's default (growth 3, shrink 0.5, u-shape 0.5,
  /// step 2). Default: 0.
  double drift_factor = 0;
  /// Versions over which growth, shrink and u-shape drift play out. Default: 200.
  int drift_steps = 200;
  /// First version of the step change. Default: 100.
  int drift_step_at = 100;

  // --- Tools -----------------------------------------------------------------------------------
  /// Output tokens of a call that timed out (an error message). Default: 32.
  int64_t timeout_output_tokens = 32;
  /// The tool catalogue, always the same tools in the same order (AgenticToolNames()); presets
  /// differ in their weights and numbers. No tool with weight > 0 means single-turn.
  std::vector<ToolParams> tools = AgenticToolCatalogue();

  // --- Reward ----------------------------------------------------------------------------------
  /// The skill model (reward_* keys).
  SkillParams skill;

  /// The tool named `name`, or nullptr.
  const ToolParams* Tool(const std::string& name) const;
  /// Whether any tool has weight > 0 (otherwise every trajectory is a single turn).
  bool has_tools() const;
  bool operator==(const AgenticParams&) const = default;
};

/// "r2e-gym", "search-r1", "dapo-math", "swe-long".
const std::vector<std::string>& AgenticPresetNames();
/// The tool catalogue: "validator", "python", "retriever", "web_search", "shell", "test".
const std::vector<std::string>& AgenticToolNames();

/// The parameters of a preset. kInvalidRecipe at "workload.preset" listing the presets for an
/// unknown name.
Result<AgenticParams> PresetParams(const std::string& preset);

/// `defaults` with every key of `overrides` applied. kInvalidRecipe listing every problem, each
/// located at its key: unknown keys (with a "did you mean"), wrong types, values out of range and
/// inconsistent combinations.
Result<AgenticParams> ReadAgenticParams(const AgenticParams& defaults,
                                        const recipe::OptionTable& overrides);

/// The length-scale multiplier of policy version `version` (1 at version 0).
double DriftFactor(const AgenticParams& params, int version);

/// The generative workload. A value-like service: immutable after construction, every method
/// const and cheap to call in any order.
class AgenticWorkload : public Workload {
 public:
  /// REQUIRES: `params` passed ReadAgenticParams's checks (PresetParams values do).
  AgenticWorkload(std::string name, const AgenticParams& params, uint64_t seed);

  /// The preset name.
  std::string Describe() const override;
  PromptInfo Prompt(int64_t index) const override;
  TrajectoryScript Script(int64_t prompt, int sample, int policy_version,
                          double skill) const override;
  const SkillParams& skill_params() const override { return params_.skill; }
  std::optional<int64_t> MaxContextTokens() const override {
    return params_.max_context_tokens > 0 ? std::optional<int64_t>(params_.max_context_tokens)
                                          : std::nullopt;
  }

  const AgenticParams& params() const { return params_; }

 private:
  struct PromptLatent {
    PromptInfo info;
    double shared_z = 0;  // the group's common length component, standard normal
  };
  PromptLatent Latent(int64_t index) const;
  /// A turn that ends in a tool call: the tool drawn at `target` of the cumulative weights, its
  /// latency, outcome and output, read through the copula (`work_term` = c x the trajectory's
  /// latent work, `c_rest` = sqrt(1 - c^2), the rest the turn's own normals).
  void CallTool(double target, double work_term, double c_rest, double z_latency, double z_failure,
                double z_output, TurnScript* turn) const;

  std::string name_;
  AgenticParams params_;
  uint64_t seed_;
  SkillModel skill_;
  std::vector<double> tool_cumulative_weight_;  // for picking a tool per call
};

/// The agentic workload of `preset` with `overrides` applied (the [workload] table's other keys).
/// kInvalidRecipe for an unknown preset (at the table's location, key workload.preset, listing
/// the presets) or for any bad override (see ReadAgenticParams).
Result<std::unique_ptr<Workload>> MakeAgenticWorkload(const std::string& preset,
                                                      const recipe::OptionTable& overrides,
                                                      uint64_t seed);

}  // namespace libra::workload
