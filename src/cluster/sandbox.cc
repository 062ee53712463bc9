#include "cluster/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/supervisor.h"
#include "common/files.h"
#include "common/strings.h"

namespace libra::cluster {
namespace {

namespace fs = std::filesystem;

// How much of the tool's stderr an error message quotes.
constexpr size_t kQuotedStderrBytes = 300;
// The longest timeout accepted: a year.
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;
// How long the server gets to stop its calls and exit (sandbox_server.h: the grace, then SIGKILL
// and as long again).
constexpr std::chrono::milliseconds kServerStopWait{2 * kStopGraceMs + 1000};

// The server and supervisor when the carried one cannot run: libra itself again.
constexpr char kLibraItself[] = "/proc/self/exe";

std::string Errno() { return std::strerror(errno); }

}  // namespace
}  // namespace libra::cluster

// The libra_supervisor program (CMakeLists.txt, stripped and static), carried in the read-only
// data of every program that links the sandbox.
asm(".pushsection .rodata\n"
    ".balign 16\n"
    ".globl libra_carried_supervisor_begin\n"
    ".hidden libra_carried_supervisor_begin\n"
    "libra_carried_supervisor_begin:\n"
    ".incbin \"" LIBRA_SUPERVISOR_IMAGE
    "\"\n"
    ".globl libra_carried_supervisor_end\n"
    ".hidden libra_carried_supervisor_end\n"
    "libra_carried_supervisor_end:\n"
    ".popsection\n");
extern "C" const char libra_carried_supervisor_begin[];
extern "C" const char libra_carried_supervisor_end[];

namespace libra::cluster {
namespace {

std::string_view CarriedSupervisor() {
  return {libra_carried_supervisor_begin,
          static_cast<size_t>(libra_carried_supervisor_end - libra_carried_supervisor_begin)};
}

Status ValidateLimits(const std::string& name, const SandboxLimits& limits) {
  if (!std::isfinite(limits.timeout_s) || limits.timeout_s <= 0 ||
      limits.timeout_s > kMaxTimeoutS) {
    return Status::InvalidArgument(
        StrFormat("%s: the timeout must be positive (got %g s)", name.c_str(), limits.timeout_s));
  }
  if (limits.cpu_seconds < 0 || limits.memory_bytes < 0 || limits.open_files < 0 ||
      limits.max_output_bytes < 0 || limits.file_size_bytes < 0 || limits.max_processes < 0) {
    return Status::InvalidArgument(name + ": a sandbox limit is negative");
  }
  return Status();
}

// The last line(s) of the end of a stderr log, at most kQuotedStderrBytes, whole lines when they
// fit, lines joined with " | ".
std::string QuotedStderr(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text.size() > kQuotedStderrBytes) {
    text.erase(0, text.size() - kQuotedStderrBytes);
    const size_t newline = text.find('\n');
    if (newline != std::string::npos) {
      // Drop the cut line.
      text.erase(0, newline + 1);
    } else {
      // One long line: start on a whole UTF-8 character.
      size_t start = 0;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        ++start;
      }
      text.erase(0, start);
    }
  }
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  text.erase(0, start);
  std::string joined;
  for (const char c : text) {
    if (c == '\n') {
      joined += " | ";
    } else {
      joined += c;
    }
  }
  return joined;
}

ExitStatus FromWaitStatus(int64_t wait_status) {
  const int status = static_cast<int>(wait_status);
  ExitStatus exit;
  if (WIFEXITED(status)) {
    exit.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

// Runs before main in any program that links the sandbox, so that /proc/self/exe, started with
// kServerFlag or kSupervisorFlag, is the server or a supervisor (glibc passes argc, argv and
// envp to constructors).
__attribute__((constructor)) void RunSandboxProgramIfAsked(int argc, char** argv, char** envp) {
  if (argc > 1 && argv != nullptr && std::strcmp(argv[1], kServerFlag) == 0) {
    _exit(ServeSandbox(argc, argv, envp));
  }
  if (argc > 1 && argv != nullptr && std::strcmp(argv[1], kSupervisorFlag) == 0) {
    _exit(Supervise(argc, argv, envp));
  }
}

// Asks a process to stop (SIGTERM to it alone) and waits up to `wait` for it to exit; true when
// it did.
bool StopAndWait(pid_t pid, std::chrono::milliseconds wait) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  kill(pid, SIGTERM);
  pollfd exit_fd{fd, POLLIN, 0};
  const bool exited = ::poll(&exit_fd, 1, static_cast<int>(wait.count())) == 1;
  close(fd);
  return exited;
}

}  // namespace

