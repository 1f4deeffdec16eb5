// Reductions over axes (Reduce*), ArgMax/ArgMin and the running scans CumSum/CumProd.
// The losses live in reduce_loss.cc. float32 Sum / Mean / Max / Min / SumSquare / L1 / L2 over a
// block of contiguous axes run vectorized in float (ReduceF32); the rest in the reference below.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/common.h"

namespace kiln::ops {

void RegisterReduceLossOps(OpRegistry& r);

namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

// Which axes are reduced and the resulting dims. `noop` passes the input through unchanged.
struct ReducePlan {
  bool noop = false;
  std::vector<char> reduced;  // per input axis
  Dims out_dims;              // with keepdims applied
  Dims kept_dims;             // same rank as the input, 1 on reduced axes
};

bool TypeIn(DType t, unsigned groups) {
  return ((IsFloatingDType(t) && (groups & kFloatTypes)) ||
          (IsSignedIntDType(t) && (groups & kSignedIntTypes)) ||
          (IsUnsignedIntDType(t) && (groups & kUnsignedIntTypes)) ||
          (t == DType::kBool && (groups & kBoolType)));
}

// Opset from which `axes` is the second input rather than an attribute.
int64_t AxesInputOpset(ReduceKind k) { return k == ReduceKind::kSum ? 13 : 18; }

// Builds the plan; returns "" or an error message. `axes` are the raw axes (attribute or input).
std::string MakeReducePlan(const ir::Node& node, bool axes_from_input, const Dims& in,
                           std::vector<int64_t> axes, ReducePlan* p) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  const bool noop_empty = axes_from_input && node.attr_int("noop_with_empty_axes", 0) != 0;
  p->noop = false;
  p->reduced.assign(rank, 0);
  if (axes.empty()) {
    if (noop_empty) {
      p->noop = true;
      p->out_dims = in;
      p->kept_dims = in;
      return "";
    }
    std::fill(p->reduced.begin(), p->reduced.end(), 1);
  }
  for (int64_t a : axes) {
    int64_t ax = a;
    if (!NormalizeAxis(ax, rank))
      return "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank);
    if (p->reduced[ax]) return "axis " + std::to_string(a) + " is listed twice";
    p->reduced[ax] = 1;
  }
  p->out_dims.clear();
  p->kept_dims = in;
  for (int64_t d = 0; d < rank; ++d) {
    if (p->reduced[d]) {
      p->kept_dims[d] = 1;
      if (keepdims) p->out_dims.push_back(1);
    } else {
      p->out_dims.push_back(in[d]);
    }
  }
  return "";
}

template <class T>
using ReduceAcc = std::conditional_t<kIsFloat<T>, double,
                                     std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// When the reduced axes (ignoring unit dims) form one contiguous block, the input is
// [outer, r, inner] with r reduced: true and the three sizes, else false.
bool SplitReduced(const Dims& in, const std::vector<char>& reduced, int64_t* outer, int64_t* r,
                  int64_t* inner) {
  *outer = *r = *inner = 1;
  int state = 0;  // 0: before the reduced block, 1: inside it, 2: after it
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1) continue;
    if (reduced[d]) {
      if (state == 2) return false;
      state = 1;
      *r *= in[d];
    } else if (state == 0) {
      *outer *= in[d];
    } else {
      state = 2;
      *inner *= in[d];
    }
  }
  return true;
}

