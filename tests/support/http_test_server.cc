#include "support/http_test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/strings.h"

namespace libra::test {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Parses one request from the front of `in`; false when it is not complete yet.
bool ParseRequest(std::string& in, TestHttpRequest& request) {
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const std::vector<std::string> lines = StrSplit(std::string_view(in).substr(0, end), '\n');
  request = TestHttpRequest{};
  const std::vector<std::string> first = StrSplit(lines[0], ' ');
  request.method = first[0];
  request.path = first.size() > 1 ? first[1] : "";
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    std::string value = lines[i].substr(colon + 1);
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    request.headers[Lower(lines[i].substr(0, colon))] = value;
  }
  const auto length = request.headers.find("content-length");
  const size_t body_size = length == request.headers.end() ? 0 : std::stoul(length->second);
  if (in.size() < end + 4 + body_size) return false;
  request.body = in.substr(end + 4, body_size);
  in.erase(0, end + 4 + body_size);
  return true;
}

}  // namespace

Result<std::unique_ptr<HttpTestServer>> HttpTestServer::Start(cluster::EventLoop* loop,
                                                              Handler handler, int port) {
  std::unique_ptr<HttpTestServer> server(new HttpTestServer(loop, std::move(handler)));
  server->listener_.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int fd = server->listener_.get();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int reuse = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  socklen_t size = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 4096) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    return Status::Backend("test server", std::strerror(errno));
  }
  server->port_ = ntohs(addr.sin_port);
  HttpTestServer* raw = server.get();
  LIBRA_RETURN_IF_ERROR(loop->WatchFd(fd, EPOLLIN, [raw](uint32_t) { raw->OnAccept(); }));
  return server;
}

HttpTestServer::~HttpTestServer() {
  for (const auto id : timers_) loop_->CancelTimer(id);
  for (const auto& [id, connection] : connections_by_id_) loop_->UnwatchFd(connection->fd.get());
  loop_->UnwatchFd(listener_.get());
}

std::string HttpTestServer::Url(const std::string& path) const {
  return StrFormat("http://127.0.0.1:%d%s", port_, path.c_str());
}

void HttpTestServer::OnAccept() {
  for (;;) {
    const int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ++connections_;
    const int id = next_id_++;
    auto connection = std::make_unique<Connection>();
    connection->fd.reset(fd);
    connections_by_id_.emplace(id, std::move(connection));
    const Status watched =
        loop_->WatchFd(fd, EPOLLIN, [this, id](uint32_t ready) { OnReady(id, ready); });
    if (!watched.ok()) Close(id);
  }
}

void HttpTestServer::OnReady(int id, uint32_t ready) {
  Connection& c = *connections_by_id_.at(id);
  if (ready & EPOLLOUT) {
    Flush(id);
    if (!connections_by_id_.contains(id)) return;
  }
  if (!(ready & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(c.fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      c.in.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || errno != EAGAIN) {
      Close(id);
      return;
    }
    break;
  }
  Serve(id);
}

void HttpTestServer::Serve(int id) {
  for (;;) {
    const auto it = connections_by_id_.find(id);
    if (it == connections_by_id_.end()) return;
    Connection& c = *it->second;
    TestHttpRequest request;
    if (c.busy || c.close_after_write || !ParseRequest(c.in, request)) return;
    ++requests_;
    const TestHttpReply reply = handler_(request);
    if (reply.delay.count() == 0) {
      Respond(id, reply);
      continue;
    }
    c.busy = true;
    auto timer = std::make_shared<cluster::EventLoop::TimerId>(0);
    *timer = loop_->AddTimer(reply.delay, [this, id, reply, timer] {
      timers_.erase(*timer);
      const auto found = connections_by_id_.find(id);
      if (found == connections_by_id_.end()) return;
      found->second->busy = false;
      Respond(id, reply);
      Serve(id);
    });
    timers_.insert(*timer);
    return;
  }
}

void HttpTestServer::Respond(int id, const TestHttpReply& reply) {
  Connection& c = *connections_by_id_.at(id);
  const std::string head =
      StrFormat("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                reply.status, reply.status == 200 ? "OK" : "Status", reply.body.size());
  switch (reply.kind) {
    case TestHttpReply::Kind::kNormal:
      c.out += head + reply.body;
      break;
    case TestHttpReply::Kind::kTruncated:
      c.out += head + reply.body.substr(0, reply.body.size() / 2);
      c.close_after_write = true;
      break;
    case TestHttpReply::Kind::kReset: {
      const linger reset{1, 0};
      setsockopt(c.fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      Close(id);
      return;
    }
    case TestHttpReply::Kind::kGarbage:
      c.out += "this is not http\r\n\r\n";
      c.close_after_write = true;
      break;
    case TestHttpReply::Kind::kSilent:
      return;
  }
  Flush(id);
}

void HttpTestServer::Flush(int id) {
  Connection& c = *connections_by_id_.at(id);
  while (!c.out.empty()) {
    const ssize_t n = write(c.fd.get(), c.out.data(), c.out.size());
    if (n < 0) {
      if (errno == EAGAIN) break;
      Close(id);
      return;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
  if (c.out.empty() && c.close_after_write) {
    Close(id);
    return;
  }
  const Status modified = loop_->ModifyFd(c.fd.get(), c.out.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT);
  if (!modified.ok()) Close(id);
}

void HttpTestServer::Close(int id) {
  const auto it = connections_by_id_.find(id);
  if (it == connections_by_id_.end()) return;
  loop_->UnwatchFd(it->second->fd.get());
  connections_by_id_.erase(it);
}

}  // namespace libra::test
