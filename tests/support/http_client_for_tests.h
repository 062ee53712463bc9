// A blocking HTTP client for tests (libcurl's easy interface): sends one cluster::HttpRequest and
// waits for its reply. The cluster backend itself never blocks (http_transport.h); tests that
// talk to real worker processes use this to stay short and sequential.
#pragma once

#include "cluster/http.h"
#include "common/status.h"

namespace libra::test {

/// Sends `request` and returns the reply (any HTTP status), or kBackend "<METHOD> <url>: <curl's
/// reason>" when no reply arrived. Honours request.timeout_s (0: 120 s, so a test never hangs).
Result<cluster::HttpResponse> SendBlocking(const cluster::HttpRequest& request);

}  // namespace libra::test
