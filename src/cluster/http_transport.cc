#include "cluster/http_transport.h"

#include <curl/curl.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/strings.h"

namespace libra::cluster {
namespace {

using Clock = EventLoop::Clock;

struct EasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

size_t AppendBody(char* data, size_t size, size_t count, void* body) {
  std::string& reply = *static_cast<std::string*>(body);
  // A reply beyond the limit ends the transfer (CURLE_WRITE_ERROR) instead of growing without
  // bound.
  if (reply.size() + size * count > kMaxReplyBytes) return 0;
  reply.append(data, size * count);
  return size * count;
}

bool IsKnownMethod(const std::string& method) {
  return method == "GET" || method == "POST" || method == "PUT" || method == "DELETE";
}

bool HasHeader(const HttpRequest& request, const char* name) {
  return std::any_of(request.headers.begin(), request.headers.end(), [name](const auto& header) {
    return strcasecmp(header.first.c_str(), name) == 0;
  });
}

// Why a request got no reply: a few words a user understands, then curl's own detail.
std::string Reason(CURLcode code, const char* detail) {
  const std::string curl = detail[0] != '\0' ? detail : curl_easy_strerror(code);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      return "cannot connect (" + curl + ")";
    case CURLE_OPERATION_TIMEDOUT:
      return "timed out (" + curl + ")";
    case CURLE_PARTIAL_FILE:
      return "reply cut short (" + curl + ")";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      return "connection lost (" + curl + ")";
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_WEIRD_SERVER_REPLY:
      return "not an HTTP reply (" + curl + ")";
    case CURLE_WRITE_ERROR:
      return StrFormat("the reply is larger than libra's limit of %zu bytes", kMaxReplyBytes);
    default:
      return curl;
  }
}

std::string Seconds(Clock::duration d) {
  return StrFormat("%.1f", std::chrono::duration<double>(d).count());
}

}  // namespace

struct HttpTransport::Transfer {
  std::unique_ptr<CURL, EasyDeleter> easy;
  Multi* multi = nullptr;  // while in flight
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  std::string where;  // "<METHOD> <url>", for errors
  std::string body;
  std::string response;
  HttpCallback callback;
  char error[CURL_ERROR_SIZE] = {};
};

struct HttpTransport::HealthCheck {
  std::string url;
  Clock::time_point started;
  Clock::time_point deadline;
  std::chrono::milliseconds interval;
  std::function<void(Status)> done;
  std::string last = "no reply yet";
};

void HttpTransport::MultiDeleter::operator()(void* multi) const { curl_multi_cleanup(multi); }

struct HttpTransport::Multi {
  HttpTransport* transport = nullptr;
  std::unique_ptr<void, MultiDeleter> handle;
  // curl's timer on the loop; 0 when none.
  EventLoop::TimerId timer = 0;
};

Result<std::unique_ptr<HttpTransport>> HttpTransport::Create(EventLoop* loop,
                                                             HttpTransportOptions options) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    return Status::Backend("http", "curl_global_init failed");
  }
  // From here the destructor undoes curl_global_init.
  return std::unique_ptr<HttpTransport>(new HttpTransport(loop, options));
}

HttpTransport::HttpTransport(EventLoop* loop, HttpTransportOptions options)
    : loop_(loop), options_(options) {}

HttpTransport::~HttpTransport() {
  for (const auto& [easy, transfer] : active_) {
    curl_multi_remove_handle(transfer->multi->handle.get(), easy);
  }
  active_.clear();
  idle_.clear();
  // curl_multi_cleanup may still call the socket and timer callbacks, which use this object.
  for (auto& [server, multi] : multis_) multi->handle.reset();
  for (const int fd : watched_fds_) loop_->UnwatchFd(fd);
  for (auto& [server, multi] : multis_) {
    if (multi->timer != 0) loop_->CancelTimer(multi->timer);
  }
  for (const EventLoop::TimerId id : timers_) loop_->CancelTimer(id);
  curl_global_cleanup();
}

