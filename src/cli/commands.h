// The kiln verbs. Each returns the process exit code: 0 success, 1 user error (already printed).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kiln::cli {

// The whole command line: parses argv (argv[0] is the program), runs the verb, and returns the
// process exit code. The executable's main and the Python package's verbs call it.
int Main(int argc, char** argv);

void AddRunCommand(CLI::App& app, int& rc);
void AddBenchCommand(CLI::App& app, int& rc);
void AddTestOnnxCommand(CLI::App& app, int& rc);
void AddInspectCommand(CLI::App& app, int& rc);
void AddConvertCommand(CLI::App& app, int& rc);
void AddPlanCommand(CLI::App& app, int& rc);
void AddOpsCommand(CLI::App& app, int& rc);
// command_line is recorded in the generated files.
void AddCompileCommand(CLI::App& app, int& rc, const std::string& command_line);
// kiln bundle / kiln verify (cli/bundle.cc).
void AddBundleCommand(CLI::App& app, int& rc);
void AddVerifyCommand(CLI::App& app, int& rc);
// kiln serve / kiln tune (cli/serve.cc).
void AddServeCommand(CLI::App& app, int& rc);
void AddTuneCommand(CLI::App& app, int& rc);
// kiln quantize (cli/quantize.cc).
void AddQuantizeCommand(CLI::App& app, int& rc);

}  // namespace kiln::cli
