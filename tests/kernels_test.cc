// The host GEMM and depthwise-convolution kernels against naive references (sums in double):
// odd shapes and tails of every register tile, K = 1 and K = 0, several k / n blocks, transposed
// and padded operands, accumulate on and off, alpha, threads 1..3, and every micro-kernel ISA
// this CPU can run (forced through the kernels' Isa argument). Results must also be
// bit-identical across thread counts. The thread pool: every index once, the chunk boundaries,
// at most `threads` threads per call, nested and concurrent calls, and a pool after fork().
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "conv_reference.h"
#include "kernels/x86/conv_depthwise.h"
#include "kernels/x86/conv_direct.h"
#include "kernels/x86/conv_few_outputs.h"
#include "kernels/x86/conv_gemm.h"
#include "kernels/x86/conv_grouped.h"
#include "kernels/x86/conv_transpose.h"
#include "kernels/x86/conv_winograd.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/gemm.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/layout_kernels.h"
#include "kernels/x86/pool_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "ops/channels_last.h"
#include "ops/elementwise_kernels.h"
#include "ops/shape_ops_util.h"
#include "random_vectors.h"

namespace kiln::ops {
namespace {

std::vector<Isa> RunnableIsas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) v.push_back(isa);
  return v;
}

template <class T>
std::vector<T> Random(size_t n, std::mt19937& rng) {
  return testing::RandomVector<T>(n, rng);
}

template <class T>
double Tol() {
  return sizeof(T) == 4 ? 2e-6 : 1e-14;
}

struct GemmCase {
  int64_t M, N, K;
  bool ta, tb;
  int64_t pad;  // extra leading-dimension elements on A, B and C
  bool accumulate;
  double alpha;
};

std::string Describe(const GemmCase& c, Isa isa, int threads) {
  return "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) +
         " pad=" + std::to_string(c.pad) + " acc=" + std::to_string(c.accumulate) +
         " alpha=" + std::to_string(c.alpha) + " isa=" + IsaName(isa) +
         " threads=" + std::to_string(threads);
}

// PackedGemm on case c with every runnable ISA and threads 1..3, against the double reference;
// the 2- and 3-thread results must equal the 1-thread result bit for bit.
template <class T>
void CheckPackedGemm(const GemmCase& c, std::mt19937& rng) {
  // op(A) is M x K: stored M x K (lda = K + pad) or, transposed, K x M (lda = M + pad).
  const int64_t lda = (c.ta ? c.M : c.K) + c.pad, ldb = (c.tb ? c.K : c.N) + c.pad;
  const int64_t ldc = c.N + c.pad;
  auto A = Random<T>(static_cast<size_t>((c.ta ? c.K : c.M) * lda), rng);
  auto B = Random<T>(static_cast<size_t>((c.tb ? c.N : c.K) * ldb), rng);
  auto C0 = Random<T>(static_cast<size_t>(c.M * ldc), rng);
  const int64_t rsa = c.ta ? 1 : lda, csa = c.ta ? lda : 1;
  const int64_t rsb = c.tb ? 1 : ldb, csb = c.tb ? ldb : 1;
  std::vector<double> ref(static_cast<size_t>(c.M * c.N)), mag(ref.size());
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        double p =
            static_cast<double>(A[i * rsa + k * csa]) * static_cast<double>(B[k * rsb + j * csb]);
        s += p;
        m += std::fabs(p);
      }
      double c0 = c.accumulate ? static_cast<double>(C0[i * ldc + j]) : 0.0;
      ref[i * c.N + j] = c0 + c.alpha * s;
      mag[i * c.N + j] = std::fabs(c0) + std::fabs(c.alpha) * m + 1e-30;
    }
  }
  for (Isa isa : RunnableIsas()) {
    std::vector<T> first;
    for (int threads = 1; threads <= 3; ++threads) {
      std::vector<T> C = C0;
      PackedGemm<T>(c.M, c.N, c.K, static_cast<T>(c.alpha), A.data(), rsa, csa, B.data(), rsb, csb,
                    C.data(), ldc, c.accumulate, threads, isa);
      double worst = 0;
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j)
          worst = std::max(worst, std::fabs(C[i * ldc + j] - ref[i * c.N + j]) / mag[i * c.N + j]);
      EXPECT_LE(worst, Tol<T>()) << Describe(c, isa, threads);
      // The padding between rows of C is never written.
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = c.N; j < ldc; ++j)
          ASSERT_EQ(C[i * ldc + j], C0[i * ldc + j]) << Describe(c, isa, threads);
      if (threads == 1) {
        first = C;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), C.data(), C.size() * sizeof(T)))
            << "differs from 1 thread: " << Describe(c, isa, threads);
      }
    }
  }
}

template <class T>
void PackedGemmSweep(uint32_t seed) {
  std::mt19937 rng(seed);
  // Sizes around the tiles (4/6/8 rows, 8..32 columns) and blocks (k 128/256, n 256/512).
  const int64_t Ms[] = {1, 2, 5, 6, 7, 8, 9, 13, 17, 33};
  const int64_t Ns[] = {1, 3, 8, 15, 16, 17, 31, 33, 47, 65};
  const int64_t Ks[] = {1, 2, 7, 16, 31, 129};
  int n = 0;
  for (int64_t M : Ms)
    for (int64_t N : Ns)
      for (int64_t K : Ks) {
        if ((n++ % 7) != 0) continue;  // a spread-out seventh of the grid, with all flags
        for (int f = 0; f < 4; ++f) {
          GemmCase c{M,
                     N,
                     K,
                     (f & 1) != 0,
                     (f & 2) != 0,
                     (n % 3 == 0) ? 3 : 0,
                     ((n + f) % 2) == 0,
                     (f == 3) ? -0.5 : 1.0};
          CheckPackedGemm<T>(c, rng);
        }
      }
}

TEST(PackedGemm, F32TailsTransposesAccumulateThreadsIsas) { PackedGemmSweep<float>(1); }
TEST(PackedGemm, F64TailsTransposesAccumulateThreadsIsas) { PackedGemmSweep<double>(2); }

TEST(PackedGemm, SeveralKAndNBlocks) {
  std::mt19937 rng(3);
  // K past two k blocks, N past the n block, M past the m block; odd everywhere.
  CheckPackedGemm<float>({37, 1100, 530, false, false, 1, true, 1.0}, rng);
  CheckPackedGemm<float>({300, 45, 300, true, true, 0, false, 2.0}, rng);
  CheckPackedGemm<double>({29, 600, 270, false, true, 2, true, 1.0}, rng);
}

// B packed once: the same bits as the unpacked GEMM on one thread, past the k and n blocks,
// accumulating or not, at 1 and 3 threads (threads split rows in whole panels: the same sums).
TEST(PackedGemm, PrepackedBIsTheSameProduct) {
  std::mt19937 rng(5);
  for (auto [M, N, K] : {std::array<int64_t, 3>{37, 530, 300}, {5, 17, 9}, {130, 64, 64}})
    for (Isa isa : RunnableIsas()) {
      const auto A = testing::RandomVector(static_cast<size_t>(M * K), rng);
      const auto B = testing::RandomVector(static_cast<size_t>(K * N), rng);
      const auto C0 = testing::RandomVector(static_cast<size_t>(M * N), rng);
      const PackedB<float> packed = PackGemmB<float>(K, N, B.data(), N, 1, isa);
      for (bool acc : {false, true}) {
        std::vector<float> want = C0;
        PackedGemm<float>(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, want.data(), N, acc, 1,
                          isa);
        for (int threads : {1, 3}) {
          std::vector<float> got = C0;
          PackedGemm<float>(M, A.data(), K, 1, packed, got.data(), N, acc, threads);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
              << M << "x" << N << "x" << K << " " << IsaName(isa) << " acc " << acc << " threads "
              << threads;
        }
      }
    }
}

