// The oneDNN convolution and Gemm paths (kernels/dnnl/conv_dnnl.h, kernels/dnnl/gemm_dnnl.h)
// against direct loops in double: groups, strides, asymmetric pads, dilations, odd channel counts
// and sizes; the same bits on every run at a thread count, every layout mix and split into parts;
// the kept state reused, rebuilt on a new shape, and weights re-read when they are not constant.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conv_reference.h"
#include "kernels/dnnl/conv_dnnl.h"
#include "kernels/dnnl/dnnl_available.h"
#include "kernels/dnnl/gemm_dnnl.h"
#include "kernels/x86/cpu_isa.h"
#include "random_vectors.h"

namespace kiln::ops {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng) { return testing::RandomVector(n, rng); }

Conv2DParams Make(int64_t N, int64_t C, int64_t M, int64_t group, int64_t H, int64_t W, int64_t KH,
                  int64_t KW, int64_t s, int64_t pl, int64_t pr, int64_t d) {
  Conv2DParams p{N, C, M, group, H, W, 0, 0, KH, KW, s, s, pl, pl, pr, pr, d, d};
  p.OH = (H + pl + pr - (KH - 1) * d - 1) / s + 1;
  p.OW = (W + pl + pr - (KW - 1) * d - 1) / s + 1;
  return p;
}

// A 1-D convolution over one row of W (H = 1, pads, stride and dilation along W only).
Conv2DParams Make1D(int64_t C, int64_t M, int64_t W, int64_t KW, int64_t s, int64_t pl, int64_t pr,
                    int64_t d) {
  Conv2DParams p{1, C, M, 1, 1, W, 1, 0, 1, KW, 1, s, 0, pl, 0, pr, 1, d};
  p.OW = (W + pl + pr - (KW - 1) * d - 1) / s + 1;
  return p;
}

// Returns the worst |y - ref| / (sum of |terms|) over the outputs.
double Worst(const Conv2DParams& p, const std::vector<float>& x, const std::vector<float>& w,
             const float* b, const std::vector<float>& y) {
  std::vector<double> mag;
  const auto ref = testing::ReferenceConv(p, x.data(), w.data(), b, nullptr, PostOps{}, &mag);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(y[i] - ref[i]) / (mag[i] + 1e-30));
  return worst;
}

void Check(const Conv2DParams& p, bool bias, std::mt19937& rng, double tolerance = 2e-6) {
  const std::string what =
      "N=" + std::to_string(p.N) + " C=" + std::to_string(p.C) + " M=" + std::to_string(p.M) +
      " g=" + std::to_string(p.group) + " " + std::to_string(p.H) + "x" + std::to_string(p.W) +
      " k=" + std::to_string(p.KH) + "x" + std::to_string(p.KW) + " s=" + std::to_string(p.sh) +
      " p=" + std::to_string(p.ph) + "," + std::to_string(p.peh) + " d=" + std::to_string(p.dh);
  auto x = Random(static_cast<size_t>(p.N * p.C * p.H * p.W), rng);
  auto w = Random(static_cast<size_t>(p.M * (p.C / p.group) * p.KH * p.KW), rng);
  auto b = Random(static_cast<size_t>(p.M), rng);
  const size_t ny = static_cast<size_t>(p.N * p.M * p.OH * p.OW);
  for (int threads = 1; threads <= 3; ++threads) {
    std::unique_ptr<NodeState> state;
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {  // the second run reuses the prepared state
      std::vector<float> y(ny, 7.0f);
      ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, bias ? b.data() : nullptr, y.data(),
                             threads, &state))
          << what;
      EXPECT_LE(Worst(p, x, w, bias ? b.data() : nullptr, y), tolerance) << what;
      if (first.empty()) {
        first = y;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), y.data(), ny * sizeof(float))) << what;
      }
    }
  }
}

using testing::Relayout;

