// Activations (element-wise, with attributes) and the axis-wise Softmax / LogSoftmax / Hardmax.
#include <algorithm>
#include <cmath>

#include "ops/elementwise_kernels.h"
#include "ops/thread_pool.h"
#include "ops/vector_math.h"

namespace kiln::ops {
namespace {

// The float32 vector kernel of an activation: fn(node, x, y, n) (ops/vector_math.h).
using VecActFn = void (*)(const ir::Node&, const float*, float*, int64_t);

// Below this many elements per thread an element-wise kernel runs on the caller alone (waking a
// worker costs microseconds).
constexpr int64_t kElementsPerThread = 1 << 15;

// Registers y = f(x) where `make(node)` builds f from the node's attributes; float32 runs `vf`
// when given.
template <unsigned Groups, class Make>
void RegAct(OpRegistry& r, const char* name, Make make, VecActFn vf = nullptr) {
  r.Register(
      name, [](InferContext& ctx) { return InferUnary(ctx, Groups); },
      [make, vf](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        Tensor& y = ctx.output(0);
        if (vf && x.dtype() == DType::kFloat32) {
          const float* xs = x.data<float>();
          float* ys = y.data<float>();
          ParallelSlices(ctx.threads(), x.size(), kElementsPerThread,
                         [&](int64_t b, int64_t e) { vf(ctx.node(), xs + b, ys + b, e - b); });
          return OkStatus();
        }
        auto f = make(ctx.node());
        Dispatch<Groups>(x.dtype(), [&]<class T>() {
          const T* xs = x.data<T>();
          T* ys = y.data<T>();
          ParallelSlices(ctx.threads(), x.size(), kElementsPerThread,
                         [&](int64_t b, int64_t e) { UnaryLoop<T, T>(xs + b, ys + b, e - b, f); });
        });
        return OkStatus();
      });
  r.MarkWritesWholeOutputs(name, /*types_only=*/true);
}

// Both written with exp of a non-positive argument, so nothing overflows, and branch-free so
// the loops stay cheap on random signs.
template <class V>
V Sigmoid(V x) {
  V e = std::exp(-std::fabs(x));
  V d = V(1) / (V(1) + e);
  return x >= V(0) ? d : e * d;
}

template <class V>
V Softplus(V x) {
  return std::max(x, V(0)) + std::log1p(std::exp(-std::fabs(x)));
}

void RegisterPointwise(OpRegistry& r) {
  RegAct<kNumericTypes>(
      r, "Relu",
      [](const ir::Node&) { return []<class V>(V x) -> V { return x > V(0) ? x : V(0); }; },
      [](const ir::Node&, const float* x, float* y, int64_t n) { ReluF32(x, y, n); });
  RegAct<kFloatTypes>(
      r, "LeakyRelu",
      [](const ir::Node& n) {
        float alpha = n.attr_float("alpha", 0.01f);
        return [alpha]<class V>(V x) -> V { return x < V(0) ? V(alpha) * x : x; };
      },
      [](const ir::Node& n, const float* x, float* y, int64_t len) {
        LeakyReluF32(x, y, len, n.attr_float("alpha", 0.01f));
      });
  RegAct<kFloatTypes>(r, "Elu", [](const ir::Node& n) {
    float alpha = n.attr_float("alpha", 1.0f);
    return [alpha]<class V>(V x) -> V { return x < V(0) ? V(alpha) * std::expm1(x) : x; };
  });
  RegAct<kFloatTypes>(r, "Selu", [](const ir::Node& n) {
    float alpha = n.attr_float("alpha", 1.67326319217681884765625f);
    float gamma = n.attr_float("gamma", 1.05070102214813232421875f);
    return [alpha, gamma]<class V>(V x) -> V {
      return x > V(0) ? V(gamma) * x : V(gamma) * V(alpha) * std::expm1(x);
    };
  });
  RegAct<kFloatTypes>(r, "Celu", [](const ir::Node& n) {
    float alpha = n.attr_float("alpha", 1.0f);
    return
        [alpha]<class V>(V x) -> V { return x > V(0) ? x : V(alpha) * std::expm1(x / V(alpha)); };
  });
  RegAct<kFloatTypes>(
      r, "Sigmoid", [](const ir::Node&) { return []<class V>(V x) -> V { return Sigmoid(x); }; },
      [](const ir::Node&, const float* x, float* y, int64_t n) { SigmoidF32(x, y, n); });
  RegAct<kFloatTypes>(
      r, "HardSigmoid",
      [](const ir::Node& n) {
        float alpha = n.attr_float("alpha", 0.2f), beta = n.attr_float("beta", 0.5f);
        return [alpha, beta]<class V>(V x) -> V {
          return std::max(V(0), std::min(V(1), V(alpha) * x + V(beta)));
        };
      },
      [](const ir::Node& n, const float* x, float* y, int64_t len) {
        HardSigmoidF32(x, y, len, n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f));
      });
  RegAct<kFloatTypes>(
      r, "HardSwish",
      [](const ir::Node&) {
        return
            []<class V>(V x) -> V { return x * std::max(V(0), std::min(V(1), x / V(6) + V(0.5))); };
      },
      [](const ir::Node&, const float* x, float* y, int64_t n) { HardSwishF32(x, y, n); });
  RegAct<kFloatTypes>(
      r, "Softplus", [](const ir::Node&) { return []<class V>(V x) -> V { return Softplus(x); }; },
      [](const ir::Node&, const float* x, float* y, int64_t n) { SoftplusF32(x, y, n); });
  RegAct<kFloatTypes>(r, "Softsign", [](const ir::Node&) {
    return []<class V>(V x) -> V { return x / (V(1) + std::fabs(x)); };
  });
  RegAct<kFloatTypes>(r, "ThresholdedRelu", [](const ir::Node& n) {
    float alpha = n.attr_float("alpha", 1.0f);
    return [alpha]<class V>(V x) -> V { return x > V(alpha) ? x : V(0); };
  });
  RegAct<kNumericTypes>(r, "Shrink", [](const ir::Node& n) {
    double lambd = n.attr_float("lambd", 0.5f), bias = n.attr_float("bias", 0.0f);
    return [lambd, bias]<class V>(V x) -> V {
      // Integer inputs are shifted in double and truncated back, like the reference's astype.
      double v = static_cast<double>(x);
      double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
      if constexpr (std::is_integral_v<V>)
        return FloatToInt<V>(y);
      else
        return static_cast<V>(y);
    };
  });
  RegAct<kFloatTypes>(
      r, "Mish",
      [](const ir::Node&) { return []<class V>(V x) -> V { return x * std::tanh(Softplus(x)); }; },
      [](const ir::Node&, const float* x, float* y, int64_t n) { MishF32(x, y, n); });
  RegAct<kFloatTypes>(
      r, "Swish",
      [](const ir::Node& n) {
        float alpha = n.attr_float("alpha", 1.0f);
        return [alpha]<class V>(V x) -> V { return x * Sigmoid(V(alpha) * x); };
      },
      [](const ir::Node& n, const float* x, float* y, int64_t len) {
        SwishF32(x, y, len, n.attr_float("alpha", 1.0f));
      });