// A packed once (read transposed, by strides, in some cases): the same bits as the unpacked
// GEMM on one thread, past the k and m blocks, at 1 and 3 threads, splitting columns (N >= M)
// and rows.
TEST(PackedGemm, PrepackedAIsTheSameProduct) {
  std::mt19937 rng(6);
  for (auto [M, N, K] :
       {std::array<int64_t, 3>{530, 37, 300}, {5, 17, 9}, {64, 130, 64}, {8192, 8, 100}})
    for (Isa isa : RunnableIsas())
      for (bool transposed : {false, true}) {
        const auto A = testing::RandomVector(static_cast<size_t>(M * K), rng);
        const auto B = testing::RandomVector(static_cast<size_t>(K * N), rng);
        const auto C0 = testing::RandomVector(static_cast<size_t>(M * N), rng);
        const int64_t rsa = transposed ? 1 : K, csa = transposed ? M : 1;
        const PackedA<float> packed = PackGemmA<float>(M, K, A.data(), rsa, csa, isa);
        for (bool acc : {false, true}) {
          std::vector<float> want = C0;
          PackedGemm<float>(M, N, K, 1.0f, A.data(), rsa, csa, B.data(), N, 1, want.data(), N, acc,
                            1, isa);
          for (int threads : {1, 3}) {
            std::vector<float> got = C0;
            PackedGemm<float>(packed, N, B.data(), N, 1, got.data(), N, acc, threads);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                << M << "x" << N << "x" << K << " " << IsaName(isa) << " acc " << acc << " threads "
                << threads << " transposed " << transposed;
          }
        }
      }
}

// Case i's activation, each in turn (Clip to [-0.5, 0.7], LeakyRelu's slope 0.1).
PostOps CyclingPostOps(int i) {
  PostOps post;
  post.act = static_cast<PostOps::Act>(i % 6);
  post.alpha = post.act == PostOps::Act::kClip ? -0.5f : 0.1f;
  post.beta = 0.7f;
  return post;
}

// y, channels-last (pixels ldc floats apart, the output at channel `first` of each) or NCHW,
// against want [N, M, OHW]; channels of a wider y outside [first, first + M) must still hold 7.
// The tolerance grows with the square root of the terms per sum.
void ExpectConvOutput(const std::vector<float>& y, const std::vector<double>& want, int64_t N,
                      int64_t M, int64_t OHW, bool channels_last, int64_t ldc, int64_t first,
                      int64_t terms, const std::string& what) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t px = 0; px < OHW; ++px)
      for (int64_t c = 0; c < (channels_last ? ldc : M); ++c) {
        const size_t at =
            static_cast<size_t>(channels_last ? (n * OHW + px) * ldc + c : (n * M + c) * OHW + px);
        if (c < first || c >= first + M) {
          ASSERT_EQ(y[at], 7.0f) << what << " pixel " << px << " channel " << c;
          continue;
        }
        const double ref = want[static_cast<size_t>((n * M + c - first) * OHW + px)];
        ASSERT_NEAR(y[at], ref, 2e-5 * (1 + std::fabs(ref)) * std::sqrt(double(terms)))
            << what << " image " << n << " pixel " << px << " channel " << c;
      }
}

// Winograd F(2x2, 3x3) (kernels/x86/conv_winograd.h) against a direct loop in double: pads on
// either side or none, odd sizes and channel counts (vector tails), several tile blocks, bias,
// residual (also in Y's own bytes), every activation, a Concat slice as Y, 1 to 3 threads (the same
// bits), and weights re-read when they are not constant.
TEST(Winograd, AgainstDirectConvolution) {
  std::mt19937 rng(6);
  struct Shape {
    int64_t C, M, H, W, ph, pw, peh, pew;
  };
  using Act = PostOps::Act;
  int i = 0;
  for (const Shape& sh : {Shape{32, 40, 13, 11, 1, 1, 1, 1}, Shape{9, 17, 5, 7, 0, 1, 2, 0},
                          Shape{1, 1, 3, 3, 0, 0, 0, 0}, Shape{17, 8, 16, 16, 2, 2, 2, 2},
                          Shape{64, 72, 24, 20, 1, 1, 1, 1}}) {
    Conv2DParams p{1,
                   sh.C,
                   sh.M,
                   1,
                   sh.H,
                   sh.W,
                   sh.H + sh.ph + sh.peh - 2,
                   sh.W + sh.pw + sh.pew - 2,
                   3,
                   3,
                   1,
                   1,
                   sh.ph,
                   sh.pw,
                   sh.peh,
                   sh.pew,
                   1,
                   1};
    const int64_t OHW = p.OH * p.OW;
    const auto x_nchw = testing::RandomVector(static_cast<size_t>(p.H * p.W * p.C), rng);
    const auto x = testing::Relayout(x_nchw, 1, p.C, p.H * p.W, true);
    auto w = testing::RandomVector(static_cast<size_t>(p.M * p.C * 9), rng);
    const auto b = testing::RandomVector(static_cast<size_t>(p.M), rng);
    const auto z_nchw = testing::RandomVector(static_cast<size_t>(OHW * p.M), rng);
    const auto z = testing::Relayout(z_nchw, 1, p.M, OHW, true);
    for (Act act :
         {Act::kNone, Act::kRelu, Act::kLeakyRelu, Act::kClip, Act::kSwish, Act::kHardSwish}) {
      ++i;
      PostOps post;
      post.act = act;
      post.alpha = act == Act::kClip ? -0.5f : 0.1f;
      post.beta = 0.7f;
      const bool bias = i % 2 == 0, residual = i % 3 != 0, in_place = residual && i % 2 == 1;
      ConvLayouts l{true, residual, true, residual ? 0 : p.M + 5};  // a slice of a wider Y
      const int64_t ldc = l.y_channels ? l.y_channels : p.M, first = residual ? 0 : 3;
      const auto want =
          testing::ReferenceConv(p, x_nchw.data(), w.data(), bias ? b.data() : nullptr,
                                 residual ? z_nchw.data() : nullptr, post);
      std::vector<float> y1;
      for (int threads : {1, 2, 3}) {
        std::unique_ptr<NodeState> state;
        std::vector<float> y(static_cast<size_t>(OHW * ldc), 7.0f);
        if (in_place) std::copy(z.begin(), z.end(), y.begin());
        post.z = !residual ? nullptr : in_place ? y.data() : z.data();
        WinogradChannelsLast(p, x.data(), w.data(), true, bias ? b.data() : nullptr,
                             y.data() + first, l, post, threads, &state);
        // Threads split blocks of tiles or each block's products, never a sum.
        if (threads == 1) y1 = y;
        EXPECT_EQ(0, std::memcmp(y.data(), y1.data(), y.size() * sizeof(float)))
            << "case " << i << " threads " << threads;
        ASSERT_NO_FATAL_FAILURE(
            ExpectConvOutput(y, want, 1, p.M, OHW, true, ldc, first, p.C,
                             "case " + std::to_string(i) + " threads " + std::to_string(threads)));
        // New weights at the same address: constant ones are kept, others are transformed again.
        if (residual || threads > 1) continue;
        std::vector<float> w2(w.size(), 0.0f);
        std::vector<float> y2(y.size(), 7.0f);
        WinogradChannelsLast(p, x.data(), w2.data(), false, nullptr, y2.data() + first, l,
                             PostOps{}, threads, &state);
        EXPECT_EQ(y2[static_cast<size_t>(first)], 0.0f) << "case " << i;
      }
    }
  }
}