HttpTransport::Multi* HttpTransport::MultiFor(const std::string& url) {
  // "scheme://host:port" (the URL itself when it has no "://": curl will refuse it).
  const size_t host = url.find("://");
  const std::string server =
      host == std::string::npos ? url : url.substr(0, url.find('/', host + 3));
  std::unique_ptr<Multi>& multi = multis_[server];
  if (multi != nullptr) return multi.get();
  auto made = std::make_unique<Multi>();
  made->transport = this;
  made->handle.reset(curl_multi_init());
  CURLM* handle = made->handle.get();
  if (handle == nullptr) {
    multis_.erase(server);
    return nullptr;
  }
  curl_multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, &HttpTransport::OnCurlSocket);
  curl_multi_setopt(handle, CURLMOPT_SOCKETDATA, made.get());
  curl_multi_setopt(handle, CURLMOPT_TIMERFUNCTION, &HttpTransport::OnCurlTimer);
  curl_multi_setopt(handle, CURLMOPT_TIMERDATA, made.get());
  curl_multi_setopt(handle, CURLMOPT_MAX_HOST_CONNECTIONS, options_.max_host_connections);
  multi = std::move(made);
  return multi.get();
}

void HttpTransport::Send(const HttpRequest& request, HttpCallback callback) {
  ++in_flight_;
  const std::string where = request.method + " " + request.url;
  if (!IsKnownMethod(request.method)) {
    FailLater(std::move(callback),
              Status::InvalidArgument(where + ": unknown method (use GET, POST, PUT or DELETE)"));
    return;
  }
  std::unique_ptr<Transfer> t;
  if (!idle_.empty()) {
    t = std::move(idle_.back());
    idle_.pop_back();
    curl_easy_reset(t->easy.get());
  } else {
    t = std::make_unique<Transfer>();
    t->easy.reset(curl_easy_init());
    if (t->easy == nullptr) {
      FailLater(std::move(callback), Status::Backend(where, "curl_easy_init failed"));
      return;
    }
  }
  t->where = where;
  t->body = request.body;
  t->response.clear();
  t->error[0] = '\0';
  t->callback = std::move(callback);

  curl_slist* headers = curl_slist_append(nullptr, "Expect:");  // no 100-continue round trip
  if (!t->body.empty() && !HasHeader(request, "Content-Type")) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
  }
  for (const auto& [name, value] : request.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  t->headers.reset(headers);

  CURL* easy = t->easy.get();
  // curl copies string options, except the body (POSTFIELDS), which the transfer keeps.
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  // The engines are reached directly; an http_proxy in libra's environment must not apply.
  curl_easy_setopt(easy, CURLOPT_PROXY, "");
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->headers.get());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t->response);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  if (request.timeout_s > 0) {
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                     std::max(1L, static_cast<long>(request.timeout_s * 1000)));
  }
  if (request.method == "GET" && t->body.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, t->body.data());
    if (request.method != "POST") {
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  }

  Multi* multi = MultiFor(request.url);
  const CURLMcode rc =
      multi == nullptr ? CURLM_OUT_OF_MEMORY : curl_multi_add_handle(multi->handle.get(), easy);
  if (rc != CURLM_OK) {
    HttpCallback failed = std::move(t->callback);
    idle_.push_back(std::move(t));
    FailLater(std::move(failed), Status::Backend(where, curl_multi_strerror(rc)));
    return;
  }
  t->multi = multi;
  active_.emplace(easy, std::move(t));
}

void HttpTransport::FailLater(HttpCallback callback, Status error) {
  AddOwnedTimer(Clock::duration::zero(),
                [this, callback = std::move(callback), error = std::move(error)] {
                  --in_flight_;
                  callback(error);
                });
}

void HttpTransport::AddOwnedTimer(Clock::duration delay, std::function<void()> callback) {
  // The id is known only once the timer exists; the callback finds it through this cell.
  auto id = std::make_shared<EventLoop::TimerId>(0);
  *id = loop_->AddTimer(delay, [this, id, callback = std::move(callback)] {
    timers_.erase(*id);
    callback();
  });
  timers_.insert(*id);
}

int HttpTransport::OnCurlSocket(void* /*easy*/, int fd, int what, void* multi,
                                void* /*socket_data*/) {
  Multi* m = static_cast<Multi*>(multi);
  HttpTransport* transport = m->transport;
  EventLoop* loop = transport->loop_;
  if (what == CURL_POLL_REMOVE) {
    loop->UnwatchFd(fd);
    transport->watched_fds_.erase(fd);
    return 0;
  }
  uint32_t events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= EPOLLIN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= EPOLLOUT;
  if (transport->watched_fds_.contains(fd)) return loop->ModifyFd(fd, events).ok() ? 0 : -1;
  const Status watched = loop->WatchFd(fd, events, [m, fd](uint32_t ready) {
    int curl_events = 0;
    if (ready & (EPOLLIN | EPOLLHUP)) curl_events |= CURL_CSELECT_IN;
    if (ready & EPOLLOUT) curl_events |= CURL_CSELECT_OUT;
    if (ready & EPOLLERR) curl_events |= CURL_CSELECT_ERR;
    m->transport->Advance(*m, fd, curl_events);
  });
  if (!watched.ok()) return -1;
  transport->watched_fds_.insert(fd);
  return 0;
}