// Every mix of NCHW and channels-last X, Z and Y, with the residual Z and a Relu, at 1 to 3
// threads (the parts of a split: images, or rows of one image with their edge pads), against
// the one-thread NCHW result.
void CheckLayouts(const Conv2DParams& p, std::mt19937& rng, float tolerance = 1e-5f) {
  const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
  auto x = Random(static_cast<size_t>(p.N * p.C * HW), rng);
  auto w = Random(static_cast<size_t>(p.M * (p.C / p.group) * p.KH * p.KW), rng);
  auto b = Random(static_cast<size_t>(p.M), rng);
  auto z = Random(static_cast<size_t>(p.N * p.M * OHW), rng);
  PostOps post;
  post.z = z.data();
  post.act = PostOps::Act::kRelu;
  std::vector<float> want(z.size());
  ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, b.data(), want.data(), 1, nullptr, post));
  for (int mix = 1; mix < 8; ++mix) {
    const ConvLayouts l{(mix & 1) != 0, (mix & 2) != 0, (mix & 4) != 0};
    const auto xl = l.x ? Relayout(x, p.N, p.C, HW, true) : x;
    const auto zl = l.z ? Relayout(z, p.N, p.M, OHW, true) : z;
    for (int threads = 1; threads <= 3; ++threads) {
      PostOps post_l = post;
      post_l.z = zl.data();
      std::vector<float> y(z.size(), 7.0f);
      std::unique_ptr<NodeState> state;
      ASSERT_TRUE(
          DnnlConv2D(p, xl.data(), w.data(), true, b.data(), y.data(), threads, &state, post_l, l));
      if (l.y) y = Relayout(y, p.N, p.M, OHW, false);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], tolerance * (1.0f + std::fabs(want[i])))
            << "mix " << mix << " threads " << threads << " N=" << p.N << " at " << i;
    }
  }
}

// Y channels-last inside a wider tensor (a Concat made in place, ConvLayouts::y_channels): its
// channels land at [3, 3 + M) of each pixel's M + 5, at 1 to 3 threads (whole, row parts,
// channel parts), and nothing else is touched; not taken with a residual Z.
void CheckInterleaved(const Conv2DParams& p, std::mt19937& rng, float tolerance = 1e-5f) {
  ASSERT_EQ(p.N, 1);
  const int64_t HW = p.H * p.W, OHW = p.OH * p.OW, wide = p.M + 5, first = 3;
  auto x = Relayout(Random(static_cast<size_t>(p.C * HW), rng), 1, p.C, HW, true);
  auto w = Random(static_cast<size_t>(p.M * (p.C / p.group) * p.KH * p.KW), rng);
  auto b = Random(static_cast<size_t>(p.M), rng);
  PostOps post;
  post.act = PostOps::Act::kRelu;
  const ConvLayouts dense{true, false, true};
  std::vector<float> want(static_cast<size_t>(p.M * OHW));
  ASSERT_TRUE(
      DnnlConv2D(p, x.data(), w.data(), true, b.data(), want.data(), 1, nullptr, post, dense));
  const ConvLayouts l{true, false, true, wide};
  for (int threads = 1; threads <= 3; ++threads) {
    std::vector<float> y(static_cast<size_t>(wide * OHW), 7.0f);
    std::unique_ptr<NodeState> state;
    ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, b.data(), y.data() + first, threads, &state,
                           post, l));
    for (int64_t i = 0; i < OHW; ++i)
      for (int64_t c = 0; c < wide; ++c) {
        const float got = y[static_cast<size_t>(i * wide + c)];
        if (c < first || c >= first + p.M) {
          ASSERT_EQ(got, 7.0f) << "threads " << threads << " pixel " << i << " channel " << c;
        } else {
          const float ref = want[static_cast<size_t>(i * p.M + c - first)];
          ASSERT_NEAR(got, ref, tolerance * (1.0f + std::fabs(ref)))
              << "threads " << threads << " pixel " << i << " channel " << c;
        }
      }
  }
  std::vector<float> z(want.size()), y(static_cast<size_t>(wide * OHW));
  post.z = z.data();
  EXPECT_FALSE(DnnlConv2D(p, x.data(), w.data(), true, b.data(), y.data(), 1, nullptr, post, l));
}

