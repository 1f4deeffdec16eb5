// kiln bundle / kiln verify, and the .kiln / .bpte pieces of run, compile and inspect
// (DESIGN.md 2.3): programs compiled to .kiln, bundles of a program with test sets, their
// verification on the host, and the NAME_verify.c that verifies them through generated C.
#include "bundle/bundle.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "bundle/program.h"
#include "bundle/sha256.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "codegen/c/c_backend.h"
#include "codegen/c/verify_main.h"
#include "frontend/model_loader.h"
#include "runtime/executor.h"
#include "support/file_io.h"

namespace kiln::cli {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string TypeString(const Tensor& t) {
  return std::string(DTypeName(t.dtype())) + DimsToString(t.dims());
}

// "NAME=FILE" options where a name may repeat: the k-th occurrence belongs to test set k. A bare
// FILE (allowed where `bare_ok`) is listed under the name "", for the model's only input.
Expected<std::vector<std::pair<std::string, std::vector<std::string>>>> ParseRepeated(
    const std::vector<std::string>& specs, const std::string& option, bool bare_ok) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& s : specs) {
    const size_t eq = s.find('=');
    const bool bare = eq == std::string::npos && bare_ok && !s.empty();
    if (!bare && (eq == std::string::npos || eq == 0 || eq + 1 == s.size()))
      return Error(option + " '" + s + "': expected NAME=FILE");
    std::string name = bare ? "" : s.substr(0, eq);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == name; });
    if (it == out.end()) {
      out.push_back({name, {}});
      it = out.end() - 1;
    }
    it->second.push_back(bare ? s : s.substr(eq + 1));
  }
  return out;
}

// Names the bare --input files (listed under "") after the model's only input, and checks that
// every name is an input of `g`.
Status NameGivenInputs(const ir::Graph& g, std::map<std::string, std::vector<Tensor>>* given) {
  auto bare = given->find("");
  if (bare != given->end()) {
    std::vector<int> inputs = g.RuntimeInputs();
    if (inputs.size() != 1)
      return Error("--input without NAME=: the model has " + std::to_string(inputs.size()) +
                   " inputs; give NAME=FILE (its inputs are " + passes::ListValues(g, inputs) +
                   ")");
    const std::string& name = g.values[inputs[0]].name;
    if (given->count(name))
      return Error("--input " + name + " is given both with and without its name");
    (*given)[name] = std::move(bare->second);
    given->erase("");
  }
  for (const auto& [name, tensors] : *given)
    KILN_RETURN_IF_ERROR(CheckInputName(g, name, "--input"));
  return OkStatus();
}

// The summary lines of a program (kiln inspect on .kiln and .bpte).
void PrintProgram(const bundle::Program& p, size_t bytes) {
  const auto& md = p.metadata;
  const ir::Graph& g = *p.model.graph;
  std::printf("program: %zu bytes, .kiln schema %u, written by kiln %s from %s\n", bytes,
              md.schema_version, md.kiln_version.empty() ? "?" : md.kiln_version.c_str(),
              md.source_name.empty() ? "?" : md.source_name.c_str());
  if (md.source_sha256.size() == 32)
    std::printf(
        "  source sha256 %s\n",
        bundle::HexString(reinterpret_cast<const uint8_t*>(md.source_sha256.data()), 32).c_str());
  std::string opsets;
  for (const auto& [d, v] : p.model.opsets)
    opsets += (opsets.empty() ? "" : ", ") + (d.empty() ? std::string("ai.onnx") : d) + " " +
              std::to_string(v);
  std::printf("  graph '%s': %zu nodes, %zu values; opsets %s\n", g.name.c_str(), g.nodes.size(),
              g.values.size(), opsets.c_str());
  std::printf("  constants: %zu tensors in a %zu-byte data section (%zu distinct byte ranges)\n",
              p.stats.constants, p.stats.data_bytes, p.stats.unique_constants);
  std::printf(
      "  plan: planner %s%s%s, arena %zu bytes (lower bound %zu), %zu buffers, schedule peak %zu "
      "bytes\n",
      p.plan.planner.c_str(), p.plan_options.reorder ? "" : ", no reorder",
      p.plan_options.aliasing ? "" : ", no aliasing", p.plan.arena_bytes, p.plan.lower_bound_bytes,
      p.plan.buffers.size(), p.schedule.peak_bytes);
  for (int v : g.RuntimeInputs())
    std::printf("  input  '%s': %s\n", g.values[v].name.c_str(),
                g.values[v].type.ToString().c_str());
  for (int v : g.outputs)
    std::printf("  output '%s': %s\n", g.values[v].name.c_str(),
                g.values[v].type.ToString().c_str());
}