// Grouped 1x1 convolutions (kernels/x86/conv_grouped.h) against a loop in double: group widths with
// and without 8-channel tails (6, 28, 34, 32), X, Y and Z in either layout, Z also in Y's own
// bytes, a Concat slice as Y, bias, every activation, two images, 1 and 2 threads, and weights
// re-read when they are not constant. With X channels-last on an AVX2 CPU the direct kernel must
// run.
TEST(GroupedPointwise, AgainstDirectConvolution) {
  std::mt19937 rng(8);
  struct Shape {
    int64_t C, M, group, H, W;
  };
  using Act = PostOps::Act;
  int i = 0;
  for (const Shape& sh :
       {Shape{24, 112, 4, 7, 9}, Shape{136, 136, 4, 5, 5}, Shape{12, 12, 2, 1, 13},
        Shape{64, 64, 2, 6, 6}, Shape{272, 272, 4, 2, 3}}) {
    const Conv2DParams p{2, sh.C, sh.M, sh.group, sh.H, sh.W, sh.H, sh.W, 1,
                         1, 1,    1,    0,        0,    0,    0,    1,    1};
    const int64_t HW = p.H * p.W, Cg = p.C / p.group;
    const auto x = testing::RandomVector(static_cast<size_t>(p.N * HW * p.C), rng);  // NCHW
    const auto w = testing::RandomVector(static_cast<size_t>(p.M * Cg), rng);
    const auto b = testing::RandomVector(static_cast<size_t>(p.M), rng);
    const auto z = testing::RandomVector(static_cast<size_t>(p.N * HW * p.M), rng);  // NCHW
    // v [N, channels, HW] in channels-last order: v[(n * HW + px) * channels + c]
    auto to_cl = [&](const std::vector<float>& v, int64_t channels) {
      std::vector<float> out(v.size());
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t px = 0; px < HW; ++px)
            out[static_cast<size_t>((n * HW + px) * channels + c)] =
                v[static_cast<size_t>((n * channels + c) * HW + px)];
      return out;
    };
    const auto x_cl = to_cl(x, p.C), z_cl = to_cl(z, p.M);
    for (Act act :
         {Act::kNone, Act::kRelu, Act::kLeakyRelu, Act::kClip, Act::kSwish, Act::kHardSwish})
      for (int lay = 0; lay < 8; ++lay) {
        ++i;
        PostOps post;
        post.act = act;
        post.alpha = act == Act::kClip ? -0.5f : 0.1f;
        post.beta = 0.7f;
        const bool bias = i % 3 != 1, residual = lay % 4 != 0, in_place = lay % 4 == 3;
        ConvLayouts l{lay % 2 == 0, residual && (lay / 2) % 2 == 1, lay < 4 || in_place, 0};
        if (in_place) l.z = l.y;
        const bool slice = !residual && l.y && lay < 4;  // a slice of a wider Y
        if (slice) l.y_channels = p.M + 5;
        const int64_t first = slice ? 3 : 0, ldc = l.y ? (slice ? l.y_channels : p.M) : HW;
        const auto want = testing::ReferenceConv(p, x.data(), w.data(), bias ? b.data() : nullptr,
                                                 residual ? z.data() : nullptr, post);
        for (int threads : {1, 2}) {
          std::unique_ptr<NodeState> state;
          const size_t ysize = static_cast<size_t>(l.y ? p.N * HW * ldc : p.N * HW * p.M);
          std::vector<float> y(ysize, 7.0f);
          if (in_place) y = l.y ? z_cl : z;
          post.z = !residual ? nullptr : in_place ? y.data() : l.z ? z_cl.data() : z.data();
          GroupedPointwise(p, l.x ? x_cl.data() : x.data(), w.data(), true,
                           bias ? b.data() : nullptr, y.data() + first, l, post, threads, &state);
          const std::string what =
              "case " + std::to_string(i) + " threads " + std::to_string(threads);
          if (l.x && IsaSupported(Isa::kAvx2)) {
            ASSERT_EQ(state->Kernel(), "kiln grouped 1x1 avx2") << what;
          }
          ASSERT_NO_FATAL_FAILURE(
              ExpectConvOutput(y, want, p.N, p.M, HW, l.y, ldc, first, Cg, what));
          // New weights at the same address: constant ones are kept, others are packed again.
          if (residual || threads == 2) continue;
          const std::vector<float> w2(w.size(), 0.0f);
          std::vector<float> y2(y.size(), 7.0f);
          GroupedPointwise(p, l.x ? x_cl.data() : x.data(), w2.data(), false, nullptr,
                           y2.data() + first, l, PostOps{}, threads, &state);
          EXPECT_EQ(y2[static_cast<size_t>(first)], 0.0f) << what;
        }
      }
  }
}

