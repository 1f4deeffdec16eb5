// kiln test-onnx: runs ONNX backend test folders (model.onnx + test_data_set_N/{input,output}_K.pb)
// and compares with ONNX's tolerances. Each test runs in a forked child with a time limit, so a
// crash or hang in one test is reported as that test's failure and the run goes on.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "cli/c_harness.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "frontend/model_loader.h"
#include "frontend/onnx_import.h"
#include "ir/small_float.h"
#include "runtime/executor.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

enum class Outcome { kPass, kFail, kSkip };
struct Result {
  Outcome outcome;
  std::string message;
};

struct TestOptions {
  std::vector<std::string> dirs;
  std::string expected_failures;
  double rtol = 1e-3, atol = 1e-7;
  int threads = 1;
  ops::KernelSet kernels = ops::KernelSet::kFast;
  std::string planner = "default";
  bool poison = false, no_reorder = false, no_alias = false;
  int timeout_s = 120;
  bool verbose = false;
  std::string backend = "host";  // host | c
  std::string cc = "cc";
  std::string c_run;                // command prefix that runs the built program (an emulator)
  std::string precision = "fp32";   // --backend c: how float weights are stored
  std::string reference = "files";  // files | host
  double max_rel_l2 = 1e-4;         // tolerance against the host executor
  passes::ShapeOverrides shapes;    // for model files
  std::string weights;
  int jobs = 1;
  bool const_int_inputs = false;
  std::string pipeline_file;
  passes::Pipeline pipeline;  // resolved from --pipeline / --planner / --no-reorder
};

bool IsTestDir(const fs::path& p) { return fs::exists(p / "model.onnx"); }
bool IsModelFile(const fs::path& p) {
  return fs::is_regular_file(p) && (p.extension() == ".onnx" || p.extension() == ".json");
}

// Test folders at most this deep below a folder given (a symbolic link loop ends there).
constexpr int kMaxTestDepth = 16;

void Collect(const fs::path& p, std::vector<fs::path>* out, int depth = 0) {
  if (IsTestDir(p) || IsModelFile(p)) {
    out->push_back(p);
    return;
  }
  if (depth >= kMaxTestDepth) return;
  std::error_code ec;
  std::vector<fs::path> children;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_directory(ec)) children.push_back(e.path());
  std::sort(children.begin(), children.end());
  for (const auto& c : children) Collect(c, out, depth + 1);
}

// Numbered files prefix_0.pb, prefix_1.pb, ... in order.
std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    fs::path f = dir / (prefix + "_" + std::to_string(k) + ".pb");
    if (!fs::exists(f)) break;
    files.push_back(f);
  }
  return files;
}

Status Compare(const Tensor& got, const Tensor& want, double rtol, double atol,
               const std::string& what) {
  if (got.dtype() != want.dtype())
    return Error(what + ": dtype " + std::string(DTypeName(got.dtype())) + ", expected " +
                 std::string(DTypeName(want.dtype())));
  if (got.dims() != want.dims())
    return Error(what + ": shape " + DimsToString(got.dims()) + ", expected " +
                 DimsToString(want.dims()));
  if (want.is_string()) {
    for (int64_t i = 0; i < want.size(); ++i)
      if (got.strings()[i] != want.strings()[i])
        return Error(what + ": string " + std::to_string(i) + " is \"" + got.strings()[i] +
                     "\", expected \"" + want.strings()[i] + "\"");
    return OkStatus();
  }
  const bool fp = IsFloatingDType(want.dtype()) || IsSmallFloatDType(want.dtype());
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < want.size(); ++i) {
    bool ok;
    if (fp) {
      double a = got.GetDouble(i), b = want.GetDouble(i);
      if (std::isnan(b))
        ok = std::isnan(a);
      else if (std::isinf(b))
        ok = a == b;
      else
        ok = std::fabs(a - b) <= atol + rtol * std::fabs(b);
    } else {
      ok = got.GetInt(i) == want.GetInt(i);
    }
    if (!ok && bad++ == 0) first_bad = i;
  }
  if (bad > 0)
    return Error(what + ": " + std::to_string(bad) + " of " + std::to_string(want.size()) +
                 " values differ; first at " + std::to_string(first_bad) + ": got " +
                 std::to_string(got.GetDouble(first_bad)) + ", expected " +
                 std::to_string(want.GetDouble(first_bad)));
  return OkStatus();
}