std::string Stats(const Tensor& t) {
  std::string s = TypeString(t) + ", " + std::to_string(t.nbytes()) + " bytes";
  if (t.size() == 0 || DTypeSize(t.dtype()) == 0) return s;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nan = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = t.GetDouble(i);
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf), ": min %.6g, max %.6g, mean %.6g", lo, hi,
                t.size() > nan ? sum / static_cast<double>(t.size() - nan) : 0.0);
  s += buf;
  if (nan) s += ", " + std::to_string(nan) + " NaN";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Comparing outputs

struct Diff {
  int64_t elements = 0, bad = 0;
  int64_t worst = -1;  // the element furthest outside the tolerance
  double max_abs = 0, max_rel = 0, worst_got = 0, worst_want = 0, worst_excess = -1;
  std::string mismatch;  // a dtype or dims difference
};

Diff Compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  Diff d;
  d.elements = want.size();
  if (got.kind() != Tensor::Kind::kTensor || got.dtype() != want.dtype() ||
      got.dims() != want.dims()) {
    d.mismatch =
        "got " +
        (got.kind() == Tensor::Kind::kTensor ? TypeString(got) : std::string("a non-tensor")) +
        ", expected " + TypeString(want);
    d.bad = std::max<int64_t>(1, d.elements);
    return d;
  }
  const bool floating = IsFloatingDType(want.dtype());
  for (int64_t i = 0; i < d.elements; ++i) {
    double a, b;
    bool ok;
    if (floating) {
      a = got.GetDouble(i);
      b = want.GetDouble(i);
      if (a == b || (std::isnan(a) && std::isnan(b)))
        ok = true;
      else if (!std::isfinite(a) || !std::isfinite(b))
        ok = false;
      else
        ok = std::fabs(a - b) <= atol + rtol * std::fabs(b);
    } else {
      int64_t x = got.GetInt(i), y = want.GetInt(i);
      ok = x == y;
      a = static_cast<double>(x);
      b = static_cast<double>(y);
    }
    double diff = std::fabs(a - b);
    if (std::isfinite(diff)) {
      d.max_abs = std::max(d.max_abs, diff);
      if (b != 0) d.max_rel = std::max(d.max_rel, diff / std::fabs(b));
    }
    if (!ok) {
      ++d.bad;
      double excess = std::isfinite(diff) ? diff - (atol + rtol * std::fabs(b)) : INFINITY;
      if (d.worst < 0 || excess > d.worst_excess) {
        d.worst = i;
        d.worst_excess = excess;
        d.worst_got = a;
        d.worst_want = b;
      }
    }
  }
  return d;
}

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// kiln bundle

struct BundleCliOptions {
  std::string model, weights, out, planner = "default";
  std::vector<std::string> shapes, inputs, expected;
  int random = 0;
  uint64_t seed = 1;
  int threads = 1;
  bool no_reorder = false, no_alias = false;
};

