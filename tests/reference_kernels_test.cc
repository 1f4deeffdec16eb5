// The fast kernels against the reference kernels (ExecutorOptions::kernels): the same float32
// model and input run with the fast kernels at one and two threads (SIMD for the best ISA, oneDNN,
// Winograd, packed weights, channels-last between convolutions, the host's fusions) and with the
// reference kernels (the portable C99 kernels the C backend emits, the unary ops' formulas,
// baseline-ISA loops elsewhere, one thread). The sweeps cover each family's shape classes and
// options.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "executor_harness.h"
#include "formula_ops_model.h"
#include "kernels/x86/cpu_isa.h"
#include "test_models.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT: the harness is this file's vocabulary

constexpr auto kFloat = onnx::TensorProto::FLOAT;

// The model's output types, with dims left to shape inference.
onnx::ValueInfoProto AnyFloat(const std::string& name) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  vi.mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
  return vi;
}

// A model with input "x" of `dims` and output "y", filled in by the caller.
onnx::ModelProto OneInputModel(const std::string& name, const Dims& dims, int opset = 17) {
  onnx::ModelProto m = EmptyModel(name);
  m.mutable_opset_import(0)->set_version(opset);
  *m.mutable_graph()->add_input() = Info("x", kFloat, dims);
  *m.mutable_graph()->add_output() = AnyFloat("y");
  return m;
}

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// Runs `m` on random x with the fast kernels (1 and 2 threads) and the reference kernels.
void ExpectFastMatchesReference(const onnx::ModelProto& m, const Dims& x_dims, std::mt19937& rng,
                                const std::string& what, double tol = 2e-6) {
  const std::vector<double> xv = Random(static_cast<size_t>(Count(x_dims)), rng);
  const Tensor x = InputOf(DType::kFloat32, x_dims, xv);
  runtime::ExecutorOptions reference;
  reference.kernels = ops::KernelSet::kReference;
  const auto want = RunModel(m, x, reference);
  for (int threads : {1, 2})
    ExpectClose(RunModel(m, x, threads), want, tol, what + " threads " + std::to_string(threads));
}

// A float initializer of random values in [-scale, scale).
void AddRandomInitializer(onnx::GraphProto* g, const std::string& name, const Dims& dims,
                          std::mt19937& rng, double scale) {
  FillTensor(g->add_initializer(), name, kFloat, dims,
             Random(static_cast<size_t>(Count(dims)), rng, scale));
}

struct ConvCase {
  Dims x;  // N, C, spatial...
  int64_t M, k, stride, dilation, pad, group;
};

std::string Describe(const ConvCase& c) {
  std::string s = "x";
  for (int64_t d : c.x) s += " " + std::to_string(d);
  return s + " M" + std::to_string(c.M) + " k" + std::to_string(c.k) + " s" +
         std::to_string(c.stride) + " d" + std::to_string(c.dilation) + " p" +
         std::to_string(c.pad) + " g" + std::to_string(c.group);
}

// Conv (or ConvTranspose) with a bias; `tail` "Relu" adds one, "Residual" a second 1x1 Conv of x
// added to the first's result and a Relu (the host fuses both into FusedConv).
onnx::ModelProto ConvModel(const ConvCase& c, const std::string& op, const std::string& tail,
                           std::mt19937& rng) {
  onnx::ModelProto m = OneInputModel("conv", c.x);
  auto* g = m.mutable_graph();
  const int nd = static_cast<int>(c.x.size()) - 2;
  const int64_t C = c.x[1];
  Dims w = op == "Conv" ? Dims{c.M, C / c.group} : Dims{C, c.M / c.group};
  for (int j = 0; j < nd; ++j) w.push_back(c.k);
  AddRandomInitializer(g, "w", w, rng, 0.3);
  AddRandomInitializer(g, "b", {c.M}, rng, 0.5);
  auto* n = AddNamedNode(g, op, {"x", "w", "b"}, tail.empty() ? "y" : "conv");
  SetAttr(n, "strides", Dims(nd, c.stride));
  SetAttr(n, "dilations", Dims(nd, c.dilation));
  SetAttr(n, "pads", Dims(2 * nd, c.pad));
  SetAttr(n, "group", c.group);
  if (tail == "Relu") AddNamedNode(g, "Relu", {"conv"}, "y");
  if (tail == "Residual") {
    // The 1x1 shortcut with the main path's stride, so both outputs have the same dims.
    Dims ws = {c.M, C};
    for (int j = 0; j < nd; ++j) ws.push_back(1);
    AddRandomInitializer(g, "ws", ws, rng, 0.3);
    auto* s = AddNamedNode(g, "Conv", {"x", "ws"}, "shortcut");
    SetAttr(s, "strides", Dims(nd, c.stride));
    AddNamedNode(g, "Add", {"conv", "shortcut"}, "sum");
    AddNamedNode(g, "Relu", {"sum"}, "y");
  }
  return m;
}

