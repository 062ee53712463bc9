#include "cluster/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "common/files.h"
#include "common/strings.h"

namespace libra::cluster {
namespace {

using Clock = std::chrono::steady_clock;

// How long to wait for a SIGKILLed process group to be gone before giving up on reaping it (a
// process in uninterruptible sleep, e.g. inside a GPU driver, may take longer; it is left to init).
constexpr std::chrono::milliseconds kKillWait{2000};

std::string Errno() { return std::strerror(errno); }

// glibc 2.36 declares pidfd_open without C linkage (fixed in 2.37): call the kernel directly.
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

bool IsValidEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

// The program to exec: argv[0] itself when it holds a '/', else the first executable file of
// that name on the child's PATH.
Result<std::string> FindProgram(const ProcessSpec& spec,
                                const std::map<std::string, std::string>& env) {
  const std::string& program = spec.argv[0];
  if (program.find('/') != std::string::npos) return program;
  const auto path = env.find("PATH");
  const std::string dirs = path != env.end() ? path->second : "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& dir : StrSplit(dirs, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return Status::Backend(spec.name, StrFormat("cannot start '%s': not found on PATH (%s)",
                                              program.c_str(), dirs.c_str()));
}

Result<UniqueFd> OpenLog(const ProcessSpec& spec, const std::string& suffix) {
  const std::string path =
      spec.log_dir.empty() ? "/dev/null" : spec.log_dir + "/" + spec.name + suffix;
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return Status::Backend(
        spec.name, StrFormat("cannot start '%s': cannot open the log %s: %s", spec.argv[0].c_str(),
                             path.c_str(), Errno().c_str()));
  }
  return fd;
}

// posix_spawn's attribute and file-action objects, destroyed on scope exit.
class SpawnAttr {
 public:
  SpawnAttr() { posix_spawnattr_init(&attr_); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr_); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
  posix_spawnattr_t* get() { return &attr_; }

 private:
  posix_spawnattr_t attr_;
};

class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

struct Spawned {
  pid_t pid = 0;
  // The write end of its stdin (StopBy::kCloseStdin).
  UniqueFd stdin_pipe;
};

// Everything a child needs, prepared before it is started: a forked child must not allocate.
struct ChildSetup {
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // Its stdin, stdout and stderr.
  std::array<int, 3> stdio = {-1, -1, -1};
  // nullptr: ours.
  const char* cwd = nullptr;
  // (resource, limit) for setrlimit.
  std::vector<std::pair<int, rlimit>> limits;
  // Above every fd of ours (for closing them where close_range is missing).
  int max_fd = 0;
  // SIGTERM to the child when `parent` (libra) dies; 0: no parent-death signal.
  pid_t parent = 0;
};

std::vector<std::pair<int, rlimit>> Rlimits(const ProcessLimits& limits) {
  std::vector<std::pair<int, rlimit>> result;
  const auto add = [&](int resource, int64_t soft, int64_t hard) {
    if (soft > 0) {
      result.emplace_back(resource, rlimit{static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)});
    }
  };
  // SIGXCPU at the soft limit lets the program report it; SIGKILL a second later if it does not
  // die of it (or at once when libra's own hard limit allows no more).
  rlimit cpu{};
  getrlimit(RLIMIT_CPU, &cpu);
  const int64_t cpu_hard = limits.cpu_seconds + 1;
  add(RLIMIT_CPU, limits.cpu_seconds,
      cpu.rlim_max != RLIM_INFINITY && static_cast<rlim_t>(cpu_hard) > cpu.rlim_max
          ? std::max(limits.cpu_seconds, static_cast<int64_t>(cpu.rlim_max))
          : cpu_hard);
  add(RLIMIT_AS, limits.address_space_bytes, limits.address_space_bytes);
  add(RLIMIT_NOFILE, limits.open_files, limits.open_files);
  add(RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes);
  return result;
}

Status SpawnError(const ProcessSpec& spec, const std::string& program, const std::string& why) {
  return Status::Backend(spec.name,
                         StrFormat("cannot start '%s': %s", program.c_str(), why.c_str()));
}

