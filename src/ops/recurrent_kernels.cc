#include "ops/recurrent_kernels.h"

#include <cstring>
#include <vector>

#include "ops/cpu_isa.h"
#include "ops/gemm_kernels.h"
#include "ops/simd.h"
#include "ops/thread_pool.h"
#include "ops/vector_math.h"

namespace kiln::ops {
namespace {

// Columns of R^T and of the recurrent product are padded to this many floats (one AVX-512
// vector), so the product has no column tails.
constexpr int64_t kPad = 16;
int64_t Padded(int64_t n) { return (n + kPad - 1) / kPad * kPad; }

// From this many batch rows the recurrent product is a packed GEMM (its register tiles are full);
// below, the broadcast-and-stream kernel here, which reads R^T once per group of rows.
constexpr int64_t kPackedRows = 8;

// out[r][n0, n0 + C * L) = sum_k h[r][k] * rt[k][n0, ...) for R rows: R x C vector accumulators.
template <int VB, int R, int C>
KILN_AI void ProductBlock(const float* h, int64_t ldh, int64_t K, const float* rt, int64_t ldr,
                          float* out, int64_t ldo, int64_t n0) {
  using V = Vec<float, VB>;
  constexpr int L = VB / 4;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = V{} + 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    V w[C];
    for (int c = 0; c < C; ++c) std::memcpy(&w[c], rt + k * ldr + n0 + c * L, VB);
    for (int r = 0; r < R; ++r) {
      const V hv = V{} + h[r * ldh + k];
      for (int c = 0; c < C; ++c) acc[r][c] += hv * w[c];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) std::memcpy(out + r * ldo + n0 + c * L, &acc[r][c], VB);
}

// out[b][0, N) = h[b] * rt for R rows, N a multiple of the vector length.
template <int VB, int R>
KILN_AI void ProductRows(const float* h, int64_t ldh, int64_t K, const float* rt, int64_t ldr,
                         int64_t N, float* out, int64_t ldo) {
  constexpr int L = VB / 4;
  constexpr int C = R <= 2 ? 4 : 2;  // at most 8 accumulators
  int64_t n = 0;
  for (; n + C * L <= N; n += C * L) ProductBlock<VB, R, C>(h, ldh, K, rt, ldr, out, ldo, n);
  for (; n < N; n += L) ProductBlock<VB, R, 1>(h, ldh, K, rt, ldr, out, ldo, n);
}

template <int VB>
KILN_AI void ProductBody(const float* h, int64_t ldh, int64_t B, int64_t K, const float* rt,
                         int64_t ldr, int64_t N, float* out, int64_t ldo) {
  int64_t b = 0;
  for (; b + 4 <= B; b += 4)
    ProductRows<VB, 4>(h + b * ldh, ldh, K, rt, ldr, N, out + b * ldo, ldo);
  switch (B - b) {
    case 3:
      ProductRows<VB, 3>(h + b * ldh, ldh, K, rt, ldr, N, out + b * ldo, ldo);
      break;
    case 2:
      ProductRows<VB, 2>(h + b * ldh, ldh, K, rt, ldr, N, out + b * ldo, ldo);
      break;
    case 1:
      ProductRows<VB, 1>(h + b * ldh, ldh, K, rt, ldr, N, out + b * ldo, ldo);
      break;
    default:
      break;
  }
}

#if KILN_X86_DISPATCH
__attribute__((target("avx512f,fma"))) void ProductAvx512(const float* h, int64_t ldh, int64_t B,
                                                          int64_t K, const float* rt, int64_t ldr,
                                                          int64_t N, float* out, int64_t ldo) {
  ProductBody<64>(h, ldh, B, K, rt, ldr, N, out, ldo);
}
__attribute__((target("avx2,fma"))) void ProductAvx2(const float* h, int64_t ldh, int64_t B,
                                                     int64_t K, const float* rt, int64_t ldr,
                                                     int64_t N, float* out, int64_t ldo) {
  ProductBody<32>(h, ldh, B, K, rt, ldr, N, out, ldo);
}
#endif

// out[b][0, N) = h[b][0, K) * rt for b < B: rt is [K, ldr] (N <= ldr, N a multiple of kPad).
void StateProduct(const float* h, int64_t ldh, int64_t B, int64_t K, const float* rt, int64_t ldr,
                  int64_t N, float* out, int64_t ldo) {
#if KILN_X86_DISPATCH
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) return ProductAvx512(h, ldh, B, K, rt, ldr, N, out, ldo);
  if (isa == Isa::kAvx2) return ProductAvx2(h, ldh, B, K, rt, ldr, N, out, ldo);
#endif
  ProductBody<16>(h, ldh, B, K, rt, ldr, N, out, ldo);
}

void Activate(const RnnActivation& a, float* v, int64_t n) {
  switch (a.kind) {
    case RnnAct::kSigmoid:
      return SigmoidF32(v, v, n);
    case RnnAct::kTanh:
      return TanhF32(v, v, n);
    case RnnAct::kRelu:
      return ReluF32(v, v, n);
    default:
      for (int64_t i = 0; i < n; ++i) v[i] = a(v[i]);
  }
}

void ClipInPlace(float clip, float* v, int64_t n) {
  if (clip > 0) ClipF32(v, v, n, -clip, clip);
}

RnnTransposed Transposed(const float* m, int64_t rows, int64_t col, int64_t n) {
  RnnTransposed t;
  t.col = col;
  t.n = n;
  t.ld = Padded(n);
  if ((t.ld / kPad) % 2 == 0) t.ld += kPad;  // an odd number of cache lines per row
  t.data.assign(static_cast<size_t>(rows * t.ld), 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < rows; ++k) t.data[k * t.ld + j] = m[(col + j) * rows + k];
  return t;
}

// Lays out W and R for every direction (R^T per gate group; W^T where the projection has few rows).
void LayOut(const RnnProblem& p, RnnWeights* out) {
  const int64_t H = p.hidden, I = p.input, GH = RnnGates(p.cell) * H, rows = p.seq * p.batch;
  out->w = p.w;
  out->r = p.r;
  out->hidden = H;
  out->input = I;
  out->rows = rows;
  out->dirs.assign(static_cast<size_t>(p.num_dir), {});
  for (int d = 0; d < p.num_dir; ++d) {
    RnnDirectionWeights& dw = out->dirs[d];
    const float* r = p.r + d * GH * H;
    if (p.cell == RnnCell::kGru && !p.linear_before_reset) {
      dw.rt.push_back(Transposed(r, H, 0, 2 * H));  // z and r
      dw.rt.push_back(Transposed(r, H, 2 * H, H));  // h, applied to r * H_prev
    } else {
      dw.rt.push_back(Transposed(r, H, 0, GH));
    }
    dw.rt_packed.resize(dw.rt.size());
    if (rows < kPackedRows) dw.wt = Transposed(p.w + d * GH * I, I, 0, GH);
  }
}

bool LaidOutFor(const RnnWeights& w, const RnnProblem& p) {
  return w.w == p.w && w.r == p.r && w.hidden == p.hidden && w.input == p.input &&
         w.rows == p.seq * p.batch && static_cast<int>(w.dirs.size()) == p.num_dir;
}

// One direction of one layer.
class Direction {
 public:
  Direction(const RnnProblem& p, int d, int threads, RnnDirectionWeights* weights)
      : p_(p),
        d_(d),
        threads_(threads),
        G_(RnnGates(p.cell)),
        H_(p.hidden),
        GH_(G_ * p.hidden),
        B_(p.batch),
        S_(p.seq),
        reverse_(p.reverse_only || d == 1),
        act_(p.acts + d * RnnActivations(p.cell)),
        w_(*weights) {}