// acc[o] = combine(acc[o], map(x, o)) over every input element x that reduces into output o.
// When the reduced axes (ignoring unit dims) form one contiguous block, the input is
// [outer, r, inner] and the loops run over contiguous memory; otherwise each element is
// scattered to its output offset.
template <class A, class T, class Map, class Combine>
void Accumulate(const Tensor& x, const ReducePlan& p, A init, A* acc, Map map, Combine combine) {
  const Dims& in = x.dims();
  const T* xd = x.data<T>();
  auto val = [&](int64_t i) { return ConvertValue<A>(xd[i]); };
  int64_t outer = 1, r = 1, inner = 1;
  if (SplitReduced(in, p.reduced, &outer, &r, &inner)) {
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = o * r * inner;
      A* a = acc + o * inner;
      if (inner == 1) {  // one contiguous row: four partial results break the dependency chain
        A s[4] = {a[0], init, init, init};
        int64_t j = 0;
        for (; j + 4 <= r; j += 4)
          for (int k = 0; k < 4; ++k) s[k] = combine(s[k], map(val(base + j + k), o));
        for (; j < r; ++j) s[0] = combine(s[0], map(val(base + j), o));
        a[0] = combine(combine(s[0], s[1]), combine(s[2], s[3]));
      } else {  // blocked over inner so the accumulators stay in cache
        constexpr int64_t kBlock = 1024;
        for (int64_t i0 = 0; i0 < inner; i0 += kBlock) {
          const int64_t i1 = std::min(inner, i0 + kBlock);
          for (int64_t j = 0; j < r; ++j) {
            const int64_t row = base + j * inner;
            for (int64_t i = i0; i < i1; ++i)
              a[i] = combine(a[i], map(val(row + i), o * inner + i));
          }
        }
      }
    }
    return;
  }
  Dims ostr = Strides(p.kept_dims);
  for (size_t d = 0; d < ostr.size(); ++d)
    if (p.reduced[d]) ostr[d] = 0;
  ForEachBroadcast<1>(in, std::array<Dims, 1>{ostr},
                      [&](int64_t i, const std::array<int64_t, 1>& o) {
                        acc[o[0]] = combine(acc[o[0]], map(val(i), o[0]));
                      });
}

template <class T>
void ReduceKernel(ReduceKind kind, const Tensor& x, const ReducePlan& p, Tensor& y) {
  using A = ReduceAcc<T>;
  const int64_t n_out = NumElements(p.kept_dims);
  const int64_t count = n_out == 0 ? 0 : x.size() / n_out;  // elements per output
  T* yd = y.data<T>();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Integer overflow wraps (as numpy does) instead of being undefined.
  using W = std::conditional_t<std::is_integral_v<A>, uint64_t, A>;
  auto add = [](A a, A b) { return A(W(a) + W(b)); };
  auto mul = [](A a, A b) { return A(W(a) * W(b)); };
  // NaN sticks, as in numpy. Written as selects so that they compile without branches.
  auto max = [](A a, A b) {
    A m = b > a ? b : a;
    return b != b ? b : m;
  };
  auto min = [](A a, A b) {
    A m = b < a ? b : a;
    return b != b ? b : m;
  };
  auto id = [](A v, int64_t) { return v; };
  A lowest, highest;
  if constexpr (kIsFloat<T>) {
    lowest = -kInf;
    highest = kInf;
  } else {
    lowest = static_cast<A>(std::numeric_limits<T>::lowest());
    highest = static_cast<A>(std::numeric_limits<T>::max());
  }
  std::vector<A> acc(n_out);
  auto run = [&](A init, auto map, auto combine) {
    std::fill(acc.begin(), acc.end(), init);
    Accumulate<A, T>(x, p, init, acc.data(), map, combine);
  };
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
    case ReduceKind::kLogSum:
      run(A(0), id, add);
      break;
    case ReduceKind::kProd:
      run(A(1), id, mul);
      break;
    case ReduceKind::kMax:
      run(lowest, id, max);
      break;
    case ReduceKind::kMin:
      run(highest, id, min);
      break;
    case ReduceKind::kSumSquare:
    case ReduceKind::kL2:
      run(
          A(0), [](A v, int64_t) { return A(W(v) * W(v)); }, add);
      break;
    case ReduceKind::kL1:
      run(
          A(0),
          [](A v, int64_t) {
            if constexpr (std::is_unsigned_v<A>)
              return v;
            else
              return v < 0 ? A(W(0) - W(v)) : v;
          },
          add);
      break;
    case ReduceKind::kLogSumExp: {
      // Subtract the per-output maximum for stability (0 where it is not finite).
      std::vector<double> shift(n_out), sum(n_out, 0.0);
      run(lowest, id, max);
      for (int64_t o = 0; o < n_out; ++o) {
        double m = static_cast<double>(acc[o]);
        shift[o] = std::isfinite(m) ? m : 0.0;
      }
      Accumulate<double, T>(
          x, p, 0.0, sum.data(), [&](double v, int64_t o) { return std::exp(v - shift[o]); },
          [](double a, double b) { return a + b; });
      for (int64_t o = 0; o < n_out; ++o) yd[o] = ConvertValue<T>(std::log(sum[o]) + shift[o]);
      return;
    }
  }
  for (int64_t o = 0; o < n_out; ++o) {
    A a = acc[o];
    switch (kind) {
      case ReduceKind::kMean:
        if constexpr (kIsFloat<T>)
          a = a / static_cast<double>(count);
        else
          a = count ? a / static_cast<A>(count) : A(0);
        break;
      case ReduceKind::kL2:
        yd[o] = ConvertValue<T>(std::sqrt(static_cast<double>(a)));
        continue;
      case ReduceKind::kLogSum:
        yd[o] = ConvertValue<T>(std::log(static_cast<double>(a)));
        continue;
      default:
        break;
    }
    yd[o] = ConvertValue<T>(a);
  }
}

