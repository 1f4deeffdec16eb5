// Signal ops (DFT, STFT, Hann/Hamming/Blackman windows, MelWeightMatrix), BitCast and the
// random generators. Transforms compute in double: a radix-2 FFT for power-of-two lengths and a
// direct DFT with a twiddle table otherwise. Random values come from kiln's own seeded
// generator (deterministic for a given seed; they cannot match numpy's streams).
// The ai.onnx.ml ops live in misc_ml.cc.
#include <complex>
#include <string>

#include "ops/common.h"

namespace kiln::ops {
void RegisterMlOps(OpRegistry& r);  // misc_ml.cc

namespace {

using Complex = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// In-place transform of a (any length); inverse uses exp(+i...) and divides by n.
void Transform(std::vector<Complex>& a, bool inverse) {
  const size_t n = a.size();
  if (n <= 1) return;
  const double sign = inverse ? 1.0 : -1.0;
  if ((n & (n - 1)) == 0) {
    for (size_t i = 1, j = 0; i < n; ++i) {
      size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (size_t len = 2; len <= n; len <<= 1) {
      double ang = sign * 2 * kPi / static_cast<double>(len);
      for (size_t i = 0; i < n; i += len)
        for (size_t k = 0; k < len / 2; ++k) {
          Complex w = std::polar(1.0, ang * static_cast<double>(k));
          Complex u = a[i + k], v = a[i + k + len / 2] * w;
          a[i + k] = u + v;
          a[i + k + len / 2] = u - v;
        }
    }
  } else {
    std::vector<Complex> tw(n), out(n);
    for (size_t k = 0; k < n; ++k)
      tw[k] = std::polar(1.0, sign * 2 * kPi * static_cast<double>(k) / n);
    for (size_t k = 0; k < n; ++k) {
      Complex acc = 0;
      size_t idx = 0;
      for (size_t j = 0; j < n; ++j) {
        acc += a[j] * tw[idx];
        idx += k;
        if (idx >= n) idx -= n;
      }
      out[k] = acc;
    }
    a.swap(out);
  }
  if (inverse)
    for (auto& v : a) v /= static_cast<double>(n);
}

template <class T>
double Get(const T* p, int64_t i) {
  return static_cast<double>(static_cast<Acc<T>>(p[i]));
}

// ---------------------------------------------------------------- DFT

struct DftParams {
  int64_t axis = 1, length = 0, out_len = 0;
  bool inverse = false, onesided = false;
};

// Returns false when a needed input value (dft_length, axis) is unknown.
bool DftParamsFor(const ir::Node& node, int64_t opset, const Dims& x, const Tensor* len_t,
                  bool has_len, const Tensor* axis_t, bool has_axis, DftParams* p,
                  std::string* err) {
  const int64_t r = static_cast<int64_t>(x.size());
  if (r < 2 || (x.back() != 1 && x.back() != 2)) {
    *err = "input must end in a dimension of 1 (real) or 2 (complex)";
    return true;
  }
  p->inverse = node.attr_int("inverse", 0) != 0;
  p->onesided = node.attr_int("onesided", 0) != 0;
  if (opset >= 20) {
    p->axis = -2;
    if (has_axis) {
      if (!axis_t) return false;
      p->axis = axis_t->GetInt(0);
    }
  } else {
    p->axis = node.attr_int("axis", 1);
  }
  if (p->axis < 0) p->axis += r;
  if (p->axis < 0 || p->axis > r - 2) {
    *err = "axis is out of range";
    return true;
  }
  const int64_t n_in = x[p->axis];
  if (has_len) {
    if (!len_t) return false;
    p->length = len_t->GetInt(0);
  } else {
    p->length = p->inverse && p->onesided ? 2 * (n_in - 1) : n_in;
  }
  if (p->length <= 0) {
    *err = "dft_length must be positive";
    return true;
  }
  p->out_len = !p->inverse && p->onesided ? p->length / 2 + 1 : p->length;
  return true;
}

Dims DftOutDims(const Dims& x, const DftParams& p) {
  Dims o = x;
  o[p.axis] = p.out_len;
  o.back() = p.inverse && p.onesided ? 1 : 2;
  return o;
}

Status DftInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs input");
  if (!IsFloatingDType(ctx.input_dtype(0))) return ctx.error("input must be a float tensor");
  DftParams p;
  std::string err;
  int ai = ctx.opset() >= 20 ? 2 : -1;
  bool known =
      DftParamsFor(ctx.node(), ctx.opset(), ctx.input_dims(0), ctx.input_value(1), ctx.has_input(1),
                   ai >= 0 ? ctx.input_value(ai) : nullptr, ai >= 0 && ctx.has_input(ai), &p, &err);
  if (!err.empty()) return ctx.error(err);
  if (!known) {
    ctx.set_output_dynamic(0, ctx.input_dtype(0));
    return OkStatus();
  }
  ctx.set_output(0, ctx.input_dtype(0), DftOutDims(ctx.input_dims(0), p));
  return OkStatus();
}

Status DftCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  DftParams p;
  std::string err;
  int ai = ctx.opset() >= 20 ? 2 : -1;
  bool has_axis = ai >= 0 && ctx.has_input(ai);
  DftParamsFor(ctx.node(), ctx.opset(), x.dims(), ctx.has_input(1) ? &ctx.input(1) : nullptr,
               ctx.has_input(1), has_axis ? &ctx.input(ai) : nullptr, has_axis, &p, &err);
  if (!err.empty()) return ctx.error(err);
  Dims od = DftOutDims(x.dims(), p);
  Tensor& y = ctx.output(0).defined() && ctx.output(0).dims() == od
                  ? ctx.output(0)
                  : ctx.allocate_output(0, x.dtype(), od);
  const int64_t n_in = x.dim(static_cast<int>(p.axis));
  const int64_t cin = x.dims().back(), cout = od.back();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < p.axis; ++d) outer *= x.dim(static_cast<int>(d));
  for (int64_t d = p.axis + 1; d < x.rank() - 1; ++d) inner *= x.dim(static_cast<int>(d));
  const int64_t L = p.length;
  std::vector<Complex> buf(L);
  Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto in_at = [&](int64_t k) {
          const int64_t e = ((o * n_in + k) * inner + i) * cin;
          return Complex(Get(xp, e), cin == 2 ? Get(xp, e + 1) : 0.0);
        };
        std::fill(buf.begin(), buf.end(), Complex(0, 0));
        if (p.inverse && p.onesided) {
          // Half spectrum in: rebuild the Hermitian full spectrum, output the real part.
          for (int64_t k = 0; k <= L / 2; ++k) buf[k] = k < n_in ? in_at(k) : Complex(0, 0);
          for (int64_t k = L / 2 + 1; k < L; ++k) buf[k] = std::conj(buf[L - k]);
        } else {
          for (int64_t k = 0; k < std::min(L, n_in); ++k) buf[k] = in_at(k);
        }
        Transform(buf, p.inverse);
        for (int64_t k = 0; k < p.out_len; ++k) {
          const int64_t e = ((o * p.out_len + k) * inner + i) * cout;
          yp[e] = ConvertValue<T>(buf[k].real());
          if (cout == 2) yp[e + 1] = ConvertValue<T>(buf[k].imag());
        }
      }
  });
  return OkStatus();
}

