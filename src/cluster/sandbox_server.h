// The sandbox server: one process per Sandbox that starts, watches and cleans up the sandboxed
// calls, so that libra's event loop does none of it. Libra starts it once, before the run's
// connections are open, as the carried supervisor program (or libra itself again) with
// kServerFlag; its stdin and stdout are one end of a socket pair whose other end libra keeps.
// For each call libra sends a Start message; the server makes the call's folder, writes its
// input, forks a supervisor (supervisor.h) into a process group of its own, reaps it, reads its
// output, removes the folder and answers with a Done message. A fork of this small
// single-threaded program costs a fraction of a vfork and exec from libra, whose file-descriptor
// table grows with the connections it holds (docs/benchmarks.md, "The sandbox server").
//
// The server stops every call it runs, removes their folders and exits when its stdin reaches
// end-of-file (libra closed its end), on SIGTERM, SIGINT or SIGHUP, and when libra dies (its
// parent-death signal, set by ProcessSet). A supervisor whose server dies stops its call and
// removes the call's folder itself.
//
// The messages, in both directions, are frames: a 4-byte length (host order) and that many bytes
// of fields, each a u8 type first, integers as 8 bytes (host order) and strings as a 4-byte
// length and their bytes. Both ends are this binary (libra carries the server), so no version
// is exchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace libra::cluster {

/// argv[1] of the sandbox server; argv[2] is libra's pid, argv[3] the scratch folder.
inline constexpr char kServerFlag[] = "--libra-sandbox-server";
/// How long a supervisor asked to stop its call gets before its process group is killed.
inline constexpr int kStopGraceMs = 2000;
/// How much of the end of a call's stderr a Done message carries.
inline constexpr int64_t kStderrTailBytes = 4096;

/// libra -> server: start a call.
struct SandboxStart {
  uint64_t id = 0;
  /// The call's name: its folder is <scratch>/<name>.XXXXXX, its logs <name>.out and .err there.
  std::string name;
  /// The tool's argv; argv[0] is the program's path, already looked up on PATH.
  std::vector<std::string> argv;
  /// The tool's environment, "NAME=value" each, without HOME and TMPDIR (the server sets both
  /// to the call's working directory).
  std::vector<std::string> env;
  std::string input;
  /// The supervisor's limits (supervisor.h): CPU seconds, address space, open files, file size,
  /// processes; 0 for none.
  int64_t cpu_seconds = 0;
  int64_t memory_bytes = 0;
  int64_t open_files = 0;
  int64_t file_size_bytes = 0;
  int64_t max_processes = 0;
  /// The stdout the caller accepts: a Done message carries stdout only up to this size (0: any).
  int64_t max_output_bytes = 0;
  bool operator==(const SandboxStart&) const = default;
};

/// libra -> server: stop a call (SIGTERM to its supervisor's group, SIGKILL kStopGraceMs later).
struct SandboxStop {
  uint64_t id = 0;
  bool operator==(const SandboxStop&) const = default;
};

/// server -> libra: a call is over.
struct SandboxDone {
  uint64_t id = 0;
  /// Empty when the supervisor ran: why the call could not start otherwise ("cannot create a
  /// folder in ...").
  std::string error;
  /// The supervisor's wait status (waitpid): the tool's exit code or signal.
  int64_t wait_status = 0;
  /// The size of the tool's stdout, and the stdout itself when it is at most max_output_bytes.
  int64_t output_bytes = 0;
  std::string output;
  /// The last kStderrTailBytes bytes of the tool's stderr.
  std::string stderr_tail;
  bool operator==(const SandboxDone&) const = default;
};

/// Appends the frame of a message to `out`.
void AppendFrame(const SandboxStart& message, std::string& out);
void AppendFrame(const SandboxStop& message, std::string& out);
void AppendFrame(const SandboxDone& message, std::string& out);

/// The length of the first frame in `bytes` when it is whole (header included), 0 when more
/// bytes are needed.
size_t WholeFrame(std::string_view bytes);
/// Decodes a whole frame (WholeFrame's length of bytes); nullopt when it is not a message of
/// that type or is malformed.
std::optional<SandboxStart> DecodeStart(std::string_view frame);
std::optional<SandboxStop> DecodeStop(std::string_view frame);
std::optional<SandboxDone> DecodeDone(std::string_view frame);

/// Runs the server: argv is {program, kServerFlag, libra's pid, scratch folder}; fd 0 and 1 are
/// libra's socket. Returns the exit code: 0 once stopped, 126 for bad arguments.
int ServeSandbox(int argc, char** argv, char** envp);

}  // namespace libra::cluster
