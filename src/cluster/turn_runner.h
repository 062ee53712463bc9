// TurnRunner: the trajectories of a cluster run. It keeps each trajectory's transcript as token
// ids (the prompt from the recipe's prompt_command, then the engine's tokens with their logprobs,
// trained on, and the tool's tokens, masked out), sends the whole transcript to the engine that
// serves the turn's instance and generates until a stop token, runs the tool a turn called
// (a sandboxed subprocess or an HTTP tool server) and scores a finished trajectory with the
// reward_command. Nothing is re-tokenised. A turn whose engine fails goes back to the
// coordinator (TurnFailed), which routes it again; nothing of it is kept. A turn that gets no
// reply or a server error (5xx) is sent again to the same engine after a backoff with another
// seed, up to [engine] turn_retries times; then the trajectory is dropped (TurnFailed with
// `dropped`, a fault on record), and a run that drops more than [engine] max_dropped_fraction of
// its trajectories stops.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cluster/engine_supervisor.h"
#include "cluster/runtime.h"
#include "cluster/sandbox.h"
#include "cluster/trainer_client.h"
#include "common/json.h"

namespace libra::cluster {

/// Trajectory ids from here on are evaluations' (cluster/evaluator.h), never trained on.
inline constexpr int64_t kFirstEvalTrajectory = int64_t{1} << 50;
/// "t12", or "eval-3" for an evaluation's trajectory: how calls and requests name it.
std::string TrajectoryName(TrajectoryId id);

class TurnRunner {
 public:
  /// REQUIRES: everything passed in outlives the runner.
  TurnRunner(Runtime& runtime, EngineSupervisor& engines, Sandbox& sandbox, uint64_t seed);
  TurnRunner(const TurnRunner&) = delete;
  TurnRunner& operator=(const TurnRunner&) = delete;

  /// Generates one turn (loading the prompt first); ends in TurnDone or TurnFailed.
  void StartTurn(const backend::StartTurn& turn);
  /// Runs the tool the trajectory's last turn called; ends in ToolDone.
  void RunTool(const backend::RunTool& tool);
  /// The transcripts of `trajectories` as the trainer's sequences, with their advantages, which
  /// are then forgotten here. kInternal for a trajectory without a transcript.
  Result<std::vector<TrainSequence>> TakeSequences(const std::vector<TrajectoryId>& trajectories,
                                                   const std::vector<double>& advantages);
  /// Forgets a trajectory that will not be trained on (an evaluation's), keeping its prompt.
  void Forget(TrajectoryId trajectory);
  /// The tokens engines generated past a stop token since the last call (cut, counted here), as
  /// an "overshoot" incident; nullopt when there were none.
  std::optional<backend::Incident> TakeOvershoot();

 private:
  struct Trajectory {
    int64_t prompt = 0;
    int sample = 0;
    int turns = 0;
    std::vector<TokenId> prompt_ids;
    std::vector<TokenId> completion;
    std::vector<double> logprobs;
    std::vector<uint8_t> mask;
    /// The tokens of its last model turn (the tool call, or the answer).
    std::vector<TokenId> last_turn;
  };
  struct Prompt {
    bool loaded = false;
    std::vector<TokenId> ids;
    std::vector<std::function<void()>> waiters;
  };

  void WithPrompt(int64_t prompt, std::function<void()> then);
  /// The turn failed (no reply, or a server error): sent again after a backoff, or the
  /// trajectory dropped once it has failed turn_retries + 1 times.
  void Retry(const backend::StartTurn& turn, const std::string& why);
  void Generate(const backend::StartTurn& turn);
  void OnGenerated(const backend::StartTurn& turn, int64_t engine_key, uint64_t attempt,
                   double started_at, const GenerateRequest& request,
                   Result<HttpResponse> response);
  void FinishTrajectory(const backend::StartTurn& turn, int64_t generated, workload::TurnEnd end,
                        double started_at);
  void RunHttpTool(const backend::RunTool& tool, double started);
  /// Appends a tool's output (its stdout or HTTP reply) to its trajectory, masked out, and
  /// reports the call; a call that could not run is a failed (or timed-out) one.
  void ToolFinished(TrajectoryId id, double started, const std::string& name,
                    Result<std::string> output, bool timed_out);
  JsonValue TaskInput(TrajectoryId id) const;
  /// The sandboxed call of `command` named `name`, with `input` on stdin.
  Result<SandboxCall> TaskCall(const std::string& name, const CommandTemplate& command,
                               const std::map<std::string, std::string>& values,
                               std::string input) const;

  Runtime& runtime_;
  EngineSupervisor& engines_;
  Sandbox& sandbox_;
  uint64_t seed_ = 0;
  std::map<TrajectoryId, Trajectory> trajectories_;
  std::map<int64_t, Prompt> prompts_;
  /// Failed attempts of each trajectory's turn in flight.
  std::map<TrajectoryId, int> failures_;
  /// Trajectories finished (scored) and dropped.
  int64_t finished_ = 0;
  int64_t dropped_ = 0;
  /// Turns that ran past a stop token, and the tokens cut, since TakeOvershoot.
  int64_t overshoot_turns_ = 0;
  int64_t overshoot_tokens_ = 0;
};

}  // namespace libra::cluster
