// Control flow: If, Loop, Scan. Bodies run through ctx.subgraphs(); their results come back owned,
// so they can be handed to outputs directly. Output shapes mostly depend on data (trip counts,
// the branch taken), so infer reports what the body types allow and compute sets the values.
#include "ops/sequence_util.h"

namespace kiln::ops {
namespace {

using Kind = ir::TypeInfo::Kind;

const ir::Graph* GraphAttr(const ir::Node& n, const std::string& name) {
  const ir::Attribute* a = n.attr(name);
  return a && a->g ? a->g.get() : nullptr;
}

// The static type for an output that takes the value of a body output.
ir::TypeInfo OutputTypeFrom(const ir::TypeInfo& t) {
  if (t.kind != Kind::kTensor || t.shape_known()) return t;
  return UnknownTensorType(t.dtype);
}

// The type both branches of an If agree on.
ir::TypeInfo MergeBranchTypes(const ir::TypeInfo& a, const ir::TypeInfo& b) {
  if (a.kind != b.kind) return a.kind == Kind::kOptional ? a : b;
  if (a.kind != Kind::kTensor) return a;
  ir::TypeInfo t = UnknownTensorType(a.dtype != DType::kUndefined ? a.dtype : b.dtype);
  if (a.shape_known() && b.shape_known() && a.dims == b.dims) t = a;
  return t;
}

Status ReadCond(const Tensor& t, bool* cond) {
  if (t.kind() != Tensor::Kind::kTensor || t.size() != 1 || t.dtype() == DType::kUndefined)
    return Error("must be a one-element tensor");
  *cond = t.GetDouble(0) != 0.0;
  return OkStatus();
}

// ---- If ------------------------------------------------------------------------------------

Status InferIf(InferContext& ctx) {
  const ir::Graph* then_g = GraphAttr(ctx.node(), "then_branch");
  const ir::Graph* else_g = GraphAttr(ctx.node(), "else_branch");
  if (!then_g || !else_g) return ctx.error("needs then_branch and else_branch graph attributes");
  if (!ctx.has_input(0)) return ctx.error("the condition input is required");
  const size_t n = static_cast<size_t>(ctx.num_outputs());
  if (then_g->outputs.size() != n || else_g->outputs.size() != n)
    return ctx.error("the branches return " + std::to_string(then_g->outputs.size()) + " and " +
                     std::to_string(else_g->outputs.size()) + " values for " + std::to_string(n) +
                     " outputs");
  const Tensor* cv = ctx.input_value(0);
  bool cond = false;
  if (cv) KILN_RETURN_IF_ERROR(ReadCond(*cv, &cond).Context(ctx.error("condition").message()));
  for (size_t i = 0; i < n; ++i) {
    const ir::TypeInfo& a = then_g->values[then_g->outputs[i]].type;
    const ir::TypeInfo& b = else_g->values[else_g->outputs[i]].type;
    ctx.set_output_type(static_cast<int>(i),
                        OutputTypeFrom(cv ? (cond ? a : b) : MergeBranchTypes(a, b)));
  }
  return OkStatus();
}

Status ComputeIf(ComputeContext& ctx) {
  bool cond;
  KILN_RETURN_IF_ERROR(ReadCond(ctx.input(0), &cond).Context(ctx.error("condition").message()));
  const ir::Graph* g = GraphAttr(ctx.node(), cond ? "then_branch" : "else_branch");
  std::vector<Tensor> outs;
  KILN_RETURN_IF_ERROR(ctx.subgraphs().Run(*g, {}, &outs));
  if (static_cast<int>(outs.size()) != ctx.num_outputs())
    return ctx.error("the branch returned " + std::to_string(outs.size()) + " values");
  for (int i = 0; i < ctx.num_outputs(); ++i) SetOutputValue(ctx, i, outs[i]);
  return OkStatus();
}

// ---- Stacking helpers (Loop and Scan outputs) ----------------------------------------------

// Stacks same-shaped items along a new axis `axis` of length `total`; item t goes to position
// t (or total-1-t when reverse); positions without an item stay zero.
Status Stack(const std::vector<Tensor>& items, int64_t axis, bool reverse, int64_t total,
             const Dims& item_dims, DType dt, Tensor* out, const std::string& what) {
  for (const auto& it : items) {
    if (it.kind() != Tensor::Kind::kTensor || it.dtype() != dt || it.dims() != item_dims)
      return Error(what + ": iterations produced values of different types or shapes (" +
                   DimsToString(item_dims) + " and " + DimsToString(it.dims()) + ")");
  }
  Dims dims = item_dims;
  dims.insert(dims.begin() + axis, total);
  *out = Tensor(dt, dims);
  const size_t es = DTypeSize(dt);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= item_dims[d];
  for (size_t d = axis; d < item_dims.size(); ++d) inner *= item_dims[d];
  const size_t chunk = static_cast<size_t>(inner) * es;
  uint8_t* dst = static_cast<uint8_t*>(out->raw());
  for (size_t t = 0; t < items.size(); ++t) {
    int64_t pos = reverse ? total - 1 - static_cast<int64_t>(t) : static_cast<int64_t>(t);
    const uint8_t* src = static_cast<const uint8_t*>(items[t].raw());
    for (int64_t o = 0; o < outer && chunk > 0; ++o)
      std::memcpy(dst + (o * total + pos) * chunk, src + o * chunk, chunk);
  }
  return OkStatus();
}

// Index `idx` of `x` along `axis`, that axis removed.
Tensor SliceAxis(const Tensor& x, int64_t axis, int64_t idx) {
  Dims dims = x.dims();
  const int64_t len = dims[axis];
  dims.erase(dims.begin() + axis);
  Tensor out(x.dtype(), dims);
  const size_t es = DTypeSize(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<int>(d));
  for (int d = static_cast<int>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const size_t chunk = static_cast<size_t>(inner) * es;
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer && chunk > 0; ++o)
    std::memcpy(dst + o * chunk, src + (o * len + idx) * chunk, chunk);
  return out;
}

// Dims for the item of an empty stack: the body output's declared dims, unknown ones as 0.
Dims EmptyItemDims(const ir::TypeInfo& t) {
  Dims d;
  if (t.kind == Kind::kTensor && t.has_shape)
    for (int64_t v : t.dims) d.push_back(v < 0 ? 0 : v);
  return d;
}

DType BodyOutputDType(const ir::Graph& g, size_t i, DType def) {
  DType d = g.values[g.outputs[i]].type.dtype;
  return d == DType::kUndefined ? def : d;
}

// ---- Loop ----------------------------------------------------------------------------------

Status CheckLoopBody(const InferContext& ctx, const ir::Graph& body, int* n_carried, int* k_scan) {
  const int n = ctx.num_inputs() - 2;
  if (n < 0) return ctx.error("needs the M and cond inputs (either may be empty)");
  if (static_cast<int>(body.inputs.size()) != n + 2)
    return ctx.error("body takes " + std::to_string(body.inputs.size()) + " inputs, expected " +
                     std::to_string(n + 2) + " (iteration, condition, " + std::to_string(n) +
                     " loop-carried)");
  const int k = static_cast<int>(body.outputs.size()) - 1 - n;
  if (k < 0)
    return ctx.error("body returns " + std::to_string(body.outputs.size()) +
                     " values, expected at least " + std::to_string(n + 1));
  if (ctx.num_outputs() > n + k)
    return ctx.error("has " + std::to_string(ctx.num_outputs()) + " outputs, the body gives " +
                     std::to_string(n + k));
  *n_carried = n;
  *k_scan = k;
  return OkStatus();
}

Status InferLoop(InferContext& ctx) {
  const ir::Graph* body = GraphAttr(ctx.node(), "body");
  if (!body) return ctx.error("missing 'body' graph attribute");
  int n = 0, k = 0;
  KILN_RETURN_IF_ERROR(CheckLoopBody(ctx, *body, &n, &k));
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ir::TypeInfo& bt = body->values[body->outputs[1 + i]].type;
    if (i < n) {
      // Loop-carried: shapes may change between iterations, so only the kind and dtype are known.
      if (bt.kind != Kind::kTensor) {
        ctx.set_output_type(i, bt);
        continue;
      }
      DType dt = bt.dtype;
      if (dt == DType::kUndefined && ctx.has_input(2 + i)) dt = ElemDType(ctx.input_type(2 + i));
      ctx.set_output_dynamic(i, dt);
    } else {
      ctx.set_output_dynamic(i, bt.dtype);
    }
  }
  return OkStatus();
}

Status ComputeLoop(ComputeContext& ctx) {
  const ir::Graph& body = *GraphAttr(ctx.node(), "body");
  const int n = ctx.num_inputs() - 2;
  const int k = static_cast<int>(body.outputs.size()) - 1 - n;
  int64_t max_trip = INT64_MAX;
  if (ctx.has_input(0)) {
    const Tensor& m = ctx.input(0);
    if (m.kind() != Tensor::Kind::kTensor || m.size() != 1 || !IsSignedIntDType(m.dtype()))
      return ctx.error("M must be a one-element int64 tensor");
    max_trip = m.GetInt(0);
  }
  bool cond = true;
  if (ctx.has_input(1))
    KILN_RETURN_IF_ERROR(ReadCond(ctx.input(1), &cond).Context(ctx.error("cond").message()));
  std::vector<Tensor> carried;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(2 + i))
      return ctx.error("loop-carried input " + std::to_string(i) + " is missing");
    carried.push_back(ctx.input(2 + i));
  }
  std::vector<std::vector<Tensor>> scans(k);
  std::vector<Tensor> outs;
  for (int64_t it = 0; it < max_trip && cond; ++it) {
    std::vector<Tensor> in;
    Tensor iter(DType::kInt64, {});
    iter.data<int64_t>()[0] = it;
    Tensor c(DType::kBool, {});
    c.data<uint8_t>()[0] = cond ? 1 : 0;
    in.push_back(iter);
    in.push_back(c);
    for (auto& v : carried) in.push_back(v);
    KILN_RETURN_IF_ERROR(ctx.subgraphs().Run(body, in, &outs));
    if (static_cast<int>(outs.size()) != 1 + n + k)
      return ctx.error("body returned " + std::to_string(outs.size()) + " values");
    KILN_RETURN_IF_ERROR(ReadCond(outs[0], &cond).Context(ctx.error("body condition").message()));
    for (int i = 0; i < n; ++i) carried[i] = std::move(outs[1 + i]);
    for (int j = 0; j < k; ++j) {
      if (outs[1 + n + j].kind() != Tensor::Kind::kTensor)
        return ctx.error("scan output " + std::to_string(j) + " must be a tensor");
      scans[j].push_back(std::move(outs[1 + n + j]));
    }
  }
  for (int i = 0; i < n && i < ctx.num_outputs(); ++i) SetOutputValue(ctx, i, carried[i]);
  for (int j = 0; j < k && n + j < ctx.num_outputs(); ++j) {
    Dims item = scans[j].empty() ? EmptyItemDims(body.values[body.outputs[1 + n + j]].type)
                                 : scans[j][0].dims();
    DType dt =
        scans[j].empty() ? BodyOutputDType(body, 1 + n + j, DType::kFloat32) : scans[j][0].dtype();
    Tensor out;
    KILN_RETURN_IF_ERROR(Stack(scans[j], 0, false, static_cast<int64_t>(scans[j].size()), item, dt,
                               &out, ctx.error("scan output " + std::to_string(j)).message()));
    ctx.output(n + j) = std::move(out);
  }
  return OkStatus();
}