// ---- float32 ----
// Sum, Mean, Max, Min, SumSquare, L1 and L2 over float32 in float lanes (as ONNX computes float32;
// the reference above accumulates sums in double): a reduced block of contiguous axes makes the
// input [outer, r, inner]; with inner == 1 each output is a row reduced in 16 lanes, else rows of
// r are combined into `inner` accumulators, vectorized along them. Max / Min keep NaN.

struct SumOp {
  static constexpr float kInit = 0.0f;
  static float Map(float v) { return v; }
  static float Combine(float a, float b) { return a + b; }
};
struct SquareOp : SumOp {
  static float Map(float v) { return v * v; }
};
struct AbsOp : SumOp {
  static float Map(float v) { return std::fabs(v); }
};
// Max / Min: a row runs the plain compare (it vectorizes) beside a check that sums x * 0, which
// is NaN exactly when the row holds a NaN or an infinity; such rows are redone with Combine.
struct MaxOp {
  static constexpr float kInit = -std::numeric_limits<float>::infinity();
  static constexpr bool kChecked = true;
  static float Map(float v) { return v; }
  static float Combine(float a, float b) { return (b > a || b != b) ? b : a; }
  static float Fast(float a, float b) { return b > a ? b : a; }
};
struct MinOp : MaxOp {
  static constexpr float kInit = std::numeric_limits<float>::infinity();
  static float Combine(float a, float b) { return (b < a || b != b) ? b : a; }
  static float Fast(float a, float b) { return b < a ? b : a; }
};

template <class Op, bool kFast>
KILN_AI float ReduceLanes(const float* x, int64_t n, float* check) {
  constexpr int kLanes = 32;  // two AVX-512 vectors: two dependency chains per accumulator
  float part[kLanes], chk[kLanes] = {};
  for (int l = 0; l < kLanes; ++l) part[l] = Op::kInit;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      if constexpr (kFast) {
        part[l] = Op::Fast(part[l], x[j + l]);
        chk[l] += x[j + l] * 0.0f;
      } else {
        part[l] = Op::Combine(part[l], Op::Map(x[j + l]));
      }
    }
  for (; j < n; ++j) {
    part[0] = Op::Combine(part[0], Op::Map(x[j]));
    chk[0] += x[j] * 0.0f;
  }
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) {
      part[l] = Op::Combine(part[l], part[l + w]);
      chk[l] += chk[l + w];
    }
  *check = chk[0];
  return part[0];
}

template <class Op>
KILN_AI float ReduceRow(const float* x, int64_t n) {
  float check = 0;
  if constexpr (requires { Op::kChecked; }) {
    const float v = ReduceLanes<Op, true>(x, n, &check);
    if (check == check) return v;
  }
  return ReduceLanes<Op, false>(x, n, &check);
}

// Outer row o of x [outer, r, inner] reduced over r: y's columns [i0, i1) of that row.
template <class Op>
KILN_AI void ReduceBlock(const float* x, int64_t r, int64_t inner, int64_t o, int64_t i0,
                         int64_t i1, float* y) {
  if (inner == 1) {
    y[o] = ReduceRow<Op>(x + o * r, r);
    return;
  }
  float* acc = y + o * inner;
  const float* xo = x + o * r * inner;
  for (int64_t i = i0; i < i1; ++i) acc[i] = Op::Map(xo[i]);
  for (int64_t j = 1; j < r; ++j) {
    const float* row = xo + j * inner;
    for (int64_t i = i0; i < i1; ++i) acc[i] = Op::Combine(acc[i], Op::Map(row[i]));
  }
}