Status MakeBundle(const BundleCliOptions& o) {
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseShapes(o.shapes));
  KILN_ASSIGN_OR_RETURN(auto in_specs, ParseRepeated(o.inputs, "--input", true));
  KILN_ASSIGN_OR_RETURN(auto exp_specs, ParseRepeated(o.expected, "--expected", false));
  if (o.random > 0 && !in_specs.empty()) return Error("give --input or --random, not both");
  size_t nsets = o.random > 0 ? static_cast<size_t>(o.random) : 1;
  for (const auto& [name, files] : in_specs) {
    if (files.size() != in_specs[0].second.size())
      return Error("--input " + in_specs[0].first + " is given " +
                   std::to_string(in_specs[0].second.size()) + " times and --input " + name + " " +
                   std::to_string(files.size()) + " times; give every input once per test set");
    nsets = files.size();
  }
  for (const auto& [name, files] : exp_specs)
    if (files.size() != nsets)
      return Error("--expected " + name + " is given " + std::to_string(files.size()) +
                   " times for " + std::to_string(nsets) + " test set" + (nsets == 1 ? "" : "s"));
  std::map<std::string, std::vector<Tensor>> given;
  for (const auto& [name, files] : in_specs)
    for (const auto& f : files) {
      KILN_ASSIGN_OR_RETURN(Tensor t, frontend::LoadTensorFile(f));
      given[name].push_back(std::move(t));
    }

  planner::PlanOptions po;
  po.planner = o.planner;
  po.reorder = !o.no_reorder;
  po.aliasing = !o.no_alias;
  if (!IsProgramPath(o.model) && !IsBundlePath(o.model)) {
    // Symbolic input dims take the sizes of the first test set's files (as kiln run does).
    KILN_ASSIGN_OR_RETURN(ir::Model raw, frontend::LoadModel(o.model, o.weights));
    KILN_RETURN_IF_ERROR(NameGivenInputs(*raw.graph, &given));
    for (const auto& [name, tensors] : given)
      AddShapeFromFile(*raw.graph, name, tensors[0].dims(), &shapes);
  }
  KILN_ASSIGN_OR_RETURN(
      std::string program_bytes,
      CompileProgram(o.model, o.weights, shapes, passes::DefaultPipeline().passes, po));
  auto holder = std::make_shared<std::string>(std::move(program_bytes));
  KILN_ASSIGN_OR_RETURN(bundle::Program prog,
                        bundle::LoadProgram(reinterpret_cast<const uint8_t*>(holder->data()),
                                            holder->size(), holder, o.model));
  runtime::ExecutorOptions eo;
  eo.threads = o.threads;
  eo.planner = o.planner;
  eo.reorder = po.reorder;
  eo.aliasing = po.aliasing;
  const ir::Graph& pg = *prog.model.graph;
  std::vector<int> feeds = pg.RuntimeInputs();
  KILN_RETURN_IF_ERROR(NameGivenInputs(pg, &given));
  for (const auto& [name, files] : exp_specs) {
    bool found = false;
    for (int v : pg.outputs) found = found || pg.values[v].name == name;
    if (!found)
      return Error("--expected " + name +
                   ": the model has no output of that name; its outputs are " +
                   passes::ListValues(pg, pg.outputs));
  }
  std::vector<bundle::TestSet> sets(nsets);
  for (size_t k = 0; k < nsets; ++k) {
    for (size_t i = 0; i < feeds.size(); ++i) {
      const ir::Value& v = pg.values[feeds[i]];
      auto it = given.find(v.name);
      if (it != given.end()) {
        sets[k].inputs.push_back(it->second[k]);
        continue;
      }
      if (!v.type.shape_known())
        return Error("input '" + v.name + "' has dynamic dims " + v.type.ToString() +
                     "; fix them with --shape " + v.name + "=... or give --input");
      sets[k].inputs.push_back(RandomTensor(v.type.dtype, v.type.dims, o.seed + i + 1000 * k));
    }
  }
  // Expected outputs: the files given, the host executor for the rest.
  bool need_host = exp_specs.size() < pg.outputs.size();
  std::vector<std::vector<Tensor>> host(nsets);
  std::vector<std::string> names;
  for (int v : pg.outputs) names.push_back(pg.values[v].name);
  std::unique_ptr<runtime::Executor> exec;
  if (need_host) {
    KILN_ASSIGN_OR_RETURN(exec, runtime::Executor::Create(std::move(prog.model), eo));
    for (size_t k = 0; k < nsets; ++k) {
      std::vector<Tensor> outs;
      Status st = exec->Run(sets[k].inputs, &outs);
      if (!st.ok()) return Error("test set " + std::to_string(k) + ": " + st.message());
      for (auto& t : outs) host[k].push_back(t.Clone());
    }
  }
  const ir::Graph& g = exec ? *exec->model().graph : *prog.model.graph;
  for (size_t k = 0; k < nsets; ++k) {
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = std::find_if(exp_specs.begin(), exp_specs.end(),
                             [&](const auto& e) { return e.first == names[i]; });
      if (it == exp_specs.end()) {
        sets[k].expected_outputs.push_back(host[k][i]);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Tensor t, frontend::LoadTensorFile(it->second[k]));
      const ir::TypeInfo& ty = g.values[g.outputs[i]].type;
      bool ok = ty.dtype == DType::kUndefined || ty.dtype == t.dtype();
      if (ok && ty.has_shape) {
        ok = ty.dims.size() == t.dims().size();
        for (size_t d = 0; ok && d < ty.dims.size(); ++d)
          ok = ty.dims[d] < 0 || ty.dims[d] == t.dim(d);
      }
      if (!ok)
        return Error("--expected " + names[i] + "=" + it->second[k] + ": the model's output is " +
                     ty.ToString() + ", the file holds " + TypeString(t));
      sets[k].expected_outputs.push_back(std::move(t));
    }
  }
  KILN_RETURN_IF_ERROR(bundle::CheckTestSets(g, sets, o.out));
  KILN_ASSIGN_OR_RETURN(std::string bytes, bundle::SerializeBundle(*holder, g, sets));
  KILN_RETURN_IF_ERROR(WriteFile(o.out, bytes));
  size_t data = 0;
  for (const auto& s : sets) {
    for (const auto& t : s.inputs) data += t.nbytes();
    for (const auto& t : s.expected_outputs) data += t.nbytes();
  }
  std::printf(
      "%s: %zu test set%s (%zu inputs, %zu outputs each, %zu bytes of tensor data%s); program %zu "
      "bytes; "
      "bundle %zu bytes\n",
      o.out.c_str(), nsets, nsets == 1 ? "" : "s", feeds.size(), names.size(), data,
      exp_specs.empty() ? ", expected outputs from the host executor"
      : need_host       ? ", expected outputs from files and the host executor"
                        : ", expected outputs from files",
      holder->size(), bytes.size());
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// kiln verify