// ---- Scan ----------------------------------------------------------------------------------

struct ScanAttrs {
  int n_states = 0, m_scans = 0, k_outs = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// Reads and validates the attributes; input/output ranks are checked at compute.
template <class Ctx>
Status GetScanAttrs(const Ctx& ctx, const ir::Graph& body, ScanAttrs* a) {
  const ir::Node& node = ctx.node();
  const bool v8 = ctx.opset() < 9;
  const int first = v8 ? 1 : 0;  // opset 8 starts with sequence_lens
  a->m_scans = static_cast<int>(node.attr_int("num_scan_inputs", -1));
  if (a->m_scans < 1) return ctx.error("num_scan_inputs must be a positive integer");
  a->n_states = ctx.num_inputs() - first - a->m_scans;
  if (a->n_states < 0)
    return ctx.error("has fewer inputs than num_scan_inputs (" + std::to_string(a->m_scans) + ")");
  if (static_cast<int>(body.inputs.size()) != a->n_states + a->m_scans)
    return ctx.error("body takes " + std::to_string(body.inputs.size()) + " inputs, expected " +
                     std::to_string(a->n_states + a->m_scans));
  a->k_outs = static_cast<int>(body.outputs.size()) - a->n_states;
  if (a->k_outs < 0 || ctx.num_outputs() > a->n_states + a->k_outs)
    return ctx.error("body returns " + std::to_string(body.outputs.size()) +
                     " values, which does not fit " + std::to_string(a->n_states) + " states and " +
                     std::to_string(ctx.num_outputs()) + " outputs");
  auto list = [&](const char* key, int len, std::vector<int64_t>* out) -> Status {
    *out = node.attr_ints(key, std::vector<int64_t>(len, 0));
    if (static_cast<int>(out->size()) != len)
      return ctx.error(std::string(key) + " has " + std::to_string(out->size()) +
                       " entries, expected " + std::to_string(len));
    return OkStatus();
  };
  if (v8) {
    KILN_RETURN_IF_ERROR(list("directions", a->m_scans, &a->in_dirs));
    a->in_axes.assign(a->m_scans, 0);
    a->out_axes.assign(a->k_outs, 0);
    a->out_dirs.assign(a->k_outs, 0);
  } else {
    KILN_RETURN_IF_ERROR(list("scan_input_axes", a->m_scans, &a->in_axes));
    KILN_RETURN_IF_ERROR(list("scan_input_directions", a->m_scans, &a->in_dirs));
    KILN_RETURN_IF_ERROR(list("scan_output_axes", a->k_outs, &a->out_axes));
    KILN_RETURN_IF_ERROR(list("scan_output_directions", a->k_outs, &a->out_dirs));
  }
  for (int64_t d : a->in_dirs)
    if (d != 0 && d != 1) return ctx.error("scan directions must be 0 or 1");
  for (int64_t d : a->out_dirs)
    if (d != 0 && d != 1) return ctx.error("scan output directions must be 0 or 1");
  return OkStatus();
}

Status InferScan(InferContext& ctx) {
  const ir::Graph* body = GraphAttr(ctx.node(), "body");
  if (!body) return ctx.error("missing 'body' graph attribute");
  ScanAttrs a;
  KILN_RETURN_IF_ERROR(GetScanAttrs(ctx, *body, &a));
  const int first = ctx.opset() < 9 ? 1 : 0;
  // The scan length, when the first scan input's shape is known (opset 9+ only).
  int64_t len = -1;
  if (!first && ctx.has_input(a.n_states) && ctx.input_type(a.n_states).shape_known()) {
    int64_t axis = a.in_axes[0];
    if (NormalizeAxis(axis, ctx.input_rank(a.n_states))) len = ctx.input_dims(a.n_states)[axis];
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ir::TypeInfo& bt = body->values[body->outputs[i]].type;
    DType dt = bt.dtype;
    if (i < a.n_states) {
      if (dt == DType::kUndefined && ctx.has_input(first + i)) dt = ctx.input_dtype(first + i);
      if (!first && bt.shape_known())
        ctx.set_output(i, dt, bt.dims);
      else
        ctx.set_output_dynamic(i, dt);
      continue;
    }
    int64_t axis = a.out_axes[i - a.n_states];
    if (!first && len >= 0 && bt.shape_known() && NormalizeAxis(axis, bt.dims.size() + 1)) {
      Dims d = bt.dims;
      d.insert(d.begin() + axis, len);
      ctx.set_output(i, dt, d);
    } else {
      ctx.set_output_dynamic(i, dt);
    }
  }
  return OkStatus();
}

// Runs `length` iterations over `scans` (each sliced along in_axes[i], reversed per in_dirs),
// updating `states` and collecting each iteration's scan outputs.
Status ScanIterations(ComputeContext& ctx, const ir::Graph& body, const ScanAttrs& a,
                      const std::vector<int64_t>& axes, std::vector<Tensor>& states,
                      const std::vector<Tensor>& scans, int64_t length,
                      std::vector<std::vector<Tensor>>* per_out) {
  per_out->assign(a.k_outs, {});
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Tensor> in = states;
    for (int i = 0; i < a.m_scans; ++i)
      in.push_back(SliceAxis(scans[i], axes[i], a.in_dirs[i] ? length - 1 - t : t));
    KILN_RETURN_IF_ERROR(ctx.subgraphs().Run(body, in, &outs));
    if (static_cast<int>(outs.size()) != a.n_states + a.k_outs)
      return ctx.error("body returned " + std::to_string(outs.size()) + " values");
    for (int i = 0; i < a.n_states; ++i) states[i] = std::move(outs[i]);
    for (int j = 0; j < a.k_outs; ++j) {
      if (outs[a.n_states + j].kind() != Tensor::Kind::kTensor)
        return ctx.error("scan output " + std::to_string(j) + " must be a tensor");
      (*per_out)[j].push_back(std::move(outs[a.n_states + j]));
    }
  }
  return OkStatus();
}