KILN_AI void ReduceBlockF32(ReduceKind kind, const float* x, int64_t r, int64_t inner, int64_t o,
                            int64_t i0, int64_t i1, float* y) {
  switch (kind) {
    case ReduceKind::kMax:
      return ReduceBlock<MaxOp>(x, r, inner, o, i0, i1, y);
    case ReduceKind::kMin:
      return ReduceBlock<MinOp>(x, r, inner, o, i0, i1, y);
    case ReduceKind::kSumSquare:
    case ReduceKind::kL2:
      return ReduceBlock<SquareOp>(x, r, inner, o, i0, i1, y);
    case ReduceKind::kL1:
      return ReduceBlock<AbsOp>(x, r, inner, o, i0, i1, y);
    default:
      return ReduceBlock<SumOp>(x, r, inner, o, i0, i1, y);
  }
}

#define KILN_REDUCE_F32(name, target_attr)                                                    \
  target_attr void name(ReduceKind kind, const float* x, int64_t r, int64_t inner, int64_t o, \
                        int64_t i0, int64_t i1, float* y) {                                   \
    ReduceBlockF32(kind, x, r, inner, o, i0, i1, y);                                          \
  }
KILN_REDUCE_F32(ReduceF32Base, )
#if KILN_X86_DISPATCH
KILN_REDUCE_F32(ReduceF32Avx2, __attribute__((target("avx2,fma"))))
KILN_REDUCE_F32(ReduceF32Avx512, __attribute__((target("avx512f,fma"))))
#endif
#undef KILN_REDUCE_F32

// The float32 path where the reduced axes form one block (else false: the reference runs).
bool ReduceF32(ReduceKind kind, const Tensor& x, const ReducePlan& p, Tensor& y, int threads) {
  static const std::set<ReduceKind> kKinds = {
      ReduceKind::kSum,       ReduceKind::kMean, ReduceKind::kMax, ReduceKind::kMin,
      ReduceKind::kSumSquare, ReduceKind::kL1,   ReduceKind::kL2};
  const bool lse = kind == ReduceKind::kLogSumExp;
  if (x.dtype() != DType::kFloat32 || !(kKinds.count(kind) || lse) || x.size() == 0) return false;
  int64_t outer = 1, r = 1, inner = 1;
  if (!SplitReduced(x.dims(), p.reduced, &outer, &r, &inner) || (lse && inner != 1)) return false;
#if KILN_X86_DISPATCH
  auto run = BestIsa() == Isa::kAvx512 ? ReduceF32Avx512
             : BestIsa() == Isa::kAvx2 ? ReduceF32Avx2
                                       : ReduceF32Base;
#else
  auto run = ReduceF32Base;
#endif
  const float* xs = x.data<float>();
  float* ys = y.data<float>();
  if (lse) {  // per row: its maximum m (0 when not finite), then m + log(sum exp(x - m))
    ParallelRows(threads, outer, std::max<int64_t>(1, (int64_t{1} << 13) / r),
                 [&](int64_t o0, int64_t o1) {
                   std::vector<float> e(r);
                   for (int64_t o = o0; o < o1; ++o) {
                     float m = 0;
                     run(ReduceKind::kMax, xs + o * r, r, 1, 0, 0, 1, &m);
                     const float shift = std::isfinite(m) ? m : 0.0f;
                     for (int64_t j = 0; j < r; ++j) e[j] = xs[o * r + j] - shift;
                     ExpF32(e.data(), e.data(), r);
                     double sum = 0;
                     for (float v : e) sum += v;
                     ys[o] = static_cast<float>(std::log(sum) + shift);
                   }
                 });
    return true;
  }
  // Work items: an outer row by a block of its output columns, so that a few rows (a batch of 8
  // reduced over its channels) still split over threads; each item finishes its own outputs.
  const int64_t cols = inner == 1 ? 1 : 1024, blocks = (inner + cols - 1) / cols;
  const int64_t items = outer * blocks;
  const int t = static_cast<int>(std::min<int64_t>({threads, items, x.size() / (1 << 15) + 1}));
  ParallelFor(t, items, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t o = w / blocks, i0 = w % blocks * cols, i1 = std::min(inner, i0 + cols);
      run(kind, xs, r, inner, o, i0, i1, ys);
      float* out = ys + o * inner;
      if (kind == ReduceKind::kMean)
        for (int64_t i = i0; i < i1; ++i) out[i] /= static_cast<float>(r);
      if (kind == ReduceKind::kL2)
        for (int64_t i = i0; i < i1; ++i) out[i] = std::sqrt(out[i]);
    }
  });
  return true;
}

