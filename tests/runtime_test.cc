#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "frontend/onnx_import.h"
#include "kernels/dnnl/conv_dnnl.h"
#include "kernels/dnnl/dnnl_available.h"
#include "kernels/x86/cpu_isa.h"
#include "runtime/batch_tiling.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {
namespace {

Expected<ir::Model> Parse(const onnx::ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  return frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
}

// The outputs of `model` on input x at `threads` threads (none, with a failure, on an error).
std::vector<Tensor> RunWithThreads(const ir::Model& model, const Tensor& x, int threads) {
  runtime::ExecutorOptions o;
  o.threads = threads;
  auto exec = runtime::Executor::Create(model, o);
  EXPECT_TRUE(exec.ok()) << exec.status().message();
  std::vector<Tensor> out;
  if (exec.ok()) {
    EXPECT_TRUE((*exec)->Run({x}, &out).ok());
  }
  return out;
}

TEST(Executor, RunsAndIsDeterministicAcrossThreadsAndPlanners) {
  auto model = Parse(testing::AddReluModel(6));
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {6});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) * 0.5f - 1.0f;
  std::vector<Tensor> first;
  for (int threads : {1, 2}) {
    for (const char* planner : {"default", "none", "tflm", "coloring"}) {
      runtime::ExecutorOptions o;
      o.threads = threads;
      o.planner = planner;
      o.poison = true;
      auto exec = runtime::Executor::Create(*model, o);
      ASSERT_TRUE(exec.ok()) << exec.status().message();
      std::vector<Tensor> out;
      ASSERT_TRUE((*exec)->Run({x}, &out).ok());
      ASSERT_EQ(out.size(), 1u);
      for (int i = 0; i < 6; ++i) {
        float w = static_cast<float>(i) - 1.5f;
        EXPECT_EQ(out[0].data<float>()[i], std::max(0.0f, x.data<float>()[i] + w));
      }
      if (first.empty()) first = out;
      EXPECT_EQ(std::memcmp(first[0].raw(), out[0].raw(), out[0].nbytes()), 0);
    }
  }
}

// A run writes its outputs into the last run's bytes only when the caller has let them go: the
// results a caller keeps never change under it.
TEST(Executor, ReusesOutputBytesOnlyWhenTheCallerLetThemGo) {
  auto model = Parse(testing::AddReluModel(6));
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto exec = runtime::Executor::Create(*model, {});
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  auto input = [](float v) {
    Tensor x(DType::kFloat32, {6});
    for (int i = 0; i < 6; ++i) x.data<float>()[i] = v;
    return x;
  };
  std::vector<Tensor> out;
  ASSERT_TRUE((*exec)->Run({input(10.0f)}, &out).ok());
  const std::vector<Tensor> held = out;
  ASSERT_TRUE((*exec)->Run({input(20.0f)}, &out).ok());
  EXPECT_NE(out[0].raw(), held[0].raw());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(held[0].data<float>()[i], 10.0f + static_cast<float>(i) - 1.5f);
    EXPECT_EQ(out[0].data<float>()[i], 20.0f + static_cast<float>(i) - 1.5f);
  }
  const void* second = out[0].raw();
  ASSERT_TRUE((*exec)->Run({input(-30.0f)}, &out).ok());
  EXPECT_EQ(out[0].raw(), second);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], 0.0f);
}

// LRN's float32 kernel (ops/normalization.cc) against the formula in double: window sizes odd
// and even, wider than the channels, odd maps, 1 and 3 threads.
TEST(Executor, LrnFloatAgainstDouble) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  struct Case {
    int64_t n, c, h, w, size;
    float alpha, beta, bias;
  };
  for (const Case& k :
       {Case{1, 7, 5, 3, 3, 1e-4f, 0.75f, 1.0f}, Case{2, 16, 9, 11, 5, 0.02f, 0.75f, 2.0f},
        Case{1, 3, 4, 4, 6, 0.5f, 0.6f, 0.5f}, Case{1, 20, 1, 13, 4, 1.0f, 1.5f, 1.0f}}) {
    onnx::ModelProto m = testing::EmptyModel("lrn");
    auto* g = m.mutable_graph();
    *g->add_input() = testing::FloatInfo("x", {k.n, k.c, k.h, k.w});
    *g->add_output() = testing::FloatInfo("y", {k.n, k.c, k.h, k.w});
    auto* node = g->add_node();
    node->set_op_type("LRN");
    node->set_name("lrn");
    node->add_input("x");
    node->add_output("y");
    auto attr = [&](const char* name) {
      auto* a = node->add_attribute();
      a->set_name(name);
      return a;
    };
    auto* size = attr("size");
    size->set_type(onnx::AttributeProto::INT);
    size->set_i(k.size);
    for (auto [name, v] : {std::pair{"alpha", k.alpha}, {"beta", k.beta}, {"bias", k.bias}}) {
      auto* a = attr(name);
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(v);
    }
    auto model = Parse(m);
    ASSERT_TRUE(model.ok()) << model.status().message();
    Tensor x(DType::kFloat32, {k.n, k.c, k.h, k.w});
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = d(rng);
    const int64_t inner = k.h * k.w, lo = (k.size - 1) / 2, hi = k.size - 1 - lo;
    for (int threads : {1, 3}) {
      const std::vector<Tensor> out = RunWithThreads(*model, x, threads);
      ASSERT_EQ(out.size(), 1u);
      const float* xs = x.data<float>();
      for (int64_t b = 0; b < k.n; ++b)
        for (int64_t c = 0; c < k.c; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            double sq = 0;
            for (int64_t q = std::max<int64_t>(0, c - lo); q <= std::min(k.c - 1, c + hi); ++q) {
              const double v = xs[(b * k.c + q) * inner + i];
              sq += v * v;
            }
            const int64_t at = (b * k.c + c) * inner + i;
            const double want =
                xs[at] / std::pow(double(k.bias) + double(k.alpha) / k.size * sq, double(k.beta));
            ASSERT_NEAR(out[0].data<float>()[at], want, 2e-6 * (1 + std::fabs(want)))
                << "size " << k.size << " c " << c << " i " << i << " threads " << threads;
          }
    }
  }
}

