#include "cluster/engine_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kUrl = "http://127.0.0.1:8000";

EngineClient Vllm(EngineClientOptions options = {}) {
  return EngineClient(EngineDialect::kVllm, std::string(kUrl) + "/", std::move(options));
}
EngineClient Sglang() { return EngineClient(EngineDialect::kSglang, kUrl); }

GenerateRequest TurnRequest() {
  GenerateRequest request;
  request.prompt = {1, 3, 16, 4};
  request.max_tokens = 3;
  request.temperature = 0.7;
  request.stop_token_ids = {2, 6};
  request.seed = 42;
  request.request_id = "t-1";
  return request;
}

HttpResponse Reply(std::string body, long status = 200) { return HttpResponse{status, body}; }

// A reply shaped like vLLM's /v1/completions with logprobs: 0 and return_token_ids (extra
// members a real server sends are ignored).
constexpr const char* kVllmReply = R"({"id":"cmpl-t-1","object":"text_completion",
  "created":1718000000,"model":"tiny-lm","system_fingerprint":null,
  "choices":[{"index":0,"text":"<call> d3 </call>","logprobs":{"text_offset":[0,7,10],
  "token_logprobs":[-0.25,-1.5,0.0],"tokens":["<call>","d3","</call>"],
  "top_logprobs":[{"<call>":-0.25},{"d3":-1.5},{"</call>":0.0}]},"finish_reason":"stop",
  "stop_reason":6,"prompt_logprobs":null,"token_ids":[5,19,6],"prompt_token_ids":[1,3,16,4]}],
  "usage":{"prompt_tokens":4,"total_tokens":7,"completion_tokens":3,
  "prompt_tokens_details":null},"kv_transfer_params":null})";

// A reply shaped like SGLang's /generate with return_logprob.
constexpr const char* kSglangReply = R"({"text":"<call> d3 </call>","output_ids":[5,19,6],
  "meta_info":{"id":"t-1","finish_reason":{"type":"stop","matched":6},"prompt_tokens":4,
  "completion_tokens":3,"cached_tokens":0,"weight_version":"7","e2e_latency":0.012,
  "output_token_logprobs":[[-0.25,5,null],[-1.5,19,null],[0.0,6,null]]}})";

GenerateResult Expected(std::string weight_version) {
  GenerateResult result;
  result.token_ids = {5, 19, 6};
  result.logprobs = {-0.25, -1.5, 0.0};
  result.finish_reason = FinishReason::kStop;
  result.matched_stop = 6;
  result.prompt_tokens = 4;
  result.completion_tokens = 3;
  result.weight_version = std::move(weight_version);
  return result;
}

// Replaces the first `from` in `text` with `to` (the test fails when `from` is absent).
std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(EngineClientTest, DialectNames) {
  // "vllm" and "sglang" name the dialects (the [engine] dialect setting and the engine labels);
  // anything else is refused with the known names.
  EXPECT_EQ(EnumNames<EngineDialect>::All(), (std::vector<std::string>{"vllm", "sglang"}));
  const auto bad = EnumNames<EngineDialect>::Parse("tgi");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("must be one of vllm, sglang (got 'tgi')"));
}

TEST(EngineClientTest, VllmGenerateRequestIsExact) {
  // The vLLM turn is a token-id completion asking for the sampled tokens' logprobs and ids.
  EngineClientOptions options;
  options.model = "tiny-lm";
  GenerateRequest turn = TurnRequest();
  turn.timeout_s = 30;
  const HttpRequest request = Vllm(options).Generate(turn);
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.url, "http://127.0.0.1:8000/v1/completions");
  EXPECT_EQ(request.timeout_s, 30);
  EXPECT_EQ(request.body,
            R"({"model":"tiny-lm","prompt":[1,3,16,4],"max_tokens":3,"temperature":0.7,)"
            R"("top_p":1.0,"top_k":-1,"min_p":0.0,"stop_token_ids":[2,6],"seed":42,)"
            R"("request_id":"t-1","logprobs":0,"return_token_ids":true,)"
            R"("return_tokens_as_token_ids":true})");

  GenerateRequest plain;
  plain.prompt = {7};
  plain.ignore_eos = true;
  EXPECT_EQ(Vllm().Generate(plain).body,
            R"({"prompt":[7],"max_tokens":16,"temperature":1.0,"top_p":1.0,"top_k":-1,)"
            R"("min_p":0.0,"stop_token_ids":[],"ignore_eos":true,"logprobs":0,)"
            R"("return_token_ids":true,"return_tokens_as_token_ids":true})");
}

