// kiln: the command-line entry point. Verbs live in one file each.
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: an ahead-of-time compiler and runtime for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  int rc = 0;
  kiln::cli::AddRunCommand(app, rc);
  kiln::cli::AddBenchCommand(app, rc);
  kiln::cli::AddTestOnnxCommand(app, rc);
  kiln::cli::AddInspectCommand(app, rc);
  kiln::cli::AddConvertCommand(app, rc);
  kiln::cli::AddPlanCommand(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }
  return rc;
}
