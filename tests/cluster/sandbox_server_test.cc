#include "cluster/sandbox_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/cluster_test_util.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

using test::Eventually;
using test::IsAlive;
using test::ReadIfExists;
namespace fs = std::filesystem;

TEST(SandboxWireTest, MessagesSurviveTheRoundTrip) {
  SandboxStart start;
  start.id = 42;
  start.name = "tool-7";
  start.argv = {"/bin/sh", "-c", std::string("a\0b", 3), ""};
  start.env = {"PATH=/bin", "X=1"};
  start.input = std::string(100000, 'x');
  start.cpu_seconds = 1;
  start.memory_bytes = 2;
  start.open_files = 3;
  start.file_size_bytes = 4;
  start.max_processes = 5;
  start.max_output_bytes = 6;
  SandboxDone done;
  done.id = 9;
  done.error = "why";
  done.wait_status = 3 << 8;
  done.output_bytes = 11;
  done.output = "out";
  done.stderr_tail = "err\n";
  std::string bytes;
  AppendFrame(start, bytes);
  AppendFrame(SandboxStop{43}, bytes);
  AppendFrame(done, bytes);

  std::string_view rest = bytes;
  const size_t first = WholeFrame(rest);
  ASSERT_GT(first, 0u);
  EXPECT_EQ(DecodeStart(rest.substr(0, first)), start);
  EXPECT_EQ(DecodeStop(rest.substr(0, first)), std::nullopt);  // another type
  rest.remove_prefix(first);
  const size_t second = WholeFrame(rest);
  EXPECT_EQ(DecodeStop(rest.substr(0, second)), SandboxStop{43});
  rest.remove_prefix(second);
  const size_t third = WholeFrame(rest);
  EXPECT_EQ(third, rest.size());
  EXPECT_EQ(DecodeDone(rest), done);
}

TEST(SandboxWireTest, PartialAndMalformedFramesAreNotMessages) {
  std::string bytes;
  AppendFrame(SandboxStop{1}, bytes);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_EQ(WholeFrame(std::string_view(bytes).substr(0, cut)), 0u) << cut;
  }
  // A field short, a field too many, and a string longer than its frame.
  std::string shorter = bytes.substr(0, bytes.size() - 1);
  shorter[0] = static_cast<char>(shorter[0] - 1);
  EXPECT_EQ(DecodeStop(shorter), std::nullopt);
  std::string longer = bytes + "x";
  longer[0] = static_cast<char>(longer[0] + 1);
  EXPECT_EQ(DecodeStop(longer), std::nullopt);
  SandboxDone done;
  done.output = "abc";
  std::string lying;
  AppendFrame(done, lying);
  // The output's length field sits after the header, type, id, error, status and size.
  const size_t output_length = 4 + 1 + 8 + 4 + 8 + 8;
  lying[output_length] = 100;
  EXPECT_EQ(DecodeDone(lying), std::nullopt);
  // A count of strings that cannot fit.
  SandboxStart start;
  start.argv = {"x"};
  std::string counted;
  AppendFrame(start, counted);
  const size_t argv_count = 4 + 1 + 8 + 4;
  counted[argv_count + 7] = 0x7f;
  EXPECT_EQ(DecodeStart(counted), std::nullopt);
}

