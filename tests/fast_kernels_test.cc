// The host's fast float32 kernels against the reference implementations, through the executor on
// generated ONNX models: each case runs once in float32 (the fast kernel) and once in float64 (the
// reference code, in double) on the same values, and the outputs must agree to float precision.
// Cases sweep the op's options and shape classes, at one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "executor_harness.h"
#include "frontend/onnx_import.h"
#include "ops/common.h"
#include "ops/op_traits.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT: the harness is this file's vocabulary

// ---------------------------------------------------------------------------------------------
// RNN / GRU / LSTM

struct RnnCase {
  std::string op = "LSTM";
  int64_t seq = 5, batch = 2, input = 7, hidden = 9;
  std::string direction = "forward";
  int layout = 0;
  bool bias = true, lens = false, initial = false, peepholes = false;
  float clip = 0;
  bool input_forget = false, linear_before_reset = false;
  std::vector<std::string> activations;  // empty: the defaults
};

onnx::ModelProto RnnModel(const RnnCase& c, onnx::TensorProto::DataType type, std::mt19937 rng,
                          std::vector<double>* x_values) {
  const int64_t G = c.op == "LSTM"  ? 4
                    : c.op == "GRU" ? 3
                                    : 1,
                nd = c.direction == "bidirectional" ? 2 : 1;
  const int64_t S = c.seq, B = c.batch, I = c.input, H = c.hidden;
  onnx::ModelProto m = testing::EmptyModel("rnn");
  m.mutable_opset_import(0)->set_version(14);
  auto* g = m.mutable_graph();
  const std::vector<int64_t> xd =
      c.layout == 0 ? std::vector<int64_t>{S, B, I} : std::vector<int64_t>{B, S, I};
  *g->add_input() = Info("x", type, xd);
  *x_values = Random(static_cast<size_t>(S * B * I), rng);
  const double ws = 1.0 / std::sqrt(static_cast<double>(H));
  FillTensor(g->add_initializer(), "w", type, {nd, G * H, I},
             Random(static_cast<size_t>(nd * G * H * I), rng, ws));
  FillTensor(g->add_initializer(), "r", type, {nd, G * H, H},
             Random(static_cast<size_t>(nd * G * H * H), rng, ws));
  std::vector<std::string> ins = {"x", "w", "r", "", "", "", "", ""};
  if (c.bias) {
    FillTensor(g->add_initializer(), "b", type, {nd, 2 * G * H},
               Random(static_cast<size_t>(nd * 2 * G * H), rng, 0.5));
    ins[3] = "b";
  }
  if (c.lens) {
    auto* t = g->add_initializer();
    t->set_name("lens");
    t->set_data_type(onnx::TensorProto::INT32);
    t->add_dims(B);
    for (int64_t b = 0; b < B; ++b) t->add_int32_data(static_cast<int32_t>((b * 7 + 3) % (S + 1)));
    ins[4] = "lens";
  }
  const std::vector<int64_t> sd =
      c.layout == 0 ? std::vector<int64_t>{nd, B, H} : std::vector<int64_t>{B, nd, H};
  if (c.initial) {
    FillTensor(g->add_initializer(), "h0", type, sd, Random(static_cast<size_t>(nd * B * H), rng));
    ins[5] = "h0";
    if (c.op == "LSTM") {
      FillTensor(g->add_initializer(), "c0", type, sd,
                 Random(static_cast<size_t>(nd * B * H), rng));
      ins[6] = "c0";
    }
  }
  if (c.peepholes) {
    FillTensor(g->add_initializer(), "p", type, {nd, 3 * H},
               Random(static_cast<size_t>(nd * 3 * H), rng, 0.5));
    ins[7] = "p";
  }
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  auto* n = g->add_node();
  n->set_op_type(c.op);
  n->set_name("rnn");
  for (const auto& i : ins) n->add_input(i);
  for (const char* o : {"y", "y_h", "y_c"})
    if (std::string(o) != "y_c" || c.op == "LSTM") n->add_output(o);
  testing::SetAttr(n, "hidden_size", H);
  testing::SetAttr(n, "layout", static_cast<int64_t>(c.layout));
  testing::SetAttr(n, "direction", c.direction);
  if (c.clip > 0) testing::SetAttr(n, "clip", c.clip);
  if (c.input_forget) testing::SetAttr(n, "input_forget", int64_t{1});
  if (c.linear_before_reset) testing::SetAttr(n, "linear_before_reset", int64_t{1});
  if (!c.activations.empty()) testing::SetAttr(n, "activations", c.activations);
  const std::vector<int64_t> yd =
      c.layout == 0 ? std::vector<int64_t>{S, nd, B, H} : std::vector<int64_t>{B, S, nd, H};
  *g->add_output() = Info("y", type, yd);
  *g->add_output() = Info("y_h", type, sd);
  if (c.op == "LSTM") *g->add_output() = Info("y_c", type, sd);
  return m;
}

std::string Describe(const RnnCase& c) {
  std::string s = c.op + " S" + std::to_string(c.seq) + " B" + std::to_string(c.batch) + " I" +
                  std::to_string(c.input) + " H" + std::to_string(c.hidden) + " " + c.direction +
                  " layout" + std::to_string(c.layout);
  if (!c.bias) s += " nobias";
  if (c.lens) s += " lens";
  if (c.initial) s += " initial";
  if (c.peepholes) s += " peepholes";
  if (c.clip > 0) s += " clip";
  if (c.input_forget) s += " input_forget";
  if (c.linear_before_reset) s += " lbr";
  for (const auto& a : c.activations) s += " " + a;
  return s;
}

TEST(FastKernels, RecurrentAgainstTheDoubleReference) {
  std::vector<RnnCase> cases;
  int k = 0;
  for (const char* op : {"LSTM", "GRU", "RNN"})
    for (const char* direction : {"forward", "reverse", "bidirectional"})
      for (int64_t batch : {1, 3, 9})  // 9: the packed GEMM with AVX-512 (PackedRows), else panels
        for (int64_t hidden : {5, 16, 40}) {
          RnnCase c;
          c.op = op;
          c.direction = direction;
          c.batch = batch;
          c.hidden = hidden;
          c.seq = 1 + (k * 5) % 13;
          c.input = 3 + k % 11;
          // Options rotate through the cases so that each meets every shape class.
          c.layout = k % 2;
          c.bias = k % 5 != 1;
          c.lens = k % 3 == 1;
          c.initial = k % 4 != 0;
          c.peepholes = c.op == "LSTM" && k % 3 == 2;
          c.clip = k % 7 == 3 ? 0.8f : 0;
          c.input_forget = c.op == "LSTM" && k % 5 == 4;
          c.linear_before_reset = c.op == "GRU" && k % 2 == 0;
          if (k % 6 == 5) {
            const int per_dir = c.op == "LSTM" ? 3 : c.op == "GRU" ? 2 : 1;
            const std::vector<std::string> some = {"HardSigmoid", "Softsign", "Relu"};
            for (int d = 0; d < (c.direction == "bidirectional" ? 2 : 1); ++d)
              for (int a = 0; a < per_dir; ++a) c.activations.push_back(some[(a + d) % 3]);
          }
          cases.push_back(c);
          ++k;
        }
  RnnCase longer;  // a long sequence with a wide state: errors must not grow over the steps
  longer.seq = 200;
  longer.hidden = 96;
  longer.input = 32;
  longer.batch = 2;
  longer.direction = "bidirectional";
  cases.push_back(longer);
  // At two threads: hidden units split over threads per step (batch 1, or R too large for a
  // core's cache), and batch rows split with each part on the packed GEMM.
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    RnnCase wide;
    wide.op = op;
    wide.seq = 7;
    wide.batch = 1;
    wide.hidden = op == std::string("LSTM") ? 240 : 380;  // a GRU's h phase alone: 380 x 380
    wide.direction = "reverse";
    wide.initial = true;
    cases.push_back(wide);
    wide.batch = 3;
    wide.hidden = op == std::string("RNN") ? 520 : 260;
    wide.lens = true;
    wide.direction = "forward";
    wide.layout = 1;
    wide.linear_before_reset = wide.op == "GRU";
    cases.push_back(wide);
    RnnCase rows;
    rows.op = op;
    rows.batch = 17;
    rows.hidden = 24;
    rows.peepholes = rows.op == "LSTM";
    rows.lens = true;
    cases.push_back(rows);
  }
  for (const RnnCase& c : cases) {
    std::vector<double> xv;
    auto build = [&](onnx::TensorProto::DataType type) {
      return RnnModel(c, type, std::mt19937(11), &xv);
    };
    build(onnx::TensorProto::FLOAT);  // sets xv
    const Dims xd = c.layout == 0 ? Dims{c.seq, c.batch, c.input} : Dims{c.batch, c.seq, c.input};
    ExpectFloatMatchesDouble(build, xd, xv, 2e-6, Describe(c));
  }
}

// ---------------------------------------------------------------------------------------------
// Resize

struct ResizeCase {
  std::vector<int64_t> in;
  std::vector<double> scales;  // one per dim
  std::string mode = "linear", coord = "half_pixel";
  float cubic_a = -0.75f;
  bool exclude_outside = false, antialias = false;
  std::vector<double> roi;  // tf_crop_and_resize: starts then ends, every dim
};

