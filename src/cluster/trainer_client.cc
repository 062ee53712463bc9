#include "cluster/trainer_client.h"

#include <limits>
#include <utility>

#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

Status InvalidSequence(size_t index, const std::string& what) {
  return Status::InvalidArgument(StrFormat("train step: sequences[%zu]: ", index) + what);
}

// Member `key` of `object` as an int >= 0 (versions, steps).
Result<int> SmallInt(const ReplyReader& reader, const JsonValue& object, std::string_view key) {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, reader.Member(object, "", key));
  LIBRA_ASSIGN_OR_RETURN(int64_t value, reader.IntIn(*member, std::string(key), 0, kMaxInt));
  return static_cast<int>(value);
}

// Member `key` of `object` as a count (an integer >= 0).
Result<int64_t> Count(const ReplyReader& reader, const JsonValue& object, std::string_view key) {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, reader.Member(object, "", key));
  return reader.IntIn(*member, std::string(key), 0, std::numeric_limits<int64_t>::max());
}

// Member `key` of `object` as a number >= 0 (seconds, norms).
Result<double> NonNegative(const ReplyReader& reader, const JsonValue& object,
                           std::string_view key) {
  LIBRA_ASSIGN_OR_RETURN(double value, reader.Number(object, "", key));
  if (value < 0) {
    return reader.Error(StrFormat("%s is %g, below 0", std::string(key).c_str(), value));
  }
  return value;
}

Result<std::vector<std::string>> Strings(const ReplyReader& reader, const JsonValue& object,
                                         std::string_view key) {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue::Array* items, reader.Array(object, "", key));
  std::vector<std::string> strings;
  for (size_t i = 0; i < items->size(); ++i) {
    if (!(*items)[i].is_string()) {
      return reader.Error(StrFormat("%s[%zu] is %s, not a string", std::string(key).c_str(), i,
                                    (*items)[i].type_name()));
    }
    strings.push_back((*items)[i].as_string());
  }
  return strings;
}

}  // namespace

TrainerClient::TrainerClient(std::string base_url, TrainerClientOptions options)
    : base_url_(std::move(base_url)), options_(options) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

std::string TrainerClient::Where(std::string_view method, std::string_view path) const {
  return "trainer " + std::string(method) + " " + base_url_ + std::string(path);
}

HttpRequest TrainerClient::Post(std::string_view path, const JsonValue& body) const {
  return PostJson(base_url_ + std::string(path), body, options_.control_timeout_s);
}

Result<HttpRequest> TrainerClient::TrainStep(const TrainStepRequest& request) const {
  if (request.sequences.empty()) {
    return Status::InvalidArgument("train step: the batch has no sequence");
  }
  int64_t trained = 0;
  JsonValue::Array sequences;
  for (size_t i = 0; i < request.sequences.size(); ++i) {
    const TrainSequence& sequence = request.sequences[i];
    if (sequence.prompt_ids.empty()) return InvalidSequence(i, "prompt_ids is empty");
    if (sequence.completion_ids.empty()) return InvalidSequence(i, "completion_ids is empty");
    if (sequence.logprobs.size() != sequence.completion_ids.size() ||
        sequence.loss_mask.size() != sequence.completion_ids.size()) {
      return InvalidSequence(
          i, StrFormat("completion_ids, logprobs and loss_mask have %zu, %zu and %zu entries",
                       sequence.completion_ids.size(), sequence.logprobs.size(),
                       sequence.loss_mask.size()));
    }
    JsonValue::Array logprobs;
    JsonValue::Array mask;
    for (size_t t = 0; t < sequence.completion_ids.size(); ++t) {
      if (sequence.loss_mask[t] > 1) {
        return InvalidSequence(
            i, StrFormat("loss_mask[%zu] is %d, not 0 or 1", t, sequence.loss_mask[t]));
      }
      trained += sequence.loss_mask[t];
      logprobs.emplace_back(sequence.logprobs[t]);
      mask.emplace_back(sequence.loss_mask[t]);
    }
    sequences.push_back(JsonValue::MakeObject()
                            .Set("prompt_ids", TokenIdsToJson(sequence.prompt_ids))
                            .Set("completion_ids", TokenIdsToJson(sequence.completion_ids))
                            .Set("logprobs", JsonValue::MakeArray(std::move(logprobs)))
                            .Set("loss_mask", JsonValue::MakeArray(std::move(mask)))
                            .Set("advantage", sequence.advantage));
  }
  if (trained == 0) {
    return Status::InvalidArgument("train step: no token has loss_mask 1, nothing to train on");
  }
  return PostJson(base_url_ + "/train_step",
                  JsonValue::MakeObject()
                      .Set("step", request.step)
                      .Set("sequences", JsonValue::MakeArray(std::move(sequences))),
                  request.timeout_s);
}

