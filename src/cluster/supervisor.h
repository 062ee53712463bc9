// The supervisor of a sandboxed call (sandbox.h): a process of its own between libra and the tool.
// It
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
//
// It runs as a program of its own, started fresh (it allocates and reads /proc, which a forked
// child of libra may not): libra_supervisor, a small static program that libra carries inside it
// and writes out for its calls (Sandbox), or, where that cannot run, libra itself again
// (/proc/self/exe) with kSupervisorFlag, which a constructor in sandbox.cc turns into Supervise()
// before main. The first costs about a millisecond of CPU to start; the second re-executes libra
// with every shared library it links, about 15 ms (docs/benchmarks.md, "Cluster controller").
#pragma once

namespace libra::cluster {

/// argv[1] of a supervisor.
inline constexpr char kSupervisorFlag[] = "--libra-sandbox-supervisor";
/// Arguments of the supervisor after the flag and before "--": libra's pid, the call's folder,
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
