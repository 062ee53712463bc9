// EngineClient: what libra says to a rollout engine and how it reads the answers, in the two
// dialects it speaks: vLLM's OpenAI-compatible server (plus its dev-mode RL endpoints) and
// SGLang's native server. Pure: it builds HttpRequests and parses HttpResponses; the transport
// (http_transport.h) sends them. docs/cluster.md ("Engines") lists the endpoints and launch flags.
//
// Generation is token-in, token-out: the prompt goes as token ids, the reply's token ids and the
// logprob of each sampled token come back unchanged, so a multi-turn transcript is never
// re-tokenised. A reply that is not exactly what was asked for (a missing or mistyped field, as
// many logprobs as tokens, more tokens than max_tokens, another prompt length than was sent, an
// error status) is kBackend naming the engine, the request and what was wrong; never a crash.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/http.h"
#include "cluster/protocol.h"
#include "common/enum_names.h"
#include "common/status.h"

namespace libra::cluster {

enum class EngineDialect {
  /// `vllm serve`: POST /v1/completions with token-id prompts; dev-mode endpoints
  /// (VLLM_SERVER_DEV_MODE=1) for abort, sleep / wake_up and weight updates.
  kVllm,
  /// `python -m sglang.launch_server`: POST /generate and its RL endpoints.
  kSglang,
};

constexpr std::array<EnumName<EngineDialect>, 2> EnumTable(EngineDialect) {
  return {{{EngineDialect::kVllm, "vllm"}, {EngineDialect::kSglang, "sglang"}}};
}

/// Why generation stopped.
enum class FinishReason {
  /// A stop token (or the model's EOS) was generated; it is the last returned token.
  kStop,
  /// max_tokens were generated.
  kLength,
  /// The request was aborted; the tokens generated until then are returned.
  kAbort,
};
constexpr std::array<EnumName<FinishReason>, 3> EnumTable(FinishReason) {
  return {{{FinishReason::kStop, "stop"},
           {FinishReason::kLength, "length"},
           {FinishReason::kAbort, "abort"}}};
}

/// One generation request: continue `prompt` by up to max_tokens tokens.
struct GenerateRequest {
  /// The context so far, as token ids. REQUIRES: not empty.
  std::vector<TokenId> prompt;
  /// Default: 16.
  int max_tokens = 16;
  /// 0 is greedy. Default: 1.
  double temperature = 1.0;
  /// Default: 1 (no nucleus cut).
  double top_p = 1.0;
  /// Sample among the k likeliest tokens; -1: all (vLLM and SGLang both read -1 so). Default: -1.
  int top_k = -1;
  /// Drop tokens less likely than min_p times the likeliest; 0: none. Default: 0.
  double min_p = 0;
  /// Tokens that end the turn (e.g. the end of a tool call), besides the model's EOS.
  std::vector<TokenId> stop_token_ids;
  /// Keep generating past the model's EOS. Default: false.
  bool ignore_eos = false;
  /// Sampling seed, for reproducible samples. Default: the engine's.
  std::optional<int64_t> seed;
  /// The id Abort() names; empty lets the engine choose one (the request then cannot be aborted
  /// alone). Default: "".
  std::string request_id;
  /// Whole-request timeout; 0 means none. Default: 0.
  double timeout_s = 0;
  bool operator==(const GenerateRequest&) const = default;
};

/// What the engine generated.
struct GenerateResult {
  /// The generated token ids, the matched stop token included.
  std::vector<TokenId> token_ids;
  /// The logprob of each generated token (as many as token_ids), as the engine sampled it.
  std::vector<double> logprobs;
  FinishReason finish_reason = FinishReason::kStop;
  /// The stop token that ended generation, when the engine names it (finish_reason kStop).
  std::optional<TokenId> matched_stop;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  /// The weights' version label (SGLang's weight_version); empty when the engine gives none.
  std::string weight_version;
  /// Tokens the engine generated past a stop token of the request (it did not stop at token
  /// ids): cut here, never trained on or sent again.
  int64_t overshoot_tokens = 0;
  bool operator==(const GenerateResult&) const = default;
  /// "5 tokens, stop (matched 2), prompt 12", for test messages.
  std::string ToString() const;
};

/// GPU memory an engine can release for training and take back.
enum class MemoryTag { kWeights, kKvCache };

struct EngineClientOptions {
  /// vLLM: the served model name, sent as "model" (empty: not sent, and vLLM serves its only
  /// model). Default: "".
  std::string model;
  /// vLLM: the model directory the engine was launched with. vLLM reloads weights only from
  /// there, so UpdateWeightsFromDisk must name it (the trainer saves into it). Default: "".
  std::string model_path;
  /// vLLM: the sleep level of ReleaseMemory. 1 offloads the weights to host memory (waking is
  /// quick); 2 discards them, and they must be reloaded (UpdateWeightsFromDisk or a
  /// distributed update) before generating again. Default: 1.
  int vllm_sleep_level = 1;
  /// Timeout of every request but Generate (weight updates can take minutes). Default: 600 s.
  double control_timeout_s = 600;
  bool operator==(const EngineClientOptions&) const = default;
};

/// Builds one engine's requests and parses its replies. A value: cheap to copy, no I/O.
class EngineClient {
 public:
  /// `base_url` is the engine's root, e.g. "http://10.0.0.5:30000" (a trailing '/' is dropped).
  EngineClient(EngineDialect dialect, std::string base_url, EngineClientOptions options = {});

