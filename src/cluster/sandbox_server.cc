#include "cluster/sandbox_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cluster/supervisor.h"
#include "common/files.h"
#include "common/strings.h"

namespace libra::cluster {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

enum MessageType : uint8_t { kStartMessage = 1, kStopMessage = 2, kDoneMessage = 3 };
constexpr size_t kHeaderBytes = 4;

// Builds one frame at the end of `out`; the length is filled in by the destructor.
class FrameWriter {
 public:
  FrameWriter(std::string& out, MessageType type) : out_(out), start_(out.size()) {
    out_.append(kHeaderBytes, '\0');
    out_.push_back(static_cast<char>(type));
  }
  ~FrameWriter() {
    const auto length = static_cast<uint32_t>(out_.size() - start_ - kHeaderBytes);
    std::memcpy(out_.data() + start_, &length, sizeof(length));
  }
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  void Int(int64_t value) { out_.append(reinterpret_cast<const char*>(&value), sizeof(value)); }
  void Str(std::string_view text) {
    const auto length = static_cast<uint32_t>(text.size());
    out_.append(reinterpret_cast<const char*>(&length), sizeof(length));
    out_.append(text);
  }
  void Strs(const std::vector<std::string>& texts) {
    Int(static_cast<int64_t>(texts.size()));
    for (const std::string& text : texts) Str(text);
  }

 private:
  std::string& out_;
  size_t start_;
};

// Reads the fields of one whole frame; any read past its end makes it not ok().
class FrameReader {
 public:
  FrameReader(std::string_view frame, MessageType type) : rest_(frame) {
    ok_ = frame.size() > kHeaderBytes && WholeFrame(frame) == frame.size() &&
          static_cast<uint8_t>(frame[kHeaderBytes]) == type;
    if (ok_) rest_.remove_prefix(kHeaderBytes + 1);
  }
  void Int(int64_t& value) { Bytes(&value, sizeof(value)); }
  void Uint(uint64_t& value) { Bytes(&value, sizeof(value)); }
  void Str(std::string& text) {
    uint32_t length = 0;
    Bytes(&length, sizeof(length));
    if (!ok_ || length > rest_.size()) {
      ok_ = false;
      return;
    }
    text.assign(rest_.substr(0, length));
    rest_.remove_prefix(length);
  }
  void Strs(std::vector<std::string>& texts) {
    int64_t count = 0;
    Int(count);
    // Each string takes at least its length's 4 bytes.
    if (!ok_ || count < 0 || static_cast<uint64_t>(count) > rest_.size() / 4) {
      ok_ = false;
      return;
    }
    texts.resize(static_cast<size_t>(count));
    for (std::string& text : texts) Str(text);
  }
  // Every field read and nothing left over.
  bool done() const { return ok_ && rest_.empty(); }

 private:
  void Bytes(void* value, size_t size) {
    if (!ok_ || rest_.size() < size) {
      ok_ = false;
      return;
    }
    std::memcpy(value, rest_.data(), size);
    rest_.remove_prefix(size);
  }

  std::string_view rest_;
  bool ok_ = false;
};

std::string Errno() { return std::strerror(errno); }

// Writes all of `text` into the new file `path`, readable by its owner only.
bool WriteNewFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  size_t written = 0;
  while (fd >= 0 && written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    written += static_cast<size_t>(n);
  }
  const int saved = errno;
  if (fd >= 0) close(fd);
  errno = saved;
  return fd >= 0 && written == text.size();
}

// Up to `limit` bytes of the file from `offset` on; "" when it cannot be read.
std::string ReadFrom(const std::string& path, int64_t offset, int64_t limit) {
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  text.resize(static_cast<size_t>(std::max<int64_t>(0, limit)));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = pread(fd, text.data() + got, text.size() - got,
                            static_cast<off_t>(offset + static_cast<int64_t>(got)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  return text;
}

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// Makes every folder of the tree under `path` (not following links) accessible to its owner, so
// that a tool that took the permissions off its folders cannot keep them from being removed.
void MakeRemovable(const fs::path& path) {
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(path, error))) return;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, error);
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    MakeRemovable(it->path());
  }
}

