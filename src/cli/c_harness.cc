#include "cli/c_harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "codegen/c/c_backend.h"
#include "codegen/c/kernel_library.h"
#include "support/file_io.h"

namespace kiln::cli {

namespace fs = std::filesystem;

const char* StrictCFlags() { return "-std=c99 -Wall -Wextra -Werror -pedantic"; }

namespace {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Runs a shell command; its output goes to `log`. Returns the exit status (-1 on a signal).
int Shell(const std::string& cmd, const fs::path& log) {
  int st = std::system((cmd + " >" + Quote(log.string()) + " 2>&1").c_str());
  if (st == -1 || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

std::string Tail(const fs::path& log) {
  auto text = ReadFile(log.string());
  if (!text.ok()) return "";
  std::string s = *text;
  if (s.size() > 600) s = "..." + s.substr(s.size() - 600);
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s;
}

}  // namespace

Expected<std::vector<Tensor>> RunThroughC(ir::Model model, const std::vector<Tensor>& inputs,
                                          const CHarnessOptions& o) {
  codegen::c::CompileOptions co;
  co.name = "net";
  co.kiln_version = "test";
  co.shapes = o.shapes;
  co.passes = o.passes;
  co.plan = o.plan;
  co.weight_storage = o.weight_storage;
  KILN_ASSIGN_OR_RETURN(auto compiled, codegen::c::CompileToC(std::move(model), co));
  fs::path dir = o.work_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/kiln-c-XXXXXX";
    if (!mkdtemp(tmpl)) return Error("cannot create a scratch folder in /tmp");
    dir = tmpl;
  } else {
    std::error_code ec;
    fs::create_directories(dir, ec);
  }
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{dir, o.keep};
  for (const auto& f : compiled.files)
    KILN_RETURN_IF_ERROR(WriteFile((dir / f.name).string(), f.text));
  KILN_RETURN_IF_ERROR(WriteFile((dir / "kiln_driver.c").string(), codegen::c::DriverSource()));
  std::string cmd =
      "cd " + Quote(dir.string()) + " && " + o.cc + " " + StrictCFlags() +
      " -O2 -DKILN_MODEL=net '-DKILN_MODEL_HEADER=\"net.h\"' -o prog net.c net_params.c "
      "kiln_driver.c -lm";
  if (Shell(cmd, dir / "build.log") != 0)
    return Error("the generated C does not build: " + Tail(dir / "build.log"));
  const auto& iface = compiled.interface;
  if (inputs.size() != iface.inputs.size())
    return Error("expected " + std::to_string(iface.inputs.size()) + " inputs, got " +
                 std::to_string(inputs.size()));
  std::string args;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (t.dtype() != iface.inputs[k].type.dtype || t.dims() != iface.inputs[k].type.dims)
      return Error("input '" + iface.inputs[k].name + "' does not match the compiled type");
    std::string name = "in" + std::to_string(k) + ".bin";
    KILN_RETURN_IF_ERROR(WriteFile((dir / name).string(),
                                   std::string(static_cast<const char*>(t.raw()), t.nbytes())));
    args += " " + name;
  }
  for (size_t k = 0; k < iface.outputs.size(); ++k) args += " out" + std::to_string(k) + ".bin";
  std::string runner = o.run_prefix.empty() ? "./prog" : o.run_prefix + " prog";
  int rc = Shell("cd " + Quote(dir.string()) + " && " + runner + args, dir / "run.log");
  if (rc != 0)
    return Error("the generated program failed (exit " + std::to_string(rc) +
                 "): " + Tail(dir / "run.log"));
  std::vector<Tensor> outs;
  for (size_t k = 0; k < iface.outputs.size(); ++k) {
    const ir::TypeInfo& t = iface.outputs[k].type;
    KILN_ASSIGN_OR_RETURN(std::string bytes,
                          ReadFile((dir / ("out" + std::to_string(k) + ".bin")).string()));
    Tensor out(t.dtype, t.dims);
    if (bytes.size() != out.nbytes())
      return Error("output " + std::to_string(k) + " has the wrong size");
    if (!bytes.empty()) std::memcpy(out.raw(), bytes.data(), bytes.size());
    outs.push_back(std::move(out));
  }
  return outs;
}

}  // namespace kiln::cli