Result<TrainStepResult> TrainerClient::ParseTrainStep(const TrainStepRequest& request,
                                                      const HttpResponse& response) const {
  const ReplyReader reader(Where("POST", "/train_step"));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  TrainStepResult result;
  LIBRA_ASSIGN_OR_RETURN(result.step, SmallInt(reader, reply, "step"));
  LIBRA_ASSIGN_OR_RETURN(result.version, SmallInt(reader, reply, "version"));
  LIBRA_ASSIGN_OR_RETURN(result.loss, reader.Number(reply, "", "loss"));
  LIBRA_ASSIGN_OR_RETURN(result.kl, reader.Number(reply, "", "kl"));
  LIBRA_ASSIGN_OR_RETURN(result.grad_norm, NonNegative(reader, reply, "grad_norm"));
  LIBRA_ASSIGN_OR_RETURN(result.tokens, Count(reader, reply, "tokens"));
  LIBRA_ASSIGN_OR_RETURN(result.seconds, NonNegative(reader, reply, "seconds"));
  for (auto [key, out] : {std::pair{"logprob_diff", &result.logprob_diff},
                          std::pair{"clip_fraction", &result.clip_fraction}}) {
    if (const JsonValue* v = reply.Find(key); v != nullptr && !v->is_null()) {
      LIBRA_ASSIGN_OR_RETURN(*out, NonNegative(reader, reply, key));
    }
  }
  if (result.clip_fraction && *result.clip_fraction > 1) {
    return reader.Error(StrFormat("clip_fraction is %g, more than 1", *result.clip_fraction));
  }
  if (result.step != request.step) {
    return reader.Error(
        StrFormat("the reply is for step %d, libra sent step %d", result.step, request.step));
  }
  int64_t trained = 0;
  for (const TrainSequence& sequence : request.sequences) {
    for (uint8_t bit : sequence.loss_mask) trained += bit;
  }
  if (result.tokens != trained) {
    return reader.Error(StrFormat("the trainer trained on %lld tokens, libra sent %lld",
                                  static_cast<long long>(result.tokens),
                                  static_cast<long long>(trained)));
  }
  return result;
}

HttpRequest TrainerClient::SaveWeights(const std::string& path, std::optional<int> version) const {
  JsonValue body = JsonValue::MakeObject().Set("path", path);
  if (version) body.Set("version", *version);
  return Post("/save_weights", body);
}

Result<SavedWeights> TrainerClient::ParseSaveWeights(const std::string& path,
                                                     const HttpResponse& response) const {
  const ReplyReader reader(Where("POST", "/save_weights"));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  SavedWeights saved;
  LIBRA_ASSIGN_OR_RETURN(saved.path, reader.String(reply, "", "path"));
  LIBRA_ASSIGN_OR_RETURN(saved.version, SmallInt(reader, reply, "version"));
  LIBRA_ASSIGN_OR_RETURN(saved.seconds, NonNegative(reader, reply, "seconds"));
  if (saved.path != path) {
    return reader.Error("the trainer saved to " + saved.path + ", libra asked for " + path);
  }
  return saved;
}

HttpRequest TrainerClient::InitWeightUpdateGroup(const WeightUpdateGroup& group) const {
  return Post("/init_weight_update_group", JsonValue::MakeObject()
                                               .Set("master_address", group.master_address)
                                               .Set("master_port", group.master_port)
                                               .Set("world_size", group.world_size)
                                               .Set("group_name", group.group_name)
                                               .Set("backend", group.backend));
}

