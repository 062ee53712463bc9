// libra_supervisor: the supervisor of a sandboxed call as a program of its own (supervisor.h),
// which libra carries inside it and writes out for its calls (sandbox.cc).
#include "cluster/supervisor.h"

int main(int argc, char** argv, char** envp) { return libra::cluster::Supervise(argc, argv, envp); }