TEST(EngineClientTest, SglangGenerateRequestIsExact) {
  // The SGLang turn sends input_ids with sampling_params and asks for output logprobs.
  const HttpRequest request = Sglang().Generate(TurnRequest());
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.url, "http://127.0.0.1:8000/generate");
  EXPECT_EQ(request.body,
            R"({"input_ids":[1,3,16,4],"sampling_params":{"max_new_tokens":3,"temperature":0.7,)"
            R"("top_p":1.0,"top_k":-1,"min_p":0.0,"stop_token_ids":[2,6],"sampling_seed":42},)"
            R"("return_logprob":true,"rid":"t-1"})");
}

TEST(EngineClientTest, ControlRequestsAreExact) {
  // Every control request, in both dialects: method, URL and body.
  EngineClientOptions options;
  options.model_path = "/ckpt/served";
  options.vllm_sleep_level = 2;
  options.control_timeout_s = 90;
  const EngineClient vllm = Vllm(options);
  const EngineClient sglang = Sglang();
  WeightUpdateGroup group;
  group.master_address = "10.0.0.2";
  group.master_port = 29600;
  group.world_size = 5;
  group.backend = "gloo";
  const std::vector<TensorSpec> tensors = {{"embed.weight", "float32", {64, 32}},
                                           {"head.bias", "bfloat16", {64}}};
  const auto vllm_disk = vllm.UpdateWeightsFromDisk("/ckpt/served", 3);
  const auto sglang_disk = sglang.UpdateWeightsFromDisk("/ckpt/v3", 3);
  const auto sglang_destroy = sglang.DestroyWeightUpdateGroup(group);
  ASSERT_OK(vllm_disk);
  ASSERT_OK(sglang_disk);
  ASSERT_OK(sglang_destroy);

  struct Case {
    std::string name;
    HttpRequest request;
    std::string method;
    std::string path;
    std::string body;
  };
  const std::vector<Case> cases = {
      {"vllm health", vllm.Health(), "GET", "/health", ""},
      {"sglang health", sglang.Health(), "GET", "/health", ""},
      {"vllm abort", vllm.Abort("t-1"), "POST", "/abort_requests", R"({"request_ids":["t-1"]})"},
      {"sglang abort", sglang.Abort("t-1"), "POST", "/abort_request", R"({"rid":"t-1"})"},
      {"vllm abort all", vllm.AbortAll(), "POST", "/abort_requests", "{}"},
      {"sglang abort all", sglang.AbortAll(), "POST", "/abort_request",
       R"({"rid":"","abort_all":true})"},
      {"vllm sleep", vllm.ReleaseMemory(), "POST", "/sleep?level=2", ""},
      {"vllm sleep kv", vllm.ReleaseMemory({MemoryTag::kKvCache}), "POST",
       "/sleep?level=2&tags=kv_cache", ""},
      {"sglang release", sglang.ReleaseMemory(), "POST", "/release_memory_occupation", "{}"},
      {"vllm wake", vllm.ResumeMemory(), "POST", "/wake_up", ""},
      {"vllm wake weights", vllm.ResumeMemory({MemoryTag::kWeights}), "POST",
       "/wake_up?tags=weights", ""},
      {"sglang resume both", sglang.ResumeMemory({MemoryTag::kWeights, MemoryTag::kKvCache}),
       "POST", "/resume_memory_occupation", R"({"tags":["weights","kv_cache"]})"},
      {"vllm reload", *vllm_disk, "POST", "/collective_rpc", R"({"method":"reload_weights"})"},
      {"sglang disk", *sglang_disk, "POST", "/update_weights_from_disk",
       R"({"model_path":"/ckpt/v3","weight_version":"3"})"},
      {"vllm init group", vllm.InitWeightUpdateGroup(group, 1), "POST",
       "/init_weight_transfer_engine",
       R"({"init_info":{"master_address":"10.0.0.2","master_port":29600,"rank_offset":1,)"
       R"("world_size":5}})"},
      {"sglang init group", sglang.InitWeightUpdateGroup(group, 3), "POST",
       "/init_weights_update_group",
       R"({"master_address":"10.0.0.2","master_port":29600,"rank_offset":3,"world_size":5,)"
       R"("group_name":"weight_update_group","backend":"gloo"})"},
      {"vllm update", vllm.UpdateWeightsFromDistributed(group, tensors, 4), "POST",
       "/update_weights",
       R"({"update_info":{"names":["embed.weight","head.bias"],)"
       R"("dtype_names":["float32","bfloat16"],"shapes":[[64,32],[64]]}})"},
      {"sglang update", sglang.UpdateWeightsFromDistributed(group, tensors, 4), "POST",
       "/update_weights_from_distributed",
       R"({"names":["embed.weight","head.bias"],"dtypes":["float32","bfloat16"],)"
       R"("shapes":[[64,32],[64]],"group_name":"weight_update_group","weight_version":"4"})"},
      {"sglang destroy", *sglang_destroy, "POST", "/destroy_weights_update_group",
       R"({"group_name":"weight_update_group"})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.request.method, c.method);
    EXPECT_EQ(c.request.url, std::string(kUrl) + c.path);
    EXPECT_EQ(c.request.body, c.body);
  }
  EXPECT_EQ(vllm.Health().timeout_s, 90);
  EXPECT_EQ(vllm.ReleaseMemory().timeout_s, 90);
}

TEST(EngineClientTest, VllmRefusesWhatItCannotDo) {
  // vLLM reloads only its launch directory and has no endpoint to leave a group.
  EngineClientOptions options;
  options.model_path = "/ckpt/served";
  const auto elsewhere = Vllm(options).UpdateWeightsFromDisk("/ckpt/v3", 3);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(elsewhere.status().message(), HasSubstr("launched with (/ckpt/served)"));
  const auto unconfigured = Vllm().UpdateWeightsFromDisk("/ckpt/v3", 3);
  ASSERT_FALSE(unconfigured.ok());
  EXPECT_THAT(unconfigured.status().message(), HasSubstr("not configured"));
  EXPECT_FALSE(Vllm().DestroyWeightUpdateGroup(WeightUpdateGroup{}).ok());
}

TEST(EngineClientTest, ParsesRealShapedReplies) {
  // Both dialects' replies give the same result: ids, logprobs, finish and counts.
  const auto vllm = Vllm().ParseGenerate(TurnRequest(), Reply(kVllmReply));
  ASSERT_OK(vllm);
  EXPECT_EQ(*vllm, Expected("")) << vllm->ToString();
  const auto sglang = Sglang().ParseGenerate(TurnRequest(), Reply(kSglangReply));
  ASSERT_OK(sglang);
  EXPECT_EQ(*sglang, Expected("7")) << sglang->ToString();
}

TEST(EngineClientTest, ParsesLengthAndAbortFinishes) {
  // A length finish has no matched token; an abort keeps the partial output, even none.
  // (It ends on a token that is not a stop token: one that is would be a stop.)
  const std::string length = Edit(
      Edit(Edit(kSglangReply, R"({"type":"stop","matched":6})", R"({"type":"length","length":3})"),
           "[5,19,6]", "[5,19,7]"),
      "[0.0,6,null]", "[0.0,7,null]");
  const auto parsed = Sglang().ParseGenerate(TurnRequest(), Reply(length));
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->finish_reason, FinishReason::kLength);
  EXPECT_FALSE(parsed->matched_stop.has_value());

  const std::string aborted =
      R"({"text":"","output_ids":[],"meta_info":{"id":"t-1","finish_reason":{"type":"abort",)"
      R"("message":"Abort before prefill"},"prompt_tokens":4,"completion_tokens":0,)"
      R"("output_token_logprobs":[]}})";
  const auto empty = Sglang().ParseGenerate(TurnRequest(), Reply(aborted));
  ASSERT_OK(empty);
  EXPECT_EQ(empty->finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(empty->token_ids.empty());
  const std::string before_prefill =
      R"({"text":"","meta_info":{"id":"t-1","finish_reason":{"type":"abort",)"
      R"("message":"Abort before prefill"},"prompt_tokens":4,"completion_tokens":0}})";
  const auto nothing = Sglang().ParseGenerate(TurnRequest(), Reply(before_prefill));
  ASSERT_OK(nothing);
  EXPECT_TRUE(nothing->token_ids.empty());

  const std::string vllm_abort =
      Edit(Edit(kVllmReply, R"("finish_reason":"stop")", R"("finish_reason":"abort")"),
           R"("stop_reason":6)", R"("stop_reason":null)");
  const auto partial = Vllm().ParseGenerate(TurnRequest(), Reply(vllm_abort));
  ASSERT_OK(partial);
  EXPECT_EQ(partial->finish_reason, FinishReason::kAbort);
  EXPECT_EQ(partial->token_ids.size(), 3u);
}

struct BadReply {
  std::string name;
  long status;
  std::string body;
  std::string error;
};

void ExpectRejected(const EngineClient& client, const std::string& where,
                    const std::vector<BadReply>& cases) {
  for (const BadReply& c : cases) {
    SCOPED_TRACE(c.name);
    const auto parsed = client.ParseGenerate(TurnRequest(), Reply(c.body, c.status));
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kBackend);
    EXPECT_THAT(parsed.status().message(), StartsWith(where + ": "));
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.error));
  }
}

