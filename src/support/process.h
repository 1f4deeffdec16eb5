// Running another program: no shell, its exit code back.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln {

// Runs argv[0] (looked up on PATH) with argv and waits for it. Its standard output goes to the
// file `out` ("": this process's), and its standard error too when `merge_stderr`; `env` adds or
// replaces environment variables for it. Returns its exit code, or -1 where it did not start (127
// where it could not be executed) or ended by a signal.
int RunProcess(const std::vector<std::string>& argv, const std::string& out = "",
               bool merge_stderr = false,
               const std::vector<std::pair<std::string, std::string>>& env = {});

}  // namespace kiln