// What a call's folder holds: the tool's working directory, its input, and its logs.
std::string WorkIn(const std::string& dir) { return dir + "/work"; }
std::string InputIn(const std::string& dir) { return dir + "/input"; }
std::string LogIn(const std::string& dir, const std::string& name, const char* suffix) {
  return dir + "/" + name + suffix;
}

// Whether `libra`, the server's parent, is gone or going. A dying process's files are closed,
// which is the end-of-file the server reads, before the kernel hands its children to a new
// parent: in between, getppid() still names it, but its task is exiting (PF_EXITING in the
// flags of /proc/PID/stat, set as its exit begins) or a zombie.
bool LibraGone(pid_t libra) {
  if (getppid() != libra) return true;
  // Unreadable (no /proc): only the new parent tells.
  const std::vector<std::string> fields = ProcessStatFields(libra);
  if (fields.size() < 7) return false;
  constexpr unsigned long long kExiting = 0x4;  // PF_EXITING
  return fields[0] == "Z" || fields[0] == "X" ||
         (std::strtoull(fields[6].c_str(), nullptr, 10) & kExiting) != 0;
}

// Removes a finished call's folder: the files made there and the two folders, and the whole
// tree (which looks at every entry) only when the tool left something.
void RemoveCallDir(const std::string& dir, const std::string& name) {
  for (const std::string& file :
       {InputIn(dir), LogIn(dir, name, ".out"), LogIn(dir, name, ".err")}) {
    unlink(file.c_str());
  }
  if (rmdir(WorkIn(dir).c_str()) == 0 && rmdir(dir.c_str()) == 0) return;
  std::error_code error;
  fs::remove_all(dir, error);
  if (!error) return;
  MakeRemovable(dir);
  fs::remove_all(dir, error);
}

// Owns an fd (the server does not link the cluster module's UniqueFd).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// A call's supervisor, in the forked child: the call's files on its stdio, the call's working
// directory, every signal at its default disposition and unblocked, no other fd of the server's.
[[noreturn]] void RunSupervisor(pid_t server, const std::array<int, 3>& stdio,
                                const std::string& work, std::vector<char*>& argv,
                                std::vector<char*>& envp) {
  setpgid(0, 0);
  // The server died before the signal was armed: the signal will never come.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != server) _exit(126);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signo = 1; signo < NSIG; ++signo) sigaction(signo, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // The server's fds 0-2 are open, so the call's files are above them.
  for (int target = 0; target < 3; ++target) {
    if (dup2(stdio[static_cast<size_t>(target)], target) < 0) _exit(126);
  }
  if (chdir(work.c_str()) != 0) _exit(126);
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) close(fd);
  }
  _exit(Supervise(static_cast<int>(argv.size()) - 1, argv.data(), envp.data()));
}

// The supervisor's arguments (supervisor.h) for `start` in `dir`, with `server` as the parent it
// watches.
std::vector<std::string> SupervisorArgs(const SandboxStart& start, pid_t server,
                                        const std::string& dir, const std::string& scratch) {
  std::vector<std::string> args = {kSupervisorFile,
                                   kSupervisorFlag,
                                   std::to_string(server),
                                   dir,
                                   scratch,
                                   std::to_string(start.cpu_seconds),
                                   std::to_string(start.memory_bytes),
                                   std::to_string(start.open_files),
                                   std::to_string(start.file_size_bytes),
                                   std::to_string(start.max_processes),
                                   "--"};
  args.insert(args.end(), start.argv.begin(), start.argv.end());
  return args;
}

class Server {
 public:
  Server(pid_t libra, std::string scratch) : libra_(libra), scratch_(std::move(scratch)) {}
  int Run();

 private:
  struct Call {
    uint64_t id = 0;
    std::string name;
    std::string dir;
    int64_t max_output_bytes = 0;
    // When its process group is killed, once asked to stop.
    std::optional<Clock::time_point> kill_at;
  };