// ---------------------------------------------------------------- STFT

struct StftParams {
  int64_t step = 0, frame_len = 0, window_len = 0, frames = 0, bins = 0;
  bool onesided = true;
};

// Returns false when a needed value is unknown.
bool StftParamsFor(const ir::Node& node, const Dims& x, const Tensor* step, const Tensor* window,
                   bool has_window, const Dims* window_dims, const Tensor* flen, bool has_flen,
                   StftParams* p, std::string* err) {
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2)) {
    *err = "signal must be [batch, length, 1 or 2]";
    return true;
  }
  if (!step) return false;
  p->step = step->GetInt(0);
  if (p->step <= 0) {
    *err = "frame_step must be positive";
    return true;
  }
  p->onesided = node.attr_int("onesided", 1) != 0;
  if (has_window && (window_dims->size() != 1)) {
    *err = "window must be 1-D";
    return true;
  }
  if (has_flen) {
    if (!flen) return false;
    p->frame_len = flen->GetInt(0);
  } else if (has_window) {
    p->frame_len = (*window_dims)[0];
  } else {
    *err = "one of window and frame_length must be given";
    return true;
  }
  (void)window;
  p->window_len = has_window ? (*window_dims)[0] : p->frame_len;
  if (p->frame_len <= 0 || p->frame_len > x[1]) {
    *err = "frame_length must be in [1, signal length]";
    return true;
  }
  p->frames = 1 + (x[1] - p->frame_len) / p->step;
  p->bins = p->onesided ? p->frame_len / 2 + 1 : p->frame_len;
  return true;
}