  // Also com.microsoft Gelu (ONNX Runtime's contrib op, always the erf form), which
  // passes/fuse_gelu writes for models before opset 20.
  for (const char* domain : {"", "com.microsoft"})
    r.Register(
        "Gelu",
        [](InferContext& ctx) -> Status {
          std::string a = ctx.node().attr_string("approximate", "none");
          if (a != "none" && a != "tanh")
            return ctx.error("approximate must be \"none\" or \"tanh\", got \"" + a + "\"");
          return InferUnary(ctx, kFloatTypes);
        },
        [](ComputeContext& ctx) -> Status {
          const Tensor& x = ctx.input(0);
          Tensor& y = ctx.output(0);
          const bool tanh_approx = ctx.node().attr_string("approximate", "none") == "tanh";
          if (x.dtype() == DType::kFloat32) {
            const float* xs = x.data<float>();
            float* ys = y.data<float>();
            ParallelSlices(ctx.threads(), x.size(), kElementsPerThread, [&](int64_t b, int64_t e) {
              GeluF32(xs + b, ys + b, e - b, tanh_approx);
            });
            return OkStatus();
          }
          Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
            using V = Acc<T>;
            if (tanh_approx) {
              const V k = static_cast<V>(0.79788456080286535588);
              UnaryLoop<T, T>(x.data<T>(), y.data<T>(), x.size(), [k](V v) {
                return V(0.5) * v * (V(1) + std::tanh(k * (v + V(0.044715) * v * v * v)));
              });
            } else {
              const V inv_sqrt2 = static_cast<V>(0.70710678118654752440);
              UnaryLoop<T, T>(x.data<T>(), y.data<T>(), x.size(), [inv_sqrt2](V v) {
                return V(0.5) * v * (V(1) + std::erf(v * inv_sqrt2));
              });
            }
          });
          return OkStatus();
        },
        domain);
}