onnx::ModelProto ResizeModel(const ResizeCase& c, onnx::TensorProto::DataType type) {
  onnx::ModelProto m = testing::EmptyModel("resize");
  m.mutable_opset_import(0)->set_version(19);
  auto* g = m.mutable_graph();
  *g->add_input() = Info("x", type, c.in);
  std::vector<int64_t> out;
  for (size_t d = 0; d < c.in.size(); ++d)
    out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(c.in[d]) * c.scales[d])));
  *g->add_output() = Info("y", type, out);
  auto* scales = g->add_initializer();
  scales->set_name("scales");
  scales->set_data_type(onnx::TensorProto::FLOAT);
  scales->add_dims(static_cast<int64_t>(c.scales.size()));
  for (double v : c.scales) scales->add_float_data(static_cast<float>(v));
  std::string roi;
  if (!c.roi.empty()) {
    roi = "roi";
    auto* t = g->add_initializer();
    t->set_name(roi);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(c.roi.size()));
    for (double v : c.roi) t->add_float_data(static_cast<float>(v));
  }
  auto* n = testing::AddNamedNode(g, "Resize", {"x", roi, "scales"}, "y");
  testing::SetAttr(n, "mode", c.mode);
  testing::SetAttr(n, "coordinate_transformation_mode", c.coord);
  if (c.mode == "cubic") testing::SetAttr(n, "cubic_coeff_a", c.cubic_a);
  if (c.exclude_outside) testing::SetAttr(n, "exclude_outside", int64_t{1});
  if (c.antialias) testing::SetAttr(n, "antialias", int64_t{1});
  if (!c.roi.empty()) testing::SetAttr(n, "extrapolation_value", -3.5f);
  return m;
}

TEST(FastKernels, ResizeAgainstTheDoubleReference) {
  std::vector<ResizeCase> cases;
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 3, 8, 10}, {2, 5, 7, 6}, {1, 21, 16, 16}, {4, 9, 13}, {2, 3, 4, 5, 6}};
  int k = 0;
  for (const char* mode : {"linear", "cubic"})
    for (const char* coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
                              "half_pixel_symmetric"})
      for (const auto& shape : shapes) {
        ResizeCase c;
        c.in = shape;
        c.mode = mode;
        c.coord = coord;
        c.scales.assign(shape.size(), 1.0);
        // Up by 2 and 4, down by 2, and an odd ratio, on the last two axes (the last alone for
        // 3-D).
        const double ratios[] = {2.0, 4.0, 0.5, 1.75};
        c.scales.back() = ratios[k % 4];
        if (shape.size() >= 4) c.scales[shape.size() - 2] = ratios[(k + 1) % 4];
        if (k % 9 == 4) c.scales[1] = 2.0;  // the channel axis too
        c.exclude_outside = c.mode == std::string("cubic") && k % 3 == 0;
        c.cubic_a = k % 2 ? -0.5f : -0.75f;
        c.antialias = k % 5 == 2 && c.scales.back() < 1;
        cases.push_back(c);
        ++k;
      }
  // Nearest by whole factors (rows of repeated elements where the map is j / 2) and others.
  for (const char* coord : {"half_pixel", "asymmetric", "align_corners"})
    for (double sw : {2.0, 3.0, 1.5}) {
      ResizeCase c;
      c.in = {2, 3, 5, 17};
      c.mode = "nearest";
      c.coord = coord;
      c.scales = {1, 1, 2, sw};
      cases.push_back(c);
    }
  ResizeCase crop;
  crop.in = {1, 2, 9, 9};
  crop.scales = {1, 1, 1.5, 0.8};
  crop.coord = "tf_crop_and_resize";
  crop.roi = {0, 0, -0.2, 0.1, 1, 1, 1.3, 0.9};
  cases.push_back(crop);
  // Planes of several blocks of output rows (ResizeF32 passes both trailing axes per block):
  // down (rows first) and up (columns first, each block gathering the input rows it reads).
  for (auto [h, w, sh, sw] : {std::array<double, 4>{150, 160, 0.5, 0.5},
                              {40, 300, 2.0, 2.0},
                              {37, 90, 1.75, 0.5},
                              {100, 400, 2.0, 0.5}}) {
    ResizeCase big;
    big.in = {1, 2, static_cast<int64_t>(h), static_cast<int64_t>(w)};
    big.scales = {1, 1, sh, sw};
    cases.push_back(big);
  }
  std::mt19937 rng(5);
  for (const ResizeCase& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.in) n *= d;
    const std::vector<double> xv = Random(static_cast<size_t>(n), rng);
    std::string what = c.mode + " " + c.coord + " in";
    for (int64_t d : c.in) what += " " + std::to_string(d);
    what += " scales";
    for (double v : c.scales) what += " " + std::to_string(v);
    if (c.antialias) what += " antialias";
    ExpectFloatMatchesDouble([&](onnx::TensorProto::DataType t) { return ResizeModel(c, t); }, c.in,
                             xv, 1e-6, what);
  }
}

// GridSample, 2-D float32 (taps laid out per image, channels over threads) against the general
// loop in double: every mode, padding and align_corners, a grid reaching past the borders (its
// values multiples of 1/64, the same in both types).
TEST(FastKernels, GridSampleAgainstTheDoubleReference) {
  std::mt19937 rng(31);
  const Dims in{2, 5, 7, 9};
  const std::vector<int64_t> grid_dims{2, 6, 11, 2};
  std::vector<double> grid(2 * 6 * 11 * 2);
  std::uniform_int_distribution<int> step(-80, 80);
  for (double& v : grid) v = step(rng) / 64.0;
  const std::vector<double> xv = Random(static_cast<size_t>(NumElements(in)), rng);
  for (const char* mode : {"nearest", "bilinear", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1}) {
        auto build = [&](onnx::TensorProto::DataType type) {
          onnx::ModelProto m = testing::EmptyModel("grid_sample");
          m.mutable_opset_import(0)->set_version(16);
          auto* g = m.mutable_graph();
          *g->add_input() = Info("x", type, {in.begin(), in.end()});
          *g->add_output() = Info("y", type, {2, 5, 6, 11});
          FillTensor(g->add_initializer(), "grid", type, grid_dims, grid);
          auto* n = testing::AddNamedNode(g, "GridSample", {"x", "grid"}, "y");
          testing::SetAttr(n, "mode", std::string(mode));
          testing::SetAttr(n, "padding_mode", std::string(padding));
          testing::SetAttr(n, "align_corners", align);
          return m;
        };
        const std::string what =
            std::string(mode) + " " + padding + " align " + std::to_string(align);
        ExpectFloatMatchesDouble(build, in, xv, 1e-6, what);
        // A NaN and an infinity in two planes: only the points whose taps read them change
        // (zero padding reads nothing, not 0 times them).
        std::vector<double> special = xv;
        special[63] = std::numeric_limits<double>::quiet_NaN();  // planes 1 and 5, element 0
        special[5 * 63] = std::numeric_limits<double>::infinity();
        const auto want =
            RunModel(build(onnx::TensorProto::DOUBLE), InputOf(DType::kFloat64, in, special), 1);
        const auto got =
            RunModel(build(onnx::TensorProto::FLOAT), InputOf(DType::kFloat32, in, special), 2);
        ASSERT_EQ(got[0].size(), want[0].size());
        for (size_t i = 0; i < got[0].size(); ++i) {
          if (std::isnan(want[0][i]) || std::isinf(want[0][i])) {
            EXPECT_EQ(std::isnan(got[0][i]), std::isnan(want[0][i])) << what << " at " << i;
            EXPECT_EQ(std::isinf(got[0][i]), std::isinf(want[0][i])) << what << " at " << i;
          } else {
            EXPECT_NEAR(got[0][i], want[0][i], 1e-5 * (1 + std::fabs(want[0][i])))
                << what << " at " << i;
          }
        }
      }
}

// Between two convolutions the executor keeps the tensor channels-last through a linear or cubic
// Resize; the result is the NCHW reference's.
TEST(FastKernels, ChannelsLastResizeBetweenConvs) {
  for (const char* mode : {"linear", "cubic", "nearest"}) {
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("conv_resize_conv");
      m.mutable_opset_import(0)->set_version(18);
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, {1, 8, 10, 12});
      *g->add_output() = Info("y", type, {1, 8, 20, 18});
      std::mt19937 rng(3);
      FillTensor(g->add_initializer(), "w1", type, {16, 8, 3, 3}, Random(16 * 8 * 9, rng, 0.3));
      FillTensor(g->add_initializer(), "w2", type, {8, 16, 1, 1}, Random(8 * 16, rng, 0.3));
      auto* scales = g->add_initializer();
      scales->set_name("scales");
      scales->set_data_type(onnx::TensorProto::FLOAT);
      scales->add_dims(4);
      for (float v : {1.0f, 1.0f, 2.0f, 1.5f}) scales->add_float_data(v);
      testing::SetAttr(testing::AddNamedNode(g, "Conv", {"x", "w1"}, "a"), "pads",
                       std::vector<int64_t>{1, 1, 1, 1});
      testing::SetAttr(testing::AddNamedNode(g, "Resize", {"a", "", "scales"}, "b"), "mode",
                       std::string(mode));
      testing::AddNamedNode(g, "Conv", {"b", "w2"}, "y");
      return m;
    };
    std::mt19937 rng(8);
    const std::vector<double> xv = Random(8 * 10 * 12, rng);
    const auto want =
        RunModel(build(onnx::TensorProto::DOUBLE), InputOf(DType::kFloat64, {1, 8, 10, 12}, xv), 1);
    for (int threads : {1, 2}) {
      int channels_last = 0;
      ExpectClose(RunModel(build(onnx::TensorProto::FLOAT),
                           InputOf(DType::kFloat32, {1, 8, 10, 12}, xv), threads, &channels_last),
                  want, 1e-5, std::string(mode) + " threads " + std::to_string(threads));
      EXPECT_GE(channels_last, 2) << mode << ": the Resize's input and output stay channels-last";
    }
  }
}