Sandbox::Sandbox(EventLoop* loop, ProcessSet* processes, std::string scratch_dir, int max_running,
                 bool carried_supervisor)
    : loop_(loop),
      processes_(processes),
      scratch_dir_(fs::absolute(scratch_dir).lexically_normal().string()),
      carried_supervisor_(carried_supervisor),
      max_running_(max_running) {}

void Sandbox::PrepareSupervisor() {
  supervisor_ = kLibraItself;
  struct statvfs fs_info {};
  std::error_code error;
  fs::create_directories(scratch_dir_, error);
  if (!carried_supervisor_ || statvfs(scratch_dir_.c_str(), &fs_info) != 0 ||
      (fs_info.f_flag & ST_NOEXEC) != 0) {
    return;
  }
  // Written whole (through a temporary file, renamed): a server never starts a partial program.
  const std::string path = scratch_dir_ + "/" + kSupervisorFile;
  if (WriteFileAtomically(path, std::string(CarriedSupervisor()), "carried supervisor").ok() &&
      chmod(path.c_str(), 0500) == 0) {
    supervisor_ = path;
  }
}

Sandbox::~Sandbox() {
  for (auto& [id, call] : calls_) {
    if (call.timer != 0) loop_->CancelTimer(call.timer);
  }
  StopServer();
  // The carried supervisor's file goes with the sandbox (a running program keeps its copy).
  if (!supervisor_.empty() && supervisor_ != kLibraItself) unlink(supervisor_.c_str());
}

void Sandbox::Run(const SandboxCall& call, Callback done) {
  const uint64_t id = next_id_++;
  Call& entry = calls_[id];
  entry.name = call.name;
  entry.limits = call.limits;
  entry.done = std::move(done);
  if (max_running_ > 0 && started_ >= max_running_) {
    waiting_.emplace_back(id, call);
    return;
  }
  Start(id, call);
}

void Sandbox::Start(uint64_t id, const SandboxCall& call) {
  Call& entry = calls_.at(id);
  entry.started = true;
  ++started_;

  ProcessSpec spec;
  spec.name = call.name;
  spec.argv = call.argv;
  spec.env = call.env;
  Status valid = ValidateProcessSpec(spec);
  if (valid.ok()) valid = ValidateLimits(call.name, call.limits);
  if (!valid.ok()) return FailLater(id, valid);
  const std::map<std::string, std::string> env = ChildEnvironment(spec);
  const Result<std::string> program = ResolveProgram(spec, env);
  if (!program.ok()) return FailLater(id, program.status());
  const Status server = StartServer();
  if (!server.ok()) return FailLater(id, server);

  SandboxStart start;
  start.id = id;
  start.name = call.name;
  start.argv = call.argv;
  start.argv[0] = *program;
  for (const auto& [name, value] : env) {
    if (name != "HOME" && name != "TMPDIR") start.env.push_back(name + "=" + value);
  }
  start.input = call.input;
  const SandboxLimits& limits = call.limits;
  start.cpu_seconds = limits.cpu_seconds;
  start.memory_bytes = limits.memory_bytes;
  start.open_files = limits.open_files;
  start.file_size_bytes = limits.file_size_bytes;
  start.max_processes = limits.max_processes;
  start.max_output_bytes = limits.max_output_bytes;
  std::string frame;
  AppendFrame(start, frame);
  Send(frame);
  entry.at_server = true;
  entry.timer = loop_->AddTimer(std::chrono::duration_cast<EventLoop::Clock::duration>(
                                    std::chrono::duration<double>(call.limits.timeout_s)),
                                [this, id] { OnTimeout(id); });
}