// ConvTranspose whose kernel tiles the output (strides = kernel, no pads: each output element
// takes one tap, written once with its bias) and one that overlaps, against a scatter loop in
// double; groups, batches, rectangular kernels, 1 and 3 threads.
TEST(Executor, ConvTransposeAgainstDouble) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  struct Case {
    int64_t n, c, m, group, h, w, kh, kw, sh, sw;
    bool bias;
  };
  for (const Case& k :
       {Case{1, 24, 24, 1, 10, 9, 2, 2, 2, 2, true}, Case{2, 6, 4, 2, 5, 7, 3, 2, 3, 2, true},
        Case{1, 8, 1, 1, 6, 6, 2, 2, 2, 2, false}, Case{1, 4, 6, 1, 5, 4, 3, 3, 2, 2, true}}) {
    const int64_t mg = k.m / k.group, cg = k.c / k.group;
    const int64_t oh = (k.h - 1) * k.sh + k.kh, ow = (k.w - 1) * k.sw + k.kw;
    onnx::ModelProto m = testing::EmptyModel("convtranspose");
    auto* g = m.mutable_graph();
    *g->add_input() = testing::FloatInfo("x", {k.n, k.c, k.h, k.w});
    *g->add_output() = testing::FloatInfo("y", {k.n, k.m, oh, ow});
    std::vector<float> w(static_cast<size_t>(k.c * mg * k.kh * k.kw)), b(static_cast<size_t>(k.m));
    for (float& v : w) v = d(rng);
    for (float& v : b) v = d(rng);
    testing::AddFloatInitializer(g, "w", {k.c, mg, k.kh, k.kw}, w);
    testing::AddFloatInitializer(g, "b", {k.m}, b);
    auto* node = g->add_node();
    node->set_op_type("ConvTranspose");
    node->add_input("x");
    node->add_input("w");
    if (k.bias) node->add_input("b");
    node->add_output("y");
    auto* st = node->add_attribute();
    st->set_name("strides");
    st->set_type(onnx::AttributeProto::INTS);
    st->add_ints(k.sh);
    st->add_ints(k.sw);
    auto* gr = node->add_attribute();
    gr->set_name("group");
    gr->set_type(onnx::AttributeProto::INT);
    gr->set_i(k.group);
    auto model = Parse(m);
    ASSERT_TRUE(model.ok()) << model.status().message();
    Tensor x(DType::kFloat32, {k.n, k.c, k.h, k.w});
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = d(rng);
    std::vector<double> want(static_cast<size_t>(k.n * k.m * oh * ow)), mag(want.size(), 1.0);
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t o = 0; o < k.m; ++o)
        for (int64_t i = 0; i < oh * ow; ++i)
          want[(n * k.m + o) * oh * ow + i] = k.bias ? b[o] : 0.0;
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t c = 0; c < k.c; ++c)
        for (int64_t i = 0; i < k.h; ++i)
          for (int64_t j = 0; j < k.w; ++j)
            for (int64_t mm = 0; mm < mg; ++mm)
              for (int64_t a = 0; a < k.kh; ++a)
                for (int64_t e = 0; e < k.kw; ++e) {
                  const double t = double(x.data<float>()[((n * k.c + c) * k.h + i) * k.w + j]) *
                                   w[((c * mg + mm) * k.kh + a) * k.kw + e];
                  const size_t at = static_cast<size_t>(
                      ((n * k.m + c / cg * mg + mm) * oh + i * k.sh + a) * ow + j * k.sw + e);
                  want[at] += t;
                  mag[at] += std::fabs(t);
                }
    for (int threads : {1, 3}) {
      const std::vector<Tensor> out = RunWithThreads(*model, x, threads);
      ASSERT_EQ(out.size(), 1u);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(out[0].data<float>()[i], want[i], 2e-6 * mag[i])
            << "case c=" << k.c << " k=" << k.kh << "x" << k.kw << " threads " << threads << " at "
            << i;
    }
  }
}

TEST(Executor, ShapeInferenceErrorsNameTheNode) {
  auto m = testing::AddReluModel(4);
  // Declare the Add output with a shape that contradicts what the node computes.
  *m.mutable_graph()->add_value_info() = testing::FloatInfo("s", {5});
  auto model = Parse(m);
  ASSERT_TRUE(model.ok());
  auto exec = runtime::Executor::Create(std::move(*model));
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("node 'add'"), std::string::npos)
      << exec.status().message();
}

TEST(Executor, RejectsWrongInputs) {
  auto model = Parse(testing::AddReluModel(4));
  auto exec = runtime::Executor::Create(std::move(*model));
  ASSERT_TRUE(exec.ok());
  std::vector<Tensor> out;
  Status st = (*exec)->Run({Tensor(DType::kFloat32, {3})}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input 'x'"), std::string::npos);
  EXPECT_FALSE((*exec)->Run({}, &out).ok());
}

// x -> Relu -> r; Slice(r, rows 1..3) -> Neg; Split(r) -> Concat(q, p) -> Sigmoid.
onnx::ModelProto ViewModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 4, 3});
  for (const char* o : {"y", "w"}) g->add_output()->set_name(o);
  auto ints = [&](const char* name, int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(1);
    t->add_int64_data(v);
  };
  ints("starts", 1);
  ints("ends", 3);
  ints("axes", 1);
  auto node = [&](const char* op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(std::string(op) + "_" + out[0]);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  };
  node("Relu", {"x"}, {"r"});
  node("Slice", {"r", "starts", "ends", "axes"}, {"s"});
  node("Neg", {"s"}, {"y"});
  auto* split = node("Split", {"r"}, {"p", "q"});
  auto* a = split->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  auto* concat = node("Concat", {"q", "p"}, {"c"});
  auto* ca = concat->add_attribute();
  ca->set_name("axis");
  ca->set_type(onnx::AttributeProto::INT);
  ca->set_i(1);
  node("Sigmoid", {"c"}, {"w"});
  return m;
}

