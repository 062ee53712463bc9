// Child processes of the cluster backend: rollout engines, trainers, the sandbox server that runs
// the tools (sandbox_server.h), and the ssh clients that run them on other nodes. Each child runs
// in its own process group (so that stopping it stops everything it started, and a Ctrl-C in the
// terminal reaches libra alone, which then stops its children in order), writes its output to log
// files, and gets an environment built explicitly: a short allow-list from libra's own plus what
// the caller gives, so no secret in libra's environment leaks into a child by accident.
//
// ProcessSet owns the children it starts and stops every one of them: on Stop, on StopAll (error
// paths, shutdown) and in its destructor, so that none outlives the run. ShutdownSignals turns
// SIGINT and SIGTERM into a loop callback, so that the loop's owner decides how to shut down.
// What this cannot cover: a SIGKILL of libra itself leaves local children running (remote ones
// stop, see launcher.h).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/event_loop.h"
#include "common/ids.h"
#include "common/status.h"

namespace libra::cluster {

/// Variables a child inherits from libra's environment (when set): what programs need to run,
/// nothing secret. Anything else (CUDA_VISIBLE_DEVICES, HF_TOKEN, ...) goes in ProcessSpec::env.
inline constexpr std::array<const char*, 9> kInheritedEnv = {
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"};

/// How a graceful stop asks a process to exit.
enum class StopBy {
  /// SIGTERM to its process group.
  kSigterm,
  /// Closing its stdin, a pipe libra holds: the ssh launcher's remote wrapper stops the remote
  /// process group when its stdin reaches end-of-file (which also happens if libra dies).
  kCloseStdin,
};

/// Kernel resource limits (setrlimit) on a child and everything it starts; 0 leaves a limit as
/// libra's own (usually unlimited). A child over a limit is stopped by the kernel: SIGXCPU once
/// it has used cpu_seconds of CPU time and SIGKILL one second later; allocations past
/// address_space_bytes fail (ENOMEM: malloc returns null, Python raises MemoryError); opening a
/// file past open_files fails (EMFILE); writing past file_size_bytes into any file, its stdout and
/// stderr logs included, fails with SIGXFSZ.
struct ProcessLimits {
  int64_t cpu_seconds = 0;
  int64_t address_space_bytes = 0;
  int64_t open_files = 0;
  int64_t file_size_bytes = 0;
  /// Whether any limit is set.
  bool any() const {
    return cpu_seconds != 0 || address_space_bytes != 0 || open_files != 0 || file_size_bytes != 0;
  }
  bool operator==(const ProcessLimits&) const = default;
};

/// What to run and how.
struct ProcessSpec {
  /// Names the process in messages and its log files, e.g. "engine-0": letters, digits, '-',
  /// '_' and '.'.
  std::string name;
  /// The program and its arguments; argv[0] is looked up on the child's PATH when it has no '/'.
  std::vector<std::string> argv;
  /// Variables set on top of the inherited ones (kInheritedEnv), overriding them.
  std::map<std::string, std::string> env;
  /// Working directory. Default: libra's.
  std::string cwd;
  /// Folder (created if missing) of the logs <name>.out (stdout) and <name>.err (stderr),
  /// appended to. Default: empty, the output is discarded.
  std::string log_dir;
  /// File the child reads as its stdin. Default: empty, /dev/null (with StopBy::kCloseStdin, a
  /// pipe libra holds, so the two exclude each other).
  std::string stdin_file;
  /// Default: no limits.
  ProcessLimits limits{};
  /// The child gets SIGTERM if libra dies without stopping it (a crash, SIGKILL): Linux's
  /// parent-death signal, set before the exec. Covers the child itself, not what it starts
  /// (which its own SIGTERM handling must stop), and is cleared if the child changes its
  /// credentials (setuid programs). Default: false.
  bool die_with_libra = false;
  /// Default: SIGTERM.
  StopBy stop_by = StopBy::kSigterm;
  /// An fd of the caller's (a socket) that becomes the child's stdin and stdout; the caller keeps
  /// its own copy. The logs then hold stderr only. Excludes stdin_file and StopBy::kCloseStdin.
  /// Default: -1, none.
  int stdio_fd = -1;
  bool operator==(const ProcessSpec&) const = default;
};

/// Checks what Spawn would refuse before trying: kInvalidArgument for a bad name, an empty argv,
/// a bad variable name, a NUL byte in an argument or value, a negative limit, or a stdin_file or
/// a stdio_fd with StopBy::kCloseStdin, or both.
Status ValidateProcessSpec(const ProcessSpec& spec);

using ProcessId = StrongId<struct ProcessIdTag>;

/// The environment Spawn gives the child of `spec`: the variables of kInheritedEnv that libra has,
/// then the spec's own.
std::map<std::string, std::string> ChildEnvironment(const ProcessSpec& spec);

/// The program Spawn would run for `spec`, whose child gets `env` (ChildEnvironment(spec)):
/// argv[0] when it holds a '/', else the first executable file of that name on that PATH. kBackend
/// "<name>: cannot start '<program>': not found on PATH (...)" otherwise. REQUIRES: `spec.argv` is
/// not empty.
Result<std::string> ResolveProgram(const ProcessSpec& spec,
                                   const std::map<std::string, std::string>& env);

/// Removes the folders `<prefix><pid>-*` in `parent` that this user's libras left when they died
/// without cleaning up (SIGKILL, OOM): those whose pid no longer runs. A libra names such a
/// folder after its own pid (`<prefix><getpid()>-XXXXXX`) and sweeps before making its own.
void RemoveFoldersOfDeadLibras(const std::string& parent, std::string_view prefix);

/// The children of one run, all watched on one event loop.
class ProcessSet {
 public:
  using ExitCallback = std::function<void(const ExitStatus&)>;
  /// Grace between the polite request to stop and SIGKILL in the destructor.
  static constexpr std::chrono::milliseconds kDefaultGrace{5000};

  /// REQUIRES: `loop` outlives the set.
  explicit ProcessSet(EventLoop* loop) : loop_(loop) {}
  /// StopAll(kDefaultGrace).
  ~ProcessSet();
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  /// Starts `spec`. `on_exit` runs on the loop once the process has exited, on its own or
  /// stopped, after anything left in its process group has been killed.
  /// kInvalidArgument for an empty argv, a bad name or variable name; kBackend
  /// "<name>: cannot start '<program>': <why>" when the program is not found, the logs or the
  /// stdin file cannot be opened, a limit cannot be set or the spawn fails.
  Result<ProcessId> Spawn(const ProcessSpec& spec, ExitCallback on_exit);
  /// Asks the process to stop (its StopBy), and SIGKILLs its process group after `grace` if it
  /// has not exited by then. Its on_exit runs when it is gone. No-op when `id` is not running.
  void Stop(ProcessId id, std::chrono::milliseconds grace);
  /// SIGKILLs the process group of `id` and waits until its leader is gone (at most a couple of
  /// seconds), blocking and without running the loop, like StopAll for one process: for
  /// destructors of the set's users. Its on_exit never runs. No-op when `id` is not running.
  void Kill(ProcessId id);
  /// Stops every running process and waits until all are gone, blocking and without running the
  /// loop, so that it is safe on error paths and in destructors: asks each to stop, waits up to
  /// `grace`, then SIGKILLs each remaining process group. No on_exit callback runs.
  void StopAll(std::chrono::milliseconds grace);

  /// The pid of a running process (also its process-group id); nullopt once it has exited.
  std::optional<pid_t> pid(ProcessId id) const;
  /// Processes started and not yet exited.
  size_t running() const { return children_.size(); }

 private:
  struct Child {
    pid_t pid = 0;
    StopBy stop_by = StopBy::kSigterm;
    // The write end of the child's stdin with StopBy::kCloseStdin.
    UniqueFd stdin_pipe;
    ExitCallback on_exit;
    // SIGKILL timer armed by Stop; 0 when none.
    EventLoop::TimerId kill_timer = 0;
  };

  void OnExit(ProcessId id, const ExitStatus& status);

  EventLoop* loop_;
  int64_t next_id_ = 0;
  std::map<ProcessId, Child> children_;
};

/// Runs `spec` to completion, blocking, without an event loop: for short helper commands (ssh
/// -O exit, key generation). kTimeout (after SIGKILLing its process group) when it runs longer
/// than `timeout`; the errors of ProcessSet::Spawn.
Result<ExitStatus> RunToCompletion(const ProcessSpec& spec, std::chrono::milliseconds timeout);

/// While alive, SIGINT and SIGTERM no longer end libra: each is written to a self-pipe that the
/// loop watches, and `on_signal(signo)` runs on the loop, where the owner stops the run in order.
/// Signal handlers are process-wide, so only one instance may be alive at a time; the previous
/// handlers are restored on destruction.
class ShutdownSignals {
 public:
  /// kInternal when another instance is alive; kBackend when the pipe or a handler cannot be
  /// set up.
  static Result<std::unique_ptr<ShutdownSignals>> Install(EventLoop* loop,
                                                          std::function<void(int)> on_signal);
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

 private:
  ShutdownSignals(EventLoop* loop, UniqueFd read_end, UniqueFd write_end,
                  std::function<void(int)> on_signal);
  void OnReadable();

  EventLoop* loop_;
  UniqueFd read_end_;
  UniqueFd write_end_;
  std::function<void(int)> on_signal_;
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace libra::cluster