// PRelu: the slope broadcasts to X (unidirectionally). A 1-D slope of X's channel count that
// does not broadcast numpy-style is applied per channel (axis 1), as in the pre-opset-7 spec.
bool PreluChannelSlope(const Dims& x, const Dims& s) {
  Dims d;
  if (BroadcastDims(x, s, &d) && d == x) return false;
  return s.size() == 1 && x.size() >= 2 && s[0] == x[1];
}

void RegisterPrelu(OpRegistry& r) {
  r.Register(
      "PRelu",
      [](InferContext& ctx) -> Status {
        if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1))
          return ctx.error("expects two inputs");
        DType t = ctx.input_dtype(0);
        if (!TypeIn(t, kNumericTypes)) return UnsupportedType(ctx, t);
        if (ctx.input_dtype(1) != t)
          return ctx.error("slope has element type " + TypeName(ctx.input_dtype(1)) +
                           ", expected " + TypeName(t));
        const Dims& x = ctx.input_dims(0);
        const Dims& s = ctx.input_dims(1);
        Dims d;
        bool ok = (BroadcastDims(x, s, &d) && d == x) || PreluChannelSlope(x, s);
        if (!ok)
          return ctx.error("slope of shape " + DimsToString(s) +
                           " does not broadcast to X of shape " + DimsToString(x));
        ctx.set_output(0, t, x);
        return OkStatus();
      },
      [](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        const Tensor& s = ctx.input(1);
        Tensor& y = ctx.output(0);
        Dims sd = s.dims();
        if (PreluChannelSlope(x.dims(), sd)) {
          sd.assign(x.rank() - 1, 1);
          sd[0] = s.dims()[0];
        }
        Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
          using V = Acc<T>;
          BinaryLoop<T, T, T>(
              x.data<T>(), x.dims(), s.data<T>(), sd, y.data<T>(), y.dims(),
              [](V v, V a) -> V {
                if constexpr (std::is_integral_v<V>)
                  return v < 0 ? WrapMul(v, a) : v;
                else
                  return v < V(0) ? v * a : v;
              },
              ctx.threads());
        });
        return OkStatus();
      });
}

// Splits dims around the softmax axis: before opset 13 the input is coerced to 2-D at `axis`
// (default 1); from 13 the op runs along the single axis (default -1).
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

Status SplitAxis(const ir::Node& node, int64_t opset, const Dims& dims, AxisSplit* s,
                 std::string* err) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = node.attr_int("axis", opset >= 13 ? -1 : 1);
  // A rank-0 input has nothing to normalise over; treat it as one element.
  if (rank == 0) return OkStatus();
  if (!NormalizeAxis(axis, rank)) {
    *err = "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank);
    return Error(*err);
  }
  *s = AxisSplit{};
  for (int64_t i = 0; i < axis; ++i) s->outer *= dims[i];
  if (opset >= 13) {
    s->len = dims[axis];
    for (int64_t i = axis + 1; i < rank; ++i) s->inner *= dims[i];
  } else {
    for (int64_t i = axis; i < rank; ++i) s->len *= dims[i];
  }
  return OkStatus();
}

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

