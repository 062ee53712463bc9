#include "cluster/engine_client.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr int64_t kMaxTokenId = std::numeric_limits<TokenId>::max();

std::string_view MemoryTagName(MemoryTag tag) {
  switch (tag) {
    case MemoryTag::kWeights:
      return "weights";
    case MemoryTag::kKvCache:
      return "kv_cache";
  }
  return "?";
}

// "?tags=a&tags=b" (with `separator` in front of the first), or "" for no tags.
std::string TagsQuery(const std::vector<MemoryTag>& tags, char separator) {
  std::string query;
  for (MemoryTag tag : tags) {
    query += query.empty() ? separator : '&';
    query += "tags=";
    query += MemoryTagName(tag);
  }
  return query;
}

JsonValue TagsBody(const std::vector<MemoryTag>& tags) {
  JsonValue body = JsonValue::MakeObject();
  if (!tags.empty()) {
    JsonValue::Array names;
    for (MemoryTag tag : tags) names.emplace_back(MemoryTagName(tag));
    body.Set("tags", JsonValue::MakeArray(std::move(names)));
  }
  return body;
}

Result<FinishReason> ToFinishReason(const ReplyReader& reader, const std::string& text,
                                    const std::string& path) {
  if (text == "stop") return FinishReason::kStop;
  if (text == "length") return FinishReason::kLength;
  if (text == "abort") return FinishReason::kAbort;
  return reader.Error(path + " is \"" + text + "\", not stop, length or abort");
}

// The checks both dialects share, once a reply has been read.
Status CheckGenerated(const GenerateRequest& request, const ReplyReader& reader,
                      const GenerateResult& result) {
  if (result.completion_tokens != static_cast<int64_t>(result.token_ids.size())) {
    return reader.Error(StrFormat("the engine counted %lld completion tokens but returned %zu",
                                  static_cast<long long>(result.completion_tokens),
                                  result.token_ids.size()));
  }
  if (result.prompt_tokens != static_cast<int64_t>(request.prompt.size())) {
    return reader.Error(
        StrFormat("the engine counted %lld prompt tokens but libra sent %zu (did it re-tokenise?)",
                  static_cast<long long>(result.prompt_tokens), request.prompt.size()));
  }
  if (result.token_ids.size() > static_cast<size_t>(request.max_tokens)) {
    return reader.Error(StrFormat("the engine returned %zu tokens, more than max_tokens %d",
                                  result.token_ids.size(), request.max_tokens));
  }
  return Status();
}

// An engine that does not stop at token ids goes on past them: what follows the first stop token
// of the request is cut (and counted); a reply that ends on a stop token is a stop.
void CutAtStop(const GenerateRequest& request, GenerateResult& result) {
  if (request.stop_token_ids.empty() || result.finish_reason == FinishReason::kAbort) return;
  for (size_t i = 0; i < result.token_ids.size(); ++i) {
    const TokenId id = result.token_ids[i];
    if (std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), id) ==
        request.stop_token_ids.end()) {
      continue;
    }
    result.overshoot_tokens = static_cast<int64_t>(result.token_ids.size() - (i + 1));
    result.token_ids.resize(i + 1);
    result.logprobs.resize(i + 1);
    result.finish_reason = FinishReason::kStop;
    result.matched_stop = id;
    return;
  }
}

// The id in a vLLM logprobs token written "token_id:<id>" (return_tokens_as_token_ids).
std::optional<int64_t> TokenIdOf(const JsonValue& token) {
  if (!token.is_string()) return std::nullopt;
  const std::string& text = token.as_string();
  constexpr std::string_view kPrefix = "token_id:";
  if (text.rfind(kPrefix, 0) != 0 || text.size() == kPrefix.size()) return std::nullopt;
  int64_t id = 0;
  for (size_t i = kPrefix.size(); i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || id > kMaxTokenId) return std::nullopt;
    id = id * 10 + (text[i] - '0');
  }
  return id;
}

