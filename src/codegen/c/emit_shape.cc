// C emitters for ops that only move elements: copies (Identity, Reshape, ... when the planner
// could not make them views), Concat and Split as block copies, and every op whose output element
// is a fixed input element (Transpose, Slice, Expand, Tile, Pad, DepthToSpace, Gather with
// constant indices, ...). For the last group the host executor's own kernel is run once at compile
// time on the element indices of the input ("iota"), which gives the source of every output
// element; the emitter then writes the map as strided loops when it is affine, else as a table.
// One source of truth for the semantics, no second implementation to get wrong.
#include <cstring>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "ops/op.h"
#include "ops/op_traits.h"

namespace kiln::codegen::c {
namespace {

constexpr int64_t kZero = -1;      // map entry: the element is zero
constexpr int64_t kPadValue = -2;  // map entry: the element is Pad's constant_value (input 2)

Status EmitCopy(NodeContext& ctx) {
  if (!ctx.has_output(0)) return OkStatus();
  ctx.Line("memcpy(out0, in0, " + ByteCount(ctx.output_dtype(0), NumElements(ctx.output_dims(0))) +
           ");");
  return OkStatus();
}

// Dropout: a copy and a mask of ones at inference. Training mode (opset 12+, training_mode
// true, possibly known only at run time) keeps x / (1 - ratio) where a uniform draw >= ratio,
// drawn from MT19937 seeded with the `seed` attribute as the host does, so seeded models
// reproduce the reference; without a seed the draws could not be reproduced and are refused.
Status EmitDropout(NodeContext& ctx) {
  const bool may_train =
      ctx.opset() >= 12 && ctx.has_input(2) &&
      !(ctx.input_constant(2) && static_cast<const uint8_t*>(ctx.input_constant(2)->raw())[0] == 0);
  DType t = ctx.input_dtype(0);
  int64_t n = NumElements(ctx.input_dims(0));
  if (!may_train) {
    KILN_RETURN_IF_ERROR(EmitCopy(ctx));
    if (ctx.has_output(1)) ctx.Line("memset(out1, 1, " + ByteCount(DType::kBool, n) + ");");
    return OkStatus();
  }
  if (!ctx.node().attr("seed"))
    return ctx.error("training mode without a seed draws irreproducible numbers");
  if (ctx.has_output(1) && ctx.output_dtype(1) != DType::kBool)
    return ctx.error("the mask must be bool");
  ctx.UseKernel("mt19937");
  ctx.SetCanFail();
  DType ct = ComputeType(t);
  std::string ratio =
      ctx.has_input(1) ? "(double)" + Load(ctx, ctx.input_dtype(1), "in1[0]") : "0.5";
  ctx.Line("const double ratio = " + ratio + ";");
  ctx.Line("const int train = in2[0] != 0 && ratio > 0;");
  ctx.Line("kiln_mt19937 *gen = (kiln_mt19937 *)" + ctx.scratch(sizeof(uint32_t) * 624 + 16) + ";");
  ctx.Line("const " + CType(ct) + " scale = train ? (" + CType(ct) +
           ")(1.0 / (1.0 - ratio)) : " + CNumber(ct, 1) + ";");
  ctx.Line("if (in2[0] != 0 && (ratio < 0 || ratio >= 1)) return KILN_ERROR_INVALID_DATA;");
  ctx.Line("kiln_mt19937_seed(gen, (uint32_t)" +
           std::to_string(static_cast<uint32_t>(ctx.node().attr_int("seed", 0))) + "u);");
  ctx.Line("for (size_t i = 0; i < " + std::to_string(n) + "; ++i) {");
  ctx.Line("  const int keep = !train || kiln_mt19937_uniform(gen) >= ratio;");
  ctx.Line("  out0[i] = keep ? " + Store(ctx, t, Load(ctx, t, "in0[i]") + " * scale") + " : " +
           Store(ctx, t, CNumber(ct, 0)) + ";");
  if (ctx.has_output(1)) ctx.Line("  out1[i] = (uint8_t)keep;");
  ctx.Line("}");
  return OkStatus();
}

int64_t NormAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

Status EmitConcat(NodeContext& ctx) {
  const Dims& od = ctx.output_dims(0);
  int64_t axis = NormAxis(ctx.node().attr_int("axis", 1), od.size());
  if (axis < 0 || axis >= static_cast<int64_t>(od.size())) return ctx.error("axis out of range");
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= od[a];
  int64_t row = NumElements(od) / std::max<int64_t>(outer, 1);
  if (NumElements(od) == 0) return OkStatus();
  DType t = ctx.output_dtype(0);
  int64_t off = 0;
  std::vector<std::pair<int, int64_t>> parts;  // (input, elements per outer step)
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    int64_t n = NumElements(ctx.input_dims(i)) / std::max<int64_t>(outer, 1);
    if (n > 0) parts.push_back({i, n});
  }
  if (outer == 1) {
    for (auto [i, n] : parts) {
      ctx.Line("memcpy(out0 + " + std::to_string(off) + ", " + NodeContext::in(i) + ", " +
               ByteCount(t, n) + ");");
      off += n;
    }
    return OkStatus();
  }
  ctx.Line("for (size_t i = 0; i < " + std::to_string(outer) + "; ++i) {");
  for (auto [i, n] : parts) {
    ctx.Line("  memcpy(out0 + i * " + std::to_string(row) + " + " + std::to_string(off) + ", " +
             NodeContext::in(i) + " + i * " + std::to_string(n) + ", " + ByteCount(t, n) + ");");
    off += n;
  }
  ctx.Line("}");
  return OkStatus();
}

Status EmitSplit(NodeContext& ctx) {
  const Dims& id = ctx.input_dims(0);
  int64_t axis = NormAxis(ctx.node().attr_int("axis", 0), id.size());
  if (axis < 0 || axis >= static_cast<int64_t>(id.size())) return ctx.error("axis out of range");
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= id[a];
  if (NumElements(id) == 0) return OkStatus();
  int64_t row = NumElements(id) / outer, off = 0;
  DType t = ctx.input_dtype(0);
  if (outer > 1) ctx.Line("for (size_t i = 0; i < " + std::to_string(outer) + "; ++i) {");
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    int64_t n = ctx.has_output(k) || ctx.node().outputs[k] >= 0
                    ? NumElements(ctx.output_dims(k)) / outer
                    : 0;
    if (ctx.has_output(k) && n > 0) {
      if (outer == 1)
        ctx.Line("memcpy(" + NodeContext::out(k) + ", in0 + " + std::to_string(off) + ", " +
                 ByteCount(t, n) + ");");
      else
        ctx.Line("  memcpy(" + NodeContext::out(k) + " + i * " + std::to_string(n) +
                 ", in0 + i * " + std::to_string(row) + " + " + std::to_string(off) + ", " +
                 ByteCount(t, n) + ");");
    }
    off += n;
  }
  if (outer > 1) ctx.Line("}");
  return OkStatus();
}