Status Sandbox::StartServer() {
  if (server_.has_value()) return Status();
  if (supervisor_.empty() ||
      (supervisor_ != kLibraItself && access(supervisor_.c_str(), F_OK) != 0)) {
    PrepareSupervisor();
  }
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::Backend("sandbox-server", "cannot create its socket: " + Errno());
  }
  UniqueFd ours(fds[0]);
  const UniqueFd theirs(fds[1]);
  ProcessSpec spec;
  spec.name = "sandbox-server";
  spec.argv = {supervisor_, kServerFlag, std::to_string(getpid()), scratch_dir_};
  spec.stdio_fd = theirs.get();
  spec.die_with_libra = true;
  const auto on_exit = [this](const ExitStatus& status) {
    server_.reset();
    OnServerGone("the sandbox server exited: " + status.ToString());
  };
  Result<ProcessId> process = processes_->Spawn(spec, on_exit);
  if (!process.ok() && supervisor_ != kLibraItself) {
    // The carried program did not start (a file system or policy that runs no program from
    // there): libra itself is the server and the supervisors from now on.
    unlink(supervisor_.c_str());
    supervisor_ = spec.argv[0] = kLibraItself;
    process = processes_->Spawn(spec, on_exit);
  }
  if (!process.ok()) return process.status();
  fcntl(ours.get(), F_SETFL, fcntl(ours.get(), F_GETFL) | O_NONBLOCK);
  const Status watched =
      loop_->WatchFd(ours.get(), EPOLLIN, [this](uint32_t events) { OnServerReady(events); });
  if (!watched.ok()) {
    processes_->Kill(*process);
    return watched;
  }
  server_ = *process;
  socket_ = std::move(ours);
  return Status();
}

void Sandbox::Send(std::string_view frame) {
  outbox_.append(frame);
  Flush();
}

void Sandbox::Flush() {
  // Without a socket (the server is exiting) the calls fail when its exit comes.
  if (!socket_.valid()) return;
  size_t sent = 0;
  while (sent < outbox_.size()) {
    const ssize_t n =
        send(socket_.get(), outbox_.data() + sent, outbox_.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // Full (the rest goes when it is writable again), or the server is gone (its exit is on
      // the way).
      break;
    }
  }
  outbox_.erase(0, sent);
  loop_->ModifyFd(socket_.get(), outbox_.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT);
}

void Sandbox::OnServerReady(uint32_t events) {
  if ((events & EPOLLOUT) != 0) Flush();
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) return;
  const std::weak_ptr<int> alive = alive_;
  bool malformed = false;
  if (ReadReplies(alive, &malformed) || alive.expired()) return;
  if (!malformed) {
    // End-of-file: it is exiting, and its exit (ProcessSet) finishes its calls.
    loop_->UnwatchFd(socket_.get());
    socket_.reset();
    return;
  }
  processes_->Kill(*server_);
  server_.reset();
  OnServerGone("the sandbox server sent a malformed reply");
}

bool Sandbox::ReadReplies(const std::weak_ptr<int>& alive, bool* malformed) {
  bool open = true;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(socket_.get(), buffer, sizeof(buffer));
    if (n > 0) {
      inbox_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    open = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    break;
  }
  // Every whole reply first, then the callbacks, which may start calls or destroy the sandbox.
  std::vector<std::pair<uint64_t, Result<std::string>>> finished;
  size_t used = 0;
  while (const size_t length = WholeFrame(std::string_view(inbox_).substr(used))) {
    const std::optional<SandboxDone> done =
        DecodeDone(std::string_view(inbox_).substr(used, length));
    used += length;
    if (!done.has_value()) {
      if (malformed != nullptr) *malformed = true;
      open = false;
      break;
    }
    const auto it = calls_.find(done->id);
    if (it == calls_.end() || !it->second.started) continue;
    finished.emplace_back(done->id, Outcome(it->second, *done));
  }
  inbox_.erase(0, used);
  for (auto& [id, result] : finished) {
    if (calls_.count(id) == 0) continue;
    Finish(id, std::move(result));
    if (alive.expired()) return false;
  }
  return open;
}