TEST(Executor, ViewsSlicesAndConcatInPlaceGiveTheSameResults) {
  auto model = Parse(ViewModel());
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {1, 4, 3});
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 2.0f;
  std::vector<std::vector<Tensor>> results;
  for (bool aliasing : {true, false}) {
    runtime::ExecutorOptions o;
    o.aliasing = aliasing;
    o.poison = true;
    auto exec = runtime::Executor::Create(*model, o);
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    int aliased = 0;
    for (const auto& b : (*exec)->plan().buffers) aliased += b.alias_of >= 0;
    if (aliasing) {
      EXPECT_GE(aliased, 3);  // the slice, both split halves / concat inputs
    }
    std::vector<Tensor> out;
    ASSERT_TRUE((*exec)->Run({x}, &out).ok());
    results.push_back(out);
  }
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(std::memcmp(results[0][k].raw(), results[1][k].raw(), results[0][k].nbytes()), 0)
        << k;
  // y = -relu(x)[:, 1:3]
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(results[0][0].data<float>()[i], -std::max(0.0f, x.data<float>()[3 + i]));
}

// A small CNN whose 16- and 32-channel convs chain: Conv + Relu, a stride-2 depthwise Conv + Clip,
// a pointwise Conv + residual Add (a stride-2 1x1 downsample) + Relu, a MaxPool reading that result
// too, a last Conv that is a graph output, Concats of conv results, pools between convs and a
// squeeze-and-excitation scale.
onnx::ModelProto ConvChainModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 16, 9, 7});
  for (const char* o : {"pool", "y"}) g->add_output()->set_name(o);
  uint32_t seed = 1;
  auto init = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      t->add_float_data((static_cast<float>(seed >> 8) / 16777216.0f - 0.5f) * 0.5f);
    }
  };
  auto node = [&](const char* op, std::vector<std::string> in, std::string out) {
    return testing::AddNamedNode(g, op, in, out);
  };
  auto ints = [](onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto group = [](onnx::NodeProto* n, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name("group");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  init("w1", {32, 16, 3, 3});
  init("b1", {32});
  init("wd", {32, 1, 3, 3});
  init("wp", {32, 32, 1, 1});
  init("ws", {32, 32, 1, 1});
  init("w4", {16, 32, 3, 3});
  init("lo", {});
  init("hi", {});
  g->mutable_initializer(g->initializer_size() - 1)->set_float_data(0, 0.4f);
  ints(node("Conv", {"x", "w1", "b1"}, "c1"), "pads", {1, 1, 1, 1});
  node("Relu", {"c1"}, "r1");
  auto* dw = node("Conv", {"r1", "wd"}, "cd");
  ints(dw, "pads", {1, 1, 1, 1});
  ints(dw, "strides", {2, 2});
  group(dw, 32);
  node("Clip", {"cd", "lo", "hi"}, "r2");
  node("Conv", {"r2", "wp"}, "cp");
  ints(node("Conv", {"r1", "ws"}, "cs"), "strides", {2, 2});
  node("Add", {"cs", "cp"}, "s");
  node("Relu", {"s"}, "r3");
  auto* pool = node("MaxPool", {"r3"}, "pool");
  ints(pool, "kernel_shape", {2, 2});
  ints(node("Conv", {"r3", "w4"}, "y"), "pads", {1, 1, 1, 1});
  // Two channel Concats of conv results: one read by a conv (channels-last through), one a
  // graph output (so its inputs must not be channels-last either).
  init("w5", {16, 32, 1, 1});
  init("w6", {16, 32, 3, 3});
  node("Conv", {"r3", "w5"}, "c5");
  ints(node("Conv", {"r3", "w6"}, "c6"), "pads", {1, 1, 1, 1});
  for (const char* out : {"cat", "cat_out"}) {
    auto* cat = node("Concat", {"c5", "c6"}, out);
    auto* a = cat->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
  }
  init("w7", {16, 32, 1, 1});
  node("Conv", {"cat", "w7"}, "z");
  // And a Concat read by a conv only (channels-last; the plan puts its inputs in place).
  init("w10", {16, 32, 1, 1});
  init("w11", {16, 32, 3, 3});
  node("Conv", {"r1", "w10"}, "c7");
  ints(node("Conv", {"r1", "w11"}, "c8"), "pads", {1, 1, 1, 1});
  auto* cat2 = node("Concat", {"c7", "c8"}, "cat2");
  auto* axis2 = cat2->add_attribute();
  axis2->set_name("axis");
  axis2->set_type(onnx::AttributeProto::INT);
  axis2->set_i(1);
  init("w12", {16, 32, 1, 1});
  node("Conv", {"cat2", "w12"}, "cz");
  g->add_output()->set_name("cz");
  g->add_output()->set_name("z");
  g->add_output()->set_name("cat_out");
  // A ceil-mode MaxPool between convs (channels-last through) and an AveragePool counting its
  // pads.
  auto* mp = node("MaxPool", {"r1"}, "p2");
  ints(mp, "kernel_shape", {3, 3});
  ints(mp, "strides", {2, 2});
  auto* ceil = mp->add_attribute();
  ceil->set_name("ceil_mode");
  ceil->set_type(onnx::AttributeProto::INT);
  ceil->set_i(1);
  auto* ap = node("AveragePool", {"p2"}, "p3");
  ints(ap, "kernel_shape", {2, 2});
  ints(ap, "pads", {1, 1, 1, 1});
  auto* cip = ap->add_attribute();
  cip->set_name("count_include_pad");
  cip->set_type(onnx::AttributeProto::INT);
  cip->set_i(1);
  init("w8", {16, 32, 1, 1});
  node("Conv", {"p3", "w8"}, "pz");
  g->add_output()->set_name("pz");
  // A squeeze-and-excitation scale of r2: GlobalAveragePool, Sigmoid, Mul, then a conv.
  node("GlobalAveragePool", {"r2"}, "gap");
  node("Sigmoid", {"gap"}, "gate");
  node("Mul", {"r2", "gate"}, "se");
  init("w9", {16, 32, 3, 3});
  ints(node("Conv", {"se", "w9"}, "sez"), "pads", {1, 1, 1, 1});
  g->add_output()->set_name("sez");
  // ShuffleNet's channel shuffle of r1 (one com.kiln ChannelShuffle after the host passes,
  // channels-last through), then a conv.
  for (auto [name, dims] : {std::pair<const char*, std::vector<int64_t>>{"split", {1, 4, 8, 9, 7}},
                            {"merge", {1, 32, 9, 7}}}) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(dims.size()));
    for (int64_t d : dims) t->add_int64_data(d);
  }
  node("Reshape", {"r1", "split"}, "sh1");
  ints(node("Transpose", {"sh1"}, "sh2"), "perm", {0, 2, 1, 3, 4});
  node("Reshape", {"sh2", "merge"}, "sh");
  init("w13", {16, 32, 1, 1});
  node("Conv", {"sh", "w13"}, "shz");
  g->add_output()->set_name("shz");
  // An AveragePool whose one window is the whole image (run as a global average, ops/pool.cc)
  // between convs, and the GlobalAveragePool it equals (outputs wz and gz).
  ints(node("AveragePool", {"r1"}, "whole"), "kernel_shape", {9, 7});
  init("w14", {16, 32, 1, 1});
  node("Conv", {"whole", "w14"}, "wz");
  node("GlobalAveragePool", {"r1"}, "gap1");
  node("Conv", {"gap1", "w14"}, "gz");
  g->add_output()->set_name("wz");
  g->add_output()->set_name("gz");
  // A grouped pointwise conv (4 groups of 8 channels) with bias, residual and Relu (one FusedConv
  // after the host passes, channels-last between convs), then a conv: output gy.
  init("wg", {32, 8, 1, 1});
  init("bg", {32});
  group(node("Conv", {"r1", "wg", "bg"}, "cg"), 4);
  node("Add", {"cg", "r1"}, "cgs");
  node("Relu", {"cgs"}, "cgr");
  init("w15", {16, 32, 3, 3});
  ints(node("Conv", {"cgr", "w15"}, "gy"), "pads", {1, 1, 1, 1});
  g->add_output()->set_name("gy");
  // The same grouped conv, residual and Relu as a graph output: X and Z channels-last, Y NCHW.
  group(node("Conv", {"r1", "wg", "bg"}, "cg2"), 4);
  node("Add", {"cg2", "r1"}, "cgs2");
  node("Relu", {"cgs2"}, "gout");
  g->add_output()->set_name("gout");
  // HardSwish as exporters write it, x * Clip(x + 3, 0, 6) / 6 (one HardSwish after the host
  // passes), a scale and shift by single elements (PP-LCNet's learnable affine), then a nearest
  // 2x Resize, channels-last between convs: output hz.
  testing::AddFloatInitializer(g, "three", {}, {3});
  testing::AddFloatInitializer(g, "zero", {}, {0});
  testing::AddFloatInitializer(g, "six", {}, {6});
  testing::AddFloatInitializer(g, "six4", {1, 1, 1, 1}, {6});
  testing::AddFloatInitializer(g, "up", {4}, {1, 1, 2, 2});
  testing::AddFloatInitializer(g, "scale", {1}, {0.75f});
  testing::AddFloatInitializer(g, "shift", {}, {-0.25f});
  node("Add", {"r1", "three"}, "hs1");
  node("Clip", {"hs1", "zero", "six"}, "hs2");
  node("Mul", {"r1", "hs2"}, "hs3");
  node("Div", {"hs3", "six4"}, "hs4");
  node("Mul", {"scale", "hs4"}, "hs6");
  node("Add", {"hs6", "shift"}, "hs7");
  node("Resize", {"hs7", "", "up"}, "hs5");
  init("w16", {16, 32, 3, 3});
  ints(node("Conv", {"hs5", "w16"}, "hz"), "pads", {1, 1, 1, 1});
  g->add_output()->set_name("hz");
  // A nearest Resize that moves the channels too (tf_half_pixel_for_nn rounding up maps channel
  // c to c + 1 at scale 1), channels-last between convs: output rz2.
  auto* rz = node("Resize", {"r1", "", "up"}, "rz");
  for (auto [name, value] : {std::pair<const char*, const char*>{"coordinate_transformation_mode",
                                                                 "tf_half_pixel_for_nn"},
                             {"nearest_mode", "ceil"}}) {
    auto* a = rz->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  init("w17", {16, 32, 1, 1});
  node("Conv", {"rz", "w17"}, "rz2");
  g->add_output()->set_name("rz2");
  return m;
}