// A vLLM reply without token_ids: the ids its logprobs name (an "id" per chat entry, or tokens
// written "token_id:<id>"), else an error: the engine cannot give libra what it generated.
Result<std::vector<TokenId>> TokenIdsOfLogprobs(const ReplyReader& reader, const std::string& at,
                                                const JsonValue& logprobs,
                                                const JsonValue::Array& entries, bool chat) {
  std::vector<TokenId> ids;
  const JsonValue* tokens = logprobs.Find("tokens");
  for (size_t i = 0; i < entries.size(); ++i) {
    std::optional<int64_t> id;
    if (chat) {
      if (const JsonValue* v = entries[i].Find("id"); v != nullptr && v->is_int()) {
        id = v->as_int();
      } else if (const JsonValue* t = entries[i].Find("token")) {
        id = TokenIdOf(*t);
      }
    } else if (tokens != nullptr && tokens->is_array() && i < tokens->as_array().size()) {
      id = TokenIdOf(tokens->as_array()[i]);
    }
    if (!id || *id < 0 || *id > kMaxTokenId) {
      return reader.Error(at +
                          ".token_ids is missing and its logprobs name no token ids: the "
                          "engine does not return the ids it generated (vLLM does with "
                          "return_token_ids, from 0.10.2)");
    }
    ids.push_back(static_cast<TokenId>(*id));
  }
  return ids;
}

}  // namespace

std::string GenerateResult::ToString() const {
  std::string text = StrFormat("%zu tokens, %s", token_ids.size(), NameOf(finish_reason).c_str());
  if (matched_stop) text += StrFormat(" (matched %d)", *matched_stop);
  return text + StrFormat(", prompt %lld", static_cast<long long>(prompt_tokens));
}

