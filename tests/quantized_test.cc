// The int8 paths against integer references written here: the element kernels of
// kernels/x86/quantize_kernels.h (rounding ties, NaN, infinities, saturation and wrapping), the
// integer matmul / conv ops on the int8 GEMM (ops/quantize_gemm.h; on a CPU without VNNI they take
// the general loop, which must agree too) over types, zero points, groups, strides, dilations, pads
// and threads, and the fuse-qdq pass against the float graph it replaces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "executor_harness.h"
#include "frontend/onnx_import.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/quantize_kernels.h"
#include "ops/qconv_direct.h"
#include "passes/fuse_qdq.h"
#include "passes/infer_shapes.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {
namespace {

using Proto = onnx::TensorProto;
using namespace ops;  // NOLINT: the kernels under test
using passes::FuseQdq;

// ---------------------------------------------------------------------------------------------
// Element kernels

template <class Q>
void CheckQuantize(DType type) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-400.0f, 400.0f);
  std::vector<float> x;
  for (int i = -600; i <= 600; ++i) x.push_back(static_cast<float>(i) * 0.5f);  // every tie
  for (int i = 0; i < 3000; ++i) x.push_back(u(rng));
  for (float v : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 1e30f, -1e30f, -0.0f})
    x.push_back(v);
  for (float scale : {1.0f, 0.37f, 3.0f})
    for (int32_t zp : {0, 3, static_cast<int32_t>(std::numeric_limits<Q>::max() / 2)}) {
      std::vector<Q> got(x.size());
      QuantizeF32(x.data(), static_cast<int64_t>(x.size()), scale, zp, type, got.data());
      for (size_t i = 0; i < x.size(); ++i) {
        double v = static_cast<double>(x[i] / scale);
        v = std::isnan(v) ? 0 : std::nearbyint(v);
        v = std::min<double>(std::numeric_limits<Q>::max(),
                             std::max<double>(std::numeric_limits<Q>::min(), v + zp));
        ASSERT_EQ(static_cast<double>(got[i]), v)
            << DTypeName(type) << " x " << x[i] << " scale " << scale << " zp " << zp;
      }
    }
}

TEST(QuantizeKernels, QuantizeRoundsHalfToEvenAndSaturates) {
  CheckQuantize<uint8_t>(DType::kUInt8);
  CheckQuantize<int8_t>(DType::kInt8);
  CheckQuantize<uint16_t>(DType::kUInt16);
  CheckQuantize<int16_t>(DType::kInt16);
}

TEST(QuantizeKernels, DequantizeIsTheFloatFormula) {
  std::vector<int8_t> x;
  for (int i = -128; i < 128; ++i) x.push_back(static_cast<int8_t>(i));
  std::vector<float> y(x.size());
  DequantizeToF32(x.data(), DType::kInt8, static_cast<int64_t>(x.size()), -3, 0.1f, y.data());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(y[i], (static_cast<float>(x[i]) - (-3.0f)) * 0.1f);
}

TEST(QuantizeKernels, RequantizeSaturatesOrWrapsLikeTheReference) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> u(-3000000, 3000000);
  std::vector<int32_t> acc(997);
  for (auto& a : acc) a = u(rng);
  acc[0] = std::numeric_limits<int32_t>::max();
  acc[1] = std::numeric_limits<int32_t>::min();
  acc[2] = 5;  // 5 * 0.5^n + zp: ties
  std::vector<double> muls(acc.size());
  for (size_t i = 0; i < muls.size(); ++i) muls[i] = 1e-4 * static_cast<double>(i % 7 + 1);
  for (bool wrap : {false, true})
    for (bool per : {false, true}) {
      std::vector<uint8_t> got(acc.size());
      ASSERT_TRUE(RequantizeInt32(acc.data(), static_cast<int64_t>(acc.size()), muls.data(),
                                  per ? static_cast<int64_t>(muls.size()) : 1, 17, wrap,
                                  DType::kUInt8, got.data()));
      for (size_t i = 0; i < acc.size(); ++i) {
        double v = std::nearbyint(static_cast<double>(acc[i]) * muls[per ? i : 0] + 17);
        const int64_t want =
            wrap ? static_cast<int64_t>(static_cast<uint8_t>(static_cast<int64_t>(v)))
                 : static_cast<int64_t>(std::min(255.0, std::max(0.0, v)));
        ASSERT_EQ(got[i], want) << "acc " << acc[i] << " wrap " << wrap << " per " << per;
      }
    }
  const double big = 0.75;
  uint8_t y = 0;
  EXPECT_FALSE(RequantizeInt32(acc.data(), 1, &big, 1, 0, false, DType::kUInt8, &y));
}

