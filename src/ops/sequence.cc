// Sequence and optional ops. A sequence is a runtime value holding tensors (Tensor::Sequence);
// an optional holding a value is that value, an empty one is Tensor::None(). Sequence items are
// kept owned (never arena views) because a sequence outlives the node that built it.
#include "ops/sequence_util.h"

namespace kiln::ops {
namespace {

using Kind = ir::TypeInfo::Kind;

bool IsSeqType(const InferContext& ctx, int i) {
  return ctx.has_input(i) && ctx.input_type(i).kind == Kind::kSequence;
}

// The input's sequence value, or an error naming what it is instead.
Status GetSequence(const ComputeContext& ctx, int i, const Tensor** seq) {
  if (!ctx.has_input(i) || !ctx.input(i).is_sequence())
    return ctx.error("input " + std::to_string(i) + " must be a sequence");
  *seq = &ctx.input(i);
  return OkStatus();
}

// Reads an optional position input; `def` when omitted.
Status ReadPosition(const ComputeContext& ctx, int i, int64_t def, int64_t* pos) {
  *pos = def;
  if (!ctx.has_input(i)) return OkStatus();
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) || !ReadScalarInt(t, pos))
    return ctx.error("position must be an int32 or int64 scalar");
  return OkStatus();
}

// The element type of a sequence input when infer knows it.
ir::TypeInfo SeqElemType(const InferContext& ctx, int i) {
  const ir::TypeInfo& t = ctx.input_type(i);
  if (t.elem) return *t.elem;
  return UnknownTensorType(t.dtype);
}

// The element type common to `a` and `b`: the shape only where both agree.
ir::TypeInfo MergeElemTypes(const ir::TypeInfo& a, const ir::TypeInfo& b) {
  if (a.kind != Kind::kTensor || b.kind != Kind::kTensor) return a;
  ir::TypeInfo t = UnknownTensorType(a.dtype != DType::kUndefined ? a.dtype : b.dtype);
  if (a.has_shape && b.has_shape && a.dims.size() == b.dims.size()) {
    t.has_shape = true;
    for (size_t d = 0; d < a.dims.size(); ++d)
      t.dims.push_back(a.dims[d] == b.dims[d] ? a.dims[d] : -1);
    t.symbols.assign(t.dims.size(), "");
  }
  return t;
}

// ---- SequenceEmpty / SequenceConstruct / SequenceLength ------------------------------------

Status InferSequenceEmpty(InferContext& ctx) {
  DType dt =
      static_cast<DType>(ctx.node().attr_int("dtype", static_cast<int64_t>(DType::kFloat32)));
  if (!IsSupportedDType(dt)) return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  ctx.set_output_type(0, SequenceType(UnknownTensorType(dt)));
  return OkStatus();
}

Status ComputeSequenceEmpty(ComputeContext& ctx) {
  DType dt =
      static_cast<DType>(ctx.node().attr_int("dtype", static_cast<int64_t>(DType::kFloat32)));
  ctx.output(0) = Tensor::Sequence(dt, {});
  return OkStatus();
}

Status InferSequenceConstruct(InferContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.error("needs at least one input");
  ir::TypeInfo elem;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    const ir::TypeInfo& t = ctx.input_type(i);
    if (t.kind != Kind::kTensor) return ctx.error("inputs must be tensors");
    if (i > 0 && t.dtype != elem.dtype)
      return ctx.error("inputs have different element types (" +
                       std::string(DTypeName(elem.dtype)) + " and " +
                       std::string(DTypeName(t.dtype)) + ")");
    elem = i == 0 ? t : MergeElemTypes(elem, t);
  }
  ctx.set_output_type(0, SequenceType(elem));
  return OkStatus();
}

Status ComputeSequenceConstruct(ComputeContext& ctx) {
  std::vector<Tensor> items;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || ctx.input(i).kind() != Tensor::Kind::kTensor)
      return ctx.error("inputs must be tensors");
    items.push_back(Owned(ctx.input(i)));
  }
  DType dt = items[0].dtype();
  ctx.output(0) = Tensor::Sequence(dt, std::move(items));
  return OkStatus();
}

Status InferSequenceLength(InferContext& ctx) {
  if (!IsSeqType(ctx, 0)) return ctx.error("input must be a sequence");
  ctx.set_output(0, DType::kInt64, {});
  return OkStatus();
}

Status ComputeSequenceLength(ComputeContext& ctx) {
  const Tensor* seq;
  KILN_RETURN_IF_ERROR(GetSequence(ctx, 0, &seq));
  ctx.output(0).data<int64_t>()[0] = static_cast<int64_t>(seq->items().size());
  return OkStatus();
}