TEST(DnnlConv, LayoutsResidualAndThreadSplits) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(13);
  CheckLayouts(Make(1, 16, 32, 1, 11, 9, 3, 3, 1, 1, 1, 1), rng);  // rows: 11 over 2 or 3 parts
  CheckLayouts(Make(1, 32, 16, 1, 13, 7, 3, 3, 2, 1, 0, 1), rng);  // stride 2, pad at the top only
  CheckLayouts(Make(1, 3, 16, 1, 17, 17, 7, 7, 2, 3, 3, 1), rng);  // a first layer (C < 16)
  CheckLayouts(Make(1, 32, 32, 32, 6, 6, 3, 3, 1, 1, 1, 1), rng);  // depthwise
  CheckLayouts(Make(3, 16, 16, 1, 5, 5, 1, 1, 1, 0, 0, 1), rng);   // a batch: images per part
  CheckLayouts(Make(1, 16, 40, 1, 1, 40, 1, 3, 1, 0, 0, 1), rng);  // 1-D: output channel parts
  CheckLayouts(Make1D(16, 24, 300, 3, 1, 4, 4, 4), rng);  // long 1-D, dilated: column parts
  CheckLayouts(Make1D(32, 16, 401, 5, 2, 2, 1, 1), rng);  // strided, uneven pads: column parts
  CheckLayouts(Make(1, 48, 80, 1, 7, 7, 3, 3, 1, 1, 1, 1), rng);  // a small map: channel parts
  CheckInterleaved(Make(1, 16, 32, 1, 11, 9, 3, 3, 1, 1, 1, 1), rng);
  CheckInterleaved(Make(1, 24, 20, 1, 13, 7, 1, 1, 1, 0, 0, 1), rng);  // pointwise
}

// 3x3 stride-1 convolutions large enough for oneDNN's Winograd kernels: against the loops in
// double, in every layout mix, split into rows (a large map) or into output channels (a small
// one, or at least 64 channels a part: 80 channels are 5 blocks of 16 and 144 are 9, so the
// parts differ).
TEST(DnnlConv, WinogradLayoutsAndSplits) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(14);
  for (const Conv2DParams& p :
       {Make(1, 32, 32, 1, 16, 16, 3, 3, 1, 1, 1, 1), Make(1, 64, 80, 1, 16, 14, 3, 3, 1, 1, 1, 1),
        Make(2, 48, 64, 1, 16, 17, 3, 3, 1, 0, 1, 1),
        Make(1, 32, 144, 1, 20, 18, 3, 3, 1, 1, 1, 1)}) {
    std::unique_ptr<NodeState> state;
    auto x = Random(static_cast<size_t>(p.N * p.C * p.H * p.W), rng);
    auto w = Random(static_cast<size_t>(p.M * p.C * 9), rng);
    std::vector<float> y(static_cast<size_t>(p.N * p.M * p.OH * p.OW));
    ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, nullptr, y.data(), 1, &state));
    if (BestIsa() == Isa::kAvx512) {  // oneDNN has Winograd kernels for AVX-512 only
      EXPECT_NE(std::string::npos, state->Kernel().find("wino")) << state->Kernel();
    }
    Check(p, true, rng, 1e-5);    // Winograd's transforms round more than a direct sum
    CheckLayouts(p, rng, 1e-4f);  // parts start Winograd's tiles at other rows
    if (p.N == 1) CheckInterleaved(p, rng, 1e-4f);
  }
  // A deep layer on a small map (its fourfold Winograd weights would outgrow its output 16
  // times over), and a map under 14 x 14 (where oneDNN's Winograd is F(2x2, 3x3), slower than
  // direct), keep the direct kernels.
  for (const Conv2DParams& p : {Make(1, 256, 256, 1, 7, 7, 3, 3, 1, 1, 1, 1),
                                Make(1, 96, 208, 1, 13, 13, 3, 3, 1, 1, 1, 1)}) {
    std::unique_ptr<NodeState> state;
    auto x = Random(static_cast<size_t>(p.C * p.H * p.W), rng);
    auto w = Random(static_cast<size_t>(p.M * p.C * 9), rng);
    std::vector<float> y(static_cast<size_t>(p.M * p.OH * p.OW));
    ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, nullptr, y.data(), 1, &state));
    EXPECT_EQ(std::string::npos, state->Kernel().find("wino")) << state->Kernel();
  }
}