// The vector kernel equals requant.c's scalar functions, for right shifts, small ones, left
// shifts and a zero multiplier, one multiplier or one per element, int8 and uint8, at the edges.
TEST(QuantizeKernels, RequantizeFixedEqualsTheScalarReference) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int32_t> u(std::numeric_limits<int32_t>::min(),
                                           std::numeric_limits<int32_t>::max());
  std::uniform_int_distribution<int32_t> small(-70000, 70000);
  std::vector<int32_t> acc(1001);
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = i % 3 ? small(rng) : u(rng);
  acc[0] = std::numeric_limits<int32_t>::max();
  acc[1] = std::numeric_limits<int32_t>::min();
  acc[2] = -1;
  for (double real : {3.1e-5, 0.2, 0.4999, 0.75, 3.0, 0.0}) {
    for (bool per : {false, true}) {
      std::vector<int32_t> mult(acc.size()), shift(acc.size());
      for (size_t i = 0; i < acc.size(); ++i)
        kiln_requant_multiplier(per ? real * (1.0 + 0.01 * static_cast<double>(i % 13)) : real,
                                &mult[i], &shift[i]);
      for (DType t : {DType::kInt8, DType::kUInt8}) {
        const int32_t lo = t == DType::kInt8 ? -128 : 0, hi = t == DType::kInt8 ? 127 : 255;
        std::vector<uint8_t> got(acc.size());
        RequantizeFixed(acc.data(), static_cast<int64_t>(acc.size()), mult.data(), shift.data(),
                        per, 7, t, got.data());
        for (size_t i = 0; i < acc.size(); ++i) {
          const size_t q = per ? i : 0;
          const int32_t want = kiln_requant_fixed(acc[i], mult[q], shift[q], 7, lo, hi);
          ASSERT_EQ(got[i], static_cast<uint8_t>(want))
              << "acc " << acc[i] << " real " << real << " per " << per;
        }
      }
    }
  }
}

// The vector Add equals qadd.c's function for every pair of int8 and of uint8 values, over
// scales that shift right by none to many bits, and where the output's multiplier shifts left.
TEST(QuantizeKernels, QAddEqualsTheScalarReference) {
  std::vector<uint8_t> a(256 * 256), b(a.size()), got(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i >> 8);
    b[i] = static_cast<uint8_t>(i);
  }
  for (auto [sa, sb, sy] : {std::tuple{0.02, 0.03, 0.05}, std::tuple{0.5, 0.5, 1e-3},
                            std::tuple{1e-4, 0.3, 0.2}, std::tuple{0.1, 0.1, 1e-8}}) {
    for (bool is_signed : {false, true}) {
      const kiln_qadd_params p =
          kiln_qadd_params_of(sa, is_signed ? -3 : 120, sb, is_signed ? 5 : 131, sy,
                              is_signed ? -1 : 128, is_signed ? -128 : 0, is_signed ? 127 : 255);
      QAdd(a.data(), b.data(), is_signed, static_cast<int64_t>(a.size()), p, got.data());
      for (size_t i = 0; i < a.size(); ++i) {
        const int32_t va = is_signed ? static_cast<int8_t>(a[i]) : a[i];
        const int32_t vb = is_signed ? static_cast<int8_t>(b[i]) : b[i];
        ASSERT_EQ(got[i], static_cast<uint8_t>(kiln_qadd(va, vb, &p)))
            << va << " + " << vb << " scales " << sa << " " << sb << " " << sy;
      }
    }
  }
}