// ---- SequenceAt / SequenceInsert / SequenceErase -------------------------------------------

Status InferSequenceAt(InferContext& ctx) {
  if (!IsSeqType(ctx, 0)) return ctx.error("input 0 must be a sequence");
  if (!ctx.has_input(1)) return ctx.error("position is required");
  const Tensor* seq = ctx.input_value(0);
  const Tensor* pos = ctx.input_value(1);
  if (seq && pos && seq->is_sequence()) {
    int64_t p, n = static_cast<int64_t>(seq->items().size());
    if (!ReadScalarInt(*pos, &p)) return ctx.error("position must be an integer scalar");
    if (p < -n || p >= n)
      return ctx.error("position " + std::to_string(p) + " is out of range for a sequence of " +
                       std::to_string(n));
    const Tensor& item = seq->items()[p < 0 ? p + n : p];
    ctx.set_output_type(0, TypeForOutput(item));
    return OkStatus();
  }
  ir::TypeInfo elem = SeqElemType(ctx, 0);
  if (elem.kind == Kind::kTensor && elem.shape_known())
    ctx.set_output_type(0, elem);
  else
    ctx.set_output_dynamic(0, ElemDType(ctx.input_type(0)));
  return OkStatus();
}

Status ComputeSequenceAt(ComputeContext& ctx) {
  const Tensor* seq;
  KILN_RETURN_IF_ERROR(GetSequence(ctx, 0, &seq));
  int64_t p, n = static_cast<int64_t>(seq->items().size());
  KILN_RETURN_IF_ERROR(ReadPosition(ctx, 1, 0, &p));
  if (p < -n || p >= n)
    return ctx.error("position " + std::to_string(p) + " is out of range for a sequence of " +
                     std::to_string(n));
  SetOutputValue(ctx, 0, seq->items()[p < 0 ? p + n : p]);
  return OkStatus();
}

Status InferSequenceInsert(InferContext& ctx) {
  if (!IsSeqType(ctx, 0)) return ctx.error("input 0 must be a sequence");
  if (!ctx.has_input(1) || ctx.input_type(1).kind != Kind::kTensor)
    return ctx.error("input 1 must be a tensor");
  DType sdt = ElemDType(ctx.input_type(0));
  const Tensor* seq = ctx.input_value(0);
  bool empty = seq && seq->is_sequence() && seq->items().empty();
  if (sdt != DType::kUndefined && !empty && sdt != ctx.input_dtype(1))
    return ctx.error("tensor of type " + std::string(DTypeName(ctx.input_dtype(1))) +
                     " inserted into a sequence of " + std::string(DTypeName(sdt)));
  ir::TypeInfo elem =
      empty ? ctx.input_type(1) : MergeElemTypes(SeqElemType(ctx, 0), ctx.input_type(1));
  ctx.set_output_type(0, SequenceType(elem));
  return OkStatus();
}

Status ComputeSequenceInsert(ComputeContext& ctx) {
  const Tensor* seq;
  KILN_RETURN_IF_ERROR(GetSequence(ctx, 0, &seq));
  const Tensor& t = ctx.input(1);
  if (t.kind() != Tensor::Kind::kTensor) return ctx.error("input 1 must be a tensor");
  std::vector<Tensor> items = seq->items();
  if (!items.empty() && items[0].dtype() != t.dtype())
    return ctx.error("tensor of type " + std::string(DTypeName(t.dtype())) +
                     " inserted into a sequence of " + std::string(DTypeName(items[0].dtype())));
  int64_t n = static_cast<int64_t>(items.size()), p;
  KILN_RETURN_IF_ERROR(ReadPosition(ctx, 2, n, &p));
  if (p < -n || p > n)
    return ctx.error("position " + std::to_string(p) +
                     " is out of range for inserting into a "
                     "sequence of " +
                     std::to_string(n));
  if (p < 0) p += n;
  items.insert(items.begin() + p, Owned(t));
  ctx.output(0) = Tensor::Sequence(t.dtype(), std::move(items));
  return OkStatus();
}

Status InferSequenceErase(InferContext& ctx) {
  if (!IsSeqType(ctx, 0)) return ctx.error("input 0 must be a sequence");
  ctx.set_output_type(0, ctx.input_type(0));
  return OkStatus();
}

