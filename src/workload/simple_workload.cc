#include "workload/simple_workload.h"

#include <algorithm>
#include <cmath>

#include "common/rng.h"

namespace libra::workload {
namespace {

// Stream keys, so that prompts and trajectories never share random numbers.
constexpr uint64_t kPromptStream = 1;
constexpr uint64_t kTrajectoryStream = 2;

}  // namespace

PromptInfo SimpleWorkload::Prompt(int64_t index) const {
  Rng rng = Rng::ForKey(seed_, kPromptStream, static_cast<uint64_t>(index));
  const int64_t mean = spec_.prompt_tokens;
  const int64_t lo = std::max<int64_t>(1, mean / 2);
  return PromptInfo{index, rng.UniformInt(lo, std::max(lo, mean + mean / 2))};
}

TrajectoryScript SimpleWorkload::Script(int64_t prompt, int sample, int /*policy_version*/) const {
  // The difficulty is drawn from the prompt's stream: every sample of a group shares it.
  Rng prompt_rng = Rng::ForKey(seed_, kPromptStream, static_cast<uint64_t>(prompt));
  prompt_rng.Next();  // the prompt length's draw
  const double difficulty = prompt_rng.Uniform();
  const double spread = std::min(spec_.success_rate, 1 - spec_.success_rate);
  const double p_success = std::clamp(spec_.success_rate + (1 - 2 * difficulty) * spread, 0.0, 1.0);

  Rng rng = Rng::ForKey(seed_, kTrajectoryStream, static_cast<uint64_t>(prompt),
                        static_cast<uint64_t>(sample));
  TrajectoryScript script;
  const double mu = std::log(static_cast<double>(spec_.turn_tokens));
  int64_t generated = 0;
  for (int turn = 0;; ++turn) {
    TurnScript t;
    t.generated_tokens =
        std::max<int64_t>(1, std::llround(rng.LogNormal(mu, spec_.turn_tokens_sigma)));
    const bool wants_tool = rng.Bernoulli(spec_.tool_call_probability);
    if (generated + t.generated_tokens >= spec_.max_new_tokens) {
      t.generated_tokens = spec_.max_new_tokens - generated;
      t.end = TurnEnd::kTruncated;
    } else if (wants_tool && turn + 1 >= spec_.max_turns) {
      t.end = TurnEnd::kTruncated;
    } else if (wants_tool) {
      t.end = TurnEnd::kToolCall;
      t.tool = "tool";
      t.tool_output_tokens = spec_.tool_output_tokens;
    } else {
      t.end = TurnEnd::kStop;
    }
    generated += t.generated_tokens;
    script.turns.push_back(t);
    if (t.end != TurnEnd::kToolCall) break;
  }
  const bool success = rng.Bernoulli(p_success);
  script.reward = !script.truncated() && success ? 1.0 : 0.0;
  return script;
}

}  // namespace libra::workload
