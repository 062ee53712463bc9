#include "cluster/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
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
constexpr size_t kStderrTailBytes = 300;
// The longest timeout accepted: a year.
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;
// How long a supervisor asked to stop its call gets before its process group is killed.
constexpr std::chrono::milliseconds kStopGrace{2000};

// A call's supervisor when the carried one cannot run: libra itself again (supervisor.h).
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

// Writes all of `text` into the new file `path`, readable by its owner only.
Status WriteNewFile(const std::string& name, const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  size_t written = 0;
  while (fd.valid() && written < text.size()) {
    const ssize_t n = write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    written += static_cast<size_t>(n);
  }
  if (!fd.valid() || written < text.size()) {
    return Status::Backend(
        name, StrFormat("cannot write the input %s: %s", path.c_str(), Errno().c_str()));
  }
  return Status();
}

// Up to `limit` bytes of the file from `offset` on; "" when it cannot be read.
std::string ReadFrom(const std::string& path, int64_t offset, int64_t limit) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string text;
  if (!fd.valid()) return text;
  text.resize(static_cast<size_t>(limit));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = pread(fd.get(), text.data() + got, text.size() - got,
                            static_cast<off_t>(offset + static_cast<int64_t>(got)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// The last line(s) of the stderr log, at most kStderrTailBytes, whole lines when they fit, lines
// joined with " | ".
std::string StderrTail(const std::string& path) {
  const int64_t size = FileSize(path);
  const int64_t offset = std::max<int64_t>(0, size - 4096);
  std::string text = ReadFrom(path, offset, size - offset);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text.size() > kStderrTailBytes) {
    text.erase(0, text.size() - kStderrTailBytes);
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

// Removes the call's folder and everything the tool left in it.
void RemoveTree(const std::string& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (!error) return;
  MakeRemovable(path);
  fs::remove_all(path, error);
}

// What a call's folder holds: the tool's working directory, its input, and the logs ProcessSet
// writes into its log_dir.
std::string WorkIn(const std::string& dir) { return dir + "/work"; }
std::string InputIn(const std::string& dir) { return dir + "/input"; }
std::string LogIn(const std::string& dir, const std::string& name, const char* suffix) {
  return dir + "/" + name + suffix;
}

// Removes a finished call's folder: the files the sandbox made there and the two folders, and
// the whole tree (RemoveTree, which looks at every entry) only when the tool left something.
void RemoveCallDir(const std::string& dir, const std::string& name) {
  for (const std::string& file :
       {InputIn(dir), LogIn(dir, name, ".out"), LogIn(dir, name, ".err")}) {
    unlink(file.c_str());
  }
  if (rmdir(WorkIn(dir).c_str()) == 0 && rmdir(dir.c_str()) == 0) return;
  RemoveTree(dir);
}

// Runs before main in any program that links the sandbox, so that /proc/self/exe, started with
// kSupervisorFlag, is the supervisor (glibc passes argc, argv and envp to constructors).
__attribute__((constructor)) void RunSupervisorIfAsked(int argc, char** argv, char** envp) {
  if (argc > 1 && argv != nullptr && std::strcmp(argv[1], kSupervisorFlag) == 0) {
    _exit(Supervise(argc, argv, envp));
  }
}

// Asks the supervisor of a running call to stop its call (SIGTERM to it alone) and waits up to
// `grace` for it to exit; true when it did.
bool StopSupervisor(pid_t pid, std::chrono::milliseconds grace) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  kill(pid, SIGTERM);
  pollfd exit_fd{fd, POLLIN, 0};
  const bool exited = ::poll(&exit_fd, 1, static_cast<int>(grace.count())) == 1;
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
  if (!carried_supervisor_ || statvfs(scratch_dir_.c_str(), &fs_info) != 0 ||
      (fs_info.f_flag & ST_NOEXEC) != 0) {
    return;
  }
  // Written whole (through a temporary file, renamed): a call never starts a partial program.
  const std::string path = scratch_dir_ + "/" + kSupervisorFile;
  if (WriteFileAtomically(path, std::string(CarriedSupervisor()), "carried supervisor").ok() &&
      chmod(path.c_str(), 0500) == 0) {
    supervisor_ = path;
  }
}

Sandbox::~Sandbox() {
  for (auto& [id, call] : calls_) {
    if (call.timer != 0) loop_->CancelTimer(call.timer);
    if (call.process.has_value()) {
      // The supervisor kills the call's processes, wherever they went; then its group goes.
      if (const std::optional<pid_t> pid = processes_->pid(*call.process)) {
        StopSupervisor(*pid, kStopGrace);
      }
      processes_->Kill(*call.process);
    }
    if (!call.dir.empty()) RemoveTree(call.dir);
  }
  // The carried supervisor's file goes with the sandbox (a running supervisor keeps its copy).
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
  const Result<std::string> program = ResolveProgram(spec);
  if (!program.ok()) return FailLater(id, program.status());

  // The call's own folder, made private and unique by mkdtemp, holds the tool's input, its logs
  // and its working directory work/, which thus starts empty. The scratch folder is made when a
  // call finds it missing (the first call, or after someone removed it), not checked every time.
  const std::string pattern = scratch_dir_ + "/" + call.name + ".XXXXXX";
  std::string dir = pattern;
  std::error_code error;
  bool made = mkdtemp(dir.data()) != nullptr;
  if (!made && errno == ENOENT) {
    fs::create_directories(scratch_dir_, error);
    dir = pattern;
    made = !error && mkdtemp(dir.data()) != nullptr;
    supervisor_.clear();  // gone with the folder it was in
  }
  if (!made) {
    const std::string why = error ? error.message() : Errno();
    return FailLater(id, Status::Backend(call.name, StrFormat("cannot create a folder in %s: %s",
                                                              scratch_dir_.c_str(), why.c_str())));
  }
  entry.dir = dir;
  const std::string work = WorkIn(dir);
  if (mkdir(work.c_str(), 0700) != 0) {
    return FailLater(id, Status::Backend(call.name, StrFormat("cannot create %s: %s", work.c_str(),
                                                              Errno().c_str())));
  }
  spec.stdin_file = InputIn(dir);
  const Status written = WriteNewFile(call.name, spec.stdin_file, call.input);
  if (!written.ok()) return FailLater(id, written);

  spec.env["HOME"] = work;
  spec.env["TMPDIR"] = work;
  spec.cwd = work;
  spec.log_dir = dir;
  // The supervisor (above) runs the tool under the call's limits; it runs under none itself.
  const SandboxLimits& limits = call.limits;
  if (supervisor_.empty()) PrepareSupervisor();
  spec.argv = {supervisor_,
               kSupervisorFlag,
               std::to_string(getpid()),
               dir,
               scratch_dir_,
               std::to_string(limits.cpu_seconds),
               std::to_string(limits.memory_bytes),
               std::to_string(limits.open_files),
               std::to_string(limits.file_size_bytes),
               std::to_string(limits.max_processes),
               "--",
               *program};
  spec.argv.insert(spec.argv.end(), call.argv.begin() + 1, call.argv.end());
  spec.die_with_libra = true;
  const auto on_exit = [this, id](const ExitStatus& status) { OnExit(id, status); };
  Result<ProcessId> process = processes_->Spawn(spec, on_exit);
  if (!process.ok() && supervisor_ != kLibraItself) {
    // The carried supervisor did not start (a file system or policy that runs no program from
    // there): libra itself is the supervisor from now on.
    unlink(supervisor_.c_str());
    supervisor_ = spec.argv[0] = kLibraItself;
    process = processes_->Spawn(spec, on_exit);
  }
  if (!process.ok()) return FailLater(id, process.status());
  entry.process = *process;
  entry.timer = loop_->AddTimer(std::chrono::duration_cast<EventLoop::Clock::duration>(
                                    std::chrono::duration<double>(call.limits.timeout_s)),
                                [this, id] { OnTimeout(id); });
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
  // SIGTERM to its group: the supervisor then kills every process of the call, wherever it
  // went, and exits; SIGKILL to the group only if it has not within kStopGrace. The result comes
  // once it is gone.
  processes_->Stop(*call.process, kStopGrace);
}

void Sandbox::OnExit(uint64_t id, const ExitStatus& status) {
  Call& call = calls_.at(id);
  call.process.reset();
  if (call.timer != 0) {
    loop_->CancelTimer(call.timer);
    call.timer = 0;
  }
  if (call.timed_out) {
    return Finish(
        id, Status(StatusCode::kTimeout, StrFormat("%s: timed out after %g s", call.name.c_str(),
                                                   call.limits.timeout_s)));
  }
  Finish(id, Outcome(call, status));
}

Result<std::string> Sandbox::Outcome(const Call& call, const ExitStatus& status) const {
  const std::string out = LogIn(call.dir, call.name, ".out");
  const int64_t size = FileSize(out);
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
    const std::string tail = StderrTail(LogIn(call.dir, call.name, ".err"));
    return Status::Backend(call.name,
                           tail.empty() ? status.ToString() : status.ToString() + ": " + tail);
  }
  return ReadFrom(out, 0, size);
}

void Sandbox::Finish(uint64_t id, Result<std::string> result) {
  const auto it = calls_.find(id);
  Call call = std::move(it->second);
  calls_.erase(it);
  if (!call.dir.empty()) RemoveCallDir(call.dir, call.name);
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