Status ComputeSequenceErase(ComputeContext& ctx) {
  const Tensor* seq;
  KILN_RETURN_IF_ERROR(GetSequence(ctx, 0, &seq));
  std::vector<Tensor> items = seq->items();
  int64_t n = static_cast<int64_t>(items.size()), p;
  KILN_RETURN_IF_ERROR(ReadPosition(ctx, 1, n - 1, &p));
  if (p < -n || p >= n)
    return ctx.error("position " + std::to_string(p) + " is out of range for a sequence of " +
                     std::to_string(n));
  if (p < 0) p += n;
  items.erase(items.begin() + p);
  ctx.output(0) = Tensor::Sequence(seq->dtype(), std::move(items));
  return OkStatus();
}

// ---- SplitToSequence / ConcatFromSequence --------------------------------------------------

// Piece lengths along the axis, validated against the axis length.
Status SplitLengths(const ComputeContext& ctx, int64_t dim, std::vector<int64_t>* lengths,
                    bool* split_given) {
  lengths->clear();
  *split_given = ctx.has_input(1);
  if (!*split_given) {
    lengths->assign(dim, 1);
    return OkStatus();
  }
  const Tensor& s = ctx.input(1);
  if (s.dtype() != DType::kInt32 && s.dtype() != DType::kInt64)
    return ctx.error("split must be int32 or int64");
  if (s.rank() == 0) {
    int64_t len = s.GetInt(0);
    if (len <= 0) return ctx.error("split length " + std::to_string(len) + " must be positive");
    for (int64_t pos = 0; pos < dim; pos += len) lengths->push_back(std::min(len, dim - pos));
    return OkStatus();
  }
  if (s.rank() != 1) return ctx.error("split must be a scalar or a 1-D tensor");
  int64_t sum = 0;
  for (int64_t v : s.ToInt64Vector()) {
    if (v < 0) return ctx.error("split lengths must be non-negative");
    sum += v;
    lengths->push_back(v);
  }
  if (sum != dim)
    return ctx.error("split lengths sum to " + std::to_string(sum) + " but the axis has " +
                     std::to_string(dim));
  return OkStatus();
}

Status InferSplitToSequence(InferContext& ctx) {
  if (!ctx.has_input(0) || ctx.input_type(0).kind != Kind::kTensor)
    return ctx.error("input must be a tensor");
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (ctx.input_type(0).has_shape && !NormalizeAxis(axis, ctx.input_rank(0)))
    return ctx.error("axis " + std::to_string(ctx.node().attr_int("axis", 0)) +
                     " is out of range for rank " + std::to_string(ctx.input_rank(0)));
  ctx.set_output_type(0, SequenceType(UnknownTensorType(ctx.input_dtype(0))));
  return OkStatus();
}

Status ComputeSplitToSequence(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormalizeAxis(axis, x.rank()))
    return ctx.error("axis " + std::to_string(ctx.node().attr_int("axis", 0)) +
                     " is out of range for rank " + std::to_string(x.rank()));
  bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  std::vector<int64_t> lengths;
  bool split_given;
  KILN_RETURN_IF_ERROR(SplitLengths(ctx, x.dim(axis), &lengths, &split_given));
  const size_t es = DTypeSize(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t dim = x.dim(axis);
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t len : lengths) {
    Dims dims = x.dims();
    dims[axis] = len;
    Tensor piece(x.dtype(), dims);
    const uint8_t* src = static_cast<const uint8_t*>(x.raw());
    uint8_t* dst = static_cast<uint8_t*>(piece.raw());
    const size_t chunk = static_cast<size_t>(len * inner) * es;
    for (int64_t o = 0; o < outer && chunk > 0; ++o)
      std::memcpy(dst + o * chunk, src + (o * dim + start) * inner * es, chunk);
    if (!split_given && !keepdims) {
      dims.erase(dims.begin() + axis);
      piece = piece.Reshaped(dims);
    }
    items.push_back(std::move(piece));
    start += len;
  }
  ctx.output(0) = Tensor::Sequence(x.dtype(), std::move(items));
  return OkStatus();
}