// A child without limits starts with posix_spawn, whose clone(CLONE_VM | CLONE_VFORK) costs the
// same however much memory libra maps.
Result<pid_t> PosixSpawnChild(const ProcessSpec& spec, const ChildSetup& setup) {
  SpawnActions actions;
  for (int target = 0; target < 3; ++target) {
    posix_spawn_file_actions_adddup2(actions.get(), setup.stdio[target], target);
  }
  if (setup.cwd != nullptr) posix_spawn_file_actions_addchdir_np(actions.get(), setup.cwd);
  // Our sockets, pipes and pidfds are no business of the child's.
  posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);

  SpawnAttr attr;
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(attr.get(), &signals);
  // Every signal at its default disposition, even one libra ignores (SIGPIPE).
  sigfillset(&signals);
  posix_spawnattr_setsigdefault(attr.get(), &signals);
  posix_spawnattr_setpgroup(attr.get(), 0);
  posix_spawnattr_setflags(attr.get(),
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, setup.program, actions.get(), attr.get(), setup.argv, setup.envp);
  if (rc != 0) return SpawnError(spec, setup.program, std::strerror(rc));
  return pid;
}

// A child with limits cannot use posix_spawn, which has no hook between its clone and the exec;
// and setting the limits afterwards with prlimit(2) on the child's pid would race: posix_spawn
// returns once the exec has happened, so by then the program already runs unlimited and may have
// mapped memory (RLIMIT_AS does not apply to what is already mapped), burnt CPU, opened files or
// started children of its own, which would keep the limits of the time they were started. So a
// limited child is forked and calls setrlimit on itself before the exec: the program's first
// instruction, and everything it ever starts, already runs under the limits, with no window.
// Between fork and exec the child makes only async-signal-safe calls (plain system calls on
// memory prepared before the fork, no allocation, no lock), since another thread of libra may
// have held a lock at the fork. It reports a failed step to the parent through a close-on-exec
// pipe, so that Spawn fails exactly when posix_spawn would: end-of-file means the exec happened.
// It is started with vfork, as posix_spawn is, so it costs no copy of libra's page tables.
enum ChildStep { kSetGroup, kRedirect, kChdir, kSetLimits, kDeathSignal, kExec };
struct ChildFailure {
  int step = 0;
  int error = 0;
};

const char* ChildStepName(int step) {
  switch (step) {
    case kSetGroup:
      return "cannot create its process group: ";
    case kRedirect:
      return "cannot redirect its stdio: ";
    case kChdir:
      return "cannot enter its working directory: ";
    case kSetLimits:
      return "cannot set its resource limits: ";
    case kDeathSignal:
      return "cannot set its parent-death signal: ";
    default:
      return "";
  }
}

// Closes our fds from `first` up, except `keep`.
void CloseFdsFrom(int first, int keep, int max_fd) {
  const auto close_range = [max_fd](int low, int high) {
    if (low > high) return;
    if (syscall(SYS_close_range, static_cast<unsigned>(low), static_cast<unsigned>(high), 0) != 0) {
      // Linux < 5.9.
      for (int fd = low; fd <= std::min(high, max_fd); ++fd) close(fd);
    }
  };
  close_range(first, keep - 1);
  close_range(keep + 1, INT32_MAX);
}

