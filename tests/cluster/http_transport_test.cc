#include "cluster/http_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/http_test_server.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using std::chrono::milliseconds;
using test::HttpTestServer;
using test::TestHttpReply;
using test::TestHttpRequest;
using Clock = EventLoop::Clock;

// A port of 127.0.0.1 nothing listens on.
int ClosedPort() {
  const UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(addr);
  EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &size), 0);
  return ntohs(addr.sin_port);
}

HttpRequest Post(const std::string& url, const std::string& body, double timeout_s = 0) {
  return HttpRequest{
      .method = "POST", .url = url, .body = body, .headers = {}, .timeout_s = timeout_s};
}

HttpRequest Get(const std::string& url) {
  return HttpRequest{.method = "GET", .url = url, .body = "", .headers = {}, .timeout_s = 0};
}

class HttpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = std::move(EventLoop::Create()).value();
    auto transport = HttpTransport::Create(loop_.get());
    ASSERT_OK(transport);
    transport_ = std::move(transport).value();
    auto server = HttpTestServer::Start(
        loop_.get(), [this](const TestHttpRequest& request) { return handler_(request); });
    ASSERT_OK(server);
    server_ = std::move(server).value();
  }

  void TearDown() override {
    transport_.reset();
    server_.reset();
  }

  // Replaces the transport with one made with `options`.
  void Recreate(HttpTransportOptions options) {
    transport_ = std::move(HttpTransport::Create(loop_.get(), options)).value();
  }

  // Sends one request and runs the loop until its reply.
  Result<HttpResponse> Call(const HttpRequest& request) {
    std::optional<Result<HttpResponse>> reply;
    transport_->Send(request, [&](Result<HttpResponse> r) { reply = std::move(r); });
    EXPECT_OK(loop_->RunUntil([&] { return reply.has_value(); },
                              Clock::now() + test::Deadline(std::chrono::seconds(60))));
    if (!reply) return Status::Internal("no reply");
    return *reply;
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<HttpTestServer> server_;
  std::function<TestHttpReply(const TestHttpRequest&)> handler_ = [](const TestHttpRequest&) {
    return TestHttpReply{};
  };
};

TEST_F(HttpTransportTest, PostAndGetRoundTrip) {
  // A POST carries its body, a JSON content type and extra headers; a GET has no body.
  handler_ = [](const TestHttpRequest& r) {
    auto header = [&r](const std::string& name) {
      const auto it = r.headers.find(name);
      return it == r.headers.end() ? std::string() : it->second;
    };
    TestHttpReply reply;
    reply.body = r.method + " " + r.path + " [" + header("content-type") + "] [" +
                 header("x-libra") + "] " + r.body;
    return reply;
  };
  HttpRequest post = Post(server_->Url("/v1/completions"), R"({"prompt": [1, 2]})");
  post.headers = {{"X-Libra", "yes"}};
  const auto posted = Call(post);
  ASSERT_OK(posted);
  EXPECT_EQ(posted->status, 200);
  EXPECT_EQ(posted->body, R"(POST /v1/completions [application/json] [yes] {"prompt": [1, 2]})");

  const auto got = Call(Get(server_->Url("/health")));
  ASSERT_OK(got);
  EXPECT_EQ(got->body, "GET /health [] [] ");
}

TEST_F(HttpTransportTest, HttpErrorStatusIsAReply) {
  // A 503 is a reply the caller inspects, not a transport error.
  handler_ = [](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.status = 503;
    reply.body = "busy";
    return reply;
  };
  const auto reply = Call(Post(server_->Url("/x"), "{}"));
  ASSERT_OK(reply);
  EXPECT_EQ(reply->status, 503);
  EXPECT_EQ(reply->body, "busy");
}

TEST_F(HttpTransportTest, RefusedConnectionNamesTheUrl) {
  // Nothing listening: kBackend "<METHOD> <url>: <curl's reason>".
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/generate";
  const auto reply = Call(Post(url, "{}"));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kBackend);
  EXPECT_TRUE(reply.status().message().starts_with("POST " + url + ": "))
      << reply.status().message();
  EXPECT_NE(reply.status().message().find("cannot connect ("), std::string::npos)
      << reply.status().message();
}

TEST_F(HttpTransportTest, TimeoutIsAnError) {
  // A server that never answers fails the request at its timeout, as kTimeout (issue 20: callers
  // tell a timeout by its code, not by searching the message).
  handler_ = [](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.kind = TestHttpReply::Kind::kSilent;
    return reply;
  };
  const Clock::time_point start = Clock::now();
  const auto reply = Call(Post(server_->Url("/slow"), "{}", 0.1));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kTimeout);
  EXPECT_NE(reply.status().message().find("timed out ("), std::string::npos)
      << reply.status().message();
  EXPECT_GE(Clock::now() - start, milliseconds(100));
  EXPECT_LT(Clock::now() - start, test::Deadline(milliseconds(10000)));
}