TEST(QuantizeKernels, MinMaxOverEveryLength) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  for (int n = 0; n < 70; ++n) {
    std::vector<float> x(n);
    for (auto& v : x) v = u(rng) + 3.0f;  // mostly positive: the minimum starts at 0
    float lo = 1, hi = -1, want_lo = 0, want_hi = 0;
    bool nan = true;
    MinMaxF32(x.data(), n, &lo, &hi, &nan);
    for (float v : x) {
      want_lo = std::min(want_lo, v);
      want_hi = std::max(want_hi, v);
    }
    EXPECT_EQ(lo, want_lo) << n;
    EXPECT_EQ(hi, want_hi) << n;
    EXPECT_FALSE(nan) << n;
    if (n > 0) {
      x[n / 2] = std::numeric_limits<float>::quiet_NaN();
      MinMaxF32(x.data(), n, &lo, &hi, &nan);
      EXPECT_TRUE(nan) << n;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Integer ops through the executor

onnx::TensorProto::DataType ProtoType(DType t) {
  switch (t) {
    case DType::kInt8:
      return Proto::INT8;
    case DType::kUInt8:
      return Proto::UINT8;
    case DType::kInt32:
      return Proto::INT32;
    default:
      return Proto::FLOAT;
  }
}

// Adds an initializer of `type` holding `values` (integers or floats).
void AddInitializer(onnx::GraphProto* g, const std::string& name, DType type, const Dims& dims,
                    const std::vector<double>& values) {
  Proto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(ProtoType(type));
  for (int64_t d : dims) t->add_dims(d);
  for (double v : values) {
    if (type == DType::kFloat32)
      t->add_float_data(static_cast<float>(v));
    else
      t->add_int32_data(static_cast<int32_t>(v));
  }
}

onnx::ValueInfoProto InfoOf(const std::string& name, DType type, const Dims& dims) {
  onnx::ValueInfoProto vi = testing::FloatInfo(name, dims);
  vi.mutable_type()->mutable_tensor_type()->set_elem_type(ProtoType(type));
  return vi;
}

std::vector<double> RandomInts(int64_t n, DType type, std::mt19937& rng) {
  std::uniform_int_distribution<int> u(type == DType::kInt8 ? -128 : 0,
                                       type == DType::kInt8 ? 127 : 255);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

Tensor TensorOf(DType type, const Dims& dims, const std::vector<double>& values) {
  Tensor t(type, dims);
  for (int64_t i = 0; i < t.size(); ++i) {
    if (type == DType::kInt8)
      t.data<int8_t>()[i] = static_cast<int8_t>(values[i]);
    else if (type == DType::kUInt8)
      t.data<uint8_t>()[i] = static_cast<uint8_t>(values[i]);
    else if (type == DType::kInt32)
      t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    else
      t.data<float>()[i] = static_cast<float>(values[i]);
  }
  return t;
}

// The model's one output on input x.
std::vector<double> RunOne(const onnx::ModelProto& m, const Tensor& x, int threads,
                           bool host_passes = true) {
  runtime::ExecutorOptions o;
  o.threads = threads;
  o.host_passes = host_passes;
  auto out = testing::RunModel(m, x, o);
  return out.empty() ? std::vector<double>{} : std::move(out[0]);
}

// Zero points: none, one, or one per row / column / channel.
enum class Zp { kNone, kScalar, kPer };

std::vector<double> ZeroPoints(Zp kind, int64_t count, DType type, std::mt19937& rng) {
  if (kind == Zp::kNone) return {};
  return RandomInts(kind == Zp::kScalar ? 1 : count, type, rng);
}

double At(const std::vector<double>& zp, int64_t i) {
  return zp.empty() ? 0.0 : zp[zp.size() == 1 ? 0 : i];
}

struct MatMulCase {
  DType a, b;
  int64_t m, k, n;
  Zp a_zp, b_zp;
  bool extreme = false;  // x near 255, w near -128: sums far past 2^24 (float32's exact integers)
};

TEST(QuantizedOps, MatMulIntegerAgainstTheIntegerReference) {
  const MatMulCase cases[] = {
      {DType::kUInt8, DType::kInt8, 5, 64, 33, Zp::kScalar, Zp::kNone},
      {DType::kUInt8, DType::kUInt8, 5, 300, 17, Zp::kPer, Zp::kPer},
      {DType::kInt8, DType::kInt8, 3, 7, 40, Zp::kNone, Zp::kScalar},
      {DType::kInt8, DType::kUInt8, 6, 96, 8, Zp::kPer, Zp::kScalar},
      // deeper than one float32 chunk of Int8GemmByFloat (512), where it runs (no VNNI)
      {DType::kUInt8, DType::kInt8, 3, 1100, 20, Zp::kScalar, Zp::kPer},
      {DType::kUInt8, DType::kInt8, 2, 1100, 9, Zp::kNone, Zp::kNone, true},
  };
  std::mt19937 rng(11);
  for (const MatMulCase& c : cases) {
    const std::string what = std::string(DTypeName(c.a)) + " x " + std::string(DTypeName(c.b)) +
                             " k " + std::to_string(c.k) + " n " + std::to_string(c.n);
    auto x = RandomInts(2 * c.m * c.k, c.a, rng), w = RandomInts(c.k * c.n, c.b, rng);
    if (c.extreme) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = 255.0 - static_cast<double>(i % 7);
      for (size_t i = 0; i < w.size(); ++i) w[i] = -128.0 + static_cast<double>(i % 5);
    }
    const auto za = ZeroPoints(c.a_zp, c.m, c.a, rng), zb = ZeroPoints(c.b_zp, c.n, c.b, rng);
    onnx::ModelProto model = testing::EmptyModel("matmul_integer");
    auto* g = model.mutable_graph();
    *g->add_input() = InfoOf("x", c.a, {2, c.m, c.k});
    *g->add_output() = InfoOf("y", DType::kInt32, {2, c.m, c.n});
    AddInitializer(g, "w", c.b, {c.k, c.n}, w);
    std::vector<std::string> in = {"x", "w", "", ""};
    if (!za.empty()) {
      AddInitializer(g, "za", c.a, {static_cast<int64_t>(za.size())}, za);
      in[2] = "za";
    }
    if (!zb.empty()) {
      AddInitializer(g, "zb", c.b, {static_cast<int64_t>(zb.size())}, zb);
      in[3] = "zb";
    }
    testing::AddNamedNode(g, "MatMulInteger", in, "y");
    std::vector<double> want(2 * c.m * c.n);
    for (int64_t r = 0; r < 2 * c.m; ++r)
      for (int64_t j = 0; j < c.n; ++j) {
        int64_t s = 0;
        for (int64_t p = 0; p < c.k; ++p)
          s += static_cast<int64_t>(x[r * c.k + p] - At(za, r % c.m)) *
               static_cast<int64_t>(w[p * c.n + j] - At(zb, j));
        want[r * c.n + j] = static_cast<double>(s);
      }
    for (int threads : {1, 2})
      EXPECT_EQ(RunOne(model, TensorOf(c.a, {2, c.m, c.k}, x), threads), want)
          << what << " threads " << threads;
  }
}

// The requantization multiplier as the op computes it for float32 scales.
// The scales are float32 tensors: their product is of the float values.
double Multiplier(double a, double b, double y) {
  const double fa = static_cast<float>(a), fb = static_cast<float>(b);
  return static_cast<float>(static_cast<float>(fa * fb) / static_cast<float>(y));
}

TEST(QuantizedOps, QLinearMatMulWithPerColumnScalesWraps) {
  const int64_t m = 9, k = 80, n = 24;
  std::mt19937 rng(13);
  const auto x = RandomInts(m * k, DType::kUInt8, rng), w = RandomInts(k * n, DType::kInt8, rng);
  std::vector<double> ws(n), wz(n, 0.0);
  for (int64_t j = 0; j < n; ++j) ws[j] = 0.002 * static_cast<double>(j + 1);
  onnx::ModelProto model = testing::EmptyModel("qlinear_matmul");
  auto* g = model.mutable_graph();
  *g->add_input() = InfoOf("x", DType::kUInt8, {m, k});
  *g->add_output() = InfoOf("y", DType::kUInt8, {m, n});
  AddInitializer(g, "xs", DType::kFloat32, {}, {0.05});
  AddInitializer(g, "xz", DType::kUInt8, {}, {128});
  AddInitializer(g, "w", DType::kInt8, {k, n}, w);
  AddInitializer(g, "ws", DType::kFloat32, {n}, ws);
  AddInitializer(g, "wz", DType::kInt8, {n}, wz);
  AddInitializer(g, "ys", DType::kFloat32, {}, {0.125});
  AddInitializer(g, "yz", DType::kUInt8, {}, {100});
  testing::AddNamedNode(g, "QLinearMatMul", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, "y");
  std::vector<double> want(m * n);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += static_cast<int64_t>(x[r * k + p] - 128) * static_cast<int64_t>(w[p * n + j]);
      const double v =
          std::nearbyint(static_cast<double>(s) * Multiplier(0.05, ws[j], 0.125) + 100);
      want[r * n + j] = static_cast<uint8_t>(static_cast<int64_t>(v));
    }
  for (int threads : {1, 2})
    EXPECT_EQ(RunOne(model, TensorOf(DType::kUInt8, {m, k}, x), threads), want) << threads;
}

struct ConvCase {
  DType x, w;
  Dims in;  // [N, C, spatial...]
  int64_t m, group;
  Dims kernel, strides, dilations, pads;
  bool qlinear;              // QLinearConv with a bias, else ConvInteger
  bool w_symmetric = false;  // int8 weights without zero points (oneDNN's int8 convolution)
};

// The weight and output dims of a case.
Dims ConvWeightDims(const ConvCase& c) {
  Dims w = {c.m, c.in[1] / c.group};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  return w;
}
Dims ConvOutDims(const ConvCase& c) {
  const size_t sp = c.in.size() - 2;
  Dims out = {c.in[0], c.m};
  for (size_t d = 0; d < sp; ++d) {
    const int64_t ek = (c.kernel[d] - 1) * c.dilations[d] + 1;
    out.push_back((c.in[2 + d] + c.pads[d] + c.pads[d + sp] - ek) / c.strides[d] + 1);
  }
  return out;
}

// The convolution of (x - xz) with (w - wz[m]) plus bias, in int64.
std::vector<double> ConvReference(const ConvCase& c, const Dims& out, const std::vector<double>& x,
                                  double xz, const std::vector<double>& w,
                                  const std::vector<double>& wz, const std::vector<double>& bias) {
  const bool two = c.in.size() == 4;
  const int64_t n = c.in[0], ch = c.in[1], h = two ? c.in[2] : 1, wd = c.in.back();
  const int64_t kh = two ? c.kernel[0] : 1, kw = c.kernel.back();
  const int64_t sh = two ? c.strides[0] : 1, sw = c.strides.back();
  const int64_t dh = two ? c.dilations[0] : 1, dw = c.dilations.back();
  const int64_t ph = two ? c.pads[0] : 0, pw = c.pads[two ? 1 : 0];
  const int64_t oh = two ? out[2] : 1, ow = out.back(), cg = ch / c.group, mg = c.m / c.group;
  std::vector<double> y(n * c.m * oh * ow);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < c.m; ++oc)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t s = bias.empty() ? 0 : static_cast<int64_t>(bias[oc]);
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = oy * sh - ph + i * dh, ix = ox * sw - pw + j * dw;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const int64_t c_in = oc / mg * cg + ci;
                const double xv = x[((b * ch + c_in) * h + iy) * wd + ix] - xz;
                const double wv = w[((oc * cg + ci) * kh + i) * kw + j] - At(wz, oc);
                s += static_cast<int64_t>(xv) * static_cast<int64_t>(wv);
              }
          y[((b * c.m + oc) * oh + oy) * ow + ox] = static_cast<double>(s);
        }
  return y;
}