// Winograd whose scratchpad and weights outgrow the executor's scratch budget keeps the direct
// kernels, with the same results; within the budget it is taken.
TEST(DnnlConv, WinogradWithinTheScratchBudget) {
  if (!DnnlAvailable() || BestIsa() != Isa::kAvx512) GTEST_SKIP() << "no oneDNN Winograd here";
  std::mt19937 rng(15);
  const Conv2DParams p = Make(1, 64, 96, 1, 40, 40, 3, 3, 1, 1, 1, 1);
  auto x = Random(static_cast<size_t>(p.C * p.H * p.W), rng);
  auto w = Random(static_cast<size_t>(p.M * p.C * 9), rng);
  std::vector<float> y(static_cast<size_t>(p.M * p.OH * p.OW)), y_budget(y.size());
  std::unique_ptr<NodeState> state, state_budget;
  ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, nullptr, y.data(), 1, &state, {}, {},
                         int64_t{1} << 30));
  EXPECT_NE(std::string::npos, state->Kernel().find("wino")) << state->Kernel();
  ASSERT_TRUE(DnnlConv2D(p, x.data(), w.data(), true, nullptr, y_budget.data(), 1, &state_budget,
                         {}, {}, int64_t{1}));
  EXPECT_EQ(std::string::npos, state_budget->Kernel().find("wino")) << state_budget->Kernel();
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], y_budget[i], 1e-4f * (1.0f + std::fabs(y[i]))) << i;
}

TEST(DnnlConv, ShapesAgainstReference) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(11);
  int i = 0;
  for (int64_t K : {1, 2, 3, 5})
    for (int64_t s : {1, 2, 3})
      for (int64_t HW : {1, 5, 12, 23}) {
        ++i;
        const int64_t pl = i % 3 == 0 ? 0 : std::min<int64_t>(K - 1, 1 + i % 2),
                      pr = i % 4 == 0 ? 0 : pl;
        const int64_t d = (i % 5 == 0 && HW + pl + pr >= 2 * K - 1) ? 2 : 1;
        if (HW + pl + pr < (K - 1) * d + 1) continue;
        const int64_t C = 1 + 4 * (i % 5), M = 3 + 7 * (i % 3);
        Check(Make(1 + i % 2, C, M, 1, HW, HW + i % 3, K, K, s, pl, pr, d), i % 3 != 0, rng);
      }
}

// Every activation of FusedConv after the residual sum (oneDNN's post-ops, or kiln's Swish pass),
// NCHW and channels-last, against the double reference.
TEST(DnnlConv, ActivationsAgainstReference) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  using Act = PostOps::Act;
  std::mt19937 rng(12);
  const Conv2DParams p = Make(1, 12, 10, 1, 9, 11, 3, 3, 1, 1, 1, 1);
  const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
  auto x = Random(static_cast<size_t>(p.C * HW), rng);
  auto w = Random(static_cast<size_t>(p.M * p.C * 9), rng);
  auto b = Random(static_cast<size_t>(p.M), rng);
  auto z = Random(static_cast<size_t>(p.M * OHW), rng);
  for (Act act : {Act::kRelu, Act::kLeakyRelu, Act::kClip, Act::kSwish, Act::kHardSwish})
    for (bool cl : {false, true}) {
      PostOps post;
      post.act = act;
      post.alpha = act == Act::kClip ? -0.3f : 0.1f;
      post.beta = 0.4f;
      std::vector<double> mag;
      const auto want =
          testing::ReferenceConv(p, x.data(), w.data(), b.data(), z.data(), post, &mag);
      const auto zl = cl ? Relayout(z, 1, p.M, OHW, true) : z;
      post.z = zl.data();
      std::vector<float> y(z.size(), 7.0f);
      ASSERT_TRUE(DnnlConv2D(p, cl ? Relayout(x, 1, p.C, HW, true).data() : x.data(), w.data(),
                             true, b.data(), y.data(), 1, nullptr, post, {cl, cl, cl}));
      if (cl) y = Relayout(y, 1, p.M, OHW, false);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5 * (mag[i] + std::fabs(z[i]) + 1))
            << "act " << static_cast<int>(act) << " channels-last " << cl << " at " << i;
    }
}

