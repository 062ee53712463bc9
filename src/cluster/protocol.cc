#include "cluster/protocol.h"

#include <limits>
#include <utility>

#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr size_t kMaxQuotedBody = 200;

std::string Excerpt(std::string_view text) {
  if (text.size() <= kMaxQuotedBody) return std::string(text);
  return std::string(text.substr(0, kMaxQuotedBody)) + "...";
}

}  // namespace

Result<WeightUpdateRanks> LayOutWeightUpdateRanks(const std::vector<int>& gpus_per_engine) {
  if (gpus_per_engine.empty()) {
    return Status::InvalidArgument("a weight update group needs at least one engine");
  }
  WeightUpdateRanks ranks;
  int next = 1;  // Rank 0 is the trainer.
  for (size_t i = 0; i < gpus_per_engine.size(); ++i) {
    if (gpus_per_engine[i] < 1) {
      return Status::InvalidArgument(
          StrFormat("engine %zu of the weight update group has %d GPUs", i, gpus_per_engine[i]));
    }
    ranks.rank_offsets.push_back(next);
    next += gpus_per_engine[i];
  }
  ranks.world_size = next;
  return ranks;
}

std::string ErrorMessageOf(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return "(empty body)";
  Result<JsonValue> parsed = ParseJson(body);
  if (parsed.ok() && parsed->is_object()) {
    const JsonValue& object = *parsed;
    if (const JsonValue* error = object.Find("error")) {
      if (error->is_string()) return Excerpt(error->as_string());
      if (const JsonValue* message = error->Find("message"); message && message->is_string()) {
        return Excerpt(message->as_string());
      }
    }
    for (const char* key : {"message", "detail"}) {
      if (const JsonValue* message = object.Find(key); message && message->is_string()) {
        return Excerpt(message->as_string());
      }
    }
  }
  return Excerpt(body);
}

Status ReplyReader::Error(const std::string& what) const { return Status::Backend(where_, what); }

Result<JsonValue> ReplyReader::Parse(const HttpResponse& response) const {
  if (response.status < 200 || response.status > 299) {
    return Error(StrFormat("HTTP %ld: %s", response.status, ErrorMessageOf(response.body).c_str()));
  }
  if (response.body.find_first_not_of(" \t\r\n") == std::string::npos) return JsonValue();
  Result<JsonValue> parsed = ParseJson(response.body);
  if (!parsed.ok()) {
    return Error("the reply is not JSON (" + parsed.status().message() +
                 "): " + Excerpt(response.body));
  }
  return parsed;
}

Result<JsonValue> ReplyReader::ParseObject(const HttpResponse& response) const {
  LIBRA_ASSIGN_OR_RETURN(JsonValue value, Parse(response));
  if (!value.is_object()) {
    return Error(std::string("the reply is ") + value.type_name() + ", not an object");
  }
  return value;
}

Result<const JsonValue*> ReplyReader::Member(const JsonValue& object, std::string_view parent,
                                             std::string_view key) const {
  const JsonValue* member = object.Find(key);
  if (member == nullptr || member->is_null()) return Error(JsonPath(parent, key) + " is missing");
  return member;
}

Result<int64_t> ReplyReader::Int(const JsonValue& object, std::string_view parent,
                                 std::string_view key) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, Member(object, parent, key));
  if (!member->is_int()) {
    return Error(JsonPath(parent, key) + " is " + member->type_name() + ", not an integer");
  }
  return member->as_int();
}

Result<double> ReplyReader::Number(const JsonValue& object, std::string_view parent,
                                   std::string_view key) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, Member(object, parent, key));
  if (!member->is_number()) {
    return Error(JsonPath(parent, key) + " is " + member->type_name() + ", not a number");
  }
  return member->as_double();
}

Result<std::string> ReplyReader::String(const JsonValue& object, std::string_view parent,
                                        std::string_view key) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, Member(object, parent, key));
  if (!member->is_string()) {
    return Error(JsonPath(parent, key) + " is " + member->type_name() + ", not a string");
  }
  return member->as_string();
}

Result<bool> ReplyReader::Bool(const JsonValue& object, std::string_view parent,
                               std::string_view key) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, Member(object, parent, key));
  if (!member->is_bool()) {
    return Error(JsonPath(parent, key) + " is " + member->type_name() + ", not a boolean");
  }
  return member->as_bool();
}

Result<const JsonValue::Array*> ReplyReader::Array(const JsonValue& object, std::string_view parent,
                                                   std::string_view key) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, Member(object, parent, key));
  if (!member->is_array()) {
    return Error(JsonPath(parent, key) + " is " + member->type_name() + ", not an array");
  }
  return &member->as_array();
}

Result<const JsonValue*> ReplyReader::Object(const JsonValue& object, std::string_view parent,
                                             std::string_view key) const {
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* member, Member(object, parent, key));
  if (!member->is_object()) {
    return Error(JsonPath(parent, key) + " is " + member->type_name() + ", not an object");
  }
  return member;
}

Result<std::vector<TokenId>> ReplyReader::TokenIds(const JsonValue& value,
                                                   const std::string& path) const {
  if (!value.is_array()) {
    return Error(path + " is " + value.type_name() + ", not an array of token ids");
  }
  std::vector<TokenId> ids;
  ids.reserve(value.as_array().size());
  for (size_t i = 0; i < value.as_array().size(); ++i) {
    LIBRA_ASSIGN_OR_RETURN(int64_t id,
                           IntIn(value.as_array()[i], StrFormat("%s[%zu]", path.c_str(), i), 0,
                                 std::numeric_limits<TokenId>::max()));
    ids.push_back(static_cast<TokenId>(id));
  }
  return ids;
}

Result<double> ReplyReader::Logprob(const JsonValue& value, const std::string& path) const {
  if (!value.is_number()) {
    return Error(path + " is " + value.type_name() + ", not a logprob");
  }
  const double logprob = value.as_double();
  if (logprob > 1e-3) {
    return Error(StrFormat("%s is %g, not a log-probability (> 0)", path.c_str(), logprob));
  }
  return logprob > 0 ? 0.0 : logprob;
}

Result<int64_t> ReplyReader::IntIn(const JsonValue& value, const std::string& path, int64_t min,
                                   int64_t max) const {
  if (!value.is_int()) return Error(path + " is " + value.type_name() + ", not an integer");
  const int64_t number = value.as_int();
  if (number < min || number > max) {
    return Error(StrFormat("%s is %lld, outside [%lld, %lld]", path.c_str(),
                           static_cast<long long>(number), static_cast<long long>(min),
                           static_cast<long long>(max)));
  }
  return number;
}

std::string JsonPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

JsonValue TokenIdsToJson(const std::vector<TokenId>& ids) {
  JsonValue::Array items;
  items.reserve(ids.size());
  for (TokenId id : ids) items.emplace_back(id);
  return JsonValue::MakeArray(std::move(items));
}

HttpRequest PostJson(std::string url, const JsonValue& body, double timeout_s) {
  HttpRequest request;
  request.method = "POST";
  request.url = std::move(url);
  request.body = ToJson(body);
  request.timeout_s = timeout_s;
  return request;
}

HttpRequest Get(std::string url, double timeout_s) {
  HttpRequest request;
  request.method = "GET";
  request.url = std::move(url);
  request.timeout_s = timeout_s;
  return request;
}

}  // namespace libra::cluster
