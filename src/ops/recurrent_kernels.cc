#include "ops/recurrent_kernels.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/dnnl/dnnl_available.h"
#include "kernels/dnnl/gemm_dnnl.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"

namespace kiln::ops {
namespace {

int64_t Padded(int64_t n) { return (n + kRnnPanel - 1) / kRnnPanel * kRnnPanel; }

// From this many batch rows the recurrent product is a packed GEMM (its register tiles are full);
// below, the panel kernel here, which reads R^T once per group of rows. AVX2's GEMM tile is 6
// rows high, so 8 rows ran as 6 + 2: there the panel kernel's two groups of 4 took batch-8
// LSTM / GRU steps 5-15% faster (Zen 1), up to 15 rows.
int64_t PackedRows() { return BestIsa() == Isa::kAvx512 ? 8 : 16; }

// Batch rows split over threads while R^T takes at most this much (each thread streams all of it
// every step, from its own core's cache).
constexpr int64_t kBatchSplitBytes = int64_t{512} << 10;

// Hidden units split over threads from this many multiply-adds in each phase of a step (below,
// the synchronization a phase costs outweighs its halved product: LSTM hidden 128 batch 1 ran
// 10% slower on two threads, hidden 256 1.6x faster; a GRU with the reset gate first, whose
// second phase is one gate's product, hidden 256 batch 1 1.5x slower).
constexpr int64_t kUnitSplitWork = int64_t{1} << 17;

// out[r][panel p] = h[r] * panel p for R rows and P panels (src: the panels, rows ld apart, or
// where Stream the first of P interleaved ones; dst: row 0's output columns of each), every panel
// kRnnPanel columns of N vectors.
template <int VB, int R, int P, bool Stream>
KILN_AI void ProductBlock(const float* h, int64_t ldh, int64_t K, const float* const* src,
                          int64_t ld, float* const* dst, int64_t ldo) {
  using V = Vec<float, VB>;
  constexpr int L = VB / 4, N = static_cast<int>(kRnnPanel) / L;
  V acc[R][P][N];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      for (int n = 0; n < N; ++n) acc[r][p][n] = V{} + 0.0f;
  // One weight vector live at a time (an array of them, with the sums, outgrew AVX2's 16
  // registers: with one row, the sums went through the stack at every step).
  for (int64_t k = 0; k < K; ++k) {
    V hv[R];
    for (int r = 0; r < R; ++r) hv[r] = V{} + h[r * ldh + k];
    for (int p = 0; p < P; ++p)
      for (int n = 0; n < N; ++n) {
        V w;
        const float* panel = Stream ? src[0] + p * kRnnPanel : src[p];
        std::memcpy(&w, panel + k * ld + n * L, VB);
        for (int r = 0; r < R; ++r) acc[r][p][n] += hv[r] * w;
      }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      for (int n = 0; n < N; ++n) std::memcpy(dst[p] + r * ldo + n * L, &acc[r][p][n], VB);
}

// Panels ids[0, n_ids) of m for R rows, P at a time, the rest in passes of half as many (one
// panel a pass would leave a single chain of dependent FMAs).
template <int VB, int R, int P>
KILN_AI void ProductPanels(const float* h, int64_t ldh, const RnnPanels& m, const int32_t* ids,
                           int64_t n_ids, float* out, int64_t ldo) {
  const float* src[P];
  float* dst[P];
  int64_t i = 0;
  for (; i + P <= n_ids; i += P) {
    for (int p = 0; p < P; ++p) {
      src[p] = m.Panel(ids[i + p]);
      dst[p] = out + ids[i + p] * kRnnPanel;
    }
    const bool stream =
        ids[i + P - 1] - ids[i] == P - 1 && ids[i] / m.group == ids[i + P - 1] / m.group;
    if (stream)
      ProductBlock<VB, R, P, true>(h, ldh, m.rows, src, m.ld(), dst, ldo);
    else
      ProductBlock<VB, R, P, false>(h, ldh, m.rows, src, m.ld(), dst, ldo);
  }
  if constexpr (P > 1) {
    if (i < n_ids) ProductPanels<VB, R, P / 2>(h, ldh, m, ids + i, n_ids - i, out, ldo);
  }
}

// The panels of a pass for R rows where a vector holds VB bytes: as many as keep 16 accumulators
// in AVX-512's 32 registers (against 8: loads that wait on L2 overlap more), 8 in AVX2's 16.
constexpr int PanelsPerPass(int VB, int R) {
  const int N = static_cast<int>(kRnnPanel) / (VB / 4), sums = VB == 64 ? 16 : 8;
  return sums / (R * N) > 0 ? sums / (R * N) : 1;
}

template <int VB, int R>
KILN_AI void ProductRows(const float* h, int64_t ldh, const RnnPanels& m, const int32_t* ids,
                         int64_t n_ids, float* out, int64_t ldo) {
  ProductPanels<VB, R, PanelsPerPass(VB, R)>(h, ldh, m, ids, n_ids, out, ldo);
}

template <int VB>
KILN_AI void ProductBody(const float* h, int64_t ldh, int64_t B, const RnnPanels& m,
                         const int32_t* ids, int64_t n_ids, float* out, int64_t ldo) {
  int64_t b = 0;
  for (; b + 4 <= B; b += 4)
    ProductRows<VB, 4>(h + b * ldh, ldh, m, ids, n_ids, out + b * ldo, ldo);
  switch (B - b) {
    case 3:
      ProductRows<VB, 3>(h + b * ldh, ldh, m, ids, n_ids, out + b * ldo, ldo);
      break;
    case 2:
      ProductRows<VB, 2>(h + b * ldh, ldh, m, ids, n_ids, out + b * ldo, ldo);
      break;
    case 1:
      ProductRows<VB, 1>(h + b * ldh, ldh, m, ids, n_ids, out + b * ldo, ldo);
      break;
    default:
      break;
  }
}

#if KILN_X86_DISPATCH
__attribute__((target("avx512f,fma"))) void ProductAvx512(const float* h, int64_t ldh, int64_t B,
                                                          const RnnPanels& m, const int32_t* ids,
                                                          int64_t n_ids, float* out, int64_t ldo) {
  ProductBody<64>(h, ldh, B, m, ids, n_ids, out, ldo);
}
__attribute__((target("avx2,fma"))) void ProductAvx2(const float* h, int64_t ldh, int64_t B,
                                                     const RnnPanels& m, const int32_t* ids,
                                                     int64_t n_ids, float* out, int64_t ldo) {
  ProductBody<32>(h, ldh, B, m, ids, n_ids, out, ldo);
}
#endif

// The panels a pass of the product of B rows takes (its first rows' passes).
int64_t PassPanels(int64_t B) {
  const int R = static_cast<int>(std::min<int64_t>(B, 4));
#if KILN_X86_DISPATCH
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) return PanelsPerPass(64, R);
  if (isa == Isa::kAvx2) return PanelsPerPass(32, R);
#endif
  return PanelsPerPass(16, R);
}

// out[b][columns of panel i] = h[b][0, m.rows) * those columns of m, for b < B and the panels
// listed in ids.
void PanelProduct(const float* h, int64_t ldh, int64_t B, const RnnPanels& m, const int32_t* ids,
                  int64_t n_ids, float* out, int64_t ldo) {
#if KILN_X86_DISPATCH
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) return ProductAvx512(h, ldh, B, m, ids, n_ids, out, ldo);
  if (isa == Isa::kAvx2) return ProductAvx2(h, ldh, B, m, ids, n_ids, out, ldo);
#endif
  ProductBody<16>(h, ldh, B, m, ids, n_ids, out, ldo);
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

void AddInPlace(float* v, const float* x, int64_t n) {
  for (int64_t k = 0; k < n; ++k) v[k] += x[k];
}

// Rows first + g * gate_cols + j (g < gates, j < gate_cols) of m, a row-major [*, K] matrix, as
// the columns g * gate_ld + j of panels.
// Products of `batch` rows read them (the group is their passes' panels).
RnnPanels Panels(const float* m, int64_t K, int64_t first, int64_t gates, int64_t gate_cols,
                 int64_t batch) {
  RnnPanels p;
  p.rows = K;
  p.gate_ld = Padded(gate_cols);
  p.cols = gates * p.gate_ld;
  const int64_t panels = p.cols / kRnnPanel;
  p.group = std::min(panels, PassPanels(batch));
  p.stride = K * p.ld() + 16;
  p.data.assign(static_cast<size_t>((panels + p.group - 1) / p.group * p.stride), 0.0f);
  for (int64_t g = 0; g < gates; ++g)
    for (int64_t j = 0; j < gate_cols; ++j) {
      const int64_t col = g * p.gate_ld + j;
      auto* panel = const_cast<float*>(p.Panel(col / kRnnPanel)) + col % kRnnPanel;
      const float* row = m + (first + g * gate_cols + j) * K;
      for (int64_t k = 0; k < K; ++k) panel[k * p.ld()] = row[k];
    }
  return p;
}

// The panels of m in the columns of hidden units [u0, u1) of every gate (u0 a multiple of the
// panel width).
std::vector<int32_t> PanelsOfUnits(const RnnPanels& m, int64_t u0, int64_t u1) {
  std::vector<int32_t> ids;
  for (int64_t g = 0; g < m.cols / m.gate_ld; ++g)
    for (int64_t c = u0; c < std::min(Padded(u1), m.gate_ld); c += kRnnPanel)
      ids.push_back(static_cast<int32_t>((g * m.gate_ld + c) / kRnnPanel));
  return ids;
}

PackedB<float> PackPanels(const RnnPanels& m) {
  std::vector<float> rows(static_cast<size_t>(m.rows * m.cols));
  for (int64_t k = 0; k < m.rows; ++k)
    for (int64_t j = 0; j < m.cols; ++j)
      rows[k * m.cols + j] = m.Panel(j / kRnnPanel)[k * m.ld() + j % kRnnPanel];
  return PackGemmB<float>(m.rows, m.cols, rows.data(), m.cols, 1);
}

// Lays out W and R for every direction (R^T per gate group; W^T where the projection has few rows).
void LayOut(const RnnProblem& p, RnnWeights* out) {
  const int64_t H = p.hidden, I = p.input, G = RnnGates(p.cell), rows = p.seq * p.batch;
  out->w = p.w;
  out->r = p.r;
  out->hidden = H;
  out->input = I;
  out->rows = rows;
  out->dirs.clear();
  out->dirs.resize(static_cast<size_t>(p.num_dir));
  for (int d = 0; d < p.num_dir; ++d) {
    RnnDirectionWeights& dw = out->dirs[d];
    const float* r = p.r + d * G * H * H;
    if (p.cell == RnnCell::kGru && !p.linear_before_reset) {
      dw.rt.push_back(Panels(r, H, 0, 2, H, p.batch));      // z and r
      dw.rt.push_back(Panels(r, H, 2 * H, 1, H, p.batch));  // h, applied to r * H_prev
    } else {
      dw.rt.push_back(Panels(r, H, 0, G, H, p.batch));
    }
    dw.rt_packed.resize(dw.rt.size());
    const float* w = p.w + d * G * H * I;
    if (rows < PackedRows())
      dw.wt = Panels(w, I, 0, 1, G * H, rows);
    else if (!DnnlAvailable())  // else oneDNN's, packed on the first projection
      dw.w_packed = PackGemmB<float>(I, G * H, w, 1, I);
  }
}

bool LaidOutFor(const RnnWeights& w, const RnnProblem& p) {
  return w.w == p.w && w.r == p.r && w.hidden == p.hidden && w.input == p.input &&
         w.rows == p.seq * p.batch && static_cast<int>(w.dirs.size()) == p.num_dir;
}

// The state of batch rows [b0, b0 + nb) over the steps: the recurrent products (gate g of a row
// at g * gate_ld), the hidden state before and after the step, the cell, GRU's r * H_prev.
struct RowState {
  int64_t b0 = 0, nb = 0;
  std::vector<float> hr, h, h_next, c, rh;
};

// What one thread does of a step: hidden units [u0, u1) and their panels in each gate group.
struct UnitRange {
  int64_t u0 = 0, u1 = 0;
  std::vector<int32_t> ids[2];
  bool whole = false;
};

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
        w_(*weights),
        gs_(weights->rt[0].gate_ld),
        hr_ld_(G_ * gs_) {
    if (p_.bias && Gru() && p_.linear_before_reset) rbh_ = p_.bias + d_ * 2 * GH_ + GH_ + 2 * H_;
  }

