// Indexing ops: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
// TensorScatter, OneHot, NonZero, Compress, ReverseSequence, Unique.
// Every index is checked before use: a bad index is an error naming the node, never a wild read.
#include <algorithm>
#include <atomic>
#include <numeric>

#include "kernels/x86/thread_pool.h"
#include "ops/common.h"
#include "ops/shape_ops_util.h"

namespace kiln::ops {
namespace {

using moves::IndexAt;
using moves::Str;
using moves::WrapIndex;

Status CheckMovable(const InferContext& ctx, DType t) {
  if (DTypeSize(t) == 0) return ctx.error("unsupported dtype " + std::string(DTypeName(t)));
  return OkStatus();
}

Status CheckIndices(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return ctx.error("missing indices input");
  if (!moves::IsIndexDType(ctx.input_dtype(i))) return ctx.error("indices must be int32 or int64");
  return OkStatus();
}

int64_t Prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) p *= d[i];
  return p;
}

// ---- Gather ---------------------------------------------------------------------------------

Status InferGather(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  KILN_RETURN_IF_ERROR(CheckIndices(ctx, 1));
  const Dims& d = ctx.input_dims(0);
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormalizeAxis(axis, static_cast<int64_t>(d.size())))
    return ctx.error("axis " + Str(axis) + " out of range");
  Dims out(d.begin(), d.begin() + axis);
  for (int64_t v : ctx.input_dims(1)) out.push_back(v);
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeGather(ComputeContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  int64_t axis = ctx.node().attr_int("axis", 0);
  NormalizeAxis(axis, data.rank());
  const Dims& d = data.dims();
  int64_t outer = Prod(d, 0, axis), dim = d[axis], inner = Prod(d, axis + 1, d.size());
  int64_t n = ind.size();
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) {
    idx[i] = IndexAt(ind, i);
    if (!WrapIndex(idx[i], dim))
      return ctx.error("index " + Str(IndexAt(ind, i)) + " out of range for axis of size " +
                       Str(dim));
  }
  size_t block = static_cast<size_t>(inner) * DTypeSize(data.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(data.raw());
  uint8_t* dst = static_cast<uint8_t*>(ctx.output(0).raw());
  if (block == 0) return OkStatus();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i, dst += block)
      std::memcpy(dst, src + (o * dim + idx[i]) * block, block);
  return OkStatus();
}

// ---- GatherElements -------------------------------------------------------------------------

Status InferGatherElements(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  KILN_RETURN_IF_ERROR(CheckIndices(ctx, 1));
  const Dims& d = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  int64_t rank = static_cast<int64_t>(d.size());
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormalizeAxis(axis, rank)) return ctx.error("axis " + Str(axis) + " out of range");
  if (static_cast<int64_t>(id.size()) != rank) return ctx.error("indices rank differs from data");
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && id[k] > d[k])
      return ctx.error("indices shape " + DimsToString(id) + " exceeds data " + DimsToString(d));
  ctx.set_output(0, dt, id);
  return OkStatus();
}

// Rows of the indices' last axis: out[r, j] = src[base(r) + j * step + v * axis_stride] with v
// the index at (r, j) (negative ones counted from the end). Rows go over threads; an index out
// of range sets `bad` and the row stops.
template <class U, class I>
void GatherElementRows(const U* src, const I* ind, U* dst, const Dims& id, const Dims& ds,
                       int64_t axis, int64_t dim, int threads, std::atomic<bool>* bad) {
  const int rank = static_cast<int>(id.size());
  const int64_t len = id[rank - 1], rows = NumElements(id) / std::max<int64_t>(len, 1);
  const int64_t step = axis == rank - 1 ? 0 : ds[rank - 1], axis_stride = ds[axis];
  const int t = static_cast<int>(std::min<int64_t>(threads, rows * len / (1 << 15) + 1));
  ParallelFor(t, rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t base = 0;  // the row's offset in src, with its axis coordinate zeroed
      int64_t q = r;
      for (int k = rank - 2; k >= 0; --k) {
        if (k != axis) base += (q % id[k]) * ds[k];
        q /= id[k];
      }
      const I* ir = ind + r * len;
      U* out = dst + r * len;
      bool ok = true;
      for (int64_t j = 0; j < len; ++j) {
        int64_t v = static_cast<int64_t>(ir[j]);
        v += v < 0 ? dim : 0;
        ok &= v >= 0 && v < dim;
        out[j] = ok ? src[base + j * step + v * axis_stride] : U{};
      }
      if (!ok) bad->store(true);
    }
  });
}

