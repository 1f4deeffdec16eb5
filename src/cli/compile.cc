// kiln compile: a model as generated code (--target c: DESIGN.md section 2.4).
#include <filesystem>

#include "bundle/program.h"
#include "bundle/sha256.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "codegen/c/c_backend.h"
#include "codegen/cuda/cuda_backend.h"
#include "frontend/model_loader.h"
#include "support/file_io.h"

namespace kiln::cli {
namespace {

struct CompileCliOptions {
  std::string model, weights, target, name, out, params_section,
      planner = "default", bundle, pipeline, precision = "fp32", tensor_cores = "auto",
      cpu = "generic";
  std::vector<std::string> shapes, dump_ir_after;
};

int CompileMain(const CompileCliOptions& o, const std::string& command_line) {
  auto shapes = ParseShapes(o.shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  auto pipeline = ResolvePipeline(o.pipeline, o.planner, false);
  if (!pipeline.ok()) return Fail(pipeline.status());
  if (!IsProgramPath(o.model) && !IsBundlePath(o.model)) AddPipelineShapes(*pipeline, &*shapes);
  if (o.target == "program") {  // DIR/NAME.kiln (bundle/program.h)
    if (!o.bundle.empty()) return Fail(Error("--bundle goes with --target c"));
    if (o.name.empty() || o.name.find('/') != std::string::npos)
      return Fail(Error("--name '" + o.name + "': expected a file name without '/'"));
    const DType storage = o.precision == "fp8"   ? DType::kFloat8E4M3FN
                          : o.precision == "fp4" ? DType::kFloat4E2M1
                                                 : DType::kUndefined;
    if (o.precision == "fp16") return Fail(Error("--precision fp16 goes with --target cuda"));
    auto bytes = CompileProgram(o.model, o.weights, *shapes, pipeline->passes,
                                PlanOptionsOf(*pipeline), storage);
    if (!bytes.ok()) return Fail(bytes.status());
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) return Fail(Error(o.out + ": cannot create the folder: " + ec.message()));
    Status st = WriteFile((std::filesystem::path(o.out) / (o.name + ".kiln")).string(), *bytes);
    return st.ok() ? 0 : Fail(st);
  }
  if (o.target != "c" && o.cpu != "generic") return Fail(Error("--cpu goes with --target c"));
  if ((o.target == "c" && o.precision == "fp16") || (o.target == "cuda" && o.precision == "fp4"))
    return Fail(Error("--precision " + o.precision + " does not go with --target " + o.target));
  if (o.target != "cuda" && o.tensor_cores != "auto")
    return Fail(Error("--tensor-cores goes with --target cuda"));
  auto model = LoadAnyModel(o.model, o.weights);
  if (!model.ok()) return Fail(model.status());
  auto digest = bundle::HashSourceFiles(o.model, o.weights);
  if (!digest.ok()) return Fail(digest.status());
  const std::string source =
      std::filesystem::path(o.model).filename().string() + " (sha256 " +
      bundle::HexString(reinterpret_cast<const uint8_t*>(digest->data()), digest->size()) +
      (o.weights.empty() ? "" : " with " + std::filesystem::path(o.weights).filename().string()) +
      ")";
  if (o.target == "cuda") {  // DIR/NAME.cu, DIR/NAME.h (DESIGN.md 2.5)
    if (!o.bundle.empty()) return Fail(Error("--bundle goes with --target c"));
    codegen::cuda::CompileOptions cu;
    cu.name = o.name;
    cu.command_line = command_line;
    cu.source = source;
    cu.kiln_version = kKilnVersion;
    cu.shapes = *shapes;
    cu.passes = pipeline->passes;
    cu.dump_ir_after = o.dump_ir_after;
    using codegen::cuda::Precision;
    using codegen::cuda::TensorCores;
    cu.precision = o.precision == "fp16"  ? Precision::kFloat16
                   : o.precision == "fp8" ? Precision::kFloat8
                                          : Precision::kFloat32;
    cu.tensor_cores = o.tensor_cores == "on"     ? TensorCores::kOn
                      : o.tensor_cores == "wmma" ? TensorCores::kWmma
                      : o.tensor_cores == "off"  ? TensorCores::kOff
                                                 : TensorCores::kAuto;
    auto compiled = codegen::cuda::CompileToCuda(std::move(*model), cu);
    if (!compiled.ok()) return Fail(Error(o.model + ": " + compiled.status().message()));
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) return Fail(Error(o.out + ": cannot create the folder: " + ec.message()));
    for (const auto& f : compiled->files) {
      Status st = WriteFile((std::filesystem::path(o.out) / f.name).string(), f.text);
      if (!st.ok()) return Fail(st);
    }
    return 0;
  }
  codegen::c::CompileOptions co;
  co.name = o.name;
  co.weight_storage = o.precision;
  co.params_section = o.params_section;
  co.cpu = o.cpu;
  co.command_line = command_line;
  co.source = source;
  co.kiln_version = kKilnVersion;
  co.shapes = *shapes;
  co.passes = pipeline->passes;
  co.dump_ir_after = o.dump_ir_after;
  co.plan = PlanOptionsOf(*pipeline);
  auto compiled = codegen::c::CompileToC(std::move(*model), co);
  if (!compiled.ok()) return Fail(Error(o.model + ": " + compiled.status().message()));
  if (!o.bundle.empty()) {  // NAME_verify.c runs the bundle's test sets through the generated C
    Status st = AddVerifyMain(o.bundle, o.name, command_line, &*compiled);
    if (!st.ok()) return Fail(st);
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return Fail(Error(o.out + ": cannot create the folder: " + ec.message()));
  for (const auto& f : compiled->files) {
    Status st = WriteFile((std::filesystem::path(o.out) / f.name).string(), f.text);
    if (!st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace

void AddCompileCommand(CLI::App& app, int& rc, const std::string& command_line) {
  auto* c = app.add_subcommand("compile", "emit a model as code for another target");
  auto o = std::make_shared<CompileCliOptions>();
  c->add_option("MODEL", o->model, "model file (.onnx, .json, .kiln or .bpte)")->required();
  c->add_option("--target", o->target,
                "what to emit: c (DESIGN.md 2.4), cuda (2.5), program (DIR/NAME.kiln)")
      ->required()
      ->check(OneOf({"c", "cuda", "program"}));
  c->add_option("--name", o->name, "model name used in file and symbol names (a C identifier)")
      ->required();
  c->add_option("--out", o->out, "output folder")->required();
  c->add_option("--weights", o->weights, "safetensors weights for a .json model");
  c->add_option("--shape", o->shapes, "fix an input's dims: NAME=D0,D1,...");
  c->add_option(
       "--precision", o->precision,
       "with --target cuda: fp32; fp16 (matrix and filter weights stored as half, float "
       "arithmetic); fp8 (as fp16, the tensor-core weights stored as E4M3 with a "
       "per-tensor scale). With --target c: fp32; fp8 or fp4 (MatMul and Gemm weights "
       "stored as E4M3 or E2M1 codes with a per-tensor scale, decoded in the GEMM). With --target "
       "program: fp8 or fp4 (MatMul, Gemm and Conv weights stored as codes with a scale "
       "per output channel, dequantized at load)")
      ->check(OneOf({"fp32", "fp16", "fp8", "fp4"}));
  c->add_option("--tensor-cores", o->tensor_cores,
                "with --target cuda: auto (with fp16 / fp8 where the products it can run hold half "
                "the work: a fused MLP on mma.sync where the graph is one, else WMMA warp steps), "
                "on, wmma (the WMMA path even for a fused MLP), off")
      ->check(OneOf({"auto", "on", "wmma", "off"}));
  c->add_option("--params-section", o->params_section, "linker section for the parameter arrays");
  c->add_option("--cpu", o->cpu,
                "with --target c: the core the int8 kernels are for: generic (portable C99), or "
                "cortex-m4, cortex-m7, cortex-m33 (the DSP extension through ACLE; the code then "
                "needs a compiler targeting such a core)")
      ->check(OneOf({"generic", "cortex-m4", "cortex-m7", "cortex-m33"}));
  c->add_option("--planner", o->planner, "memory planner for the workspace");
  c->add_option("--pipeline", o->pipeline,
                "passes and planner from a pipeline file (kiln tune writes one)");
  c->add_option("--dump-ir-after", o->dump_ir_after,
                "with --target c: print the IR to stderr after this pass (all: every pass)");
  c->add_option("--bundle", o->bundle,
                "with --target c: also write NAME_verify.c running this .bpte's test sets");
  c->callback([&rc, o, command_line] { rc = CompileMain(*o, command_line); });
}

}  // namespace kiln::cli
