// The CUDA backend: a model becomes NAME.cu / NAME.h (DESIGN.md section 2.5), one
// kernel in which each thread evaluates the whole network on its own sample.
//
// Pipeline: the leading dim of every graph input is the batch and is fixed to 1 (the model is
// compiled for one sample) -> shape inference -> the pipeline's passes -> constant folding ->
// constant compression (splat and arithmetic-progression constants become formulas) -> the
// planner's schedule, lifetimes and interference colouring (planner "coloring", graph inputs and
// outputs included): every colour is one per-thread array ("slot") as long as its largest value,
// so nvcc can keep small slots in registers once the constant-trip loops are unrolled -> one
// emitter per op family writes the per-sample function. Dense constants go into one weight byte
// buffer (16-byte aligned tensors, float or half), read with __ldg and float4 loads where aligned.
//
// The per-sample function is `KILN_HD` (__host__ __device__ under nvcc, nothing under a host C++
// compiler): compiled with `g++ -x c++ -DKILN_CUDA_HOST_CHECK` the same code runs on the CPU, which
// is how the tests check it on machines without a GPU.
//
// The tensor-core path (cuda_tensor_core.h) keeps all of this per lane and turns the matrix
// products with a constant B into warp steps on WMMA; slots get a lane index on the host.
#pragma once

#include <string>
#include <vector>

#include "codegen/c/c_backend.h"
#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "support/status.h"

namespace kiln::codegen::cuda {

enum class Precision {
  kFloat32,  // weights stored as float, arithmetic in float
  kFloat16,  // MatMul / Gemm / Conv weights stored as IEEE half (half the bytes), widened on load;
             // biases and other constants stay float; arithmetic in float (tensor cores: products
             // of half inputs, accumulated in float)
  kFloat8,   // as kFloat16, but the tensor-core layers' weights are stored as E4M3 bytes with a
             // per-tensor scale (a quarter of the bytes), widened to half when staged
};

enum class TensorCores {
  kAuto,  // with fp16 / fp8, where the eligible products hold at least half the multiply-adds
  kOn,    // required: the fused-MLP path where the graph is one, else WMMA; an error when no
          // product fits
  kWmma,  // the WMMA warp-step path even where the fused-MLP path applies
  kOff,   // the scalar path
};

struct CompileOptions {
  std::string name;          // a C identifier
  std::string command_line;  // recorded in the banner
  std::string source;        // names the model in the banner, as codegen::c::CompileOptions
  std::string kiln_version;
  passes::ShapeOverrides shapes;    // dims per input; the leading (batch) dim is replaced by 1
  std::vector<std::string> passes;  // run after shape inference
  std::vector<std::string> dump_ir_after;
  Precision precision = Precision::kFloat32;
  TensorCores tensor_cores = TensorCores::kAuto;
};

struct CompiledCuda {
  std::vector<c::GeneratedFile> files;     // NAME.cu, NAME.h
  std::vector<ir::Value> inputs, outputs;  // per sample (leading dim 1), graph order
  size_t weight_bytes = 0;
  // The graph as the backend lowered it (one sample) and its plan, inputs and outputs included:
  // each colour of it is one per-thread slot. What `kiln plan --target cuda` prints.
  std::shared_ptr<const ir::Graph> graph;
  planner::GraphPlan plan;
};

// Fails with a one-line message naming the node or tensor: an op the backend does not support
// ("node 'x': op Foo is not supported by --target cuda"), a non-float tensor computed at run
// time, an op that mixes samples (an axis-0 Softmax, Concat, ...), a dim not fixed by --shape.
Expected<CompiledCuda> CompileToCuda(ir::Model model, const CompileOptions& options);

// CompileToCuda in two steps: the program for the cuda target (one sample: every input's leading
// dim becomes 1), then its code.
Expected<compiler::Program> CompileProgram(ir::Model model, const CompileOptions& options);
Expected<CompiledCuda> CompileToCuda(compiler::Program program, const CompileOptions& options);

}  // namespace kiln::codegen::cuda