// The direct convolution (kernels/x86/conv_direct.h) against a loop in double: a first layer (a
// padded copy read a kernel row at a time), dilations (the copy, tap by tap), channel chunks,
// groups, 1x1 and rectangular kernels, strides with asymmetric pads, output channels in 1, 2 and
// 3-panel blocks with 8-channel tails, several pixel blocks and images; X NCHW or channels-last, Y
// channels-last (dense or a Concat slice) or NCHW, Z channels-last (also in Y's own bytes), bias,
// every activation; 1 to 3 threads give the same bits; weights re-read when they are not constant.
TEST(DirectConv, AgainstReferenceLayoutsChunksAndThreads) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "the direct convolution needs AVX2";
  std::mt19937 rng(9);
  struct Shape {
    int64_t N, C, M, H, W, KH, KW, sh, sw, ph, pw, peh, pew, dh, dw, group = 1;
  };
  int i = 0;
  for (const Shape& sh : {Shape{1, 3, 20, 11, 13, 7, 7, 2, 2, 3, 3, 3, 2, 1, 1},
                          Shape{2, 16, 24, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                          Shape{1, 13, 9, 10, 10, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
                          Shape{1, 130, 40, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                          Shape{1, 72, 8, 15, 14, 3, 3, 2, 2, 1, 0, 1, 1, 1, 1},
                          Shape{1, 1100, 12, 3, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
                          Shape{1, 64, 100, 5, 6, 5, 3, 1, 2, 2, 1, 2, 1, 1, 1},
                          Shape{1, 96, 17, 30, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                          // dilations past the map: most tiles' taps lie in the padding
                          Shape{2, 70, 19, 9, 11, 3, 3, 1, 1, 6, 6, 6, 6, 6, 6},
                          Shape{1, 64, 10, 16, 16, 3, 3, 1, 1, 36, 36, 36, 36, 36, 36},
                          // 1-D, images of 64 pixels: a block of outputs spans two of them
                          Shape{3, 8, 16, 1, 64, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1},
                          // groups: of 8 -> 8 channels (RegNet), 4 -> 4 (half a panel), 12 -> 20
                          // (a panel and a tail), strided, dilated, with many chunks
                          Shape{2, 48, 48, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6},
                          Shape{1, 32, 32, 8, 8, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 8},
                          Shape{1, 36, 60, 7, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 3},
                          Shape{1, 600, 24, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2}}) {
    Conv2DParams p{sh.N,  sh.C,  sh.M,  sh.group, sh.H,  sh.W,   0,      0,     sh.KH,
                   sh.KW, sh.sh, sh.sw, sh.ph,    sh.pw, sh.peh, sh.pew, sh.dh, sh.dw};
    p.OH = (p.H + p.ph + p.peh - (p.KH - 1) * p.dh - 1) / p.sh + 1;
    p.OW = (p.W + p.pw + p.pew - (p.KW - 1) * p.dw - 1) / p.sw + 1;
    const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
    const auto x = testing::RandomVector(static_cast<size_t>(p.N * p.C * HW), rng);  // NCHW
    const auto x_cl = testing::Relayout(x, p.N, p.C, HW, true);
    auto w = testing::RandomVector(static_cast<size_t>(p.M * p.C / p.group * p.KH * p.KW), rng);
    const auto b = testing::RandomVector(static_cast<size_t>(p.M), rng);
    const auto z = testing::RandomVector(static_cast<size_t>(p.N * p.M * OHW), rng);  // NCHW
    const auto z_cl = testing::Relayout(z, p.N, p.M, OHW, true);
    for (int lay = 0; lay < 6; ++lay) {
      ++i;
      PostOps post = CyclingPostOps(i);
      // lay: 0 X NCHW, Y dense; 1 Y a slice; 2 Y NCHW; 3 Z; 4 Z in Y's bytes; 5 X NCHW, Y NCHW
      const bool bias = i % 3 != 1, residual = lay == 3 || lay == 4, in_place = lay == 4;
      ConvLayouts l{lay != 0 && lay != 5, residual, lay != 2 && lay != 5, lay == 1 ? p.M + 5 : 0};
      const int64_t first = lay == 1 ? 3 : 0, ldc = l.y_channels ? l.y_channels : p.M;
      const auto want = testing::ReferenceConv(p, x.data(), w.data(), bias ? b.data() : nullptr,
                                               residual ? z.data() : nullptr, post);
      std::vector<float> y1;
      for (int threads = 1; threads <= 3; ++threads) {
        const std::string what =
            "case " + std::to_string(i) + " threads " + std::to_string(threads);
        // On AVX-512 CPUs the executor leaves these convs to oneDNN; the kernel runs all the same.
        if (BestIsa() != Isa::kAvx512) {
          ASSERT_TRUE(DirectConvFits(p, l, post)) << what;
        }
        std::unique_ptr<NodeState> state;
        std::vector<float> y(static_cast<size_t>(p.N * OHW * ldc), 7.0f);
        if (in_place) y = z_cl;
        post.z = !residual ? nullptr : in_place ? y.data() : z_cl.data();
        DirectConv(p, l.x ? x_cl.data() : x.data(), w.data(), true, bias ? b.data() : nullptr,
                   y.data() + first, l, post, threads, &state);
        EXPECT_EQ(state->Kernel(), "kiln direct conv avx2") << what;
        ASSERT_NO_FATAL_FAILURE(
            ExpectConvOutput(y, want, p.N, p.M, OHW, l.y, ldc, first, p.C * p.KH * p.KW, what));
        if (threads == 1) {
          y1 = y;
        } else {
          ASSERT_EQ(0, std::memcmp(y.data(), y1.data(), y.size() * sizeof(float))) << what;
        }
        // New weights at the same address: constant ones are kept, others are packed again.
        if (residual || threads > 1) continue;
        std::vector<float> w2(w.size(), 0.0f);
        std::vector<float> y2(y.size(), 7.0f);
        DirectConv(p, l.x ? x_cl.data() : x.data(), w2.data(), false, nullptr, y2.data() + first, l,
                   PostOps{}, threads, &state);
        EXPECT_EQ(y2[static_cast<size_t>(l.y ? first : 0)], 0.0f) << what;
      }
    }
  }
}

// The few-output-channel kernel (kernels/x86/conv_few_outputs.h) against a direct loop in double: 1
// to 7 output channels (tiles of 3, 2 and 1), rows shorter and longer than a tile (vector tails),
// asymmetric pads, row strides and dilations, X NCHW or channels-last, bias, a residual, every
// activation; 1 to 3 threads give the same bits.
TEST(FewOutputsConv, AgainstReferenceLayoutsAndThreads) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "the kernel needs AVX2";
  std::mt19937 rng(12);
  struct Shape {
    int64_t N, C, M, H, W, KH, KW, sh, ph, pw, peh, pew, dh, dw;
  };
  int i = 0;
  for (const Shape& sh : {Shape{1, 32, 3, 12, 40, 9, 9, 1, 4, 4, 4, 4, 1, 1},
                          Shape{2, 5, 7, 13, 37, 5, 5, 2, 2, 1, 1, 3, 1, 1},
                          Shape{1, 3, 1, 9, 7, 3, 7, 1, 1, 3, 1, 3, 2, 1},
                          Shape{1, 16, 2, 11, 70, 7, 7, 1, 3, 3, 3, 3, 1, 2},
                          Shape{1, 4, 9, 6, 33, 5, 3, 1, 0, 0, 0, 0, 1, 1}}) {
    Conv2DParams p{sh.N,  sh.C,  sh.M, 1,     sh.H,  sh.W,   0,      0,     sh.KH,
                   sh.KW, sh.sh, 1,    sh.ph, sh.pw, sh.peh, sh.pew, sh.dh, sh.dw};
    p.OH = (p.H + p.ph + p.peh - (p.KH - 1) * p.dh - 1) / p.sh + 1;
    p.OW = p.W + p.pw + p.pew - (p.KW - 1) * p.dw;
    const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
    const auto x = testing::RandomVector(static_cast<size_t>(p.N * p.C * HW), rng);
    const auto x_cl = testing::Relayout(x, p.N, p.C, HW, true);
    const auto w = testing::RandomVector(static_cast<size_t>(p.M * p.C * p.KH * p.KW), rng);
    const auto b = testing::RandomVector(static_cast<size_t>(p.M), rng);
    const auto z = testing::RandomVector(static_cast<size_t>(p.N * p.M * OHW), rng);
    for (int lay = 0; lay < 4; ++lay) {
      ++i;
      PostOps post = CyclingPostOps(i);
      const bool bias = lay != 1, residual = lay >= 2;
      const ConvLayouts l{lay % 2 == 1, false, false, 0};
      ASSERT_TRUE(FewOutputsConvFits(p, l, post)) << i;
      const auto want = testing::ReferenceConv(p, x.data(), w.data(), bias ? b.data() : nullptr,
                                               residual ? z.data() : nullptr, post);
      post.z = residual ? z.data() : nullptr;
      std::vector<float> y1;
      for (int threads = 1; threads <= 3; ++threads) {
        const std::string what =
            "case " + std::to_string(i) + " threads " + std::to_string(threads);
        std::vector<float> y(static_cast<size_t>(p.N * p.M * OHW), 7.0f);
        FewOutputsConv(p, l.x ? x_cl.data() : x.data(), w.data(), bias ? b.data() : nullptr,
                       y.data(), l, post, threads);
        ASSERT_NO_FATAL_FAILURE(
            ExpectConvOutput(y, want, p.N, p.M, OHW, false, p.M, 0, p.C * p.KH * p.KW, what));
        if (threads == 1) {
          y1 = y;
        } else {
          ASSERT_EQ(0, std::memcmp(y.data(), y1.data(), y.size() * sizeof(float))) << what;
        }
      }
    }
  }
}

TEST(PackedGemm, KZeroClearsOrKeeps) {
  for (Isa isa : RunnableIsas()) {
    std::vector<float> C(6, 5.0f);
    PackedGemm<float>(2, 3, 0, 1.0f, nullptr, 0, 1, nullptr, 3, 1, C.data(), 3, true, 1, isa);
    for (float v : C) EXPECT_EQ(v, 5.0f);
    PackedGemm<float>(2, 3, 0, 1.0f, nullptr, 0, 1, nullptr, 3, 1, C.data(), 3, false, 2, isa);
    for (float v : C) EXPECT_EQ(v, 0.0f);
  }
}

TEST(PackedGemm, AutoIsTheBestRunnable) {
  EXPECT_TRUE(IsaSupported(BestIsa()));
  EXPECT_TRUE(IsaSupported(Isa::kBaseline));
  EXPECT_NE(BestIsa(), Isa::kAuto);
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(BestIsa(), Isa::kAvx512);
  }
#endif
}

// The two users: ConvGemm (row-major, leading dims) and GemmF32 / GemmF64 (C += alpha op(A)
// op(B)), the M = 1 GEMV path included.
TEST(GemmUsers, ConvGemmAndGemmF32F64) {
  std::mt19937 rng(4);
  for (auto [M, N, K] : {std::array<int64_t, 3>{1, 77, 33},
                         {1, 5, 300},
                         {1, 9, 1037},
                         {1, 6, 15},
                         {9, 70, 19},
                         {24, 196, 1}}) {
    for (int mode = 0; mode < 4; ++mode) {
      const bool ta = mode & 1, tb = mode & 2;
      auto A = Random<float>(static_cast<size_t>(M * K), rng);
      auto B = Random<float>(static_cast<size_t>(K * N), rng);
      auto C = Random<float>(static_cast<size_t>(M * N), rng);
      auto Cd = std::vector<double>(C.begin(), C.end());
      std::vector<double> Ad(A.begin(), A.end()), Bd(B.begin(), B.end());
      auto C1 = C;
      GemmF32(ta, tb, M, N, K, 0.75f, A.data(), B.data(), C1.data(), 2);
      GemmF64(ta, tb, M, N, K, 0.75, Ad.data(), Bd.data(), Cd.data(), 3);
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double s = 0, m = 0;
          for (int64_t k = 0; k < K; ++k) {
            double p =
                double(ta ? A[k * M + i] : A[i * K + k]) * double(tb ? B[j * K + k] : B[k * N + j]);
            s += p;
            m += std::fabs(p);
          }
          double want = C[i * N + j] + 0.75 * s, scale = std::fabs(C[i * N + j]) + m + 1e-30;
          EXPECT_LE(std::fabs(C1[i * N + j] - want) / scale, 2e-6)
              << M << "x" << N << "x" << K << " mode " << mode;
          EXPECT_LE(std::fabs(Cd[i * N + j] - want) / scale, 1e-14)
              << M << "x" << N << "x" << K << " mode " << mode;
        }
      }
      if (mode == 0) {
        auto C2 = C;
        ConvGemm<float>(M, N, K, A.data(), K, B.data(), N, C2.data(), N, true, 3);
        for (int64_t i = 0; i < M * N; ++i) {
          double s = 0, m = 0;
          for (int64_t k = 0; k < K; ++k) {
            s += double(A[(i / N) * K + k]) * B[k * N + i % N];
            m += std::fabs(double(A[(i / N) * K + k]) * B[k * N + i % N]);
          }
          EXPECT_LE(std::fabs(C2[i] - (C[i] + s)) / (std::fabs(C[i]) + m + 1e-30), 2e-6);
        }
      }
    }
  }
}