// The output dims of ConcatFromSequence, checking the items agree.
Status ConcatDims(const InferContext* ictx, const ComputeContext* cctx, const Tensor& seq,
                  int64_t* axis_out, Dims* out) {
  auto error = [&](const std::string& m) { return ictx ? ictx->error(m) : cctx->error(m); };
  const ir::Node& node = ictx ? ictx->node() : cctx->node();
  const auto& items = seq.items();
  if (items.empty()) return error("cannot concatenate an empty sequence");
  bool new_axis = node.attr_int("new_axis", 0) != 0;
  int64_t axis = node.attr_int("axis", 0);
  const Dims& d0 = items[0].dims();
  int64_t rank = static_cast<int64_t>(d0.size());
  if (!NormalizeAxis(axis, rank + (new_axis ? 1 : 0)))
    return error("axis " + std::to_string(node.attr_int("axis", 0)) + " is out of range for rank " +
                 std::to_string(rank));
  if (!new_axis && rank == 0) return error("cannot concatenate scalars without new_axis");
  int64_t total = 0;
  for (const auto& it : items) {
    if (it.kind() != Tensor::Kind::kTensor || it.dtype() != items[0].dtype())
      return error("sequence items must be tensors of one type");
    bool ok = it.rank() == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis && !new_axis ? true : it.dim(static_cast<int>(d)) == d0[d];
    if (!ok)
      return error("item shapes " + DimsToString(d0) + " and " + DimsToString(it.dims()) +
                   " cannot be concatenated on axis " + std::to_string(axis));
    total += new_axis ? 1 : it.dim(static_cast<int>(axis));
  }
  *out = d0;
  if (new_axis)
    out->insert(out->begin() + axis, total);
  else
    (*out)[axis] = total;
  *axis_out = axis;
  return OkStatus();
}

Status InferConcatFromSequence(InferContext& ctx) {
  if (!IsSeqType(ctx, 0)) return ctx.error("input must be a sequence");
  const Tensor* seq = ctx.input_value(0);
  if (seq && seq->is_sequence()) {
    int64_t axis;
    Dims dims;
    KILN_RETURN_IF_ERROR(ConcatDims(&ctx, nullptr, *seq, &axis, &dims));
    ctx.set_output(0, seq->items()[0].dtype(), dims);
    return OkStatus();
  }
  ctx.set_output_dynamic(0, ElemDType(ctx.input_type(0)));
  return OkStatus();
}

Status ComputeConcatFromSequence(ComputeContext& ctx) {
  const Tensor* seq;
  KILN_RETURN_IF_ERROR(GetSequence(ctx, 0, &seq));
  int64_t axis;
  Dims dims;
  KILN_RETURN_IF_ERROR(ConcatDims(nullptr, &ctx, *seq, &axis, &dims));
  DType dt = seq->items()[0].dtype();
  Tensor& out = ctx.output(0);
  if (!out.defined() || out.dims() != dims || out.dtype() != dt) ctx.allocate_output(0, dt, dims);
  const size_t es = DTypeSize(dt);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  // Each item contributes one contiguous chunk per outer index.
  size_t out_row = static_cast<size_t>(NumElements(dims) / std::max<int64_t>(outer, 1)) * es;
  uint8_t* dst = static_cast<uint8_t*>(ctx.output(0).raw());
  size_t offset = 0;
  for (const auto& it : seq->items()) {
    size_t chunk = outer > 0 ? it.nbytes() / static_cast<size_t>(outer) : 0;
    const uint8_t* src = static_cast<const uint8_t*>(it.raw());
    for (int64_t o = 0; o < outer && chunk > 0; ++o)
      std::memcpy(dst + o * out_row + offset, src + o * chunk, chunk);
    offset += chunk;
  }
  return OkStatus();
}

// ---- SequenceMap ---------------------------------------------------------------------------

Status InferSequenceMap(InferContext& ctx) {
  const ir::Attribute* body = ctx.node().attr("body");
  if (!body || !body->g) return ctx.error("missing 'body' graph attribute");
  const ir::Graph& g = *body->g;
  if (!IsSeqType(ctx, 0)) return ctx.error("input 0 must be a sequence");
  if (static_cast<int>(g.inputs.size()) != ctx.num_inputs())
    return ctx.error("body takes " + std::to_string(g.inputs.size()) + " inputs, node has " +
                     std::to_string(ctx.num_inputs()));
  if (static_cast<int>(g.outputs.size()) != ctx.num_outputs())
    return ctx.error("body returns " + std::to_string(g.outputs.size()) + " outputs, node has " +
                     std::to_string(ctx.num_outputs()));
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ir::TypeInfo& t = g.values[g.outputs[i]].type;
    ctx.set_output_type(i, SequenceType(t.kind == Kind::kTensor ? UnknownTensorType(t.dtype) : t));
  }
  return OkStatus();
}