// Every unary element-wise op of the traits table (ops/op_traits.h) runs channels-last between
// two convolutions, and in place; the result is the NCHW float64 reference's. A Sigmoid first
// keeps the op's argument in (0, 1), inside every op's domain but Acosh's (NaN in both runs).
TEST(FastKernels, UnaryElementwiseOpsRunChannelsLastBetweenConvs) {
  for (const std::string& op : ops::OpsWithTrait(ops::kUnaryElementwise)) {
    if (op.find(':') != std::string::npos) continue;  // other domains: not ONNX's
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("conv_op_conv");
      m.mutable_opset_import(0)->set_version(24);
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, {1, 8, 6, 7});
      *g->add_output() = Info("y", type, {1, 8, 6, 7});
      std::mt19937 rng(5);
      FillTensor(g->add_initializer(), "w1", type, {16, 8, 3, 3}, Random(16 * 8 * 9, rng, 0.3));
      FillTensor(g->add_initializer(), "w2", type, {8, 16, 1, 1}, Random(8 * 16, rng, 0.3));
      testing::SetAttr(testing::AddNamedNode(g, "Conv", {"x", "w1"}, "a"), "pads",
                       std::vector<int64_t>{1, 1, 1, 1});
      testing::AddNamedNode(g, "Sigmoid", {"a"}, "b");
      testing::AddNamedNode(g, op, {"b"}, "c");
      testing::AddNamedNode(g, "Conv", {"c", "w2"}, "y");
      return m;
    };
    std::mt19937 rng(9);
    const std::vector<double> xv = Random(8 * 6 * 7, rng, 2.0);
    const auto want =
        RunModel(build(onnx::TensorProto::DOUBLE), InputOf(DType::kFloat64, {1, 8, 6, 7}, xv), 1);
    int channels_last = 0;
    const auto got = RunModel(build(onnx::TensorProto::FLOAT),
                              InputOf(DType::kFloat32, {1, 8, 6, 7}, xv), 2, &channels_last);
    ASSERT_EQ(got.size(), 1u) << op;
    ASSERT_EQ(got[0].size(), want[0].size()) << op;
    for (size_t i = 0; i < got[0].size(); ++i) {
      if (std::isnan(want[0][i])) {
        EXPECT_TRUE(std::isnan(got[0][i])) << op << " at " << i;
        continue;
      }
      EXPECT_NEAR(got[0][i], want[0][i], 2e-5 * (1 + std::fabs(want[0][i]))) << op << " at " << i;
    }
    EXPECT_GE(channels_last, 3) << op << ": its input and output stay channels-last";
  }
}

// ---------------------------------------------------------------------------------------------
// Normalizations

// One normalization node on x of `dims`: InstanceNormalization, GroupNormalization (opset 18:
// scale per group; 21: per channel) or LayerNormalization (axis 1), scale and bias random; or
// LpNormalization over axis 1 with p = `groups`.
onnx::ModelProto NormModel(const std::string& op, const std::vector<int64_t>& dims, int64_t groups,
                           int opset, onnx::TensorProto::DataType type,
                           const std::vector<int64_t>& axes = {}) {
  onnx::ModelProto m = testing::EmptyModel("norm");
  m.mutable_opset_import(0)->set_version(opset);
  auto* g = m.mutable_graph();
  *g->add_input() = Info("x", type, dims);
  *g->add_output() = Info("y", type, dims);
  if (op == "MeanVarianceNormalization") {
    auto* n = testing::AddNamedNode(g, op, {"x"}, "y");
    if (!axes.empty()) testing::SetAttr(n, "axes", axes);
    return m;
  }
  if (op == "LpNormalization") {  // groups: p; the axis is 1
    auto* n = testing::AddNamedNode(g, op, {"x"}, "y");
    testing::SetAttr(n, "p", groups);
    testing::SetAttr(n, "axis", int64_t{1});
    return m;
  }
  std::mt19937 rng(17);
  int64_t params = op == "GroupNormalization" && opset < 21 ? groups : dims[1];
  std::vector<int64_t> pdims = {params};
  if (op == "LayerNormalization") {
    params = 1;
    pdims.clear();
    for (size_t d = 1; d < dims.size(); ++d) pdims.push_back(dims[d]), params *= dims[d];
  }
  FillTensor(g->add_initializer(), "scale", type, pdims,
             Random(static_cast<size_t>(params), rng, 2.0));
  FillTensor(g->add_initializer(), "bias", type, pdims,
             Random(static_cast<size_t>(params), rng, 2.0));
  auto* n = testing::AddNamedNode(g, op, {"x", "scale", "bias"}, "y");
  if (op == "GroupNormalization") testing::SetAttr(n, "num_groups", groups);
  if (op == "LayerNormalization") testing::SetAttr(n, "axis", int64_t{1});
  return m;
}

// GroupNorm as torch exports it at opset 17: Reshape [N, G, -1], InstanceNormalization with unit
// scale and zero bias, Reshape back, then Mul and Add by [C, 1, 1] parameters.
onnx::ModelProto ExportedGroupNorm(const std::vector<int64_t>& dims, int64_t groups,
                                   onnx::TensorProto::DataType type) {
  onnx::ModelProto m = testing::EmptyModel("groupnorm_export");
  auto* g = m.mutable_graph();
  *g->add_input() = Info("x", type, dims);
  *g->add_output() = Info("y", type, dims);
  std::mt19937 rng(23);
  testing::AddInt64Initializer(g, "grouped", {3}, {dims[0], groups, -1});
  testing::AddInt64Initializer(g, "back", {static_cast<int64_t>(dims.size())}, dims);
  FillTensor(g->add_initializer(), "ones", type, {groups},
             std::vector<double>(static_cast<size_t>(groups), 1.0));
  FillTensor(g->add_initializer(), "zeros", type, {groups},
             std::vector<double>(static_cast<size_t>(groups), 0.0));
  FillTensor(g->add_initializer(), "gamma", type, {dims[1], 1, 1},
             Random(static_cast<size_t>(dims[1]), rng, 2.0));
  FillTensor(g->add_initializer(), "beta", type, {dims[1], 1, 1},
             Random(static_cast<size_t>(dims[1]), rng, 2.0));
  testing::AddNamedNode(g, "Reshape", {"x", "grouped"}, "r");
  testing::AddNamedNode(g, "InstanceNormalization", {"r", "ones", "zeros"}, "n");
  testing::AddNamedNode(g, "Reshape", {"n", "back"}, "b");
  testing::AddNamedNode(g, "Mul", {"b", "gamma"}, "s");
  testing::AddNamedNode(g, "Add", {"s", "beta"}, "y");
  return m;
}

TEST(FastKernels, NormalizationsAgainstTheDoubleReference) {
  struct Case {
    std::string op;
    std::vector<int64_t> dims;
    int64_t groups = 1;
    int opset = 17;
    std::vector<int64_t> axes = {};  // MeanVarianceNormalization's (none: its default 0, 2, 3)
  };
  const std::vector<Case> cases = {
      {"InstanceNormalization", {2, 5, 7, 9}},
      {"InstanceNormalization", {1, 32, 64, 64}},
      {"InstanceNormalization", {3, 4, 1}},
      {"InstanceNormalization", {2, 6, 100}},
      {"InstanceNormalization", {1, 3, 4, 5, 6}},
      {"InstanceNormalization", {1, 7, 13, 17}},
      {"GroupNormalization", {2, 8, 6, 5}, 4, 18},
      {"GroupNormalization", {1, 64, 32, 32}, 32, 18},
      {"GroupNormalization", {2, 12, 9, 7}, 3, 21},
      {"GroupNormalization", {1, 6, 50}, 6, 21},
      {"LayerNormalization", {4, 33}},
      {"LayerNormalization", {3, 8, 5}},
      {"LpNormalization", {300, 517}, 2},  // rows (the axis last)
      {"LpNormalization", {300, 517}, 1},
      {"LpNormalization", {4, 37, 300}, 2},  // columns
      {"LpNormalization", {4, 37, 300}, 1},
      {"LpNormalization", {2, 8, 1}, 2},
      // MeanVarianceNormalization: rows of one group, rows across groups, alternating blocks,
      // size-1 dims, one group, and a map the threads split.
      {"MeanVarianceNormalization", {2, 5, 7, 9}, 1, 13},
      {"MeanVarianceNormalization", {3, 4, 50}, 1, 13, {2}},
      {"MeanVarianceNormalization", {2, 6, 5, 7}, 1, 13, {1}},
      {"MeanVarianceNormalization", {4, 33}, 1, 13, {0}},
      {"MeanVarianceNormalization", {2, 3, 4, 5}, 1, 13, {1, 3}},
      {"MeanVarianceNormalization", {2, 3, 4, 5}, 1, 13, {0, 1, 2, 3}},
      {"MeanVarianceNormalization", {1, 8, 1, 16}, 1, 13, {2, 3}},
      {"MeanVarianceNormalization", {2, 64, 56, 56}, 1, 13},
  };
  std::mt19937 rng(29);
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d;
    std::vector<double> xv = Random(static_cast<size_t>(n), rng);
    for (size_t i = 0; i < xv.size(); ++i)
      xv[i] = static_cast<float>(xv[i] * 3 + 5);  // a mean far from 0
    std::string what = c.op + " opset " + std::to_string(c.opset);
    for (int64_t d : c.dims) what += " " + std::to_string(d);
    for (int64_t a : c.axes) what += " axis " + std::to_string(a);
    ExpectFloatMatchesDouble(
        [&](onnx::TensorProto::DataType t) {
          return NormModel(c.op, c.dims, c.groups, c.opset, t, c.axes);
        },
        c.dims, xv, 2e-6, what);
  }
  for (const auto& g : std::vector<std::pair<std::vector<int64_t>, int64_t>>{{{1, 64, 16, 16}, 32},
                                                                             {{2, 12, 7, 9}, 4}}) {
    int64_t n = 1;
    for (int64_t d : g.first) n *= d;
    const std::vector<double> xv = Random(static_cast<size_t>(n), rng);
    ExpectFloatMatchesDouble(
        [&](onnx::TensorProto::DataType t) { return ExportedGroupNorm(g.first, g.second, t); },
        g.first, xv, 2e-6, "exported GroupNorm");
  }
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose

TEST(FastKernels, ConvTransposeAgainstTheDoubleReference) {
  struct Case {
    std::vector<int64_t> x;  // N, C, H, W
    int64_t M, group, k, stride, pad, out_pad, dilation;
  };
  const std::vector<Case> cases = {
      {{1, 16, 7, 9}, 8, 1, 2, 2, 0, 0, 1},
      {{2, 32, 6, 6}, 16, 1, 4, 2, 1, 0, 1},
      {{1, 12, 5, 7}, 6, 1, 3, 2, 1, 1, 1},
      {{1, 16, 6, 5}, 16, 4, 3, 1, 1, 0, 1},
      {{3, 8, 4, 4}, 24, 2, 3, 3, 0, 2, 1},
      {{1, 10, 8, 6}, 5, 1, 3, 1, 2, 0, 2},
      {{1, 64, 14, 14}, 32, 1, 2, 2, 0, 0, 1},
      // batches of small grids, images side by side in one GEMM (in batches of 2 in the last),
      // threads over blocks of output channels
      {{8, 40, 1, 1}, 24, 1, 4, 1, 0, 0, 1},
      {{5, 24, 4, 4}, 12, 1, 4, 2, 1, 0, 1},
      {{4, 16, 3, 5}, 8, 1, 2, 2, 0, 0, 1},
      {{3, 8, 15, 15}, 128, 1, 4, 2, 1, 0, 1},
      // output channels in several blocks a thread, the last one short; a 1x1 grid in groups
      {{4, 24, 5, 5}, 36, 1, 3, 2, 1, 0, 1},
      {{6, 16, 1, 1}, 32, 2, 4, 1, 0, 0, 1}};
  std::mt19937 rng(31);
  for (const Case& c : cases) {
    auto build = [&](onnx::TensorProto::DataType type, const std::vector<double>& w,
                     int64_t images) {
      onnx::ModelProto m = testing::EmptyModel("convtranspose");
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, {images, c.x[1], c.x[2], c.x[3]});
      const int64_t eh = c.dilation * (c.k - 1) + 1;
      auto out = [&](int64_t in) { return (in - 1) * c.stride + eh - 2 * c.pad + c.out_pad; };
      *g->add_output() = Info("y", type, {images, c.M, out(c.x[2]), out(c.x[3])});
      FillTensor(g->add_initializer(), "w", type, {c.x[1], c.M / c.group, c.k, c.k}, w);
      FillTensor(g->add_initializer(), "b", type, {c.M},
                 std::vector<double>(static_cast<size_t>(c.M), 0.25));
      auto* n = testing::AddNamedNode(g, "ConvTranspose", {"x", "w", "b"}, "y");
      testing::SetAttr(n, "strides", std::vector<int64_t>(2, c.stride));
      testing::SetAttr(n, "pads", std::vector<int64_t>(4, c.pad));
      testing::SetAttr(n, "output_padding", std::vector<int64_t>(2, c.out_pad));
      testing::SetAttr(n, "dilations", std::vector<int64_t>(2, c.dilation));
      testing::SetAttr(n, "group", c.group);
      return m;
    };
    int64_t nx = 1;
    for (int64_t d : c.x) nx *= d;
    const std::vector<double> xv = Random(static_cast<size_t>(nx), rng);
    const std::vector<double> wv =
        Random(static_cast<size_t>(c.x[1] * (c.M / c.group) * c.k * c.k), rng, 0.3);
    const std::string what = "C" + std::to_string(c.x[1]) + " M" + std::to_string(c.M) + " group " +
                             std::to_string(c.group) + " k" + std::to_string(c.k) + " s" +
                             std::to_string(c.stride);
    ExpectFloatMatchesDouble([&](onnx::TensorProto::DataType t) { return build(t, wv, c.x[0]); },
                             c.x, xv, 1e-6, what);
    // A batch runs its images side by side (ConvTransposeImages): each image alone must agree.
    if (c.x[0] == 1) continue;
    const auto batch = RunModel(build(onnx::TensorProto::DOUBLE, wv, c.x[0]),
                                InputOf(DType::kFloat64, c.x, xv), 2);
    ASSERT_EQ(batch.size(), 1u);
    const size_t per_in = xv.size() / c.x[0], per_out = batch[0].size() / c.x[0];
    for (int64_t n = 0; n < c.x[0]; ++n) {
      const std::vector<double> xn(xv.begin() + n * per_in, xv.begin() + (n + 1) * per_in);
      const auto alone = RunModel(build(onnx::TensorProto::DOUBLE, wv, 1),
                                  InputOf(DType::kFloat64, {1, c.x[1], c.x[2], c.x[3]}, xn), 1);
      const std::vector<double> part(batch[0].begin() + n * per_out,
                                     batch[0].begin() + (n + 1) * per_out);
      ExpectClose({part}, alone, 1e-12, what + " image " + std::to_string(n));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3-D Conv (oneDNN's in float32, im2col in float64), with a residual Add and Relu after it that
// the executor fuses into the convolution

TEST(FastKernels, Conv3DAgainstTheDoubleReference) {
  struct Case {
    std::vector<int64_t> x;  // N, C, D, H, W
    int64_t M, group, k, stride, pad, dilation;
    bool residual;
  };
  const std::vector<Case> cases = {{{1, 8, 6, 9, 7}, 16, 1, 3, 1, 1, 1, true},
                                   {{3, 6, 5, 6, 6}, 12, 3, 3, 2, 1, 1, false},
                                   {{1, 16, 9, 5, 5}, 8, 1, 3, 1, 2, 2, true},
                                   {{2, 4, 4, 8, 8}, 16, 1, 1, 1, 0, 1, false},
                                   {{1, 3, 8, 12, 12}, 8, 1, 5, 2, 2, 1, false}};
  std::mt19937 rng(37);
  for (const Case& c : cases) {
    auto out = [&](int64_t in) {
      return (in + 2 * c.pad - c.dilation * (c.k - 1) - 1) / c.stride + 1;
    };
    const std::vector<int64_t> yd = {c.x[0], c.M, out(c.x[2]), out(c.x[3]), out(c.x[4])};
    const std::vector<double> wv =
        Random(static_cast<size_t>(c.M * (c.x[1] / c.group) * c.k * c.k * c.k), rng, 0.3);
    int64_t ny = 1;
    for (int64_t d : yd) ny *= d;
    const std::vector<double> zv = Random(static_cast<size_t>(ny), rng);
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("conv3d");
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, c.x);
      *g->add_output() = Info("y", type, yd);
      FillTensor(g->add_initializer(), "w", type, {c.M, c.x[1] / c.group, c.k, c.k, c.k}, wv);
      FillTensor(g->add_initializer(), "b", type, {c.M},
                 std::vector<double>(static_cast<size_t>(c.M), 0.25));
      FillTensor(g->add_initializer(), "z", type, yd, zv);
      auto* n = testing::AddNamedNode(g, "Conv", {"x", "w", "b"}, "conv");
      testing::SetAttr(n, "strides", std::vector<int64_t>(3, c.stride));
      testing::SetAttr(n, "pads", std::vector<int64_t>(6, c.pad));
      testing::SetAttr(n, "dilations", std::vector<int64_t>(3, c.dilation));
      testing::SetAttr(n, "group", c.group);
      if (c.residual) {
        testing::AddNamedNode(g, "Add", {"conv", "z"}, "sum");
        testing::AddNamedNode(g, "Relu", {"sum"}, "y");
      } else {
        testing::AddNamedNode(g, "Relu", {"conv"}, "y");
      }
      return m;
    };
    int64_t nx = 1;
    for (int64_t d : c.x) nx *= d;
    const std::vector<double> xv = Random(static_cast<size_t>(nx), rng);
    const std::string what = "C" + std::to_string(c.x[1]) + " M" + std::to_string(c.M) + " k" +
                             std::to_string(c.k) + " s" + std::to_string(c.stride) + " N" +
                             std::to_string(c.x[0]);
    ExpectFloatMatchesDouble(build, c.x, xv, 1e-6, what);
  }
}

// ---------------------------------------------------------------------------------------------
// Einsum as strided GEMMs, against the generic loop (int64, exact) on small integers

TEST(FastKernels, EinsumAgainstTheGenericLoop) {
  struct Case {
    std::string equation;
    std::vector<int64_t> a, b;
  };
  const std::vector<Case> cases = {{"bmk,bkn->bmn", {3, 5, 7}, {3, 7, 4}},
                                   {"bhqd,bhkd->bhqk", {2, 3, 5, 8}, {2, 3, 6, 8}},
                                   {"bhqd,bhkd->bhqk", {2, 3, 1, 40}, {2, 3, 37, 40}},  // GEMV
                                   {"bmk,bkn->bmn", {3, 1, 7}, {3, 7, 45}},
                                   {"bhqk,bhkd->bhqd", {1, 2, 9, 9}, {1, 2, 9, 4}},
                                   {"bij,jk->bik", {2, 5, 6}, {6, 3}},
                                   {"mk,kn->nm", {5, 6}, {6, 7}},
                                   {"ik,jk->ij", {4, 3}, {5, 3}},
                                   {"bi,bi->b", {6, 9}, {6, 9}},
                                   {"i,j->ij", {5}, {4}},
                                   {"...ij,...jk->...ik", {2, 3, 4, 5}, {3, 5, 2}},
                                   {"bmk,bnk->bnm", {2, 4, 3}, {2, 6, 3}},
                                   {"ii,ij->ij", {4, 4}, {4, 3}},
                                   {"ijk,jkl->il", {3, 4, 5}, {4, 5, 6}},
                                   {"abij,abjk->abik", {2, 3, 4, 5}, {2, 3, 5, 2}},
                                   {"bij,jk->kib", {2, 3, 4}, {4, 5}},
                                   // 3 products over 2 threads: blocks of each one's rows
                                   {"bhqd,bhkd->bhqk", {1, 3, 37, 16}, {1, 3, 29, 16}},
                                   {"bmk,bkn->bmn", {3, 19, 8}, {3, 8, 21}}};
  std::mt19937 rng(47);
  for (const Case& c : cases) {
    auto build = [&](onnx::TensorProto::DataType type, const std::vector<double>& bv) {
      onnx::ModelProto m = testing::EmptyModel("einsum");
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, c.a);
      auto* y = g->add_output();
      y->set_name("y");
      y->mutable_type()->mutable_tensor_type()->set_elem_type(type);
      auto* t = g->add_initializer();
      t->set_name("w");
      t->set_data_type(type);
      for (int64_t d : c.b) t->add_dims(d);
      for (double v : bv) {
        if (type == onnx::TensorProto::INT64)
          t->add_int64_data(static_cast<int64_t>(v));
        else
          t->add_float_data(static_cast<float>(v));
      }
      testing::SetAttr(testing::AddNamedNode(g, "Einsum", {"x", "w"}, "y"), "equation", c.equation);
      return m;
    };
    auto ints = [&](const std::vector<int64_t>& dims) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      std::vector<double> v(static_cast<size_t>(n));
      for (auto& x : v) x = static_cast<double>(static_cast<int>(rng() % 9) - 4);
      return v;
    };
    const std::vector<double> av = ints(c.a), bv = ints(c.b);
    Tensor xi(DType::kInt64, c.a);
    for (int64_t i = 0; i < xi.size(); ++i) xi.data<int64_t>()[i] = static_cast<int64_t>(av[i]);
    const auto want = RunModel(build(onnx::TensorProto::INT64, bv), xi, 1);
    for (int threads : {1, 2})
      ExpectClose(
          RunModel(build(onnx::TensorProto::FLOAT, bv), InputOf(DType::kFloat32, c.a, av), threads),
          want, 1e-12, c.equation + " threads " + std::to_string(threads));
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions and pooling

TEST(FastKernels, ReductionsAgainstTheDoubleReference) {
  struct Case {
    std::string op;
    std::vector<int64_t> dims, axes;
    bool keepdims = true;
  };
  const std::vector<Case> cases = {{"ReduceSum", {8, 128, 77}, {2}},
                                   {"ReduceMean", {8, 128, 77}, {-1}, false},
                                   {"ReduceMax", {8, 128, 768}, {2}},
                                   {"ReduceMin", {3, 1000}, {1}},
                                   {"ReduceMean", {4, 16, 9, 11}, {2, 3}},
                                   {"ReduceSum", {4, 16, 9, 11}, {1}},
                                   {"ReduceMax", {2, 21, 16, 16}, {1}},
                                   {"ReduceSum", {300, 40}, {0}},
                                   {"ReduceL2", {64, 33}, {1}},
                                   {"ReduceL1", {5, 6, 7}, {0, 1}},
                                   {"ReduceSumSquare", {5, 6, 7}, {1, 2}},
                                   {"ReduceMin", {2, 3, 4, 5}, {0, 2}},  // not one block
                                   {"ReduceMean", {1, 1, 13}, {2}},
                                   {"ReduceMax", {7}, {0}, false}};
  std::mt19937 rng(37);
  for (const Case& c : cases) {
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("reduce");
      m.mutable_opset_import(0)->set_version(18);
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, c.dims);
      auto* y = g->add_output();
      y->set_name("y");
      y->mutable_type()->mutable_tensor_type()->set_elem_type(type);
      testing::AddInt64Initializer(g, "axes", {static_cast<int64_t>(c.axes.size())}, c.axes);
      auto* n = testing::AddNamedNode(g, c.op, {"x", "axes"}, "y");
      testing::SetAttr(n, "keepdims", int64_t{c.keepdims ? 1 : 0});
      return m;
    };
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d;
    std::vector<double> xv = Random(static_cast<size_t>(n), rng);
    for (auto& v : xv) v = static_cast<float>(v + 0.5);
    std::string what = c.op;
    for (int64_t d : c.dims) what += " " + std::to_string(d);
    ExpectFloatMatchesDouble(build, c.dims, xv, 1e-6, what);
  }
  // NaN sticks in a float32 maximum.
  onnx::ModelProto m = testing::EmptyModel("reduce_nan");
  m.mutable_opset_import(0)->set_version(18);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {2, 40});
  *g->add_output() = testing::FloatInfo("y", {2, 1});
  testing::AddInt64Initializer(g, "axes", {1}, {1});
  testing::AddNamedNode(g, "ReduceMax", {"x", "axes"}, "y");
  std::vector<double> xv(80, 1.0);
  xv[17] = std::nan("");
  const auto got = RunModel(m, InputOf(DType::kFloat32, {2, 40}, xv), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(std::isnan(got[0][0]));
  EXPECT_EQ(got[0][1], 1.0);
}