Status StftInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs signal and frame_step");
  if (!IsFloatingDType(ctx.input_dtype(0))) return ctx.error("signal must be a float tensor");
  StftParams p;
  std::string err;
  bool hw = ctx.has_input(2);
  bool known = StftParamsFor(ctx.node(), ctx.input_dims(0), ctx.input_value(1), ctx.input_value(2),
                             hw, hw ? &ctx.input_dims(2) : nullptr, ctx.input_value(3),
                             ctx.has_input(3), &p, &err);
  if (!err.empty()) return ctx.error(err);
  if (!known) {
    ctx.set_output_dynamic(0, ctx.input_dtype(0));
    return OkStatus();
  }
  ctx.set_output(0, ctx.input_dtype(0), {ctx.input_dims(0)[0], p.frames, p.bins, 2});
  return OkStatus();
}

Status StftCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  StftParams p;
  std::string err;
  bool hw = ctx.has_input(2);
  const Tensor* win = hw ? &ctx.input(2) : nullptr;
  StftParamsFor(ctx.node(), x.dims(), &ctx.input(1), win, hw, hw ? &win->dims() : nullptr,
                ctx.has_input(3) ? &ctx.input(3) : nullptr, ctx.has_input(3), &p, &err);
  if (!err.empty()) return ctx.error(err);
  Dims od = {x.dim(0), p.frames, p.bins, 2};
  Tensor& y = ctx.output(0).defined() && ctx.output(0).dims() == od
                  ? ctx.output(0)
                  : ctx.allocate_output(0, x.dtype(), od);
  const int64_t B = x.dim(0), L = x.dim(1), c = x.dim(2);
  std::vector<double> w(p.window_len, 1.0);
  if (win)
    for (int64_t i = 0; i < p.window_len; ++i) w[i] = win->GetDouble(i);
  std::vector<Complex> buf(p.frame_len);
  Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < p.frames; ++f) {
        std::fill(buf.begin(), buf.end(), Complex(0, 0));
        for (int64_t k = 0; k < std::min(p.window_len, p.frame_len); ++k) {
          int64_t s = f * p.step + k;
          if (s >= L) break;
          const int64_t e = (b * L + s) * c;
          buf[k] = Complex(Get(xp, e), c == 2 ? Get(xp, e + 1) : 0.0) * w[k];
        }
        Transform(buf, false);
        for (int64_t k = 0; k < p.bins; ++k) {
          const int64_t e = ((b * p.frames + f) * p.bins + k) * 2;
          yp[e] = ConvertValue<T>(buf[k].real());
          yp[e + 1] = ConvertValue<T>(buf[k].imag());
        }
      }
  });
  return OkStatus();
}

// ---------------------------------------------------------------- windows

DType OutputDatatype(const ir::Node& node) {
  return static_cast<DType>(
      node.attr_int("output_datatype", static_cast<int64_t>(DType::kFloat32)));
}

Status WindowInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs size");
  DType t = OutputDatatype(ctx.node());
  if (!IsFloatingDType(t) && !IsSignedIntDType(t) && !IsUnsignedIntDType(t))
    return ctx.error("unsupported output_datatype");
  const Tensor* s = ctx.input_value(0);
  if (!s) {
    ctx.set_output_dynamic(0, t);
    return OkStatus();
  }
  if (s->size() != 1 || s->GetInt(0) < 0) return ctx.error("size must be a non-negative scalar");
  ctx.set_output(0, t, {s->GetInt(0)});
  return OkStatus();
}