TEST(QuantizedOps, ConvsAgainstTheIntegerReference) {
  const ConvCase cases[] = {
      {DType::kUInt8,
       DType::kInt8,
       {1, 16, 9, 11},
       8,
       1,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       true},
      {DType::kInt8,
       DType::kUInt8,
       {2, 8, 10, 10},
       12,
       2,
       {3, 3},
       {2, 2},
       {2, 2},
       {2, 1, 2, 1},
       true},
      {DType::kUInt8,
       DType::kInt8,
       {1, 24, 7, 7},
       16,
       1,
       {1, 1},
       {1, 1},
       {1, 1},
       {0, 0, 0, 0},
       true},
      {DType::kUInt8, DType::kUInt8, {2, 6, 40}, 8, 1, {5}, {2}, {1}, {2, 2}, false},
      // A batch whose last input rows no window reaches (oneDNN takes the batch at once).
      {DType::kUInt8,
       DType::kInt8,
       {2, 2, 10, 13},
       3,
       1,
       {5, 2},
       {3, 2},
       {1, 1},
       {0, 0, 0, 0},
       false},
      {DType::kInt8,
       DType::kInt8,
       {1, 16, 6, 6},
       16,
       4,
       {3, 3},
       {1, 1},
       {1, 1},
       {0, 1, 1, 0},
       false},
      // A depthwise one with uint8 weights and zero points: oneDNN's int8 convolution less the
      // window sums times the zero points.
      {DType::kUInt8,
       DType::kUInt8,
       {2, 24, 11, 13},
       24,
       24,
       {3, 3},
       {1, 2},
       {1, 1},
       {1, 1, 1, 0},
       true},
      // Large enough for output row parts at two threads (grouped convolutions split rows).
      {DType::kUInt8,
       DType::kUInt8,
       {1, 192, 61, 60},
       192,
       192,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       true},
      {DType::kUInt8,
       DType::kInt8,
       {1, 160, 60, 60},
       160,
       160,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       true,
       true},
      // Symmetric int8 weights: oneDNN's int8 convolution where the CPU has VNNI. Output
      // channels split over two threads, strides and dilations, a negative right padding (the
      // last input column unread), groups, 1-D, int8 x.
      {DType::kUInt8,
       DType::kInt8,
       {1, 32, 20, 20},
       48,
       1,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       true,
       true},
      {DType::kInt8,
       DType::kInt8,
       {2, 8, 10, 12},
       20,
       1,
       {3, 3},
       {2, 2},
       {2, 1},
       {2, 0, 1, 0},
       true,
       true},
      {DType::kUInt8,
       DType::kInt8,
       {1, 16, 9, 9},
       32,
       2,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       false,
       true},
      {DType::kUInt8, DType::kInt8, {2, 12, 33}, 24, 1, {5}, {2}, {1}, {2, 1}, false, true},
      {DType::kUInt8,
       DType::kInt8,
       {1, 32, 12, 12},
       32,
       32,
       {3, 3},
       {2, 2},
       {1, 1},
       {1, 1, 1, 1},
       true,
       true},
      {DType::kUInt8,
       DType::kInt8,
       {1, 64, 14, 14},
       64,
       1,
       {1, 1},
       {1, 1},
       {1, 1},
       {0, 0, 0, 0},
       true,
       true},
  };
  std::mt19937 rng(17);
  for (const ConvCase& c : cases) {
    const std::string what = std::string(c.qlinear ? "QLinearConv " : "ConvInteger ") +
                             std::string(DTypeName(c.x)) + " x " + std::string(DTypeName(c.w)) +
                             " " + DimsToString(c.in);
    const Dims wdims = ConvWeightDims(c), out = ConvOutDims(c);
    const auto x = RandomInts(NumElements(c.in), c.x, rng);
    const auto w = RandomInts(NumElements(wdims), c.w, rng);
    const auto xz = RandomInts(1, c.x, rng);
    const auto wz = c.w_symmetric ? std::vector<double>(c.m, 0.0) : RandomInts(c.m, c.w, rng);
    std::vector<double> bias;
    std::uniform_int_distribution<int> ub(-5000, 5000);
    if (c.qlinear)
      for (int64_t i = 0; i < c.m; ++i) bias.push_back(ub(rng));
    onnx::ModelProto model = testing::EmptyModel("conv");
    auto* g = model.mutable_graph();
    *g->add_input() = InfoOf("x", c.x, c.in);
    AddInitializer(g, "xz", c.x, {}, xz);
    AddInitializer(g, "w", c.w, wdims, w);
    AddInitializer(g, "wz", c.w, {c.m}, wz);
    onnx::NodeProto* node;
    std::vector<double> ws(c.m);
    for (int64_t i = 0; i < c.m; ++i) ws[i] = 0.001 * static_cast<double>(i % 5 + 1);
    if (c.qlinear) {
      *g->add_output() = InfoOf("y", c.x, out);
      AddInitializer(g, "xs", DType::kFloat32, {}, {0.02});
      AddInitializer(g, "ws", DType::kFloat32, {c.m}, ws);
      AddInitializer(g, "ys", DType::kFloat32, {}, {0.25});
      AddInitializer(g, "yz", c.x, {}, {c.x == DType::kInt8 ? -5.0 : 120.0});
      AddInitializer(g, "b", DType::kInt32, {c.m}, bias);
      node = testing::AddNamedNode(g, "QLinearConv",
                                   {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}, "y");
    } else {
      *g->add_output() = InfoOf("y", DType::kInt32, out);
      node = testing::AddNamedNode(g, "ConvInteger", {"x", "w", "xz", "wz"}, "y");
    }
    testing::SetAttr(node, "group", c.group);
    testing::SetAttr(node, "strides", c.strides);
    testing::SetAttr(node, "dilations", c.dilations);
    testing::SetAttr(node, "pads", c.pads);
    std::vector<double> want = ConvReference(c, out, x, xz[0], w, wz, bias);
    if (c.qlinear) {
      const int64_t plane = NumElements(out) / out[0] / c.m;
      const double lo = c.x == DType::kInt8 ? -128 : 0, hi = c.x == DType::kInt8 ? 127 : 255;
      const double yz = c.x == DType::kInt8 ? -5.0 : 120.0;
      for (size_t e = 0; e < want.size(); ++e) {
        const int64_t oc = static_cast<int64_t>(e) / plane % c.m;
        const double v = std::nearbyint(want[e] * Multiplier(0.02, ws[oc], 0.25) + yz);
        want[e] = std::min(hi, std::max(lo, v));
      }
    }
    for (int threads : {1, 2})
      EXPECT_EQ(RunOne(model, TensorOf(c.x, c.in, x), threads), want)
          << what << " threads " << threads;
  }
}