[[noreturn]] void RunForkedChild(const ChildSetup& setup, int report_fd) {
  const auto fail = [&report_fd](int step) {
    const ChildFailure failure{step, errno};
    if (write(report_fd, &failure, sizeof(failure)) < 0) {
      // The parent then sees end-of-file and the child's exit code 127.
    }
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(kSetGroup);
  if (setup.parent != 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) fail(kDeathSignal);
    // libra died before the signal was armed: the signal will never come.
    if (getppid() != setup.parent) _exit(127);
  }
  // Every signal at its default disposition, even one libra ignores (SIGPIPE). This fails,
  // harmlessly, for SIGKILL, SIGSTOP and glibc's own signals.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signo = 1; signo < NSIG; ++signo) sigaction(signo, &default_action, nullptr);
  // Nothing to redirect may sit on fds 0-2 while they are being replaced.
  std::array<int, 3> stdio = setup.stdio;
  for (int& fd : stdio) {
    if (fd <= STDERR_FILENO && (fd = fcntl(fd, F_DUPFD, STDERR_FILENO + 1)) < 0) fail(kRedirect);
  }
  if (report_fd <= STDERR_FILENO &&
      (report_fd = fcntl(report_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1)) < 0) {
    _exit(127);
  }
  for (int target = 0; target < 3; ++target) {
    if (dup2(stdio[target], target) < 0) fail(kRedirect);
  }
  if (setup.cwd != nullptr && chdir(setup.cwd) != 0) fail(kChdir);
  // Our sockets, pipes and pidfds are no business of the child's; the report pipe closes on exec.
  CloseFdsFrom(STDERR_FILENO + 1, report_fd, setup.max_fd);
  for (const auto& [resource, limit] : setup.limits) {
    if (setrlimit(static_cast<__rlimit_resource_t>(resource), &limit) != 0) fail(kSetLimits);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(setup.program, setup.argv, setup.envp);
  fail(kExec);
  _exit(127);  // Unreachable: fail exits.
}

Result<pid_t> ForkChild(const ProcessSpec& spec, const ChildSetup& setup) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return SpawnError(spec, setup.program, "cannot create a pipe: " + Errno());
  }
  UniqueFd report_read(fds[0]);
  UniqueFd report_write(fds[1]);
  // Every signal blocked across the fork, so that no handler of libra's runs in the child (the
  // shutdown handler would write into libra's self-pipe) before the child has reset them.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  // vfork: the child borrows libra's memory until its exec instead of copying libra's page
  // tables (which grow with the connections in flight: a fork per tool call cost the
  // controller about 1 ms). Safe here because the child only makes system calls on memory
  // prepared before, never returns from this frame, and ends in execve or _exit.
  const int report_fd = report_write.get();
  const pid_t pid = vfork();
  if (pid == 0) RunForkedChild(setup, report_fd);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  report_write.reset();
  if (pid < 0) return SpawnError(spec, setup.program, std::strerror(fork_errno));
  ChildFailure failure;
  ssize_t n;
  do {
    n = read(report_read.get(), &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  if (n == 0) return pid;
  waitpid(pid, nullptr, 0);
  if (n != sizeof(failure)) {
    return SpawnError(spec, setup.program, "the child failed before its exec");
  }
  return SpawnError(spec, setup.program,
                    std::string(ChildStepName(failure.step)) + std::strerror(failure.error));
}

}  // namespace

std::map<std::string, std::string> ChildEnvironment(const ProcessSpec& spec) {
  std::map<std::string, std::string> env;
  for (const char* name : kInheritedEnv) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  for (const auto& [name, value] : spec.env) env[name] = value;
  return env;
}

Result<std::string> ResolveProgram(const ProcessSpec& spec,
                                   const std::map<std::string, std::string>& env) {
  return FindProgram(spec, env);
}

Status ValidateProcessSpec(const ProcessSpec& spec) {
  if (!IsPlainFileName(spec.name)) {
    return Status::InvalidArgument(
        StrFormat("process name '%s': use letters, digits, '-', '_' and '.'", spec.name.c_str()));
  }
  if (spec.argv.empty()) return Status::InvalidArgument(spec.name + ": empty command");
  for (const std::string& arg : spec.argv) {
    if (HasNul(arg)) return Status::InvalidArgument(spec.name + ": an argument holds a NUL byte");
  }
  for (const auto& [name, value] : spec.env) {
    if (!IsValidEnvName(name)) {
      return Status::InvalidArgument(
          StrFormat("%s: bad environment variable name '%s'", spec.name.c_str(), name.c_str()));
    }
    if (HasNul(value)) {
      return Status::InvalidArgument(
          StrFormat("%s: the value of %s holds a NUL byte", spec.name.c_str(), name.c_str()));
    }
  }
  const ProcessLimits& limits = spec.limits;
  if (limits.cpu_seconds < 0 || limits.address_space_bytes < 0 || limits.open_files < 0 ||
      limits.file_size_bytes < 0) {
    return Status::InvalidArgument(spec.name + ": a resource limit is negative");
  }
  const int stdins =
      !spec.stdin_file.empty() + (spec.stop_by == StopBy::kCloseStdin) + (spec.stdio_fd >= 0);
  if (stdins > 1) {
    return Status::InvalidArgument(
        spec.name + ": a stdin file, a stdio fd and StopBy::kCloseStdin exclude each other");
  }
  return Status();
}