TEST(EngineClientTest, RejectsMalformedVllmReplies) {
  // Each broken reply is refused with the engine, the request and what is wrong.
  const std::string r = kVllmReply;
  ExpectRejected(
      Vllm(), "vllm engine POST http://127.0.0.1:8000/v1/completions",
      {
          {"error status", 400,
           R"({"error":{"message":"max_tokens is too large","type":"BadRequestError",)"
           R"("code":400}})",
           "HTTP 400: max_tokens is too large"},
          {"older error shape", 400, R"({"object":"error","message":"bad prompt","code":400})",
           "HTTP 400: bad prompt"},
          {"plain text error", 500, "Internal Server Error", "HTTP 500: Internal Server Error"},
          {"empty error", 503, "", "HTTP 503: (empty body)"},
          {"truncated", 200, r.substr(0, r.size() / 2), "the reply is not JSON"},
          {"empty body", 200, "", "the reply is null, not an object"},
          {"no choices", 200, Edit(r, R"("choices")", R"("options")"), "choices is missing"},
          {"two choices", 200, Edit(r, R"("choices":[{)", R"("choices":[{"index":1},{)"),
           "choices has 2 entries, expected 1"},
          {"no token_ids (older vLLM)", 200, Edit(r, R"("token_ids":[5,19,6])", R"("x":1)"),
           "choices[0].token_ids is missing"},
          {"token id not an integer", 200, Edit(r, "[5,19,6]", R"([5,"d3",6])"),
           "choices[0].token_ids[1] is a string, not an integer"},
          {"negative token id", 200, Edit(r, "[5,19,6]", "[5,-19,6]"),
           "choices[0].token_ids[1] is -19, outside"},
          {"logprobs not requested", 200,
           Edit(r, R"("logprobs":{"text_offset")", R"("logprobs":null,"x":{"text_offset")"),
           "choices[0].logprobs is missing"},
          {"fewer logprobs than tokens", 200, Edit(r, "[-0.25,-1.5,0.0]", "[-0.25,-1.5]"),
           "choices[0].logprobs.token_logprobs has 2 entries but choices[0].token_ids has 3"},
          {"positive logprob", 200, Edit(r, "[-0.25,-1.5,0.0]", "[-0.25,1.5,0.0]"),
           "choices[0].logprobs.token_logprobs[1] is 1.5, not a log-probability"},
          {"null logprob", 200, Edit(r, "[-0.25,-1.5,0.0]", "[-0.25,null,0.0]"),
           "token_logprobs[1] is null, not a logprob"},
          {"unfinished", 200, Edit(r, R"("finish_reason":"stop")", R"("finish_reason":null)"),
           "choices[0].finish_reason is missing"},
          {"unknown finish", 200, Edit(r, R"("finish_reason":"stop")", R"("finish_reason":"eos")"),
           R"(choices[0].finish_reason is "eos", not stop, length or abort)"},
          {"completion count", 200, Edit(r, R"("completion_tokens":3)", R"("completion_tokens":4)"),
           "the engine counted 4 completion tokens but returned 3"},
          {"prompt count", 200, Edit(r, R"("prompt_tokens":4)", R"("prompt_tokens":5)"),
           "the engine counted 5 prompt tokens but libra sent 4 (did it re-tokenise?)"},
          {"prompt echo", 200, Edit(r, "[1,3,16,4]", "[1,3,17,4]"),
           "choices[0].prompt_token_ids (4 tokens) differ from the prompt libra sent"},
          {"beyond max_tokens", 200,
           Edit(Edit(Edit(r, "[5,19,6]", "[5,19,19,6]"), "[-0.25,-1.5,0.0]",
                     "[-0.25,-1.5,-1.5,0.0]"),
                R"("completion_tokens":3)", R"("completion_tokens":4)"),
           "the engine returned 4 tokens, more than max_tokens 3"},
      });
}

