// C emitters for the indexing family: the run-time-index forms of GatherElements and GatherND
// (the constant-index forms stay with emit_shape.cc's element maps), ScatterElements / Scatter /
// ScatterND with their reductions, OneHot, Range, BitCast, EyeLike, and Shape / Size nodes that
// were not folded. Every index read at run time is bounds-checked: one out of range makes the
// node function return KILN_ERROR_INVALID_DATA, never read or write out of bounds.
// Resize / Upsample and the quantization ops live in emit_resize.cc and emit_quantize.cc.
#include <algorithm>
#include <functional>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

int64_t Prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) p *= d[i];
  return p;
}

bool NormAxis(int64_t* axis, size_t rank) {
  if (*axis < 0) *axis += static_cast<int64_t>(rank);
  return *axis >= 0 && *axis < static_cast<int64_t>(rank);
}

// Lines that read index `expr` into int64_t `var` (declared by the caller), wrap a negative
// index once and return KILN_ERROR_INVALID_DATA when it is still outside [0, extent).
void CheckedIndex(NodeContext& ctx, const std::string& var, const std::string& expr,
                  int64_t extent) {
  ctx.Line(var + " = (int64_t)" + expr + ";");
  ctx.Line("if (" + var + " < 0) " + var + " += " + S(extent) + ";");
  ctx.Line("if (" + var + " < 0 || " + var + " >= " + S(extent) +
           ") return KILN_ERROR_INVALID_DATA;");
}

