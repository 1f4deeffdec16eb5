#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "cli/common.h"

namespace kiln::cli {

int Main(int argc, char** argv) {
  CLI::App app{"kiln: an ahead-of-time compiler and runtime for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + kKilnVersion);
  int rc = 0;
  AddRunCommand(app, rc);
  AddBenchCommand(app, rc);
  AddTestOnnxCommand(app, rc);
  AddInspectCommand(app, rc);
  AddConvertCommand(app, rc);
  AddPlanCommand(app, rc);
  AddOpsCommand(app, rc);
  const std::string command_line = RecordedCommandLine(argc, argv);
  AddCompileCommand(app, rc, command_line);
  AddBundleCommand(app, rc);
  AddVerifyCommand(app, rc);
  AddServeCommand(app, rc);
  AddTuneCommand(app, rc);
  AddQuantizeCommand(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "kiln: %s\n", CommandLineError(app, e, argc, argv).c_str());
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

}  // namespace kiln::cli