TEST(ReferenceKernels, Conv2DSweep) {
  std::mt19937 rng(7);
  // Channels and maps: an RGB stem, small and large channel counts, a map of one pixel.
  const std::vector<Dims> inputs = {
      {1, 3, 23, 21}, {2, 16, 12, 10}, {1, 32, 9, 9}, {1, 64, 6, 7}, {3, 8, 1, 1}};
  int cases = 0;
  for (const Dims& x : inputs)
    for (int64_t k : {1, 3, 5})
      for (int64_t stride : {1, 2})
        for (int64_t dilation : {1, 2}) {
          if (k == 1 && dilation > 1) continue;
          const int64_t extent = dilation * (k - 1) + 1;
          const int64_t pad = x[2] < extent ? (extent - 1) / 2 + 1 : (k / 2) * dilation;
          for (int64_t group : {int64_t{1}, x[1] % 4 == 0 ? int64_t{4} : 1, x[1]}) {
            const int64_t M = group == x[1] ? x[1] : 16;  // depthwise keeps the channels
            const ConvCase c{x, M, k, stride, dilation, pad, group};
            if (x[2] + 2 * pad < extent) continue;
            // The residual's 1x1 shortcut matches the main path's dims where it pads "same".
            const bool same = 2 * pad == extent - 1;
            const std::string tail = cases % 3 == 0   ? ""
                                     : cases % 3 == 1 ? "Relu"
                                     : same           ? "Residual"
                                                      : "Relu";
            ExpectFastMatchesReference(ConvModel(c, "Conv", tail, rng), x, rng,
                                       "Conv " + Describe(c) + " " + tail);
            ++cases;
          }
        }
  EXPECT_GE(cases, 150);
}

TEST(ReferenceKernels, Conv1DAnd3D) {
  std::mt19937 rng(8);
  const std::vector<ConvCase> cases = {
      {{2, 8, 50}, 12, 3, 1, 1, 1, 1},     {{1, 16, 41}, 16, 5, 2, 2, 4, 1},
      {{1, 12, 30}, 12, 3, 1, 1, 1, 12},   {{3, 4, 17}, 8, 7, 3, 1, 3, 2},
      {{1, 4, 6, 7, 8}, 8, 3, 1, 1, 1, 1}, {{1, 8, 5, 9, 6}, 4, 3, 2, 1, 1, 2},
      {{2, 3, 4, 5, 6}, 6, 2, 1, 2, 1, 1}};
  for (const ConvCase& c : cases)
    ExpectFastMatchesReference(ConvModel(c, "Conv", "Relu", rng), c.x, rng, Describe(c));
}

TEST(ReferenceKernels, ConvTransposeSweep) {
  std::mt19937 rng(9);
  const std::vector<ConvCase> cases = {
      {{1, 16, 7, 9}, 8, 2, 2, 1, 0, 1},  {{2, 32, 6, 6}, 16, 4, 2, 1, 1, 1},
      {{1, 16, 6, 5}, 16, 3, 1, 1, 1, 4}, {{1, 10, 8, 6}, 5, 3, 1, 2, 2, 1},
      {{8, 40, 1, 1}, 24, 4, 1, 1, 0, 1}, {{3, 8, 15, 15}, 32, 4, 2, 1, 1, 1},
      {{2, 6, 20}, 4, 5, 3, 1, 2, 2},     {{1, 4, 3, 4, 5}, 6, 3, 2, 1, 1, 1}};
  for (const ConvCase& c : cases)
    ExpectFastMatchesReference(ConvModel(c, "ConvTranspose", "", rng), c.x, rng,
                               "ConvTranspose " + Describe(c));
}