bool IsIndexType(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

// A loop nest over the axes of `dims` longer than 1; body gets an index-expression builder:
// at(strides) is the offset of the current element for per-axis strides (IndexExpr's form).
using At = std::function<std::string(const std::vector<int64_t>& strides, int64_t base)>;
void Nest(NodeContext& ctx, const Dims& dims, const std::function<void(const At&)>& body) {
  Dims ld;
  std::vector<size_t> axis_of;
  for (size_t a = 0; a < dims.size(); ++a)
    if (dims[a] != 1) {
      ld.push_back(dims[a]);
      axis_of.push_back(a);
    }
  LoopNest(ctx, ld, [&](const std::vector<std::string>& idx) {
    body([&](const std::vector<int64_t>& strides, int64_t base) {
      std::vector<int64_t> ls;
      for (size_t a : axis_of) ls.push_back(strides[a]);
      return IndexExpr(idx, ls, base);
    });
  });
}

// "base + (size_t)k * stride", written without the parts that are zero or one.
std::string Plus(const std::string& base, const std::string& k, int64_t stride) {
  return (base == "0" ? "" : base + " + ") + "(size_t)" + k +
         (stride == 1 ? "" : " * " + std::to_string(stride));
}

// ---- GatherElements, GatherND (run-time indices) ----------------------------------------------

Status EmitGatherElements(NodeContext& ctx) {
  const Dims& dd = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  if (!IsIndexType(ctx.input_dtype(1))) return ctx.error("indices must be int32 or int64");
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormAxis(&axis, dd.size()) || id.size() != dd.size())
    return ctx.error("axis or indices rank out of range");
  if (NumElements(id) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  ctx.SetCanFail();
  std::vector<int64_t> ds = Strides(dd), os = Strides(id), bs = ds;
  bs[axis] = 0;
  ctx.Line("int64_t k;");
  Nest(ctx, id, [&](const At& at) {
    std::string o = at(os, 0);
    CheckedIndex(ctx, "k", "in1[" + o + "]", dd[axis]);
    ctx.Line("out0[" + o + "] = in0[" + Plus(at(bs, 0), "k", ds[axis]) + "];");
  });
  return OkStatus();
}

Status EmitGatherND(NodeContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("indices must be int64");
  if (d.empty() || id.empty()) return ctx.error("data and indices must have rank >= 1");
  const size_t b = static_cast<size_t>(ctx.node().attr_int("batch_dims", 0));
  const size_t m = static_cast<size_t>(id.back());
  if (b >= std::min(d.size(), id.size()) || m < 1 || b + m > d.size())
    return ctx.error("batch_dims or indices shape out of range");
  const int64_t batches = Prod(d, 0, b), tuples = Prod(id, b, id.size() - 1);
  const int64_t block = Prod(d, b + m, d.size()), batch_stride = Prod(d, b, d.size());
  if (NumElements(ctx.output_dims(0)) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  ctx.SetCanFail();
  std::vector<int64_t> ds = Strides(d);
  DType t = ctx.input_dtype(0);
  ctx.Line("int64_t v;");
  ctx.Line("for (size_t t = 0; t < " + S(batches * tuples) + "; ++t) {");
  ctx.Indent();
  ctx.Line("const int64_t *ip = in1 + t" +
           (m == 1 ? std::string() : " * " + S(static_cast<int64_t>(m))) + ";");
  ctx.Line(std::string("size_t off = ") +
           (batches > 1 ? (tuples > 1 ? "(t / " + S(tuples) + ")" : std::string("t")) + " * " +
                              S(batch_stride)
                        : "0") +
           ";");
  for (size_t k = 0; k < m; ++k) {
    CheckedIndex(ctx, "v", "ip[" + S(static_cast<int64_t>(k)) + "]", d[b + k]);
    ctx.Line("off += (size_t)v" + (ds[b + k] == 1 ? std::string() : " * " + S(ds[b + k])) + ";");
  }
  if (block == 1)
    ctx.Line("out0[t] = in0[off];");
  else
    ctx.Line("memcpy(out0 + t * " + S(block) + ", in0 + off, " + ByteCount(t, block) + ");");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// ---- Scatter family ---------------------------------------------------------------------------

// `dst` combined with `v` (both storage-type lvalues of dtype t) by reduction `red`, as the host's
// Apply: sums and products in the compute type (wrapping for integers), max / min keep either.
Expected<std::string> Reduce(NodeContext& ctx, DType t, const std::string& red,
                             const std::string& dst, const std::string& v) {
  if (red == "none") return v;
  if (red == "max" || red == "min") {
    std::string op = red == "max" ? " > " : " < ";
    return "(" + Load(ctx, t, v) + op + Load(ctx, t, dst) + " ? " + v + " : " + dst + ")";
  }
  std::string op = red == "add" ? "+" : red == "mul" ? "*" : "";
  if (op.empty()) return ctx.error("unknown reduction '" + red + "'");
  if (t == DType::kBool) return Store(ctx, t, dst + " " + op + " " + v);
  if (IsSignedIntDType(t) || IsUnsignedIntDType(t)) {
    std::string u = DTypeSize(t) == 8 ? "uint64_t" : "uint32_t";
    return "(" + CType(t) + ")((" + u + ")" + dst + " " + op + " (" + u + ")" + v + ")";
  }
  return Store(ctx, t, Load(ctx, t, dst) + " " + op + " " + Load(ctx, t, v));
}

Status EmitScatterElements(NodeContext& ctx) {
  const Dims& dd = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  DType t = ctx.input_dtype(0);
  if (!IsIndexType(ctx.input_dtype(1))) return ctx.error("indices must be int32 or int64");
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormAxis(&axis, dd.size()) || id.size() != dd.size())
    return ctx.error("axis or indices rank out of range");
  std::string red =
      ctx.node().op_type == "Scatter" ? "none" : ctx.node().attr_string("reduction", "none");
  if (NumElements(dd) > 0) ctx.Line("memcpy(out0, in0, " + ByteCount(t, NumElements(dd)) + ");");
  if (NumElements(id) == 0) return OkStatus();
  ctx.SetCanFail();
  std::vector<int64_t> ds = Strides(dd), os = Strides(id), bs = ds;
  bs[axis] = 0;
  ctx.Line("int64_t k;");
  ctx.Line("size_t p;");
  Status st = OkStatus();
  Nest(ctx, id, [&](const At& at) {
    std::string o = at(os, 0);
    CheckedIndex(ctx, "k", "in1[" + o + "]", dd[axis]);
    ctx.Line("p = " + Plus(at(bs, 0), "k", ds[axis]) + ";");
    auto e = Reduce(ctx, t, red, "out0[p]", "in2[" + o + "]");
    if (!e.ok()) {
      st = e.status();
      return;
    }
    ctx.Line("out0[p] = " + *e + ";");
  });
  return st;
}

Status EmitScatterND(NodeContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  const Dims& id = ctx.input_dims(1);
  DType t = ctx.input_dtype(0);
  if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("indices must be int64");
  if (id.empty() || id.back() < 0 || id.back() > static_cast<int64_t>(d.size()))
    return ctx.error("indices shape out of range");
  std::string red = ctx.node().attr_string("reduction", "none");
  const size_t k = static_cast<size_t>(id.back());
  const int64_t tuples = Prod(id, 0, id.size() - 1), block = Prod(d, k, d.size());
  if (NumElements(d) > 0) ctx.Line("memcpy(out0, in0, " + ByteCount(t, NumElements(d)) + ");");
  if (tuples == 0 || block == 0) return OkStatus();
  std::vector<int64_t> ds = Strides(d);
  if (k > 0) {
    ctx.SetCanFail();
    ctx.Line("int64_t v;");
  }
  ctx.Line("for (size_t t = 0; t < " + S(tuples) + "; ++t) {");
  ctx.Indent();
  if (k > 0)
    ctx.Line("const int64_t *ip = in1 + t" +
             (k == 1 ? std::string() : " * " + S(static_cast<int64_t>(k))) + ";");
  ctx.Line("size_t off = 0;");
  for (size_t j = 0; j < k; ++j) {
    CheckedIndex(ctx, "v", "ip[" + S(static_cast<int64_t>(j)) + "]", d[j]);
    ctx.Line("off += (size_t)v" + (ds[j] == 1 ? std::string() : " * " + S(ds[j])) + ";");
  }
  if (red == "none") {
    if (block == 1)
      ctx.Line("out0[off] = in2[t];");
    else
      ctx.Line("memcpy(out0 + off, in2 + t * " + S(block) + ", " + ByteCount(t, block) + ");");
  } else {
    KILN_ASSIGN_OR_RETURN(std::string e,
                          Reduce(ctx, t, red, "out0[off + e]", "in2[t * " + S(block) + " + e]"));
    ctx.Line("for (size_t e = 0; e < " + S(block) + "; ++e) out0[off + e] = " + e + ";");
  }
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// TensorScatter: per batch entry, `update` written into the cache along `axis` at
// write_indices[b] (wrapping in circular mode).
Status EmitTensorScatter(NodeContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  const Dims& u = ctx.input_dims(1);
  DType t = ctx.input_dtype(0);
  int64_t axis = ctx.node().attr_int("axis", -2);
  if (!NormAxis(&axis, d.size()) || axis == 0 || u.size() != d.size())
    return ctx.error("axis out of range");
  bool circular = ctx.node().attr_string("mode", "linear") == "circular";
  const int64_t batch = d[0], max_len = d[axis], len = u[axis];
  const int64_t mid = Prod(d, 1, axis), inner = Prod(d, axis + 1, d.size());
  if (NumElements(d) > 0) ctx.Line("memcpy(out0, in0, " + ByteCount(t, NumElements(d)) + ");");
  if (batch == 0 || mid == 0 || len == 0 || inner == 0) return OkStatus();
  bool indexed = ctx.has_input(2);
  if (indexed && !IsIndexType(ctx.input_dtype(2)) && !IsSignedIntDType(ctx.input_dtype(2)) &&
      !IsUnsignedIntDType(ctx.input_dtype(2)))
    return ctx.error("write_indices must be integers");
  ctx.SetCanFail();
  ctx.Line("for (size_t b = 0; b < " + S(batch) + "; ++b) {");
  ctx.Indent();
  ctx.Line(std::string("int64_t start = ") + (indexed ? "(int64_t)in2[b]" : "0") + ";");
  if (circular)
    ctx.Line("if (start < 0 || start >= " + S(max_len) + ") return KILN_ERROR_INVALID_DATA;");
  else
    ctx.Line("if (start < 0 || start > " + S(max_len - len) + ") return KILN_ERROR_INVALID_DATA;");
  ctx.Line("for (size_t m = 0; m < " + S(mid) + "; ++m) {");
  ctx.Line("  for (size_t j = 0; j < " + S(len) + "; ++j) {");
  std::string pos = circular ? "((size_t)start + j) % " + S(max_len) : "(size_t)start + j";
  ctx.Line("    size_t pos = " + pos + ";");
  ctx.Line("    memcpy(out0 + ((b * " + S(mid) + " + m) * " + S(max_len) + " + pos) * " + S(inner) +
           ", in1 + ((b * " + S(mid) + " + m) * " + S(len) + " + j) * " + S(inner) + ", " +
           ByteCount(t, inner) + ");");
  ctx.Line("  }");
  ctx.Line("}");
  ctx.Dedent();
  ctx.Line("}");
  return OkStatus();
}

// ---- OneHot -----------------------------------------------------------------------------------

Status EmitOneHot(NodeContext& ctx) {
  const Dims& id = ctx.input_dims(0);
  const Dims& od = ctx.output_dims(0);
  DType it = ctx.input_dtype(0);
  if (NumElements(ctx.input_dims(2)) != 2) return ctx.error("values must have two elements");
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (!NormAxis(&axis, od.size())) return ctx.error("axis out of range");
  const int64_t depth = od[axis], post = Prod(id, axis, id.size()), pre = Prod(id, 0, axis);
  const int64_t total = NumElements(od);
  if (total == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  ctx.Line("for (size_t i = 0; i < " + S(total) + "; ++i) out0[i] = in2[0];");
  ctx.Line("for (size_t a = 0; a < " + S(pre) + "; ++a) {");
  ctx.Line("  for (size_t p = 0; p < " + S(post) + "; ++p) {");
  ctx.Indent();
  ctx.Indent();
  std::string x = "in0[a * " + S(post) + " + p]";
  if (IsFloatingDType(it)) {
    DType ct = ComputeType(it);
    ctx.Line(CType(ct) + " x = " + Load(ctx, it, x) + ";");
    ctx.Line("int64_t v;");
    // Out of (-depth - 1, depth) the truncated index is out of range (and NaN never converts).
    ctx.Line("if (!(x > " + CNumber(ct, static_cast<double>(-depth - 1)) + " && x < " +
             CNumber(ct, static_cast<double>(depth)) + ")) continue;");
    ctx.Line("v = (int64_t)x;");
  } else {
    ctx.Line("int64_t v = (int64_t)" + x + ";");
  }
  ctx.Line("if (v < 0) v += " + S(depth) + ";");
  ctx.Line("if (v < 0 || v >= " + S(depth) + ") continue;");
  ctx.Line("out0[(a * " + S(depth) + " + (size_t)v) * " + S(post) + " + p] = in2[1];");
  ctx.Dedent();
  ctx.Dedent();
  ctx.Line("  }");
  ctx.Line("}");
  return OkStatus();
}

// ---- Range, BitCast, EyeLike, Shape, Size -----------------------------------------------------

// Range whose inputs are known only at run time (or whose output was too large to fold): the
// output size is fixed at compile time, the values are start + i * delta as the host computes.
Status EmitRange(NodeContext& ctx) {
  DType t = ctx.output_dtype(0);
  int64_t n = NumElements(ctx.output_dims(0));
  if (n == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (t == DType::kBool) return ctx.error("bool is not a Range type");
  DType ct = ComputeType(t);
  ctx.Line("const " + CType(ct) + " start = " + Load(ctx, t, "in0[0]") +
           ", delta = " + Load(ctx, t, "in2[0]") + ";");
  std::string v;
  if (IsFloatingDType(t)) {
    v = Store(ctx, t, "start + (" + CType(ct) + ")i * delta");
  } else {
    std::string u = DTypeSize(t) == 8 ? "uint64_t" : "uint32_t";
    v = "(" + CType(t) + ")((" + u + ")start + (" + u + ")(" + CType(t) + ")i * (" + u + ")delta)";
  }
  ctx.Line("for (size_t i = 0; i < " + S(n) + "; ++i) out0[i] = " + v + ";");
  return OkStatus();
}

Status EmitBitCast(NodeContext& ctx) {
  if (DTypeSize(ctx.input_dtype(0)) != DTypeSize(ctx.output_dtype(0)))
    return ctx.error("types differ in width");
  int64_t n = NumElements(ctx.output_dims(0));
  if (n > 0) ctx.Line("memcpy(out0, in0, " + ByteCount(ctx.output_dtype(0), n) + ");");
  return OkStatus();
}

Status EmitEyeLike(NodeContext& ctx) {
  const Dims& od = ctx.output_dims(0);
  if (od.size() != 2) return ctx.error("input must be 2-D");
  DType t = ctx.output_dtype(0);
  const int64_t rows = od[0], cols = od[1], k = ctx.node().attr_int("k", 0);
  if (rows * cols == 0) return OkStatus();
  ctx.Line("memset(out0, 0, " + ByteCount(t, rows * cols) + ");");
  if (k >= cols || k <= -rows) return OkStatus();
  const int64_t lo = k < 0 ? -k : 0, hi = std::min(rows, cols - k);
  std::string one = t == DType::kBool    ? "1"
                    : IsFloatingDType(t) ? Store(ctx, t, CNumber(ComputeType(t), 1))
                                         : CNumber(t, 1);
  ctx.Line("for (size_t i = 0; i < " + S(hi - lo) + "; ++i) out0[" + S(lo * cols + lo + k) +
           " + i * " + S(cols + 1) + "] = " + one + ";");
  return OkStatus();
}

// Shape and Size of a tensor whose dims are fixed at compile time (the constant folder normally
// removes these nodes; a node left here reads no data).
Status EmitShapeOf(NodeContext& ctx) {
  const ir::TypeInfo& ti = ctx.input_type(0);
  if (!ti.shape_known())
    return ctx.error(
        "its input's dims are not known at compile time, so the C backend cannot compute them");
  const Dims& d = ti.dims;
  const int64_t rank = static_cast<int64_t>(d.size());
  if (ctx.node().op_type == "Size") {
    ctx.Line("out0[0] = " + CNumber(DType::kInt64, static_cast<double>(NumElements(d))) + ";");
    return OkStatus();
  }
  int64_t s = ctx.node().attr_int("start", 0), e = ctx.node().attr_int("end", rank);
  if (s < 0) s += rank;
  if (e < 0) e += rank;
  s = std::clamp<int64_t>(s, 0, rank);
  e = std::max(s, std::clamp<int64_t>(e, 0, rank));
  for (int64_t i = s; i < e; ++i) ctx.Line("out0[" + S(i - s) + "] = " + S(d[i]) + ";");
  if (e == s) ctx.Line("/* no elements */");
  return OkStatus();
}

// Wraps emit_shape.cc's constant-index emitter (an element map): run-time indices, and constant
// ones it cannot take (a map too large for a table), take `dynamic`. The constant form runs on a
// scratch context, so a failure leaves nothing behind.
NodeEmitFn IndexedForm(const EmitterRegistry& r, const char* op, Status (*dynamic)(NodeContext&)) {
  const NodeEmitFn* found = r.Find("", op);
  NodeEmitFn constant_form = found ? *found : NodeEmitFn();
  return [constant_form, dynamic](NodeContext& ctx) {
    if (!ctx.input_constant(1) || !constant_form) return dynamic(ctx);
    NodeContext tmp(ctx.graph(), ctx.node(), ctx.opset());
    tmp.function_name = ctx.function_name;
    tmp.scratch = ctx.scratch;
    tmp.subgraph = ctx.subgraph;
    if (!constant_form(tmp).ok()) return dynamic(ctx);
    ctx.Table(tmp.tables());
    const std::string& body = tmp.body();
    for (size_t pos = 0; pos < body.size();) {
      size_t end = body.find('\n', pos);
      if (end == std::string::npos) end = body.size();
      ctx.Line(
          body.substr(std::min(pos + 2, end), end - std::min(pos + 2, end)));  // Line indents again
      pos = end + 1;
    }
    for (const auto& k : tmp.kernels()) ctx.UseKernel(k);
    if (tmp.can_fail()) ctx.SetCanFail();
    return OkStatus();
  };
}

}  // namespace

void RegisterResizeEmitters(EmitterRegistry& r);    // emit_resize.cc
void RegisterQuantizeEmitters(EmitterRegistry& r);  // emit_quantize.cc

void RegisterIndexingEmitters(EmitterRegistry& r) {
  r.Register("GatherElements", IndexedForm(r, "GatherElements", EmitGatherElements));
  r.Register("GatherND", IndexedForm(r, "GatherND", EmitGatherND));
  r.Register("ScatterElements", EmitScatterElements);
  r.Register("Scatter", EmitScatterElements);
  r.Register("ScatterND", EmitScatterND);
  r.Register("TensorScatter", EmitTensorScatter);
  r.Register("OneHot", EmitOneHot);
  r.Register("Range", EmitRange);
  r.Register("BitCast", EmitBitCast);
  r.Register("EyeLike", EmitEyeLike);
  r.Register("Shape", EmitShapeOf);
  r.Register("Size", EmitShapeOf);
  RegisterResizeEmitters(r);
  RegisterQuantizeEmitters(r);
}

}  // namespace kiln::codegen::c
