// libra_supervisor: the sandbox server (sandbox_server.h) and the supervisor of a sandboxed call
// (supervisor.h) as a program of their own, which libra carries inside it and writes out for
// its calls (sandbox.cc).
#include <cstring>

#include "cluster/sandbox_server.h"
#include "cluster/supervisor.h"

int main(int argc, char** argv, char** envp) {
  if (argc > 1 && std::strcmp(argv[1], libra::cluster::kServerFlag) == 0) {
    return libra::cluster::ServeSandbox(argc, argv, envp);
  }
  return libra::cluster::Supervise(argc, argv, envp);
}