struct VerifyCliOptions {
  std::string path, planner = "default";
  double rtol = 1e-4, atol = 1e-5;
  bool json = false;
  int threads = 1;
};

int VerifyMain(const VerifyCliOptions& o) {
  auto b = bundle::LoadBundleFile(o.path);
  if (!b.ok()) return Fail(b.status());
  runtime::ExecutorOptions eo;
  eo.threads = o.threads;
  eo.planner = o.planner;
  eo.reorder = b->program.plan_options.reorder;
  eo.aliasing = b->program.plan_options.aliasing;
  auto exec = runtime::Executor::Create(std::move(b->program.model), eo);
  if (!exec.ok()) return Fail(Error(o.path + ": " + exec.status().message()));
  const ir::Graph& g = *(*exec)->model().graph;
  nlohmann::ordered_json j;
  j["bundle"] = o.path;
  j["rtol"] = o.rtol;
  j["atol"] = o.atol;
  j["test_sets"] = nlohmann::ordered_json::array();
  int passed = 0, failed = 0;
  std::string first_failure;
  for (size_t k = 0; k < b->test_sets.size(); ++k) {
    const bundle::TestSet& s = b->test_sets[k];
    std::vector<Tensor> outs;
    Status st = (*exec)->Run(s.inputs, &outs);
    if (!st.ok())
      return Fail(Error(o.path + ": test set " + std::to_string(k) + ": " + st.message()));
    nlohmann::ordered_json js;
    js["index"] = k;
    js["outputs"] = nlohmann::ordered_json::array();
    bool set_ok = true;
    std::string line;
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const std::string& name = g.values[g.outputs[i]].name;
      Diff d = Compare(outs[i], s.expected_outputs[i], o.rtol, o.atol);
      bool ok = d.bad == 0;
      set_ok = set_ok && ok;
      line += (i ? "; '" : " '") + name + "' max abs error " + Num(d.max_abs) + ", max rel error " +
              Num(d.max_rel);
      std::string why;
      if (!d.mismatch.empty()) {
        why = d.mismatch;
      } else if (!ok) {
        why = std::to_string(d.bad) + " of " + std::to_string(d.elements) +
              " elements differ beyond rtol " + Num(o.rtol) + ", atol " + Num(o.atol) +
              " (worst at index " + std::to_string(d.worst) + ": got " + Num(d.worst_got) +
              ", expected " + Num(d.worst_want) + ")";
      }
      if (!why.empty()) line += ", " + why;
      if (!ok && first_failure.empty())
        first_failure = "test set " + std::to_string(k) + " output '" + name + "': " + why;
      nlohmann::ordered_json jo;
      jo["name"] = name;
      jo["dtype"] = std::string(DTypeName(s.expected_outputs[i].dtype()));
      jo["dims"] = s.expected_outputs[i].dims();
      jo["elements"] = d.elements;
      jo["max_abs_error"] = d.max_abs;
      jo["max_rel_error"] = d.max_rel;
      jo["mismatches"] = d.bad;
      jo["passed"] = ok;
      if (!why.empty()) jo["error"] = why;
      js["outputs"].push_back(jo);
    }
    js["passed"] = set_ok;
    j["test_sets"].push_back(js);
    if (set_ok)
      ++passed;
    else
      ++failed;
    if (!o.json) std::printf("test set %zu: %s%s\n", k, set_ok ? "pass" : "FAIL", line.c_str());
  }
  j["passed"] = passed;
  j["failed"] = failed;
  if (o.json) {
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("%s: %d of %zu test sets passed (rtol %s, atol %s)\n", o.path.c_str(), passed,
                b->test_sets.size(), Num(o.rtol).c_str(), Num(o.atol).c_str());
  }
  std::fflush(stdout);
  if (failed > 0)
    return Fail(Error(o.path + ": " + std::to_string(failed) + " of " +
                      std::to_string(b->test_sets.size()) + " test sets fail; " + first_failure));
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared with run, compile, inspect, plan