  void Start(const SandboxStart& start);
  void Stop(uint64_t id);
  // Reaps the exited supervisors, answering for their calls.
  void Reap();
  // Reads libra's messages; false once libra has closed its end or sent a bad message.
  bool ReadMessages();
  void Send(const SandboxDone& done);
  // Milliseconds until the next kill is due, -1 when none is.
  int NextKillMs() const;
  void KillOverdue();
  // Reads the signals that arrived; true when one asks the server to stop (not SIGCHLD).
  bool DrainSignals();
  // Stops every call, waits for them (at most the grace, then SIGKILL), removes their folders.
  void StopAll();

  pid_t libra_;
  std::string scratch_;
  Fd signals_;
  std::map<pid_t, Call> calls_;
  std::string inbox_;
  bool stopping_ = false;
};

void Server::Start(const SandboxStart& start) {
  SandboxDone failed;
  failed.id = start.id;
  // libra checks the names (ValidateProcessSpec) by the same rule; a name that would leave the
  // scratch folder never passes here either.
  if (!IsPlainFileName(start.name)) {
    failed.error = "bad call name '" + start.name + "'";
    return Send(failed);
  }
  // The call's own folder, made private and unique by mkdtemp, holds the tool's input, its logs
  // and its working directory work/, which thus starts empty. The scratch folder is made when a
  // call finds it missing, not checked every time.
  const std::string pattern = scratch_ + "/" + start.name + ".XXXXXX";
  std::string dir = pattern;
  std::error_code error;
  bool made = mkdtemp(dir.data()) != nullptr;
  if (!made && errno == ENOENT) {
    fs::create_directories(scratch_, error);
    dir = pattern;
    made = !error && mkdtemp(dir.data()) != nullptr;
  }
  if (!made) {
    failed.error = StrFormat("cannot create a folder in %s: %s", scratch_.c_str(),
                             error ? error.message().c_str() : Errno().c_str());
    return Send(failed);
  }
  const std::string work = WorkIn(dir);
  const std::string input = InputIn(dir);
  const std::string out = LogIn(dir, start.name, ".out");
  const std::string err = LogIn(dir, start.name, ".err");
  if (mkdir(work.c_str(), 0700) != 0) {
    failed.error = StrFormat("cannot create %s: %s", work.c_str(), Errno().c_str());
  } else if (!WriteNewFile(input, start.input)) {
    failed.error = StrFormat("cannot write the input %s: %s", input.c_str(), Errno().c_str());
  }
  const int log_flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  const Fd stdin_fd(failed.error.empty() ? open(input.c_str(), O_RDONLY | O_CLOEXEC) : -1);
  const Fd stdout_fd(failed.error.empty() ? open(out.c_str(), log_flags, 0644) : -1);
  const Fd stderr_fd(failed.error.empty() ? open(err.c_str(), log_flags, 0644) : -1);
  if (failed.error.empty() && (stdin_fd.get() < 0 || stdout_fd.get() < 0 || stderr_fd.get() < 0)) {
    failed.error =
        StrFormat("cannot open the call's files in %s: %s", dir.c_str(), Errno().c_str());
  }
  if (!failed.error.empty()) {
    RemoveCallDir(dir, start.name);
    return Send(failed);
  }

  const pid_t server = getpid();
  std::vector<std::string> args = SupervisorArgs(start, server, dir, scratch_);
  // The tool's environment, with HOME and TMPDIR its working directory.
  std::vector<std::string> env = start.env;
  env.push_back("HOME=" + work);
  env.push_back("TMPDIR=" + work);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    RunSupervisor(server, {stdin_fd.get(), stdout_fd.get(), stderr_fd.get()}, work, argv, envp);
  }
  if (pid < 0) {
    failed.error = "cannot start its supervisor: " + Errno();
    RemoveCallDir(dir, start.name);
    return Send(failed);
  }
  // Also here, so that a stop right away reaches the group.
  setpgid(pid, pid);
  calls_[pid] = Call{start.id, start.name, dir, start.max_output_bytes, std::nullopt};
}

