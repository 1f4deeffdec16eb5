// Activations (element-wise, with attributes) and the axis-wise Softmax / LogSoftmax / Hardmax.
#include <algorithm>
#include <cmath>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/elementwise_kernels.h"
#include "ops/unary_ops.h"

namespace kiln::ops {
namespace {

// Registers an op of ops/unary_ops.h: its formula computed in Acc<T>, float32 through its vector
// kernel where it has one (not under the reference kernels), split over the node's threads.
template <class Op>
void RegFormula(OpRegistry& r, const std::string& domain) {
  r.Register(
      Op::kName,
      [](InferContext& ctx) -> Status {
        if constexpr (unary::HasAttributeCheck<Op>) {
          std::string why = Op::Invalid(ctx.node());
          if (!why.empty()) return ctx.error(why);
        }
        return InferUnary(ctx, Op::kTypes);
      },
      [](ComputeContext& ctx) -> Status {
        const Op op(ctx.node());
        const Tensor& x = ctx.input(0);
        Tensor& y = ctx.output(0);
        Dispatch<Op::kTypes>(x.dtype(), [&]<class T>() {
          const T* xs = x.data<T>();
          T* ys = y.data<T>();
          if constexpr (std::is_same_v<T, float> && unary::HasFloat32Kernel<Op>) {
            if (!ReferenceKernels()) {
              ParallelSlices(ctx.threads(), x.size(), kElementsPerThread,
                             [&](int64_t b, int64_t e) {
                               unary::RunFloat32Kernel(op, xs + b, ys + b, e - b);
                             });
              return;
            }
          }
          ParallelSlices(ctx.threads(), x.size(), kElementsPerThread,
                         [&](int64_t b, int64_t e) { UnaryLoop<T, T>(xs + b, ys + b, e - b, op); });
        });
        return OkStatus();
      },
      domain);
  r.MarkWritesWholeOutputs(Op::kName, /*types_only=*/true, domain);
}

void RegisterPointwise(OpRegistry& r) {
  unary::ForEachUnaryFormulaOp([&]<class Op>() {
    RegFormula<Op>(r, "");
    if constexpr (unary::HasOtherDomain<Op>) RegFormula<Op>(r, Op::kOtherDomain);
  });
  // Shrink keeps integer inputs: shifted in double and truncated back, like the reference's
  // astype.
  r.Register(
      "Shrink", [](InferContext& ctx) { return InferUnary(ctx, kNumericTypes); },
      [](ComputeContext& ctx) -> Status {
        const double lambd = ctx.node().attr_float("lambd", 0.5f);
        const double bias = ctx.node().attr_float("bias", 0.0f);
        const Tensor& x = ctx.input(0);
        auto shrink = [lambd, bias]<class V>(V v) -> V {
          double d = static_cast<double>(v);
          double y = d < -lambd ? d + bias : (d > lambd ? d - bias : 0.0);
          if constexpr (std::is_integral_v<V>)
            return FloatToInt<V>(y);
          else
            return static_cast<V>(y);
        };
        Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
          const T* xs = x.data<T>();
          T* ys = ctx.output(0).data<T>();
          ParallelSlices(ctx.threads(), x.size(), kElementsPerThread, [&](int64_t b, int64_t e) {
            UnaryLoop<T, T>(xs + b, ys + b, e - b, shrink);
          });
        });
        return OkStatus();
      });
  r.MarkWritesWholeOutputs("Shrink", /*types_only=*/true);
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