TEST(Executor, ChannelsLastConvChainsMatchTheOnnxLayout) {
  auto model = Parse(ConvChainModel());
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {1, 16, 9, 7});
  for (int64_t i = 0; i < x.size(); ++i)
    x.data<float>()[i] = static_cast<float>((i * 37) % 23) / 11.0f - 1.0f;
  std::vector<Tensor> want;
  for (int config = 0; config < 6; ++config) {
    runtime::ExecutorOptions o;
    o.channels_last = config % 3 != 0;  // config 0 (the reference): ONNX layouts, no fusion
    o.host_passes = config != 0;
    o.threads = 1 + config / 3;
    o.poison = config % 3 == 2;
    o.aliasing = config != 4;
    auto exec = runtime::Executor::Create(*model, o);
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    // Channels-last (after fusion): r1 (read by two convs and a pool), r2 (read by a conv, the
    // GlobalAveragePool and the scale), cs (the residual Z), p2 and p3 (pools between convs), se
    // (the scaled r2), c7, c8, cat2 and sh (the shuffled r1); r3 not (the MaxPool reading it writes
    // a graph output), the outputs never, nor c5 and c6 (cat_out is an output), so neither cat. And
    // whole (the whole-image pool between convs), cgr (the grouped conv's output) and hs4-hs7 (the
    // HardSwish, the scale and shift, the Resize) and rz (the other Resize). cat2's inputs are made
    // in place, interleaved; with aliasing off nothing is.
    const bool fast = ops::DnnlAvailable() && ops::BestIsa() != ops::Isa::kBaseline;
    if (o.channels_last) {
      EXPECT_EQ((*exec)->channels_last_values(), fast ? 17 : 0);
      EXPECT_EQ((*exec)->interleaved_concats(), fast && o.aliasing ? 1 : 0);
    }
    std::vector<Tensor> out;
    ASSERT_TRUE((*exec)->Run({x}, &out).ok());
    ASSERT_EQ(out.size(), 14u);
    for (int64_t i = 0; i < out[8].size(); ++i)  // the whole-image AveragePool is the global one
      EXPECT_NEAR(out[8].data<float>()[i], out[9].data<float>()[i], 1e-5f) << "config " << config;
    if (config == 0) {
      want = out;
      continue;
    }
    for (size_t k = 0; k < out.size(); ++k) {
      ASSERT_EQ(out[k].dims(), want[k].dims());
      double num = 0, den = 0;
      for (int64_t i = 0; i < want[k].size(); ++i) {
        const double d = out[k].data<float>()[i] - want[k].data<float>()[i];
        num += d * d;
        den += double(want[k].data<float>()[i]) * want[k].data<float>()[i];
      }
      EXPECT_LE(std::sqrt(num / den), 1e-5) << "output " << k << " config " << config;
    }
  }
}