Status WindowCompute(ComputeContext& ctx) {
  int64_t n = ctx.input(0).GetInt(0);
  if (n < 0) return ctx.error("size must be non-negative");
  DType t = OutputDatatype(ctx.node());
  Tensor& y = ctx.output(0).defined() && ctx.output(0).size() == n ? ctx.output(0)
                                                                   : ctx.allocate_output(0, t, {n});
  const bool periodic = ctx.node().attr_int("periodic", 1) != 0;
  const double N1 = periodic ? static_cast<double>(n) : static_cast<double>(n - 1);
  const std::string& op = ctx.node().op_type;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    double a = 2 * kPi * static_cast<double>(i) / N1;
    if (op == "HannWindow")
      v[i] = 0.5 - 0.5 * std::cos(a);
    else if (op == "HammingWindow")
      v[i] = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
    else
      v[i] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  }
  Dispatch<kNumericTypes>(t, [&]<class T>() {
    T* p = y.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = ConvertValue<T>(v[i]);
  });
  return OkStatus();
}

// ---------------------------------------------------------------- MelWeightMatrix

Status MelInfer(InferContext& ctx) {
  for (int i = 0; i < 5; ++i)
    if (!ctx.has_input(i)) return ctx.error("needs 5 inputs");
  DType t = OutputDatatype(ctx.node());
  if (!IsFloatingDType(t) && !IsSignedIntDType(t) && !IsUnsignedIntDType(t))
    return ctx.error("unsupported output_datatype");
  const Tensor* bins = ctx.input_value(0);
  const Tensor* len = ctx.input_value(1);
  if (!bins || !len) {
    ctx.set_output_dynamic(0, t);
    return OkStatus();
  }
  int64_t nb = bins->GetInt(0), dl = len->GetInt(0);
  if (nb <= 0 || dl <= 0) return ctx.error("num_mel_bins and dft_length must be positive");
  ctx.set_output(0, t, {dl / 2 + 1, nb});
  return OkStatus();
}

Status MelCompute(ComputeContext& ctx) {
  const int64_t nmel = ctx.input(0).GetInt(0), dl = ctx.input(1).GetInt(0);
  const int64_t rate = ctx.input(2).GetInt(0);
  if (nmel <= 0 || dl <= 0 || rate <= 0)
    return ctx.error("num_mel_bins, dft_length and sample_rate must be positive");
  const float lo = static_cast<float>(ctx.input(3).GetDouble(0));
  const float hi = static_cast<float>(ctx.input(4).GetDouble(0));
  const int64_t nspec = dl / 2 + 1;
  DType t = OutputDatatype(ctx.node());
  Tensor& y = ctx.output(0).defined() && ctx.output(0).dims() == Dims{nspec, nmel}
                  ? ctx.output(0)
                  : ctx.allocate_output(0, t, {nspec, nmel});
  // The mel edges are float32 in the reference; the bin positions are float64.
  float lmel = 2595.0f * std::log10(1.0f + lo / 700.0f);
  float hmel = 2595.0f * std::log10(1.0f + hi / 700.0f);
  float step = (hmel - lmel) / static_cast<float>(nmel + 2);
  std::vector<int64_t> bins(nmel + 2);
  for (int64_t i = 0; i < nmel + 2; ++i) {
    double f = static_cast<double>(i) * static_cast<double>(step) + static_cast<double>(lmel);
    f = 700.0 * (std::pow(10.0, f / 2595.0) - 1.0);
    f = std::floor(static_cast<double>(dl + 1) * f / static_cast<double>(rate));
    bins[i] = static_cast<int64_t>(f);
  }
  std::vector<double> out(nspec * nmel, 0.0);
  for (int64_t i = 0; i < nmel; ++i) {
    int64_t l = bins[i], c = bins[i + 1], h = bins[i + 2];
    if (l < 0 || c < l || h < c || h > nspec || c >= nspec)
      return ctx.error("edge frequencies give mel bins outside the spectrum");
    if (c == l)
      out[c * nmel + i] = 1;
    else
      for (int64_t j = l; j <= c; ++j) out[j * nmel + i] = static_cast<double>(j - l) / (c - l);
    for (int64_t j = c; j < h; ++j) out[j * nmel + i] = static_cast<double>(h - j) / (h - c);
  }
  Dispatch<kNumericTypes>(t, [&]<class T>() {
    T* p = y.data<T>();
    for (int64_t i = 0; i < nspec * nmel; ++i) p[i] = ConvertValue<T>(out[i]);
  });
  return OkStatus();
}