// Depthwise convolution (or, `transposed`, ConvTranspose with group == C) against a direct loop
// in double.
template <class T>
void CheckDepthwise(const DepthwiseShape& s, bool bias, std::mt19937& rng,
                    bool transposed = false) {
  auto x = Random<T>(static_cast<size_t>(s.N * s.C * s.H * s.W), rng);
  auto w = Random<T>(static_cast<size_t>(s.M * s.KH * s.KW), rng);
  auto b = Random<T>(static_cast<size_t>(s.M), rng);
  const int64_t mult = s.M / s.C;
  std::vector<double> ref(static_cast<size_t>(s.N * s.M * s.OH * s.OW)), mag(ref.size());
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t oh = 0; oh < s.OH; ++oh)
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          double acc = bias ? double(b[m]) : 0.0, mg = std::fabs(acc);
          for (int64_t kh = 0; kh < s.KH; ++kh)
            for (int64_t kw = 0; kw < s.KW; ++kw) {
              int64_t ih = oh * s.sh - s.ph + kh * s.dh, iw = ow * s.sw - s.pw + kw * s.dw;
              if (transposed) {  // input (ih, iw) tap (kh, kw) lands on (ih sh + kh dh - ph, ...)
                const int64_t th = oh + s.ph - kh * s.dh, tw = ow + s.pw - kw * s.dw;
                if (th < 0 || tw < 0 || th % s.sh != 0 || tw % s.sw != 0) continue;
                ih = th / s.sh;
                iw = tw / s.sw;
              }
              if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
              double p = double(w[m * s.KH * s.KW + kh * s.KW + kw]) *
                         double(x[((n * s.C + m / mult) * s.H + ih) * s.W + iw]);
              acc += p;
              mg += std::fabs(p);
            }
          size_t i = static_cast<size_t>(((n * s.M + m) * s.OH + oh) * s.OW + ow);
          ref[i] = acc;
          mag[i] = mg + 1e-30;
        }
  const std::string what = "H=" + std::to_string(s.H) + " W=" + std::to_string(s.W) +
                           " K=" + std::to_string(s.KH) + "x" + std::to_string(s.KW) +
                           " s=" + std::to_string(s.sh) + "," + std::to_string(s.sw) +
                           " p=" + std::to_string(s.ph) + "," + std::to_string(s.pw) +
                           " d=" + std::to_string(s.dh) + "," + std::to_string(s.dw) +
                           " mult=" + std::to_string(mult) + (transposed ? " transposed" : "");
  for (Isa isa : RunnableIsas()) {
    std::vector<T> first;
    for (int threads = 1; threads <= 3; ++threads) {
      std::vector<T> y(ref.size(), T(7));
      (transposed ? DepthwiseConvTranspose2D<T> : DepthwiseConv2D<T>)(s, x.data(), w.data(),
                                                                      bias ? b.data() : nullptr,
                                                                      y.data(), threads, isa);
      double worst = 0;
      for (size_t i = 0; i < y.size(); ++i)
        worst = std::max(worst, std::fabs(y[i] - ref[i]) / mag[i]);
      EXPECT_LE(worst, Tol<T>()) << what << " isa=" << IsaName(isa) << " threads=" << threads;
      if (threads == 1) {
        first = y;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(T))) << what;
      }
    }
  }
}

DepthwiseShape MakeDw(int64_t N, int64_t C, int64_t mult, int64_t H, int64_t W, int64_t K,
                      int64_t stride, int64_t pad, int64_t dil) {
  DepthwiseShape s{N, C, C * mult, H, W, 0, 0, K, K, stride, stride, pad, pad, dil, dil};
  s.OH = (H + 2 * pad - (K - 1) * dil - 1) / stride + 1;
  s.OW = (W + 2 * pad - (K - 1) * dil - 1) / stride + 1;
  return s;
}

TEST(DepthwiseConv, KernelsStridesPadsDilationsAgainstReference) {
  std::mt19937 rng(5);
  int i = 0;
  for (int64_t K : {1, 3, 5})
    for (int64_t stride : {1, 2, 3})
      for (int64_t pad : {0, 1, 2})
        for (int64_t HW : {1, 6, 17, 40}) {
          if (HW + 2 * pad < K) continue;
          ++i;
          const int64_t dil = (i % 5 == 0 && HW + 2 * pad >= 2 * K - 1) ? 2 : 1;
          CheckDepthwise<float>(
              MakeDw(1 + i % 2, 3, 1 + (i % 4 == 0), HW, HW + i % 3, K, stride, pad, dil),
              i % 3 != 0, rng);
        }
}

// ConvTranspose shapes: the output image of input grid H x W, with output_padding `extra`.
DepthwiseShape MakeDwT(int64_t N, int64_t C, int64_t mult, int64_t H, int64_t W, int64_t K,
                       int64_t stride, int64_t pad, int64_t dil, int64_t extra) {
  DepthwiseShape s{N, C, C * mult, H, W, 0, 0, K, K, stride, stride, pad, pad, dil, dil};
  s.OH = (H - 1) * stride + (K - 1) * dil + 1 - 2 * pad + extra;
  s.OW = (W - 1) * stride + (K - 1) * dil + 1 - 2 * pad + extra;
  return s;
}

TEST(DepthwiseConv, TransposedAgainstReference) {
  std::mt19937 rng(7);
  int i = 0;
  for (int64_t K : {1, 2, 3, 4, 5})
    for (int64_t stride : {1, 2, 3})
      for (int64_t pad : {0, 1, 2})
        for (int64_t HW : {1, 5, 19, 40}) {
          ++i;
          const int64_t dil = i % 5 == 0 ? 2 : 1, extra = i % 4 == 1 && stride > 1 ? 1 : 0;
          const DepthwiseShape s =
              MakeDwT(1 + i % 2, 3, 1 + (i % 4 == 0), HW, HW + i % 3, K, stride, pad, dil, extra);
          if (s.OH <= 0 || s.OW <= 0) continue;
          CheckDepthwise<float>(s, i % 3 != 0, rng, true);
        }
  CheckDepthwise<double>(MakeDwT(2, 5, 2, 9, 23, 4, 2, 1, 1, 0), true, rng, true);
  DepthwiseShape r{1, 4, 4, 11, 13, 0, 0, 3, 5, 2, 3, 1, 2, 1, 2};  // 3 x 5, strides 2, 3
  r.OH = (11 - 1) * 2 + 3 - 2;
  r.OW = (13 - 1) * 3 + 9 - 4;
  CheckDepthwise<float>(r, true, rng, true);
}

TEST(ConvTranspose, AddToEveryOtherAgainstTheLoop) {
  std::mt19937 rng(8);
  for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 100}) {
    // dst ends at the last element written (2 n - 2): under AddressSanitizer a vector that
    // reaches past it fails.
    const size_t len = static_cast<size_t>(std::max<int64_t>(0, 2 * n - 1));
    const auto src = Random<float>(static_cast<size_t>(n), rng);
    auto dst = Random<float>(len, rng);
    for (size_t j = 1; j < dst.size(); j += 4) dst[j] = -0.0f;  // untouched, sign and all
    auto want = dst;
    for (int64_t j = 0; j < n; ++j) want[2 * j] += src[j];
    AddToEveryOther(dst.data(), src.data(), n);
    if (!dst.empty()) {  // (memcmp of two empty vectors' null data is undefined)
      EXPECT_EQ(0, std::memcmp(dst.data(), want.data(), dst.size() * sizeof(float))) << n;
    }
    const auto srcd = Random<double>(static_cast<size_t>(n), rng);
    auto dstd = Random<double>(len, rng), wantd = dstd;
    for (int64_t j = 0; j < n; ++j) wantd[2 * j] += srcd[j];
    AddToEveryOther(dstd.data(), srcd.data(), n);
    EXPECT_EQ(dstd, wantd) << n;
    // Three rows in one call: src rows n + 3 apart, dst rows 4 n + 5 apart (col2im's image rows
    // at stride 2), the last dst row again ending at its last element written.
    const int64_t rows = 3, src_ld = n + 3, dst_ld = 4 * n + 5;
    const auto srcr = Random<float>(static_cast<size_t>(rows * src_ld), rng);
    auto dstr = Random<float>(static_cast<size_t>((rows - 1) * dst_ld) + len, rng), wantr = dstr;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) wantr[i * dst_ld + 2 * j] += srcr[i * src_ld + j];
    AddToEveryOther(dstr.data(), srcr.data(), n, rows, dst_ld, src_ld);
    EXPECT_EQ(0, std::memcmp(dstr.data(), wantr.data(), dstr.size() * sizeof(float))) << n;
  }
}