Status ComputeGatherElements(ComputeContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int rank = data.rank();
  int64_t axis = ctx.node().attr_int("axis", 0);
  NormalizeAxis(axis, rank);
  const int64_t n = ind.size(), dim = data.dim(static_cast<int>(axis));
  if (n == 0) return OkStatus();
  std::atomic<bool> bad{false};
  const bool i64 = ind.dtype() == DType::kInt64;
  moves::BySize(DTypeSize(data.dtype()), [&]<class U>() {
    U* dst = ctx.output(0).data<U>();
    if (i64)
      GatherElementRows(data.data<U>(), ind.data<int64_t>(), dst, ind.dims(), Strides(data.dims()),
                        axis, dim, ctx.threads(), &bad);
    else
      GatherElementRows(data.data<U>(), ind.data<int32_t>(), dst, ind.dims(), Strides(data.dims()),
                        axis, dim, ctx.threads(), &bad);
  });
  if (!bad.load()) return OkStatus();
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = IndexAt(ind, i);
    if (!WrapIndex(v, dim))
      return ctx.error("index " + Str(IndexAt(ind, i)) + " out of range for axis of size " +
                       Str(dim));
  }
  return OkStatus();
}

// ---- GatherND -------------------------------------------------------------------------------

Status InferGatherND(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  if (!ctx.has_input(1) || ctx.input_dtype(1) != DType::kInt64)
    return ctx.error("indices must be int64");
  const Dims& d = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  int64_t r = static_cast<int64_t>(d.size()), q = static_cast<int64_t>(id.size());
  int64_t b = ctx.node().attr_int("batch_dims", 0);
  if (r < 1 || q < 1) return ctx.error("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) return ctx.error("batch_dims " + Str(b) + " out of range");
  for (int64_t k = 0; k < b; ++k)
    if (d[k] != id[k]) return ctx.error("batch dims of data and indices differ");
  int64_t m = id[q - 1];
  if (m < 1 || m > r - b) return ctx.error("indices last dim " + Str(m) + " out of range");
  Dims out(id.begin(), id.end() - 1);
  out.insert(out.end(), d.begin() + b + m, d.end());
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeGatherND(ComputeContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Dims& d = data.dims();
  const Dims& id = ind.dims();
  const size_t b = static_cast<size_t>(ctx.node().attr_int("batch_dims", 0));
  const size_t m = static_cast<size_t>(id.back());
  const int64_t batches = Prod(d, 0, b);
  const int64_t tuples = Prod(id, b, id.size() - 1);
  const int64_t block = Prod(d, b + m, d.size());
  const int64_t batch_stride = Prod(d, b, d.size());
  const size_t bytes = static_cast<size_t>(block) * DTypeSize(data.dtype());
  Dims ds = Strides(d);
  const int64_t* ip = ind.data<int64_t>();
  const uint8_t* src = static_cast<const uint8_t*>(data.raw());
  uint8_t* dst = static_cast<uint8_t*>(ctx.output(0).raw());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t t = 0; t < tuples; ++t, ip += m, dst += bytes) {
      int64_t off = bi * batch_stride;
      for (size_t k = 0; k < m; ++k) {
        int64_t v = ip[k];
        if (!WrapIndex(v, d[b + k]))
          return ctx.error("index " + Str(ip[k]) + " out of range for axis of size " +
                           Str(d[b + k]));
        off += v * ds[b + k];
      }
      if (bytes) std::memcpy(dst, src + off * DTypeSize(data.dtype()), bytes);
    }
  }
  return OkStatus();
}