// ---------------------------------------------------------------- BitCast

Status BitCastInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs input");
  const ir::Attribute* to = ctx.node().attr("to");
  if (!to || to->kind != ir::Attribute::Kind::kInt) return ctx.error("needs the 'to' attribute");
  DType t = static_cast<DType>(to->i);
  if (!IsSupportedDType(t) || DTypeSize(t) == 0) return ctx.error("unsupported target type");
  if (DTypeSize(t) != DTypeSize(ctx.input_dtype(0)))
    return ctx.error("BitCast needs types of the same bit width");
  ctx.set_output(0, t, ctx.input_dims(0));
  return OkStatus();
}

Status BitCastCompute(ComputeContext& ctx) {
  if (ctx.input(0).nbytes() != ctx.output(0).nbytes()) return ctx.error("size mismatch");
  if (ctx.input(0).nbytes())
    std::memcpy(ctx.output(0).raw(), ctx.input(0).raw(), ctx.input(0).nbytes());
  return OkStatus();
}

// ---------------------------------------------------------------- random

// splitmix64: small, fast and identical on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * kPi * u2);
  }

 private:
  uint64_t s_;
};

Rng RngFor(const ir::Node& node) {
  const ir::Attribute* s = node.attr("seed");
  uint64_t seed = 0x6b696c6eull;  // no seed: still deterministic
  if (s && s->kind == ir::Attribute::Kind::kFloat) {
    double v = s->f;
    seed = static_cast<uint64_t>(static_cast<int64_t>(v)) ^ 0x5eedull;
  }
  return Rng(seed);
}

bool IsLike(const ir::Node& n) {
  return n.op_type.size() > 4 && n.op_type.substr(n.op_type.size() - 4) == "Like";
}

Status RandomInfer(InferContext& ctx) {
  const ir::Node& n = ctx.node();
  DType t;
  Dims dims;
  if (IsLike(n)) {
    if (!ctx.has_input(0)) return ctx.error("needs input");
    t = static_cast<DType>(n.attr_int("dtype", static_cast<int64_t>(ctx.input_dtype(0))));
    dims = ctx.input_dims(0);
  } else {
    t = static_cast<DType>(n.attr_int("dtype", static_cast<int64_t>(DType::kFloat32)));
    const ir::Attribute* s = n.attr("shape");
    if (!s || s->kind != ir::Attribute::Kind::kInts)
      return ctx.error("needs the 'shape' attribute");
    dims = s->ints;
    for (int64_t d : dims)
      if (d < 0) return ctx.error("shape entries must be non-negative");
  }
  if (!IsFloatingDType(t)) return ctx.error("dtype must be a float type");
  ctx.set_output(0, t, dims);
  return OkStatus();
}

Status RandomCompute(ComputeContext& ctx) {
  const ir::Node& n = ctx.node();
  Rng rng = RngFor(n);
  Tensor& y = ctx.output(0);
  const bool normal = n.op_type.rfind("RandomNormal", 0) == 0;
  const double a = normal ? n.attr_float("mean", 0.0f) : n.attr_float("low", 0.0f);
  const double b = normal ? n.attr_float("scale", 1.0f) : n.attr_float("high", 1.0f);
  Dispatch<kFloatTypes>(y.dtype(), [&]<class T>() {
    T* p = y.data<T>();
    for (int64_t i = 0; i < y.size(); ++i)
      p[i] = ConvertValue<T>(normal ? a + b * rng.Normal() : a + (b - a) * rng.Uniform());
  });
  return OkStatus();
}