TEST(DepthwiseConv, F64AndRectangular) {
  std::mt19937 rng(6);
  CheckDepthwise<double>(MakeDw(2, 5, 1, 9, 23, 3, 2, 1, 1), true, rng);
  CheckDepthwise<double>(MakeDw(1, 4, 2, 12, 7, 5, 1, 2, 1), false, rng);
  DepthwiseShape s{1, 6, 6, 1, 50, 1, 0, 1, 3, 1, 2, 0, 1, 1, 1};  // 1-D: H = 1, 1 x 3 kernel
  s.OW = (50 + 2 - 3) / 2 + 1;
  CheckDepthwise<float>(s, true, rng);
  DepthwiseShape r{1, 4, 4, 11, 13, 0, 0, 3, 5, 2, 1, 1, 2, 1, 1};  // 3 x 5, strides 2, 1
  r.OH = (11 + 2 - 3) / 2 + 1;
  r.OW = (13 + 4 - 5) / 1 + 1;
  CheckDepthwise<float>(r, true, rng);
}

// Small and strided maps (the flattened padded-plane path): rows and columns narrower than the
// kernel or a vector, odd and even sizes at stride 2, pads 0..2, K 3/5/7, dilation 2, multiplier 2.
TEST(DepthwiseConv, SmallAndStridedMaps) {
  std::mt19937 rng(7);
  const int64_t sizes[][2] = {{25, 5}, {5, 25}, {7, 7}, {2, 2}, {1, 9}, {9, 1}, {14, 14}, {8, 13}};
  int i = 0;
  for (const auto& hw : sizes)
    for (int64_t K : {3, 5, 7})
      for (int64_t stride : {1, 2})
        for (int64_t pad : {0, 1, 2})
          for (int64_t dil : {1, 2}) {
            const int64_t H = hw[0], W = hw[1], ext = (K - 1) * dil + 1;
            if (H + 2 * pad < ext || W + 2 * pad < ext) continue;
            ++i;
            CheckDepthwise<float>(MakeDw(1 + i % 2, 3, 1 + (i % 3 == 0), H, W, K, stride, pad, dil),
                                  i % 2 == 0, rng);
          }
  CheckDepthwise<float>(MakeDw(1, 64, 1, 25, 5, 3, 1, 1, 1), true, rng);  // kws_cnn
  CheckDepthwise<float>(MakeDw(1, 2, 1, 5, 101, 3, 2, 1, 1), true, rng);  // wide stride-2 rows
  CheckDepthwise<double>(MakeDw(1, 2, 1, 4, 60, 5, 2, 2, 1), false, rng);
  CheckDepthwise<double>(MakeDw(1, 3, 2, 7, 8, 5, 2, 2, 1), true, rng);
  DepthwiseShape a{1, 2, 2, 6, 9, 0, 0, 3, 5, 2, 3, 0, 2, 1, 2};  // 3 x 5, strides 2, 3, dil 1, 2
  a.OH = (6 - 3) / 2 + 1;
  a.OW = (9 + 4 - 9) / 3 + 1;
  CheckDepthwise<float>(a, false, rng);
}

// 2-D max / average pools against a direct loop (maxima in the reference's tap order, sums by
// rows, then columns, as the kernels: so equal bit for bit), with ceil-mode windows that run past
// the padding, and -inf maxima reported.
void CheckPool(const Pool2DShape& s, std::mt19937& rng) {
  auto x = Random<float>(static_cast<size_t>(s.planes * s.H * s.W), rng);
  const std::string what = "H=" + std::to_string(s.H) + " W=" + std::to_string(s.W) +
                           " K=" + std::to_string(s.KH) + "x" + std::to_string(s.KW) +
                           " s=" + std::to_string(s.sh) + "," + std::to_string(s.sw) +
                           " p=" + std::to_string(s.ph) + "," + std::to_string(s.pw) + "," +
                           std::to_string(s.peh) + "," + std::to_string(s.pew);
  for (int mode = 0; mode < 3; ++mode) {  // max, average, average counting the pads
    std::vector<float> ref(static_cast<size_t>(s.planes * s.OH * s.OW));
    for (int64_t pl = 0; pl < s.planes; ++pl)
      for (int64_t oh = 0; oh < s.OH; ++oh)
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          float acc = mode == 0 ? -INFINITY : 0.0f;
          int64_t n = 0, np = 0;
          for (int64_t kh = 0; kh < s.KH; ++kh) {
            float row = 0;
            for (int64_t kw = 0; kw < s.KW; ++kw) {
              const int64_t ih = oh * s.sh - s.ph + kh, iw = ow * s.sw - s.pw + kw;
              if (ih < s.H + s.peh && iw < s.W + s.pew) ++np;  // inside the padded extent
              if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
              const float v = x[(pl * s.H + ih) * s.W + iw];
              if (mode == 0) acc = v > acc ? v : acc;
              row += v;
              ++n;
            }
            if (mode > 0) acc += row;
          }
          if (mode > 0) acc /= static_cast<float>(mode == 1 ? n : np);
          ref[(pl * s.OH + oh) * s.OW + ow] = acc;
        }
    for (int threads = 1; threads <= 3; threads += 2) {
      std::vector<float> y(ref.size(), 7.0f);
      std::unique_ptr<bool[]> bad(new bool[static_cast<size_t>(s.planes)]);
      if (mode == 0) {
        EXPECT_EQ(MaxPool2D(s, x.data(), y.data(), threads, bad.get()), 0) << what;
      } else {
        AveragePool2D(s, x.data(), y.data(), mode == 2, threads);
      }
      EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)))
          << what << " mode=" << mode << " threads=" << threads;
      // Channels-last: the planes as the channels of one image, and as images of one channel.
      for (int64_t N : {int64_t{1}, s.planes})
        for (Isa isa : RunnableIsas()) {
          const int64_t C = s.planes / N;
          const auto xl = testing::Relayout(x, N, C, s.H * s.W, true);
          std::vector<float> yl(ref.size(), 7.0f);
          ChannelsLastPool2D(s, N, static_cast<PoolFlavor>(mode), xl.data(), yl.data(), threads,
                             isa);
          yl = testing::Relayout(yl, N, C, s.OH * s.OW, false);
          EXPECT_EQ(0, std::memcmp(yl.data(), ref.data(), yl.size() * sizeof(float)))
              << what << " channels-last N=" << N << " mode=" << mode << " threads=" << threads
              << " isa=" << IsaName(isa);
        }
    }
  }
}

TEST(Pool2D, KernelsStridesPadsCeilModeAgainstReference) {
  std::mt19937 rng(9);
  for (int64_t K : {1, 2, 3, 5})
    for (int64_t stride : {1, 2, 3})
      for (int64_t pad : {0, 1, 2})
        for (int64_t HW : {1, 4, 13, 40})
          for (int64_t extra : {0, 1}) {  // ceil mode: one more window that runs past the pads
            if (pad >= K || HW + 2 * pad < K) continue;
            Pool2DShape s{3, HW, HW + 3, 0, 0, K, K, stride, stride, pad, pad, pad, pad};
            s.OH = (HW + 2 * pad - K) / stride + 1 + extra;
            s.OW = (HW + 3 + 2 * pad - K) / stride + 1 + extra;
            if ((s.OH - 1) * stride >= HW + pad || (s.OW - 1) * stride >= HW + 3 + pad) continue;
            CheckPool(s, rng);
          }
}

