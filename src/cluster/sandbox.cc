#include "cluster/sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/strings.h"

namespace libra::cluster {
namespace {

namespace fs = std::filesystem;

// How much of the tool's stderr an error message quotes.
constexpr size_t kStderrTailBytes = 300;
// The longest timeout accepted: a year.
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;

std::string Errno() { return std::strerror(errno); }

Status ValidateLimits(const std::string& name, const SandboxLimits& limits) {
  if (!std::isfinite(limits.timeout_s) || limits.timeout_s <= 0 ||
      limits.timeout_s > kMaxTimeoutS) {
    return Status::InvalidArgument(
        StrFormat("%s: the timeout must be positive (got %g s)", name.c_str(), limits.timeout_s));
  }
  if (limits.cpu_seconds < 0 || limits.memory_bytes < 0 || limits.open_files < 0 ||
      limits.max_output_bytes < 0 || limits.file_size_bytes < 0) {
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

}  // namespace

Sandbox::Sandbox(EventLoop* loop, ProcessSet* processes, std::string scratch_dir, int max_running)
    : loop_(loop),
      processes_(processes),
      scratch_dir_(std::move(scratch_dir)),
      max_running_(max_running) {}

Sandbox::~Sandbox() {
  for (auto& [id, call] : calls_) {
    if (call.timer != 0) loop_->CancelTimer(call.timer);
    if (call.process.has_value()) processes_->Kill(*call.process);
    if (!call.dir.empty()) RemoveTree(call.dir);
  }
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

  // The call's own folder, made private and unique by mkdtemp, holds the tool's input, its logs
  // and its working directory work/, which thus starts empty.
  std::error_code error;
  fs::create_directories(scratch_dir_, error);
  std::string dir = scratch_dir_ + "/" + call.name + ".XXXXXX";
  if (error || mkdtemp(dir.data()) == nullptr) {
    const std::string why = error ? error.message() : Errno();
    return FailLater(id, Status::Backend(call.name, StrFormat("cannot create a folder in %s: %s",
                                                              scratch_dir_.c_str(), why.c_str())));
  }
  entry.dir = dir;
  const std::string work = dir + "/work";
  if (mkdir(work.c_str(), 0700) != 0) {
    return FailLater(id, Status::Backend(call.name, StrFormat("cannot create %s: %s", work.c_str(),
                                                              Errno().c_str())));
  }
  spec.stdin_file = dir + "/input";
  const Status written = WriteNewFile(call.name, spec.stdin_file, call.input);
  if (!written.ok()) return FailLater(id, written);

  spec.env["HOME"] = work;
  spec.env["TMPDIR"] = work;
  spec.cwd = work;
  spec.log_dir = dir;
  spec.limits.cpu_seconds = call.limits.cpu_seconds;
  spec.limits.address_space_bytes = call.limits.memory_bytes;
  spec.limits.open_files = call.limits.open_files;
  spec.limits.file_size_bytes = call.limits.file_size_bytes;
  spec.die_with_libra = true;
  const Result<ProcessId> process =
      processes_->Spawn(spec, [this, id](const ExitStatus& status) { OnExit(id, status); });
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
  // SIGTERM to its group, SIGKILL at the loop's next turn; the result comes once it is gone.
  processes_->Stop(*call.process, std::chrono::milliseconds(0));
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
  const std::string out = call.dir + "/" + call.name + ".out";
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
    const std::string tail = StderrTail(call.dir + "/" + call.name + ".err");
    return Status::Backend(call.name,
                           tail.empty() ? status.ToString() : status.ToString() + ": " + tail);
  }
  return ReadFrom(out, 0, size);
}

void Sandbox::Finish(uint64_t id, Result<std::string> result) {
  const auto it = calls_.find(id);
  Call call = std::move(it->second);
  calls_.erase(it);
  if (!call.dir.empty()) RemoveTree(call.dir);
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