  void Run() {
    Project();
    int64_t r_bytes = 0;
    for (const RnnPanels& m : w_.rt) r_bytes += m.rows * m.cols * int64_t{sizeof(float)};
    if (threads_ >= 2 && B_ >= 2 && r_bytes <= kBatchSplitBytes) {
      const int parts = static_cast<int>(std::min<int64_t>(threads_, B_));
      if ((B_ + parts - 1) / parts >= PackedRows()) PackR();
      ParallelFor(parts, B_, [&](int64_t b0, int64_t b1) { RunRows(b0, b1); });
      return;
    }
    if (B_ >= PackedRows()) PackR();
    RunRows(0, B_);
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
  // The step of row b that step t reads (reverse directions start at each row's own end).
  int64_t TimeOf(int64_t t, int64_t b) const { return reverse_ ? Length(b) - 1 - t : t; }
  const float* Xw(int64_t t, int64_t b) const { return &xw_[Row(TimeOf(t, b), b) * xw_ld_]; }

  void PackR() {
    for (size_t g = 0; g < w_.rt.size(); ++g)
      if (w_.rt_packed[g].data.empty()) w_.rt_packed[g] = PackPanels(w_.rt[g]);
  }

  void Allocate(int64_t n) {
    xw_ = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n));
  }

  // xw = X W^T + the biases that do not depend on the state, for every step at once; gate g of a
  // row at g * H.
  void Project() {
    const int64_t I = p_.input, M = S_ * B_;
    if (!w_.wt.data.empty()) {  // few rows: against W^T's panels like the recurrent product
      xw_ld_ = w_.wt.cols;
      Allocate(M * xw_ld_);
      const std::vector<int32_t> ids = PanelsOfUnits(w_.wt, 0, w_.wt.gate_ld);
      PanelProduct(p_.x, I, M, w_.wt, ids.data(), static_cast<int64_t>(ids.size()), xw_.get(),
                   xw_ld_);
    } else {
      xw_ld_ = GH_;
      Allocate(M * GH_);
      const std::vector<float> bias = Bias();
      // oneDNN's matmul (brgemm) where it takes the shape: 2-3x the packed GEMM's speed on the
      // few-hundred-row projections of small recurrences.
      if (w_.w_packed.data.empty() &&
          DnnlGemm(M, GH_, I, p_.x, p_.w + d_ * GH_ * I, true, p_.weights != nullptr,
                   bias.empty() ? nullptr : bias.data(), xw_.get(), threads_, &w_.w_dnnl))
        return;
      if (w_.w_packed.data.empty())  // oneDNN refused: W is still there on this first run
        w_.w_packed = PackGemmB<float>(I, GH_, p_.w + d_ * GH_ * I, 1, I);
      PackedGemm<float>(M, p_.x, I, 1, w_.w_packed, xw_.get(), GH_, false, threads_);
      for (int64_t m = 0; m < M && !bias.empty(); ++m) AddInPlace(&xw_[m * GH_], bias.data(), GH_);
      return;
    }
    const std::vector<float> bias = Bias();
    for (int64_t m = 0; m < M && !bias.empty(); ++m) AddInPlace(&xw_[m * xw_ld_], bias.data(), GH_);
  }