Result<std::vector<TensorSpec>> TrainerClient::ParseInitWeightUpdateGroup(
    const HttpResponse& response) const {
  const ReplyReader reader(Where("POST", "/init_weight_update_group"));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  LIBRA_ASSIGN_OR_RETURN(bool success, reader.Bool(reply, "", "success"));
  if (!success) return reader.Error("the trainer refused: " + ErrorMessageOf(response.body));
  LIBRA_ASSIGN_OR_RETURN(const JsonValue::Array* tensors, reader.Array(reply, "", "tensors"));
  if (tensors->empty()) return reader.Error("tensors is empty: nothing to broadcast");
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const std::string at = StrFormat("tensors[%zu]", i);
    const JsonValue& tensor = (*tensors)[i];
    if (!tensor.is_object()) return reader.Error(at + " is " + tensor.type_name());
    TensorSpec spec;
    LIBRA_ASSIGN_OR_RETURN(spec.name, reader.String(tensor, at, "name"));
    LIBRA_ASSIGN_OR_RETURN(spec.dtype, reader.String(tensor, at, "dtype"));
    if (spec.name.empty() || spec.dtype.empty()) {
      return reader.Error(at + " has an empty name or dtype");
    }
    LIBRA_ASSIGN_OR_RETURN(const JsonValue::Array* shape, reader.Array(tensor, at, "shape"));
    for (size_t d = 0; d < shape->size(); ++d) {
      LIBRA_ASSIGN_OR_RETURN(int64_t size,
                             reader.IntIn((*shape)[d], StrFormat("%s.shape[%zu]", at.c_str(), d), 0,
                                          std::numeric_limits<int64_t>::max()));
      spec.shape.push_back(size);
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

HttpRequest TrainerClient::BroadcastWeights(const WeightUpdateGroup& group,
                                            std::optional<int> version) const {
  JsonValue body = JsonValue::MakeObject().Set("group_name", group.group_name);
  if (version) body.Set("version", *version);
  return Post("/broadcast_weights", body);
}

Result<BroadcastResult> TrainerClient::ParseBroadcastWeights(const HttpResponse& response) const {
  const ReplyReader reader(Where("POST", "/broadcast_weights"));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  BroadcastResult result;
  LIBRA_ASSIGN_OR_RETURN(result.version, SmallInt(reader, reply, "version"));
  LIBRA_ASSIGN_OR_RETURN(result.tensors, Count(reader, reply, "tensors"));
  LIBRA_ASSIGN_OR_RETURN(result.bytes, Count(reader, reply, "bytes"));
  LIBRA_ASSIGN_OR_RETURN(result.seconds, NonNegative(reader, reply, "seconds"));
  return result;
}

HttpRequest TrainerClient::Join(const std::string& replica) const {
  return Post("/join", JsonValue::MakeObject().Set("replica", replica));
}

HttpRequest TrainerClient::Leave(const std::string& replica) const {
  return Post("/leave", JsonValue::MakeObject().Set("replica", replica));
}

Result<Membership> TrainerClient::ParseMembership(const HttpRequest& request,
                                                  const HttpResponse& response) const {
  const std::string path =
      StartsWith(request.url, base_url_) ? request.url.substr(base_url_.size()) : request.url;
  const ReplyReader reader(Where(request.method, path));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  Membership membership;
  LIBRA_ASSIGN_OR_RETURN(membership.replicas, Strings(reader, reply, "replicas"));
  LIBRA_ASSIGN_OR_RETURN(int64_t dp_size, Count(reader, reply, "dp_size"));
  if (dp_size != static_cast<int64_t>(membership.replicas.size())) {
    return reader.Error(StrFormat("dp_size is %lld but %zu replicas are listed",
                                  static_cast<long long>(dp_size), membership.replicas.size()));
  }
  return membership;
}

HttpRequest TrainerClient::Health() const {
  return Get(base_url_ + "/health", options_.control_timeout_s);
}

Result<int> TrainerClient::ParseHealth(const HttpResponse& response) const {
  const ReplyReader reader(Where("GET", "/health"));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  LIBRA_ASSIGN_OR_RETURN(std::string status, reader.String(reply, "", "status"));
  if (status != "ok") return reader.Error("status is \"" + status + "\", not \"ok\"");
  return SmallInt(reader, reply, "version");
}

HttpRequest TrainerClient::Metrics() const {
  return Get(base_url_ + "/metrics", options_.control_timeout_s);
}

Result<TrainerMetrics> TrainerClient::ParseMetrics(const HttpResponse& response) const {
  const ReplyReader reader(Where("GET", "/metrics"));
  LIBRA_ASSIGN_OR_RETURN(JsonValue reply, reader.ParseObject(response));
  TrainerMetrics metrics;
  LIBRA_ASSIGN_OR_RETURN(metrics.version, SmallInt(reader, reply, "version"));
  LIBRA_ASSIGN_OR_RETURN(metrics.steps, Count(reader, reply, "steps"));
  LIBRA_ASSIGN_OR_RETURN(metrics.tokens, Count(reader, reply, "tokens"));
  LIBRA_ASSIGN_OR_RETURN(metrics.sequences, Count(reader, reply, "sequences"));
  LIBRA_ASSIGN_OR_RETURN(metrics.train_seconds, NonNegative(reader, reply, "train_seconds"));
  LIBRA_ASSIGN_OR_RETURN(metrics.replicas, Strings(reader, reply, "replicas"));
  if (const JsonValue* group = reply.Find("group_name"); group && !group->is_null()) {
    LIBRA_ASSIGN_OR_RETURN(std::string name, reader.String(reply, "", "group_name"));
    metrics.group_name = std::move(name);
  }
  return metrics;
}

}  // namespace libra::cluster
