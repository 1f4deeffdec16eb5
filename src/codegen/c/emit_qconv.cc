// C emitters for the integer convolutions: ConvInteger, ONNX's QLinearConv and fuse-qdq's
// (com.kiln) QLinearConv; and fuse-qdq's QLinearGlobalAveragePool and QLinearAdd. The general
// kernel (kernels/reference/qconv.c) takes any 8-bit types and zero points; fuse-qdq's convolutions
// with constant int8 weights, as `kiln quantize` writes them, take the packed kernel
// (kernels/reference/qconv_packed.c), their weights rearranged here, as fuse-qdq's QLinearMatMul
// takes the packed fully connected kernel (EmitQMatMulPacked, kernels/reference/qmatmul_packed.c).
#include "codegen/c/emit_qconv.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"
#include "kernels/reference/conv_shape_of.h"
#include "ops/conv_geometry.h"
#include "ops/quantize.h"

namespace kiln::codegen::c {
namespace {

using ops::ConvShape;

std::string Str(int64_t v) { return std::to_string(v); }

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

// A constant input's integer values, or `fallback` (one value) where the input is absent;
// nullopt where it is computed.
std::optional<std::vector<int64_t>> ConstantValues(NodeContext& ctx, int input, int64_t fallback) {
  if (!ctx.has_input(input)) return std::vector<int64_t>{fallback};
  if (!ctx.input_constant(input)) return std::nullopt;
  return *ConstantInts(ctx, input);  // a constant: no error
}

// The constants of a node on a packed kernel, or nullopt where its inputs are not what the kernel
// takes: constant int8 weights (input 3) with zero point 0; constant zero points, bias and scales.
struct PackedInputs {
  const Tensor* w;
  int64_t x_zero, y_zero;
  std::vector<int64_t> bias;  // one value, or one per output channel
};
std::optional<PackedInputs> PackedInputsOf(NodeContext& ctx) {
  const Tensor* w = ctx.input_constant(3);
  const auto x_zero = ConstantValues(ctx, 2, 0), w_zero = ConstantValues(ctx, 5, 0),
             y_zero = ConstantValues(ctx, 7, 0), bias = ConstantValues(ctx, 8, 0);
  if (!w || w->dtype() != DType::kInt8 || !x_zero || x_zero->size() != 1 || !w_zero || !y_zero ||
      y_zero->size() != 1 || !bias ||
      std::any_of(w_zero->begin(), w_zero->end(), [](int64_t z) { return z != 0; }))
    return std::nullopt;
  for (int i : {1, 4, 6})
    if (!ctx.input_constant(i)) return std::nullopt;
  return PackedInputs{w, (*x_zero)[0], (*y_zero)[0], *bias};
}

// The bias with x's zero point folded in, bias - x_zero * sum(w), per output channel, given each
// channel's weight sum; false where a value leaves int32.
bool FoldedBias(const PackedInputs& in, int64_t channels,
                const std::function<int64_t(int64_t)>& weight_sum, std::vector<int64_t>* folded) {
  folded->resize(channels);
  for (int64_t m = 0; m < channels; ++m) {
    (*folded)[m] = in.bias[in.bias.size() == 1 ? 0 : m] - in.x_zero * weight_sum(m);
    if ((*folded)[m] < INT32_MIN || (*folded)[m] > INT32_MAX) return false;
  }
  return true;
}

// The node's folded bias and requantization tables of `channels` channels at file scope, in one
// struct named after its function (f = "<function>_tables": f.bias, f.mult, f.shift; one base
// address for the three), so that functions the node adds see them and fold them in. Returns the
// end of a packed kernel's parameters struct: "f.bias, f.mult, f.shift".
Expected<std::string> PackedTables(NodeContext& ctx, int64_t channels,
                                   const std::vector<int64_t>& folded, bool* right_shifts) {
  KILN_ASSIGN_OR_RETURN(auto values, FixedPointValues(ctx, 1, 4, 6, channels, right_shifts));
  const std::string f = ctx.function_name + "_tables", n = Str(channels);
  std::string list;
  for (size_t m = 0; m < folded.size(); ++m) list += (m ? ", " : "") + Str(folded[m]);
  ctx.Table("static const struct {\n  int32_t bias[" + Str(static_cast<int64_t>(folded.size())) +
            "];\n  int32_t mult[" + n + "];\n  int8_t shift[" + n + "];\n} " + f + " = {{" + list +
            "}, {" + values.first + "}, {" + values.second + "}};\n");
  return f + ".bias, " + f + ".mult, " + f + ".shift";
}

// The output's zero point and range as a packed kernel's parameters take them.
std::string OutputRange(NodeContext& ctx, const PackedInputs& in) {
  return Str(in.y_zero) + ", " + (ctx.output_dtype(0) == DType::kInt8 ? "-128, 127" : "0, 255");
}

// fuse-qdq's QLinearConv on the packed kernel, when its weights are constant int8 with zero point
// 0 and its zero points, scales and bias constant (what `kiln quantize` writes): the weights
// rearranged for the kernel (qpacked_layout.c) and x's zero point folded into the bias. False,
// emitting nothing, where the node is not of that form.
Expected<bool> EmitQConvPacked(NodeContext& ctx, const ConvShape& s) {
  const std::optional<PackedInputs> in = PackedInputsOf(ctx);
  if (!in) return false;
  kiln_conv_shape k;
  if (!kernels::reference::ToKilnConvShape(s, false, &k)) return false;
  const int64_t cg = s.C / s.group, mg = s.M / s.group;
  const int64_t K = cg * k.k[0] * k.k[1] * k.k[2];
  const bool depthwise = cg == 1 && mg == 1 && k.in[0] == 1 && k.k[0] == 1;
  const int8_t* wv = in->w->data<int8_t>();
  std::vector<int64_t> folded;
  if (!FoldedBias(
          *in, s.M,
          [&](int64_t m) { return std::accumulate(wv + m * K, wv + (m + 1) * K, int64_t{0}); },
          &folded))
    return false;
  // The general path's weights rearranged.
  const int64_t pairs = (mg + 1) / 2, k4 = kiln_qconv_packed_k4(K);
  Tensor packed(DType::kInt8, {s.group * pairs * 2 * k4});  // zero where K < k4
  int8_t* pv = packed.data<int8_t>();
  for (int64_t g = 0; g < s.group && !depthwise; ++g)  // an odd last channel paired with itself
    for (int64_t t = 0; t < pairs; ++t)
      for (int64_t r = 0; r < 2; ++r) {
        const int64_t m = g * mg + std::min(2 * t + r, mg - 1);
        for (int64_t i = 0; i < K; ++i)
          pv[(g * pairs + t) * 2 * k4 + kiln_qconv_packed_slot(i, r, 1)] = wv[m * K + i];
      }
  bool right_shifts = false;
  KILN_ASSIGN_OR_RETURN(std::string init, ConvShapeInit(ctx, s, false));
  ctx.UseKernel("qconv_packed");
  ctx.SetOutOfLine();
  const std::string f = ctx.function_name + "_";
  KILN_ASSIGN_OR_RETURN(std::string tables, PackedTables(ctx, s.M, folded, &right_shifts));
  ctx.Table("static const kiln_conv_shape " + f + "shape = " + init + ";\n");
  // As a parameter array (the depthwise path's in the model's order, the same array as the
  // model's where nothing else rearranges it), so that the struct below is a constant.
  const std::string weights = ctx.parameter(ctx.input_name(3) + (depthwise ? "" : "_packed"),
                                            depthwise ? *in->w : std::move(packed));
  const int64_t out_size = static_cast<int64_t>(k.out[0]) * k.out[1] * k.out[2];
  const bool x_signed = ctx.input_dtype(0) == DType::kInt8;
  ctx.Table("static const kiln_qconv_packed_params " + f + "params = {" + weights + ", " + Str(k4) +
            ", " + Str(out_size) + ", " + tables + ", " + Str(in->x_zero) + ", " + Str(x_signed) +
            ", " + OutputRange(ctx, *in) + ", " + Str(right_shifts) + "};\n");
  const std::string x = "(const uint8_t *)" + NodeContext::in(0), y = "(uint8_t *)out0";
  if (depthwise) {
    const std::string scratch =
        ctx.scratch(2 * static_cast<size_t>(kiln_qconv_packed_depthwise_scratch(&k)));
    ctx.Line("kiln_qconv_packed_depthwise(" + x + ", &" + f + "shape, &" + f +
             "params, (int16_t *)" + scratch + ", " + y + ");");
    return true;
  }
  ctx.Table("KILN_NOINLINE static void " + f +
            "block(const int8_t *w, const int16_t *col, uint8_t *y0, ptrdiff_t m, int block) {\n"
            "  kiln_qconv_packed_block(w, col, &" +
            f + "params, y0, m, block);\n}\n");
  const std::string scratch = ctx.scratch(4 * static_cast<size_t>(k4));  // two columns
  ctx.Line("kiln_qconv_packed_run(" + x + ", &" + f + "shape, &" + f + "params, (int16_t *)" +
           scratch + ", " + y + ", " + f + "block);");
  return true;
}

Status EmitQConv(NodeContext& ctx, bool qlinear) {
  const int xi = 0, wi = qlinear ? 3 : 1, xzi = 2, wzi = qlinear ? 5 : 3;
  if (!ctx.has_input(xi) || !ctx.has_input(wi)) return ctx.error("needs inputs x and w");
  DType xt = ctx.input_dtype(xi), wt = ctx.input_dtype(wi), yt = ctx.output_dtype(0);
  if (!Is8Bit(xt) || !Is8Bit(wt)) return ctx.error("x and w must be int8 or uint8");
  if (qlinear ? !Is8Bit(yt) : yt != DType::kInt32) return ctx.error("unexpected output dtype");
  const Dims& x = ctx.input_dims(xi);
  const Dims& w = ctx.input_dims(wi);
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    return ctx.error("x must have 1 to 3 spatial dims, w the rank of x");
  ConvShape s;
  const std::string err = ops::ConvShapeOf(ctx.node(), x, w, nullptr, &s);
  if (!err.empty()) return ctx.error(err);
  Dims want = {s.N, s.M};
  want.insert(want.end(), s.geom.out.begin(), s.geom.out.end());
  if (want != ctx.output_dims(0))
    return ctx.error("output dims differ from the geometry's " + DimsToString(want));
  if (NumElements(want) == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  if (qlinear && ctx.node().domain == ops::kKilnDomain) {
    KILN_ASSIGN_OR_RETURN(bool packed, EmitQConvPacked(ctx, s));
    if (packed) return OkStatus();
  }
  const int64_t xflip = xt == DType::kInt8 ? 128 : 0, wflip = wt == DType::kInt8 ? 128 : 0;
  // Per output channel m: the zero points (in the kernels' flipped domain), bias, multiplier and
  // y zero point, as C expressions (literals when the inputs are constants).
  auto int_at = [&](int input, int64_t flip, int64_t channels, std::string* e) -> Status {
    if (!ctx.has_input(input)) {
      *e = Str(flip);
      return OkStatus();
    }
    if (!Is8Bit(ctx.input_dtype(input)) && ctx.input_dtype(input) != DType::kInt32)
      return ctx.error("input " + Str(input) + " has an unexpected dtype");
    const int64_t size = NumElements(ctx.input_dims(input));
    if (size != 1 && size != channels)
      return ctx.error("input " + Str(input) + " must have " +
                       (channels == 1 ? std::string("1") : "1 or " + Str(channels)) + " elements");
    if (const Tensor* c = ctx.input_constant(input); c && size == 1) {
      *e = Str(static_cast<int64_t>(ElementAsDouble(*c, 0)) + flip);
      return OkStatus();
    }
    *e = "(int32_t)" + NodeContext::in(input) + (size == 1 ? "[0]" : "[m]") +
         (flip ? " + " + Str(flip) : "");
    return OkStatus();
  };
  std::string xz, wz, bias = "0", mul = "0.0", yz = "0.0";
  KILN_RETURN_IF_ERROR(int_at(xzi, xflip, 1, &xz));
  KILN_RETURN_IF_ERROR(int_at(wzi, wflip, s.M, &wz));
  int64_t lo = 0, hi = 0;
  if (qlinear) {
    for (int i : {1, 4, 6})
      if (!IsFloatType(ctx.input_dtype(i))) return ctx.error("the scales must be floating-point");
    const int64_t ws_size = NumElements(ctx.input_dims(4));
    if (NumElements(ctx.input_dims(1)) != 1 || NumElements(ctx.input_dims(6)) != 1)
      return ctx.error("x_scale and y_scale must be scalars");
    if (ws_size != 1 && ws_size != s.M) return ctx.error("w_scale must have 1 or M elements");
    const Tensor *xs = ctx.input_constant(1), *ws = ctx.input_constant(4),
                 *ys = ctx.input_constant(6);
    if (xs && ws && ys) {  // the host's multipliers, computed now
      std::string list;
      for (int64_t m = 0; m < ws_size; ++m)
        list +=
            (m ? ", " : "") + CNumber(DType::kFloat64, ops::RequantMultiplier(*xs, 0, *ws, m, *ys));
      if (ws_size == 1) {
        mul = list;
      } else {
        ctx.Line("static const double mul[" + Str(s.M) + "] = {" + list + "};");
        mul = "mul[m]";
      }
    } else {  // as the host's Multiplier: rounded in the scale type at each step
      DType st = ctx.input_dtype(1);
      std::string a = "(double)" + Load(ctx, st, "in1[0]"),
                  b = "(double)" +
                      Load(ctx, ctx.input_dtype(4), ws_size == 1 ? "in4[0]" : "in4[m]");
      std::string y = Load(ctx, ctx.input_dtype(6), "in6[0]");
      if (st == DType::kFloat64) {
        mul = "(" + a + " * " + b + " / (double)" + y + ")";
      } else if (st == DType::kFloat32) {
        mul = "(double)((float)(" + a + " * " + b + ") / (float)" + y + ")";
      } else {
        std::string ab = Load(ctx, st, Store(ctx, st, "(float)(" + a + " * " + b + ")"));
        mul = "(double)" + Load(ctx, st, Store(ctx, st, ab + " / (float)" + y));
      }
    }
    if (ctx.has_input(7)) {
      if (!Is8Bit(ctx.input_dtype(7)) || NumElements(ctx.input_dims(7)) < 1)
        return ctx.error("y_zero_point must be an 8-bit scalar");
      const Tensor* c = ctx.input_constant(7);
      yz = c ? CNumber(DType::kFloat64, ElementAsDouble(*c, 0)) : "(double)in7[0]";
    }
    lo = yt == DType::kInt8 ? -128 : 0;
    hi = yt == DType::kInt8 ? 127 : 255;
    if (ctx.has_input(8)) {
      if (ctx.input_dtype(8) != DType::kInt32 || ctx.input_dims(8) != Dims{s.M})
        return ctx.error("B must be int32 of shape [M]");
      bias = "in8[m]";
    }
  }
  KILN_ASSIGN_OR_RETURN(std::string init, ConvShapeInit(ctx, s, false));
  ctx.UseKernel("qconv");
  ctx.Line("static const kiln_conv_shape shape = " + init + ";");
  std::string fixed = "NULL, NULL";
  if (qlinear && ctx.node().domain == ops::kKilnDomain) {  // fuse-qdq's: fixed point
    KILN_ASSIGN_OR_RETURN(auto tables, FixedPointTables(ctx, 1, 4, 6, s.M));
    ctx.Line(tables.first);
    ctx.Line(tables.second);
    fixed = "mult, shift";
  }
  ctx.Line("static const kiln_qconv_params params = {" + Str(xflip) + ", " + Str(wflip) + ", " +
           Str(lo) + ", " + Str(hi) + ", " + fixed + "};");
  // A constant per-channel w zero point is a table.
  if (const Tensor* c = ctx.has_input(wzi) ? ctx.input_constant(wzi) : nullptr;
      c && c->size() > 1) {
    std::string list;
    for (int64_t m = 0; m < s.M; ++m)
      list += (m ? ", " : "") + Str(static_cast<int64_t>(ElementAsDouble(*c, m)) + wflip);
    ctx.Line("static const int32_t w_zero[" + Str(s.M) + "] = {" + list + "};");
    wz = "w_zero[m]";
  }
  std::string xin = "(const uint8_t *)" + NodeContext::in(xi),
              win = "(const uint8_t *)" + NodeContext::in(wi);
  ctx.Line("ptrdiff_t m;");
  ctx.Line("for (m = 0; m < " + Str(s.M) + "; ++m)");
  ctx.Line("  kiln_qconv_run(" + xin + ", " + win + ", " +
           (qlinear ? "NULL, (uint8_t *)out0" : "out0, NULL") + ", &shape, &params, m, " + xz +
           ", " + wz + ", " + bias + ", " + mul + ", " + yz + ");");
  return OkStatus();
}

// fuse-qdq's QLinearGlobalAveragePool: per image and channel, the int32 sum of the plane less
// plane * x_zero, requantized in fixed point as on the host (ops/quantize_integer.cc).
Status EmitQGlobalAveragePool(NodeContext& ctx) {
  if (!ctx.has_input(0) || !Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.output_dtype(0)))
    return ctx.error("X and Y must be int8 or uint8");
  const Dims& x = ctx.input_dims(0);
  const Tensor *xs = ctx.input_constant(1), *ys = ctx.input_constant(3);
  const auto x_zero = ConstantValues(ctx, 2, 0), y_zero = ConstantValues(ctx, 4, 0);
  if (!xs || !ys || xs->size() != 1 || ys->size() != 1 || !x_zero || x_zero->size() != 1 ||
      !y_zero || y_zero->size() != 1)
    return ctx.error("needs constant scalar scales and zero points");
  if (x.size() < 3) return ctx.error("X must have a batch, channel and spatial dims");
  const int64_t rows = x[0] * x[1], plane = rows ? NumElements(x) / rows : 0;
  if (rows == 0) {
    ctx.Line("/* no elements */");
    return OkStatus();
  }
  int32_t mult = 0, shift = 0;
  kiln_requant_multiplier(ops::PoolRequantMultiplier(*xs, *ys, plane), &mult, &shift);
  const bool y_signed = ctx.output_dtype(0) == DType::kInt8;
  ctx.UseKernel("requant");
  ctx.Line("ptrdiff_t r, i;");
  ctx.Line("for (r = 0; r < " + Str(rows) + "; ++r) {");
  ctx.Line("  const " + CType(ctx.input_dtype(0)) + " *xr = in0 + r * " + Str(plane) + ";");
  ctx.Line("  int32_t sum = " + Str(-(*x_zero)[0] * plane) + ";");
  ctx.Line("  for (i = 0; i < " + Str(plane) + "; ++i) sum += xr[i];");
  ctx.Line("  out0[r] = (" + CType(ctx.output_dtype(0)) + ")kiln_requant_fixed(sum, " + Str(mult) +
           ", " + Str(shift) + ", " + Str((*y_zero)[0]) + ", " +
           (y_signed ? "-128, 127" : "0, 255") + ");");
  ctx.Line("}");
  return OkStatus();
}

// fuse-qdq's QLinearAdd: TFLite's integer Add (kernels/reference/qadd.c), its parameters computed
// here as the host computes them.
Status EmitQAdd(NodeContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(3) || !Is8Bit(ctx.input_dtype(0)) ||
      !Is8Bit(ctx.input_dtype(3)) || !Is8Bit(ctx.output_dtype(0)))
    return ctx.error("A, B and C must be int8 or uint8");
  if (ctx.input_dims(0) != ctx.input_dims(3)) return ctx.error("A and B must have one shape");
  const Tensor *as = ctx.input_constant(1), *bs = ctx.input_constant(4),
               *ys = ctx.input_constant(6);
  const auto az = ConstantValues(ctx, 2, 0), bz = ConstantValues(ctx, 5, 0),
             yz = ConstantValues(ctx, 7, 0);
  if (!as || !bs || !ys || as->size() != 1 || bs->size() != 1 || ys->size() != 1 || !az ||
      az->size() != 1 || !bz || bz->size() != 1 || !yz || yz->size() != 1)
    return ctx.error("needs constant scalar scales and zero points");
  const bool y_signed = ctx.output_dtype(0) == DType::kInt8;
  const kiln_qadd_params p = kiln_qadd_params_of(
      ElementAsDouble(*as, 0), static_cast<int32_t>((*az)[0]), ElementAsDouble(*bs, 0),
      static_cast<int32_t>((*bz)[0]), ElementAsDouble(*ys, 0), static_cast<int32_t>((*yz)[0]),
      y_signed ? -128 : 0, y_signed ? 127 : 255);
  ctx.UseKernel("qadd");
  ctx.Line("static const kiln_qadd_params p = {" + Str(p.a_zero) + ", " + Str(p.a_mult) + ", " +
           Str(p.a_shift) + ", " + Str(p.b_zero) + ", " + Str(p.b_mult) + ", " + Str(p.b_shift) +
           ", " + Str(p.y_mult) + ", " + Str(p.y_shift) + ", " + Str(p.y_zero) + ", " + Str(p.lo) +
           ", " + Str(p.hi) + "};");
  ctx.Line("ptrdiff_t i;");
  ctx.Line("for (i = 0; i < " + Str(NumElements(ctx.output_dims(0))) + "; ++i)");
  ctx.Line("  out0[i] = (" + CType(ctx.output_dtype(0)) + ")kiln_qadd(in0[i], in3[i], &p);");
  return OkStatus();
}

}  // namespace