EngineClient::EngineClient(EngineDialect dialect, std::string base_url, EngineClientOptions options)
    : dialect_(dialect), base_url_(std::move(base_url)), options_(std::move(options)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

std::string EngineClient::Where(const HttpRequest& request) const {
  return NameOf(dialect_) + " engine " + request.method + " " + request.url;
}

HttpRequest EngineClient::Post(std::string_view path, const JsonValue& body) const {
  return PostJson(base_url_ + std::string(path), body, options_.control_timeout_s);
}

HttpRequest EngineClient::Generate(const GenerateRequest& request) const {
  if (dialect_ == EngineDialect::kVllm) {
    JsonValue body = JsonValue::MakeObject();
    if (!options_.model.empty()) body.Set("model", options_.model);
    body.Set("prompt", TokenIdsToJson(request.prompt))
        .Set("max_tokens", request.max_tokens)
        .Set("temperature", request.temperature)
        .Set("top_p", request.top_p)
        .Set("top_k", request.top_k)
        .Set("min_p", request.min_p)
        .Set("stop_token_ids", TokenIdsToJson(request.stop_token_ids));
    if (request.ignore_eos) body.Set("ignore_eos", true);
    if (request.seed) body.Set("seed", *request.seed);
    if (!request.request_id.empty()) body.Set("request_id", request.request_id);
    body.Set("logprobs", 0).Set("return_token_ids", true).Set("return_tokens_as_token_ids", true);
    return PostJson(base_url_ + "/v1/completions", body, request.timeout_s);
  }
  JsonValue params = JsonValue::MakeObject()
                         .Set("max_new_tokens", request.max_tokens)
                         .Set("temperature", request.temperature)
                         .Set("top_p", request.top_p)
                         .Set("top_k", request.top_k)
                         .Set("min_p", request.min_p)
                         .Set("stop_token_ids", TokenIdsToJson(request.stop_token_ids));
  if (request.ignore_eos) params.Set("ignore_eos", true);
  if (request.seed) params.Set("sampling_seed", *request.seed);
  JsonValue body = JsonValue::MakeObject()
                       .Set("input_ids", TokenIdsToJson(request.prompt))
                       .Set("sampling_params", std::move(params))
                       .Set("return_logprob", true);
  if (!request.request_id.empty()) body.Set("rid", request.request_id);
  return PostJson(base_url_ + "/generate", body, request.timeout_s);
}

Result<GenerateResult> EngineClient::ParseGenerate(const GenerateRequest& request,
                                                   const HttpResponse& response) const {
  HttpRequest sent;
  sent.url = base_url_ + (dialect_ == EngineDialect::kVllm ? "/v1/completions" : "/generate");
  const ReplyReader reader(Where(sent));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  LIBRA_ASSIGN_OR_RETURN(GenerateResult result, dialect_ == EngineDialect::kVllm
                                                    ? ParseVllm(request, reader, reply)
                                                    : ParseSglang(reader, reply));
  if (result.prompt_tokens < 0) result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  LIBRA_RETURN_IF_ERROR(CheckGenerated(request, reader, result));
  CutAtStop(request, result);
  return result;
}

Result<GenerateResult> EngineClient::ParseVllm(const GenerateRequest& request,
                                               const ReplyReader& reader,
                                               const JsonValue& reply) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue::Array* choices, reader.Array(reply, "", "choices"));
  if (choices->size() != 1) {
    return reader.Error(StrFormat("choices has %zu entries, expected 1", choices->size()));
  }
  const JsonValue& choice = choices->front();
  const std::string at = "choices[0]";
  if (!choice.is_object()) return reader.Error(at + " is " + choice.type_name());

  GenerateResult result;
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* logprobs, reader.Object(choice, at, "logprobs"));
  // The completions format (token_logprobs, tokens) or the chat format (content[]).
  const JsonValue* content = logprobs->Find("content");
  const bool chat = content != nullptr && content->is_array() && !logprobs->Find("token_logprobs");
  const std::string list = at + (chat ? ".logprobs.content" : ".logprobs.token_logprobs");
  LIBRA_ASSIGN_OR_RETURN(
      const JsonValue::Array* entries,
      reader.Array(*logprobs, at + ".logprobs", chat ? "content" : "token_logprobs"));
  for (size_t i = 0; i < entries->size(); ++i) {
    const JsonValue& entry = (*entries)[i];
    const std::string path = StrFormat("%s[%zu]", list.c_str(), i);
    if (chat && !entry.is_object()) return reader.Error(path + " is " + entry.type_name());
    LIBRA_ASSIGN_OR_RETURN(const JsonValue* value, chat ? reader.Member(entry, path, "logprob")
                                                        : Result<const JsonValue*>(&entry));
    LIBRA_ASSIGN_OR_RETURN(double logprob, reader.Logprob(*value, chat ? path + ".logprob" : path));
    result.logprobs.push_back(logprob);
  }
  if (const JsonValue* ids = choice.Find("token_ids"); ids != nullptr && !ids->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(result.token_ids, reader.TokenIds(*ids, at + ".token_ids"));
  } else {
    LIBRA_ASSIGN_OR_RETURN(result.token_ids,
                           TokenIdsOfLogprobs(reader, at, *logprobs, *entries, chat));
  }
  if (entries->size() != result.token_ids.size()) {
    return reader.Error(StrFormat("%s has %zu entries but %s.token_ids has %zu", list.c_str(),
                                  entries->size(), at.c_str(), result.token_ids.size()));
  }
  LIBRA_ASSIGN_OR_RETURN(std::string finish, reader.String(choice, at, "finish_reason"));
  LIBRA_ASSIGN_OR_RETURN(result.finish_reason,
                         ToFinishReason(reader, finish, at + ".finish_reason"));
  if (const JsonValue* stop = choice.Find("stop_reason"); stop && stop->is_int()) {
    LIBRA_ASSIGN_OR_RETURN(int64_t matched,
                           reader.IntIn(*stop, at + ".stop_reason", 0, kMaxTokenId));
    result.matched_stop = static_cast<TokenId>(matched);
  }
  if (const JsonValue* prompt = choice.Find("prompt_token_ids"); prompt && !prompt->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(std::vector<TokenId> echoed,
                           reader.TokenIds(*prompt, at + ".prompt_token_ids"));
    if (echoed != request.prompt) {
      return reader.Error(
          StrFormat("%s.prompt_token_ids (%zu tokens) differ from the prompt "
                    "libra sent (%zu tokens)",
                    at.c_str(), echoed.size(), request.prompt.size()));
    }
  }
  // usage is optional (the counts are checked when it is there).
  result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  result.completion_tokens = static_cast<int64_t>(result.token_ids.size());
  if (const JsonValue* usage = reply.Find("usage"); usage != nullptr && !usage->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(usage, reader.Object(reply, "", "usage"));
    LIBRA_ASSIGN_OR_RETURN(result.prompt_tokens, reader.Int(*usage, "usage", "prompt_tokens"));
    LIBRA_ASSIGN_OR_RETURN(result.completion_tokens,
                           reader.Int(*usage, "usage", "completion_tokens"));
  }
  return result;
}

