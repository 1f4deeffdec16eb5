// kiln.compile, kiln.plan, kiln.bundle, kiln.verify, kiln.quantize: the CLI's verbs run in this
// process (cli::Main), their standard output and error captured, so the Python functions keep the
// command line's contract and messages exactly.
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "binding.h"
#include "cli/commands.h"

namespace kiln::python {
namespace {

// Sends file descriptor `fd` to a temporary file until Finish() returns what was written.
class CapturedFd {
 public:
  explicit CapturedFd(int fd) : fd_(fd), file_(std::tmpfile()) {
    if (!file_) throw KilnError("cannot create a temporary file to capture kiln's output");
    std::fflush(nullptr);
    saved_ = dup(fd_);
    if (saved_ < 0 || dup2(fileno(file_), fd_) < 0) {
      std::fclose(file_);
      throw KilnError("cannot capture kiln's output");
    }
  }
  ~CapturedFd() {
    if (saved_ >= 0) Restore();
    std::fclose(file_);
  }
  std::string Finish() {
    std::fflush(nullptr);
    Restore();
    std::string out;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  void Restore() {
    dup2(saved_, fd_);
    close(saved_);
    saved_ = -1;
  }
  int fd_;
  std::FILE* file_;
  int saved_ = -1;
};

// Runs `kiln ARGS...`: (exit code, standard output, standard error). Calls are serialized: the
// capture is of the whole process's descriptors 1 and 2.
py::tuple RunVerb(const std::vector<std::string>& args) {
  static std::mutex mu;
  std::vector<std::string> argv_strings = {"kiln"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  int rc = 0;
  std::string out, err;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu);
    CapturedFd capture_out(1), capture_err(2);
    rc = cli::Main(static_cast<int>(argv_strings.size()), argv.data());
    out = capture_out.Finish();
    err = capture_err.Finish();
  }
  return py::make_tuple(rc, py::bytes(out), py::bytes(err));
}

}  // namespace

void BindVerbs(py::module_& m) {
  m.def("run_verb", &RunVerb, py::arg("args"),
        "runs `kiln ARGS...` in this process: (exit code, stdout bytes, stderr bytes)");
}

}  // namespace kiln::python