  void Run() {
    Project();
    PrepareRecurrence();
    for (int64_t t = 0; t < S_; ++t) Step(t);
    WriteStates();
  }

 private:
  bool Gru() const { return p_.cell == RnnCell::kGru; }
  bool GruResetFirst() const { return Gru() && !p_.linear_before_reset; }  // (r * h) R_h^T
  int64_t Length(int64_t b) const { return p_.sequence_lens ? p_.sequence_lens[b] : S_; }
  // Row of X (and of the projection) for step t of batch row b.
  int64_t Row(int64_t t, int64_t b) const { return p_.layout == 0 ? t * B_ + b : b * S_ + t; }
  int64_t StateOffset(int64_t b) const {
    return p_.layout == 0 ? (d_ * B_ + b) * H_ : (b * p_.num_dir + d_) * H_;
  }

  // xw = X W^T + the biases that do not depend on the state, for every step at once.
  void Project() {
    const int64_t I = p_.input, M = S_ * B_;
    if (!w_.wt.data.empty()) {  // few rows: streamed against W^T like the recurrent product
      xw_ld_ = w_.wt.ld;
      xw_.resize(static_cast<size_t>(M * xw_ld_));
      StateProduct(p_.x, I, M, I, w_.wt.data.data(), w_.wt.ld, w_.wt.ld, xw_.data(), xw_ld_);
    } else {
      xw_ld_ = GH_;
      xw_.resize(static_cast<size_t>(M * GH_));
      PackedGemm<float>(M, GH_, I, 1.0f, p_.x, I, 1, p_.w + d_ * GH_ * I, 1, I, xw_.data(), GH_,
                        false, threads_);
    }
    if (!p_.bias) return;
    const float* wb = p_.bias + d_ * 2 * GH_;
    const float* rb = wb + GH_;
    std::vector<float> sum(wb, wb + GH_);
    // GRU with linear_before_reset multiplies R's h-gate bias by r: it stays in the product.
    const int64_t folded = Gru() && p_.linear_before_reset ? 2 * H_ : GH_;
    for (int64_t j = 0; j < folded; ++j) sum[j] += rb[j];
    for (int64_t m = 0; m < M; ++m) {
      float* row = &xw_[m * xw_ld_];
      for (int64_t j = 0; j < GH_; ++j) row[j] += sum[j];
    }
  }