// A host program runs on the executor it was compiled for; one with channels-last values is
// refused by the reference kernels, which read ONNX layouts only.
TEST(Executor, RunsTheProgramCompiledForIt) {
  auto model = Parse(ConvChainModel());
  ASSERT_TRUE(model.ok()) << model.status().message();
  runtime::ExecutorOptions fast, reference;
  reference.kernels = ops::KernelSet::kReference;
  auto compile = [&](compiler::CompileOptions o) {
    return compiler::Compile(ir::CloneModel(*model), o);
  };
  auto program = compile(runtime::HostCompileOptions(fast));
  ASSERT_TRUE(program.ok()) << program.status().message();
  const auto& cl = program->main().layout.channels_last;
  const int kept = static_cast<int>(std::count(cl.begin(), cl.end(), 1));
  EXPECT_EQ(kept > 0, ops::DnnlAvailable() && ops::BestIsa() != ops::Isa::kBaseline);
  auto exec = runtime::Executor::Create(std::move(*program), fast);
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  EXPECT_EQ((*exec)->channels_last_values(), kept);
  auto refused = runtime::Executor::Create(*compile(runtime::HostCompileOptions(fast)), reference);
  EXPECT_EQ(refused.ok(), kept == 0);
  if (kept > 0) {
    EXPECT_NE(refused.status().message().find("channels-last"), std::string::npos);
  }
  EXPECT_TRUE(
      runtime::Executor::Create(*compile(runtime::HostCompileOptions(reference)), reference).ok());
  // The C target's program is not the host's.
  compiler::CompileOptions c;
  c.target = compiler::Target::kC;
  auto refused_c = runtime::Executor::Create(*compile(c), fast);
  ASSERT_FALSE(refused_c.ok());
  EXPECT_NE(refused_c.status().message().find("host target"), std::string::npos);
}

// PointNet's lift-and-max and 1-D classifiers' heads: a pointwise Conv1d (with Relu, a bias, or
// neither) pooled over its positions by ReduceMax / ReduceMean (keepdims 0 and 1) or
// GlobalMaxPool / GlobalAveragePool becomes one com.kiln ConvGlobalPool on the host; a conv whose
// output is also a graph output stays two nodes. Against the unfused graph at 1 and 2 threads
// and with the reference kernels; P = 301 leaves a partial block.
// Runs model on the host with and without the compile step's host fusions (at one and two
// threads and on the reference kernels) and expects the same outputs within tol.
void ExpectSameAsUnfused(const ir::Model& model, const std::vector<Tensor>& inputs, double tol) {
  runtime::ExecutorOptions unfused;
  unfused.host_passes = false;
  auto want_exec = runtime::Executor::Create(model, unfused);
  ASSERT_TRUE(want_exec.ok()) << want_exec.status().message();
  std::vector<Tensor> want;
  ASSERT_TRUE((*want_exec)->Run(inputs, &want).ok());
  for (int config = 0; config < 3; ++config) {
    runtime::ExecutorOptions o;
    o.threads = config == 1 ? 2 : 1;
    if (config == 2) o.kernels = ops::KernelSet::kReference;
    auto exec = runtime::Executor::Create(model, o);
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    std::vector<Tensor> got;
    ASSERT_TRUE((*exec)->Run(inputs, &got).ok());
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(got[k].dims(), want[k].dims()) << "output " << k;
      for (int64_t i = 0; i < want[k].size(); ++i)
        EXPECT_NEAR(got[k].data<float>()[i], want[k].data<float>()[i], tol)
            << "config " << config << " output " << k << " element " << i;
    }
  }
}

// How many nodes of op_type the host's compile step leaves in model.
int CountAfterHostCompile(const ir::Model& model, const std::string& op_type) {
  auto program = compiler::Compile(ir::CloneModel(model), runtime::HostCompileOptions({}));
  EXPECT_TRUE(program.ok()) << program.status().message();
  int count = 0;
  if (program.ok())
    for (const auto& n : program->model.graph->nodes) count += n.op_type == op_type;
  return count;
}