// ---- Scatter family -------------------------------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Status ParseReduction(const InferContext& ctx, Reduction* r) {
  std::string s = ctx.node().attr_string("reduction", "none");
  if (s == "none")
    *r = Reduction::kNone;
  else if (s == "add")
    *r = Reduction::kAdd;
  else if (s == "mul")
    *r = Reduction::kMul;
  else if (s == "max")
    *r = Reduction::kMax;
  else if (s == "min")
    *r = Reduction::kMin;
  else
    return ctx.error("unknown reduction '" + s + "'");
  return OkStatus();
}

Reduction GetReduction(const ir::Node& n) {
  std::string s = n.attr_string("reduction", "none");
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return Reduction::kNone;
}

template <class T>
inline void Apply(T& dst, T v, Reduction r) {
  using A = Acc<T>;
  switch (r) {
    case Reduction::kNone:
      dst = v;
      break;
    case Reduction::kAdd:
      dst = static_cast<T>(static_cast<A>(dst) + static_cast<A>(v));
      break;
    case Reduction::kMul:
      dst = static_cast<T>(static_cast<A>(dst) * static_cast<A>(v));
      break;
    case Reduction::kMax:
      dst = static_cast<A>(v) > static_cast<A>(dst) ? v : dst;
      break;
    case Reduction::kMin:
      dst = static_cast<A>(v) < static_cast<A>(dst) ? v : dst;
      break;
  }
}

Status InferScatterElements(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  KILN_RETURN_IF_ERROR(CheckIndices(ctx, 1));
  Reduction red;
  KILN_RETURN_IF_ERROR(ParseReduction(ctx, &red));
  if (!ctx.has_input(2) || ctx.input_dtype(2) != dt)
    return ctx.error("updates must match data dtype");
  const Dims& d = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  int64_t rank = static_cast<int64_t>(d.size());
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormalizeAxis(axis, rank)) return ctx.error("axis " + Str(axis) + " out of range");
  if (id != ctx.input_dims(2)) return ctx.error("indices and updates differ in shape");
  if (static_cast<int64_t>(id.size()) != rank) return ctx.error("indices rank differs from data");
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && id[k] > d[k])
      return ctx.error("indices shape " + DimsToString(id) + " exceeds data " + DimsToString(d));
  return SameAsInput(ctx);
}

Status ComputeScatterElements(ComputeContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  Tensor& out = ctx.output(0);
  if (data.nbytes()) std::memcpy(out.raw(), data.raw(), data.nbytes());
  const int rank = data.rank();
  int64_t axis = ctx.node().attr_int("axis", 0);
  NormalizeAxis(axis, rank);
  Reduction red = GetReduction(ctx.node());
  Dims ds = Strides(data.dims());
  const Dims& id = ind.dims();
  const int64_t n = ind.size(), dim = data.dim(static_cast<int>(axis));
  Status st = OkStatus();
  Dispatch<kAllTypes>(data.dtype(), [&]<class T>() {
    const T* u = upd.data<T>();
    T* o = out.data<T>();
    std::vector<int64_t> idx(rank, 0);
    int64_t base = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = IndexAt(ind, i);
      if (!WrapIndex(v, dim)) {
        st = ctx.error("index " + Str(IndexAt(ind, i)) + " out of range for axis of size " +
                       Str(dim));
        return;
      }
      Apply(o[base + v * ds[axis]], u[i], red);
      for (int k = rank - 1; k >= 0; --k) {
        if (k != axis) base += ds[k];
        if (++idx[k] < id[k]) break;
        if (k != axis) base -= ds[k] * id[k];
        idx[k] = 0;
      }
    }
  });
  return st;
}

Status InferScatterND(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  Reduction red;
  KILN_RETURN_IF_ERROR(ParseReduction(ctx, &red));
  if (!ctx.has_input(1) || ctx.input_dtype(1) != DType::kInt64)
    return ctx.error("indices must be int64");
  if (!ctx.has_input(2) || ctx.input_dtype(2) != dt)
    return ctx.error("updates must match data dtype");
  const Dims& d = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  if (id.empty()) return ctx.error("indices must have rank >= 1");
  int64_t k = id.back();
  if (k < 0 || k > static_cast<int64_t>(d.size()))
    return ctx.error("indices last dim " + Str(k) + " exceeds data rank");
  Dims expect(id.begin(), id.end() - 1);
  expect.insert(expect.end(), d.begin() + k, d.end());
  if (ctx.input_dims(2) != expect)
    return ctx.error("updates shape " + DimsToString(ctx.input_dims(2)) + ", expected " +
                     DimsToString(expect));
  return SameAsInput(ctx);
}

