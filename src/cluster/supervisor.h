// The supervisor of a sandboxed call (sandbox.h): a process of its own between the sandbox
// server (sandbox_server.h), its parent, and the tool. It
//  1. becomes the child subreaper of the call (PR_SET_CHILD_SUBREAPER): whatever the tool starts
//     and orphans, even in a session of its own (setsid), becomes its child instead of init's;
//  2. hides the other calls' folders from the tool where the platform allows a mount namespace
//     (root, or unprivileged user namespaces): the scratch folder holds only the call's own;
//  3. starts the tool under the call's limits: CPU, memory, open files, file size, and processes
//     (RLIMIT_NPROC over the processes its user already runs; the kernel does not apply it to
//     root, whose calls the supervisor counts every kPollMs instead);
//  4. when the tool exits, or it is asked to stop (SIGTERM), or its parent dies (the
//     parent-death signal), or the call runs too many processes: freezes and kills every process
//     left under it, reaps them, removes the call's folder if its parent is gone, and exits as
//     the tool did.
//
// The server forks it from the program it runs: libra_supervisor, a small static program that
// libra carries inside it and writes out for its calls (Sandbox), or, where that cannot run,
// libra itself again (/proc/self/exe), which a constructor in sandbox.cc turns into the server
// or Supervise() before main when argv[1] is kServerFlag or kSupervisorFlag. The server is
// single-threaded, so its forks may allocate and read /proc, which a forked child of libra may
// not.
#pragma once

namespace libra::cluster {

/// argv[1] of a supervisor.
inline constexpr char kSupervisorFlag[] = "--libra-sandbox-supervisor";
/// Arguments of the supervisor after the flag and before "--": its parent's pid, the call's folder,
/// the scratch folder, then the limits: CPU seconds, address space, open files, file size,
/// processes. The tool's argv follows "--".
inline constexpr int kSupervisorArgs = 8;
/// The carried supervisor's file in the scratch folder (Sandbox).
inline constexpr char kSupervisorFile[] = ".libra-supervisor";
/// Exit code of a call stopped for running too many processes.
inline constexpr int kTooManyProcesses = 125;

/// Supervises one call: argv is {program, kSupervisorFlag, the kSupervisorArgs, "--", tool argv}.
/// Returns (or exits with) the tool's status: its exit code, or death by its signal; 126 when the
/// arguments are wrong or the call cannot be set up, 127 when the tool cannot start.
int Supervise(int argc, char** argv, char** envp);

}  // namespace libra::cluster