// Compares runtime values: tensors by Compare, sequences item by item, empty optionals by kind.
Status CompareValue(const Tensor& got, const Tensor& want, double rtol, double atol,
                    const std::string& what) {
  auto kind = [](const Tensor& t) {
    return t.is_sequence() ? "a sequence" : t.is_none() ? "an empty optional" : "a tensor";
  };
  if (got.kind() != want.kind())
    return Error(what + ": got " + kind(got) + ", expected " + kind(want));
  if (want.is_none()) return OkStatus();
  if (!want.is_sequence()) return Compare(got, want, rtol, atol, what);
  if (got.items().size() != want.items().size())
    return Error(what + ": sequence of " + std::to_string(got.items().size()) +
                 " items, expected " + std::to_string(want.items().size()));
  for (size_t i = 0; i < want.items().size(); ++i)
    KILN_RETURN_IF_ERROR(CompareValue(got.items()[i], want.items()[i], rtol, atol,
                                      what + " item " + std::to_string(i)));
  return OkStatus();
}

bool UsesTrainingOps(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n.domain == "ai.onnx.preview.training") return true;
    for (const auto& [k, a] : n.attrs) {
      if (a.g && UsesTrainingOps(*a.g)) return true;
      for (const auto& sg : a.graphs)
        if (UsesTrainingOps(*sg)) return true;
    }
  }
  return false;
}

// Runs the model through the chosen backend.
Expected<std::vector<Tensor>> RunBackend(const ir::Model& model, const std::vector<Tensor>& inputs,
                                         const passes::ShapeOverrides& shapes, const TestOptions& o,
                                         bool host) {
  std::vector<Tensor> outputs;
  ir::Model copy = ir::CloneModel(model);  // passes change graphs: the reference keeps its own
  if (!host && o.backend == "c") {
    CHarnessOptions ho;
    ho.cc = o.cc;
    ho.run_prefix = o.c_run;
    ho.weight_storage = o.precision;
    ho.shapes = shapes;
    ho.passes = o.pipeline.passes;
    ho.plan = PlanOptionsOf(o.pipeline);
    return RunThroughC(std::move(copy), inputs, ho);
  }
  // The host reference (--reference host) runs the file's graph as it is: no passes.
  runtime::ExecutorOptions eo;
  eo.shapes = shapes;
  eo.threads = o.threads;
  if (!host) eo.kernels = o.kernels;
  eo.planner = host ? "default" : o.pipeline.planner;
  eo.poison = o.poison && !host;
  eo.reorder = host || o.pipeline.reorder;
  eo.aliasing = !o.no_alias;
  if (!host) eo.passes = o.pipeline.passes;
  if (!host) eo.planner_steps = o.pipeline.planner_steps;
  KILN_ASSIGN_OR_RETURN(auto exec, runtime::Executor::Create(std::move(copy), eo));
  KILN_RETURN_IF_ERROR(exec->Run(inputs, &outputs));
  return outputs;
}