// One slice of `len` values at stride `inner`, vectorised across the `inner` positions.
template <class T>
void SoftmaxBlock(const T* x, T* y, int64_t len, int64_t inner, SoftKind kind,
                  std::vector<Acc<T>>& buf) {
  using V = Acc<T>;
  buf.assign(static_cast<size_t>(2 * inner), V(0));
  V* mx = buf.data();
  V* sum = buf.data() + inner;
  for (int64_t i = 0; i < inner; ++i) mx[i] = static_cast<V>(x[i]);
  if (kind == SoftKind::kHardmax) {
    std::vector<int64_t> arg(static_cast<size_t>(inner), 0);
    for (int64_t k = 1; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        V v = static_cast<V>(x[k * inner + i]);
        if (v > mx[i]) {
          mx[i] = v;
          arg[i] = k;
        }
      }
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) y[k * inner + i] = static_cast<T>(V(arg[i] == k ? 1 : 0));
    return;
  }
  for (int64_t k = 1; k < len; ++k)
    for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], static_cast<V>(x[k * inner + i]));
  if constexpr (std::is_same_v<T, V>) {
    // Full-precision types: keep exp(x - max) in y and rescale in place.
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        V e = std::exp(x[k * inner + i] - mx[i]);
        sum[i] += e;
        if (kind == SoftKind::kSoftmax) y[k * inner + i] = e;
      }
  } else {
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i)
        sum[i] += std::exp(static_cast<V>(x[k * inner + i]) - mx[i]);
  }
  if (kind == SoftKind::kSoftmax) {
    for (int64_t i = 0; i < inner; ++i) sum[i] = V(1) / sum[i];
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        if constexpr (std::is_same_v<T, V>)
          y[k * inner + i] *= sum[i];
        else
          y[k * inner + i] =
              static_cast<T>(std::exp(static_cast<V>(x[k * inner + i]) - mx[i]) * sum[i]);
      }
  } else {
    for (int64_t i = 0; i < inner; ++i) sum[i] = mx[i] + std::log(sum[i]);
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i)
        y[k * inner + i] = static_cast<T>(static_cast<V>(x[k * inner + i]) - sum[i]);
  }
}

// Float32 rows along the last axis (inner == 1) with the vector kernels: max, exp(x - max) and
// its sum, then a scale (Softmax) or x - (max + log sum) (LogSoftmax, exps in scratch so that
// y may alias x).
void SoftRowsF32(const float* x, float* y, int64_t rows, int64_t len, SoftKind kind) {
  if (kind == SoftKind::kSoftmax) return SoftmaxRowsF32(x, y, rows, len);
  std::vector<float> scratch(static_cast<size_t>(len));
  for (int64_t r = 0; r < rows; ++r, x += len, y += len) {
    const float m = MaxF32(x, len);
    const float sum = ExpSubSumF32(x, scratch.data(), len, m);
    BinaryScalarF32(VecBinOp::kSub, m + std::log(sum), x, y, len, false);
  }
}

// Float32 along an axis with elements after it: columns [i0, i1) of one [len, inner] block, the
// vector exp over each row's run of columns; exps go to `work` (w floats per row) so that y may
// alias x (LogSoftmax reads x again).
void SoftColumnsF32(const float* x, float* y, int64_t len, int64_t inner, int64_t i0, int64_t i1,
                    SoftKind kind, std::vector<float>& work) {
  const int64_t w = i1 - i0;
  work.resize(static_cast<size_t>((len + 2) * w));
  float* mx = work.data();
  float* sum = mx + w;
  float* e = sum + w;
  std::copy(x + i0, x + i1, mx);
  for (int64_t k = 1; k < len; ++k) {
    const float* row = x + k * inner + i0;
    for (int64_t i = 0; i < w; ++i) mx[i] = std::max(mx[i], row[i]);
  }
  std::fill(sum, sum + w, 0.0f);
  for (int64_t k = 0; k < len; ++k) {
    const float* row = x + k * inner + i0;
    float* ek = e + k * w;
    for (int64_t i = 0; i < w; ++i) ek[i] = row[i] - mx[i];
    ExpF32(ek, ek, w);
    for (int64_t i = 0; i < w; ++i) sum[i] += ek[i];
  }
  if (kind == SoftKind::kSoftmax) {
    for (int64_t i = 0; i < w; ++i) sum[i] = 1.0f / sum[i];
    for (int64_t k = 0; k < len; ++k) {
      const float* ek = e + k * w;
      float* yk = y + k * inner + i0;
      for (int64_t i = 0; i < w; ++i) yk[i] = ek[i] * sum[i];
    }
    return;
  }
  for (int64_t i = 0; i < w; ++i) sum[i] = mx[i] + std::log(sum[i]);
  for (int64_t k = 0; k < len; ++k) {
    const float* row = x + k * inner + i0;
    float* yk = y + k * inner + i0;
    for (int64_t i = 0; i < w; ++i) yk[i] = row[i] - sum[i];
  }
}

