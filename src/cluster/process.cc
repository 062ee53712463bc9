#include "cluster/process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

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

bool IsValidName(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool IsValidEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

// The child's environment: the allow-listed variables of ours, then the spec's.
std::map<std::string, std::string> ChildEnv(const ProcessSpec& spec) {
  std::map<std::string, std::string> env;
  for (const char* name : kInheritedEnv) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  for (const auto& [name, value] : spec.env) env[name] = value;
  return env;
}

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

}  // namespace

Status ValidateProcessSpec(const ProcessSpec& spec) {
  if (!IsValidName(spec.name)) {
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
  return Status();
}

namespace {

// Starts the child in its own process group, with its stdio on the logs (stdin: /dev/null or a
// pipe) and no other fd of ours.
Result<Spawned> SpawnChild(const ProcessSpec& spec) {
  LIBRA_RETURN_IF_ERROR(ValidateProcessSpec(spec));
  const std::map<std::string, std::string> env = ChildEnv(spec);
  LIBRA_ASSIGN_OR_RETURN(const std::string program, FindProgram(spec, env));
  if (!spec.log_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(spec.log_dir, error);
    if (error) {
      return Status::Backend(spec.name, StrFormat("cannot create the log folder %s: %s",
                                                  spec.log_dir.c_str(), error.message().c_str()));
    }
  }
  LIBRA_ASSIGN_OR_RETURN(UniqueFd out, OpenLog(spec, ".out"));
  LIBRA_ASSIGN_OR_RETURN(UniqueFd err, OpenLog(spec, ".err"));

  SpawnActions actions;
  UniqueFd stdin_read;
  UniqueFd stdin_write;
  if (spec.stop_by == StopBy::kCloseStdin) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return Status::Backend(spec.name, "cannot create the stdin pipe: " + Errno());
    }
    stdin_read.reset(fds[0]);
    stdin_write.reset(fds[1]);
    posix_spawn_file_actions_adddup2(actions.get(), stdin_read.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(actions.get(), out.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(actions.get(), err.get(), STDERR_FILENO);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(actions.get(), spec.cwd.c_str());
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

  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : env) env_entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_entries) envp.push_back(entry.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, program.c_str(), actions.get(), attr.get(), argv.data(), envp.data());
  if (rc != 0) {
    return Status::Backend(spec.name,
                           StrFormat("cannot start '%s': %s", program.c_str(), std::strerror(rc)));
  }
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

}  // namespace libra::cluster
