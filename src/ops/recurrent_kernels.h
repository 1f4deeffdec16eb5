// The recurrent layers of ONNX (RNN, GRU, LSTM): the float32 kernel the host runs (the cells and
// their activations are defined in ops/recurrent_plan.h).
//
// RecurrentF32 computes what ops/recurrent.cc's reference does (in float, not the reference's
// per-row dot products): per direction, the input projection of every step at once as one GEMM
// (X * W^T plus the biases that do not depend on the state), then per step the recurrent product
// H_prev * R^T (R transposed once into column panels streamed against broadcast state values;
// packed GEMM from 8 rows up) and the gate activations with the vectorized sigmoid / tanh. The
// laid-out weights are kept by the caller across runs (RnnWeights) where W and R are constants.
// Threads: bidirectional layers run their two directions on two threads; then batch rows, which
// are independent, split over threads where R fits a core's cache; else each step splits its
// hidden units (the product's columns of every gate, then those units' gates) over threads.
// sequence_lens: rows past their length keep their state and write zeros; reverse directions
// read each row's own last step first.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/x86/gemm_kernels.h"
#include "ops/op.h"
#include "ops/recurrent_plan.h"

namespace kiln::ops {

// A weight matrix transposed into panels of kRnnPanel columns, so that a product reads each
// panel front to back. Its columns are `gates` groups of gate_ld (a whole number of panels), the
// last ones of each group zero. The rows of `group` consecutive panels (as many as a pass of the
// product takes) are interleaved: a pass reads one stream at offsets known when compiled rather
// than a pointer per panel, which ran out of registers at 16 panels. Column j of row k is at
// Panel(j / kRnnPanel)[k * ld() + j % kRnnPanel].
inline constexpr int64_t kRnnPanel = 16;
struct RnnPanels {
  int64_t rows = 0, gate_ld = 0, cols = 0;  // cols: gates * gate_ld
  int64_t group = 1;
  int64_t stride = 0;  // between groups: rows * ld() and a cache line
  std::vector<float> data;
  int64_t ld() const { return group * kRnnPanel; }
  const float* Panel(int64_t p) const {
    return data.data() + p / group * stride + p % group * kRnnPanel;
  }
};

// W and R of one direction laid out for the kernel.
struct RnnDirectionWeights {
  std::vector<RnnPanels> rt;              // R^T per gate group (GRU, reset gate first: z|r, then h)
  std::vector<PackedB<float>> rt_packed;  // the same packed for the GEMM, where batches use it
  RnnPanels wt;                           // W^T, for projections of few rows
  PackedB<float> w_packed;                // else W^T packed for the GEMM, where oneDNN is not used
  std::unique_ptr<NodeState> w_dnnl;      // else oneDNN's matmul with W packed its way
};

// The laid-out weights of a layer, kept by the caller across calls while W and R are the same
// constants (RecurrentF32 rebuilds them when the pointers or the shape differ).
struct RnnWeights {
  const float *w = nullptr, *r = nullptr;
  int64_t hidden = 0, input = 0, rows = 0;
  std::vector<RnnDirectionWeights> dirs;
};

// One recurrent layer in ONNX's terms. Pointers are to dense row-major tensors of the shapes
// ONNX gives for `layout`; optional ones may be null (bias, sequence_lens, initial states,
// peepholes: zeros / full length; outputs: not written).
struct RnnProblem {
  RnnCell cell = RnnCell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int num_dir = 1;
  bool reverse_only = false;
  int layout = 0;
  float clip = 0;  // 0: none
  bool input_forget = false, linear_before_reset = false;
  const RnnActivation* acts = nullptr;  // RnnActivations(cell) per direction, f g h order
  const float *x = nullptr, *w = nullptr, *r = nullptr, *bias = nullptr;
  const int32_t* sequence_lens = nullptr;  // each in [0, seq] (the caller checks)
  const float *initial_h = nullptr, *initial_c = nullptr, *peepholes = nullptr;
  float *y = nullptr, *y_h = nullptr, *y_c = nullptr;
  RnnWeights* weights = nullptr;  // the caller's cache of laid-out W and R, or null
};

void RecurrentF32(const RnnProblem& p, int threads);

}  // namespace kiln::ops