TEST(ReferenceKernels, MatMulAndGemmShapes) {
  std::mt19937 rng(10);
  // MatMul of x by a constant B: a vector (GEMV), rows, batches, broadcast batches.
  const std::vector<std::pair<Dims, Dims>> matmuls = {
      {{1, 64}, {64, 37}},       {{5, 17}, {17, 33}},    {{3, 7, 19}, {19, 23}},
      {{2, 1, 5, 8}, {3, 8, 6}}, {{40, 256}, {256, 10}}, {{1, 1, 300}, {300, 129}}};
  for (const auto& [a, b] : matmuls) {
    onnx::ModelProto m = OneInputModel("matmul", a);
    AddRandomInitializer(m.mutable_graph(), "b", b, rng, 0.2);
    AddNamedNode(m.mutable_graph(), "MatMul", {"x", "b"}, "y");
    ExpectFastMatchesReference(m, a, rng,
                               "MatMul by a constant, A rank " + std::to_string(a.size()) + " K " +
                                   std::to_string(a.back()));
  }
  // Products of activations (attention's scores): x times its own transpose, batched.
  for (const Dims& a : std::vector<Dims>{{4, 9, 16}, {2, 3, 33, 8}}) {
    onnx::ModelProto m = OneInputModel("self_product", a);
    auto* t = AddNamedNode(m.mutable_graph(), "Transpose", {"x"}, "xt");
    Dims perm;
    for (size_t i = 0; i < a.size(); ++i) perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[a.size() - 1], perm[a.size() - 2]);
    SetAttr(t, "perm", perm);
    AddNamedNode(m.mutable_graph(), "MatMul", {"x", "xt"}, "y");
    ExpectFastMatchesReference(m, a, rng, "MatMul of activations");
  }
  // Gemm: transposes, alpha, beta and the bias's broadcast forms.
  struct GemmCase {
    bool ta, tb;
    float alpha, beta;
    Dims c;  // bias dims, empty for none
  };
  const int64_t M = 6, N = 11, K = 29;
  for (const GemmCase& gc : std::vector<GemmCase>{{false, false, 1, 1, {N}},
                                                  {false, true, 1, 1, {N}},
                                                  {true, false, 0.5f, 2, {M, N}},
                                                  {true, true, 1, 1, {}},
                                                  {false, true, 1.5f, 0.25f, {1}},
                                                  {false, false, 1, 1, {M, 1}}}) {
    const Dims a = gc.ta ? Dims{K, M} : Dims{M, K};
    onnx::ModelProto m = OneInputModel("gemm", a);
    auto* g = m.mutable_graph();
    AddRandomInitializer(g, "b", gc.tb ? Dims{N, K} : Dims{K, N}, rng, 0.3);
    std::vector<std::string> in = {"x", "b"};
    if (!gc.c.empty()) {
      AddRandomInitializer(g, "c", gc.c, rng, 1.0);
      in.push_back("c");
    }
    auto* n = AddNamedNode(g, "Gemm", in, "y");
    SetAttr(n, "transA", int64_t{gc.ta});
    SetAttr(n, "transB", int64_t{gc.tb});
    SetAttr(n, "alpha", gc.alpha);
    SetAttr(n, "beta", gc.beta);
    ExpectFastMatchesReference(m, a, rng,
                               "Gemm transA " + std::to_string(gc.ta) + " transB " +
                                   std::to_string(gc.tb) + " bias rank " +
                                   std::to_string(gc.c.size()));
  }
}

// Every unary formula op: its float32 vector kernel against its formula.
TEST(ReferenceKernels, UnaryFormulaOps) {
  std::mt19937 rng(11);
  for (int64_t cols : {1, 15, 16, 333})
    ExpectFastMatchesReference(FormulaOpsModel(3, cols, false), {3, cols}, rng,
                               "formula ops, " + std::to_string(cols) + " columns", 1e-6);
}