TEST(FastKernels, SoftmaxOverInnerAxesAgainstTheDoubleReference) {
  struct Case {
    std::string op;
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {"Softmax", {8, 128, 33}, 1},    {"LogSoftmax", {8, 40, 1000}, 1},
      {"Softmax", {1, 21, 64, 64}, 1}, {"LogSoftmax", {3, 5, 7, 300}, 2},
      {"Softmax", {700, 3}, 0},        {"LogSoftmax", {2, 9, 513}, -2}};
  std::mt19937 rng(43);
  for (const Case& c : cases) {
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("softmax");
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, c.dims);
      *g->add_output() = Info("y", type, c.dims);
      testing::SetAttr(testing::AddNamedNode(g, c.op, {"x"}, "y"), "axis", c.axis);
      return m;
    };
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d;
    std::vector<double> xv = Random(static_cast<size_t>(n), rng, 8.0);
    const std::string what = c.op + " axis " + std::to_string(c.axis);
    ExpectFloatMatchesDouble(build, c.dims, xv, 1e-6, what);
  }
}

// RotaryEmbedding (opset 23) in float32, whose rows split over the threads, against its generic
// loop in double: 4-D with position ids, 3-D with num_heads, interleaved pairs, rotary dims short
// of the head; and the Attention op (opset 23) with a float mask, a bool mask, is_causal,
// grouped kv heads, 3-D inputs and one query row, whose (batch, kv head) pairs split over the
// threads.
TEST(FastKernels, RotaryEmbeddingAndAttentionAgainstTheDoubleReference) {
  std::mt19937 rng(47);
  struct Rope {
    bool is3d, interleaved, positions;
    int64_t rot;
  };
  const int64_t B = 2, H = 3, S = 37, D = 16;
  for (const Rope& c : {Rope{false, false, true, 0}, Rope{true, false, false, 0},
                        Rope{false, true, true, 8}, Rope{true, true, false, 12}}) {
    const int64_t half = (c.rot ? c.rot : D) / 2, rows = c.positions ? 50 : B * S;
    const std::vector<double> cv = Random(static_cast<size_t>(rows * half), rng),
                              sv = Random(static_cast<size_t>(rows * half), rng);
    const Dims xd = c.is3d ? Dims{B, S, H * D} : Dims{B, H, S, D};
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("rope");
      m.mutable_opset_import(0)->set_version(23);
      m.set_ir_version(10);
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, xd);
      *g->add_output() = Info("y", type, xd);
      const Dims cd = c.positions ? Dims{rows, half} : Dims{B, S, half};
      FillTensor(g->add_initializer(), "cos", type, cd, cv);
      FillTensor(g->add_initializer(), "sin", type, cd, sv);
      std::vector<std::string> ins = {"x", "cos", "sin"};
      if (c.positions) {
        std::vector<int64_t> p(static_cast<size_t>(B * S));
        for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>((i * 7) % rows);
        testing::AddInt64Initializer(g, "pos", {B, S}, p);
        ins.push_back("pos");
      }
      auto* n = testing::AddNamedNode(g, "RotaryEmbedding", ins, "y");
      if (c.is3d) testing::SetAttr(n, "num_heads", H);
      if (c.interleaved) testing::SetAttr(n, "interleaved", int64_t{1});
      if (c.rot) testing::SetAttr(n, "rotary_embedding_dim", c.rot);
      return m;
    };
    ExpectFloatMatchesDouble(build, xd, Random(static_cast<size_t>(B * H * S * D), rng), 1e-6,
                             "RotaryEmbedding 3d " + std::to_string(c.is3d) + " interleaved " +
                                 std::to_string(c.interleaved) + " rot " + std::to_string(c.rot));
  }
  struct Attn {
    std::string mask;  // "", "float" or "bool"
    bool causal;
    int64_t hkv;
    bool is3d;   // [B, S, heads * size], read and written in place through row strides
    int64_t sq;  // 1: the decode step's one query row (the GEMV products)
  };
  const int64_t Hq = 4, T = 33, Dh = 8;
  for (const Attn& c : {Attn{"float", false, 4, false, 29}, Attn{"bool", false, 2, false, 29},
                        Attn{"", true, 1, false, 29}, Attn{"float", true, 2, false, 29},
                        Attn{"bool", false, 2, true, 29}, Attn{"", true, 4, true, 29},
                        Attn{"float", false, 4, false, 1}, Attn{"", false, 2, true, 1}}) {
    const int64_t Sq = c.sq;
    const std::vector<double> kv = Random(static_cast<size_t>(B * c.hkv * T * Dh), rng),
                              vv = Random(static_cast<size_t>(B * c.hkv * T * Dh), rng),
                              mv = Random(static_cast<size_t>(Sq * T), rng, 3.0);
    const Dims qd = c.is3d ? Dims{B, Sq, Hq * Dh} : Dims{B, Hq, Sq, Dh};
    const Dims kd = c.is3d ? Dims{B, T, c.hkv * Dh} : Dims{B, c.hkv, T, Dh};
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("attention");
      m.mutable_opset_import(0)->set_version(23);
      m.set_ir_version(10);
      auto* g = m.mutable_graph();
      *g->add_input() = Info("q", type, qd);
      *g->add_output() = Info("y", type, qd);
      FillTensor(g->add_initializer(), "k", type, kd, kv);
      FillTensor(g->add_initializer(), "v", type, kd, vv);
      std::vector<std::string> ins = {"q", "k", "v"};
      if (c.mask == "float") {
        FillTensor(g->add_initializer(), "m", type, {Sq, T}, mv);
        ins.push_back("m");
      } else if (c.mask == "bool") {
        auto* t = g->add_initializer();
        t->set_name("m");
        t->set_data_type(onnx::TensorProto::BOOL);
        t->add_dims(Sq);
        t->add_dims(T);
        for (double v : mv) t->add_int32_data(v > -2.0 ? 1 : 0);
        ins.push_back("m");
      }
      auto* n = testing::AddNamedNode(g, "Attention", ins, "y");
      if (c.causal) testing::SetAttr(n, "is_causal", int64_t{1});
      if (c.is3d) {
        testing::SetAttr(n, "q_num_heads", Hq);
        testing::SetAttr(n, "kv_num_heads", c.hkv);
      }
      return m;
    };
    ExpectFloatMatchesDouble(build, qd, Random(static_cast<size_t>(B * Hq * Sq * Dh), rng), 1e-6,
                             "Attention mask '" + c.mask + "' causal " + std::to_string(c.causal) +
                                 " kv heads " + std::to_string(c.hkv) + " 3-D " +
                                 std::to_string(c.is3d) + " q rows " + std::to_string(Sq));
  }
}

