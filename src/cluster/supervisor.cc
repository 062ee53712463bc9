#include "cluster/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace libra::cluster {
namespace {

namespace fs = std::filesystem;

// How often a supervisor of root counts the call's processes.
constexpr int kPollMs = 20;

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

}  // namespace

int Supervise(int argc, char** argv, char** envp) {
  // argv: self, flag, parent, dir, scratch, cpu, memory, files, file size, processes, --, tool...
  if (argc < 3 + kSupervisorArgs + 1 || std::string(argv[2 + kSupervisorArgs]) != "--") {
    Say("bad supervisor arguments");
    return 126;
  }
  const pid_t parent = static_cast<pid_t>(std::atol(argv[2]));
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
  if (getppid() != parent) {
    // The server (or libra) is gone, and with it whoever would have removed the call's folder.
    umount2(scratch.c_str(), MNT_DETACH);
    std::error_code error;
    fs::remove_all(dir, error);
    // The last call of a dead server takes the scratch folder too, and the carried supervisor in
    // it (the supervisors still running keep their copy).
    unlink((scratch + "/" + kSupervisorFile).c_str());
    rmdir(scratch.c_str());
  }
  if (too_many) {
    Say(StrFormat("the call ran more than %lld processes at once; it was stopped",
                  static_cast<long long>(processes)));
    return kTooManyProcesses;
  }
  // Stopped: the wait status of a process killed by SIGTERM is the signal's number.
  if (stop) ExitAs(SIGTERM);
  ExitAs(tool_status);
}

}  // namespace libra::cluster