Status ComputeScan9(ComputeContext& ctx, const ir::Graph& body, const ScanAttrs& a) {
  std::vector<Tensor> states, scans;
  for (int i = 0; i < a.n_states + a.m_scans; ++i) {
    if (!ctx.has_input(i) || ctx.input(i).kind() != Tensor::Kind::kTensor)
      return ctx.error("input " + std::to_string(i) + " must be a tensor");
    (i < a.n_states ? states : scans).push_back(ctx.input(i));
  }
  std::vector<int64_t> axes = a.in_axes;
  int64_t length = -1;
  for (int i = 0; i < a.m_scans; ++i) {
    if (!NormalizeAxis(axes[i], scans[i].rank()))
      return ctx.error("scan_input_axes[" + std::to_string(i) +
                       "] = " + std::to_string(a.in_axes[i]) + " is out of range for rank " +
                       std::to_string(scans[i].rank()));
    int64_t l = scans[i].dim(static_cast<int>(axes[i]));
    if (length >= 0 && l != length)
      return ctx.error("scan inputs have different lengths (" + std::to_string(length) + " and " +
                       std::to_string(l) + ")");
    length = l;
  }
  std::vector<std::vector<Tensor>> per_out;
  KILN_RETURN_IF_ERROR(ScanIterations(ctx, body, a, axes, states, scans, length, &per_out));
  for (int i = 0; i < a.n_states && i < ctx.num_outputs(); ++i) SetOutputValue(ctx, i, states[i]);
  for (int j = 0; j < a.k_outs && a.n_states + j < ctx.num_outputs(); ++j) {
    const auto& items = per_out[j];
    const ir::TypeInfo& bt = body.values[body.outputs[a.n_states + j]].type;
    Dims item = items.empty() ? EmptyItemDims(bt) : items[0].dims();
    DType dt =
        items.empty() ? BodyOutputDType(body, a.n_states + j, DType::kFloat32) : items[0].dtype();
    int64_t axis = a.out_axes[j];
    if (!NormalizeAxis(axis, static_cast<int64_t>(item.size()) + 1))
      return ctx.error("scan_output_axes[" + std::to_string(j) +
                       "] = " + std::to_string(a.out_axes[j]) + " is out of range");
    Tensor out;
    KILN_RETURN_IF_ERROR(Stack(items, axis, a.out_dirs[j] != 0, length, item, dt, &out,
                               ctx.error("scan output " + std::to_string(j)).message()));
    SetOutputValue(ctx, a.n_states + j, out);
  }
  return OkStatus();
}

