// What libra's protocol clients (engine_client.h: vLLM and SGLang; trainer_client.h: libra's
// trainer protocol) share: token ids, the tensors and the rank layout of a distributed weight
// update, and ReplyReader, which reads a JSON reply strictly and says exactly what is wrong with
// it. Values and pure functions only: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/http.h"
#include "common/json.h"
#include "common/status.h"

namespace libra::cluster {

/// A token id as engines and trainers exchange it. Token ids travel end to end: libra never
/// re-tokenises a transcript, it appends the ids the engine generated and the tool produced.
using TokenId = int32_t;

/// One tensor of a distributed weight update, in broadcast order.
struct TensorSpec {
  std::string name;
  /// "float32", "bfloat16", ...
  std::string dtype;
  std::vector<int64_t> shape;
  bool operator==(const TensorSpec&) const = default;
};

/// The process group through which the trainer broadcasts weights to engines. The trainer is
/// rank 0; every engine GPU is one more rank (see WeightUpdateRanks).
struct WeightUpdateGroup {
  /// Where rank 0 (the trainer) listens for the group's rendezvous.
  std::string master_address;
  int master_port = 0;
  /// 1 + the engines' GPUs.
  int world_size = 0;
  std::string group_name = "weight_update_group";
  /// "nccl" between GPUs; "gloo" for the CPU workers. vLLM takes it from its launch flags.
  /// Default: "nccl".
  std::string backend = "nccl";
  bool operator==(const WeightUpdateGroup&) const = default;
};

/// The ranks of a weight-update group.
struct WeightUpdateRanks {
  int world_size = 0;
  /// The first rank of each engine, in the engines' order.
  std::vector<int> rank_offsets;
  bool operator==(const WeightUpdateRanks&) const = default;
};

/// Lays out the group for engines using `gpus_per_engine[i]` GPUs each (TP x PP): the trainer is
/// rank 0, engine i starts at 1 + the GPUs of engines 0..i-1, and the world is 1 + all engine
/// GPUs (AReaL's arithmetic, reference/ecosystem.md §3.1). kInvalidArgument for no engines or an
/// engine with fewer than one GPU.
Result<WeightUpdateRanks> LayOutWeightUpdateRanks(const std::vector<int>& gpus_per_engine);

/// The human message carried by an HTTP error body: the "message" of {"error": {"message": m}},
/// {"error": m}, {"message": m} or {"detail": m} (the shapes of vLLM, SGLang, FastAPI and libra's
/// trainer), else the body itself, cut to 200 bytes; "(empty body)" when there is none.
std::string ErrorMessageOf(std::string_view body);

/// Reads one reply strictly. Every error is kBackend "<where>: <what>", where `where` names the
/// peer and the request ("sglang engine POST http://10.0.0.5:30000/generate") and `what` the
/// offending member by its path ("meta_info.finish_reason.type is missing").
class ReplyReader {
 public:
  explicit ReplyReader(std::string where) : where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  /// kBackend "<where>: <what>".
  Status Error(const std::string& what) const;

  /// The body parsed as JSON (any value; an empty body is null). A status other than 2xx is an
  /// error "HTTP <status>: <ErrorMessageOf(body)>"; so is a body that is not JSON.
  Result<JsonValue> Parse(const HttpResponse& response) const;
  /// Parse, and the value must be an object.
  Result<JsonValue> ParseObject(const HttpResponse& response) const;

  /// Member `key` of `object`, named `<parent>.<key>` (or `<key>` when `parent` is empty) in
  /// messages. A missing or null member is an error ("... is missing"), so is a wrong type
  /// ("... is a string, not an integer").
  Result<const JsonValue*> Member(const JsonValue& object, std::string_view parent,
                                  std::string_view key) const;
  Result<int64_t> Int(const JsonValue& object, std::string_view parent, std::string_view key) const;
  Result<double> Number(const JsonValue& object, std::string_view parent,
                        std::string_view key) const;
  Result<std::string> String(const JsonValue& object, std::string_view parent,
                             std::string_view key) const;
  Result<bool> Bool(const JsonValue& object, std::string_view parent, std::string_view key) const;
  Result<const JsonValue::Array*> Array(const JsonValue& object, std::string_view parent,
                                        std::string_view key) const;
  Result<const JsonValue*> Object(const JsonValue& object, std::string_view parent,
                                  std::string_view key) const;

  /// `value` (named `path`) as token ids: an array of integers in [0, 2^31).
  Result<std::vector<TokenId>> TokenIds(const JsonValue& value, const std::string& path) const;
  /// `value` (named `path`) as a log-probability: a number no greater than 0 (a rounding excess
  /// of up to 1e-3 is accepted and clamped to 0).
  Result<double> Logprob(const JsonValue& value, const std::string& path) const;
  /// `value` (named `path`) as an integer in [min, max].
  Result<int64_t> IntIn(const JsonValue& value, const std::string& path, int64_t min,
                        int64_t max) const;

 private:
  std::string where_;
};

/// "<parent>.<key>", or `key` alone when `parent` is empty.
std::string JsonPath(std::string_view parent, std::string_view key);

/// An array of token ids as JSON.
JsonValue TokenIdsToJson(const std::vector<TokenId>& ids);

/// A POST request carrying `body` as compact JSON.
HttpRequest PostJson(std::string url, const JsonValue& body, double timeout_s);
/// A GET request.
HttpRequest Get(std::string url, double timeout_s);

}  // namespace libra::cluster