Status BernoulliInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsFloatingDType(ctx.input_dtype(0)))
    return ctx.error("input must be a float tensor");
  DType t =
      static_cast<DType>(ctx.node().attr_int("dtype", static_cast<int64_t>(ctx.input_dtype(0))));
  if (!IsSupportedDType(t) || DTypeSize(t) == 0 || t == DType::kString)
    return ctx.error("unsupported dtype");
  ctx.set_output(0, t, ctx.input_dims(0));
  return OkStatus();
}

Status BernoulliCompute(ComputeContext& ctx) {
  Rng rng = RngFor(ctx.node());
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<double> v(x.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    double prob = x.GetDouble(i);
    if (!(prob >= 0 && prob <= 1)) return ctx.error("probabilities must lie in [0, 1]");
    v[i] = rng.Uniform() < prob ? 1.0 : 0.0;
  }
  bool ok = Dispatch<kAllTypes>(y.dtype(), [&]<class T>() {
    T* p = y.data<T>();
    for (int64_t i = 0; i < y.size(); ++i) p[i] = ConvertValue<T>(v[i]);
  });
  return ok ? OkStatus() : ctx.error("unsupported dtype");
}

Status MultinomialInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsFloatingDType(ctx.input_dtype(0)) || ctx.input_rank(0) != 2)
    return ctx.error("input must be a 2-D float tensor");
  DType t = static_cast<DType>(ctx.node().attr_int("dtype", static_cast<int64_t>(DType::kInt32)));
  if (t != DType::kInt32 && t != DType::kInt64) return ctx.error("dtype must be int32 or int64");
  int64_t k = ctx.node().attr_int("sample_size", 1);
  if (k < 0) return ctx.error("sample_size must be non-negative");
  ctx.set_output(0, t, {ctx.input_dims(0)[0], k});
  return OkStatus();
}

Status MultinomialCompute(ComputeContext& ctx) {
  Rng rng = RngFor(ctx.node());
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t B = x.dim(0), C = x.dim(1), K = y.dim(1);
  std::vector<double> cdf(C);
  for (int64_t b = 0; b < B; ++b) {
    // Inputs are unnormalized log-probabilities.
    double mx = -INFINITY;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, x.GetDouble(b * C + c));
    double acc = 0;
    for (int64_t c = 0; c < C; ++c) {
      acc += std::exp(x.GetDouble(b * C + c) - mx);
      cdf[c] = acc;
    }
    for (int64_t k = 0; k < K; ++k) {
      double u = rng.Uniform() * acc;
      int64_t c = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      c = std::min(c, C - 1);
      if (y.dtype() == DType::kInt32)
        y.data<int32_t>()[b * K + k] = static_cast<int32_t>(c);
      else
        y.data<int64_t>()[b * K + k] = c;
    }
  }
  return OkStatus();
}

}  // namespace

void RegisterMiscOps(OpRegistry& r) {
  r.Register("DFT", DftInfer, DftCompute);
  r.Register("STFT", StftInfer, StftCompute);
  r.Register("HannWindow", WindowInfer, WindowCompute);
  r.Register("HammingWindow", WindowInfer, WindowCompute);
  r.Register("BlackmanWindow", WindowInfer, WindowCompute);
  r.Register("MelWeightMatrix", MelInfer, MelCompute);
  r.Register("BitCast", BitCastInfer, BitCastCompute);
  r.Register("RandomNormal", RandomInfer, RandomCompute);
  r.Register("RandomUniform", RandomInfer, RandomCompute);
  r.Register("RandomNormalLike", RandomInfer, RandomCompute);
  r.Register("RandomUniformLike", RandomInfer, RandomCompute);
  r.Register("Bernoulli", BernoulliInfer, BernoulliCompute);
  r.Register("Multinomial", MultinomialInfer, MultinomialCompute);
  RegisterMlOps(r);
}

}  // namespace kiln::ops