TEST(DnnlConv, GroupsRectangularKernelsAndOneD) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(12);
  Check(Make(1, 6, 9, 3, 10, 7, 3, 3, 1, 1, 1, 1), true, rng);
  Check(Make(2, 32, 64, 2, 9, 9, 3, 3, 2, 1, 0, 1), false, rng);
  Check(Make(1, 1, 64, 1, 49, 10, 10, 4, 2, 5, 5, 1), true, rng);  // the KWS stem: 10 x 4, pad 5
  Check(Make(1, 64, 64, 1, 1, 50, 1, 3, 1, 0, 0, 1), true, rng);   // 1-D as H = 1
  Check(Make(1, 32, 64, 2, 1, 40, 1, 3, 1, 0, 0, 1), true, rng);   // grouped 1-D: not by channels
  Check(Make1D(64, 64, 2048, 3, 1, 8, 8, 8), true, rng);  // TCN's dilated layer: column parts
  Check(Make1D(24, 40, 777, 4, 3, 0, 2, 2), false, rng);  // stride 3, even kernel, pad right only
  Check(Make(1, 16, 48, 1, 14, 14, 1, 1, 1, 0, 0, 1), true, rng);  // pointwise
}

TEST(DnnlConv, StateFollowsShapesAndNonConstantWeights) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(13);
  std::unique_ptr<NodeState> state;
  const Conv2DParams a = Make(1, 16, 32, 1, 8, 8, 3, 3, 1, 1, 1, 1);
  const Conv2DParams c = Make(1, 16, 32, 1, 6, 9, 3, 3, 1, 1, 1, 1);  // same weights, new map
  auto x = Random(16 * 8 * 9, rng), w = Random(32 * 16 * 9, rng);
  std::vector<float> y(32 * 8 * 9);
  ASSERT_TRUE(DnnlConv2D(a, x.data(), w.data(), false, nullptr, y.data(), 1, &state));
  EXPECT_LE(Worst(a, x, w, nullptr, y), 2e-6);
  for (float& v : w) v = -v;  // same address, new bytes: not constant, so read again
  ASSERT_TRUE(DnnlConv2D(a, x.data(), w.data(), false, nullptr, y.data(), 1, &state));
  EXPECT_LE(Worst(a, x, w, nullptr, y), 2e-6);
  ASSERT_TRUE(DnnlConv2D(c, x.data(), w.data(), true, nullptr, y.data(), 1, &state));
  EXPECT_LE(Worst(c, x, w, nullptr, y), 2e-6);
  auto w2 = Random(w.size(), rng);  // other constant weights at another address
  ASSERT_TRUE(DnnlConv2D(c, x.data(), w2.data(), true, nullptr, y.data(), 1, &state));
  EXPECT_LE(Worst(c, x, w2, nullptr, y), 2e-6);
  ASSERT_TRUE(DnnlConv2D(c, x.data(), w2.data(), true, nullptr, y.data(), 1, nullptr));
  EXPECT_LE(Worst(c, x, w2, nullptr, y), 2e-6);
}