Status ComputeScatterND(ComputeContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  Tensor& out = ctx.output(0);
  if (data.nbytes()) std::memcpy(out.raw(), data.raw(), data.nbytes());
  const Dims& d = data.dims();
  const size_t k = static_cast<size_t>(ind.dims().back());
  const int64_t tuples = Prod(ind.dims(), 0, ind.rank() - 1);
  const int64_t block = Prod(d, k, d.size());
  Dims ds = Strides(d);
  Reduction red = GetReduction(ctx.node());
  const int64_t* ip = ind.data<int64_t>();
  Status st = OkStatus();
  Dispatch<kAllTypes>(data.dtype(), [&]<class T>() {
    const T* u = upd.data<T>();
    T* o = out.data<T>();
    for (int64_t t = 0; t < tuples; ++t, u += block) {
      int64_t off = 0;
      for (size_t j = 0; j < k; ++j) {
        int64_t v = ip[t * k + j];
        if (!WrapIndex(v, d[j])) {
          st = ctx.error("index " + Str(ip[t * k + j]) + " out of range for axis of size " +
                         Str(d[j]));
          return;
        }
        off += v * ds[j];
      }
      if (red == Reduction::kNone) {
        std::copy(u, u + block, o + off);
      } else {
        for (int64_t e = 0; e < block; ++e) Apply(o[off + e], u[e], red);
      }
    }
  });
  return st;
}

// TensorScatter (opset 24): writes `update` into a KV cache along `axis`, per batch entry at
// write_indices[b] (wrapping around in circular mode).
Status InferTensorScatter(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  if (!ctx.has_input(1) || ctx.input_dtype(1) != dt)
    return ctx.error("update must match past_cache dtype");
  const Dims& d = ctx.input_dims(0);
  const Dims& u = ctx.input_dims(1);
  int64_t rank = static_cast<int64_t>(d.size());
  int64_t axis = ctx.node().attr_int("axis", -2);
  if (!NormalizeAxis(axis, rank) || axis == 0) return ctx.error("axis out of range");
  std::string mode = ctx.node().attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") return ctx.error("unknown mode '" + mode + "'");
  if (static_cast<int64_t>(u.size()) != rank)
    return ctx.error("update rank differs from past_cache");
  for (int64_t k = 0; k < rank; ++k)
    if (k == axis ? u[k] > d[k] : u[k] != d[k])
      return ctx.error("update shape " + DimsToString(u) + " does not fit " + DimsToString(d));
  if (ctx.has_input(2)) {
    if (!moves::IsIndexDType(ctx.input_dtype(2)))
      return ctx.error("write_indices must be integers");
    if (NumElements(ctx.input_dims(2)) != d[0])
      return ctx.error("write_indices needs one entry per batch");
  }
  return SameAsInput(ctx);
}

Status ComputeTensorScatter(ComputeContext& ctx) {
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  Tensor& out = ctx.output(0);
  if (past.nbytes()) std::memcpy(out.raw(), past.raw(), past.nbytes());
  int64_t axis = ctx.node().attr_int("axis", -2);
  NormalizeAxis(axis, past.rank());
  bool circular = ctx.node().attr_string("mode", "linear") == "circular";
  const Dims& d = past.dims();
  const int64_t batch = d[0], max_len = d[axis], len = upd.dim(static_cast<int>(axis));
  const int64_t mid = Prod(d, 1, axis);
  const size_t inner = static_cast<size_t>(Prod(d, axis + 1, d.size())) * DTypeSize(past.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(upd.raw());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t start = ctx.has_input(2) ? IndexAt(ctx.input(2), b) : 0;
    if (start < 0 || (!circular && start + len > max_len) ||
        (circular && start >= max_len && max_len > 0))
      return ctx.error("write index " + Str(start) + " out of range for length " + Str(max_len));
    for (int64_t m = 0; m < mid; ++m) {
      for (int64_t j = 0; j < len; ++j) {
        int64_t pos = circular ? (start + j) % max_len : start + j;
        std::memcpy(dst + ((b * mid + m) * max_len + pos) * inner,
                    src + ((b * mid + m) * len + j) * inner, inner);
      }
    }
  }
  return OkStatus();
}