// 70 channels (four vectors and a masked tail) in two images against the NCHW kernels, with NaN
// taps: skipped, unless the whole window is NaN (NaN), and an all -inf window (-inf).
TEST(Pool2D, ChannelsLastWideChannelsAndNaN) {
  std::mt19937 rng(10);
  const int64_t N = 2, C = 70, H = 9, W = 7;
  Pool2DShape s{N * C, H, W, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1};
  auto x = Random<float>(static_cast<size_t>(N * C * H * W), rng);
  for (int64_t c = 0; c < C; c += 3) x[static_cast<size_t>((C + c) * H * W + 10)] = NAN;
  for (int64_t i : {0, 1, 7, 8}) x[static_cast<size_t>(5 * H * W + i)] = NAN;  // image 0, c 5
  for (int64_t i : {0, 1, 7, 8}) x[static_cast<size_t>(69 * H * W + i)] = -INFINITY;  // c 69
  const auto xl = testing::Relayout(x, N, C, H * W, true);
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<float> want(static_cast<size_t>(s.planes * s.OH * s.OW)), y(want.size(), 7.0f);
    std::unique_ptr<bool[]> bad(new bool[static_cast<size_t>(s.planes)]);
    if (mode == 0) {
      MaxPool2D(s, x.data(), want.data(), 1, bad.get());
      EXPECT_TRUE(bad[5] && bad[69]);  // -inf maxima, left to the caller's reference loop
      want[static_cast<size_t>(5 * s.OH * s.OW)] = NAN;  // which makes the all-NaN window NaN
    } else {
      AveragePool2D(s, x.data(), want.data(), mode == 2, 1);
    }
    for (int threads = 1; threads <= 2; ++threads)
      for (Isa isa : RunnableIsas()) {
        ChannelsLastPool2D(s, N, static_cast<PoolFlavor>(mode), xl.data(), y.data(), threads, isa);
        const auto yn = testing::Relayout(y, N, C, s.OH * s.OW, false);
        for (size_t i = 0; i < yn.size(); ++i) {
          if (std::isnan(want[i])) {
            EXPECT_TRUE(std::isnan(yn[i])) << "mode " << mode << " at " << i << " " << IsaName(isa);
          } else {
            ASSERT_EQ(yn[i], want[i])
                << "mode " << mode << " threads " << threads << " at " << i << " " << IsaName(isa);
          }
        }
      }
  }
}

// Channel means of channels-last images, against the per-channel loop: the same sums in the
// same order, so the same bits, on 70 channels (vector blocks and a tail) and on 5.
TEST(Pool2D, ChannelsLastGlobalAverageIsas) {
  std::mt19937 rng(12);
  for (int64_t C : {70, 5}) {
    const int64_t N = 2, HW = 13;
    const auto x = Random<float>(static_cast<size_t>(N * C * HW), rng);
    std::vector<float> want(static_cast<size_t>(N * C));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        float sum = 0;
        for (int64_t i = 0; i < HW; ++i) sum += x[static_cast<size_t>((n * HW + i) * C + c)];
        want[static_cast<size_t>(n * C + c)] = sum / static_cast<float>(HW);
      }
    for (Isa isa : RunnableIsas()) {
      std::vector<float> y(want.size(), 7.0f);
      ChannelsLastGlobalAverage(x.data(), y.data(), N, C, HW, isa);
      EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
          << "C " << C << " " << IsaName(isa);
    }
  }
}

TEST(Pool2D, AllNegativeInfinityWindowsAreReported) {
  Pool2DShape s{2, 4, 4, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0};
  std::vector<float> x(32, 1.0f), y(8);
  for (int i : {16, 17, 20, 21}) x[i] = -INFINITY;  // the first window of plane 1
  bool bad[2];
  EXPECT_EQ(MaxPool2D(s, x.data(), y.data(), 1, bad), 1);
  EXPECT_FALSE(bad[0]);
  EXPECT_TRUE(bad[1]);
}

// Expects dst (dims `out`, row-major) to hold src read at `out_strides`.
void ExpectStridedCopy(const Dims& out, const Dims& out_strides, const std::vector<uint8_t>& src,
                       const std::vector<uint8_t>& dst, size_t elem, const std::string& what) {
  const int rank = static_cast<int>(out.size());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < NumElements(out); ++o) {
    int64_t from = 0;
    for (int k = 0; k < rank; ++k) from += idx[k] * out_strides[k];
    ASSERT_EQ(0, std::memcmp(&dst[static_cast<size_t>(o) * elem],
                             &src[static_cast<size_t>(from) * elem], elem))
        << what << " output " << o;
    for (int k = rank - 1; k >= 0 && ++idx[k] == out[k]; --k) idx[k] = 0;
  }
}

// StridedCopy's transposes (16 x 16 tiles where an outer axis reads consecutive elements and the
// inner one strides, else its row loop) against the index arithmetic, for permutations of ranks
// 2-4 with sides from 1 to 37 (tile tails) and some large enough to be split over threads (and
// the four-byte ones into AVX2 register tiles, the one-byte ones into SSE2 ones), every element
// size, at 1 and 3 threads.
TEST(StridedCopy, PermutationsAgainstIndexArithmetic) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 160; ++trial) {
    const bool large = trial % 16 == 15;
    const int rank = large ? 2 + trial / 16 % 2 : 2 + trial % 3;
    Dims in(rank);
    for (auto& d : in)
      d = large ? 40 + static_cast<int64_t>(rng() % (rank == 2 ? 700 : 90))
                : 1 + static_cast<int64_t>(rng() % (trial % 4 == 0 ? 5 : 37));
    std::vector<int64_t> perm(rank);
    for (int k = 0; k < rank; ++k) perm[k] = k;
    std::shuffle(perm.begin(), perm.end(), rng);
    Dims strides(rank, 1), out, out_strides;
    for (int k = rank - 2; k >= 0; --k) strides[k] = strides[k + 1] * in[k + 1];
    for (int64_t p : perm) {
      out.push_back(in[p]);
      out_strides.push_back(strides[p]);
    }
    const int64_t n = NumElements(in);
    for (size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}})
      for (int threads : {1, 3}) {
        std::vector<uint8_t> src(static_cast<size_t>(n) * elem), dst(src.size(), 0xee);
        for (auto& b : src) b = static_cast<uint8_t>(rng());
        moves::StridedCopy(out, out_strides, 0, src.data(), dst.data(), elem, threads);
        ExpectStridedCopy(out, out_strides, src, dst, elem,
                          "trial " + std::to_string(trial) + " elem " + std::to_string(elem) +
                              " threads " + std::to_string(threads));
      }
  }
}

// Few channels between planes and pixels ([N, C, P] <-> [N, P, C], C 2-8 in AVX-512 registers,
// 9 by the tiles): pixel counts around the 16-pixel vector and the 4096-pixel chunk, one and two
// images, two- and four-byte elements, 1 and 2 threads.
TEST(StridedCopy, FewChannelsToPixelsAndBack) {
  std::mt19937 rng(3);
  for (int64_t C = 2; C <= 9; ++C)
    for (int64_t P : {1, 15, 16, 17, 4096 + 33, 70000})
      for (int64_t N : {1, 2})
        for (size_t elem : {size_t{2}, size_t{4}})
          for (int threads : {1, 2})
            for (bool to_pixels : {true, false}) {
              const Dims out = to_pixels ? Dims{N, P, C} : Dims{N, C, P};
              const Dims strides = to_pixels ? Dims{C * P, 1, P} : Dims{C * P, 1, C};
              std::vector<uint8_t> src(static_cast<size_t>(N * C * P) * elem), dst(src.size());
              for (auto& b : src) b = static_cast<uint8_t>(rng());
              moves::StridedCopy(out, strides, 0, src.data(), dst.data(), elem, threads);
              ExpectStridedCopy(out, strides, src, dst, elem,
                                "C " + std::to_string(C) + " P " + std::to_string(P) + " N " +
                                    std::to_string(N) + (to_pixels ? " to pixels" : " to planes"));
            }
}

// FmodF32 is std::fmod bit for bit (the sign of a zero result included): random pairs over
// many magnitudes, quotients near 2^24 on both sides, exact multiples of negative numbers, and
// zeros, infinities, NaNs and denormals on either side.
TEST(FmodF32, MatchesStdFmodBitForBit) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-30, 30);
  std::vector<std::pair<float, float>> pairs;
  for (int i = 0; i < 200000; ++i)
    pairs.push_back({std::ldexp(mant(rng), exp(rng)), std::ldexp(mant(rng), exp(rng))});
  for (float y : {3.0f, -0.1f, 1e-3f, 7.5f})
    for (double q : {16777215.0, 16777216.0, 16777217.0, 33554431.0, 12345.0, -4.0, 1.0, 0.5})
      for (float eps : {0.0f, 1e-7f, -1e-7f}) {
        const float x = static_cast<float>(q * y) * (1.0f + eps);
        pairs.push_back({x, y});
        pairs.push_back({-x, y});
      }
  const float special[] = {0.0f,
                           -0.0f,
                           1.0f,
                           -6.0f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::denorm_min(),
                           -1e-40f,
                           std::numeric_limits<float>::max(),
                           3.0f};
  for (float a : special)
    for (float b : special) pairs.push_back({a, b});
  for (const auto& [x, y] : pairs) {
    const float got = FmodF32(x, y), want = std::fmod(x, y);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << x << " fmod " << y;
      continue;
    }
    uint32_t g, w;
    std::memcpy(&g, &got, 4);
    std::memcpy(&w, &want, 4);
    ASSERT_EQ(g, w) << x << " fmod " << y << ": " << got << " against " << want;
  }
}

