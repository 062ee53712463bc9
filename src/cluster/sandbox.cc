#include "cluster/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
#include <utility>
#include <vector>

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

std::string Errno() { return std::strerror(errno); }

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

// --- The supervisor ------------------------------------------------------------------------------
//
// Every call runs under a supervisor: this program again (/proc/self/exe), started with
// kSupervisorFlag, which the constructor at the end of this file turns into Supervise() before
// main runs. A fresh process, it may do what a forked child of libra may not (allocate, read
// /proc). It
//  1. becomes the child subreaper of the call (PR_SET_CHILD_SUBREAPER): whatever the tool starts
//     and orphans, even in a session of its own (setsid), becomes its child instead of init's;
//  2. hides the other calls' folders from the tool where the platform allows a mount namespace
//     (root, or unprivileged user namespaces): the scratch folder holds only the call's own;
//  3. starts the tool under the call's limits: CPU, memory, open files, file size, and processes
//     (RLIMIT_NPROC over the processes its user already runs; the kernel does not apply it to
//     root, whose calls the supervisor counts every kPollMs instead);
//  4. when the tool exits, or libra asks it to stop (SIGTERM), or libra dies (the parent-death
//     signal), or the call runs too many processes: freezes and kills every process left under
//     it, reaps them, removes the call's folder if libra is gone, and exits as the tool did.

constexpr char kSupervisorFlag[] = "--libra-sandbox-supervisor";
// Arguments of the supervisor before "--": libra's pid, the call's folder, the scratch folder,
// then the limits: CPU seconds, address space, open files, file size, processes.
constexpr int kSupervisorArgs = 8;
// How often a supervisor of root counts the call's processes.
constexpr int kPollMs = 20;
// Exit code of a call stopped for running too many processes.
constexpr int kTooManyProcesses = 125;

void Say(const std::string& text) {
  const std::string line = "libra sandbox: " + text + "\n";
  if (write(STDERR_FILENO, line.data(), line.size()) < 0) {
    // Nothing to do: stderr is the call's log.
  }
}

// The pids of `pid`'s children, from /proc/<pid>/task/*/children.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return children;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = open((tasks + "/" + entry->d_name + "/children").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
    close(fd);
    for (const std::string& field : StrSplit(text, ' ')) {
      if (!field.empty()) children.push_back(static_cast<pid_t>(std::atol(field.c_str())));
    }
  }
  closedir(dir);
  return children;
}

// Every process under this one: its children, theirs, and so on.
std::vector<pid_t> Descendants() {
  std::vector<pid_t> all = ChildrenOf(getpid());
  for (size_t i = 0; i < all.size() && all.size() < 100000; ++i) {
    for (const pid_t child : ChildrenOf(all[i])) all.push_back(child);
  }
  return all;
}

// Reaps every exited child; records the tool's status.
void Reap(pid_t tool, int* tool_status, bool* tool_done) {
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == tool) {
      *tool_status = status;
      *tool_done = true;
    }
  }
}

// Stops, then kills, everything under this process, and reaps it: whatever forks in between is
// orphaned to this process (the subreaper) and caught by the next round.
void KillEverything(pid_t tool, int* tool_status, bool* tool_done) {
  for (int round = 0; round < 1000; ++round) {
    const std::vector<pid_t> left = Descendants();
    if (left.empty()) break;
    for (const pid_t pid : left) kill(pid, SIGSTOP);
    for (const pid_t pid : Descendants()) kill(pid, SIGKILL);
    for (const pid_t pid : left) kill(pid, SIGKILL);
    Reap(tool, tool_status, tool_done);
    usleep(round < 10 ? 100 : 2000);
    Reap(tool, tool_status, tool_done);
  }
  Reap(tool, tool_status, tool_done);
}

bool WriteText(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// Shows the tool only its own folder of the scratch folder: a private mount namespace with an
// empty tmpfs over `scratch`, and `dir` bound back into it. Best effort: where no mount namespace
// can be made (no privilege, no unprivileged user namespaces), the other calls' folders stay
// visible (mode 0700, but the same user's). Returns whether the folder is isolated.
bool IsolateScratch(const std::string& dir, const std::string& scratch) {
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWNS) != 0) {
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    // In a user namespace of its own, mapped onto libra's user: files stay libra's user's.
    if (!WriteText("/proc/self/setgroups", "deny") ||
        !WriteText("/proc/self/uid_map", StrFormat("%u %u 1", uid, uid)) ||
        !WriteText("/proc/self/gid_map", StrFormat("%u %u 1", gid, gid))) {
      return false;
    }
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  const int own = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (own < 0) return false;
  bool isolated = false;
  if (mount("libra-scratch", scratch.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
            "mode=0700,size=64k") == 0) {
    const std::string target = scratch + "/" + fs::path(dir).filename().string();
    isolated = mkdir(target.c_str(), 0700) == 0 &&
               mount(StrFormat("/proc/self/fd/%d", own).c_str(), target.c_str(), nullptr,
                     MS_BIND | MS_REC, nullptr) == 0;
    if (!isolated) umount2(scratch.c_str(), MNT_DETACH);
  }
  close(own);
  return isolated;
}