// Y = A op(B) + bias against a double loop; odd sizes, both B layouts, with and without bias.
TEST(DnnlGemm, ShapesTransposesBiasAndState) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(14);
  for (auto [M, N, K] :
       {std::array<int64_t, 3>{1024, 64, 64}, {7, 13, 5}, {33, 1, 70}, {2, 100, 3}, {4, 300, 40}})
    for (bool tb : {false, true})
      for (bool with_bias : {false, true}) {
        auto a = Random(static_cast<size_t>(M * K), rng),
             b = Random(static_cast<size_t>(K * N), rng);
        auto bias = Random(static_cast<size_t>(N), rng);
        std::unique_ptr<NodeState> state;
        for (int run = 0; run < 3; ++run) {
          if (run == 2)
            for (float& v : b) v = -v;  // new bytes at the same address, announced as not constant
          std::vector<float> y(static_cast<size_t>(M * N), 7.0f);
          ASSERT_TRUE(DnnlGemm(M, N, K, a.data(), b.data(), tb, run < 2,
                               with_bias ? bias.data() : nullptr, y.data(), 1 + run, &state));
          double worst = 0;
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double acc = with_bias ? bias[j] : 0.0, mag = std::fabs(acc) + 1e-30;
              for (int64_t k = 0; k < K; ++k) {
                const double t = double(a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
                acc += t;
                mag += std::fabs(t);
              }
              worst = std::max(worst, std::fabs(y[i * N + j] - acc) / mag);
            }
          EXPECT_LE(worst, 2e-6) << M << "x" << N << "x" << K << " tb=" << tb << " run=" << run;
        }
      }
}

// GemmOptions: A read transposed with a row stride past M, a bias per row, a residual z (apart
// from y and in place), every activation, B constant (packed) or read as it is, 1 to 3 threads
// (few rows and many columns: the threads split B's columns where the post-ops allow).
TEST(DnnlGemm, OptionsAgainstReference) {
  if (!DnnlAvailable()) GTEST_SKIP() << "built without oneDNN";
  using Act = PostOps::Act;
  std::mt19937 rng(15);
  const Act acts[] = {Act::kNone, Act::kRelu,  Act::kLeakyRelu,
                      Act::kClip, Act::kSwish, Act::kHardSwish};
  for (auto [M, N, K] : {std::array<int64_t, 3>{64, 48, 32}, {9, 130, 17}, {5, 250, 33}})
    for (int variant = 0; variant < 16; ++variant) {
      const bool trans_a = variant & 1, row_bias = variant & 2, tb = variant & 4;
      const bool b_constant = variant & 8;
      const int z_mode = variant % 3;  // none, apart, in place
      PostOps post;
      post.act = acts[variant % 6];
      post.alpha = post.act == Act::kClip ? -0.5f : 0.1f;
      post.beta = 0.75f;
      const int64_t lda = trans_a ? M + 3 : K + 2;
      auto a = Random(static_cast<size_t>((trans_a ? K : M) * lda), rng);
      auto b = Random(static_cast<size_t>(K * N), rng);
      auto bias = Random(static_cast<size_t>(row_bias ? M : N), rng);
      auto z = Random(static_cast<size_t>(M * N), rng);
      const std::string what = std::to_string(M) + "x" + std::to_string(N) + "x" +
                               std::to_string(K) + " variant " + std::to_string(variant);
      for (int threads = 1; threads <= 3; ++threads) {
        std::unique_ptr<NodeState> state;
        std::vector<float> y = z_mode == 2 ? z : std::vector<float>(z.size(), 7.0f);
        GemmOptions o{.trans_a = trans_a, .lda = lda, .bias_per_row = row_bias, .post = post};
        if (z_mode == 1) o.post.z = z.data();
        if (z_mode == 2) o.post.z = y.data();
        ASSERT_TRUE(DnnlGemm(M, N, K, a.data(), b.data(), tb, b_constant, bias.data(), y.data(),
                             threads, &state, o))
            << what;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = bias[row_bias ? i : j] + (z_mode ? z[i * N + j] : 0.0);
            double mag = std::fabs(acc) + 1e-30;
            for (int64_t k = 0; k < K; ++k) {
              const double t = double(trans_a ? a[k * lda + i] : a[i * lda + k]) *
                               (tb ? b[j * K + k] : b[k * N + j]);
              acc += t;
              mag += std::fabs(t);
            }
            ASSERT_NEAR(y[i * N + j], testing::Activate(acc, post), 3e-6 * mag)
                << what << " threads " << threads << " at " << i << "," << j;
          }
      }
    }
}

}  // namespace
}  // namespace kiln::ops