Expected<bool> EmitQMatMulPacked(NodeContext& ctx) {
  const std::optional<PackedInputs> in = PackedInputsOf(ctx);
  if (!in || in->w->rank() != 2) return false;
  const int64_t K = in->w->dim(0), N = in->w->dim(1);
  const Dims& xd = ctx.input_dims(0);
  if (xd.empty() || xd.back() != K || K == 0 || N == 0 || NumElements(xd) == 0) return false;
  const int8_t* wv = in->w->data<int8_t>();
  std::vector<int64_t> folded;
  auto column_sum = [&](int64_t n) {
    int64_t sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += wv[k * N + n];
    return sum;
  };
  if (!FoldedBias(*in, N, column_sum, &folded)) return false;
  folded.resize((N + 3) / 4 * 4);  // the kernel reads a bias for each of a last four's outputs
  // Four outputs at a time (qmatmul_packed.c); the rows of a last partial four are zero.
  Tensor packed(DType::kInt8, {(N + 3) / 4 * 4 * K});
  int8_t* pv = packed.data<int8_t>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      pv[n / 4 * 4 * K + kiln_qmatmul_packed_slot(k, n % 4, K)] = wv[k * N + n];
  bool right_shifts = false;
  ctx.UseKernel("qmatmul_packed");
  ctx.SetOutOfLine();
  KILN_ASSIGN_OR_RETURN(std::string tables, PackedTables(ctx, N, folded, &right_shifts));
  const std::string weights = ctx.parameter(ctx.input_name(3) + "_packed", std::move(packed));
  const std::string params = ctx.function_name + "_params";
  const bool x_signed = ctx.input_dtype(0) == DType::kInt8;
  ctx.Table("static const kiln_qmatmul_packed_params " + params + " = {" + weights + ", " + Str(K) +
            ", " + Str(N) + ", " + tables + ", " + Str(x_signed) + ", " + OutputRange(ctx, *in) +
            ", " + Str(right_shifts) + "};\n");
  ctx.Line("kiln_qmatmul_packed_run((const uint8_t *)" + NodeContext::in(0) + ", " +
           Str(NumElements(xd) / K) + ", &" + params + ", (uint8_t *)out0);");
  return true;
}

void RegisterQConvEmitters(EmitterRegistry& r) {
  r.Register("QLinearAdd", EmitQAdd, ops::kKilnDomain);
  r.Register("QLinearGlobalAveragePool", EmitQGlobalAveragePool, ops::kKilnDomain);
  r.Register("ConvInteger", [](NodeContext& c) { return EmitQConv(c, false); });
  r.Register("QLinearConv", [](NodeContext& c) { return EmitQConv(c, true); });
  r.Register(
      "QLinearConv", [](NodeContext& c) { return EmitQConv(c, true); }, ops::kKilnDomain);
}

}  // namespace kiln::codegen::c