// ---- OneHot ---------------------------------------------------------------------------------

Status InferOneHot(InferContext& ctx) {
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("needs indices, depth and values");
  DType dt = ctx.input_dtype(2);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  if (NumElements(ctx.input_dims(2)) != 2) return ctx.error("values must have two elements");
  if (NumElements(ctx.input_dims(1)) != 1) return ctx.error("depth must be a scalar");
  if (!IsSupportedDType(ctx.input_dtype(0)) || ctx.input_dtype(0) == DType::kBool)
    return ctx.error("indices must be numeric");
  const Dims& id = ctx.input_dims(0);
  int64_t rank = static_cast<int64_t>(id.size()) + 1;
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (!NormalizeAxis(axis, rank)) return ctx.error("axis " + Str(axis) + " out of range");
  const Tensor* dv = ctx.input_value(1);
  if (!dv) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  double depth = dv->GetDouble(0);
  if (!(depth >= 1) || depth > 1e9) return ctx.error("depth must be positive");
  Dims out = id;
  out.insert(out.begin() + axis, static_cast<int64_t>(depth));
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeOneHot(ComputeContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const Tensor& vals = ctx.input(2);
  Tensor& out = ctx.output(0);
  const int64_t depth = static_cast<int64_t>(ctx.input(1).GetDouble(0));
  int64_t axis = ctx.node().attr_int("axis", -1);
  NormalizeAxis(axis, ind.rank() + 1);
  const int64_t post = Prod(ind.dims(), axis, ind.rank());
  const size_t es = DTypeSize(vals.dtype());
  const uint8_t* off = static_cast<const uint8_t*>(vals.raw());
  const uint8_t* on = off + es;
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t i = 0; i < out.size(); ++i) std::memcpy(dst + i * es, off, es);
  const bool is_float = IsFloatingDType(ind.dtype());
  for (int64_t i = 0; i < ind.size(); ++i) {
    int64_t v = is_float ? static_cast<int64_t>(ind.GetDouble(i)) : ind.GetInt(i);
    if (v < 0) v += depth;
    if (v < 0 || v >= depth) continue;  // out of range: all "off", as the spec says
    int64_t pre = i / post, p = i % post;
    std::memcpy(dst + ((pre * depth + v) * post + p) * es, on, es);
  }
  return OkStatus();
}

// ---- NonZero, Compress ----------------------------------------------------------------------

Status InferNonZero(InferContext& ctx) {
  if (!IsSupportedDType(ctx.input_dtype(0))) return ctx.error("unsupported dtype");
  ctx.set_output_dynamic(0, DType::kInt64);
  return OkStatus();
}

Status ComputeNonZero(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  bool ok = Dispatch<kAllTypes>(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.size(); ++i)
      if (static_cast<Acc<T>>(p[i]) != Acc<T>{}) hits.push_back(i);
  });
  if (!ok) return ctx.error("unsupported dtype");
  const int rank = std::max(1, x.rank());  // a scalar reads as 1-D, like numpy
  const int64_t n = static_cast<int64_t>(hits.size());
  Tensor& out = ctx.allocate_output(0, DType::kInt64, {rank, n});
  int64_t* o = out.data<int64_t>();
  Dims d = x.rank() == 0 ? Dims{1} : x.dims();
  Dims s = Strides(d);
  for (int64_t j = 0; j < n; ++j)
    for (int k = 0; k < rank; ++k) o[k * n + j] = (hits[j] / s[k]) % d[k];
  return OkStatus();
}

// Selected positions along the compressed axis (or of the flattened input).
Status CompressSelection(const Tensor& cond, int64_t dim, std::vector<int64_t>* sel) {
  sel->clear();
  for (int64_t i = 0; i < cond.size(); ++i) {
    if (cond.GetInt(i) == 0) continue;
    if (i >= dim) return Error("condition selects index " + Str(i) + " beyond size " + Str(dim));
    sel->push_back(i);
  }
  return OkStatus();
}