// Relative L2 distance |got - want| / |want| (0 when both are zero).
double RelativeL2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double a = got.GetDouble(i), b = want.GetDouble(i);
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// A test is a backend test folder (model.onnx + test_data_set_N) or a model file run on random
// inputs against the host executor.
Result RunOne(const fs::path& test, const TestOptions& o) {
  bool folder = fs::is_directory(test);
  auto model = folder ? frontend::LoadOnnxModel((test / "model.onnx").string())
                      : frontend::LoadModel(test.string(), o.weights);
  if (!model.ok()) return {Outcome::kFail, model.status().message()};
  const ir::Graph& g = *model->graph;
  if (UsesTrainingOps(g)) return {Outcome::kSkip, "uses training operators"};
  std::vector<fs::path> sets;
  if (folder) {
    for (const auto& e : fs::directory_iterator(test))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return {Outcome::kFail, "no test_data_set_* folders"};
  } else {
    sets.push_back(fs::path("random"));
  }
  const bool against_host = !folder || o.reference == "host";
  std::vector<int> feeds = g.RuntimeInputs();
  std::string notes;
  for (const auto& set : sets) {
    std::string sname = set.filename().string();
    std::vector<Tensor> inputs;
    passes::ShapeOverrides
        shapes;  // --shape entries for this model's inputs (several models may share a run)
    for (int v : feeds)
      if (o.shapes.count(g.values[v].name))
        shapes[g.values[v].name] = o.shapes.at(g.values[v].name);
    if (folder) {
      auto in_files = NumberedFiles(set, "input");
      if (in_files.size() > feeds.size())
        return {Outcome::kFail, sname + ": " + std::to_string(in_files.size()) +
                                    " input files for " + std::to_string(feeds.size()) + " inputs"};
      if (in_files.size() <
          feeds.size())  // trailing optional inputs left out: not graph inputs here
        return {Outcome::kFail, sname + ": fewer input files than graph inputs"};
      for (size_t k = 0; k < in_files.size(); ++k) {
        const ir::Value& v = g.values[feeds[k]];
        auto t = frontend::LoadValueProtoFile(in_files[k].string(), v.type);
        if (!t.ok()) return {Outcome::kFail, t.status().message()};
        if (v.type.kind == ir::TypeInfo::Kind::kTensor) shapes[v.name] = t->dims();
        inputs.push_back(std::move(*t));
      }
    } else {
      for (size_t k = 0; k < feeds.size(); ++k) {
        const ir::Value& v = g.values[feeds[k]];
        Dims d = shapes.count(v.name) ? shapes[v.name] : v.type.dims;
        for (int64_t x : d)
          if (x < 0)
            return {Outcome::kFail,
                    "input '" + v.name + "' has a dynamic dim; fix it with --shape"};
        shapes[v.name] = d;
        inputs.push_back(RandomTensor(v.type.dtype, d, 1234 + k));
      }
    }
    // --const-int-inputs: integer inputs become constants of the model given to the backend
    // (their values from this test set), so shape-computing inputs (axes, pads, sizes) are
    // known at compile time.
    ir::Model backend_model = ir::CloneModel(*model);  // gets constants the reference must not see
    std::vector<Tensor> backend_inputs = inputs;
    passes::ShapeOverrides backend_shapes = shapes;
    if (o.const_int_inputs) {
      backend_inputs.clear();
      for (size_t k = 0; k < inputs.size(); ++k) {
        ir::Value& v = backend_model.graph->values[feeds[k]];
        bool is_int = !inputs[k].is_sequence() && !inputs[k].is_none() &&
                      !IsFloatingDType(inputs[k].dtype()) && inputs[k].dtype() != DType::kBool;
        if (is_int) {
          v.constant = inputs[k];
          backend_shapes.erase(v.name);
        } else {
          backend_inputs.push_back(inputs[k]);
        }
      }
    }
    auto outputs = RunBackend(backend_model, backend_inputs, backend_shapes, o, false);
    if (!outputs.ok()) return {Outcome::kFail, outputs.status().message()};
    std::vector<Tensor> want;
    if (against_host) {
      auto ref = RunBackend(*model, inputs, shapes, o, true);
      if (!ref.ok()) return {Outcome::kFail, "host executor: " + ref.status().message()};
      want = std::move(*ref);
    } else {
      auto out_files = NumberedFiles(set, "output");
      for (size_t k = 0; k < out_files.size() && k < g.outputs.size(); ++k) {
        auto w = frontend::LoadValueProtoFile(out_files[k].string(), g.values[g.outputs[k]].type);
        if (!w.ok()) return {Outcome::kFail, w.status().message()};
        want.push_back(std::move(*w));
      }
      if (out_files.size() != outputs->size())
        return {Outcome::kFail, sname + ": model has " + std::to_string(outputs->size()) +
                                    " outputs, test expects " + std::to_string(out_files.size())};
    }
    for (size_t k = 0; k < want.size(); ++k) {
      const ir::Value& v = g.values[g.outputs[k]];
      std::string what = sname + " output '" + v.name + "'";
      if (against_host && !(*outputs)[k].is_sequence() && IsFloatingDType(want[k].dtype()) &&
          (*outputs)[k].dims() == want[k].dims()) {
        double e = RelativeL2((*outputs)[k], want[k]);
        if (!(e <= o.max_rel_l2))
          return {Outcome::kFail,
                  what + ": relative L2 error " + std::to_string(e) + " vs the host executor"};
        char buf[96];
        std::snprintf(buf, sizeof(buf), "%s%s rel-L2 %.2e", notes.empty() ? "" : ", ",
                      v.name.c_str(), e);
        notes += buf;
        continue;
      }
      Status st = CompareValue((*outputs)[k], want[k], o.rtol, o.atol, what);
      if (!st.ok()) return {Outcome::kFail, st.message()};
    }
  }
  return {Outcome::kPass, notes};
}

// Runs tests in forked children, up to `jobs` at a time, each with a time limit; a crash, hang or
// abort becomes that test's failure with a reason. The parent stays single-threaded, so forking
// is safe. Results come back in test order.
class ChildPool {
 public:
  ChildPool(const TestOptions& o) : o_(o) {}

