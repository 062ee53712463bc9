// libra: the command-line entry point. Everything else lives in libra_cli_core.
#include "cli/commands.h"

int main(int argc, char** argv) { return libra::cli::Main(argc, argv); }