Status InferCompress(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  if (!ctx.has_input(1) || ctx.input_rank(1) != 1) return ctx.error("condition must be 1-D");
  const Dims& d = ctx.input_dims(0);
  const ir::Attribute* a = ctx.node().attr("axis");
  int64_t axis = a ? a->i : 0;
  if (a && !NormalizeAxis(axis, static_cast<int64_t>(d.size())))
    return ctx.error("axis " + Str(axis) + " out of range");
  const Tensor* c = ctx.input_value(1);
  if (!c) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  std::vector<int64_t> sel;
  Status st = CompressSelection(*c, a ? d[axis] : NumElements(d), &sel);
  if (!st.ok()) return ctx.error(st.message());
  Dims out = a ? d : Dims{};
  if (a)
    out[axis] = static_cast<int64_t>(sel.size());
  else
    out.push_back(static_cast<int64_t>(sel.size()));
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeCompress(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::Attribute* a = ctx.node().attr("axis");
  int64_t axis = a ? a->i : 0;
  Dims d = a ? x.dims() : Dims{x.size()};
  if (a) NormalizeAxis(axis, x.rank());
  std::vector<int64_t> sel;
  Status st = CompressSelection(ctx.input(1), d[axis], &sel);
  if (!st.ok()) return ctx.error(st.message());
  Dims od = d;
  od[axis] = static_cast<int64_t>(sel.size());
  Tensor& out = ctx.output(0);
  if (!out.defined() || out.dims() != od) ctx.allocate_output(0, x.dtype(), od);
  const int64_t outer = Prod(d, 0, axis), dim = d[axis];
  const size_t block = static_cast<size_t>(Prod(d, axis + 1, d.size())) * DTypeSize(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(ctx.output(0).raw());
  if (block == 0) return OkStatus();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s : sel) {
      std::memcpy(dst, src + (o * dim + s) * block, block);
      dst += block;
    }
  return OkStatus();
}

// ---- ReverseSequence ------------------------------------------------------------------------

Status InferReverseSequence(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, ctx.input_dtype(0)));
  const Dims& d = ctx.input_dims(0);
  if (d.size() < 2) return ctx.error("input must have rank >= 2");
  int64_t ba = ctx.node().attr_int("batch_axis", 1), ta = ctx.node().attr_int("time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return ctx.error("batch_axis and time_axis must be 0 and 1 in some order");
  if (!ctx.has_input(1) || ctx.input_dtype(1) != DType::kInt64 || ctx.input_rank(1) != 1 ||
      ctx.input_dims(1)[0] != d[ba])
    return ctx.error("sequence_lens must be int64 with one entry per batch");
  return SameAsInput(ctx);
}

Status ComputeReverseSequence(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  Tensor& out = ctx.output(0);
  if (x.nbytes()) std::memcpy(out.raw(), x.raw(), x.nbytes());
  int ba = static_cast<int>(ctx.node().attr_int("batch_axis", 1));
  int ta = 1 - ba;
  Dims s = Strides(x.dims());
  const int64_t batch = x.dim(ba), steps = x.dim(ta);
  const size_t es = DTypeSize(x.dtype());
  const size_t block = static_cast<size_t>(Prod(x.dims(), 2, x.rank())) * es;
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = lens.data<int64_t>()[b];
    if (len < 0 || len > steps)
      return ctx.error("sequence length " + Str(len) + " out of range [0, " + Str(steps) + "]");
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(dst + (b * s[ba] + t * s[ta]) * es,
                  src + (b * s[ba] + (len - 1 - t) * s[ta]) * es, block);
  }
  return OkStatus();
}

// ---- Unique ---------------------------------------------------------------------------------

Status InferUnique(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (!IsSupportedDType(dt)) return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  if (const ir::Attribute* a = ctx.node().attr("axis")) {
    int64_t axis = a->i;
    if (!NormalizeAxis(axis, ctx.input_rank(0))) return ctx.error("axis out of range");
  }
  ctx.set_output_dynamic(0, dt);
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output_dynamic(i, DType::kInt64);
  return OkStatus();
}

