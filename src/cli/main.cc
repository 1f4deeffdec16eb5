// kiln: the command-line entry point. Verbs live in one file each (cli/app.cc lists them).
#include "cli/commands.h"

int main(int argc, char** argv) { return kiln::cli::Main(argc, argv); }