  EngineDialect dialect() const { return dialect_; }
  const std::string& base_url() const { return base_url_; }
  const EngineClientOptions& options() const { return options_; }

  /// Every sampling parameter is sent, so that no engine default changes what is sampled.
  /// vLLM: POST /v1/completions {model?, prompt: [ids], max_tokens, temperature, top_p, top_k,
  /// min_p, stop_token_ids, ignore_eos?, seed?, request_id?, logprobs: 0, return_token_ids: true,
  /// return_tokens_as_token_ids: true}. SGLang: POST /generate {input_ids, sampling_params:
  /// {max_new_tokens, temperature, top_p, top_k, min_p, stop_token_ids, ignore_eos?,
  /// sampling_seed?}, return_logprob: true, rid?}.
  HttpRequest Generate(const GenerateRequest& request) const;
  /// The reply to Generate(request). vLLM: the ids from choices[0].token_ids, else from
  /// logprobs.content[i].id or logprobs.tokens[i] written "token_id:<id>"; the logprobs from
  /// logprobs.token_logprobs, else logprobs.content[i].logprob (the chat format); .finish_reason,
  /// .stop_reason and usage when present. SGLang: meta_info.output_token_logprobs as [logprob,
  /// id, text?] (checked against output_ids when present), meta_info.finish_reason.type,
  /// prompt_tokens and completion_tokens when present, weight_version. Tokens after the first
  /// stop token of the request are cut (overshoot_tokens), and a reply ending on one is a stop.
  Result<GenerateResult> ParseGenerate(const GenerateRequest& request,
                                       const HttpResponse& response) const;

  /// GET /health (vLLM: the process is alive; SGLang: the server is up). Parse with ParseAck.
  HttpRequest Health() const;
  /// Aborts one request (its GenerateRequest::request_id); the request then returns what it
  /// generated with finish kAbort. vLLM: POST /abort_requests {request_ids: [id]} (dev mode);
  /// SGLang: POST /abort_request {rid}.
  HttpRequest Abort(std::string_view request_id) const;
  /// Aborts every request. vLLM: POST /abort_requests {}; SGLang: POST /abort_request
  /// {rid: "", abort_all: true}.
  HttpRequest AbortAll() const;
  /// Frees GPU memory for training: `tags`, or all when empty. vLLM: POST /sleep?level=N, with
  /// &tags=... when given (it aborts running requests); SGLang: POST /release_memory_occupation
  /// {tags?} (needs --enable-memory-saver; refused while requests run).
  HttpRequest ReleaseMemory(const std::vector<MemoryTag>& tags = {}) const;
  /// Takes the memory back (weights first, then the KV cache, avoids a peak during a weight
  /// update). vLLM: POST /wake_up[?tags=...]; SGLang: POST /resume_memory_occupation {tags?}.
  HttpRequest ResumeMemory(const std::vector<MemoryTag>& tags = {}) const;
  /// Loads the weights saved at `path`, labelled `version`. SGLang: POST
  /// /update_weights_from_disk {model_path, weight_version}. vLLM: POST /collective_rpc
  /// {method: "reload_weights"}, which rereads the launch directory: kInvalidArgument unless
  /// `path` is options().model_path.
  Result<HttpRequest> UpdateWeightsFromDisk(const std::string& path, int version) const;
  /// Joins the trainer's weight-update group as ranks [rank_offset, rank_offset + GPUs); blocks
  /// until every member has joined, so all members must be asked at once. vLLM: POST
  /// /init_weight_transfer_engine {init_info: {master_address, master_port, rank_offset,
  /// world_size}}; SGLang: POST /init_weights_update_group {master_address, master_port,
  /// rank_offset, world_size, group_name, backend}.
  HttpRequest InitWeightUpdateGroup(const WeightUpdateGroup& group, int rank_offset) const;
  /// Receives `tensors` broadcast by the trainer (rank 0) in that order; blocks until the
  /// broadcast is done, so it must be sent while the trainer broadcasts. vLLM: POST
  /// /update_weights {update_info: {names, dtype_names, shapes}} (vLLM takes no version label);
  /// SGLang: POST /update_weights_from_distributed {names, dtypes, shapes, group_name,
  /// weight_version}.
  HttpRequest UpdateWeightsFromDistributed(const WeightUpdateGroup& group,
                                           const std::vector<TensorSpec>& tensors,
                                           int version) const;
  /// Leaves the group. SGLang: POST /destroy_weights_update_group {group_name}. vLLM has no such
  /// endpoint (a new InitWeightUpdateGroup replaces the group): kInvalidArgument.
  Result<HttpRequest> DestroyWeightUpdateGroup(const WeightUpdateGroup& group) const;

  /// The reply to any request above but Generate: OK for a 2xx status unless the body is an
  /// object saying {"success": false} (SGLang's weight updates); else kBackend naming the engine,
  /// the request and the engine's message.
  Status ParseAck(const HttpRequest& request, const HttpResponse& response) const;

 private:
  // "<dialect> engine <METHOD> <url>", the `where` of every error.
  std::string Where(const HttpRequest& request) const;
  HttpRequest Post(std::string_view path, const JsonValue& body) const;
  Result<GenerateResult> ParseVllm(const GenerateRequest& request, const ReplyReader& reader,
                                   const JsonValue& reply) const;
  Result<GenerateResult> ParseSglang(const ReplyReader& reader, const JsonValue& reply) const;

  EngineDialect dialect_;
  std::string base_url_;
  EngineClientOptions options_;
};

}  // namespace libra::cluster