void Sandbox::OnServerGone(const std::string& why) {
  // What it answered before it went still counts.
  const std::weak_ptr<int> alive = alive_;
  if (socket_.valid()) {
    ReadReplies(alive, nullptr);
    if (alive.expired()) return;
    loop_->UnwatchFd(socket_.get());
    socket_.reset();
  }
  outbox_.clear();
  inbox_.clear();
  std::vector<uint64_t> lost;
  for (const auto& [id, call] : calls_) {
    if (call.at_server) lost.push_back(id);
  }
  for (const uint64_t id : lost) {
    const auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    if (it->second.timer != 0) loop_->CancelTimer(it->second.timer);
    it->second.timer = 0;
    Finish(id, Status::Backend(it->second.name, why));
    if (alive.expired()) return;
  }
}

void Sandbox::StopServer() {
  if (!server_.has_value()) return;
  if (socket_.valid()) loop_->UnwatchFd(socket_.get());
  // End-of-file on its stdin, and SIGTERM: it stops every call, removes their folders and exits.
  socket_.reset();
  if (const std::optional<pid_t> pid = processes_->pid(*server_)) {
    StopAndWait(*pid, kServerStopWait);
  }
  // Reaps it, or kills it if it is still there; its on_exit never runs.
  processes_->Kill(*server_);
  server_.reset();
}

void Sandbox::FailLater(uint64_t id, Status status) {
  calls_[id].timer = loop_->AddTimer(std::chrono::milliseconds(0), [this, id, status] {
    calls_[id].timer = 0;
    Finish(id, status);
  });
}

void Sandbox::OnTimeout(uint64_t id) {
  Call& call = calls_.at(id);
  call.timer = 0;
  call.timed_out = true;
  // The server sends its supervisor SIGTERM, which kills every process of the call, wherever it
  // went; SIGKILL to its group only if it has not exited within the grace. The result comes once
  // it is gone.
  std::string frame;
  AppendFrame(SandboxStop{id}, frame);
  Send(frame);
}

Result<std::string> Sandbox::Outcome(const Call& call, const SandboxDone& done) const {
  if (!done.error.empty()) return Status::Backend(call.name, done.error);
  if (call.timed_out) {
    return Status(StatusCode::kTimeout,
                  StrFormat("%s: timed out after %g s", call.name.c_str(), call.limits.timeout_s));
  }
  const ExitStatus status = FromWaitStatus(done.wait_status);
  const int64_t size = done.output_bytes;
  const int64_t max_output = call.limits.max_output_bytes;
  const int64_t max_file = call.limits.file_size_bytes;
  // Past file_size_bytes the kernel stopped the tool writing its stdout with SIGXFSZ.
  const bool stdout_hit_file_limit = status.signal == SIGXFSZ && max_file > 0 && size >= max_file;
  if ((max_output > 0 && size > max_output) || stdout_hit_file_limit) {
    const int64_t limit = max_output > 0 && size > max_output ? max_output : max_file;
    return Status::Backend(call.name,
                           StrFormat("output exceeds %lld bytes", static_cast<long long>(limit)));
  }
  if (!status.success()) {
    const std::string tail = QuotedStderr(done.stderr_tail);
    return Status::Backend(call.name,
                           tail.empty() ? status.ToString() : status.ToString() + ": " + tail);
  }
  return done.output;
}

void Sandbox::Finish(uint64_t id, Result<std::string> result) {
  const auto it = calls_.find(id);
  Call call = std::move(it->second);
  calls_.erase(it);
  if (call.timer != 0) loop_->CancelTimer(call.timer);
  if (call.started) --started_;
  while (!waiting_.empty() && (max_running_ == 0 || started_ < max_running_)) {
    auto [next, next_call] = std::move(waiting_.front());
    waiting_.pop_front();
    Start(next, next_call);
  }
  // Last: the callback may destroy the sandbox.
  call.done(std::move(result));
}

}  // namespace libra::cluster