TEST(Executor, ConvGlobalPoolMatchesConvThenPool) {
  onnx::ModelProto m = testing::EmptyModel("conv_pool");
  m.mutable_opset_import(0)->set_version(13);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {2, 6, 301});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto weights = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& f : v) f = uniform(rng);
    testing::AddFloatInitializer(g, name, dims, v);
  };
  weights("w", {40, 6, 1});
  weights("b", {40});
  testing::AddNamedNode(g, "Conv", {"x", "w", "b"}, "c1");
  testing::AddNamedNode(g, "Relu", {"c1"}, "r1");
  testing::SetAttr(testing::AddNamedNode(g, "ReduceMax", {"r1"}, "max"), "axes",
                   std::vector<int64_t>{2});
  auto* mean = testing::AddNamedNode(g, "ReduceMean", {"r1b"}, "mean");
  testing::SetAttr(mean, "axes", std::vector<int64_t>{-1});
  testing::SetAttr(mean, "keepdims", int64_t{0});
  testing::AddNamedNode(g, "Conv", {"x", "w"}, "c2");
  testing::AddNamedNode(g, "LeakyRelu", {"c2"}, "r1b");
  testing::AddNamedNode(g, "Conv", {"x", "w", "b"}, "c3");
  testing::AddNamedNode(g, "GlobalAveragePool", {"c3"}, "gap");
  testing::AddNamedNode(g, "GlobalMaxPool", {"c3"}, "gmp");  // c3 has two readers: no fusion
  testing::AddNamedNode(g, "Conv", {"x", "w"}, "c4");
  testing::AddNamedNode(g, "GlobalMaxPool", {"c4"}, "gmp4");
  for (const char* out : {"max", "mean", "gap", "gmp", "gmp4"}) g->add_output()->set_name(out);
  auto model = Parse(m);
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {2, 6, 301});
  for (int64_t i = 0; i < x.size(); ++i)
    x.data<float>()[i] = static_cast<float>((i * 37) % 23) / 11.0f - 1.0f;
  EXPECT_EQ(CountAfterHostCompile(*model, "ConvGlobalPool"), 3)
      << "max, mean and gmp4; c3 has two readers";
  ExpectSameAsUnfused(*model, {x}, 1e-4);
}

// A zero Pad of the spatial axes before a Conv or a padding-counting AveragePool becomes the
// reader's pads (attribute pads before opset 11, inputs after, opset 18's axes); the Pads it
// must keep stay: another value, another mode, a batch axis, MaxPool, a second reader.
TEST(Executor, ZeroPadFoldsIntoConvAndAveragePool) {
  for (int64_t opset : {10, 18}) {
    onnx::ModelProto m = testing::EmptyModel("pad_conv");
    m.mutable_opset_import(0)->set_version(opset);
    auto* g = m.mutable_graph();
    *g->add_input() = testing::FloatInfo("x", {2, 3, 40});
    *g->add_input() = testing::FloatInfo("y", {1, 2, 9, 9});
    std::vector<float> w1(5 * 3 * 3), w2(4 * 2 * 3 * 3);
    for (size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>(i % 7) / 3.0f - 1.0f;
    for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>(i % 5) / 2.0f - 1.0f;
    testing::AddFloatInitializer(g, "w1", {5, 3, 3}, w1);
    testing::AddFloatInitializer(g, "w2", {4, 2, 3, 3}, w2);
    int pads_made = 0;
    // A Pad of `in` by `pads` (over every axis) into `out`, with value and mode.
    auto pad = [&](const std::string& in, std::vector<int64_t> pads, const std::string& out,
                   float value = 0.0f, const std::string& mode = "constant") {
      onnx::NodeProto* n;
      if (opset < 11) {
        n = testing::AddNamedNode(g, "Pad", {in}, out);
        testing::SetAttr(n, "pads", pads);
        if (value != 0.0f) testing::SetAttr(n, "value", value);
      } else {
        const std::string name = "pads" + std::to_string(pads_made++);
        std::vector<std::string> inputs = {in, name};
        if (value != 0.0f) {
          testing::AddFloatInitializer(g, name + "_v", {}, {value});
          inputs.push_back(name + "_v");
        }
        if (pads.size() == 6 && value == 0.0f && mode == "constant" && pads[0] == 0) {
          // Opset 18's axes: only the last axis's pads.
          testing::AddInt64Initializer(g, name + "_a", {1}, {-1});
          inputs.insert(inputs.end(), {"", name + "_a"});
          pads = {pads[2], pads[5]};
        }
        testing::AddInt64Initializer(g, name, {static_cast<int64_t>(pads.size())}, pads);
        n = testing::AddNamedNode(g, "Pad", inputs, out);
      }
      if (mode != "constant") testing::SetAttr(n, "mode", mode);
    };
    auto conv1d = [&](const std::string& in, const std::string& out) {
      auto* c = testing::AddNamedNode(g, "Conv", {in, "w1"}, out);
      testing::SetAttr(c, "dilations", std::vector<int64_t>{2});
      testing::SetAttr(c, "pads", std::vector<int64_t>{1, 1});
    };
    pad("x", {0, 0, 4, 0, 0, 0}, "p1");  // causal: folds into pads [5, 1]
    conv1d("p1", "c1");
    pad("y", {0, 0, 1, 2, 0, 0, 2, 1}, "p2");  // 2-D, asymmetric: folds
    testing::SetAttr(testing::AddNamedNode(g, "Conv", {"p2", "w2"}, "c2"), "strides",
                     std::vector<int64_t>{2, 2});
    pad("x", {0, 0, 3, 0, 0, 1}, "p3");
    auto* avg = testing::AddNamedNode(g, "AveragePool", {"p3"}, "a3");  // folds
    testing::SetAttr(avg, "kernel_shape", std::vector<int64_t>{3});
    testing::SetAttr(avg, "count_include_pad", int64_t{1});
    pad("x", {0, 0, 2, 0, 0, 2}, "p4", 0.5f);  // another value: stays
    conv1d("p4", "c4");
    pad("x", {0, 0, 2, 0, 0, 2}, "p5", 0.0f, "reflect");  // another mode: stays
    conv1d("p5", "c5");
    pad("x", {1, 0, 0, 0, 0, 0}, "p6");  // the batch axis: stays
    conv1d("p6", "c6");
    pad("x", {0, 0, 1, 0, 0, 1}, "p7");  // MaxPool ignores padding, a Pad's zeros do not: stays
    testing::SetAttr(testing::AddNamedNode(g, "MaxPool", {"p7"}, "m7"), "kernel_shape",
                     std::vector<int64_t>{2});
    pad("x", {0, 0, 2, 0, 0, 0}, "p8");  // read twice: stays
    conv1d("p8", "c8");
    for (const char* out : {"c1", "c2", "a3", "c4", "c5", "c6", "m7", "c8", "p8"})
      g->add_output()->set_name(out);
    auto model = Parse(m);
    ASSERT_TRUE(model.ok()) << model.status().message();
    Tensor x(DType::kFloat32, {2, 3, 40}), y(DType::kFloat32, {1, 2, 9, 9});
    for (int64_t i = 0; i < x.size(); ++i)
      x.data<float>()[i] = static_cast<float>((i * 37) % 23) / 11.0f - 1.0f;
    for (int64_t i = 0; i < y.size(); ++i)
      y.data<float>()[i] = static_cast<float>((i * 13) % 19) / 9.0f - 1.0f;
    EXPECT_EQ(CountAfterHostCompile(*model, "Pad"), 5) << "opset " << opset;
    ExpectSameAsUnfused(*model, {x, y}, 1e-5);
  }
}

// A bidirectional LSTM of constant W, R and B over x [6, 3, 10]: 18 rows of projection, where
// the host runs oneDNN's matmul with W packed its way.
onnx::ModelProto LstmModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {6, 3, 10});
  const int64_t H = 16;
  auto values = [](int64_t n, int salt) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37 + salt) % 23) / 40.0f - 0.25f;
    return v;
  };
  testing::AddFloatInitializer(g, "w", {2, 4 * H, 10}, values(2 * 4 * H * 10, 1));
  testing::AddFloatInitializer(g, "r", {2, 4 * H, H}, values(2 * 4 * H * H, 2));
  testing::AddFloatInitializer(g, "b", {2, 8 * H}, values(2 * 8 * H, 3));
  auto* n = testing::AddNamedNode(g, "LSTM", {"x", "w", "r", "b"}, "y");
  testing::SetAttr(n, "hidden_size", H);
  testing::SetAttr(n, "direction", std::string("bidirectional"));
  *g->add_output() = testing::FloatInfo("y", {6, 2, 3, H});
  return m;
}

