// kiln: the command-line entry point. Verbs live in one file each.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "cli/common.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: an ahead-of-time compiler and runtime for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + kiln::cli::kKilnVersion);
  int rc = 0;
  kiln::cli::AddRunCommand(app, rc);
  kiln::cli::AddBenchCommand(app, rc);
  kiln::cli::AddTestOnnxCommand(app, rc);
  kiln::cli::AddInspectCommand(app, rc);
  kiln::cli::AddConvertCommand(app, rc);
  kiln::cli::AddPlanCommand(app, rc);
  kiln::cli::AddOpsCommand(app, rc);
  const std::string command_line = kiln::cli::RecordedCommandLine(argc, argv);
  kiln::cli::AddCompileCommand(app, rc, command_line);
  kiln::cli::AddBundleCommand(app, rc);
  kiln::cli::AddVerifyCommand(app, rc);
  kiln::cli::AddServeCommand(app, rc);
  kiln::cli::AddTuneCommand(app, rc);
  kiln::cli::AddQuantizeCommand(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "kiln: %s\n", kiln::cli::CommandLineError(app, e, argc, argv).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // A model or input whose tensors do not fit in memory is a user error, not a crash.
    std::fprintf(stderr, "kiln: out of memory (a tensor is larger than this machine can hold)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 1;
  }
  return rc;
}
