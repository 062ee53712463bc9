// The engine reply parsers (vLLM and SGLang dialects): the first byte picks the dialect, the
// HTTP status and the request's max_tokens; the rest is the reply body given to ParseGenerate
// and ParseAck.
#include "cluster/engine_client.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  using namespace libra::cluster;
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const EngineDialect dialect = (control & 1) != 0 ? EngineDialect::kSglang : EngineDialect::kVllm;
  const long statuses[] = {200, 200, 400, 500};
  HttpResponse response;
  response.status = statuses[(control >> 1) & 3];
  response.body = std::string(fuzz::AsText(data + 1, size - 1));
  const EngineClient client(dialect, "http://127.0.0.1:1");
  GenerateRequest request;
  request.prompt = {1, 2, 3};
  request.max_tokens = 1 + (control >> 3);
  request.stop_token_ids = {7};
  static_cast<void>(client.ParseGenerate(request, response));
  static_cast<void>(client.ParseAck(client.Health(), response));
  return 0;
}