bool IsProgramPath(const std::string& path) { return EndsWith(path, ".kiln"); }
bool IsBundlePath(const std::string& path) { return EndsWith(path, ".bpte"); }

Expected<ir::Model> LoadAnyModel(const std::string& path, const std::string& weights) {
  if (IsProgramPath(path)) {
    KILN_ASSIGN_OR_RETURN(auto p, bundle::LoadProgramFile(path));
    return std::move(p.model);
  }
  if (IsBundlePath(path)) {
    KILN_ASSIGN_OR_RETURN(auto b, bundle::LoadBundleFile(path));
    return std::move(b.program.model);
  }
  return frontend::LoadModel(path, weights);
}

Expected<std::string> CompileProgram(const std::string& path, const std::string& weights,
                                     const passes::ShapeOverrides& shapes,
                                     const std::vector<std::string>& passes,
                                     const planner::PlanOptions& plan, DType weight_storage) {
  if (IsProgramPath(path) || IsBundlePath(path)) {
    if (weight_storage != DType::kUndefined)
      return Error(path + ": --precision applies to a model file, not a compiled program");
    if (!shapes.empty())
      return Error(path + ": --shape does not apply: the program's dims are fixed");
    if (IsProgramPath(path)) {
      KILN_RETURN_IF_ERROR(bundle::LoadProgramFile(path).status());  // validates it
      return ReadFile(path);
    }
    KILN_ASSIGN_OR_RETURN(auto b, bundle::LoadBundleFile(path));
    return std::string(reinterpret_cast<const char*>(b.program_data), b.program_size);
  }
  KILN_ASSIGN_OR_RETURN(ir::Model model, frontend::LoadModel(path, weights));
  compiler::CompileOptions co;
  co.target = compiler::Target::kPipeline;
  co.shapes = shapes;
  co.passes = passes;
  co.plan = plan;
  co.weight_storage = weight_storage;
  auto program = compiler::Compile(std::move(model), co);
  if (!program.ok()) return Error(path + ": " + program.status().message());
  bundle::ProgramMetadata md;
  md.kiln_version = kKilnVersion;
  md.source_name = std::filesystem::path(path).filename().string();
  KILN_ASSIGN_OR_RETURN(md.source_sha256, bundle::HashSourceFiles(path, weights));
  auto bytes = bundle::SerializeProgram(program->model, program->main().plan, plan, md);
  if (!bytes.ok()) return Error(path + ": " + bytes.status().message());
  return bytes;
}

Status AddVerifyMain(const std::string& bundle_path, const std::string& name,
                     const std::string& command_line, codegen::c::CompiledC* compiled) {
  KILN_ASSIGN_OR_RETURN(auto b, bundle::LoadBundleFile(bundle_path));
  std::vector<codegen::c::VerifyTestSet> sets;
  for (auto& s : b.test_sets) sets.push_back({s.inputs, s.expected_outputs});
  codegen::c::VerifyOptions vo;
  vo.name = name;
  vo.source = std::filesystem::path(bundle_path).filename().string();
  vo.command_line = command_line;
  vo.kiln_version = kKilnVersion;
  auto file = codegen::c::GenerateVerifyMain(compiled->interface, sets, vo);
  if (!file.ok()) return Error(bundle_path + ": " + file.status().message());
  compiled->files.push_back(std::move(*file));
  return OkStatus();
}