TEST(EngineClientTest, RejectsMalformedSglangReplies) {
  // Each broken reply is refused with the engine, the request and what is wrong.
  const std::string r = kSglangReply;
  ExpectRejected(
      Sglang(), "sglang engine POST http://127.0.0.1:8000/generate",
      {
          {"error status", 400, R"({"error":{"message":"Input length exceeds the limit"}})",
           "HTTP 400: Input length exceeds the limit"},
          {"fastapi error", 422, R"({"detail":"field required"})", "HTTP 422: field required"},
          {"batch reply", 200, "[" + r + "]", "the reply is an array, not an object"},
          {"no meta_info", 200, Edit(r, R"("meta_info")", R"("meta")"), "meta_info is missing"},
          {"unfinished", 200, Edit(r, R"({"type":"stop","matched":6})", "null"),
           "meta_info.finish_reason is missing"},
          {"finish without type", 200, Edit(r, R"("type":"stop",)", ""),
           "meta_info.finish_reason.type is missing"},
          {"no logprobs (return_logprob ignored)", 200,
           Edit(r, R"("output_token_logprobs")", R"("input_token_logprobs")"),
           "meta_info.output_token_logprobs is missing"},
          {"entry not a triple", 200, Edit(r, "[-1.5,19,null]", "-1.5"),
           "meta_info.output_token_logprobs[1] is a number, not [logprob, token_id, text]"},
          {"short entry", 200, Edit(r, "[-1.5,19,null]", "[-1.5]"),
           "meta_info.output_token_logprobs[1] is a short array"},
          {"null logprob", 200, Edit(r, "[-0.25,5,null]", "[null,5,null]"),
           "meta_info.output_token_logprobs[0][0] is null, not a logprob"},
          {"token id a double", 200, Edit(r, "[-1.5,19,null]", "[-1.5,19.0,null]"),
           "meta_info.output_token_logprobs[1][1] is a number, not an integer"},
          {"output_ids disagree", 200,
           Edit(r, R"("output_ids":[5,19,6])", R"("output_ids":[5,9,6])"),
           "output_ids[1] is 9 but meta_info.output_token_logprobs[1] names token 19"},
          {"output_ids shorter", 200, Edit(r, R"("output_ids":[5,19,6])", R"("output_ids":[5,19])"),
           "meta_info.output_token_logprobs has 3 entries but output_ids has 2"},
          {"completion count", 200, Edit(r, R"("completion_tokens":3)", R"("completion_tokens":2)"),
           "the engine counted 2 completion tokens but returned 3"},
          {"version type", 200, Edit(r, R"("weight_version":"7")", R"("weight_version":7)"),
           "meta_info.weight_version is an integer, not a string"},
      });
}

