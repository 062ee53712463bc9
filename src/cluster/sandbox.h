// Sandbox: runs the tools of agentic rollouts as short-lived, confined subprocesses. Each call is
// one exec of the tool's argv (no shell, so an argument holding ';', quotes or "$(...)" is one
// literal argument and runs nothing), in a fresh private working directory that is also its HOME
// and TMPDIR, with only the allow-listed environment (kInheritedEnv) plus the call's own
// variables, its input on stdin, and kernel limits on CPU time, memory, open files, file size and
// processes. A supervisor process per call (supervisor.h) is the subreaper of everything the
// tool starts: when the tool exits, times out, or libra stops or dies, every process of the call
// ends with it, even one that left the tool's process group or session. Where the platform
// allows a mount namespace (root, or unprivileged user namespaces) the tool sees only its own
// folder of the scratch folder. The tool's stdout is its result. The calls' folders, files,
// supervisors and exits are the business of one sandbox server process (sandbox_server.h),
// which libra starts at the first call and talks to over a socket, so that a call costs libra's
// event loop two messages instead of a process start and a dozen file operations.
//
// What it does not do: isolate the rest of the file system or the network (the tool runs as
// libra's user and sees what libra sees, the run's logs and weights included); use containers for
// that.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/process.h"
#include "cluster/sandbox_server.h"
#include "common/status.h"

namespace libra::cluster {

/// What one call may use. Every field but timeout_s may be 0 for "no limit" (libra's own).
struct SandboxLimits {
  /// Wall-clock time, from the start to the exit (> 0).
  double timeout_s = 10;
  /// CPU time: SIGXCPU when used up, SIGKILL one second later.
  int cpu_seconds = 10;
  /// Address space: allocations beyond it fail.
  int64_t memory_bytes = 1LL << 30;
  /// Open file descriptors.
  int open_files = 64;
  /// Bytes of stdout the caller accepts; more is an error.
  int64_t max_output_bytes = 1 << 20;
  /// Size of any file the tool writes, its stdout and stderr included (SIGXFSZ beyond it).
  int64_t file_size_bytes = 16 << 20;
  /// Processes the call runs at once, the tool included: forks beyond it fail (RLIMIT_NPROC
  /// over the processes libra's user already runs; for root, to whom the kernel does not apply
  /// it, the call is stopped instead when it exceeds the count).
  int max_processes = 64;
};

/// One tool invocation.
struct SandboxCall {
  /// Names the call in messages, e.g. "tool-traj42-t3": letters, digits, '-', '_' and '.'.
  std::string name;
  /// The program and its arguments, already expanded (CommandTemplate); argv[0] is looked up on
  /// PATH when it has no '/'.
  std::vector<std::string> argv;
  /// Written to the tool's stdin.
  std::string input;
  /// Variables on top of kInheritedEnv. HOME and TMPDIR are always the call's directory.
  std::map<std::string, std::string> env;
  SandboxLimits limits{};
};

/// Runs sandboxed calls on an event loop, each as a child of a ProcessSet.
class Sandbox {
 public:
  using Callback = std::function<void(Result<std::string>)>;