void RegSoft(OpRegistry& r, const char* name, SoftKind kind) {
  r.Register(
      name,
      [](InferContext& ctx) -> Status {
        KILN_RETURN_IF_ERROR(InferUnary(ctx, kFloatTypes));
        AxisSplit s;
        std::string err;
        if (!SplitAxis(ctx.node(), ctx.opset(), ctx.input_dims(0), &s, &err).ok())
          return ctx.error(err);
        return OkStatus();
      },
      [kind](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        Tensor& y = ctx.output(0);
        AxisSplit s;
        std::string err;
        if (!SplitAxis(ctx.node(), ctx.opset(), x.dims(), &s, &err).ok()) return ctx.error(err);
        if (x.size() == 0) return OkStatus();
        if (x.dtype() == DType::kFloat32 && s.inner == 1 && kind != SoftKind::kHardmax) {
          const float* xs = x.data<float>();
          float* ys = y.data<float>();
          ParallelRows(ctx.threads(), s.outer, std::max<int64_t>(1, kElementsPerThread / s.len),
                       [&](int64_t b, int64_t e) {
                         SoftRowsF32(xs + b * s.len, ys + b * s.len, e - b, s.len, kind);
                       });
          return OkStatus();
        }
        if (x.dtype() == DType::kFloat32 && kind != SoftKind::kHardmax) {
          // Blocks of columns, so that an [outer = 1] map still splits over the threads.
          constexpr int64_t kColumns = 256;
          const int64_t chunks = (s.inner + kColumns - 1) / kColumns, tasks = s.outer * chunks;
          const float* xs = x.data<float>();
          float* ys = y.data<float>();
          const int t = static_cast<int>(
              std::min<int64_t>(ctx.threads(), 1 + s.outer * s.len * s.inner / kElementsPerThread));
          ParallelFor(t, tasks, [&](int64_t t0, int64_t t1) {
            std::vector<float> work;
            for (int64_t task = t0; task < t1; ++task) {
              const int64_t o = task / chunks, i0 = (task % chunks) * kColumns;
              const int64_t block = o * s.len * s.inner;
              SoftColumnsF32(xs + block, ys + block, s.len, s.inner, i0,
                             std::min(s.inner, i0 + kColumns), kind, work);
            }
          });
          return OkStatus();
        }
        Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
          std::vector<Acc<T>> buf;
          const int64_t block = s.len * s.inner;
          for (int64_t o = 0; o < s.outer; ++o)
            SoftmaxBlock<T>(x.data<T>() + o * block, y.data<T>() + o * block, s.len, s.inner, kind,
                            buf);
        });
        return OkStatus();
      });
  r.MarkWritesWholeOutputs(name, /*types_only=*/true);
}

}  // namespace

void RegisterActivationOps(OpRegistry& r) {
  RegisterPointwise(r);
  RegisterPrelu(r);
  RegSoft(r, "Softmax", SoftKind::kSoftmax);
  RegSoft(r, "LogSoftmax", SoftKind::kLogSoftmax);
  RegSoft(r, "Hardmax", SoftKind::kHardmax);
}

}  // namespace kiln::ops
