// libra: the command-line entry point. Everything else lives in libra_cli_core.
#include "cli/commands.h"
#include "common/allocator.h"

int main(int argc, char** argv) {
  libra::TuneAllocator();
  return libra::cli::Main(argc, argv);
}