  void PrepareRecurrence() {
    for (const RnnTransposed& g : w_.rt) hr_ld_ = std::max(hr_ld_, Padded(g.col + g.ld));
    hr_.assign(static_cast<size_t>(B_ * hr_ld_), 0.0f);
    h_.assign(static_cast<size_t>(B_ * H_), 0.0f);
    if (p_.cell == RnnCell::kLstm) c_.assign(static_cast<size_t>(B_ * H_), 0.0f);
    for (int64_t b = 0; b < B_; ++b) {
      if (p_.initial_h) std::memcpy(&h_[b * H_], p_.initial_h + StateOffset(b), H_ * sizeof(float));
      if (p_.initial_c && !c_.empty())
        std::memcpy(&c_[b * H_], p_.initial_c + StateOffset(b), H_ * sizeof(float));
    }
    if (p_.bias && Gru() && p_.linear_before_reset) rbh_ = p_.bias + d_ * 2 * GH_ + GH_ + 2 * H_;
    if (GruResetFirst()) rh_.assign(static_cast<size_t>(B_ * H_), 0.0f);
  }

  // out[b][j] = in[b] * R^T[:, group columns] for every batch row.
  void Product(int group, const float* in, float* out) {
    const RnnTransposed& g = w_.rt[group];
    if (B_ >= kPackedRows) {
      PackedB<float>& pb = w_.rt_packed[group];
      if (pb.data.empty()) pb = PackGemmB<float>(H_, g.ld, g.data.data(), g.ld, 1);
      PackedGemm<float>(B_, in, H_, 1, pb, out, hr_ld_, false, threads_);
      return;
    }
    // Large products split their columns over threads, in whole padded vectors.
    const int64_t blocks = g.ld / kPad;
    const int parts = H_ * g.ld >= (int64_t{1} << 17) ? threads_ : 1;
    ParallelFor(parts, blocks, [&](int64_t b0, int64_t b1) {
      StateProduct(in, H_, B_, H_, g.data.data() + b0 * kPad, g.ld, (b1 - b0) * kPad,
                   out + b0 * kPad, hr_ld_);
    });
  }

  void Step(int64_t t) {
    Product(0, h_.data(), hr_.data());
    if (GruResetFirst()) {
      // r = f(x_r + h R_r^T) first, for every active row, then (r * h) R_h^T.
      for (int64_t b = 0; b < B_; ++b) {
        if (t >= Length(b)) continue;
        float* g = &hr_[b * hr_ld_];
        const float* x = Xw(t, b);
        for (int64_t k = 0; k < 2 * H_; ++k) g[k] += x[k];
        ClipInPlace(p_.clip, g, 2 * H_);
        Activate(act_[0], g, 2 * H_);
        const float* rg = g + H_;
        for (int64_t k = 0; k < H_; ++k) rh_[b * H_ + k] = rg[k] * h_[b * H_ + k];
      }
      Product(1, rh_.data(), hr_.data() + 2 * H_);
    }
    for (int64_t b = 0; b < B_; ++b) {
      const int64_t len = Length(b);
      if (t >= len) continue;
      const int64_t ti = reverse_ ? len - 1 - t : t;
      float* g = &hr_[b * hr_ld_];
      float* h = &h_[b * H_];
      switch (p_.cell) {
        case RnnCell::kRnn:
          RnnGate(g, Xw(t, b), h);
          break;
        case RnnCell::kGru:
          GruGates(g, Xw(t, b), h);
          break;
        case RnnCell::kLstm:
          LstmGates(g, Xw(t, b), h, &c_[b * H_]);
          break;
      }
      if (p_.y) {
        float* y = p_.y + (p_.layout == 0 ? ((ti * p_.num_dir + d_) * B_ + b) * H_
                                          : ((b * S_ + ti) * p_.num_dir + d_) * H_);
        std::memcpy(y, h, H_ * sizeof(float));
      }
    }
  }

  const float* Xw(int64_t t, int64_t b) const {
    const int64_t len = Length(b);
    const int64_t ti = reverse_ ? len - 1 - t : t;
    return &xw_[Row(ti, b) * xw_ld_];
  }

  void RnnGate(float* g, const float* x, float* h) {
    for (int64_t k = 0; k < H_; ++k) g[k] += x[k];
    ClipInPlace(p_.clip, g, H_);
    Activate(act_[0], g, H_);
    std::memcpy(h, g, H_ * sizeof(float));
  }