  /// Each call gets its own fresh empty working directory (mode 0700) under `scratch_dir`
  /// (created if missing), removed after the call together with its input and output files.
  /// At most `max_running` calls run at once (0: no limit); later ones wait their turn, and
  /// their timeout starts when they start. The server and the calls' supervisors, its forks, run
  /// the supervisor program libra carries (supervisor.h), written into the scratch folder when
  /// the first call starts, or, with `carried_supervisor` false, where the scratch folder's file
  /// system cannot run programs (noexec) or where the carried one does not start, libra itself
  /// again. The server is a child of `processes`; if it dies, the calls it ran fail and the
  /// next call starts another.
  /// REQUIRES: `loop` and `processes` outlive the sandbox.
  Sandbox(EventLoop* loop, ProcessSet* processes, std::string scratch_dir, int max_running = 0,
          bool carried_supervisor = true);
  /// Kills the calls still running and waits for them and the server to be gone (blocking, at
  /// most a few seconds), removing their directories; their callbacks never run.
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  /// Runs `call`. `done` runs once, on the loop (never inside Run), with the tool's stdout when
  /// it exited with code 0, or:
  ///   kTimeout "<name>: timed out after <t> s" (its process group killed);
  ///   kBackend "<name>: output exceeds <n> bytes";
  ///   kBackend "<name>: <exit status>: <last line(s) of stderr, cut to 300 bytes>", e.g.
  ///     "exit code 2", "killed by SIGXCPU";
  ///   kBackend "<name>: cannot start '<program>': not found on PATH (...)";
  ///   kBackend "<name>: cannot create a folder in <scratch>: <why>" and the like when its
  ///     folder or files cannot be made, "sandbox-server: cannot start ..." when the server
  ///     cannot, "<name>: the sandbox server exited: <status>" when it dies during the call;
  ///   kInvalidArgument for a bad name, an empty argv, a bad variable name or bad limits.
  /// `done` may call Run, and may destroy the sandbox.
  void Run(const SandboxCall& call, Callback done);
  /// Calls whose `done` has not run yet (waiting to start included).
  size_t running() const { return calls_.size(); }
  /// The program the calls started so far run under: the carried supervisor's file in the
  /// scratch folder, or /proc/self/exe; "" before the first call.
  const std::string& supervisor() const { return supervisor_; }

 private:
  struct Call {
    std::string name;
    // Started (not waiting for a free slot).
    bool started = false;
    // Sent to the server, which answers when the call is over.
    bool at_server = false;
    SandboxLimits limits{};
    // The timeout, or the timer that delivers a failure to start; 0 when none.
    EventLoop::TimerId timer = 0;
    bool timed_out = false;
    Callback done;
  };

  // Starts a call (its slot is taken).
  void Start(uint64_t id, const SandboxCall& call);
  // Delivers `status` to the call's callback on the loop's next turn.
  void FailLater(uint64_t id, Status status);
  void OnTimeout(uint64_t id);
  // Writes the carried supervisor into the scratch folder when it is not there; sets
  // supervisor_ to it, or to /proc/self/exe where it cannot be written or run.
  void PrepareSupervisor();
  // Starts the sandbox server (sandbox_server.h) unless it runs.
  Status StartServer();
  // Queues a frame for the server and writes what the socket takes.
  void Send(std::string_view frame);
  void Flush();
  void OnServerReady(uint32_t events);
  // Reads what the server sent and finishes the calls it answers; false when the server has
  // closed its end or sent what is not a message (then `*malformed` is set, when not null).
  // `this` may be gone when `alive` has expired.
  bool ReadReplies(const std::weak_ptr<int>& alive, bool* malformed);
  // The server is gone (exited, closed its end, or sent garbage): finishes its calls with
  // `why`. `this` may be gone afterwards.
  void OnServerGone(const std::string& why);
  // Stops the server and its calls and waits for them (blocking, at most a few seconds).
  void StopServer();
  // The result of a call the server answered.
  Result<std::string> Outcome(const Call& call, const SandboxDone& done) const;
  // Removes the call and runs its callback; `this` may be gone afterwards.
  void Finish(uint64_t id, Result<std::string> result);

  EventLoop* loop_;
  ProcessSet* processes_;
  std::string scratch_dir_;
  bool carried_supervisor_ = true;
  std::string supervisor_;  // "" until a call starts
  // The server, and libra's end of its socket; none before the first call and after it died.
  std::optional<ProcessId> server_;
  UniqueFd socket_;
  // Bytes for the server that the socket has not taken yet, and bytes from it not yet whole.
  std::string outbox_;
  std::string inbox_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Call> calls_;
  int max_running_ = 0;
  int started_ = 0;
  // Calls waiting for a slot, in order.
  std::deque<std::pair<uint64_t, SandboxCall>> waiting_;
  // Expires with the sandbox: callbacks may destroy it.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace libra::cluster