TEST(EngineClientTest, AcknowledgementsReportRefusals) {
  // A control reply is OK on 2xx unless it says success: false; errors carry the engine's words.
  const EngineClient sglang = Sglang();
  const auto disk = sglang.UpdateWeightsFromDisk("/ckpt/v3", 3);
  ASSERT_OK(disk);
  EXPECT_OK(sglang.ParseAck(*disk, Reply(R"({"success":true,"message":"Succeeded."})")));
  EXPECT_OK(sglang.ParseAck(sglang.Health(), Reply("")));
  EXPECT_OK(Vllm().ParseAck(Vllm().AbortAll(), Reply(R"({"status":"aborted","aborted":2})")));

  struct Case {
    std::string name;
    HttpResponse response;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"refused with 200", Reply(R"({"success":false,"message":"no such file"})"),
       "the engine refused: no such file"},
      {"refused with 400", Reply(R"({"success":false,"message":"no such file"})", 400),
       "HTTP 400: no such file"},
      {"not JSON", Reply("<html>", 200), "the reply is not JSON"},
      {"unavailable", Reply("", 503), "HTTP 503: (empty body)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Status status = sglang.ParseAck(*disk, c.response);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kBackend);
    EXPECT_THAT(status.message(),
                StartsWith("sglang engine POST http://127.0.0.1:8000/update_weights_from_disk: "));
    EXPECT_THAT(status.message(), HasSubstr(c.error));
  }
}