// ---------------------------------------------------------------------------------------------
// fuse-qdq

// QDQ: y = Q(Relu?(Conv(DQ(Q(x)), DQ(wq), bias))), per-channel int8 weights, or the MatMul form;
// Clip(0, clip_max) in place of the Relu where clip_max > 0.
onnx::ModelProto QdqModel(bool conv, bool relu, double out_zp, double clip_max = 0) {
  std::mt19937 rng(19);
  onnx::ModelProto model = testing::EmptyModel("qdq");
  auto* g = model.mutable_graph();
  const Dims in = conv ? Dims{1, 8, 12, 12} : Dims{4, 32};
  const int64_t m = 16;
  const Dims wdims = conv ? Dims{m, 8, 3, 3} : Dims{32, m};
  *g->add_input() = InfoOf("x", DType::kFloat32, in);
  AddInitializer(g, "xs", DType::kFloat32, {}, {1.0 / 64});
  AddInitializer(g, "xz", DType::kUInt8, {}, {128});
  AddInitializer(g, "wq", DType::kInt8, wdims, RandomInts(NumElements(wdims), DType::kInt8, rng));
  std::vector<double> ws(m);
  for (int64_t i = 0; i < m; ++i) ws[i] = 0.002 + 0.0003 * static_cast<double>(i);
  AddInitializer(g, "ws", DType::kFloat32, {m}, ws);
  AddInitializer(g, "wz", DType::kInt8, {m}, std::vector<double>(m, 0.0));
  AddInitializer(g, "ys", DType::kFloat32, {}, {1.0 / 16});
  AddInitializer(g, "yz", DType::kUInt8, {}, {out_zp});
  testing::AddNamedNode(g, "QuantizeLinear", {"x", "xs", "xz"}, "xq");
  testing::AddNamedNode(g, "DequantizeLinear", {"xq", "xs", "xz"}, "xd");
  testing::SetAttr(testing::AddNamedNode(g, "DequantizeLinear", {"wq", "ws", "wz"}, "wd"), "axis",
                   conv ? 0 : 1);
  if (conv) {
    std::vector<double> b(m);
    for (int64_t i = 0; i < m; ++i) b[i] = 0.1 * static_cast<double>(i) - 0.8;
    AddInitializer(g, "b", DType::kFloat32, {m}, b);
    testing::SetAttr(testing::AddNamedNode(g, "Conv", {"xd", "wd", "b"}, "c"), "pads",
                     Dims{1, 1, 1, 1});
  } else {
    testing::AddNamedNode(g, "MatMul", {"xd", "wd"}, "c");
  }
  if (relu && clip_max > 0) {
    AddInitializer(g, "lo", DType::kFloat32, {}, {0.0});
    AddInitializer(g, "hi", DType::kFloat32, {}, {clip_max});
    testing::AddNamedNode(g, "Clip", {"c", "lo", "hi"}, "r");
  } else if (relu) {
    testing::AddNamedNode(g, "Relu", {"c"}, "r");
  }
  testing::AddNamedNode(g, "QuantizeLinear", {relu ? "r" : "c", "ys", "yz"}, "yq");
  testing::AddNamedNode(g, "DequantizeLinear", {"yq", "ys", "yz"}, "y");
  Dims out = conv ? Dims{1, m, 12, 12} : Dims{4, m};
  *g->add_output() = InfoOf("y", DType::kFloat32, out);
  return model;
}