// ArgMax / ArgMin along contiguous rows long enough for the vector-lane scan (256 and more, and
// tails of the 16 lanes) and shorter ones, with ties everywhere (values from a few integers)
// and NaNs in some rows, select_last_index 0 and 1, at 1 and 2 threads, against a plain scan
// with numpy's rule: a NaN wins, among equals the first (or last) index.
TEST(FastKernels, ArgMaxArgMinAlongRowsAgainstAScan) {
  std::mt19937 rng(53);
  for (int64_t n : {7, 255, 256, 257, 1000, 4099})
    for (const char* op : {"ArgMax", "ArgMin"})
      for (int64_t last : {0, 1}) {
        const int64_t rows = 5;
        std::vector<double> xv(static_cast<size_t>(rows * n));
        for (auto& v : xv) v = static_cast<double>(static_cast<int>(rng() % 9) - 4);
        xv[static_cast<size_t>(1 * n + n / 3)] = std::nan("");  // one NaN in row 1
        xv[static_cast<size_t>(2 * n + 1)] = std::nan("");      // two in row 2
        xv[static_cast<size_t>(2 * n + n - 1)] = std::nan("");
        onnx::ModelProto m = testing::EmptyModel("arg");
        auto* g = m.mutable_graph();
        *g->add_input() = Info("x", onnx::TensorProto::FLOAT, {rows, n});
        auto* node = testing::AddNamedNode(g, op, {"x"}, "y");
        testing::SetAttr(node, "axis", int64_t{1});
        testing::SetAttr(node, "select_last_index", last);
        g->add_output()->set_name("y");
        const bool is_max = std::string(op) == "ArgMax";
        for (int threads : {1, 2}) {
          const auto got = RunModel(m, InputOf(DType::kFloat32, {rows, n}, xv), threads);
          ASSERT_EQ(got.size(), 1u);
          for (int64_t r = 0; r < rows; ++r) {
            const double* row = xv.data() + r * n;
            int64_t best = 0;
            for (int64_t j = 1; j < n; ++j) {
              const double v = row[j], b = row[best];
              const bool cmp = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
              if ((std::isnan(v) && (last || !std::isnan(b))) ||
                  (!std::isnan(v) && !std::isnan(b) && cmp))
                best = j;
            }
            ASSERT_EQ(got[0][r], static_cast<double>(best))
                << op << " n " << n << " last " << last << " threads " << threads << " row " << r;
          }
        }
      }
}

// Dilated MaxPool at strides 1, 2 and 3 (the plane kernels' three tap layouts) and LpPool
// (p = 1, 2, 3, on the generic window loop) against a scan written here: NaN taps skipped unless
// every tap is NaN, -inf taps, padding that leaves edge windows with few taps; at 1 and 2
// threads.
TEST(FastKernels, DilatedMaxPoolAndLpPoolAgainstAScan) {
  std::mt19937 rng(59);
  const int64_t C = 3, H = 13, W = 17, K = 3, dil = 2, pad = 2;
  std::vector<double> xv = Random(static_cast<size_t>(C * H * W), rng, 4.0);
  for (int i = 0; i < 40; ++i) {
    const double special[] = {std::nan(""), -std::numeric_limits<double>::infinity()};
    xv[rng() % xv.size()] = special[i % 2];
  }
  for (int64_t w = 0; w < W; ++w) xv[static_cast<size_t>(2 * H * W + 6 * W + w)] = std::nan("");
  for (int64_t h = 0; h < 6; ++h)  // a corner of channel 1 where whole windows are NaN
    for (int64_t w = 0; w < 6; ++w) xv[static_cast<size_t>(H * W + h * W + w)] = std::nan("");
  for (const std::string op :
       {"MaxPool1", "MaxPool2", "MaxPool3", "LpPool1", "LpPool2", "LpPool3"}) {
    const bool max = op.rfind("MaxPool", 0) == 0;
    const int64_t stride = max ? op.back() - '0' : 1, d = max ? dil : 1;
    const double p = max ? 0 : op.back() - '0';
    onnx::ModelProto m = testing::EmptyModel("pool");
    m.mutable_opset_import(0)->set_version(18);
    auto* g = m.mutable_graph();
    *g->add_input() = Info("x", onnx::TensorProto::FLOAT, {1, C, H, W});
    auto* n = testing::AddNamedNode(g, max ? "MaxPool" : "LpPool", {"x"}, "y");
    testing::SetAttr(n, "kernel_shape", std::vector<int64_t>{K, K});
    testing::SetAttr(n, "pads", std::vector<int64_t>{pad, pad, pad, pad});
    testing::SetAttr(n, "strides", std::vector<int64_t>{stride, stride});
    if (max) testing::SetAttr(n, "dilations", std::vector<int64_t>{dil, dil});
    if (!max) testing::SetAttr(n, "p", static_cast<int64_t>(p));
    g->add_output()->set_name("y");
    const int64_t oh_n = (H + 2 * pad - d * (K - 1) - 1) / stride + 1;
    const int64_t ow_n = (W + 2 * pad - d * (K - 1) - 1) / stride + 1;
    for (int threads : {1, 2}) {
      const auto got = RunModel(m, InputOf(DType::kFloat32, {1, C, H, W}, xv), threads);
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].size(), static_cast<size_t>(C * oh_n * ow_n));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t oh = 0; oh < oh_n; ++oh)
          for (int64_t ow = 0; ow < ow_n; ++ow) {
            double best = -std::numeric_limits<double>::infinity(), sum = 0;
            bool first = true;
            for (int64_t kh = 0; kh < K; ++kh)
              for (int64_t kw = 0; kw < K; ++kw) {
                const int64_t ih = oh * stride - pad + kh * d, iw = ow * stride - pad + kw * d;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const double v = static_cast<float>(xv[static_cast<size_t>((c * H + ih) * W + iw)]);
                if (first || v > best || std::isnan(best)) best = v;
                first = false;
                sum += std::pow(std::fabs(v), p);
              }
            const double want = max ? best : std::pow(sum, 1.0 / p);
            const double y = got[0][static_cast<size_t>((c * oh_n + oh) * ow_n + ow)];
            const std::string what = op + " threads " + std::to_string(threads) + " at " +
                                     std::to_string(c) + "," + std::to_string(oh) + "," +
                                     std::to_string(ow);
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(y)) << what;
            } else if (std::isinf(want)) {
              ASSERT_EQ(y, want) << what;
            } else {
              ASSERT_NEAR(y, want, 1e-5 * (1 + std::fabs(want))) << what;
            }
          }
    }
  }
}