// Every index of [0, n) once, in min(threads, n) chunks [c * n / t, (c + 1) * n / t), on at most
// `threads` distinct threads, for threads 1..4.
TEST(ThreadPool, SumsChunksAndThreadCounts) {
  for (int threads = 1; threads <= 4; ++threads) {
    for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 64, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::set<std::pair<int64_t, int64_t>> chunks;
      std::set<std::thread::id> ids;
      std::atomic<int64_t> sum{0};
      ParallelFor(threads, n, [&](int64_t b, int64_t e) {
        int64_t local = 0;
        for (int64_t i = b; i < e; ++i) {
          hits[static_cast<size_t>(i)].fetch_add(1);
          local += i;
        }
        sum += local;
        std::lock_guard<std::mutex> lock(mu);
        chunks.insert({b, e});
        ids.insert(std::this_thread::get_id());
      });
      EXPECT_EQ(sum.load(), n * (n - 1) / 2) << threads << " " << n;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
      const int64_t t = std::min<int64_t>(threads, n);
      std::set<std::pair<int64_t, int64_t>> want;
      for (int64_t c = 0; c < t; ++c) want.insert({c * n / t, (c + 1) * n / t});
      EXPECT_EQ(chunks, want) << threads << " " << n;
      EXPECT_LE(static_cast<int64_t>(ids.size()), std::max<int64_t>(t, 1));
    }
  }
  EXPECT_GE(ThreadPoolWorkers(), 3);  // sized by the largest request (4 = caller + 3)
  EXPECT_LE(ThreadPoolWorkers(), kMaxThreads - 1);
}

// Many small jobs back to back (workers waking late must not take chunks of a later job).
// ParallelSlices covers [0, n) once, in slices of whole 16s but the last, no more than `threads`
// of them, and one slice when n is under two threads' minimum.
TEST(ThreadPool, ParallelSlicesCoverEveryItemOnce) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : {0, 1, 15, 16, 17, 100, 1000, 4099})
      for (int64_t min : {1, 16, 500}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> slices{0};
        ParallelSlices(threads, n, min, [&](int64_t b, int64_t e) {
          ++slices;
          EXPECT_TRUE(b % 16 == 0) << b;
          for (int64_t i = b; i < e; ++i) ++hits[i];
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << n << " " << threads << " " << i;
        EXPECT_LE(slices.load(), std::max(1, threads));
        if (n < 2 * min) {
          EXPECT_LE(slices.load(), 1);
        }
      }
}

// ParallelRows covers [0, n) once in min(threads, n / min) parts of nearly equal size: a few
// rows still split (8 rows at 2 threads: 4 + 4).
TEST(ThreadPool, ParallelRowsSplitFewRowsEvenly) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : {0, 1, 2, 3, 8, 17, 100})
      for (int64_t min : {1, 4}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> parts{0};
        std::atomic<int64_t> largest{0};
        ParallelRows(threads, n, min, [&](int64_t b, int64_t e) {
          ++parts;
          int64_t seen = largest.load();
          while (e - b > seen && !largest.compare_exchange_weak(seen, e - b)) {
          }
          for (int64_t i = b; i < e; ++i) ++hits[i];
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << threads;
        const int64_t want = std::max<int64_t>(1, std::min<int64_t>(threads, n / min));
        if (n > 0) {
          EXPECT_EQ(parts.load(), want) << n << " " << threads << " " << min;
          EXPECT_EQ(largest.load(), (n + want - 1) / want) << n << " " << threads << " " << min;
        }
      }
}

TEST(ThreadPool, ManySmallJobs) {
  for (int rep = 0; rep < 20000; ++rep) {
    const int threads = 1 + rep % 4;
    const int64_t n = 1 + rep % 9;
    std::atomic<int64_t> sum{0};
    ParallelFor(threads, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i + 1;
    });
    ASSERT_EQ(sum.load(), n * (n + 1) / 2) << rep;
  }
}

// A ParallelFor inside a chunk of a parallel job runs inline on that chunk's thread, with the
// same boundaries. (Inside a 1-thread ParallelFor, which runs inline, the pool is free to use.)
TEST(ThreadPool, NestedCallsRunInline) {
  for (int threads = 2; threads <= 4; ++threads) {
    std::atomic<int64_t> sum{0};
    std::atomic<int> foreign{0};
    ParallelFor(threads, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const auto me = std::this_thread::get_id();
        int inner_chunks = 0;
        ParallelFor(3, 10, [&](int64_t ib, int64_t ie) {
          if (std::this_thread::get_id() != me) ++foreign;
          ++inner_chunks;
          for (int64_t j = ib; j < ie; ++j) sum += i * 10 + j;
        });
        EXPECT_EQ(inner_chunks, 3);
      }
    });
    EXPECT_EQ(foreign.load(), 0);
    EXPECT_EQ(sum.load(), 80 * 79 / 2);
  }
}

// Callers on several threads at once (one gets the pool, the others run inline): all correct,
// and the GEMM results stay bit-identical to one thread.
TEST(ThreadPool, ConcurrentCallers) {
  std::mt19937 rng(11);
  const int64_t M = 37, N = 300, K = 70;
  auto A = Random<float>(M * K, rng), B = Random<float>(K * N, rng);
  std::vector<float> want(M * N, 0.0f);
  PackedGemm<float>(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, want.data(), N, false, 1);
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 200; ++rep) {
        std::atomic<int64_t> sum{0};
        ParallelFor(1 + (c + rep) % 4, 1000, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sum += i;
        });
        if (sum.load() != 999 * 1000 / 2) ++bad;
        std::vector<float> C(M * N, 0.0f);
        PackedGemm<float>(M, N, K, 1.0f, A.data(), K, 1, B.data(), N, 1, C.data(), N, false, 3);
        if (std::memcmp(C.data(), want.data(), C.size() * sizeof(float)) != 0) ++bad;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// A team's members run at once on distinct threads and meet at the barrier: every member sees
// each phase's writes of the others, and `last` runs once per phase, before anyone goes on.
TEST(ThreadPool, TeamMembersMeetAtTheBarrier) {
  for (int threads = 1; threads <= 4; ++threads) {
    constexpr int kPhases = 500;
    std::vector<int64_t> slots(4, 0);
    int64_t lasts = 0;
    std::atomic<int> bad{0}, seen_members{0};
    std::mutex mu;
    std::set<std::thread::id> ids;
    ParallelTeam(threads, [&](int member, int members, TeamBarrier& barrier) {
      seen_members = members;
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      for (int phase = 0; phase < kPhases; ++phase) {
        slots[member] = phase;
        barrier.Wait([&] { ++lasts; });
        for (int m = 0; m < members; ++m)
          if (slots[m] != phase) ++bad;
        if (lasts != phase + 1) ++bad;
        barrier.Wait();
      }
    });
    EXPECT_EQ(seen_members.load(), threads);
    EXPECT_EQ(static_cast<int>(ids.size()), threads);
    EXPECT_EQ(lasts, kPhases);
    EXPECT_EQ(bad.load(), 0) << threads;
  }
}

// Inside a parallel job (or under the reference kernels) a team is one member on the calling
// thread: waiting for members the pool cannot give would never end.
TEST(ThreadPool, TeamInsideAJobIsOneMember) {
  std::atomic<int> calls{0}, bad{0};
  ParallelFor(2, 2, [&](int64_t, int64_t) {
    ParallelTeam(3, [&](int member, int members, TeamBarrier& barrier) {
      barrier.Wait();
      ++calls;
      if (member != 0 || members != 1) ++bad;
    });
  });
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(bad.load(), 0);
  {
    const ScopedKernelSet reference(KernelSet::kReference);
    int members_seen = 0;
    ParallelTeam(2, [&](int, int members, TeamBarrier&) { members_seen = members; });
    EXPECT_EQ(members_seen, 1);
  }
}

// A child process after fork() has none of the parent's workers; it gets a pool of its own.
TEST(ThreadPool, WorksAfterFork) {
  std::atomic<int64_t> warm{0};
  ParallelFor(4, 100, [&](int64_t b, int64_t e) { warm += e - b; });
  ASSERT_EQ(warm.load(), 100);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int64_t> sum{0};
    std::set<std::thread::id> ids;
    std::mutex mu;
    ParallelFor(3, 3000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    _exit(sum.load() == 2999 * 3000 / 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace kiln::ops