Status ComputeUnique(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::Attribute* a = ctx.node().attr("axis");
  const bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  int64_t axis = a ? a->i : 0;
  Dims d = a ? x.dims() : Dims{x.size()};
  if (a) NormalizeAxis(axis, x.rank());
  // Slices along the axis are the items: outer x (one position) x inner elements each.
  const int64_t outer = Prod(d, 0, axis), n = d[axis], inner = Prod(d, axis + 1, d.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> group(n);  // item -> unique id (in first-occurrence order for now)
  std::vector<int64_t> firsts;    // unique id -> first item
  bool ok = Dispatch<kAllTypes>(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    // -1 / 0 / 1 lexicographic comparison of items i and j.
    auto cmp = [&](int64_t i, int64_t j) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < inner; ++e) {
          Acc<T> u = static_cast<Acc<T>>(p[(o * n + i) * inner + e]);
          Acc<T> v = static_cast<Acc<T>>(p[(o * n + j) * inner + e]);
          if (u < v) return -1;
          if (v < u) return 1;
        }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return cmp(i, j) < 0; });
    // Equal items are adjacent and, by stability, in original order.
    std::vector<int64_t> sorted_first;
    for (int64_t k = 0; k < n; ++k) {
      if (k == 0 || cmp(order[k - 1], order[k]) != 0) sorted_first.push_back(order[k]);
      group[order[k]] = static_cast<int64_t>(sorted_first.size()) - 1;
    }
    if (sorted) {
      firsts = sorted_first;
    } else {
      // Renumber groups by first occurrence.
      std::vector<int64_t> rank(sorted_first.size());
      std::vector<int64_t> by_first(sorted_first.size());
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(),
                [&](int64_t g, int64_t h) { return sorted_first[g] < sorted_first[h]; });
      for (size_t r = 0; r < by_first.size(); ++r) rank[by_first[r]] = static_cast<int64_t>(r);
      for (int64_t& g : group) g = rank[g];
      firsts.resize(sorted_first.size());
      for (size_t g = 0; g < sorted_first.size(); ++g) firsts[rank[g]] = sorted_first[g];
    }
  });
  if (!ok) return ctx.error("unsupported dtype");
  const int64_t u = static_cast<int64_t>(firsts.size());
  Dims yd = a ? x.dims() : Dims{u};
  if (a) yd[axis] = u;
  Tensor& y = ctx.allocate_output(0, x.dtype(), yd);
  const size_t es = DTypeSize(x.dtype());
  const size_t block = static_cast<size_t>(inner) * es;
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < u; ++g)
      if (block) std::memcpy(dst + (o * u + g) * block, src + (o * n + firsts[g]) * block, block);
  if (ctx.num_outputs() > 1) {
    int64_t* p = ctx.allocate_output(1, DType::kInt64, {u}).data<int64_t>();
    for (int64_t g = 0; g < u; ++g) p[g] = firsts[g];
  }
  if (ctx.num_outputs() > 2) {
    int64_t* p = ctx.allocate_output(2, DType::kInt64, {n}).data<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = group[i];
  }
  if (ctx.num_outputs() > 3) {
    int64_t* p = ctx.allocate_output(3, DType::kInt64, {u}).data<int64_t>();
    std::fill(p, p + u, 0);
    for (int64_t i = 0; i < n; ++i) ++p[group[i]];
  }
  return OkStatus();
}

}  // namespace

void RegisterIndexingOps(OpRegistry& r) {
  r.Register("Gather", InferGather, ComputeGather);
  r.Register("GatherElements", InferGatherElements, ComputeGatherElements);
  r.Register("GatherND", InferGatherND, ComputeGatherND);
  r.Register("Scatter", InferScatterElements, ComputeScatterElements);
  r.Register("ScatterElements", InferScatterElements, ComputeScatterElements);
  r.Register("ScatterND", InferScatterND, ComputeScatterND);
  r.Register("TensorScatter", InferTensorScatter, ComputeTensorScatter);
  r.Register("OneHot", InferOneHot, ComputeOneHot);
  r.Register("NonZero", InferNonZero, ComputeNonZero);
  r.Register("Compress", InferCompress, ComputeCompress);
  r.Register("ReverseSequence", InferReverseSequence, ComputeReverseSequence);
  r.Register("Unique", InferUnique, ComputeUnique);
}

}  // namespace kiln::ops