// Runs the node's host kernel on element indices. Returns, per output element, the input
// element it copies, or kZero / kPadValue.
Expected<std::vector<int64_t>> SourceMap(NodeContext& ctx) {
  // Pad before opset 11 takes its value as an attribute: mark those elements kPadValue too.
  ir::Node legacy_pad;
  bool legacy = ctx.node().op_type == "Pad" && ctx.opset() < 11 && ctx.node().attr("value");
  if (legacy) {
    legacy_pad = ctx.node();
    legacy_pad.attrs["value"].f = static_cast<float>(kPadValue + 1);
  }
  const ir::Node& n = legacy ? legacy_pad : ctx.node();
  const ops::OpSchema* schema = ops::OpRegistry::Global().Find(n.domain, n.op_type);
  if (!schema) return ctx.error("no host kernel");
  Tensor iota(DType::kInt64, ctx.input_dims(0));
  for (int64_t i = 0; i < iota.size(); ++i) iota.data<int64_t>()[i] = i + 1;  // 0 stays "zero"
  Tensor pad_value = Tensor::FromVector<int64_t>(DType::kInt64, {}, {kPadValue + 1});
  ops::ComputeContext cc(n, ctx.graph(), ctx.opset());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) {
      cc.inputs_.push_back(nullptr);
    } else if (i == 0) {
      cc.inputs_.push_back(&iota);
    } else if (n.op_type == "Pad" && i == 2) {
      cc.inputs_.push_back(&pad_value);
    } else if (const Tensor* c = ctx.input_constant(i)) {
      cc.inputs_.push_back(c);
    } else {
      return ctx.error("input " + std::to_string(i) + " must be a compile-time constant");
    }
  }
  std::vector<Tensor> outs(n.outputs.size() + ops::kScratchOutputs);
  outs[0] = Tensor(DType::kInt64, ctx.output_dims(0));
  for (auto& t : outs) cc.outputs_.push_back(&t);
  Status st = OkStatus();
  try {
    st = schema->compute(cc);
  } catch (const std::exception& e) {
    st = Error(e.what());
  }
  if (!st.ok()) return ctx.error("cannot evaluate its element map: " + st.message());
  if (outs[0].dims() != ctx.output_dims(0) || outs[0].dtype() != DType::kInt64)
    return ctx.error("its element map has unexpected dims");
  std::vector<int64_t> map(outs[0].data<int64_t>(), outs[0].data<int64_t>() + outs[0].size());
  for (auto& m : map) m -= 1;
  return map;
}