namespace {

// Starts the child in its own process group, with its stdout and stderr on the logs, its stdin on
// /dev/null, the stdin file or a pipe, and no other fd of ours.
Result<Spawned> SpawnChild(const ProcessSpec& spec) {
  LIBRA_RETURN_IF_ERROR(ValidateProcessSpec(spec));
  const std::map<std::string, std::string> env = ChildEnvironment(spec);
  LIBRA_ASSIGN_OR_RETURN(const std::string program, FindProgram(spec, env));
  if (!spec.log_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(spec.log_dir, error);
    if (error) {
      return Status::Backend(spec.name, StrFormat("cannot create the log folder %s: %s",
                                                  spec.log_dir.c_str(), error.message().c_str()));
    }
  }
  UniqueFd out;
  if (spec.stdio_fd < 0) {
    LIBRA_ASSIGN_OR_RETURN(out, OpenLog(spec, ".out"));
  }
  LIBRA_ASSIGN_OR_RETURN(UniqueFd err, OpenLog(spec, ".err"));

  UniqueFd stdin_read;
  UniqueFd stdin_write;
  if (spec.stop_by == StopBy::kCloseStdin) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return Status::Backend(spec.name, "cannot create the stdin pipe: " + Errno());
    }
    stdin_read.reset(fds[0]);
    stdin_write.reset(fds[1]);
  } else if (spec.stdio_fd < 0) {
    const std::string path = spec.stdin_file.empty() ? "/dev/null" : spec.stdin_file;
    stdin_read.reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!stdin_read.valid()) {
      return SpawnError(
          spec, spec.argv[0],
          StrFormat("cannot open the stdin file %s: %s", path.c_str(), Errno().c_str()));
    }
  }

  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : env) env_entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_entries) envp.push_back(entry.data());
  envp.push_back(nullptr);

  ChildSetup setup;
  setup.program = program.c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.stdio = spec.stdio_fd >= 0 ? std::array<int, 3>{spec.stdio_fd, spec.stdio_fd, err.get()}
                                   : std::array<int, 3>{stdin_read.get(), out.get(), err.get()};
  if (!spec.cwd.empty()) setup.cwd = spec.cwd.c_str();
  setup.limits = Rlimits(spec.limits);
  rlimit open_files{};
  getrlimit(RLIMIT_NOFILE, &open_files);
  setup.max_fd = open_files.rlim_cur == RLIM_INFINITY
                     ? 65536
                     : static_cast<int>(std::min<rlim_t>(open_files.rlim_cur, INT32_MAX));
  if (spec.die_with_libra) setup.parent = getpid();
  // posix_spawn has no hook for limits or the parent-death signal: those children are forked.
  LIBRA_ASSIGN_OR_RETURN(const pid_t pid, setup.limits.empty() && setup.parent == 0
                                              ? PosixSpawnChild(spec, setup)
                                              : ForkChild(spec, setup));
  return Spawned{pid, std::move(stdin_write)};
}