// ---- Contract fixtures: reply shapes from the engines' documentation, with the variants real
// servers return (docs/cluster.md, "Engine contracts") ------------------------------------------

TEST(EngineContractTest, EverySamplingParameterAndA64BitSeedGoOut) {
  // top_k and min_p are sent even at their "off" values, so that no server default (some use
  // top_k 40, min_p 0.05) changes what is sampled; a seed above 2^53 arrives exact.
  GenerateRequest turn = TurnRequest();
  turn.top_k = 50;
  turn.min_p = 0.05;
  turn.seed = (int64_t{1} << 62) + 12345;
  for (const EngineClient& client : {Vllm(), Sglang()}) {
    const auto body = ParseJson(client.Generate(turn).body);
    ASSERT_OK(body);
    const JsonValue* params =
        client.dialect() == EngineDialect::kVllm ? &*body : body->Find("sampling_params");
    ASSERT_NE(params, nullptr);
    for (const char* key : {"temperature", "top_p", "top_k", "min_p"}) {
      EXPECT_NE(params->Find(key), nullptr) << NameOf(client.dialect()) << " " << key;
    }
    EXPECT_EQ(params->Find("top_k")->as_int(), 50);
    const char* seed = client.dialect() == EngineDialect::kVllm ? "seed" : "sampling_seed";
    EXPECT_EQ(params->Find(seed)->as_int(), (int64_t{1} << 62) + 12345);
  }
}

TEST(EngineContractTest, VllmLogprobsInTheChatFormat) {
  // logprobs.content[] with {token, logprob, bytes, top_logprobs} (the chat format, which some
  // OpenAI-compatible servers return for completions too), with token_ids.
  const std::string body = R"({"choices":[{"index":0,"text":"x","finish_reason":"stop",
    "logprobs":{"content":[{"token":"<call>","logprob":-0.25,"bytes":[60],"top_logprobs":[]},
    {"token":"d3","logprob":-1.5,"bytes":[100,51],"top_logprobs":[]},
    {"token":"</call>","logprob":0.0,"bytes":[],"top_logprobs":[]}]},
    "token_ids":[5,19,6]}],"usage":{"prompt_tokens":4,"completion_tokens":3}})";
  const auto parsed = Vllm().ParseGenerate(TurnRequest(), Reply(body));
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->token_ids, (std::vector<TokenId>{5, 19, 6}));
  EXPECT_EQ(parsed->logprobs, (std::vector<double>{-0.25, -1.5, 0.0}));
}

