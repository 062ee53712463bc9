// SimpleWorkload: the stand-in trajectory generator ("simple"). Per prompt a latent difficulty
// shared by its group sets the chance of success; per turn a log-normal number of tokens; each
// turn ends in a tool call with a fixed probability. Tool outcomes carry no information about the
// rest of the trajectory. The agentic workload model replaces it (issue 4).
#pragma once

#include "workload/workload.h"

namespace libra::workload {

class SimpleWorkload : public Workload {
 public:
  SimpleWorkload(const recipe::WorkloadSpec& spec, uint64_t seed) : spec_(spec), seed_(seed) {}

  PromptInfo Prompt(int64_t index) const override;
  TrajectoryScript Script(int64_t prompt, int sample, int policy_version) const override;

 private:
  recipe::WorkloadSpec spec_;
  uint64_t seed_;
};

}  // namespace libra::workload
