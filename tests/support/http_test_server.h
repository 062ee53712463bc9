// HttpTestServer: a tiny HTTP/1.1 server on 127.0.0.1 for the cluster tests, run by the same
// EventLoop as the client under test (no thread, so every test stays deterministic). A handler
// answers each request; a reply can misbehave on purpose (come late, be cut short, be reset, not
// be HTTP, never come) to drive the transport's error paths. Connections are kept alive, so a
// test can count how many the client opened.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cluster/event_loop.h"
#include "common/status.h"

namespace libra::test {

struct TestHttpRequest {
  std::string method;
  /// The request target, e.g. "/v1/completions?x=1".
  std::string path;
  /// Header names in lower case.
  std::map<std::string, std::string> headers;
  std::string body;
};

struct TestHttpReply {
  enum class Kind {
    /// A whole reply; the connection stays open.
    kNormal,
    /// The headers announce the whole body, half of it is sent, then the connection closes.
    kTruncated,
    /// The connection is reset (RST) without a reply.
    kReset,
    /// A line that is not HTTP, then the connection closes.
    kGarbage,
    /// No reply; the connection stays open.
    kSilent,
  };
  Kind kind = Kind::kNormal;
  int status = 200;
  std::string body;
  /// How long to wait before replying (other connections are served meanwhile).
  std::chrono::milliseconds delay{0};
};

class HttpTestServer {
 public:
  using Handler = std::function<TestHttpReply(const TestHttpRequest&)>;

  /// Listens on `port` of 127.0.0.1 (0: an ephemeral one). REQUIRES: `loop` outlives the server.
  static Result<std::unique_ptr<HttpTestServer>> Start(cluster::EventLoop* loop, Handler handler,
                                                       int port = 0);
  /// Closes the listening socket and every connection.
  ~HttpTestServer();
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  int port() const { return port_; }
  /// "http://127.0.0.1:<port><path>".
  std::string Url(const std::string& path) const;
  /// Connections accepted so far.
  int connections() const { return connections_; }
  /// Requests received so far.
  int requests() const { return requests_; }

 private:
  struct Connection {
    cluster::UniqueFd fd;
    std::string in;
    std::string out;
    // A reply is being delayed: the next request waits for it (HTTP/1.1 order).
    bool busy = false;
    bool close_after_write = false;
  };

  HttpTestServer(cluster::EventLoop* loop, Handler handler) : loop_(loop), handler_(handler) {}
  void OnAccept();
  void OnReady(int id, uint32_t ready);
  // Answers the complete requests buffered on the connection.
  void Serve(int id);
  void Respond(int id, const TestHttpReply& reply);
  void Flush(int id);
  void Close(int id);

  cluster::EventLoop* loop_;
  Handler handler_;
  cluster::UniqueFd listener_;
  int port_ = 0;
  int next_id_ = 0;
  std::map<int, std::unique_ptr<Connection>> connections_by_id_;
  std::set<cluster::EventLoop::TimerId> timers_;
  int connections_ = 0;
  int requests_ = 0;
};

}  // namespace libra::test