// The ops of the model after fuse-qdq, in order.
std::vector<std::string> OpsAfterFusion(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  auto model = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return {};
  EXPECT_TRUE(passes::InferShapes(*model, {}).ok());
  EXPECT_TRUE(FuseQdq(*model).ok());
  std::vector<std::string> ops;
  for (const ir::Node& n : model->graph->nodes) ops.push_back(n.op_type);
  return ops;
}

// QMatMulDirect equals the integer product on its VNNI and AVX2 paths: one to four rows (over a
// batch axis), depths and widths off the vector widths, int8 and uint8 x with zero points.
TEST(QuantizedOps, DirectMatMulsAgainstTheIntegerReference) {
  std::mt19937 rng(23);
  for (auto [xd, k, n, type] : {std::tuple{Dims{1, 640}, int64_t{640}, int64_t{128}, DType::kInt8},
                                std::tuple{Dims{1, 10}, int64_t{10}, int64_t{70}, DType::kUInt8},
                                std::tuple{Dims{2, 2, 37}, int64_t{37}, int64_t{9}, DType::kInt8},
                                std::tuple{Dims{3, 5}, int64_t{5}, int64_t{1}, DType::kUInt8}}) {
    const auto x = RandomInts(NumElements(xd), type, rng);
    const auto w = RandomInts(k * n, DType::kInt8, rng);
    const auto zp = RandomInts(1, type, rng);
    const int64_t rows = NumElements(xd) / k;
    std::vector<int32_t> want(rows * n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += static_cast<int64_t>(x[r * k + p] - zp[0]) * static_cast<int64_t>(w[p * n + j]);
        want[r * n + j] = static_cast<int32_t>(sum);
      }
    const Tensor xt = TensorOf(type, xd, x), wt = TensorOf(DType::kInt8, {k, n}, w);
    for (Isa isa : {Isa::kAuto, Isa::kAvx2}) {
      if (!IsaSupported(isa)) continue;
      std::vector<int32_t> got(want.size(), 12345);
      std::unique_ptr<NodeState> state;
      for (int call = 0; call < 2; ++call) {  // the second on the weights laid out
        ASSERT_TRUE(
            QMatMulDirect(xt, static_cast<int32_t>(zp[0]), wt, true, &state, got.data(), isa));
        ASSERT_EQ(got, want) << DimsToString(xd) << " x [" << k << ", " << n << "] "
                             << IsaName(isa);
      }
    }
  }
}