  // Gates z, r, h; z and r are already activated when the reset gate comes first.
  void GruGates(float* g, const float* x, float* h) {
    float *z = g, *r = g + H_, *hh = g + 2 * H_;
    const float* xh = x + 2 * H_;
    if (!GruResetFirst()) {
      for (int64_t k = 0; k < 2 * H_; ++k) g[k] += x[k];
      ClipInPlace(p_.clip, g, 2 * H_);
      Activate(act_[0], g, 2 * H_);
      for (int64_t k = 0; k < H_; ++k) hh[k] = xh[k] + r[k] * (hh[k] + (rbh_ ? rbh_[k] : 0.0f));
    } else {
      for (int64_t k = 0; k < H_; ++k) hh[k] += xh[k];
    }
    ClipInPlace(p_.clip, hh, H_);
    Activate(act_[1], hh, H_);
    for (int64_t k = 0; k < H_; ++k) h[k] = (1.0f - z[k]) * hh[k] + z[k] * h[k];
  }

  // Gates i, o, f, c; peepholes P = [Pi, Po, Pf] read the old cell for i and f, the new one for o.
  void LstmGates(float* g, const float* x, float* h, float* c) {
    float *i = g, *o = g + H_, *f = g + 2 * H_, *cc = g + 3 * H_;
    for (int64_t k = 0; k < GH_; ++k) g[k] += x[k];
    const float* peep = p_.peepholes ? p_.peepholes + d_ * 3 * H_ : nullptr;
    if (peep) {
      const float *pi = peep, *pf = peep + 2 * H_;
      for (int64_t k = 0; k < H_; ++k) {
        i[k] += pi[k] * c[k];
        f[k] += pf[k] * c[k];
      }
      ClipInPlace(p_.clip, i, H_);
      ClipInPlace(p_.clip, f, H_);
      Activate(act_[0], i, H_);
      if (!p_.input_forget) Activate(act_[0], f, H_);
    } else {
      ClipInPlace(p_.clip, i, 3 * H_);
      Activate(act_[0], i, p_.input_forget ? 2 * H_ : 3 * H_);  // i and o (and f)
    }
    if (p_.input_forget)
      for (int64_t k = 0; k < H_; ++k) f[k] = 1.0f - i[k];
    ClipInPlace(p_.clip, cc, H_);
    Activate(act_[1], cc, H_);
    for (int64_t k = 0; k < H_; ++k) c[k] = f[k] * c[k] + i[k] * cc[k];
    if (peep) {
      const float* po = peep + H_;
      for (int64_t k = 0; k < H_; ++k) o[k] += po[k] * c[k];
      ClipInPlace(p_.clip, o, H_);
      Activate(act_[0], o, H_);
    }
    // h = o * h_act(c): the activation on a copy of c (the state keeps c itself).
    std::memcpy(h, c, H_ * sizeof(float));
    Activate(act_[2], h, H_);
    for (int64_t k = 0; k < H_; ++k) h[k] *= o[k];
  }

  void WriteStates() {
    for (int64_t b = 0; b < B_; ++b) {
      if (p_.y_h) std::memcpy(p_.y_h + StateOffset(b), &h_[b * H_], H_ * sizeof(float));
      if (p_.y_c && !c_.empty())
        std::memcpy(p_.y_c + StateOffset(b), &c_[b * H_], H_ * sizeof(float));
    }
  }

  const RnnProblem& p_;
  const int d_, threads_, G_;
  const int64_t H_, GH_, B_, S_;
  const bool reverse_;
  const RnnActivation* act_;
  RnnDirectionWeights& w_;
  std::vector<float> xw_, hr_, h_, c_, rh_;
  int64_t hr_ld_ = 0, xw_ld_ = 0;
  const float* rbh_ = nullptr;
};

}  // namespace

void RecurrentF32(const RnnProblem& p, int threads) {
  // Steps past a row's length leave zeros in Y.
  if (p.y && p.sequence_lens)
    std::memset(p.y, 0,
                static_cast<size_t>(p.seq * p.num_dir * p.batch * p.hidden) * sizeof(float));
  RnnWeights local;
  RnnWeights& w = p.weights ? *p.weights : local;
  if (!LaidOutFor(w, p)) LayOut(p, &w);
  if (p.num_dir == 2 && threads >= 2) {
    ParallelFor(2, 2, [&](int64_t d0, int64_t d1) {
      for (int64_t d = d0; d < d1; ++d)
        Direction(p, static_cast<int>(d), threads / 2, &w.dirs[d]).Run();
    });
    return;
  }
  for (int d = 0; d < p.num_dir; ++d) Direction(p, d, threads, &w.dirs[d]).Run();
}

}  // namespace kiln::ops