// Weights a kernel packed on the first run are dropped from the executor's model (a husk with
// the dims and the address is left), and later runs give the same results; with an input of
// unknown batch the states may be remade, so nothing is dropped.
TEST(Executor, DropsWeightsItsKernelsHoldOnlyWhereShapesAreStatic) {
  for (bool lstm : {false, true})
    for (bool dynamic : {false, true}) {
      Tensor x(DType::kFloat32, lstm ? Dims{6, 3, 10} : Dims{1, 16, 9, 7});
      for (int64_t i = 0; i < x.size(); ++i)
        x.data<float>()[i] = static_cast<float>((i * 29) % 17) / 8.0f - 1.0f;
      onnx::ModelProto proto = lstm ? LstmModel() : ConvChainModel();
      if (dynamic)
        proto.mutable_graph()
            ->mutable_input(0)
            ->mutable_type()
            ->mutable_tensor_type()
            ->mutable_shape()
            ->mutable_dim(0)
            ->set_dim_param("n");
      auto model = Parse(proto);
      ASSERT_TRUE(model.ok()) << model.status().message();
      auto reference = runtime::Executor::Create(*model, {});  // shares the weights: keeps them
      auto exec = runtime::Executor::Create(std::move(*model), {});
      ASSERT_TRUE(exec.ok() && reference.ok());
      auto husks = [&] {
        int n = 0;
        for (const ir::Value& v : (*exec)->model().graph->values)
          n += v.constant && !v.constant->owns_or_keeps_alive();
        return n;
      };
      EXPECT_EQ(husks(), 0);
      std::vector<Tensor> want, out;
      ASSERT_TRUE((*reference)->Run({x}, &want).ok());
      for (int run = 0; run < 3; ++run) {
        ASSERT_TRUE((*exec)->Run({x}, &out).ok());
        ASSERT_EQ(out.size(), want.size());
        for (size_t k = 0; k < out.size(); ++k)
          for (int64_t i = 0; i < out[k].size(); ++i)
            ASSERT_EQ(out[k].data<float>()[i], want[k].data<float>()[i]) << k << " run " << run;
      }
      const bool fast = ops::DnnlAvailable() && ops::BestIsa() != ops::Isa::kBaseline;
      if (dynamic || !fast)
        EXPECT_EQ(husks(), 0);
      else
        EXPECT_GE(husks(), lstm ? 2 : 4);  // the LSTM's W and R (B is read every run)
    }
}

// Two convolutions share W, a Gather of the first's channels between them by indices the caller
// gives: a first run that fails in the Gather (an index out of range) has run one of W's
// readers; W must not be dropped by the next run, which runs the other reader for the first time.
TEST(Executor, AFailedFirstRunDropsNoConstantASecondRunStillReads) {
  onnx::ModelProto m = testing::EmptyModel("shared_w");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 16, 9, 7});
  *g->add_input() = testing::FloatInfo("idx", {16});
  g->mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT64);
  *g->add_output() = testing::FloatInfo("y", {1, 16, 9, 7});
  std::vector<float> w(16 * 16 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 8;
  testing::AddFloatInitializer(g, "W", {16, 16, 3, 3}, w);
  for (const char* c : {"c1", "c2"}) {
    auto* conv = testing::AddNamedNode(g, "Conv", {c[1] == '1' ? "x" : "gathered", "W"},
                                       c[1] == '1' ? "y1" : "y");
    testing::SetAttr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  }
  testing::SetAttr(testing::AddNamedNode(g, "Gather", {"y1", "idx"}, "gathered"), "axis",
                   int64_t{1});
  std::swap(*g->mutable_node(1), *g->mutable_node(2));  // c1, Gather, c2
  auto model = Parse(m);
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {1, 16, 9, 7}), bad(DType::kInt64, {16}), good(DType::kInt64, {16});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i % 11) / 5 - 1;
  for (int64_t c = 0; c < 16; ++c) {
    good.data<int64_t>()[c] = 15 - c;
    bad.data<int64_t>()[c] = c == 9 ? 99 : c;
  }
  auto reference = runtime::Executor::Create(*model, {});
  auto exec = runtime::Executor::Create(std::move(*model), {});
  ASSERT_TRUE(reference.ok() && exec.ok());
  std::vector<Tensor> want, out;
  ASSERT_TRUE((*reference)->Run({x, good}, &want).ok());
  EXPECT_FALSE((*exec)->Run({x, bad}, &out).ok());
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE((*exec)->Run({x, good}, &out).ok());
    for (int64_t i = 0; i < want[0].size(); ++i)
      ASSERT_EQ(out[0].data<float>()[i], want[0].data<float>()[i]) << "run " << run << " at " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Streaming a batch in tiles