// Waits until every pid in `pending` has exited (it stays a zombie) or `deadline` passes; removes
// the exited ones from `pending`.
void WaitForExits(std::set<pid_t>& pending, Clock::time_point deadline) {
  std::map<pid_t, UniqueFd> pidfds;
  for (const pid_t pid : pending) pidfds.emplace(pid, UniqueFd(PidfdOpen(pid)));
  while (!pending.empty()) {
    std::vector<pollfd> fds;
    std::vector<pid_t> pids;
    for (const pid_t pid : pending) {
      if (!pidfds[pid].valid()) continue;
      fds.push_back(pollfd{pidfds[pid].get(), POLLIN, 0});
      pids.push_back(pid);
    }
    const Clock::time_point now = Clock::now();
    if (fds.empty() || now >= deadline) return;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    const int n = poll(fds.data(), fds.size(), static_cast<int>(wait));
    if (n < 0 && errno != EINTR) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) pending.erase(pids[i]);
    }
  }
}

// Kills what is left of each group (its leader is a zombie or SIGKILLed, so the group id is still
// ours), waits a little for the leaders and reaps them.
void KillAndReap(const std::set<pid_t>& pids) {
  for (const pid_t pid : pids) kill(-pid, SIGKILL);
  std::set<pid_t> pending = pids;
  WaitForExits(pending, Clock::now() + kKillWait);
  for (const pid_t pid : pids) waitpid(pid, nullptr, WNOHANG);
}

void RequestStop(pid_t pid, StopBy stop_by, UniqueFd& stdin_pipe) {
  if (stop_by == StopBy::kCloseStdin) {
    stdin_pipe.reset();
  } else {
    kill(-pid, SIGTERM);
  }
}

// The write end of the self-pipe, read by the signal handler; -1 when no ShutdownSignals is alive.
std::atomic<int> g_signal_pipe{-1};

extern "C" void OnShutdownSignal(int signo) {
  const int saved_errno = errno;
  const int fd = g_signal_pipe.load(std::memory_order_relaxed);
  const unsigned char byte = static_cast<unsigned char>(signo);
  if (fd >= 0 && write(fd, &byte, 1) < 0) {
    // The pipe is full: enough signals are already waiting to be handled.
  }
  errno = saved_errno;
}

}  // namespace

ProcessSet::~ProcessSet() {
  if (!children_.empty()) StopAll(kDefaultGrace);
}

Result<ProcessId> ProcessSet::Spawn(const ProcessSpec& spec, ExitCallback on_exit) {
  LIBRA_ASSIGN_OR_RETURN(Spawned spawned, SpawnChild(spec));
  const ProcessId id(next_id_++);
  const Status watched =
      loop_->WatchChild(spawned.pid, [this, id](const ExitStatus& status) { OnExit(id, status); });
  if (!watched.ok()) {
    KillAndReap({spawned.pid});
    return watched;
  }
  children_.emplace(
      id, Child{spawned.pid, spec.stop_by, std::move(spawned.stdin_pipe), std::move(on_exit), 0});
  return id;
}

void ProcessSet::OnExit(ProcessId id, const ExitStatus& status) {
  const auto it = children_.find(id);
  Child child = std::move(it->second);
  children_.erase(it);
  // Whatever the leader left behind in its group goes with it.
  kill(-child.pid, SIGKILL);
  if (child.kill_timer != 0) loop_->CancelTimer(child.kill_timer);
  child.on_exit(status);
}

void ProcessSet::Stop(ProcessId id, std::chrono::milliseconds grace) {
  const auto it = children_.find(id);
  if (it == children_.end() || it->second.kill_timer != 0) return;
  Child& child = it->second;
  RequestStop(child.pid, child.stop_by, child.stdin_pipe);
  child.kill_timer = loop_->AddTimer(grace, [this, id] {
    const auto found = children_.find(id);
    if (found == children_.end()) return;
    found->second.kill_timer = 0;
    kill(-found->second.pid, SIGKILL);
  });
}

void ProcessSet::Kill(ProcessId id) {
  const auto it = children_.find(id);
  if (it == children_.end()) return;
  const pid_t pid = it->second.pid;
  if (it->second.kill_timer != 0) loop_->CancelTimer(it->second.kill_timer);
  loop_->UnwatchChild(pid);
  children_.erase(it);
  KillAndReap({pid});
}