// Processes of this user now (their /proc folders are theirs).
int64_t ProcessesOfUser(uid_t uid) {
  int64_t count = 0;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    struct stat st {};
    if (stat((std::string("/proc/") + entry->d_name).c_str(), &st) == 0 && st.st_uid == uid) {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

[[noreturn]] void ExitAs(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int signo = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  // Die of the tool's signal, so that libra reports it (SIGXCPU, SIGXFSZ), without a core file.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(signo, SIG_DFL);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, signo);
  sigprocmask(SIG_UNBLOCK, &mask, nullptr);
  raise(signo);
  _exit(128 + signo);
}

// Forks and execs the tool under `limits`, its signals unblocked; says why when it cannot start
// (the exit code is then 127). -1 when the supervisor cannot fork.
pid_t StartTool(char** tool_argv, char** envp, const std::vector<std::pair<int, rlimit>>& limits) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return -1;
  const pid_t tool = fork();
  if (tool < 0) {
    Say(std::string("cannot fork: ") + std::strerror(errno));
    return -1;
  }
  if (tool == 0) {
    close(report[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(127);
    for (const auto& [resource, value] : limits) {
      setrlimit(static_cast<__rlimit_resource_t>(resource), &value);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(tool_argv[0], tool_argv, envp);
    const int error = errno;
    if (write(report[1], &error, sizeof(error)) < 0) {
      // The supervisor then reports exit code 127 without a reason.
    }
    _exit(127);
  }
  close(report[1]);
  int exec_error = 0;
  if (read(report[0], &exec_error, sizeof(exec_error)) == sizeof(exec_error)) {
    Say(StrFormat("cannot start '%s': %s", tool_argv[0], std::strerror(exec_error)));
  }
  close(report[0]);
  return tool;
}

int Supervise(int argc, char** argv, char** envp) {
  // argv: self, flag, libra, dir, scratch, cpu, memory, files, file size, processes, --, tool...
  if (argc < 3 + kSupervisorArgs + 1 || std::string(argv[2 + kSupervisorArgs]) != "--") {
    Say("bad supervisor arguments");
    return 126;
  }
  const pid_t libra = static_cast<pid_t>(std::atol(argv[2]));
  const std::string dir = argv[3];
  const std::string scratch = argv[4];
  const int64_t cpu = std::atoll(argv[5]);
  const int64_t memory = std::atoll(argv[6]);
  const int64_t files = std::atoll(argv[7]);
  const int64_t file_size = std::atoll(argv[8]);
  const int64_t processes = std::atoll(argv[9]);
  char** tool_argv = argv + 3 + kSupervisorArgs;

  sigset_t watched;
  sigemptyset(&watched);
  for (const int signo : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&watched, signo);
  sigprocmask(SIG_BLOCK, &watched, nullptr);
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    Say(std::string("cannot become the call's subreaper: ") + std::strerror(errno));
    return 126;
  }
  IsolateScratch(dir, scratch);
  // The kernel counts RLIMIT_NPROC per user, and not at all for root.
  const bool count_processes = processes > 0 && getuid() == 0;
  std::vector<std::pair<int, rlimit>> limits;
  const auto limit = [&](int resource, int64_t soft, int64_t hard) {
    if (soft > 0)
      limits.emplace_back(resource, rlimit{static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)});
  };
  limit(RLIMIT_CPU, cpu, cpu + 1);
  limit(RLIMIT_AS, memory, memory);
  limit(RLIMIT_NOFILE, files, files);
  limit(RLIMIT_FSIZE, file_size, file_size);
  if (processes > 0 && !count_processes) {
    const int64_t nproc = ProcessesOfUser(getuid()) + processes;
    limit(RLIMIT_NPROC, nproc, nproc);
  }
  const pid_t tool = StartTool(tool_argv, envp, limits);
  if (tool < 0) return 126;

  int tool_status = 0;
  bool tool_done = false;
  bool stop = false;
  bool too_many = false;
  const timespec tick{0, kPollMs * 1000000L};
  while (!tool_done && !stop && !too_many) {
    siginfo_t info{};
    const int signo = sigtimedwait(&watched, &info, count_processes ? &tick : nullptr);
    if (signo == SIGCHLD) {
      Reap(tool, &tool_status, &tool_done);
    } else if (signo == SIGTERM || signo == SIGINT || signo == SIGHUP) {
      stop = true;
    }
    if (count_processes && static_cast<int64_t>(Descendants().size()) > processes) {
      too_many = true;
    }
  }
  KillEverything(tool, &tool_status, &tool_done);
  if (getppid() != libra) {
    // libra is gone, and with it whoever would have removed the call's folder.
    umount2(scratch.c_str(), MNT_DETACH);
    std::error_code error;
    fs::remove_all(dir, error);
    rmdir(scratch.c_str());  // the last call of a dead libra takes the scratch folder too
  }
  if (too_many) {
    Say(StrFormat("the call ran more than %lld processes at once; it was stopped",
                  static_cast<long long>(processes)));
    return kTooManyProcesses;
  }
  // Stopped by libra: the wait status of a process killed by SIGTERM is the signal's number.
  if (stop) ExitAs(SIGTERM);
  ExitAs(tool_status);
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

Sandbox::Sandbox(EventLoop* loop, ProcessSet* processes, std::string scratch_dir, int max_running)
    : loop_(loop),
      processes_(processes),
      scratch_dir_(fs::absolute(scratch_dir).lexically_normal().string()),
      max_running_(max_running) {}

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
  spec.argv = {"/proc/self/exe",
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