// True when map[j] == base + sum_k idx_k(j) * strides[k] for every output index j.
bool AffineMap(const std::vector<int64_t>& map, const Dims& dims, int64_t* base,
               std::vector<int64_t>* strides) {
  if (map.empty()) return false;
  std::vector<int64_t> unit = Strides(dims);
  *base = map[0];
  strides->assign(dims.size(), 0);
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] > 1) (*strides)[k] = map[unit[k]] - *base;
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t expect = *base;
  for (size_t j = 0; j < map.size(); ++j) {
    if (map[j] != expect || map[j] < 0) return false;
    for (size_t k = dims.size(); k-- > 0;) {  // next index, row-major
      expect += (*strides)[k];
      if (++idx[k] < dims[k]) break;
      expect -= (*strides)[k] * dims[k];
      idx[k] = 0;
    }
  }
  return true;
}

Status EmitMove(NodeContext& ctx) {
  if (ctx.output_dtype(0) != ctx.input_dtype(0)) return ctx.error("changes the element type");
  const Dims& od = ctx.output_dims(0);
  if (NumElements(od) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> map, SourceMap(ctx));
  int64_t base = 0;
  std::vector<int64_t> strides;
  if (AffineMap(map, od, &base, &strides)) {
    // Merge axes the source walks contiguously with their inner neighbour (a plain copy becomes
    // one loop), as the host's StridedCopy does.
    Dims md;
    std::vector<int64_t> ms, os;
    std::vector<int64_t> ostr = Strides(od);
    for (size_t k = 0; k < od.size(); ++k) {
      if (od[k] == 1) continue;
      if (!md.empty() && ms.back() == strides[k] * od[k]) {
        md.back() *= od[k];
        ms.back() = strides[k];
        os.back() = ostr[k];
      } else {
        md.push_back(od[k]);
        ms.push_back(strides[k]);
        os.push_back(ostr[k]);
      }
    }
    LoopNest(ctx, md, [&](const std::vector<std::string>& idx) {
      ctx.Line("out0[" + IndexExpr(idx, os) + "] = in0[" + IndexExpr(idx, ms, base) + "];");
    });
    return OkStatus();
  }
  // A table of source indices (int32, or int16 when small enough).
  int64_t hi = 0;
  for (int64_t m : map) hi = std::max(hi, m);
  if (map.size() > (size_t{1} << 22)) return ctx.error("the element map is too large for a table");
  std::string it = hi < 32768 ? "int16_t" : "int32_t";
  if (hi >= (int64_t{1} << 31)) return ctx.error("the input is too large for an index table");
  std::string table = "static const " + it + " " + ctx.function_name + "_map[" +
                      std::to_string(map.size()) + "] = {";
  for (size_t j = 0; j < map.size(); ++j)
    table += (j % 16 ? " " : "\n    ") + std::to_string(map[j]) + ",";
  ctx.Table(table + "\n};\n");
  DType t = ctx.output_dtype(0);
  ctx.Line("for (size_t i = 0; i < " + std::to_string(map.size()) + "; ++i) {");
  ctx.Line("  " + it + " s = " + ctx.function_name + "_map[i];");
  bool pad = false, zero = false;
  for (int64_t m : map) {
    pad = pad || m == kPadValue;
    zero = zero || m == kZero;
  }
  std::string fill = "(" + CType(t) + ")0";
  if (pad && ctx.has_input(2))
    fill = "in2[0]";
  else if (pad)
    fill = Store(ctx, t, CNumber(ComputeType(t), ctx.node().attr_float("value", 0)));
  if (pad || zero)
    ctx.Line("  out0[i] = s >= 0 ? in0[s] : " +
             (pad && zero ? "(s == -2 ? " + fill + " : (" + CType(t) + ")0)" : fill) + ";");
  else
    ctx.Line("  out0[i] = in0[s];");
  ctx.Line("}");
  return OkStatus();
}