// RoiAlign's regions split over the threads: 64 boxes over two images in float32 at 1 and 2
// threads against the same in double, avg and max modes.
TEST(FastKernels, RoiAlignOverThreadsAgainstTheDoubleReference) {
  std::mt19937 rng(61);
  const int64_t N = 2, C = 8, H = 20, W = 20, rois = 64;
  std::vector<double> boxes;
  for (int64_t r = 0; r < rois; ++r) {
    const double x0 = rng() % 15, y0 = rng() % 15;
    boxes.insert(boxes.end(), {x0, y0, x0 + 1 + rng() % 5, y0 + 1 + rng() % 5});
  }
  for (const char* mode : {"avg", "max"}) {
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("roialign");
      m.mutable_opset_import(0)->set_version(16);
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, {N, C, H, W});
      *g->add_output() = Info("y", type, {rois, C, 5, 5});
      FillTensor(g->add_initializer(), "rois", type, {rois, 4}, boxes);
      std::vector<int64_t> batch(static_cast<size_t>(rois));
      for (int64_t r = 0; r < rois; ++r) batch[r] = r % N;
      testing::AddInt64Initializer(g, "batch", {rois}, batch);
      auto* n = testing::AddNamedNode(g, "RoiAlign", {"x", "rois", "batch"}, "y");
      testing::SetAttr(n, "output_height", int64_t{5});
      testing::SetAttr(n, "output_width", int64_t{5});
      testing::SetAttr(n, "sampling_ratio", int64_t{2});
      testing::SetAttr(n, "mode", std::string(mode));
      return m;
    };
    ExpectFloatMatchesDouble(build, {N, C, H, W}, Random(static_cast<size_t>(N * C * H * W), rng),
                             1e-6, std::string("RoiAlign ") + mode);
  }
}

// 3-D MaxPool and AveragePool in float32 (2-D pools of each depth slice, then the depth taps)
// against the window loop in double: strides, pads on every axis, ceil_mode, a depth
// dilation, count_include_pad both ways; at 1 and 2 threads.
TEST(FastKernels, Pool3DAgainstTheDoubleReference) {
  std::mt19937 rng(67);
  struct Case {
    std::string op;
    std::vector<int64_t> k, s, pads, dil;
    int64_t ceil, include_pad;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 0, 0},
      {"MaxPool", {2, 3, 3}, {1, 2, 1}, {0, 1, 0, 1, 1, 1}, {2, 1, 1}, 1, 0},
      {"MaxPool", {3, 2, 3}, {1, 1, 2}, {1, 1, 2, 1, 0, 2}, {1, 2, 2}, 0, 0},
      {"AveragePool", {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, 0, 0},
      {"AveragePool", {3, 3, 3}, {2, 1, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 1, 0},
      {"AveragePool", {3, 3, 3}, {2, 2, 2}, {1, 1, 0, 1, 0, 1}, {1, 1, 1}, 0, 1}};
  // 10 planes of rows long enough for the plane kernels; 19 planes (a block of 16 and a partial
  // one) of short rows, which go through the channels-last kernel.
  for (const Dims& xd : {Dims{2, 5, 9, 12, 11}, Dims{1, 19, 6, 7, 5}})
    for (const Case& c : cases) {
      auto build = [&](onnx::TensorProto::DataType type) {
        onnx::ModelProto m = testing::EmptyModel("pool3d");
        m.mutable_opset_import(0)->set_version(19);
        auto* g = m.mutable_graph();
        *g->add_input() = Info("x", type, xd);
        auto* n = testing::AddNamedNode(g, c.op, {"x"}, "y");
        testing::SetAttr(n, "kernel_shape", c.k);
        testing::SetAttr(n, "strides", c.s);
        testing::SetAttr(n, "pads", c.pads);
        testing::SetAttr(n, "dilations", c.dil);
        testing::SetAttr(n, "ceil_mode", c.ceil);
        if (c.op == "AveragePool") testing::SetAttr(n, "count_include_pad", c.include_pad);
        g->add_output()->set_name("y");
        return m;
      };
      const std::string what = c.op + " ceil " + std::to_string(c.ceil) + " include_pad " +
                               std::to_string(c.include_pad) + " depth dilation " +
                               std::to_string(c.dil[0]) + " row dilation " +
                               std::to_string(c.dil[1]) + " planes " + std::to_string(xd[1]);
      std::vector<double> xv = Random(static_cast<size_t>(NumElements(xd)), rng);
      ExpectFloatMatchesDouble(build, xd, xv, 1e-6, what);
      if (c.op != "MaxPool") continue;
      // NaN and -inf taps, and a corner of plane 1 where whole windows are NaN: NaN is skipped
      // unless every tap is, as the window loop in double does.
      for (int i = 0; i < 60; ++i)
        xv[rng() % xv.size()] = i % 2 ? -std::numeric_limits<double>::infinity() : std::nan("");
      const int64_t hw = xd[3] * xd[4];
      for (int64_t d = 0; d < 3; ++d)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t w = 0; w < 3; ++w)
            xv[static_cast<size_t>((xd[2] + d) * hw + h * xd[4] + w)] = std::nan("");
      const auto want =
          RunModel(build(onnx::TensorProto::DOUBLE), InputOf(DType::kFloat64, xd, xv), 1);
      for (int threads : {1, 2}) {
        const auto got =
            RunModel(build(onnx::TensorProto::FLOAT), InputOf(DType::kFloat32, xd, xv), threads);
        ASSERT_EQ(got.size(), 1u);
        ASSERT_EQ(got[0].size(), want[0].size());
        for (size_t i = 0; i < got[0].size(); ++i) {
          const double y = got[0][i], v = want[0][i];
          if (std::isnan(v))
            ASSERT_TRUE(std::isnan(y)) << what << " NaN at " << i;
          else
            ASSERT_EQ(y, static_cast<double>(static_cast<float>(v))) << what << " NaN at " << i;
        }
      }
    }
}