// A server in a child of the test, its stdin and stdout one end of a socket pair.
class SandboxServerTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& scratch) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    std::vector<std::string> strings = {"server", kServerFlag, std::to_string(getpid()), scratch};
    std::vector<char*> argv;
    for (std::string& s : strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    server_ = fork();
    if (server_ == 0) {
      // As ProcessSet starts it: the socket on 0 and 1, no other fd of the test's (its end of
      // the socket would keep the server from seeing end-of-file).
      if (dup2(fds[1], 0) < 0 || dup2(fds[1], 1) < 0) _exit(99);
      close_range(3, ~0U, 0);
      _exit(ServeSandbox(static_cast<int>(strings.size()), argv.data(), environ));
    }
    close(fds[1]);
    socket_ = fds[0];
  }
  ~SandboxServerTest() override {
    if (socket_ >= 0) close(socket_);
    if (server_ > 0) {
      kill(server_, SIGKILL);
      waitpid(server_, nullptr, 0);
    }
  }

  void Send(const std::string& frame) const {
    ASSERT_EQ(write(socket_, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  }
  void Start(const SandboxStart& start) const {
    std::string frame;
    AppendFrame(start, frame);
    Send(frame);
  }
  // The next Done message, waiting for it as long as the test's deadline.
  std::optional<SandboxDone> NextDone() {
    const auto deadline =
        std::chrono::steady_clock::now() + test::Deadline(std::chrono::seconds(60));
    while (std::chrono::steady_clock::now() < deadline) {
      if (const size_t length = WholeFrame(inbox_)) {
        std::optional<SandboxDone> done = DecodeDone(std::string_view(inbox_).substr(0, length));
        inbox_.erase(0, length);
        return done;
      }
      pollfd readable{socket_, POLLIN, 0};
      poll(&readable, 1, 100);
      char buffer[65536];
      const ssize_t n = read(socket_, buffer, sizeof(buffer));
      if (n == 0) return std::nullopt;
      if (n > 0) inbox_.append(buffer, static_cast<size_t>(n));
    }
    return std::nullopt;
  }
  // The server's wait status once it has exited.
  int WaitForServer() {
    int status = -1;
    if (Eventually([&] { return waitpid(server_, &status, WNOHANG) == server_; })) server_ = 0;
    EXPECT_EQ(server_, 0) << "the server did not exit";
    return status;
  }
  static SandboxStart Shell(uint64_t id, const std::string& script) {
    SandboxStart start;
    start.id = id;
    start.name = "call";
    start.argv = {"/bin/sh", "-c", script};
    start.env = {"PATH=/usr/bin:/bin"};
    return start;
  }
  bool ScratchIsEmpty() const { return fs::is_empty(scratch_.path()); }

  test::ScopedTempDir scratch_;
  test::ScopedTempDir dir_;
  pid_t server_ = 0;
  int socket_ = -1;
  std::string inbox_;
};

TEST_F(SandboxServerTest, AnswersACallWithItsStatusOutputAndStderrAndRemovesItsFolder) {
  StartServer(scratch_.path().string());
  SandboxStart start = Shell(7, "cat; echo \"$HOME\" >&2; echo err >&2; exit 3");
  start.input = "hi";
  Start(start);
  const std::optional<SandboxDone> done = NextDone();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->id, 7u);
  EXPECT_EQ(done->error, "");
  ASSERT_TRUE(WIFEXITED(done->wait_status));
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 3);
  EXPECT_EQ(done->output_bytes, 2);
  EXPECT_EQ(done->output, "hi");
  // HOME is the call's working directory.
  EXPECT_EQ(done->stderr_tail.rfind(scratch_.path().string() + "/call.", 0), 0u)
      << done->stderr_tail;
  EXPECT_TRUE(done->stderr_tail.ends_with("/work\nerr\n")) << done->stderr_tail;
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxServerTest, CountsAnOutputOverTheLimitWithoutSendingIt) {
  StartServer(scratch_.path().string());
  SandboxStart start = Shell(1, "printf 0123456789");
  start.max_output_bytes = 4;
  Start(start);
  const std::optional<SandboxDone> done = NextDone();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->output_bytes, 10);
  EXPECT_EQ(done->output, "");
}

TEST_F(SandboxServerTest, StopEndsACallThatIgnoresSigterm) {
  StartServer(scratch_.path().string());
  Start(Shell(5, "echo $$ > " + dir_.File("tool") + "; trap '' TERM; exec sleep 30"));
  ASSERT_TRUE(Eventually([&] { return !ReadIfExists(dir_.File("tool")).empty(); }));
  std::string frame;
  AppendFrame(SandboxStop{5}, frame);
  Send(frame);
  const std::optional<SandboxDone> done = NextDone();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->id, 5u);
  ASSERT_TRUE(WIFSIGNALED(done->wait_status));
  EXPECT_EQ(WTERMSIG(done->wait_status), SIGTERM);
  EXPECT_FALSE(IsAlive(std::stoi(ReadIfExists(dir_.File("tool")))));
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxServerTest, AnswersACallWhoseFolderCannotBeMade) {
  test::WriteFile(dir_.File("file"), "");
  StartServer(dir_.File("file") + "/scratch");
  Start(Shell(3, "true"));
  const std::optional<SandboxDone> done = NextDone();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->id, 3u);
  EXPECT_EQ(done->error.rfind("cannot create a folder in " + dir_.File("file") + "/scratch: ", 0),
            0u)
      << done->error;
}

TEST_F(SandboxServerTest, RefusesANameThatWouldLeaveTheScratchFolder) {
  StartServer(scratch_.path().string());
  for (const char* name : {"../x", "..", ""}) {
    SandboxStart start = Shell(4, "true");
    start.name = name;
    Start(start);
    const std::optional<SandboxDone> done = NextDone();
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->error, "bad call name '" + std::string(name) + "'");
  }
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxServerTest, EndOfFileStopsEveryCallRemovesTheirFoldersAndExits) {
  StartServer(scratch_.path().string());
  for (const char* name : {"a", "b"}) {
    Start(Shell(1, "echo $$ > " + dir_.File(name) + "; trap '' TERM; exec sleep 30"));
  }
  ASSERT_TRUE(Eventually([&] {
    return !ReadIfExists(dir_.File("a")).empty() && !ReadIfExists(dir_.File("b")).empty();
  }));
  close(socket_);
  socket_ = -1;
  const int status = WaitForServer();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(IsAlive(std::stoi(ReadIfExists(dir_.File("a")))));
  EXPECT_FALSE(IsAlive(std::stoi(ReadIfExists(dir_.File("b")))));
  EXPECT_TRUE(ScratchIsEmpty());
}

TEST_F(SandboxServerTest, AMessageItDoesNotKnowStopsIt) {
  StartServer(scratch_.path().string());
  SandboxDone done;
  std::string frame;
  AppendFrame(done, frame);  // a message only the server sends
  Send(frame);
  const int status = WaitForServer();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(SandboxServerTest, RefusesBadArguments) {
  std::vector<std::string> strings = {"server", kServerFlag};
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  EXPECT_EQ(ServeSandbox(2, argv.data(), environ), 126);
}

}  // namespace
}  // namespace libra::cluster