// The row-wise and window families whose float32 kernels dispatch on the ISA.
TEST(ReferenceKernels, RowAndWindowOps) {
  std::mt19937 rng(12);
  const Dims x = {2, 8, 9, 10};
  auto single = [&](const std::string& op, auto set_attrs, int opset = 17) {
    onnx::ModelProto m = OneInputModel(op, x, opset);
    set_attrs(AddNamedNode(m.mutable_graph(), op, {"x"}, "y"));
    return m;
  };
  for (int64_t axis : {1, 3}) {
    for (const char* op : {"Softmax", "LogSoftmax"})
      ExpectFastMatchesReference(single(op, [&](auto* n) { SetAttr(n, "axis", axis); }), x, rng,
                                 std::string(op) + " axis " + std::to_string(axis));
  }
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"})
    for (const Dims& axes : std::vector<Dims>{{3}, {1}, {2, 3}}) {
      onnx::ModelProto m = OneInputModel(op, x, 18);
      AddInt64Initializer(m.mutable_graph(), "axes", {static_cast<int64_t>(axes.size())}, axes);
      AddNamedNode(m.mutable_graph(), op, {"x", "axes"}, "y");
      ExpectFastMatchesReference(m, x, rng,
                                 std::string(op) + " over " + std::to_string(axes.size()) +
                                     " axes from " + std::to_string(axes[0]));
    }
  for (const char* op : {"MaxPool", "AveragePool"})
    for (int64_t stride : {1, 2})
      ExpectFastMatchesReference(single(op,
                                        [&](auto* n) {
                                          SetAttr(n, "kernel_shape", Dims{3, 3});
                                          SetAttr(n, "strides", Dims{stride, stride});
                                          SetAttr(n, "pads", Dims{1, 1, 1, 1});
                                        }),
                                 x, rng, std::string(op) + " stride " + std::to_string(stride));
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    ExpectFastMatchesReference(single(op, [](auto*) {}), x, rng, op);
  ExpectFastMatchesReference(single("LRN", [](auto* n) { SetAttr(n, "size", int64_t{3}); }), x, rng,
                             "LRN");
  {
    onnx::ModelProto m = OneInputModel("layernorm", x);
    AddRandomInitializer(m.mutable_graph(), "scale", {10}, rng, 1.0);
    AddRandomInitializer(m.mutable_graph(), "bias", {10}, rng, 1.0);
    AddNamedNode(m.mutable_graph(), "LayerNormalization", {"x", "scale", "bias"}, "y");
    ExpectFastMatchesReference(m, x, rng, "LayerNormalization", 1e-5);
  }
  {
    onnx::ModelProto m = OneInputModel("instancenorm", x);
    AddRandomInitializer(m.mutable_graph(), "scale", {8}, rng, 1.0);
    AddRandomInitializer(m.mutable_graph(), "bias", {8}, rng, 1.0);
    AddNamedNode(m.mutable_graph(), "InstanceNormalization", {"x", "scale", "bias"}, "y");
    ExpectFastMatchesReference(m, x, rng, "InstanceNormalization", 1e-5);
  }
  for (const char* mode : {"linear", "cubic", "nearest"}) {
    onnx::ModelProto m = OneInputModel("resize", x, 19);
    FillTensor(m.mutable_graph()->add_initializer(), "scales", kFloat, {4}, {1, 1, 2.5, 1.5});
    auto* n = AddNamedNode(m.mutable_graph(), "Resize", {"x", "", "scales"}, "y");
    SetAttr(n, "mode", std::string(mode));
    ExpectFastMatchesReference(m, x, rng, std::string("Resize ") + mode, 1e-5);
  }
}

// The reference kernels are what they say: one thread, the baseline ISA, no oneDNN.
TEST(ReferenceKernels, TheScopeSelectsThePortableKernels) {
  EXPECT_EQ(ops::ActiveKernels(), ops::KernelSet::kFast);
  {
    const ops::ScopedKernelSet reference(ops::KernelSet::kReference);
    EXPECT_TRUE(ops::ReferenceKernels());
    EXPECT_EQ(ops::BestIsa(), ops::Isa::kBaseline);
    EXPECT_EQ(ops::ResolveIsa(ops::Isa::kAvx2), ops::Isa::kBaseline);
    {
      const ops::ScopedKernelSet fast(ops::KernelSet::kFast);
      EXPECT_FALSE(ops::ReferenceKernels());
    }
    EXPECT_TRUE(ops::ReferenceKernels());
  }
  EXPECT_FALSE(ops::ReferenceKernels());
}

}  // namespace
}  // namespace kiln
