// The interface between the CUDA backend and its node emitters (cuda_ops.cc).
//
// An emitter writes straight-line per-sample code for one node into the body of the sample
// function. It reads elements through In() (a slot register, a weight load or a constant formula)
// and writes through Out(); every index it passes is a c::Ix (printed folded) over loop variables
// whose trip counts are compile-time constants, so after unrolling every slot index is a constant.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/c/code_writer.h"
#include "codegen/c/emit_axes.h"
#include "ir/graph.h"
#include "support/status.h"

namespace kiln::codegen::cuda {

// Where a value's elements come from in the sample function.
struct Loc {
  enum class Kind { kSlot, kWeight, kSplat, kArithmetic };
  Kind kind = Kind::kSlot;
  std::string slot;    // kSlot: the array name
  int64_t offset = 0;  // kSlot / kWeight: element offset
  double start = 0, step = 0;
  bool half = false;  // kWeight: stored as IEEE half (offset counts halves), else float
};

class EmitContext : public c::CodeWriter {
 public:
  // register_slots: every slot the node touches is small enough for registers (else unrolling
  // would only make nvcc slower: such slots live in local memory whatever the indices).
  EmitContext(const ir::Graph& g, const ir::Node& n, int64_t opset, bool register_slots,
              std::function<Expected<Loc>(int value)> locate)
      : c::CodeWriter(1),  // inside the node's block
        graph_(g),
        node_(n),
        opset_(opset),
        locate_(std::move(locate)),
        registers_(register_slots),
        unroll_(register_slots) {}

  const ir::Graph& graph() const { return graph_; }
  const ir::Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  bool has_input(int i) const { return i >= 0 && i < num_inputs() && node_.inputs[i] >= 0; }
  bool has_output(int i) const {
    return i >= 0 && i < static_cast<int>(node_.outputs.size()) && node_.outputs[i] >= 0;
  }
  const Dims& input_dims(int i) const { return graph_.values[node_.inputs[i]].type.dims; }
  const Dims& output_dims(int i) const { return graph_.values[node_.outputs[i]].type.dims; }
  // The input's data when it is a compile-time constant; nullptr otherwise.
  const Tensor* input_constant(int i) const {
    return has_input(i) && graph_.values[node_.inputs[i]].constant
               ? &*graph_.values[node_.inputs[i]].constant
               : nullptr;
  }

  // Element `idx` of input i as a float expression, and element `idx` of output i as an lvalue.
  Expected<std::string> In(int i, const c::Ix& idx);
  Expected<std::string> Out(int i, const c::Ix& idx);
  Expected<Loc> InLoc(int i) { return locate_(node_.inputs[i]); }
  Expected<Loc> OutLoc(int i) { return locate_(node_.outputs[i]); }
  // Four consecutive weight elements from `idx` (a multiple of 4) as a kiln_f4, or "" when input
  // i is not a dense weight whose offset allows 16-byte (float) / 8-byte (half) loads.
  Expected<std::string> In4(int i, const c::Ix& idx);

  // `for (int v = 0; v < n; ++v) {` over a new variable v, preceded by the unroll pragma, as an
  // index; Close() ends it.
  c::Ix For(int64_t n, int64_t from = 0, int64_t step = 1);
  // A loop of n trips over a new variable, as an index (c::Ix, printed folded): no loop when n
  // is 1, where the index is the constant 0. EndLoop() ends the innermost one.
  c::Ix Loop(int64_t n);
  void EndLoop();
  // Loops over every element of dims (size-1 axes get the index 0); body gets the indices.
  void Nest(const Dims& dims, const std::function<void(const std::vector<c::Ix>&)>& body);
  // Fully unrolled loops unless the node does more than this many inner iterations (then nvcc
  // keeps the loops, and slots indexed by loop variables live in local memory).
  void SetWork(int64_t inner_iterations) {
    unroll_ = registers_ && inner_iterations <= kUnrollLimit;
  }
  bool unrolled() const { return unroll_; }
  // fp16 / fp8: Sin, Cos and Exp through the GPU's fast intrinsics (libm on the host).
  void SetFastMath(bool on) { fast_math_ = on; }
  bool fast_math() const { return fast_math_; }
  std::string Temp() { return Fresh('t'); }
  std::string Var() { return Fresh('k'); }

  Status error(const std::string& msg) const { return Error(msg); }

  static constexpr int64_t kUnrollLimit = 16384;
  static constexpr int64_t kRegisterSlotLimit = 256;  // floats; a thread has at most 255 registers

 private:
  const ir::Graph& graph_;
  const ir::Node& node_;
  int64_t opset_;
  std::function<Expected<Loc>(int)> locate_;
  std::vector<bool> loops_;  // Loop(): whether each open one is a real loop
  bool registers_, unroll_, fast_math_ = false;
};

// The device-side sources generated files carry, by file stem (lane_emulator, wmma_helpers,
// wmma_fp8_helpers), embedded at build time (src/codegen/cuda/CMakeLists.txt).
const std::map<std::string, std::string>& EmbeddedCudaSources();

using EmitFn = std::function<Status(EmitContext&)>;
// The emitter for an op of the default ONNX domain, or nullptr.
const EmitFn* FindEmitter(const std::string& domain, const std::string& op_type);
// Every op the CUDA backend emits (default domain; kiln ops).
std::vector<std::string> EmittedOps();

// base + idx[0] * strides[0] + ...: the flat index of a multi-index.
c::Ix Flat(const std::vector<c::Ix>& idx, const std::vector<int64_t>& strides, int64_t base = 0);

}  // namespace kiln::codegen::cuda