std::string ShippedModel(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/models/" + name;
}

// x[batch, 4] -> op -> y, where `build` adds the nodes from "x" to "y".
onnx::ModelProto BatchModel(const std::function<void(onnx::GraphProto*)>& build,
                            std::vector<int64_t> out = {-1, 4}) {
  onnx::ModelProto m = testing::EmptyModel("batch");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {-1, 4});
  g->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  *g->add_output() = testing::FloatInfo("y", out);
  g->mutable_output(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  build(g);
  return m;
}

std::string Refusal(const onnx::ModelProto& m, int64_t batch = 100) {
  auto model = Parse(m);
  EXPECT_TRUE(model.ok()) << model.status().message();
  return model.ok() ? runtime::BatchTilingRefusal(*model, {{batch, 4}}) : "parse error";
}

TEST(BatchTiling, RowIndependentModelsStreamAndOthersAreRefused) {
  // Row-wise: a MatMul, a Softmax over the last axis, a flatten through Shape.
  auto rowwise = BatchModel([](onnx::GraphProto* g) {
    testing::AddFloatInitializer(g, "w", {4, 4}, std::vector<float>(16, 0.5f));
    testing::AddNamedNode(g, "MatMul", {"x", "w"}, "m");
    testing::AddNamedNode(g, "Softmax", {"m"}, "s");
    testing::AddNamedNode(g, "Shape", {"s"}, "shape");
    testing::AddNamedNode(g, "Reshape", {"s", "shape"}, "y");
  });
  EXPECT_EQ(Refusal(rowwise), "");
  auto softmax0 = BatchModel([](onnx::GraphProto* g) {
    testing::SetAttr(testing::AddNamedNode(g, "Softmax", {"x"}, "y"), "axis", 0);
  });
  EXPECT_NE(Refusal(softmax0).find("Softmax works along axis 0"), std::string::npos)
      << Refusal(softmax0);
  auto reduce0 = BatchModel([](onnx::GraphProto* g) {
    testing::AddInt64Initializer(g, "axes", {1}, {0});
    testing::AddNamedNode(g, "ReduceSum", {"x", "axes"}, "r");
    testing::AddNamedNode(g, "Add", {"x", "r"}, "y");
  });
  EXPECT_NE(Refusal(reduce0).find("reduces over the batch"), std::string::npos) << Refusal(reduce0);
  auto by_size =
      BatchModel([](onnx::GraphProto* g) {  // x / batch size: Shape feeding arithmetic on data
        testing::AddNamedNode(g, "Shape", {"x"}, "shape");
        auto* to = testing::AddNamedNode(g, "Cast", {"shape"}, "fshape");
        testing::SetAttr(to, "to", onnx::TensorProto::FLOAT);
        testing::AddNamedNode(g, "ReduceMin", {"fshape"}, "n");
        testing::AddNamedNode(g, "Div", {"x", "n"}, "y");
      });
  EXPECT_NE(Refusal(by_size).find("computes with the batch size"), std::string::npos)
      << Refusal(by_size);
  auto cumsum = BatchModel([](onnx::GraphProto* g) {
    testing::AddInt64Initializer(g, "axis", {}, {0});
    testing::AddNamedNode(g, "CumSum", {"x", "axis"}, "y");
  });
  EXPECT_NE(Refusal(cumsum).find("CumSum runs along axis 0"), std::string::npos) << Refusal(cumsum);
  auto unknown =
      BatchModel([](onnx::GraphProto* g) { testing::AddNamedNode(g, "Det", {"x"}, "y"); }, {-1});
  EXPECT_NE(Refusal(unknown), "");
  // A fixed leading dim is not a batch to stream.
  auto fixed = testing::AddReluModel(4);
  auto model = Parse(fixed);
  ASSERT_TRUE(model.ok());
  EXPECT_NE(runtime::BatchTilingRefusal(*model, {{4}}).find("fixes its leading dim"),
            std::string::npos);
}

// The shipped neural-field MLP over 5000 rows: tiles of its rows give the whole batch's result,
// from arenas planned for one tile.
TEST(BatchTiling, TilesGiveTheWholeBatchsResult) {
  auto loaded = frontend::LoadOnnxModel(ShippedModel("mlp_field.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const int64_t rows = 5000;
  Tensor x(DType::kFloat32, {rows, 3});
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = u(rng);
  runtime::ExecutorOptions whole;
  whole.shapes["xyz"] = {rows, 3};
  auto exec = runtime::Executor::Create(ir::CloneModel(*loaded), whole);
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  std::vector<Tensor> want;
  ASSERT_TRUE((*exec)->Run({x}, &want).ok());
  for (int threads : {1, 2}) {
    runtime::ExecutorOptions o;
    o.threads = threads;
    auto tiled = runtime::TiledRunner::Create(*loaded, o, {{rows, 3}},
                                              64 << 10);  // a small arena: many tiles
    ASSERT_TRUE(tiled.ok()) << tiled.status().message();
    EXPECT_LT((*tiled)->tile_rows(), rows);
    EXPECT_LT((*tiled)->tile_executor().arena_bytes(), (*exec)->arena_bytes());
    std::vector<Tensor> got;
    int64_t last = 0;
    ASSERT_TRUE((*tiled)
                    ->Run({x}, &got,
                          [&](int64_t done, int64_t total) {
                            EXPECT_GT(done, last);
                            EXPECT_EQ(total, rows);
                            last = done;
                          })
                    .ok());
    EXPECT_EQ(last, rows);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].dims(), want[k].dims());
      double worst = 0;
      for (int64_t i = 0; i < got[k].size(); ++i)
        worst = std::max(worst, std::fabs(got[k].GetDouble(i) - want[k].GetDouble(i)) /
                                    (1 + std::fabs(want[k].GetDouble(i))));
      EXPECT_LE(worst, 1e-5) << "output " << k << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace kiln