TEST(EngineContractTest, VllmTokenIdsFromTheLogprobsWhenTokenIdsAreMissing) {
  // Without token_ids: an "id" per chat entry (llama.cpp's server), or tokens written
  // "token_id:<id>" (vLLM's return_tokens_as_token_ids).
  const std::string chat = R"({"choices":[{"index":0,"text":"x","finish_reason":"stop",
    "logprobs":{"content":[{"id":5,"token":"a","logprob":-0.25},{"id":19,"token":"b",
    "logprob":-1.5},{"id":6,"token":"c","logprob":0.0}]}}]})";
  const std::string tokens = R"({"choices":[{"index":0,"text":"x","finish_reason":"stop",
    "logprobs":{"tokens":["token_id:5","token_id:19","token_id:6"],
    "token_logprobs":[-0.25,-1.5,0.0]}}]})";
  for (const std::string& body : {chat, tokens}) {
    const auto parsed = Vllm().ParseGenerate(TurnRequest(), Reply(body));
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->token_ids, (std::vector<TokenId>{5, 19, 6}));
    EXPECT_EQ(parsed->prompt_tokens, 4);  // usage is optional
    EXPECT_EQ(parsed->completion_tokens, 3);
  }
}

TEST(EngineContractTest, AServerThatReturnsNoTokenIdsIsNamedForWhatItLacks) {
  const std::string body = R"({"choices":[{"index":0,"text":"abc","finish_reason":"stop",
    "logprobs":{"content":[{"token":"abc","logprob":-0.25}]}}]})";
  const auto parsed = Vllm().ParseGenerate(TurnRequest(), Reply(body));
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("token_ids is missing"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("return_token_ids"));
}

TEST(EngineContractTest, OvershootPastAStopTokenIsCutAndCounted) {
  // An engine that ignores stop_token_ids generates past the tool-call token 6: libra keeps the
  // tokens up to it, reports a stop on it, and counts the rest.
  const std::string vllm = R"({"choices":[{"index":0,"text":"x","finish_reason":"length",
    "logprobs":{"token_logprobs":[-0.25,-0.5,-1.0]},"token_ids":[5,6,9]}],
    "usage":{"prompt_tokens":4,"completion_tokens":3}})";
  const std::string sglang = R"({"meta_info":{"finish_reason":{"type":"length","length":3},
    "output_token_logprobs":[[-0.25,5],[-0.5,6],[-1.0,9]]}})";
  for (const auto& [client, body] : {std::pair{Vllm(), vllm}, std::pair{Sglang(), sglang}}) {
    const auto parsed = client.ParseGenerate(TurnRequest(), Reply(body));
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->token_ids, (std::vector<TokenId>{5, 6}));
    EXPECT_EQ(parsed->logprobs, (std::vector<double>{-0.25, -0.5}));
    EXPECT_EQ(parsed->finish_reason, FinishReason::kStop);
    EXPECT_EQ(parsed->matched_stop, 6);
    EXPECT_EQ(parsed->overshoot_tokens, 1);
  }
}

TEST(EngineContractTest, SglangOptionalMembersMayBeMissing) {
  // Pairs [logprob, id] without the text, and no counts, output_ids or weight_version.
  const std::string body = R"({"text":"","meta_info":{"finish_reason":{"type":"stop",
    "matched":6},"output_token_logprobs":[[-0.25,5],[-1.5,19],[0.0,6]]}})";
  const auto parsed = Sglang().ParseGenerate(TurnRequest(), Reply(body));
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->token_ids, (std::vector<TokenId>{5, 19, 6}));
  EXPECT_EQ(parsed->prompt_tokens, 4);
  EXPECT_EQ(parsed->completion_tokens, 3);
  EXPECT_EQ(parsed->weight_version, "");
}

}  // namespace
}  // namespace libra::cluster