Result<GenerateResult> EngineClient::ParseSglang(const ReplyReader& reader,
                                                 const JsonValue& reply) const {
  GenerateResult result;
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* meta, reader.Object(reply, "", "meta_info"));
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* finish,
                         reader.Object(*meta, "meta_info", "finish_reason"));
  LIBRA_ASSIGN_OR_RETURN(std::string type,
                         reader.String(*finish, "meta_info.finish_reason", "type"));
  LIBRA_ASSIGN_OR_RETURN(result.finish_reason,
                         ToFinishReason(reader, type, "meta_info.finish_reason.type"));
  if (const JsonValue* matched = finish->Find("matched"); matched && matched->is_int()) {
    LIBRA_ASSIGN_OR_RETURN(
        int64_t id, reader.IntIn(*matched, "meta_info.finish_reason.matched", 0, kMaxTokenId));
    result.matched_stop = static_cast<TokenId>(id);
  }
  // A request aborted before its prefill carries no logprobs at all: an empty partial result.
  static const JsonValue::Array kNone;
  const JsonValue* logprobs = meta->Find("output_token_logprobs");
  const bool none =
      result.finish_reason == FinishReason::kAbort && (logprobs == nullptr || logprobs->is_null());
  LIBRA_ASSIGN_OR_RETURN(const JsonValue::Array* pairs,
                         none ? Result<const JsonValue::Array*>(&kNone)
                              : reader.Array(*meta, "meta_info", "output_token_logprobs"));
  for (size_t i = 0; i < pairs->size(); ++i) {
    const std::string at = StrFormat("meta_info.output_token_logprobs[%zu]", i);
    const JsonValue& pair = (*pairs)[i];
    if (!pair.is_array() || pair.as_array().size() < 2) {
      return reader.Error(at + " is " + (pair.is_array() ? "a short array" : pair.type_name()) +
                          ", not [logprob, token_id, text]");
    }
    LIBRA_ASSIGN_OR_RETURN(double logprob, reader.Logprob(pair.as_array()[0], at + "[0]"));
    LIBRA_ASSIGN_OR_RETURN(int64_t id,
                           reader.IntIn(pair.as_array()[1], at + "[1]", 0, kMaxTokenId));
    result.logprobs.push_back(logprob);
    result.token_ids.push_back(static_cast<TokenId>(id));
  }
  if (const JsonValue* output = reply.Find("output_ids"); output && !output->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(std::vector<TokenId> ids, reader.TokenIds(*output, "output_ids"));
    if (ids.size() != result.token_ids.size()) {
      return reader.Error(
          StrFormat("meta_info.output_token_logprobs has %zu entries but "
                    "output_ids has %zu",
                    result.token_ids.size(), ids.size()));
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != result.token_ids[i]) {
        return reader.Error(
            StrFormat("output_ids[%zu] is %d but "
                      "meta_info.output_token_logprobs[%zu] names token %d",
                      i, ids[i], i, result.token_ids[i]));
      }
    }
  }
  // The counts are optional (checked when given).
  result.completion_tokens = static_cast<int64_t>(result.token_ids.size());
  if (const JsonValue* n = meta->Find("prompt_tokens"); n != nullptr && !n->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(result.prompt_tokens, reader.Int(*meta, "meta_info", "prompt_tokens"));
  } else {
    result.prompt_tokens = -1;
  }
  if (const JsonValue* n = meta->Find("completion_tokens"); n != nullptr && !n->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(result.completion_tokens,
                           reader.Int(*meta, "meta_info", "completion_tokens"));
  }
  if (const JsonValue* version = meta->Find("weight_version"); version && !version->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(result.weight_version,
                           reader.String(*meta, "meta_info", "weight_version"));
  }
  return result;
}

HttpRequest EngineClient::Health() const {
  return Get(base_url_ + "/health", options_.control_timeout_s);
}

HttpRequest EngineClient::Abort(std::string_view request_id) const {
  if (dialect_ == EngineDialect::kVllm) {
    return Post(
        "/abort_requests",
        JsonValue::MakeObject().Set("request_ids", JsonValue::MakeArray({JsonValue(request_id)})));
  }
  return Post("/abort_request", JsonValue::MakeObject().Set("rid", request_id));
}

HttpRequest EngineClient::AbortAll() const {
  if (dialect_ == EngineDialect::kVllm) return Post("/abort_requests", JsonValue::MakeObject());
  return Post("/abort_request", JsonValue::MakeObject().Set("rid", "").Set("abort_all", true));
}

HttpRequest EngineClient::ReleaseMemory(const std::vector<MemoryTag>& tags) const {
  if (dialect_ == EngineDialect::kVllm) {
    HttpRequest request;
    request.url =
        base_url_ + StrFormat("/sleep?level=%d", options_.vllm_sleep_level) + TagsQuery(tags, '&');
    request.timeout_s = options_.control_timeout_s;
    return request;
  }
  return Post("/release_memory_occupation", TagsBody(tags));
}

