#include "ops/resize_kernels.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu_isa.h"
#include "ops/simd.h"
#include "ops/thread_pool.h"

namespace kiln::ops {
namespace {

// dst[0, n) = sum over taps t (in order, from the first product) of w[t] * src[t][0, n).
template <int VB>
KILN_AI void WeightedRowsBody(float* dst, const float* const* src, const float* w, int64_t taps,
                              int64_t n) {
  using V = Vec<float, VB>;
  constexpr int64_t L = VB / 4;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    V a0, a1, s0, s1;
    std::memcpy(&s0, src[0] + i, VB);
    std::memcpy(&s1, src[0] + i + L, VB);
    a0 = w[0] * s0;
    a1 = w[0] * s1;
    for (int64_t t = 1; t < taps; ++t) {
      std::memcpy(&s0, src[t] + i, VB);
      std::memcpy(&s1, src[t] + i + L, VB);
      a0 += w[t] * s0;
      a1 += w[t] * s1;
    }
    std::memcpy(dst + i, &a0, VB);
    std::memcpy(dst + i + L, &a1, VB);
  }
  for (; i < n; ++i) {
    float a = w[0] * src[0][i];
    for (int64_t t = 1; t < taps; ++t) a += w[t] * src[t][i];
    dst[i] = a;
  }
}

#if KILN_X86_DISPATCH
__attribute__((target("avx512f,fma"))) void WeightedRowsAvx512(float* dst, const float* const* src,
                                                               const float* w, int64_t taps,
                                                               int64_t n) {
  WeightedRowsBody<64>(dst, src, w, taps, n);
}
__attribute__((target("avx2,fma"))) void WeightedRowsAvx2(float* dst, const float* const* src,
                                                          const float* w, int64_t taps, int64_t n) {
  WeightedRowsBody<32>(dst, src, w, taps, n);
}
#endif

void WeightedRows(Isa isa, float* dst, const float* const* src, const float* w, int64_t taps,
                  int64_t n) {
#if KILN_X86_DISPATCH
  if (isa == Isa::kAvx512) return WeightedRowsAvx512(dst, src, w, taps, n);
  if (isa == Isa::kAvx2) return WeightedRowsAvx2(dst, src, w, taps, n);
#endif
  WeightedRowsBody<16>(dst, src, w, taps, n);
}

// Elements a thread takes at least, per pass.
constexpr int64_t kElementsPerThread = 1 << 15;

// One axis: [outer, in, inner] -> [outer, out, inner].
void ResizeAxis(const float* src, float* dst, int64_t outer, int64_t in, int64_t inner,
                const ResizeAxisF32& a, float extrapolation, int threads) {
  const int64_t out = a.size();
  const int64_t max_taps = [&] {
    int64_t m = 1;
    for (int64_t i = 0; i < out; ++i) m = std::max(m, a.start[i + 1] - a.start[i]);
    return m;
  }();
  if (inner == 1) {  // the last axis: per element, its taps gathered from the row
    const int64_t rows_per = std::max<int64_t>(1, kElementsPerThread / std::max<int64_t>(out, 1));
    ParallelSlices(threads, outer, rows_per, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* s = src + r * in;
        float* d = dst + r * out;
        for (int64_t i = 0; i < out; ++i) {
          if (a.extrapolate[i]) {
            d[i] = extrapolation;
            continue;
          }
          const int64_t t0 = a.start[i], t1 = a.start[i + 1];
          float v = a.w[t0] * s[a.idx[t0]];
          for (int64_t t = t0 + 1; t < t1; ++t) v += a.w[t] * s[a.idx[t]];
          d[i] = v;
        }
      }
    });
    return;
  }
  // An axis with rows after it: each output row is a weighted sum of whole input rows.
  const Isa isa = BestIsa();
  const int64_t rows = outer * out;
  ParallelSlices(threads, rows, std::max<int64_t>(1, kElementsPerThread / inner),
                 [&](int64_t r0, int64_t r1) {
                   std::vector<const float*> rows_in(static_cast<size_t>(max_taps));
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t o = r / out, i = r % out;
                     float* d = dst + r * inner;
                     if (a.extrapolate[i]) {
                       std::fill(d, d + inner, extrapolation);
                       continue;
                     }
                     const int64_t t0 = a.start[i], taps = a.start[i + 1] - t0;
                     for (int64_t t = 0; t < taps; ++t)
                       rows_in[t] = src + (o * in + a.idx[t0 + t]) * inner;
                     WeightedRows(isa, d, rows_in.data(), &a.w[t0], taps, inner);
                   }
                 });
}

// The order of the passes: each next one the cheapest by its output elements times its taps, a
// pass over the last axis (a gather per element, not whole rows) counted three times; ties go to
// the later axis, as the reference's order. Upsampling so resizes the short input rows first,
// downsampling shrinks the rows before it gathers along them.
std::vector<int> PassOrder(const std::vector<int64_t>& in,
                           const std::vector<const ResizeAxisF32*>& axes) {
  const int r = static_cast<int>(in.size());
  std::vector<int64_t> dims = in;
  std::vector<int> order;
  std::vector<char> done(static_cast<size_t>(r), 0);
  for (;;) {
    int best = -1;
    double best_cost = 0;
    for (int d = r - 1; d >= 0; --d) {
      if (!axes[d] || done[d]) continue;
      double elems = 1;
      for (int e = 0; e < r; ++e) elems *= static_cast<double>(e == d ? axes[d]->size() : dims[e]);
      const double taps =
          static_cast<double>(axes[d]->idx.size()) / std::max<int64_t>(axes[d]->size(), 1);
      const double cost = elems * std::max(taps, 1.0) * (d == r - 1 ? 3.0 : 1.0);
      if (best < 0 || cost < best_cost) {
        best = d;
        best_cost = cost;
      }
    }
    if (best < 0) return order;
    done[best] = 1;
    dims[best] = axes[best]->size();
    order.push_back(best);
  }
}

}  // namespace

void ResizeF32(const float* x, const std::vector<int64_t>& in,
               const std::vector<const ResizeAxisF32*>& axes, float extrapolation, float* y,
               int threads) {
  const int r = static_cast<int>(in.size());
  std::vector<int> order = PassOrder(in, axes);
  std::vector<int64_t> dims = in;
  int64_t total = 1;
  for (int64_t v : dims) total *= v;
  if (order.empty()) {
    std::memcpy(y, x, static_cast<size_t>(total) * sizeof(float));
    return;
  }
  std::vector<float> buf[2];
  const float* cur = x;
  for (size_t k = 0; k < order.size(); ++k) {
    const int d = order[k];
    int64_t outer = 1, inner = 1;
    for (int e = 0; e < d; ++e) outer *= dims[e];
    for (int e = d + 1; e < r; ++e) inner *= dims[e];
    const int64_t in_d = dims[d];
    dims[d] = axes[d]->size();
    float* next = y;
    if (k + 1 < order.size()) {
      buf[k % 2].resize(static_cast<size_t>(outer * dims[d] * inner));
      next = buf[k % 2].data();
    }
    ResizeAxis(cur, next, outer, in_d, inner, *axes[d], extrapolation, threads);
    cur = next;
  }
}

}  // namespace kiln::ops
