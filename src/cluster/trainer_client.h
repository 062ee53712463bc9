// TrainerClient: libra's trainer protocol, the small HTTP/JSON protocol through which libra drives
// a PyTorch trainer (docs/cluster.md, "Trainer protocol", is the specification; workers/trainer.py
// implements it on CPU). libra sends batches of token sequences with their behaviour logprobs, loss
// masks and GRPO advantages, and asks the trainer to save its weights, broadcast them to the
// engines, and let a replica join or leave data parallelism (the planner's role switches).
//
// Pure, like EngineClient: it builds HttpRequests and parses HttpResponses. Requests that libra
// itself got wrong (a mask shorter than its sequence) are kInvalidArgument before anything is
// sent; replies that are not exactly what the protocol says are kBackend naming the trainer, the
// request and what was wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/http.h"
#include "cluster/protocol.h"
#include "common/status.h"

namespace libra::cluster {

/// One trajectory to train on.
struct TrainSequence {
  /// The prompt (not trained on).
  std::vector<TokenId> prompt_ids;
  /// Everything after the prompt, in order: the model's turns and the tool outputs.
  std::vector<TokenId> completion_ids;
  /// The engine's logprob of each completion token (0 for tool tokens).
  std::vector<double> logprobs;
  /// 1 for the model's tokens (trained on), 0 for tool tokens.
  std::vector<uint8_t> loss_mask;
  /// The sequence's advantage (group-normalised reward), applied to each of its tokens.
  double advantage = 0;
  bool operator==(const TrainSequence&) const = default;
};

struct TrainStepRequest {
  int step = 0;
  std::vector<TrainSequence> sequences;
  /// Whole-request timeout; 0 means none. Default: 0.
  double timeout_s = 0;
};

/// What one train step did.
struct TrainStepResult {
  int step = 0;
  /// The version the trainer holds after the step.
  int version = 0;
  double loss = 0;
  /// Mean per-token KL to the reference policy.
  double kl = 0;
  /// Gradient norm before clipping.
  double grad_norm = 0;
  /// Tokens trained on (loss mask 1).
  int64_t tokens = 0;
  double seconds = 0;
  /// Optional members: the mean absolute difference between the trainer's log-probability of
  /// each trained token before the update and the engine's (`logprob_diff`), and the fraction
  /// of trained tokens whose ratio was clipped (`clip_fraction`).
  std::optional<double> logprob_diff{};
  std::optional<double> clip_fraction{};
  bool operator==(const TrainStepResult&) const = default;
};

struct SavedWeights {
  std::string path;
  int version = 0;
  double seconds = 0;
  bool operator==(const SavedWeights&) const = default;
};

struct BroadcastResult {
  int version = 0;
  int64_t tensors = 0;
  int64_t bytes = 0;
  double seconds = 0;
  bool operator==(const BroadcastResult&) const = default;
};

/// The replicas of the trainer's data parallelism.
struct Membership {
  std::vector<std::string> replicas;
  bool operator==(const Membership&) const = default;
};

struct TrainerMetrics {
  int version = 0;
  int64_t steps = 0;
  int64_t tokens = 0;
  int64_t sequences = 0;
  double train_seconds = 0;
  std::vector<std::string> replicas;
  /// The weight-update group the trainer is in, if any.
  std::optional<std::string> group_name;
  bool operator==(const TrainerMetrics&) const = default;
};

struct TrainerClientOptions {
  /// Timeout of every request but TrainStep. Default: 600 s.
  double control_timeout_s = 600;
};

/// Builds one trainer's requests and parses its replies. A value: cheap to copy, no I/O.
class TrainerClient {
 public:
  /// `base_url` is the trainer's root, e.g. "http://10.0.0.2:8100" (a trailing '/' is dropped).
  explicit TrainerClient(std::string base_url, TrainerClientOptions options = {});

  const std::string& base_url() const { return base_url_; }

  /// POST /train_step {step, sequences: [{prompt_ids, completion_ids, logprobs, loss_mask,
  /// advantage}]}. kInvalidArgument for an empty batch, an empty prompt or completion,
  /// completion_ids / logprobs / loss_mask of different lengths, a mask entry other than 0 or 1,
  /// or a batch with no token to train on.
  Result<HttpRequest> TrainStep(const TrainStepRequest& request) const;
  /// {step, version, loss, kl, grad_norm, tokens, seconds}; the step must echo the request's and
  /// tokens must equal the request's loss-mask total.
  Result<TrainStepResult> ParseTrainStep(const TrainStepRequest& request,
                                         const HttpResponse& response) const;

  /// POST /save_weights {path, version?}: writes the weights where engines load them from.
  /// With `version`, the trainer refuses (409) unless it holds that version.
  HttpRequest SaveWeights(const std::string& path, std::optional<int> version = {}) const;
  /// {path, version, seconds}; the path must be the one asked for.
  Result<SavedWeights> ParseSaveWeights(const std::string& path,
                                        const HttpResponse& response) const;

  /// POST /init_weight_update_group {master_address, master_port, world_size, group_name,
  /// backend}: the trainer joins the group as rank 0. Blocks until every engine has joined, so
  /// the engines' EngineClient::InitWeightUpdateGroup must be sent at the same time.
  HttpRequest InitWeightUpdateGroup(const WeightUpdateGroup& group) const;
  /// {success: true, tensors: [{name, dtype, shape}]}: the tensors every later broadcast sends,
  /// in order (the engines' UpdateWeightsFromDistributed needs them).
  Result<std::vector<TensorSpec>> ParseInitWeightUpdateGroup(const HttpResponse& response) const;

  /// POST /broadcast_weights {group_name, version?}: broadcasts every tensor from rank 0. Blocks
  /// until the engines have received them (send their UpdateWeightsFromDistributed at once).
  HttpRequest BroadcastWeights(const WeightUpdateGroup& group,
                               std::optional<int> version = {}) const;
  Result<BroadcastResult> ParseBroadcastWeights(const HttpResponse& response) const;

  /// POST /join {replica} and POST /leave {replica}: a replica joins or leaves the trainer's
  /// data parallelism.
  HttpRequest Join(const std::string& replica) const;
  HttpRequest Leave(const std::string& replica) const;
  /// {replicas: [...], dp_size}; dp_size must be the number of replicas.
  Result<Membership> ParseMembership(const HttpRequest& request,
                                     const HttpResponse& response) const;

  /// GET /health -> {status: "ok", version}.
  HttpRequest Health() const;
  /// The version the trainer holds.
  Result<int> ParseHealth(const HttpResponse& response) const;
  /// GET /metrics -> {version, steps, tokens, sequences, train_seconds, replicas, dp_size,
  /// group_name, last_step}.
  HttpRequest Metrics() const;
  Result<TrainerMetrics> ParseMetrics(const HttpResponse& response) const;

 private:
  // "trainer <METHOD> <url>", the `where` of every error.
  std::string Where(std::string_view method, std::string_view path) const;
  HttpRequest Post(std::string_view path, const JsonValue& body) const;

  std::string base_url_;
  TrainerClientOptions options_;
};

}  // namespace libra::cluster