unsigned ReduceTypes(ReduceKind k) {
  if (k == ReduceKind::kMax || k == ReduceKind::kMin) return kAllTypes;
  return kNumericTypes;
}

void RegisterReduce(OpRegistry& r, const char* name, ReduceKind kind) {
  auto infer = [kind](InferContext& ctx) -> Status {
    if (!ctx.has_input(0)) return ctx.error("missing input 'data'");
    DType dt = ctx.input_dtype(0);
    if (!TypeIn(dt, ReduceTypes(kind)))
      return ctx.error("unsupported input type " + std::string(DTypeName(dt)));
    const bool from_input = ctx.opset() >= AxesInputOpset(kind);
    std::vector<int64_t> axes;
    if (from_input) {
      if (ctx.has_input(1)) {
        if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("'axes' must be int64");
        bool known = false;
        axes = InputInts(ctx, 1, &known);
        if (!known) {
          ctx.set_output_dynamic(0, dt);
          return OkStatus();
        }
      } else {
        axes = ctx.node().attr_ints("axes");  // tolerated from exporters that keep the attribute
      }
    } else {
      axes = ctx.node().attr_ints("axes");
    }
    ReducePlan p;
    std::string err = MakeReducePlan(ctx.node(), from_input, ctx.input_dims(0), axes, &p);
    if (!err.empty()) return ctx.error(err);
    ctx.set_output(0, dt, p.out_dims);
    return OkStatus();
  };
  auto compute = [kind](ComputeContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    const bool from_input = ctx.opset() >= AxesInputOpset(kind);
    std::vector<int64_t> axes = from_input && ctx.has_input(1) ? ctx.input(1).ToInt64Vector()
                                                               : ctx.node().attr_ints("axes");
    ReducePlan p;
    std::string err = MakeReducePlan(ctx.node(), from_input, x.dims(), axes, &p);
    if (!err.empty()) return ctx.error(err);
    Tensor& y = ctx.output(0);
    if (!y.defined() || y.dtype() != x.dtype() || y.dims() != p.out_dims)
      ctx.allocate_output(0, x.dtype(), p.out_dims);
    if (p.noop) {
      if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      return OkStatus();
    }
    if (ReduceF32(kind, x, p, y, ctx.threads())) return OkStatus();
    bool ok = Dispatch<kAllTypes>(x.dtype(), [&]<class T>() { ReduceKernel<T>(kind, x, p, y); });
    if (!ok) return ctx.error("unsupported input type " + std::string(DTypeName(x.dtype())));
    return OkStatus();
  };
  r.Register(name, infer, compute);
}

// ---- ArgMax / ArgMin ----

Status ArgInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("missing input 'data'");
  DType dt = ctx.input_dtype(0);
  if (!TypeIn(dt, kNumericTypes))
    return ctx.error("unsupported input type " + std::string(DTypeName(dt)));
  const Dims& in = ctx.input_dims(0);
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormalizeAxis(axis, static_cast<int64_t>(in.size())))
    return ctx.error("axis " + std::to_string(ctx.node().attr_int("axis", 0)) +
                     " is out of range for rank " + std::to_string(in.size()));
  if (in[axis] == 0) return ctx.error("cannot take the arg of an empty axis");
  Dims out = in;
  if (ctx.node().attr_int("keepdims", 1))
    out[axis] = 1;
  else
    out.erase(out.begin() + axis);
  ctx.set_output(0, DType::kInt64, out);
  return OkStatus();
}

// Columns [i0, i1) of one outer block: the index of the best of n values inner apart. NaN wins,
// like numpy; among equals the first (or, kLast, the last) index wins. The test is one
// branch-free expression over columns, so that the loop vectorizes.
template <class T, bool kMax, bool kLast>
void ArgColumns(const T* base, int64_t n, int64_t inner, int64_t i0, int64_t i1, int64_t* out) {
  using A = Acc<T>;
  constexpr int64_t kChunk = 256;
  A best[kChunk];
  int32_t at[kChunk];
  for (int64_t c0 = i0; c0 < i1; c0 += kChunk) {
    const int64_t m = std::min(kChunk, i1 - c0);
    for (int64_t i = 0; i < m; ++i) {
      best[i] = static_cast<A>(base[c0 + i]);
      at[i] = 0;
    }
    for (int64_t j = 1; j < n; ++j) {
      const T* row = base + j * inner + c0;
      for (int64_t i = 0; i < m; ++i) {
        const A v = static_cast<A>(row[i]), b = best[i];
        const bool vn = v != v, bn = b != b;
        const bool cmp = kMax ? (kLast ? v >= b : v > b) : (kLast ? v <= b : v < b);
        const bool take = (vn & (kLast | !bn)) | (!vn & !bn & cmp);
        best[i] = take ? v : b;
        at[i] = take ? static_cast<int32_t>(j) : at[i];
      }
    }
    for (int64_t i = 0; i < m; ++i) out[c0 + i] = at[i];
  }
}