TEST_F(HttpTransportTest, BrokenRepliesAreErrors) {
  // A reply cut short, a reset connection and a reply that is not HTTP each fail the request
  // with the URL and curl's reason.
  struct Case {
    std::string name;
    TestHttpReply::Kind kind;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"truncated", TestHttpReply::Kind::kTruncated, "reply cut short (transfer closed"},
      {"reset", TestHttpReply::Kind::kReset, "connection lost ("},
      {"garbage", TestHttpReply::Kind::kGarbage, "not an HTTP reply ("},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    handler_ = [&c](const TestHttpRequest&) {
      TestHttpReply reply;
      reply.kind = c.kind;
      reply.body = std::string(100, 'x');
      return reply;
    };
    const std::string url = server_->Url("/" + c.name);
    const auto reply = Call(Post(url, "{}"));
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.status().code(), StatusCode::kBackend);
    EXPECT_TRUE(reply.status().message().starts_with("POST " + url + ": "))
        << reply.status().message();
    EXPECT_NE(reply.status().message().find(c.reason), std::string::npos)
        << reply.status().message();
  }
}

TEST_F(HttpTransportTest, ConnectionIsKeptAliveAndReused) {
  // Twenty requests in a row, each sent from the previous one's callback, use one connection.
  int done = 0;
  std::function<void(Result<HttpResponse>)> next = [&](Result<HttpResponse> reply) {
    EXPECT_OK(reply);
    if (++done < 20) transport_->Send(Post(server_->Url("/turn"), "{}"), next);
  };
  transport_->Send(Post(server_->Url("/turn"), "{}"), next);
  ASSERT_OK(loop_->RunUntil([&] { return done == 20; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(server_->requests(), 20);
  EXPECT_EQ(server_->connections(), 1);
}

TEST_F(HttpTransportTest, ThousandsOfRequestsInFlightAtOnce) {
  // Two thousand requests in flight together (the server holds each 50 ms) all complete, each
  // with its own reply.
  const auto limit = RaiseOpenFileLimit();
  ASSERT_OK(limit);
  // Both ends of every connection live in this process.
  const int n = static_cast<int>(std::min<long>(2000, (*limit - 100) / 2));
  handler_ = [](const TestHttpRequest& r) {
    TestHttpReply reply;
    reply.body = r.body;
    reply.delay = milliseconds(50);
    return reply;
  };
  int done = 0;
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    transport_->Send(Post(server_->Url("/turn"), std::to_string(i), 60 * test::TimeScale()),
                     [&, i](Result<HttpResponse> reply) {
                       ++done;
                       if (!reply.ok() || reply->body != std::to_string(i)) ++wrong;
                     });
  }
  EXPECT_EQ(transport_->in_flight(), static_cast<size_t>(n));
  ASSERT_OK(loop_->RunUntil([&] { return done == n; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(transport_->in_flight(), 0u);
  EXPECT_EQ(server_->requests(), n);
}

TEST_F(HttpTransportTest, MaxHostConnectionsQueuesTheRest) {
  // With at most 4 connections per host, 40 concurrent requests share 4 connections.
  Recreate(HttpTransportOptions{.max_host_connections = 4, .connect_timeout = milliseconds(1000)});
  handler_ = [](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.delay = milliseconds(5);
    return reply;
  };
  int done = 0;
  for (int i = 0; i < 40; ++i) {
    transport_->Send(Post(server_->Url("/turn"), "{}"), [&](Result<HttpResponse> reply) {
      EXPECT_OK(reply);
      ++done;
    });
  }
  ASSERT_OK(loop_->RunUntil([&] { return done == 40; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_LE(server_->connections(), 4);
}

TEST_F(HttpTransportTest, SeveralServersAtOnceEachWithItsOwnConnectionLimit) {
  // Requests to two servers interleave (each server has its own multi handle): all complete with
  // their own replies, each server sees its own requests within its connection limit, and a
  // transport destroyed with requests in flight to both calls none of them back.
  Recreate(HttpTransportOptions{.max_host_connections = 3, .connect_timeout = milliseconds(1000)});
  bool silent = false;
  auto handler = [&silent](const TestHttpRequest& r) {
    TestHttpReply reply;
    reply.body = r.body;
    reply.delay = milliseconds(2);
    if (silent) reply.kind = TestHttpReply::Kind::kSilent;
    return reply;
  };
  handler_ = handler;
  auto other = HttpTestServer::Start(loop_.get(), handler);
  ASSERT_OK(other);
  HttpTestServer* servers[] = {server_.get(), other->get()};
  int done = 0;
  int wrong = 0;
  for (int i = 0; i < 60; ++i) {
    const std::string body = std::to_string(i);
    transport_->Send(Post(servers[i % 2]->Url("/turn"), body), [&, body](Result<HttpResponse> r) {
      ++done;
      if (!r.ok() || r->body != body) ++wrong;
    });
  }
  ASSERT_OK(loop_->RunUntil([&] { return done == 60; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(wrong, 0);
  for (HttpTestServer* server : servers) {
    EXPECT_EQ(server->requests(), 30);
    EXPECT_LE(server->connections(), 3);
  }
  silent = true;
  int called = 0;
  for (int i = 0; i < 4; ++i) {
    transport_->Send(Post(servers[i % 2]->Url("/x"), "{}"),
                     [&](Result<HttpResponse>) { ++called; });
  }
  ASSERT_OK(loop_->RunUntil([&] { return server_->requests() + (*other)->requests() == 64; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  transport_.reset();
  EXPECT_EQ(loop_->RunUntil([] { return false; }, Clock::now() + milliseconds(50)).code(),
            StatusCode::kTimeout);
  EXPECT_EQ(called, 0);
}

TEST_F(HttpTransportTest, CallbackNeverRunsInsideSend) {
  // Even an immediate failure (an unknown method) is reported from the loop, after Send returns.
  bool called = false;
  Status status;
  HttpRequest brew = Post(server_->Url("/pot"), "");
  brew.method = "BREW";
  transport_->Send(brew, [&](Result<HttpResponse> reply) {
    called = true;
    status = reply.status();
  });
  EXPECT_FALSE(called);
  ASSERT_OK(loop_->RunUntil([&] { return called; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server_->requests(), 0);
}

TEST_F(HttpTransportTest, DestroyingTheTransportAbandonsItsRequests) {
  // Requests still in flight when the transport goes never call back, and nothing dangles.
  handler_ = [](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.kind = TestHttpReply::Kind::kSilent;
    return reply;
  };
  int called = 0;
  for (int i = 0; i < 3; ++i) {
    transport_->Send(Post(server_->Url("/x"), "{}"), [&](Result<HttpResponse>) { ++called; });
  }
  transport_->WaitHealthy(server_->Url("/health"), milliseconds(1000), [&](Status) { ++called; });
  ASSERT_EQ(loop_->RunUntil([&] { return server_->requests() == 4; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))),
            Status());
  transport_.reset();
  EXPECT_EQ(loop_->RunUntil([] { return false; }, Clock::now() + milliseconds(50)).code(),
            StatusCode::kTimeout);
  EXPECT_EQ(called, 0);
}

TEST_F(HttpTransportTest, WaitHealthyWaitsForA200) {
  // A server answering 503 while it loads is polled until it answers 200.
  int probes = 0;
  handler_ = [&probes](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.status = ++probes < 4 ? 503 : 200;
    return reply;
  };
  std::optional<Status> healthy;
  transport_->WaitHealthy(
      server_->Url("/health"), test::Deadline(milliseconds(30000)), [&](Status s) { healthy = s; },
      milliseconds(10));
  ASSERT_OK(loop_->RunUntil([&] { return healthy.has_value(); },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_OK(*healthy);
  EXPECT_EQ(probes, 4);
}

TEST_F(HttpTransportTest, WaitHealthyTimesOutWithTheLastReason) {
  // A server that stays unhealthy, or is not there, gives kTimeout with the URL and last reply.
  handler_ = [](const TestHttpRequest&) {
    TestHttpReply reply;
    reply.status = 503;
    return reply;
  };
  const std::string closed = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/health";
  std::optional<Status> unhealthy;
  std::optional<Status> refused;
  transport_->WaitHealthy(
      server_->Url("/health"), milliseconds(100), [&](Status s) { unhealthy = s; },
      milliseconds(10));
  transport_->WaitHealthy(
      closed, milliseconds(100), [&](Status s) { refused = s; }, milliseconds(10));
  ASSERT_OK(loop_->RunUntil([&] { return unhealthy && refused; },
                            Clock::now() + test::Deadline(std::chrono::seconds(60))));
  EXPECT_EQ(unhealthy->code(), StatusCode::kTimeout);
  EXPECT_TRUE(unhealthy->message().starts_with(server_->Url("/health") + ": not healthy after 0."))
      << unhealthy->message();
  EXPECT_TRUE(unhealthy->message().ends_with("(last: HTTP 503)")) << unhealthy->message();
  EXPECT_EQ(refused->code(), StatusCode::kTimeout);
  EXPECT_TRUE(refused->message().starts_with(closed + ": not healthy after")) << refused->message();
  EXPECT_NE(refused->message().find("(last: cannot connect ("), std::string::npos)
      << refused->message();
}

}  // namespace
}  // namespace libra::cluster