Status PrintProgramHeader(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto p, bundle::LoadProgramFile(path));
  PrintProgram(p, p.stats.file_bytes);
  return OkStatus();
}

int InspectBundle(const std::string& path) {
  auto b = bundle::LoadBundleFile(path);
  if (!b.ok()) return Fail(b.status());
  std::printf("%s: bundled program (%s) version %u, %zu bytes; method '%s', %zu test set%s\n",
              path.c_str(), bundle::kBundleIdentifier, b->version, b->file_bytes,
              b->method_name.c_str(), b->test_sets.size(), b->test_sets.size() == 1 ? "" : "s");
  PrintProgram(b->program, b->program_size);
  const ir::Graph& g = *b->program.model.graph;
  std::vector<int> feeds = g.RuntimeInputs();
  for (size_t k = 0; k < b->test_sets.size(); ++k) {
    const auto& s = b->test_sets[k];
    std::printf("test set %zu:\n", k);
    for (size_t i = 0; i < s.inputs.size(); ++i)
      std::printf("  input    '%s': %s\n", g.values[feeds[i]].name.c_str(),
                  Stats(s.inputs[i]).c_str());
    for (size_t i = 0; i < s.expected_outputs.size(); ++i)
      std::printf("  expected '%s': %s\n", g.values[g.outputs[i]].name.c_str(),
                  Stats(s.expected_outputs[i]).c_str());
  }
  return 0;
}

void AddBundleCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand(
      "bundle", "pack a compiled program with test inputs and expected outputs (.bpte)");
  auto o = std::make_shared<BundleCliOptions>();  // owned by the callback
  c->add_option("MODEL", o->model, "model file (.onnx, .json, or a compiled .kiln)")->required();
  c->add_option("--weights", o->weights, "safetensors weights for a .json model");
  c->add_option("--shape", o->shapes, "fix an input's dims: NAME=D0,D1,...");
  c->add_option(
      "--input", o->inputs,
      "a test input: NAME=FILE (.npy or .pb); the k-th --input of a name belongs to test set k");
  c->add_option("--random", o->random, "N test sets of deterministic random inputs")
      ->check(IntegerIn(1, 1000000));
  c->add_option("--seed", o->seed,
                "seed of the random inputs (default 1: set 0 gets kiln run's inputs)")
      ->check(UnsignedInteger());
  c->add_option(
      "--expected", o->expected,
      "an expected output: NAME=FILE, e.g. from another framework (default: the host executor)");
  c->add_option("-o,--output", o->out, "the .bpte file to write")->required();
  c->add_option("--planner", o->planner, "memory planner of the program");
  c->add_flag("--no-reorder", o->no_reorder, "keep the file's node order");
  c->add_flag("--no-alias", o->no_alias, "no views, in-place or Concat-in-place sharing");
  c->add_option("--threads", o->threads, "worker threads of the host executor")
      ->check(IntegerIn(1, kMaxThreads));
  c->callback([&rc, o] {
    Status st = MakeBundle(*o);
    rc = st.ok() ? 0 : Fail(st);
  });
}

void AddVerifyCommand(CLI::App& app, int& rc) {
  auto* c =
      app.add_subcommand("verify", "run every test set of a .bpte bundle and compare the outputs");
  auto o = std::make_shared<VerifyCliOptions>();  // owned by the callback
  c->add_option("BUNDLE", o->path, "the .bpte file")->required();
  c->add_option("--rtol", o->rtol, "relative tolerance (default 1e-4)")->check(NumberAtLeast(0));
  c->add_option("--atol", o->atol, "absolute tolerance (default 1e-5)")->check(NumberAtLeast(0));
  c->add_flag("--json", o->json, "one JSON object with the errors per test set and output");
  c->add_option("--threads", o->threads, "worker threads")->check(IntegerIn(1, kMaxThreads));
  c->add_option("--planner", o->planner, "memory planner of the host executor");
  c->callback([&rc, o] { rc = VerifyMain(*o); });
}

}  // namespace kiln::cli
