#include "support/process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace kiln {

int RunProcess(const std::vector<std::string>& argv, const std::string& out, bool merge_stderr,
               const std::vector<std::pair<std::string, std::string>>& env) {
  if (argv.empty()) return -1;
  std::fflush(nullptr);  // what this process buffered is written before the child's output
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!out.empty()) {
      FILE* f = std::fopen(out.c_str(), "w");
      if (!f) _exit(127);
      dup2(fileno(f), 1);
      if (merge_stderr) dup2(fileno(f), 2);
    }
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace kiln