// Opset 8: every input has a leading batch axis and scans run along axis 1, per batch entry for
// sequence_lens[b] steps; scan outputs are zero past a batch entry's length.
Status ComputeScan8(ComputeContext& ctx, const ir::Graph& body, const ScanAttrs& a) {
  std::vector<Tensor> states, scans;
  for (int i = 0; i < a.n_states + a.m_scans; ++i) {
    if (!ctx.has_input(1 + i) || ctx.input(1 + i).kind() != Tensor::Kind::kTensor)
      return ctx.error("input " + std::to_string(1 + i) + " must be a tensor");
    const Tensor& t = ctx.input(1 + i);
    if (t.rank() < (i < a.n_states ? 1 : 2))
      return ctx.error("input " + std::to_string(1 + i) + " lacks the batch (and sequence) axes");
    (i < a.n_states ? states : scans).push_back(t);
  }
  const Tensor& ref = !states.empty() ? states[0] : scans[0];
  const int64_t batch = ref.dim(0), max_len = scans[0].dim(1);
  for (const auto& t : states)
    if (t.dim(0) != batch) return ctx.error("inputs have different batch sizes");
  for (const auto& t : scans)
    if (t.dim(0) != batch || t.dim(1) != max_len)
      return ctx.error("scan inputs have different batch sizes or lengths");
  std::vector<int64_t> lens(batch, max_len);
  if (ctx.has_input(0)) {
    const Tensor& sl = ctx.input(0);
    if (sl.dtype() != DType::kInt32 && sl.dtype() != DType::kInt64)
      return ctx.error("sequence_lens must be an int32 or int64 tensor");
    if (sl.size() != batch)
      return ctx.error("sequence_lens has " + std::to_string(sl.size()) + " values for batch " +
                       std::to_string(batch));
    lens = sl.ToInt64Vector();
    for (int64_t l : lens)
      if (l < 0 || l > max_len)
        return ctx.error("sequence length " + std::to_string(l) + " is outside [0, " +
                         std::to_string(max_len) + "]");
  }
  std::vector<std::vector<Tensor>> final_states(a.n_states), scan_rows(a.k_outs);
  std::vector<std::vector<std::vector<Tensor>>> per_batch(batch);
  std::vector<int64_t> axes(a.m_scans, 0);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> st, sc;
    for (const auto& t : states) st.push_back(SliceAxis(t, 0, b));
    for (const auto& t : scans) {
      Tensor row = SliceAxis(t, 0, b);
      // Only the first lens[b] steps take part, so reversal starts at the last valid step.
      if (lens[b] < max_len) {
        std::vector<Tensor> steps;
        for (int64_t s = 0; s < lens[b]; ++s) steps.push_back(SliceAxis(row, 0, s));
        Dims item(row.dims().begin() + 1, row.dims().end());
        KILN_RETURN_IF_ERROR(Stack(steps, 0, false, lens[b], item, row.dtype(), &row,
                                   ctx.error("scan input").message()));
      }
      sc.push_back(row);
    }
    KILN_RETURN_IF_ERROR(ScanIterations(ctx, body, a, axes, st, sc, lens[b], &per_batch[b]));
    for (int i = 0; i < a.n_states; ++i) final_states[i].push_back(st[i]);
  }
  for (int i = 0; i < a.n_states && i < ctx.num_outputs(); ++i) {
    const auto& items = final_states[i];
    Tensor out;
    Dims item = items.empty() ? Dims{} : items[0].dims();
    DType dt = items.empty() ? states[i].dtype() : items[0].dtype();
    KILN_RETURN_IF_ERROR(
        Stack(items, 0, false, batch, item, dt, &out, ctx.error("state").message()));
    SetOutputValue(ctx, i, out);
  }
  for (int j = 0; j < a.k_outs && a.n_states + j < ctx.num_outputs(); ++j) {
    // Item shape and type from any batch entry that ran.
    Dims item = EmptyItemDims(body.values[body.outputs[a.n_states + j]].type);
    DType dt = BodyOutputDType(body, a.n_states + j, DType::kFloat32);
    for (const auto& pb : per_batch)
      if (!pb[j].empty()) {
        item = pb[j][0].dims();
        dt = pb[j][0].dtype();
        break;
      }
    std::vector<Tensor> rows;
    for (int64_t b = 0; b < batch; ++b) {
      Tensor row;
      KILN_RETURN_IF_ERROR(Stack(per_batch[b][j], 0, false, max_len, item, dt, &row,
                                 ctx.error("scan output " + std::to_string(j)).message()));
      rows.push_back(std::move(row));
    }
    Dims row_dims = item;
    row_dims.insert(row_dims.begin(), max_len);
    Tensor out;
    KILN_RETURN_IF_ERROR(Stack(rows, 0, false, batch, row_dims, dt, &out,
                               ctx.error("scan output " + std::to_string(j)).message()));
    SetOutputValue(ctx, a.n_states + j, out);
  }
  return OkStatus();
}

Status ComputeScan(ComputeContext& ctx) {
  const ir::Graph& body = *GraphAttr(ctx.node(), "body");
  ScanAttrs a;
  KILN_RETURN_IF_ERROR(GetScanAttrs(ctx, body, &a));
  return ctx.opset() < 9 ? ComputeScan8(ctx, body, a) : ComputeScan9(ctx, body, a);
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  r.Register("If", InferIf, ComputeIf);
  r.Register("Loop", InferLoop, ComputeLoop);
  r.Register("Scan", InferScan, ComputeScan);
}

}  // namespace kiln::ops