void Server::Stop(uint64_t id) {
  // Stops are rare (timeouts): a look through the calls is enough.
  const auto it = std::find_if(calls_.begin(), calls_.end(),
                               [id](const auto& entry) { return entry.second.id == id; });
  if (it == calls_.end()) return;
  Call& call = it->second;
  if (call.kill_at.has_value()) return;
  // The supervisor then kills every process of the call, wherever it went, and exits.
  kill(-it->first, SIGTERM);
  call.kill_at = Clock::now() + std::chrono::milliseconds(kStopGraceMs);
}

void Server::Reap() {
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    const auto it = calls_.find(pid);
    if (it == calls_.end()) continue;
    // Whatever the supervisor left behind in its group goes with it.
    kill(-pid, SIGKILL);
    Call call = std::move(it->second);
    calls_.erase(it);
    if (stopping_) {
      RemoveCallDir(call.dir, call.name);
      continue;
    }
    SandboxDone done;
    done.id = call.id;
    done.wait_status = status;
    const std::string out = LogIn(call.dir, call.name, ".out");
    const std::string err = LogIn(call.dir, call.name, ".err");
    done.output_bytes = FileSize(out);
    if (call.max_output_bytes == 0 || done.output_bytes <= call.max_output_bytes) {
      done.output = ReadFrom(out, 0, done.output_bytes);
    }
    const int64_t err_bytes = FileSize(err);
    const int64_t tail_from = std::max<int64_t>(0, err_bytes - kStderrTailBytes);
    done.stderr_tail = ReadFrom(err, tail_from, err_bytes - tail_from);
    RemoveCallDir(call.dir, call.name);
    Send(done);
  }
}

bool Server::ReadMessages() {
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n > 0) {
      inbox_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;  // end-of-file or an error: libra is gone
  }
  size_t used = 0;
  while (const size_t length = WholeFrame(std::string_view(inbox_).substr(used))) {
    const std::string_view frame = std::string_view(inbox_).substr(used, length);
    used += length;
    if (std::optional<SandboxStart> start = DecodeStart(frame)) {
      Start(*start);
    } else if (std::optional<SandboxStop> stop = DecodeStop(frame)) {
      Stop(stop->id);
    } else {
      return false;
    }
  }
  inbox_.erase(0, used);
  return true;
}

void Server::Send(const SandboxDone& done) {
  std::string frame;
  AppendFrame(done, frame);
  size_t sent = 0;
  while (sent < frame.size() && !stopping_) {
    const ssize_t n = write(STDOUT_FILENO, frame.data() + sent, frame.size() - sent);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd writable{STDOUT_FILENO, POLLOUT, 0};
      poll(&writable, 1, -1);
    } else if (!(n < 0 && errno == EINTR)) {
      stopping_ = true;  // libra is gone
    }
  }
}

int Server::NextKillMs() const {
  std::optional<Clock::time_point> next;
  for (const auto& [pid, call] : calls_) {
    if (call.kill_at.has_value() && (!next.has_value() || *call.kill_at < *next)) {
      next = call.kill_at;
    }
  }
  if (!next.has_value()) return -1;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, wait.count()));
}

void Server::KillOverdue() {
  const Clock::time_point now = Clock::now();
  for (auto& [pid, call] : calls_) {
    if (call.kill_at.has_value() && *call.kill_at <= now) kill(-pid, SIGKILL);
  }
}

bool Server::DrainSignals() {
  bool stop = false;
  signalfd_siginfo info[16];
  ssize_t n = 0;
  while ((n = read(signals_.get(), info, sizeof(info))) > 0) {
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(info[0]); ++i) {
      stop = stop || info[i].ssi_signo != SIGCHLD;
    }
  }
  return stop;
}

void Server::StopAll() {
  stopping_ = true;
  for (auto& [pid, call] : calls_) {
    kill(-pid, SIGTERM);
    call.kill_at = Clock::now() + std::chrono::milliseconds(kStopGraceMs);
  }
  // The grace, then SIGKILL and as long again for the groups to go.
  for (int round = 0; round < 2 && !calls_.empty(); ++round) {
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(kStopGraceMs);
    while (!calls_.empty() && Clock::now() < deadline) {
      pollfd exited{signals_.get(), POLLIN, 0};
      poll(&exited, 1, 50);
      DrainSignals();
      Reap();
    }
    for (const auto& [pid, call] : calls_) kill(-pid, SIGKILL);
  }
  for (const auto& [pid, call] : calls_) RemoveCallDir(call.dir, call.name);
  calls_.clear();
}