int HttpTransport::OnCurlTimer(void* /*handle*/, long timeout_ms, void* multi) {
  Multi* m = static_cast<Multi*>(multi);
  EventLoop* loop = m->transport->loop_;
  if (m->timer != 0) loop->CancelTimer(m->timer);
  m->timer = 0;
  if (timeout_ms >= 0) {
    m->timer = loop->AddTimer(std::chrono::milliseconds(timeout_ms), [m] {
      m->timer = 0;
      m->transport->Advance(*m, CURL_SOCKET_TIMEOUT, 0);
    });
  }
  return 0;
}

void HttpTransport::Advance(Multi& m, int fd, int curl_events) {
  CURLM* multi = m.handle.get();
  int running = 0;
  curl_multi_socket_action(multi, fd, curl_events, &running);
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL* easy = msg->easy_handle;
    const CURLcode code = msg->data.result;
    long status = 0;
    if (code == CURLE_OK) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(multi, easy);
    auto node = active_.extract(easy);
    std::unique_ptr<Transfer> t = std::move(node.mapped());
    t->multi = nullptr;
    // A request that ran out of time is kTimeout (a tool call then counts as timed out), any
    // other failure kBackend.
    Result<HttpResponse> result =
        code == CURLE_OK ? Result<HttpResponse>(HttpResponse{status, std::move(t->response)})
        : code == CURLE_OPERATION_TIMEDOUT
            ? Result<HttpResponse>(
                  Status(StatusCode::kTimeout, t->where + ": " + Reason(code, t->error)))
            : Result<HttpResponse>(Status::Backend(t->where, Reason(code, t->error)));
    HttpCallback callback = std::move(t->callback);
    t->headers.reset();
    idle_.push_back(std::move(t));
    --in_flight_;
    // May send more requests.
    callback(std::move(result));
  }
}

void HttpTransport::WaitHealthy(const std::string& url, std::chrono::milliseconds timeout,
                                std::function<void(Status)> done,
                                std::chrono::milliseconds interval) {
  auto check = std::make_shared<HealthCheck>();
  check->url = url;
  check->started = Clock::now();
  check->deadline = check->started + timeout;
  check->interval = interval;
  check->done = std::move(done);
  Probe(check);
}

void HttpTransport::Probe(const std::shared_ptr<HealthCheck>& check) {
  const Clock::duration left = check->deadline - Clock::now();
  // One probe waits no longer than the time left (but long enough to connect), nor much longer
  // than the interval between probes.
  const Clock::duration probe_timeout = std::clamp<Clock::duration>(
      left, std::chrono::milliseconds(50),
      std::max<Clock::duration>(check->interval, std::chrono::seconds(1)));
  HttpRequest probe{.method = "GET",
                    .url = check->url,
                    .body = "",
                    .headers = {},
                    .timeout_s = std::chrono::duration<double>(probe_timeout).count()};
  Send(probe, [this, check](Result<HttpResponse> reply) {
    if (reply.ok() && reply->status == 200) {
      check->done(Status());
      return;
    }
    // An error reads "GET <url>: <reason>"; the URL is said once already.
    const std::string prefix = "GET " + check->url + ": ";
    const std::string error = reply.status().message();
    check->last = reply.ok()                  ? StrFormat("HTTP %ld", reply->status)
                  : error.starts_with(prefix) ? error.substr(prefix.size())
                                              : error;
    const Clock::time_point now = Clock::now();
    if (now >= check->deadline) {
      check->done(Status(StatusCode::kTimeout,
                         StrFormat("%s: not healthy after %s s (last: %s)", check->url.c_str(),
                                   Seconds(now - check->started).c_str(), check->last.c_str())));
      return;
    }
    AddOwnedTimer(std::min<Clock::duration>(check->interval, check->deadline - now),
                  [this, check] { Probe(check); });
  });
}

Result<long> RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Status::Backend("open file limit", std::strerror(errno));
  }
  if (limit.rlim_cur != limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return Status::Backend("open file limit", std::strerror(errno));
    }
  }
  return static_cast<long>(limit.rlim_cur);
}

}  // namespace libra::cluster
