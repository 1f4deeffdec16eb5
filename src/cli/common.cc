#include "cli/common.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ir/half.h"

namespace kiln::cli {

Expected<passes::ShapeOverrides> ParseShapes(const std::vector<std::string>& specs) {
  passes::ShapeOverrides out;
  for (const auto& s : specs) {
    size_t eq = s.rfind('=');
    if (eq == std::string::npos || eq == 0)
      return Error("--shape '" + s + "': expected NAME=D0,D1,...");
    const std::string name = s.substr(0, eq);
    Dims dims;
    std::string list = s.substr(eq + 1);
    size_t p = 0;
    while (p < list.size()) {
      size_t c = list.find(',', p);
      std::string tok = list.substr(p, c == std::string::npos ? std::string::npos : c - p);
      char* end = nullptr;
      errno = 0;
      long long d = std::strtoll(tok.c_str(), &end, 10);
      if (tok.empty() || *end != '\0' || (d < 0 && errno == 0))
        return Error("--shape '" + s + "': '" + tok + "' is not a dimension");
      if (errno == ERANGE || d > kMaxDimension)
        return Error("--shape " + name + ": dimension " + tok + " of input '" + name +
                     "' is out of range (at most " + std::to_string(kMaxDimension) + ")");
      dims.push_back(d);
      if (c == std::string::npos) break;
      p = c + 1;
    }
    if (!out.emplace(name, dims).second) return Error("--shape " + name + " is given twice");
  }
  return out;
}

Status CheckInputName(const ir::Graph& g, const std::string& name, const std::string& option) {
  for (int v : g.RuntimeInputs())
    if (g.values[v].name == name) return OkStatus();
  return Error(option + " " + name + ": the model has no input of that name; its inputs are " +
               passes::ListValues(g, g.RuntimeInputs()));
}

Expected<std::pair<std::string, std::string>> SplitInputSpec(const std::string& spec,
                                                             const ir::Graph& g,
                                                             const std::string& option) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos) {
    std::vector<int> inputs = g.RuntimeInputs();
    if (spec.empty() || inputs.size() != 1)
      return Error(option + " '" + spec + "': the model has " + std::to_string(inputs.size()) +
                   " inputs; give NAME=FILE (its inputs are " + passes::ListValues(g, inputs) +
                   ")");
    return std::make_pair(g.values[inputs[0]].name, spec);
  }
  if (eq == 0 || eq + 1 == spec.size())
    return Error(option + " '" + spec + "': expected NAME=FILE");
  std::string name = spec.substr(0, eq);
  KILN_RETURN_IF_ERROR(CheckInputName(g, name, option));
  return std::make_pair(name, spec.substr(eq + 1));
}

void AddShapeFromFile(const ir::Graph& g, const std::string& name, const Dims& dims,
                      passes::ShapeOverrides* shapes) {
  for (int v : g.RuntimeInputs())
    if (g.values[v].name == name) AddShapeFromData(name, g.values[v].type, dims, shapes);
}

void AddShapeFromData(const std::string& name, const ir::TypeInfo& declared, const Dims& dims,
                      passes::ShapeOverrides* shapes) {
  if (shapes->count(name)) return;
  bool symbolic = !declared.has_shape;
  for (int64_t d : declared.dims) symbolic = symbolic || d < 0;
  if (symbolic && (!declared.has_shape || declared.dims.size() == dims.size()))
    (*shapes)[name] = dims;
}