TEST(FastKernels, PoolingOnShortRowsAgainstTheDoubleReference) {
  struct Case {
    std::string op;
    std::vector<int64_t> x;
    int64_t k, stride, pad;
    bool include_pad = false;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {1, 512, 14, 14}, 2, 2, 0},          {"MaxPool", {1, 192, 28, 28}, 3, 1, 1},
      {"MaxPool", {2, 40, 20, 20}, 5, 1, 2},           {"AveragePool", {1, 48, 9, 7}, 3, 2, 1},
      {"AveragePool", {1, 33, 12, 12}, 3, 1, 1, true}, {"MaxPool", {1, 17, 5, 6}, 2, 2, 0}};
  std::mt19937 rng(41);
  for (const Case& c : cases) {
    auto build = [&](onnx::TensorProto::DataType type) {
      onnx::ModelProto m = testing::EmptyModel("pool");
      auto* g = m.mutable_graph();
      *g->add_input() = Info("x", type, c.x);
      auto* y = g->add_output();
      y->set_name("y");
      y->mutable_type()->mutable_tensor_type()->set_elem_type(type);
      auto* n = testing::AddNamedNode(g, c.op, {"x"}, "y");
      testing::SetAttr(n, "kernel_shape", std::vector<int64_t>(2, c.k));
      testing::SetAttr(n, "strides", std::vector<int64_t>(2, c.stride));
      testing::SetAttr(n, "pads", std::vector<int64_t>(4, c.pad));
      if (c.include_pad) testing::SetAttr(n, "count_include_pad", int64_t{1});
      return m;
    };
    int64_t n = 1;
    for (int64_t d : c.x) n *= d;
    std::vector<double> xv = Random(static_cast<size_t>(n), rng);
    if (c.op == "MaxPool") xv[5] = std::nan("");  // NaN in one window
    const std::string what = c.op + " C" + std::to_string(c.x[1]) + " " + std::to_string(c.x[2]) +
                             "x" + std::to_string(c.x[3]) + " k" + std::to_string(c.k);
    const auto want =
        RunModel(build(onnx::TensorProto::DOUBLE), InputOf(DType::kFloat64, c.x, xv), 1);
    for (int threads : {1, 2}) {
      const auto got =
          RunModel(build(onnx::TensorProto::FLOAT), InputOf(DType::kFloat32, c.x, xv), threads);
      ASSERT_EQ(got.size(), want.size()) << what;
      ASSERT_EQ(got[0].size(), want[0].size()) << what;
      for (size_t i = 0; i < got[0].size(); ++i) {
        if (std::isnan(want[0][i])) {
          EXPECT_TRUE(std::isnan(got[0][i])) << what << " at " << i;
          continue;
        }
        ASSERT_NEAR(got[0][i], want[0][i], 1e-6 * (1 + std::fabs(want[0][i])))
            << what << " at " << i;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// TopK

// The heap selection (k small beside the axis) against a stable sort: values drawn from few
// levels so that ties are many (the smaller index first), largest and smallest, float and
// double, rows over threads; a row holding NaN takes the sorting path (NaN ranks above numbers).
// Where with the condition, X and Y broadcast on leading, inner and middle axes (the rows
// ForEachBroadcastRow merges, contiguous, broadcast or strided within a row), 1 and 3 threads,
// against a loop over the output's indices.
TEST(FastKernels, WhereBroadcastsAgainstTheIndexLoop) {
  const Dims od = {4, 3, 40, 50};
  struct Case {
    Dims c, y;  // X is the input, of od's dims or `x`
    Dims x;
  };
  const std::vector<Case> cases = {{{1, 1, 40, 50}, {}, od},
                                   {{40, 50}, {1}, od},
                                   {od, {3, 1, 1}, od},
                                   {{4, 1, 40, 1}, {50}, od},
                                   {{1, 3, 1, 50}, {4, 1, 40, 1}, od},
                                   {{1}, {1, 1, 1, 50}, {4, 3, 40, 1}},
                                   {{4, 3, 1, 1}, od, {1, 1, 50}}};
  std::mt19937 rng(41);
  for (const Case& k : cases) {
    onnx::ModelProto m = testing::EmptyModel("where");
    auto* g = m.mutable_graph();
    *g->add_input() = Info("x", onnx::TensorProto::FLOAT, k.x);
    *g->add_output() = Info("o", onnx::TensorProto::FLOAT, od);
    auto* c = g->add_initializer();
    c->set_name("c");
    c->set_data_type(onnx::TensorProto::BOOL);
    for (int64_t d : k.c) c->add_dims(d);
    std::vector<int> cv(static_cast<size_t>(NumElements(k.c)));
    for (int& v : cv) v = static_cast<int>(rng() % 2);
    for (int v : cv) c->add_int32_data(v);
    const auto yv = Random(static_cast<size_t>(NumElements(k.y)), rng);
    FillTensor(g->add_initializer(), "y", onnx::TensorProto::FLOAT, k.y, yv);
    testing::AddNamedNode(g, "Where", {"c", "x", "y"}, "o");
    const auto xv = Random(static_cast<size_t>(NumElements(k.x)), rng);
    const Dims cs = ops::BroadcastStrides(k.c, od), xs = ops::BroadcastStrides(k.x, od),
               ys = ops::BroadcastStrides(k.y, od);
    for (int threads : {1, 3}) {
      auto out = RunModel(m, InputOf(DType::kFloat32, k.x, xv), threads);
      ASSERT_EQ(out.size(), 1u);
      ASSERT_EQ(out[0].size(), static_cast<size_t>(NumElements(od)));
      int64_t i = 0;
      for (int64_t a = 0; a < od[0]; ++a)
        for (int64_t b = 0; b < od[1]; ++b)
          for (int64_t h = 0; h < od[2]; ++h)
            for (int64_t w = 0; w < od[3]; ++w, ++i) {
              auto at = [&](const Dims& st) {
                return a * st[0] + b * st[1] + h * st[2] + w * st[3];
              };
              const double want = cv[at(cs)] ? xv[at(xs)] : yv[at(ys)];
              ASSERT_EQ(out[0][i], want)
                  << "case c " << DimsToString(k.c) << " x " << DimsToString(k.x) << " y "
                  << DimsToString(k.y) << " threads " << threads << " at " << i;
            }
    }
  }
}

// Comparisons (bool outputs: the scalar row loops) and the plain unary ops, on tensors the
// threads split: the same operands, a scalar first operand, a scalar second one.
TEST(FastKernels, ComparisonsAndUnaryOpsOverThreadsAgainstAScan) {
  const Dims dims = {4, 8, 64, 64};
  const auto n = static_cast<size_t>(NumElements(dims));
  std::mt19937 rng(43);
  onnx::ModelProto m = testing::EmptyModel("compare");
  auto* g = m.mutable_graph();
  *g->add_input() = Info("x", onnx::TensorProto::FLOAT, dims);
  const auto yv = Random(n, rng);
  FillTensor(g->add_initializer(), "y", onnx::TensorProto::FLOAT, dims, yv);
  FillTensor(g->add_initializer(), "s", onnx::TensorProto::FLOAT, {}, {0.25});
  const std::vector<std::pair<std::string, std::vector<std::string>>> nodes = {
      {"Greater", {"x", "y"}},
      {"Less", {"s", "x"}},
      {"GreaterOrEqual", {"x", "s"}},
      {"Neg", {"x"}},
      {"Abs", {"y"}}};
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string out = "o" + std::to_string(k);
    const bool compare = nodes[k].second.size() == 2;
    *g->add_output() =
        Info(out, compare ? onnx::TensorProto::BOOL : onnx::TensorProto::FLOAT, dims);
    testing::AddNamedNode(g, nodes[k].first, nodes[k].second, out);
  }
  const auto xv = Random(n, rng);
  for (int threads : {1, 3}) {
    auto out = RunModel(m, InputOf(DType::kFloat32, dims, xv), threads);
    ASSERT_EQ(out.size(), nodes.size());
    for (size_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(xv[i]), y = static_cast<float>(yv[i]);
      const double want[] = {x > y ? 1.0 : 0.0, 0.25f < x ? 1.0 : 0.0, x >= 0.25f ? 1.0 : 0.0, -x,
                             std::fabs(y)};
      for (size_t k = 0; k < nodes.size(); ++k)
        ASSERT_EQ(out[k][i], want[k]) << nodes[k].first << " threads " << threads << " at " << i;
    }
  }
}

TEST(FastKernels, TopKSelectionAgainstAStableSort) {
  std::mt19937 rng(31);
  for (auto type : {onnx::TensorProto::FLOAT, onnx::TensorProto::DOUBLE})
    for (int64_t k : {1, 5, 100})
      for (int largest : {1, 0})
        for (bool nan : {false, true}) {
          const int64_t rows = 6, n = 1000;
          onnx::ModelProto m = testing::EmptyModel("topk");
          m.mutable_opset_import(0)->set_version(11);
          auto* g = m.mutable_graph();
          *g->add_input() = Info("x", type, {rows, n});
          *g->add_output() = Info("v", type, {rows, k});
          *g->add_output() = Info("i", onnx::TensorProto::INT64, {rows, k});
          testing::AddInt64Initializer(g, "k", {1}, {k});
          auto* node = testing::AddNamedNode(g, "TopK", {"x", "k"}, "v");
          node->add_output("i");
          testing::SetAttr(node, "largest", static_cast<int64_t>(largest));
          std::vector<double> x(static_cast<size_t>(rows * n));
          for (auto& v : x) v = static_cast<double>(static_cast<int>(rng() % 37) - 18) / 4;
          if (nan) x[static_cast<size_t>(n + 17)] = std::nan("");
          const DType dt = type == onnx::TensorProto::FLOAT ? DType::kFloat32 : DType::kFloat64;
          for (int threads : {1, 3}) {
            auto out = RunModel(m, InputOf(dt, {rows, n}, x), threads);
            ASSERT_EQ(out.size(), 2u);
            for (int64_t r = 0; r < rows; ++r) {
              std::vector<int64_t> idx(static_cast<size_t>(n));
              for (int64_t j = 0; j < n; ++j) idx[j] = j;
              const double* row = x.data() + r * n;
              std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
                if (std::isnan(row[a]) || std::isnan(row[b]))
                  return largest ? std::isnan(row[a]) && !std::isnan(row[b])
                                 : !std::isnan(row[a]) && std::isnan(row[b]);
                return largest ? row[a] > row[b] : row[a] < row[b];
              });
              for (int64_t j = 0; j < k; ++j) {
                const size_t at = static_cast<size_t>(r * k + j);
                ASSERT_EQ(out[1][at], static_cast<double>(idx[j]))
                    << "k " << k << " largest " << largest << " row " << r << " rank " << j;
                const double want = row[idx[j]];
                if (std::isnan(want))
                  EXPECT_TRUE(std::isnan(out[0][at]));
                else
                  EXPECT_EQ(out[0][at], want);
              }
            }
          }
        }
}

}  // namespace
}  // namespace kiln