HttpRequest EngineClient::ResumeMemory(const std::vector<MemoryTag>& tags) const {
  if (dialect_ == EngineDialect::kVllm) {
    HttpRequest request;
    request.url = base_url_ + "/wake_up" + TagsQuery(tags, '?');
    request.timeout_s = options_.control_timeout_s;
    return request;
  }
  return Post("/resume_memory_occupation", TagsBody(tags));
}

Result<HttpRequest> EngineClient::UpdateWeightsFromDisk(const std::string& path,
                                                        int version) const {
  if (dialect_ == EngineDialect::kVllm) {
    if (options_.model_path.empty() || path != options_.model_path) {
      return Status::InvalidArgument(
          "vllm engine " + base_url_ +
          ": vLLM reloads weights only from the model directory it "
          "was launched with (" +
          (options_.model_path.empty() ? std::string("not configured") : options_.model_path) +
          "), not from " + path + "; save the trainer's weights there");
    }
    return Post("/collective_rpc", JsonValue::MakeObject().Set("method", "reload_weights"));
  }
  return Post("/update_weights_from_disk", JsonValue::MakeObject()
                                               .Set("model_path", path)
                                               .Set("weight_version", std::to_string(version)));
}

HttpRequest EngineClient::InitWeightUpdateGroup(const WeightUpdateGroup& group,
                                                int rank_offset) const {
  JsonValue info = JsonValue::MakeObject()
                       .Set("master_address", group.master_address)
                       .Set("master_port", group.master_port)
                       .Set("rank_offset", rank_offset)
                       .Set("world_size", group.world_size);
  if (dialect_ == EngineDialect::kVllm) {
    return Post("/init_weight_transfer_engine",
                JsonValue::MakeObject().Set("init_info", std::move(info)));
  }
  info.Set("group_name", group.group_name).Set("backend", group.backend);
  return Post("/init_weights_update_group", info);
}

HttpRequest EngineClient::UpdateWeightsFromDistributed(const WeightUpdateGroup& group,
                                                       const std::vector<TensorSpec>& tensors,
                                                       int version) const {
  JsonValue::Array names;
  JsonValue::Array dtypes;
  JsonValue::Array shapes;
  for (const TensorSpec& tensor : tensors) {
    names.emplace_back(tensor.name);
    dtypes.emplace_back(tensor.dtype);
    JsonValue::Array shape;
    for (int64_t size : tensor.shape) shape.emplace_back(size);
    shapes.push_back(JsonValue::MakeArray(std::move(shape)));
  }
  if (dialect_ == EngineDialect::kVllm) {
    JsonValue info = JsonValue::MakeObject()
                         .Set("names", JsonValue::MakeArray(std::move(names)))
                         .Set("dtype_names", JsonValue::MakeArray(std::move(dtypes)))
                         .Set("shapes", JsonValue::MakeArray(std::move(shapes)));
    return Post("/update_weights", JsonValue::MakeObject().Set("update_info", std::move(info)));
  }
  return Post("/update_weights_from_distributed",
              JsonValue::MakeObject()
                  .Set("names", JsonValue::MakeArray(std::move(names)))
                  .Set("dtypes", JsonValue::MakeArray(std::move(dtypes)))
                  .Set("shapes", JsonValue::MakeArray(std::move(shapes)))
                  .Set("group_name", group.group_name)
                  .Set("weight_version", std::to_string(version)));
}

Result<HttpRequest> EngineClient::DestroyWeightUpdateGroup(const WeightUpdateGroup& group) const {
  if (dialect_ == EngineDialect::kVllm) {
    return Status::InvalidArgument("vllm engine " + base_url_ +
                                   ": vLLM has no endpoint to leave a weight update group; "
                                   "initialising a new group replaces it");
  }
  return Post("/destroy_weights_update_group",
              JsonValue::MakeObject().Set("group_name", group.group_name));
}

Status EngineClient::ParseAck(const HttpRequest& request, const HttpResponse& response) const {
  const ReplyReader reader(Where(request));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.Parse(response));
  if (const JsonValue* success = reply.Find("success");
      success && success->is_bool() && !success->as_bool()) {
    return reader.Error("the engine refused: " + ErrorMessageOf(response.body));
  }
  return Status();
}

}  // namespace libra::cluster