Status ComputeSequenceMap(ComputeContext& ctx) {
  const ir::Graph& g = *ctx.node().attr("body")->g;
  const Tensor* seq;
  KILN_RETURN_IF_ERROR(GetSequence(ctx, 0, &seq));
  const size_t n = seq->items().size();
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input(i).is_sequence() && ctx.input(i).items().size() != n)
      return ctx.error("input sequences have different lengths (" + std::to_string(n) + " and " +
                       std::to_string(ctx.input(i).items().size()) + ")");
  std::vector<std::vector<Tensor>> results(ctx.num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<Tensor> in, out;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
      const Tensor& v = ctx.input(i);
      in.push_back(v.is_sequence() ? v.items()[k] : v);
    }
    KILN_RETURN_IF_ERROR(ctx.subgraphs().Run(g, in, &out));
    if (out.size() != results.size()) return ctx.error("body returned the wrong number of outputs");
    for (size_t j = 0; j < out.size(); ++j) results[j].push_back(Owned(out[j]));
  }
  for (int j = 0; j < ctx.num_outputs(); ++j) {
    DType dt = !results[j].empty() ? results[j][0].dtype() : g.values[g.outputs[j]].type.dtype;
    ctx.output(j) = Tensor::Sequence(dt, std::move(results[j]));
  }
  return OkStatus();
}

// ---- Optional / OptionalHasElement / OptionalGetElement ------------------------------------

Status InferOptional(InferContext& ctx) {
  if (ctx.has_input(0)) {
    ctx.set_output_type(0, OptionalType(ctx.input_type(0)));
    return OkStatus();
  }
  const ir::Attribute* type = ctx.node().attr("type");
  if (!type) return ctx.error("an Optional without input needs the 'type' attribute");
  // The importer keeps no TypeProto attributes; an empty optional of unknown element type.
  ctx.set_output_type(0, OptionalType(ir::TypeInfo{}));
  return OkStatus();
}

Status ComputeOptional(ComputeContext& ctx) {
  ctx.output(0) = ctx.has_input(0) ? Owned(ctx.input(0)) : Tensor::None();
  return OkStatus();
}

Status InferOptionalHasElement(InferContext& ctx) {
  ctx.set_output(0, DType::kBool, {});
  return OkStatus();
}

Status ComputeOptionalHasElement(ComputeContext& ctx) {
  bool has = ctx.has_input(0) && !ctx.input(0).is_none() && ctx.input(0).defined();
  ctx.output(0).data<uint8_t>()[0] = has ? 1 : 0;
  return OkStatus();
}

Status InferOptionalGetElement(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input is required");
  const Tensor* v = ctx.input_value(0);
  if (v) {
    if (v->is_none()) return ctx.error("the optional input is empty");
    ctx.set_output_type(0, TypeForOutput(*v));
    return OkStatus();
  }
  const ir::TypeInfo& t = ctx.input_type(0);
  if (t.kind == Kind::kOptional) {
    if (t.elem && (t.elem->kind != Kind::kTensor || t.elem->shape_known()))
      ctx.set_output_type(0, *t.elem);
    else
      ctx.set_output_dynamic(0, ElemDType(t));
    return OkStatus();
  }
  ctx.set_output_type(0, t);
  return OkStatus();
}

Status ComputeOptionalGetElement(ComputeContext& ctx) {
  const Tensor& v = ctx.input(0);
  if (v.is_none()) return ctx.error("the optional input is empty");
  SetOutputValue(ctx, 0, v);
  return OkStatus();
}

}  // namespace

void RegisterSequenceOps(OpRegistry& r) {
  r.Register("SequenceEmpty", InferSequenceEmpty, ComputeSequenceEmpty);
  r.Register("SequenceConstruct", InferSequenceConstruct, ComputeSequenceConstruct);
  r.Register("SequenceLength", InferSequenceLength, ComputeSequenceLength);
  r.Register("SequenceAt", InferSequenceAt, ComputeSequenceAt);
  r.Register("SequenceInsert", InferSequenceInsert, ComputeSequenceInsert);
  r.Register("SequenceErase", InferSequenceErase, ComputeSequenceErase);
  r.Register("SplitToSequence", InferSplitToSequence, ComputeSplitToSequence);
  r.Register("ConcatFromSequence", InferConcatFromSequence, ComputeConcatFromSequence);
  r.Register("SequenceMap", InferSequenceMap, ComputeSequenceMap);
  r.Register("Optional", InferOptional, ComputeOptional);
  r.Register("OptionalHasElement", InferOptionalHasElement, ComputeOptionalHasElement);
  r.Register("OptionalGetElement", InferOptionalGetElement, ComputeOptionalGetElement);
}

}  // namespace kiln::ops
