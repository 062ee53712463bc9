// HTTP values shared by the cluster backend's transport (event_loop / http_transport, on one
// libcurl multi handle) and its protocol clients (engine and trainer dialects, which only build
// requests and parse replies). Values only: no I/O here.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace libra::cluster {

struct HttpRequest {
  /// "GET" or "POST".
  std::string method = "POST";
  /// Full URL, e.g. "http://127.0.0.1:8000/v1/completions".
  std::string url;
  /// Request body (JSON for every protocol libra speaks); empty for GET.
  std::string body;
  /// Extra headers ("Content-Type: application/json" is added for a non-empty body).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Whole-request timeout; 0 means none.
  double timeout_s = 0;
};

struct HttpResponse {
  /// HTTP status code (200, 404, ...).
  long status = 0;
  std::string body;
};

/// Called once per request: the reply (any status), or an error when no reply arrived
/// (connection refused, timeout, truncated transfer: kBackend with the URL and curl's reason).
using HttpCallback = std::function<void(Result<HttpResponse>)>;

}  // namespace libra::cluster