// Whether value v at a later index replaces b as the arg so far: a NaN wins (the last one with
// kLast), among equals the first (or, kLast, the last) index.
template <bool kMax, bool kLast, class V>
bool ArgTakes(V value, V best) {
  const auto v = static_cast<Acc<V>>(value), b = static_cast<Acc<V>>(best);
  const bool cmp = kMax ? (kLast ? v >= b : v > b) : (kLast ? v <= b : v < b);
  return (v != v && (kLast || b == b)) || (v == v && b == b && cmp);
}

// The arg of one contiguous row of n values (n < 2^31): the row read as 16 columns, whose
// winners ArgColumns finds in vector lanes, then those 16 candidates and the tail scanned in
// index order with the same rule (each lane's winner is the first, or kLast the last, of its
// lane, so the row's winner is among them).
template <class T, bool kMax, bool kLast>
int64_t ArgRow(const T* row, int64_t n) {
  constexpr int64_t kLanes = 16;
  const int64_t rows = n / kLanes;
  int64_t lane_at[kLanes];
  ArgColumns<T, kMax, kLast>(row, rows, kLanes, 0, kLanes, lane_at);
  int64_t candidates[kLanes];
  for (int64_t i = 0; i < kLanes; ++i) candidates[i] = lane_at[i] * kLanes + i;
  std::sort(candidates, candidates + kLanes);
  int64_t best = candidates[0];
  auto consider = [&](int64_t j) {
    if (ArgTakes<kMax, kLast>(row[j], row[best])) best = j;
  };
  for (int64_t i = 1; i < kLanes; ++i) consider(candidates[i]);
  for (int64_t j = rows * kLanes; j < n; ++j) consider(j);
  return best;
}

template <class T, bool kMax, bool kLast>
void ArgKernel(const Tensor& x, int64_t axis, int64_t* out, int threads) {
  const Dims& d = x.dims();
  int64_t outer = 1, inner = 1, n = d[axis];
  for (int64_t i = 0; i < axis; ++i) outer *= d[i];
  for (size_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
  const T* xd = x.data<T>();
  if (n > INT32_MAX) {  // int32 positions would overflow: one column at a time in int64
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j)
          if (ArgTakes<kMax, kLast>(xd[(o * n + j) * inner + i], xd[(o * n + best) * inner + i]))
            best = j;
        out[o * inner + i] = best;
      }
    return;
  }
  if (inner == 1 && n >= 256) {  // along contiguous rows: the row in vector lanes
    const int t = static_cast<int>(std::min<int64_t>(threads, x.size() / (1 << 15) + 1));
    ParallelFor(t, outer, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) out[o] = ArgRow<T, kMax, kLast>(xd + o * n, n);
    });
    return;
  }
  // Work items: (outer block, chunk of 256 columns).
  const int64_t chunks = (inner + 255) / 256, items = outer * chunks;
  const int t = static_cast<int>(std::min<int64_t>(threads, x.size() / (1 << 15) + 1));
  ParallelFor(t, items, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t o = w / chunks, i0 = w % chunks * 256;
      ArgColumns<T, kMax, kLast>(xd + o * n * inner, n, inner, i0, std::min(inner, i0 + 256),
                                 out + o * inner);
    }
  });
}

void RegisterArg(OpRegistry& r, const char* name, bool is_max) {
  r.Register(name, ArgInfer, [is_max](ComputeContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    int64_t axis = ctx.node().attr_int("axis", 0);
    if (!NormalizeAxis(axis, x.rank()) || x.dim(static_cast<int>(axis)) == 0)
      return ctx.error("bad axis");
    const bool last = ctx.opset() >= 12 && ctx.node().attr_int("select_last_index", 0) != 0;
    int64_t* out = ctx.output(0).data<int64_t>();
    bool ok = Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
      if (is_max)
        last ? ArgKernel<T, true, true>(x, axis, out, ctx.threads())
             : ArgKernel<T, true, false>(x, axis, out, ctx.threads());
      else
        last ? ArgKernel<T, false, true>(x, axis, out, ctx.threads())
             : ArgKernel<T, false, false>(x, axis, out, ctx.threads());
    });
    if (!ok) return ctx.error("unsupported input type " + std::string(DTypeName(x.dtype())));
    return OkStatus();
  });
}