  // The biases that do not depend on the state, per gate column (empty without a bias).
  std::vector<float> Bias() const {
    if (!p_.bias) return {};
    const float* wb = p_.bias + d_ * 2 * GH_;
    const float* rb = wb + GH_;
    std::vector<float> sum(wb, wb + GH_);
    // GRU with linear_before_reset multiplies R's h-gate bias by r: it stays in the product.
    const int64_t folded = Gru() && p_.linear_before_reset ? 2 * H_ : GH_;
    for (int64_t j = 0; j < folded; ++j) sum[j] += rb[j];
    return sum;
  }

  RowState NewState(int64_t b0, int64_t nb) const {
    RowState s;
    s.b0 = b0;
    s.nb = nb;
    s.hr.assign(static_cast<size_t>(nb * hr_ld_), 0.0f);
    s.h.assign(static_cast<size_t>(nb * H_), 0.0f);
    s.h_next = s.h;
    if (p_.cell == RnnCell::kLstm) s.c.assign(static_cast<size_t>(nb * H_), 0.0f);
    if (GruResetFirst()) s.rh.assign(static_cast<size_t>(nb * H_), 0.0f);
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t at = StateOffset(b0 + i);
      if (p_.initial_h) std::memcpy(&s.h[i * H_], p_.initial_h + at, H_ * sizeof(float));
      if (p_.initial_c && !s.c.empty())
        std::memcpy(&s.c[i * H_], p_.initial_c + at, H_ * sizeof(float));
    }
    return s;
  }

  UnitRange Units(int64_t u0, int64_t u1) const {
    UnitRange u;
    u.u0 = u0;
    u.u1 = u1;
    u.whole = u0 == 0 && u1 == H_;
    for (size_t g = 0; g < w_.rt.size(); ++g) u.ids[g] = PanelsOfUnits(w_.rt[g], u0, u1);
    return u;
  }

  // The hidden units in whole panels over `parts` threads.
  std::vector<UnitRange> SplitUnits(int parts) const {
    const int64_t blocks = Padded(H_) / kRnnPanel;
    std::vector<UnitRange> out;
    for (int i = 0; i < parts; ++i)
      out.push_back(Units(i * blocks / parts * kRnnPanel,
                          std::min(H_, (i + 1) * blocks / parts * kRnnPanel)));
    return out;
  }

  // Rows [b0, b1) through every step; their hidden units split over the threads where the
  // product is large enough.
  void RunRows(int64_t b0, int64_t b1) {
    RowState s = NewState(b0, b1 - b0);
    const int64_t blocks = Padded(H_) / kRnnPanel;
    const int64_t smallest_phase = B_ * H_ * (GruResetFirst() ? H_ : GH_);
    const bool split = b1 - b0 == B_ && threads_ >= 2 && smallest_phase >= kUnitSplitWork;
    const int parts = split ? static_cast<int>(std::min<int64_t>(threads_, blocks)) : 1;
    // The threads stay together through every step and meet at a barrier after each phase.
    ParallelTeam(parts, [&](int member, int members, TeamBarrier& barrier) {
      const UnitRange u = SplitUnits(members)[member];
      for (int64_t t = 0; t < S_; ++t) {
        if (GruResetFirst()) {
          ResetGate(s, u, t);
          barrier.Wait();
        }
        Update(s, u, t);
        barrier.Wait([&] { std::swap(s.h, s.h_next); });
      }
    });
    WriteStates(s);
  }

  // hr[group's columns of u] = in * R^T for the state's rows.
  void Product(RowState& s, int group, const float* in, const UnitRange& u) {
    float* out = s.hr.data() + (group == 0 ? 0 : w_.rt[0].cols);
    if (u.whole && s.nb >= PackedRows()) {
      PackedGemm<float>(s.nb, in, H_, 1, w_.rt_packed[group], out, hr_ld_, false, 1);
      return;
    }
    PanelProduct(in, H_, s.nb, w_.rt[group], u.ids[group].data(),
                 static_cast<int64_t>(u.ids[group].size()), out, hr_ld_);
  }

  // GRU with the reset gate first: z and r = f(x + h R^T), then rh = r * h, for units u.
  void ResetGate(RowState& s, const UnitRange& u, int64_t t) {
    Product(s, 0, s.h.data(), u);
    const int64_t n = u.u1 - u.u0;
    for (int64_t i = 0; i < s.nb; ++i) {
      const int64_t b = s.b0 + i;
      if (t >= Length(b)) continue;
      const float* x = Xw(t, b) + u.u0;
      for (int64_t gate = 0; gate < 2; ++gate) {
        float* g = &s.hr[i * hr_ld_ + gate * gs_ + u.u0];
        AddInPlace(g, x + gate * H_, n);
        ClipInPlace(p_.clip, g, n);
        Activate(act_[0], g, n);
      }
      const float* r = &s.hr[i * hr_ld_ + gs_ + u.u0];
      const float* h = &s.h[i * H_ + u.u0];
      float* rh = &s.rh[i * H_ + u.u0];
      for (int64_t k = 0; k < n; ++k) rh[k] = r[k] * h[k];
    }
  }

  // The recurrent product of units u and their gates: h_next (and c) for every row.
  void Update(RowState& s, const UnitRange& u, int64_t t) {
    if (GruResetFirst())
      Product(s, 1, s.rh.data(), u);
    else
      Product(s, 0, s.h.data(), u);
    const int64_t n = u.u1 - u.u0;
    for (int64_t i = 0; i < s.nb; ++i) {
      const int64_t b = s.b0 + i, len = Length(b);
      const float* h = &s.h[i * H_ + u.u0];
      float* h_next = &s.h_next[i * H_ + u.u0];
      if (t >= len) {  // past the row's length: the state stays
        std::memcpy(h_next, h, n * sizeof(float));
        continue;
      }
      float* g = &s.hr[i * hr_ld_ + u.u0];
      const float* x = Xw(t, b) + u.u0;
      switch (p_.cell) {
        case RnnCell::kRnn:
          RnnGate(g, x, h_next, n);
          break;
        case RnnCell::kGru:
          GruGates(g, x, h, h_next, u.u0, n);
          break;
        case RnnCell::kLstm:
          LstmGates(g, x, h_next, &s.c[i * H_ + u.u0], u.u0, n);
          break;
      }
      if (p_.y) {
        const int64_t ti = TimeOf(t, b);
        float* y = p_.y + (p_.layout == 0 ? ((ti * p_.num_dir + d_) * B_ + b) * H_
                                          : ((b * S_ + ti) * p_.num_dir + d_) * H_);
        std::memcpy(y + u.u0, h_next, n * sizeof(float));
      }
    }
  }

  // For n units: g is the row's recurrent product (gates gs_ apart), x its projection (gates H_
  // apart), both from the first unit.
  void RnnGate(float* g, const float* x, float* h_next, int64_t n) {
    AddInPlace(g, x, n);
    ClipInPlace(p_.clip, g, n);
    Activate(act_[0], g, n);
    std::memcpy(h_next, g, n * sizeof(float));
  }

  // Gates z, r, h; z and r are already activated when the reset gate comes first.
  void GruGates(float* g, const float* x, const float* h, float* h_next, int64_t u0, int64_t n) {
    float *z = g, *r = g + gs_, *hh = g + 2 * gs_;
    const float* xh = x + 2 * H_;
    if (!GruResetFirst()) {
      for (float* v : {z, r}) {
        AddInPlace(v, v == z ? x : x + H_, n);
        ClipInPlace(p_.clip, v, n);
        Activate(act_[0], v, n);
      }
      const float* rbh = rbh_ ? rbh_ + u0 : nullptr;
      for (int64_t k = 0; k < n; ++k) hh[k] = xh[k] + r[k] * (hh[k] + (rbh ? rbh[k] : 0.0f));
    } else {
      AddInPlace(hh, xh, n);
    }
    ClipInPlace(p_.clip, hh, n);
    Activate(act_[1], hh, n);
    for (int64_t k = 0; k < n; ++k) h_next[k] = (1.0f - z[k]) * hh[k] + z[k] * h[k];
  }

  // Gates i, o, f, c; peepholes P = [Pi, Po, Pf] read the old cell for i and f, the new one for o.
  void LstmGates(float* g, const float* x, float* h_next, float* c, int64_t u0, int64_t n) {
    float *i = g, *o = g + gs_, *f = g + 2 * gs_, *cc = g + 3 * gs_;
    for (int64_t gate = 0; gate < 4; ++gate) AddInPlace(g + gate * gs_, x + gate * H_, n);
    const float* peep = p_.peepholes ? p_.peepholes + d_ * 3 * H_ + u0 : nullptr;
    if (peep) {
      const float *pi = peep, *pf = peep + 2 * H_;
      for (int64_t k = 0; k < n; ++k) {
        i[k] += pi[k] * c[k];
        f[k] += pf[k] * c[k];
      }
    }
    for (float* v : {i, o, f}) {
      if (v == o && peep) continue;  // after the new cell
      if (v == f && p_.input_forget) continue;
      ClipInPlace(p_.clip, v, n);
      Activate(act_[0], v, n);
    }
    if (p_.input_forget)
      for (int64_t k = 0; k < n; ++k) f[k] = 1.0f - i[k];
    ClipInPlace(p_.clip, cc, n);
    Activate(act_[1], cc, n);
    for (int64_t k = 0; k < n; ++k) c[k] = f[k] * c[k] + i[k] * cc[k];
    if (peep) {
      const float* po = peep + H_;
      for (int64_t k = 0; k < n; ++k) o[k] += po[k] * c[k];
      ClipInPlace(p_.clip, o, n);
      Activate(act_[0], o, n);
    }
    // h = o * h_act(c): the activation on a copy of c (the state keeps c itself).
    std::memcpy(h_next, c, n * sizeof(float));
    Activate(act_[2], h_next, n);
    for (int64_t k = 0; k < n; ++k) h_next[k] *= o[k];
  }

  void WriteStates(const RowState& s) const {
    for (int64_t i = 0; i < s.nb; ++i) {
      const int64_t at = StateOffset(s.b0 + i);
      if (p_.y_h) std::memcpy(p_.y_h + at, &s.h[i * H_], H_ * sizeof(float));
      if (p_.y_c && !s.c.empty()) std::memcpy(p_.y_c + at, &s.c[i * H_], H_ * sizeof(float));
    }
  }

  const RnnProblem& p_;
  const int d_, threads_, G_;
  const int64_t H_, GH_, B_, S_;
  const bool reverse_;
  const RnnActivation* act_;
  RnnDirectionWeights& w_;
  const int64_t gs_, hr_ld_;     // the stride of gates in a row of products, and of rows
  std::unique_ptr<float[]> xw_;  // every element written by the projection: not cleared first
  int64_t xw_ld_ = 0;
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