void ProcessSet::StopAll(std::chrono::milliseconds grace) {
  std::set<pid_t> pids;
  for (auto& [id, child] : children_) {
    if (child.kill_timer != 0) loop_->CancelTimer(child.kill_timer);
    loop_->UnwatchChild(child.pid);
    RequestStop(child.pid, child.stop_by, child.stdin_pipe);
    pids.insert(child.pid);
  }
  children_.clear();
  std::set<pid_t> pending = pids;
  WaitForExits(pending, Clock::now() + grace);
  KillAndReap(pids);
}

std::optional<pid_t> ProcessSet::pid(ProcessId id) const {
  const auto it = children_.find(id);
  if (it == children_.end()) return std::nullopt;
  return it->second.pid;
}

Result<ExitStatus> RunToCompletion(const ProcessSpec& spec, std::chrono::milliseconds timeout) {
  // With StopBy::kCloseStdin its stdin stays open until it has exited (closing it would stop a
  // wrapped ssh command at once).
  LIBRA_ASSIGN_OR_RETURN(const Spawned spawned, SpawnChild(spec));
  std::set<pid_t> pending = {spawned.pid};
  WaitForExits(pending, Clock::now() + timeout);
  const bool timed_out = !pending.empty();
  siginfo_t info{};
  if (!timed_out) waitid(P_PID, static_cast<id_t>(spawned.pid), &info, WEXITED | WNOWAIT);
  KillAndReap({spawned.pid});
  if (timed_out) {
    return Status(StatusCode::kTimeout,
                  StrFormat("%s: '%s' did not finish within %lld ms", spec.name.c_str(),
                            spec.argv[0].c_str(), static_cast<long long>(timeout.count())));
  }
  return ExitStatus::FromSiginfo(info);
}

Result<std::unique_ptr<ShutdownSignals>> ShutdownSignals::Install(
    EventLoop* loop, std::function<void(int)> on_signal) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::Backend("signals", "cannot create the self-pipe: " + Errno());
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  int expected = -1;
  if (!g_signal_pipe.compare_exchange_strong(expected, write_end.get())) {
    return Status::Internal("signals: shutdown signal handlers are already installed");
  }
  std::unique_ptr<ShutdownSignals> signals(
      new ShutdownSignals(loop, std::move(read_end), std::move(write_end), std::move(on_signal)));
  struct sigaction action {};
  action.sa_handler = OnShutdownSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGINT, &action, &signals->previous_int_) != 0 ||
      sigaction(SIGTERM, &action, &signals->previous_term_) != 0) {
    return Status::Backend("signals", "cannot install the handlers: " + Errno());
  }
  LIBRA_RETURN_IF_ERROR(loop->WatchFd(signals->read_end_.get(), EPOLLIN,
                                      [raw = signals.get()](uint32_t) { raw->OnReadable(); }));
  return signals;
}

ShutdownSignals::ShutdownSignals(EventLoop* loop, UniqueFd read_end, UniqueFd write_end,
                                 std::function<void(int)> on_signal)
    : loop_(loop),
      read_end_(std::move(read_end)),
      write_end_(std::move(write_end)),
      on_signal_(std::move(on_signal)) {
  // Until Install has them, the previous handlers are "unchanged": restoring them is a no-op.
  sigaction(SIGINT, nullptr, &previous_int_);
  sigaction(SIGTERM, nullptr, &previous_term_);
}

ShutdownSignals::~ShutdownSignals() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  g_signal_pipe.store(-1);
  loop_->UnwatchFd(read_end_.get());
}

void ShutdownSignals::OnReadable() {
  std::vector<int> received;
  unsigned char bytes[64];
  ssize_t n;
  while ((n = read(read_end_.get(), bytes, sizeof(bytes))) > 0)
    received.insert(received.end(), bytes, bytes + n);
  // A copy: the callback may destroy this object (its owner shutting down).
  const std::function<void(int)> on_signal = on_signal_;
  for (const int signo : received) on_signal(signo);
}

void RemoveFoldersOfDeadLibras(const std::string& parent, std::string_view prefix) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos) continue;
    const std::string digits = name.substr(prefix.size(), dash - prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    struct stat st {};
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
}

}  // namespace libra::cluster