// ---- CumSum / CumProd ----

Status ScanInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs 'x' and 'axis'");
  DType dt = ctx.input_dtype(0);
  if (!TypeIn(dt, kNumericTypes))
    return ctx.error("unsupported input type " + std::string(DTypeName(dt)));
  DType at = ctx.input_dtype(1);
  if (at != DType::kInt32 && at != DType::kInt64) return ctx.error("'axis' must be int32 or int64");
  if (NumElements(ctx.input_dims(1)) != 1 || ctx.input_rank(1) > 1)
    return ctx.error("'axis' must be a scalar");
  if (const Tensor* a = ctx.input_value(1)) {
    int64_t axis = a->GetInt(0);
    if (!NormalizeAxis(axis, ctx.input_rank(0)))
      return ctx.error("axis " + std::to_string(a->GetInt(0)) + " is out of range for rank " +
                       std::to_string(ctx.input_rank(0)));
  }
  return SameAsInput(ctx);
}

template <class T>
void ScanKernel(bool prod, bool exclusive, bool reverse, const Tensor& x, int64_t axis, T* out) {
  const Dims& d = x.dims();
  int64_t outer = 1, inner = 1, n = d[axis];
  for (int64_t i = 0; i < axis; ++i) outer *= d[i];
  for (size_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
  const T* xd = x.data<T>();
  using A = Acc<T>;
  using W = std::conditional_t<std::is_integral_v<A>, uint64_t, A>;  // integers wrap
  std::vector<A> run(inner);
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(run.begin(), run.end(), prod ? A(1) : A(0));
    for (int64_t s = 0; s < n; ++s) {
      int64_t j = reverse ? n - 1 - s : s;
      const T* src = xd + (o * n + j) * inner;
      T* dst = out + (o * n + j) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        A v = static_cast<A>(src[i]);
        if (exclusive) dst[i] = T(run[i]);
        run[i] = prod ? A(W(run[i]) * W(v)) : A(W(run[i]) + W(v));
        if (!exclusive) dst[i] = T(run[i]);
      }
    }
  }
}

void RegisterScan(OpRegistry& r, const char* name, bool prod) {
  r.Register(name, ScanInfer, [prod](ComputeContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    const Tensor& at = ctx.input(1);
    if (at.size() != 1) return ctx.error("'axis' must be a scalar");
    int64_t axis = at.GetInt(0);
    if (!NormalizeAxis(axis, x.rank()))
      return ctx.error("axis " + std::to_string(at.GetInt(0)) + " is out of range for rank " +
                       std::to_string(x.rank()));
    const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
    const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
    Tensor& y = ctx.output(0);
    bool ok = Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
      ScanKernel<T>(prod, exclusive, reverse, x, axis, y.data<T>());
    });
    if (!ok) return ctx.error("unsupported input type " + std::string(DTypeName(x.dtype())));
    return OkStatus();
  });
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  RegisterReduce(r, "ReduceSum", ReduceKind::kSum);
  RegisterReduce(r, "ReduceMean", ReduceKind::kMean);
  RegisterReduce(r, "ReduceMax", ReduceKind::kMax);
  RegisterReduce(r, "ReduceMin", ReduceKind::kMin);
  RegisterReduce(r, "ReduceProd", ReduceKind::kProd);
  RegisterReduce(r, "ReduceSumSquare", ReduceKind::kSumSquare);
  RegisterReduce(r, "ReduceL1", ReduceKind::kL1);
  RegisterReduce(r, "ReduceL2", ReduceKind::kL2);
  RegisterReduce(r, "ReduceLogSum", ReduceKind::kLogSum);
  RegisterReduce(r, "ReduceLogSumExp", ReduceKind::kLogSumExp);
  RegisterArg(r, "ArgMax", true);
  RegisterArg(r, "ArgMin", false);
  RegisterScan(r, "CumSum", false);
  RegisterScan(r, "CumProd", true);
  RegisterReduceLossOps(r);
}

}  // namespace kiln::ops