// QConvDirect (ops/qconv_direct.h) equals the reference, on its VNNI path (where the CPU has one)
// and its AVX2 path, as int32 sums and requantized: depthwise (strides, dilations, asymmetric
// pads, 1-D, more than one block of channels), grouped and plain (depth and pixel counts off the
// vector widths), int8 and uint8 x, with and without a bias, batches of two, one and two threads.
TEST(QuantizedOps, DirectConvolutionsAgainstTheIntegerReference) {
  const DType u8 = DType::kUInt8, s8 = DType::kInt8;
  const ConvCase cases[] = {
      {s8, s8, {2, 20, 9, 7}, 20, 20, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, true, true},
      {u8, s8, {1, 18, 12, 11}, 18, 18, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 1}, true, true},
      {s8, s8, {1, 8, 10, 10}, 8, 8, {3, 3}, {1, 2}, {2, 1}, {2, 1, 0, 2}, false, true},
      {u8, s8, {2, 6, 30}, 6, 6, {5}, {2}, {1}, {2, 1}, true, true},
      {s8, s8, {1, 13, 9, 10}, 21, 1, {3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}, true, true},
      {u8, s8, {2, 12, 7, 5}, 10, 2, {3, 2}, {1, 1}, {1, 2}, {0, 1, 1, 0}, false, true},
      {u8, s8, {1, 37, 6, 6}, 19, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, true, true},
      {s8, s8, {1, 3, 40}, 7, 1, {7}, {1}, {1}, {3, 3}, true, true},
  };
  std::mt19937 rng(21);
  for (const ConvCase& c : cases) {
    const Dims wdims = ConvWeightDims(c), out = ConvOutDims(c);
    const size_t sp = c.in.size() - 2;
    const auto x = RandomInts(NumElements(c.in), c.x, rng);
    const auto w = RandomInts(NumElements(wdims), c.w, rng);
    const auto xz = RandomInts(1, c.x, rng);
    std::vector<double> bias(c.m, 0.0);  // qlinear: a bias, else none
    std::uniform_int_distribution<int> ub(-5000, 5000);
    if (c.qlinear)
      for (double& b : bias) b = ub(rng);
    const std::vector<double> sums =
        ConvReference(c, out, x, xz[0], w, std::vector<double>(c.m, 0.0), bias);
    ConvGeom g;
    g.n = c.in[0];
    g.c = c.in[1];
    g.m = c.m;
    g.group = c.group;
    g.in.assign(c.in.begin() + 2, c.in.end());
    g.out.assign(out.begin() + 2, out.end());
    g.kernel = c.kernel;
    g.strides = c.strides;
    g.dilations = c.dilations;
    g.pads_begin.assign(c.pads.begin(), c.pads.begin() + sp);
    const Tensor xt = TensorOf(c.x, c.in, x), wt = TensorOf(c.w, wdims, w),
                 bt = TensorOf(DType::kInt32, {c.m}, bias);
    // A multiplier per output channel, int8 output with a zero point.
    std::vector<int32_t> mult(c.m), shift(c.m);
    for (int64_t m = 0; m < c.m; ++m)
      kiln_requant_multiplier(1e-3 * static_cast<double>(m % 5 + 1), &mult[m], &shift[m]);
    const int64_t plane = static_cast<int64_t>(sums.size()) / (g.n * g.m);
    std::vector<int32_t> want(sums.size());
    std::vector<uint8_t> want_y(sums.size());
    for (size_t e = 0; e < sums.size(); ++e) {
      const int64_t m = static_cast<int64_t>(e) / plane % g.m;
      want[e] = static_cast<int32_t>(sums[e]);
      want_y[e] =
          static_cast<uint8_t>(kiln_requant_right(want[e], mult[m], shift[m], 3, -128, 127));
    }
    for (Isa isa : {Isa::kAuto, Isa::kAvx2}) {
      if (!IsaSupported(isa)) continue;
      std::vector<int32_t> got(want.size(), 12345);
      std::vector<uint8_t> got_y(want.size());
      QConvOutput as_sums, requantized;
      as_sums.sums = got.data();
      requantized.y = got_y.data();
      requantized.mult = mult.data();
      requantized.shift = shift.data();
      requantized.zp = 3;
      requantized.lo = -128;
      requantized.hi = 127;
      std::unique_ptr<NodeState> state;
      const std::string what =
          DimsToString(c.in) + " group " + std::to_string(c.group) + " " + IsaName(isa);
      for (int threads : {1, 2}) {
        ASSERT_TRUE(QConvDirect(g, xt, static_cast<int32_t>(xz[0]), wt, true,
                                c.qlinear ? &bt : nullptr, threads, &state, as_sums, isa))
            << what;
        ASSERT_EQ(got, want) << what << " threads " << threads;
        ASSERT_TRUE(QConvDirect(g, xt, static_cast<int32_t>(xz[0]), wt, true,
                                c.qlinear ? &bt : nullptr, threads, &state, requantized, isa))
            << what;
        ASSERT_EQ(got_y, want_y) << what << " threads " << threads;
      }
    }
  }
}

