#include "support/http_client_for_tests.h"

#include <curl/curl.h>

#include <memory>
#include <string>

namespace libra::test {
namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

struct EasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct ListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

Result<cluster::HttpResponse> SendBlocking(const cluster::HttpRequest& request) {
  const std::string where = request.method + " " + request.url;
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  if (!easy) return Status::Backend(where, "curl_easy_init failed");
  std::unique_ptr<curl_slist, ListDeleter> headers;
  auto add_header = [&headers](const std::string& line) {
    headers.reset(curl_slist_append(headers.release(), line.c_str()));
  };
  for (const auto& [name, value] : request.headers) add_header(name + ": " + value);
  if (!request.body.empty()) add_header("Content-Type: application/json");

  cluster::HttpResponse response;
  const long timeout_ms =
      request.timeout_s > 0 ? static_cast<long>(request.timeout_s * 1000) : 120000L;
  curl_easy_setopt(easy.get(), CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &response.body);
  if (request.method == "POST") {
    curl_easy_setopt(easy.get(), CURLOPT_POST, 1L);
    curl_easy_setopt(easy.get(), CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(easy.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  } else if (request.method != "GET") {
    return Status::InvalidArgument(where + ": only GET and POST are supported");
  }
  if (headers) curl_easy_setopt(easy.get(), CURLOPT_HTTPHEADER, headers.get());
  const CURLcode code = curl_easy_perform(easy.get());
  if (code != CURLE_OK) return Status::Backend(where, curl_easy_strerror(code));
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace libra::test