int Server::Run() {
  sigset_t watched;
  sigemptyset(&watched);
  for (const int signo : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&watched, signo);
  sigprocmask(SIG_BLOCK, &watched, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signals_.reset(signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK));
  if (signals_.get() < 0) return 126;
  // fds 0 and 1 are the same socket: non-blocking for both.
  fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
  while (!stopping_) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signals_.get(), POLLIN, 0}};
    if (poll(fds, 2, NextKillMs()) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) {
      if (DrainSignals()) stopping_ = true;
      Reap();
    }
    if (fds[0].revents != 0 && !ReadMessages()) stopping_ = true;
    KillOverdue();
  }
  StopAll();
  if (LibraGone(libra_)) {
    // libra is gone, and with it whoever would have removed the carried program and the
    // scratch folder.
    unlink((scratch_ + "/" + kSupervisorFile).c_str());
    rmdir(scratch_.c_str());
  }
  return 0;
}

}  // namespace

void AppendFrame(const SandboxStart& message, std::string& out) {
  FrameWriter w(out, kStartMessage);
  w.Int(static_cast<int64_t>(message.id));
  w.Str(message.name);
  w.Strs(message.argv);
  w.Strs(message.env);
  w.Str(message.input);
  for (const int64_t limit :
       {message.cpu_seconds, message.memory_bytes, message.open_files, message.file_size_bytes,
        message.max_processes, message.max_output_bytes}) {
    w.Int(limit);
  }
}

void AppendFrame(const SandboxStop& message, std::string& out) {
  FrameWriter w(out, kStopMessage);
  w.Int(static_cast<int64_t>(message.id));
}

void AppendFrame(const SandboxDone& message, std::string& out) {
  FrameWriter w(out, kDoneMessage);
  w.Int(static_cast<int64_t>(message.id));
  w.Str(message.error);
  w.Int(message.wait_status);
  w.Int(message.output_bytes);
  w.Str(message.output);
  w.Str(message.stderr_tail);
}

size_t WholeFrame(std::string_view bytes) {
  uint32_t length = 0;
  if (bytes.size() < kHeaderBytes) return 0;
  std::memcpy(&length, bytes.data(), sizeof(length));
  return bytes.size() - kHeaderBytes >= length ? kHeaderBytes + length : 0;
}

std::optional<SandboxStart> DecodeStart(std::string_view frame) {
  FrameReader r(frame, kStartMessage);
  SandboxStart message;
  r.Uint(message.id);
  r.Str(message.name);
  r.Strs(message.argv);
  r.Strs(message.env);
  r.Str(message.input);
  for (int64_t* limit :
       {&message.cpu_seconds, &message.memory_bytes, &message.open_files, &message.file_size_bytes,
        &message.max_processes, &message.max_output_bytes}) {
    r.Int(*limit);
  }
  if (!r.done() || message.argv.empty()) return std::nullopt;
  return message;
}

std::optional<SandboxStop> DecodeStop(std::string_view frame) {
  FrameReader r(frame, kStopMessage);
  SandboxStop message;
  r.Uint(message.id);
  if (!r.done()) return std::nullopt;
  return message;
}

std::optional<SandboxDone> DecodeDone(std::string_view frame) {
  FrameReader r(frame, kDoneMessage);
  SandboxDone message;
  r.Uint(message.id);
  r.Str(message.error);
  r.Int(message.wait_status);
  r.Int(message.output_bytes);
  r.Str(message.output);
  r.Str(message.stderr_tail);
  if (!r.done()) return std::nullopt;
  return message;
}

int ServeSandbox(int argc, char** argv, char** /*envp*/) {
  if (argc != 4 || std::string(argv[1]) != kServerFlag) return 126;
  Server server(static_cast<pid_t>(std::atol(argv[2])), argv[3]);
  return server.Run();
}

}  // namespace libra::cluster