TEST(FuseQdq, ConvAndMatMulRunOnIntegersWithinOneStep) {
  struct Case {
    bool conv, relu;
    double out_zp;
    std::vector<std::string> ops;
    double clip_max = 0;
  };
  const Case cases[] = {
      {true, true, 0, {"QuantizeLinear", "QuantizeLinear", "DequantizeLinear"}},
      {true, false, 128, {"QuantizeLinear", "QuantizeLinear", "DequantizeLinear"}},
      {false, false, 128, {"QuantizeLinear", "QuantizeLinear", "DequantizeLinear"}},
      // A Relu that the output's saturation does not cover stays in float.
      {true,
       true,
       100,
       {"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv", "Relu", "QuantizeLinear",
        "DequantizeLinear"}},
      // A Clip(0, 20) is the saturation of a Q whose top is 255 / 16; a Clip(0, 6) is not.
      {true, true, 0, {"QuantizeLinear", "QuantizeLinear", "DequantizeLinear"}, 20.0},
      {true,
       true,
       0,
       {"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv", "Clip", "QuantizeLinear",
        "DequantizeLinear"},
       6.0},
  };
  std::mt19937 rng(23);
  for (const Case& c : cases) {
    const onnx::ModelProto model = QdqModel(c.conv, c.relu, c.out_zp, c.clip_max);
    std::vector<std::string> ops = OpsAfterFusion(model);
    std::vector<std::string> want = c.ops;
    if (want.size() == 3) want[1] = c.conv ? "QLinearConv" : "QLinearMatMul";
    EXPECT_EQ(ops, want) << c.conv << c.relu;
    const Dims in = c.conv ? Dims{1, 8, 12, 12} : Dims{4, 32};
    std::uniform_real_distribution<double> u(-1.9, 1.9);
    std::vector<double> x(NumElements(in));
    for (auto& v : x) v = static_cast<float>(u(rng));
    const std::vector<double> fused = RunOne(model, TensorOf(DType::kFloat32, in, x), 1);
    const std::vector<double> plain = RunOne(model, TensorOf(DType::kFloat32, in, x), 1, false);
    ASSERT_EQ(fused.size(), plain.size());
    int off = 0;
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_LE(std::fabs(fused[i] - plain[i]), 1.0 / 16 + 1e-6) << i;
      off += fused[i] != plain[i];
    }
    EXPECT_LE(off, static_cast<int>(fused.size() / 100) + 1);
  }
}

}  // namespace
}  // namespace kiln