// com.kiln ChannelShuffle (ops/shape_ops.cc): one plane copy per channel (its element map is not
// affine in the output's dims, so EmitMove would write it as a table as large as the tensor).
Status EmitChannelShuffle(NodeContext& ctx) {
  const Dims& d = ctx.input_dims(0);
  const int64_t g = ctx.node().attr_int("group", 1), c = d[1], per_group = c / g;
  const int64_t planes = d[0], plane = NumElements(d) / std::max<int64_t>(1, planes * c);
  if (NumElements(d) == 0) return OkStatus();
  const std::string P = std::to_string(plane), C = std::to_string(c), G = std::to_string(g),
                    Cg = std::to_string(per_group);
  ctx.Line("for (size_t n = 0; n < " + std::to_string(planes) + "; ++n)");
  ctx.Line("  for (size_t i = 0; i < " + Cg + "; ++i)");
  ctx.Line("    for (size_t j = 0; j < " + G + "; ++j)");
  ctx.Line("      memcpy(out0 + (n * " + C + " + i * " + G + " + j) * " + P + ", in0 + (n * " + C +
           " + j * " + Cg + " + i) * " + P + ", " + ByteCount(ctx.input_dtype(0), plane) + ");");
  return OkStatus();
}

// Gather with indices known only at run time (embedding lookups): bounds-checked.
Status EmitGather(NodeContext& ctx) {
  if (ctx.input_constant(1)) return EmitMove(ctx);
  const Dims& dd = ctx.input_dims(0);
  int64_t axis = NormAxis(ctx.node().attr_int("axis", 0), dd.size());
  if (axis < 0 || axis >= static_cast<int64_t>(dd.size())) return ctx.error("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= dd[a];
  for (size_t a = axis + 1; a < dd.size(); ++a) inner *= dd[a];
  int64_t n = NumElements(ctx.input_dims(1)), extent = dd[axis];
  if (NumElements(ctx.output_dims(0)) == 0) return OkStatus();
  ctx.SetCanFail();
  DType t = ctx.input_dtype(0);
  const std::string ext = std::to_string(extent);
  For(ctx, outer, "o", [&](const Ix& o) {
    For(ctx, n, "j", [&](const Ix& j) {
      ctx.Line("int64_t k = (int64_t)in1[" + j.str() + "];");
      ctx.Line("if (k < 0) k += " + ext + ";");
      ctx.Line("if (k < 0 || k >= " + ext + ") return KILN_ERROR_INVALID_DATA;");
      const Ix k = Ix::Var("(size_t)k");
      ctx.Line("memcpy(" + Offset("out0", (o * n + j) * inner) + ", " +
               Offset("in0", (o * extent + k) * inner) + ", " + ByteCount(t, inner) + ");");
    });
  });
  return OkStatus();
}

// ConstantOfShape too large to fold: a fill loop.
Status EmitConstantOfShape(NodeContext& ctx) {
  DType t = ctx.output_dtype(0);
  const ir::Attribute* a = ctx.node().attr("value");
  std::string v = "(" + CType(t) + ")0";
  if (a && a->t.size() == 1) v = CLiteral(t, a->t.raw());
  int64_t n = NumElements(ctx.output_dims(0));
  ctx.Line("for (size_t i = 0; i < " + std::to_string(n) + "; ++i) out0[i] = " + v + ";");
  return OkStatus();
}

}  // namespace

void RegisterShapeEmitters(EmitterRegistry& r) {
  for (const std::string& op : ops::OpsWithTrait(ops::kView)) r.Register(op, EmitCopy);
  r.Register("Dropout", EmitDropout);
  r.Register("Concat", EmitConcat);
  r.Register("Split", EmitSplit);
  for (const char* op : {"Transpose", "Slice", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
                         "Pad", "CenterCropPad", "Compress", "GatherElements", "GatherND"})
    r.Register(op, EmitMove);
  r.Register("ChannelShuffle", EmitChannelShuffle, ops::kKilnDomain);
  r.Register("Gather", EmitGather);
  r.Register("ConstantOfShape", EmitConstantOfShape);
}

}  // namespace kiln::codegen::c