Tensor RandomTensor(DType dtype, const Dims& dims, uint64_t seed) {
  Tensor t(dtype, dims);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&]() {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int64_t i = 0; i < t.size(); ++i) {
    uint64_t r = next();
    double u = (r >> 11) * (1.0 / 9007199254740992.0);  // [0,1)
    float f = static_cast<float>(u * 2.0 - 1.0);
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[i] = f;
        break;
      case DType::kFloat64:
        t.data<double>()[i] = u * 2.0 - 1.0;
        break;
      case DType::kFloat16:
        t.data<Float16>()[i] = Float16(f);
        break;
      case DType::kBFloat16:
        t.data<BFloat16>()[i] = BFloat16(f);
        break;
      case DType::kBool:
        t.data<uint8_t>()[i] = r & 1;
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(r % 16);
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(r % 16);
        break;
      case DType::kInt16:
        t.data<int16_t>()[i] = static_cast<int16_t>(r % 16);
        break;
      case DType::kUInt16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(r % 16);
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(r % 16);
        break;
      case DType::kUInt32:
        t.data<uint32_t>()[i] = static_cast<uint32_t>(r % 16);
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = static_cast<int64_t>(r % 16);
        break;
      case DType::kUInt64:
        t.data<uint64_t>()[i] = r % 16;
        break;
      case DType::kString:  // short words from a small vocabulary, so that some repeat
        t.strings()[i] = "w" + std::to_string(r % 16);
        break;
      default:
        break;
    }
  }
  return t;
}

Expected<passes::Pipeline> ResolvePipeline(const std::string& file, const std::string& planner,
                                           bool no_reorder) {
  if (file.empty()) {
    passes::Pipeline p = passes::DefaultPipeline();
    p.planner = planner;
    p.reorder = !no_reorder;
    return p;
  }
  if (planner != "default" || no_reorder)
    return Error("--pipeline " + file +
                 " chooses the planner and the order; drop --planner / --no-reorder");
  KILN_ASSIGN_OR_RETURN(passes::Pipeline p, passes::LoadPipelineFile(file));
  bool known = p.planner == "default";
  for (const auto& n : planner::PlannerNames()) known = known || n == p.planner;
  if (!known) return Error(file + ": unknown planner '" + p.planner + "'");
  return p;
}

void AddPipelineShapes(const passes::Pipeline& p, passes::ShapeOverrides* shapes) {
  for (const auto& [name, dims] : p.shapes) shapes->emplace(name, dims);
}

planner::PlanOptions PlanOptionsOf(const passes::Pipeline& p) {
  planner::PlanOptions po;
  po.planner = p.planner;
  po.reorder = p.reorder;
  po.max_steps = p.planner_steps;
  return po;
}

runtime::ExecutorOptions ExecutorOptionsOf(const passes::Pipeline& p,
                                           const passes::ShapeOverrides& shapes) {
  runtime::ExecutorOptions eo;
  eo.shapes = shapes;
  eo.planner = p.planner;
  eo.reorder = p.reorder;
  eo.passes = p.passes;
  eo.planner_steps = p.planner_steps;
  return eo;
}

void AddKernelsOption(CLI::App* c, ops::KernelSet* kernels) {
  c->add_option_function<std::string>(
       "--kernels",
       [kernels](const std::string& v) {
         *kernels = v == "reference" ? ops::KernelSet::kReference : ops::KernelSet::kFast;
       },
       "fast (SIMD, oneDNN, threads) or reference (the portable kernels the C backend emits, "
       "the unary ops' formulas, baseline-ISA loops elsewhere, one thread)")
      ->check(OneOf({"fast", "reference"}));
}

namespace {

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

bool ParseWhole(const std::string& s, long long* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

}  // namespace

CLI::Validator IntegerIn(long long lo, long long hi) {
  std::string allowed = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, allowed](std::string& s) -> std::string {
        long long v = 0;
        if (ParseWhole(s, &v) && v >= lo && v <= hi) return "";
        return Quoted(s) + " is not allowed; give " + allowed;
      },
      "INT in " + std::to_string(lo) + ".." + std::to_string(hi));
}

CLI::Validator UnsignedInteger() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        bool ok = !s.empty() && s[0] != '-' && s[0] != '+' &&
                  (std::strtoull(s.c_str(), &end, 10), errno == 0) && *end == '\0';
        return ok ? ""
                  : Quoted(s) + " is not allowed; give an integer from 0 to 18446744073709551615";
      },
      "UINT64");
}

CLI::Validator NumberAtLeast(double lo) {
  char bound[32];
  std::snprintf(bound, sizeof(bound), "%g", lo);
  std::string allowed = std::string("a number >= ") + bound;
  return CLI::Validator(
      [lo, allowed](std::string& s) -> std::string {
        char* end = nullptr;
        double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
        if (!s.empty() && *end == '\0' && std::isfinite(v) && v >= lo) return "";
        return Quoted(s) + " is not allowed; give " + allowed;
      },
      std::string("NUMBER >= ") + bound);
}