  std::vector<Result> Run(const std::vector<fs::path>& tests,
                          const std::function<void(size_t, const Result&)>& report) {
    std::vector<Result> results(tests.size());
    std::vector<bool> done(tests.size(), false);
    size_t next = 0, reported = 0;
    while (reported < tests.size()) {
      while (next < tests.size() && running_.size() < static_cast<size_t>(std::max(1, o_.jobs))) {
        if (!Start(next, tests[next])) {
          results[next] = RunOne(tests[next], o_);
          done[next] = true;
        }
        ++next;
      }
      Poll(&results, &done);
      while (reported < tests.size() && done[reported]) {
        report(reported, results[reported]);
        ++reported;
      }
    }
    return results;
  }

 private:
  struct Child {
    size_t index;
    pid_t pid;
    int fd;
    std::chrono::steady_clock::time_point deadline;
    std::string msg;
  };

  bool Start(size_t index, const fs::path& dir) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return false;
    }
    if (pid == 0) {
      close(fds[0]);
      Result r;
      try {
        r = RunOne(dir, o_);
      } catch (const std::exception& e) {
        r = {Outcome::kFail, std::string("exception: ") + e.what()};
      }
      std::string msg = std::to_string(static_cast<int>(r.outcome)) + r.message;
      size_t off = 0;
      while (off < msg.size()) {
        ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    running_.push_back({index, pid, fds[0],
                        std::chrono::steady_clock::now() + std::chrono::seconds(o_.timeout_s), ""});
    return true;
  }

  void Poll(std::vector<Result>* results, std::vector<bool>* done) {
    if (running_.empty()) return;
    std::vector<pollfd> p;
    for (const auto& c : running_) p.push_back({c.fd, POLLIN, 0});
    poll(p.data(), p.size(), 200);
    auto now = std::chrono::steady_clock::now();
    for (size_t i = running_.size(); i-- > 0;) {
      Child& c = running_[i];
      bool finished = false, timed_out = false;
      if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = read(c.fd, buf, sizeof(buf));
        if (n > 0)
          c.msg.append(buf, static_cast<size_t>(n));
        else
          finished = true;
      }
      if (!finished && now >= c.deadline) {
        timed_out = true;
        kill(c.pid, SIGKILL);
      }
      if (!finished && !timed_out) continue;
      close(c.fd);
      int status = 0;
      waitpid(c.pid, &status, 0);
      Result r;
      if (timed_out)
        r = {Outcome::kFail, "timed out after " + std::to_string(o_.timeout_s) + " s"};
      else if (WIFSIGNALED(status))
        r = {Outcome::kFail, std::string("crashed: ") + strsignal(WTERMSIG(status))};
      else if (c.msg.empty())
        r = {Outcome::kFail, "test process exited without a result"};
      else
        r = {static_cast<Outcome>(c.msg[0] - '0'), c.msg.substr(1)};
      (*results)[c.index] = r;
      (*done)[c.index] = true;
      running_.erase(running_.begin() + static_cast<long>(i));
    }
  }

  const TestOptions& o_;
  std::vector<Child> running_;
};

std::set<std::string> ReadExpectedFailures(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    std::string name = line.substr(0, hash);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t\r") + 1);
    if (!name.empty()) names.insert(name);
  }
  return names;
}

int TestOnnxMain(const TestOptions& o) {
  std::vector<fs::path> tests;
  for (const auto& d : o.dirs) {
    if (!fs::is_directory(d) && !IsModelFile(d))
      return Fail(Error(d + ": not a folder or a model file"));
    const size_t before = tests.size();
    Collect(d, &tests);
    if (tests.size() == before)
      return Fail(Error("no tests found under " + d +
                        " (a test is a folder with model.onnx and test_data_set_N/)"));
  }
  std::set<std::string> expected;
  if (!o.expected_failures.empty()) {
    if (!fs::exists(o.expected_failures))
      return Fail(Error(o.expected_failures + ": no such file"));
    expected = ReadExpectedFailures(o.expected_failures);
  }
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> unexpected_failures, unexpected_passes;
  ChildPool pool(o);
  pool.Run(tests, [&](size_t i, const Result& r) {
    std::string name = tests[i].filename().string();
    if (r.outcome == Outcome::kPass && !r.message.empty() && o.verbose)
      std::printf("PASS %s: %s\n", name.c_str(), r.message.c_str());
    switch (r.outcome) {
      case Outcome::kPass:
        ++passed;
        if (expected.count(name)) unexpected_passes.push_back(name);
        if (o.verbose && r.message.empty()) std::printf("PASS %s\n", name.c_str());
        break;
      case Outcome::kFail:
        ++failed;
        std::printf("FAIL %s: %s\n", name.c_str(), r.message.c_str());
        if (!o.expected_failures.empty() && !expected.count(name))
          unexpected_failures.push_back(name);
        break;
      case Outcome::kSkip:
        ++skipped;
        std::printf("SKIP %s: %s\n", name.c_str(), r.message.c_str());
        break;
    }
    std::fflush(stdout);
  });
  int rc = failed > 0 ? 1 : 0;
  if (!o.expected_failures.empty()) {
    for (const auto& n : unexpected_passes)
      std::printf("note: %s passes now; remove it from %s\n", n.c_str(),
                  o.expected_failures.c_str());
    for (const auto& n : unexpected_failures)
      std::printf("REGRESSION %s is not in the expected-failure list\n", n.c_str());
    rc = unexpected_failures.empty() ? 0 : 1;
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return rc;
}

}  // namespace

void AddTestOnnxCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("test-onnx", "run ONNX backend test folders and compare outputs");
  auto o = std::make_shared<TestOptions>();  // owned by the callback
  c->add_option("DIR", o->dirs,
                "test folders, folders of them, or model files (random inputs, checked against the "
                "host executor)")
      ->required();
  auto shape_specs = std::make_shared<std::vector<std::string>>();
  c->add_option("--expected-failures", o->expected_failures,
                "file listing tests expected to fail (one name per line, '#' comments); then "
                "only a failure not listed makes the exit code 1");
  c->add_option("--rtol", o->rtol, "relative tolerance")->check(NumberAtLeast(0));
  c->add_option("--atol", o->atol, "absolute tolerance")->check(NumberAtLeast(0));
  c->add_option("--timeout", o->timeout_s, "seconds per test")->check(IntegerIn(1, 86400));
  c->add_flag("-v,--verbose", o->verbose, "print passing tests too");
  c->add_option("--threads", o->threads, "worker threads")->check(IntegerIn(1, kMaxThreads));
  AddKernelsOption(c, &o->kernels);
  c->add_option("--planner", o->planner, "memory planner to run the tests with");
  c->add_flag("--poison", o->poison, "fill dead arena bytes with a poison pattern between nodes");
  c->add_flag("--no-reorder", o->no_reorder, "keep each model's node order");
  c->add_flag("--no-alias", o->no_alias, "no views, in-place or Concat-in-place sharing");
  c->add_option("--backend", o->backend, "host (the executor) or c (generated C, built with --cc)")
      ->check(OneOf({"host", "c"}));
  c->add_option("--cc", o->cc, "C compiler for --backend c");
  c->add_option("-j,--jobs", o->jobs, "tests run at once")->check(IntegerIn(1, 256));
  c->add_option("--c-run", o->c_run,
                "command that runs the program built by --cc (e.g. an emulator)");
  c->add_option("--precision", o->precision,
                "with --backend c: how MatMul and Gemm weights are stored (kiln compile's "
                "--precision); judge the error with --max-rel-l2")
      ->check(OneOf({"fp32", "fp8", "fp4"}));
  c->add_option(
       "--reference", o->reference,
       "compare with the folder's expected outputs (files) or with the host executor (host); "
       "model files always use the host")
      ->check(OneOf({"files", "host"}));
  c->add_flag(
      "--const-int-inputs", o->const_int_inputs,
      "give the backend each test's integer inputs as constants (shape inputs such as axes, "
      "pads and sizes then are known at compile time)");
  c->add_option("--max-rel-l2", o->max_rel_l2,
                "largest relative L2 error against the host executor")
      ->check(NumberAtLeast(0));
  c->add_option("--shape", *shape_specs, "fix a model file's input dims: NAME=D0,D1,...")
      ->allow_extra_args(false);
  c->add_option("--weights", o->weights, "safetensors weights for a .json model file");
  c->add_option("--pipeline", o->pipeline_file,
                "passes and planner from a pipeline file (kiln tune writes one)");
  c->callback([&rc, o, shape_specs] {
    auto pipeline = ResolvePipeline(o->pipeline_file, o->planner, o->no_reorder);
    if (!pipeline.ok()) {
      rc = Fail(pipeline.status());
      return;
    }
    o->pipeline = *pipeline;
    auto shapes = ParseShapes(*shape_specs);
    if (!shapes.ok()) {
      rc = Fail(shapes.status());
      return;
    }
    o->shapes = *shapes;
    AddPipelineShapes(o->pipeline, &o->shapes);
    rc = TestOnnxMain(*o);
  });
}

}  // namespace kiln::cli