CLI::Validator OneOf(const std::vector<std::string>& allowed) {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return CLI::Validator(
      [allowed, list](std::string& s) -> std::string {
        for (const auto& a : allowed)
          if (s == a) return "";
        return Quoted(s) + " is not allowed; give one of " + list;
      },
      "one of " + list);
}

std::string CommandLineError(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::string verbs;
  const CLI::App* verb = nullptr;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    verbs += (verbs.empty() ? "" : ", ") + sub->get_name();
    if (argc > 1 && sub->get_name() == argv[1]) verb = sub;
  }
  if (!verb) {
    if (argc > 1 && argv[1][0] != '-')
      return "unknown verb " + Quoted(argv[1]) + "; the verbs are " + verbs;
    if (argc <= 1) return "no verb given; the verbs are " + verbs + " (kiln --help)";
  }
  std::string msg = e.what();
  for (char& ch : msg)
    if (ch == '\n') ch = ' ';
  const std::string where = verb ? "kiln " + verb->get_name() : std::string("kiln");
  const std::string extras = "The following argument";
  if (msg.rfind(extras, 0) == 0) {
    size_t colon = msg.find(": ");
    std::string args = colon == std::string::npos ? msg : msg.substr(colon + 2);
    return "unexpected argument " + Quoted(args) + " (" + where + " --help lists what it takes)";
  }
  return msg + " (" + where + " --help)";
}

int Fail(const Status& s) {
  std::fprintf(stderr, "kiln: %s\n", s.message().c_str());
  return 1;
}

std::string RecordedCommandLine(int argc, char** argv) {
  std::string line = "kiln";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const size_t slash = arg.find('/');
    if (slash != std::string::npos) {
      const size_t eq = arg.rfind('=', slash);
      std::string path = arg.substr(eq == std::string::npos ? 0 : eq + 1);
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      const size_t last = path.find_last_of('/');
      if (last != std::string::npos && last + 1 < path.size()) path = path.substr(last + 1);
      arg = (eq == std::string::npos ? "" : arg.substr(0, eq + 1)) + path;
    }
    line += " " + arg;
  }
  return line;
}

double NodeFlops(const ir::Graph& g, const ir::Node& n, bool* known) {
  auto dims = [&](int v) -> const Dims* {
    if (v < 0 || !g.values[v].type.shape_known()) return nullptr;
    return &g.values[v].type.dims;
  };
  const Dims* out = n.outputs.empty() ? nullptr : dims(n.outputs[0]);
  if (!out) {
    *known = false;
    return 0;
  }
  double out_elems = static_cast<double>(NumElements(*out));
  if (n.op_type == "Conv" || n.op_type == "FusedConv" || n.op_type == "ConvTranspose" ||
      n.op_type == "QLinearConv" || n.op_type == "ConvInteger") {
    int wi = n.op_type == "QLinearConv" ? 3 : 1;
    const Dims* w = wi < static_cast<int>(n.inputs.size()) ? dims(n.inputs[wi]) : nullptr;
    if (!w || w->size() < 2) return out_elems;
    double k = 1;
    for (size_t i = 1; i < w->size(); ++i) k *= static_cast<double>((*w)[i]);
    if (n.op_type == "ConvTranspose") {
      const Dims* x = dims(n.inputs[0]);
      if (!x) return out_elems;
      return 2.0 * static_cast<double>(NumElements(*x)) * k;
    }
    return 2.0 * out_elems * k;
  }
  if (n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "QLinearMatMul" ||
      n.op_type == "MatMulInteger") {
    const Dims* a = dims(n.inputs[0]);
    if (!a || a->empty()) return out_elems;
    int64_t k = n.op_type == "Gemm" && n.attr_int("transA", 0) ? (*a)[0] : a->back();
    return 2.0 * out_elems * static_cast<double>(k);
  }
  return out_elems;
}

}  // namespace kiln::cli
