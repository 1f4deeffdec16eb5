// kiln quantize: calibration ranges, the QDQ model it writes (which kiln then runs on integer
// kernels), and the command line.
#include "quantize/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <tuple>

#include "cli_fixture.h"
#include "frontend/model_loader.h"
#include "frontend/npy.h"
#include "kernels/reference/reference_kernels.h"
#include "quantize/calibration.h"
#include "runtime/executor.h"
#include "support/file_io.h"
#include "test_models.h"

namespace kiln {
namespace {

using quantize::CalibrationMethod;
using quantize::RangeCollector;

// x[1, 3, 8, 8] -> Conv(8 channels, 3x3, pads 1) -> Relu -> MaxPool(2) -> Flatten
//   -> MatMul([128, 10]) -> Add(bias) -> y[1, 10].
onnx::ModelProto ConvNetModel(int64_t opset = 17, bool relu6 = false) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto values = [&](int64_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng) * scale;
    return v;
  };
  onnx::ModelProto m = testing::EmptyModel("convnet");
  m.mutable_opset_import(0)->set_version(opset);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 3, 8, 8});
  // Channel c's weights span c + 1 times the first's, so per-channel scales differ.
  std::vector<float> w = values(8 * 27, 1.0f);
  for (size_t i = 0; i < w.size(); ++i) w[i] *= static_cast<float>(i / 27 + 1);
  testing::AddFloatInitializer(g, "conv.w", {8, 3, 3, 3}, w);
  testing::AddFloatInitializer(g, "conv.b", {8}, values(8, 0.2f));
  testing::AddFloatInitializer(g, "fc.w", {128, 10}, values(1280, 0.3f));
  testing::AddFloatInitializer(g, "fc.b", {10}, values(10, 0.1f));
  testing::AddInt64Initializer(g, "flat.shape", {2}, {1, 128});
  testing::SetAttr(testing::AddNamedNode(g, "Conv", {"x", "conv.w", "conv.b"}, "conv"), "pads",
                   std::vector<int64_t>{1, 1, 1, 1});
  if (relu6) {  // Clip(0, 6): inputs from opset 11, attributes before
    auto* clip = testing::AddNamedNode(g, "Clip", {"conv"}, "relu");
    if (opset >= 11) {
      testing::AddFloatInitializer(g, "zero", {}, {0.0f});
      testing::AddFloatInitializer(g, "six", {}, {6.0f});
      clip->add_input("zero");
      clip->add_input("six");
    } else {
      testing::SetAttr(clip, "min", 0.0f);
      testing::SetAttr(clip, "max", 6.0f);
    }
  } else {
    testing::AddNamedNode(g, "Relu", {"conv"}, "relu");
  }
  auto* pool = testing::AddNamedNode(g, "MaxPool", {"relu"}, "pool");
  testing::SetAttr(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  testing::SetAttr(pool, "strides", std::vector<int64_t>{2, 2});
  testing::AddNamedNode(g, "Reshape", {"pool", "flat.shape"}, "flat");
  testing::AddNamedNode(g, "MatMul", {"flat", "fc.w"}, "mm");
  testing::AddNamedNode(g, "Add", {"mm", "fc.b"}, "y");
  *g->add_output() = testing::FloatInfo("y", {1, 10});
  return m;
}

std::vector<quantize::Sample> Samples(int n, uint32_t seed = 1, const Dims& dims = {1, 3, 8, 8}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<quantize::Sample> samples(n);
  for (auto& s : samples) {
    Tensor t(DType::kFloat32, dims);
    for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = u(rng);
    s.push_back(t);
  }
  return samples;
}

class QuantizeModelTest : public CliTest {
 public:
  using CliTest::file;
  using CliTest::Write;
  std::string WriteModel(const onnx::ModelProto& m, const std::string& name = "model.onnx") {
    Write(name, m.SerializeAsString());
    return file(name);
  }
  onnx::ModelProto Quantize(const std::string& path, const quantize::QuantizeOptions& o,
                            quantize::QuantizeSummary* summary = nullptr) {
    auto bytes = quantize::QuantizeModel(path, Samples(8), o, summary);
    EXPECT_TRUE(bytes.ok()) << bytes.status().message();
    onnx::ModelProto q;
    EXPECT_TRUE(bytes.ok() && q.ParseFromString(*bytes));
    return q;
  }
};

const onnx::TensorProto* Initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

const onnx::NodeProto* NodeReading(const onnx::ModelProto& m, const std::string& input) {
  for (const auto& n : m.graph().node())
    for (const auto& i : n.input())
      if (i == input) return &n;
  return nullptr;
}

// The requantization's formulas (one floor for the high product, a borrow and the last bit out
// for the shift, and both in one sum for right shifts) equal TFLite's as written: gemmlowp's nudge
// and truncating division, and RoundingDivideByPOT's mask and threshold.
TEST(Requantization, EqualsTflitesFormulas) {
  auto high_mul = [](int32_t a, int32_t b) -> int32_t {
    if (a == b && a == INT32_MIN) return INT32_MAX;
    const int64_t ab = static_cast<int64_t>(a) * b;
    const int64_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
    return static_cast<int32_t>((ab + nudge) / (static_cast<int64_t>(1) << 31));
  };
  auto divide_pot = [](int32_t x, int32_t e) -> int32_t {
    const int32_t mask = static_cast<int32_t>((static_cast<int64_t>(1) << e) - 1);
    const int32_t remainder = x & mask, threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
  };
  auto fixed = [&](int32_t acc, int32_t mult, int32_t shift, int32_t zp, int32_t lo, int32_t hi) {
    const int64_t wide =
        static_cast<int64_t>(acc) * (static_cast<int64_t>(1) << std::max(shift, 0));
    const int32_t sat = static_cast<int32_t>(std::clamp<int64_t>(wide, INT32_MIN, INT32_MAX));
    const int64_t v =
        static_cast<int64_t>(divide_pot(high_mul(sat, mult), std::max(-shift, 0))) + zp;
    return static_cast<int32_t>(std::clamp<int64_t>(v, lo, hi));
  };
  std::mt19937 rng(3);
  std::vector<int32_t> accs = {INT32_MIN, INT32_MIN + 1, -(1 << 30),    -3,       -2, -1, 0, 1, 2,
                               3,         1 << 30,       INT32_MAX - 1, INT32_MAX};
  std::vector<int32_t> mults = {0, 1, 1 << 30, (1 << 30) + 1, INT32_MAX - 1, INT32_MAX};
  for (int i = 0; i < 400; ++i) {
    accs.push_back(static_cast<int32_t>(rng()));
    accs.push_back(static_cast<int32_t>(rng() % 20001) - 10000);
    mults.push_back(static_cast<int32_t>(rng() >> 1));
  }
  for (int32_t a : accs)
    for (int32_t b : mults) {
      ASSERT_EQ(kiln_requant_high_mul(a, b), high_mul(a, b)) << a << " " << b;
      for (int32_t e = 0; e <= 31; ++e)
        ASSERT_EQ(kiln_requant_divide_pot(high_mul(a, b), e), divide_pot(high_mul(a, b), e))
            << a << " " << b << " " << e;
      for (int32_t shift : {-31, -30, -12, -7, -2, -1, 0, 1, 3})
        for (auto [zp, lo, hi] : {std::tuple{-5, -128, 127}, {0, 0, 255}, {130, 130, 255}}) {
          const int32_t want = fixed(a, b, shift, zp, lo, hi);
          ASSERT_EQ(kiln_requant_fixed(a, b, shift, zp, lo, hi), want)
              << a << " " << b << " " << shift << " " << zp;
          if (shift <= -2) {
            ASSERT_EQ(kiln_requant_right(a, b, shift, zp, lo, hi), want)
                << a << " " << b << " " << shift << " " << zp;
          }
        }
    }
}

TEST(Calibration, MinMaxIsTheExtremes) {
  RangeCollector c;
  const std::vector<float> a = {0.5f, -2.0f, 3.0f}, b = {NAN, 7.5f, INFINITY};
  c.ObserveMinMax(a.data(), 3);
  c.ObserveMinMax(b.data(), 3);
  EXPECT_FALSE(c.StartHistogram(CalibrationMethod::kMinMax));
  const quantize::Range r = c.Result(CalibrationMethod::kMinMax, 0);
  EXPECT_EQ(r.lo, -2.0f);
  EXPECT_EQ(r.hi, 7.5f);
}

TEST(Calibration, PercentileLeavesOutRareOutliers) {
  std::vector<float> x;
  for (int i = 0; i < 100000; ++i) x.push_back(static_cast<float>(i % 1000) / 1000.0f);
  x.push_back(500.0f);
  x.push_back(-300.0f);
  RangeCollector c;
  c.ObserveMinMax(x.data(), static_cast<int64_t>(x.size()));
  ASSERT_TRUE(c.StartHistogram(CalibrationMethod::kPercentile));
  c.ObserveHistogram(x.data(), static_cast<int64_t>(x.size()));
  const quantize::Range r = c.Result(CalibrationMethod::kPercentile, 99.99);
  EXPECT_NEAR(r.lo, 0.0f, 0.5f);
  EXPECT_NEAR(r.hi, 1.0f, 0.5f);
}

TEST(Calibration, EntropyClipsALongTailButNotAUniformSpread) {
  std::mt19937 rng(3);
  std::exponential_distribution<float> tail(4.0f);
  std::vector<float> x(200000);
  for (float& v : x) v = tail(rng);
  RangeCollector c;
  c.ObserveMinMax(x.data(), static_cast<int64_t>(x.size()));
  ASSERT_TRUE(c.StartHistogram(CalibrationMethod::kEntropy));
  c.ObserveHistogram(x.data(), static_cast<int64_t>(x.size()));
  const quantize::Range r = c.Result(CalibrationMethod::kEntropy, 0);
  const float max = *std::max_element(x.begin(), x.end());
  EXPECT_EQ(r.lo, 0.0f);  // never negative: one-sided
  EXPECT_LT(r.hi, max * 0.9f);
  EXPECT_GT(r.hi, 0.5f);  // well above the median (0.17)

  const std::vector<double> uniform(RangeCollector::kBins, 10.0);
  EXPECT_EQ(quantize::EntropyThresholdBins(uniform, 128), RangeCollector::kBins);
}

TEST(Calibration, ParsesTheMethods) {
  EXPECT_EQ(*quantize::ParseCalibrationMethod("entropy"), CalibrationMethod::kEntropy);
  EXPECT_FALSE(quantize::ParseCalibrationMethod("kl").ok());
}

TEST_F(QuantizeModelTest, WritesQdqThatKilnRunsOnIntegers) {
  const std::string path = WriteModel(ConvNetModel());
  quantize::QuantizeSummary s;
  const onnx::ModelProto q = Quantize(path, {}, &s);
  EXPECT_EQ(s.weights, 2);
  EXPECT_EQ(s.per_channel_weights, 2);
  EXPECT_EQ(s.biases, 2);  // Conv's, and the Add's on the MatMul (a dense layer)
  EXPECT_EQ(s.constants, 0);
  // x, relu (Conv's result is read only by the Relu), pool, flat, y (not the MatMul's result).
  EXPECT_EQ(s.activations, 5);

  const onnx::TensorProto* w = Initializer(q, "conv.w_quantized");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data_type(), onnx::TensorProto::INT8);
  ASSERT_NE(Initializer(q, "conv.w_scale"), nullptr);
  EXPECT_EQ(Initializer(q, "conv.w_scale")->dims(0), 8);
  ASSERT_NE(Initializer(q, "conv.b_quantized"), nullptr);
  EXPECT_EQ(Initializer(q, "conv.b_quantized")->data_type(), onnx::TensorProto::INT32);
  EXPECT_EQ(Initializer(q, "conv.w"), nullptr);  // replaced by its DequantizeLinear
  // The Conv writes straight into the Relu; the Relu's result is quantized.
  ASSERT_NE(NodeReading(q, "conv"), nullptr);
  EXPECT_EQ(NodeReading(q, "conv")->op_type(), "Relu");
  EXPECT_EQ(NodeReading(q, "relu_QuantizeLinear_Input")->op_type(), "QuantizeLinear");
  ASSERT_NE(Initializer(q, "fc.b_quantized"), nullptr);
  EXPECT_EQ(Initializer(q, "fc.b_quantized")->data_type(), onnx::TensorProto::INT32);
  EXPECT_EQ(NodeReading(q, "mm")->op_type(), "Add");
  EXPECT_EQ(q.graph().output(0).name(), "y");

  const std::string qpath = file("q.onnx");
  Write("q.onnx", q.SerializeAsString());
  auto model = frontend::LoadModel(qpath);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto exec = runtime::Executor::Create(std::move(*model));
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  std::set<std::string> ops;
  for (const ir::Node& n : (*exec)->model().graph->nodes) ops.insert(n.op_type);
  EXPECT_TRUE(ops.count("QLinearConv"));
  EXPECT_TRUE(ops.count("QLinearMatMul"));

  auto all_errors = quantize::CompareOutputs({qpath}, {{path}}, Samples(4, 9), 1);
  ASSERT_TRUE(all_errors.ok()) << all_errors.status().message();
  const std::vector<quantize::OutputError>* errors = &(*all_errors)[0];
  ASSERT_EQ(errors->size(), 1u);
  EXPECT_EQ((*errors)[0].name, "y");
  EXPECT_GT((*errors)[0].rel_l2, 0.0);
  EXPECT_LT((*errors)[0].rel_l2, 0.05);
}

TEST_F(QuantizeModelTest, AClipAfterAConvRunsInsideTheIntegerConv) {
  for (int64_t opset : {10, 17}) {
    const std::string path = WriteModel(ConvNetModel(opset, true));
    const onnx::ModelProto q = Quantize(path, {});
    ASSERT_NE(NodeReading(q, "conv"), nullptr);
    EXPECT_EQ(NodeReading(q, "conv")->op_type(), "Clip");
    Write("q.onnx", q.SerializeAsString());
    auto model = frontend::LoadModel(file("q.onnx"));
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto exec = runtime::Executor::Create(std::move(*model));
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    std::set<std::string> ops;
    for (const ir::Node& n : (*exec)->model().graph->nodes) ops.insert(n.op_type);
    EXPECT_TRUE(ops.count("QLinearConv")) << opset;
    EXPECT_FALSE(ops.count("Clip")) << opset;
    auto all_errors = quantize::CompareOutputs({file("q.onnx")}, {{path}}, Samples(4, 9), 1);
    ASSERT_TRUE(all_errors.ok()) << all_errors.status().message();
    const std::vector<quantize::OutputError>* errors = &(*all_errors)[0];
    EXPECT_LT((*errors)[0].rel_l2, 0.05);
  }
}

TEST_F(QuantizeModelTest, WeightsComeBackWithinHalfAStepPerChannel) {
  const onnx::ModelProto m = ConvNetModel();
  const onnx::ModelProto q = Quantize(WriteModel(m), {});
  const std::string& wq = Initializer(q, "conv.w_quantized")->raw_data();
  const onnx::TensorProto* scale = Initializer(q, "conv.w_scale");
  std::vector<float> scales(8);
  std::memcpy(scales.data(), scale->raw_data().data(), 32);
  const auto& w = m.graph().initializer(0).float_data();
  for (int i = 0; i < w.size(); ++i) {
    const float s = scales[i / 27];
    EXPECT_LE(std::fabs(static_cast<int8_t>(wq[i]) * s - w[i]), s / 2 * 1.0001f) << i;
    EXPECT_GE(static_cast<int8_t>(wq[i]), -127);
  }
  EXPECT_NEAR(scales[7] / scales[0], 8.0, 1.5);  // channel 7's weights span 8 times channel 0's
}

TEST_F(QuantizeModelTest, IsDeterministicAndTakesEveryMethodAndType) {
  const std::string path = WriteModel(ConvNetModel());
  for (auto method :
       {CalibrationMethod::kMinMax, CalibrationMethod::kPercentile, CalibrationMethod::kEntropy}) {
    quantize::QuantizeOptions o;
    o.method = method;
    o.activation_type = DType::kUInt8;
    auto a = quantize::QuantizeModel(path, Samples(6), o, nullptr);
    auto b = quantize::QuantizeModel(path, Samples(6), o, nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    onnx::ModelProto q;
    ASSERT_TRUE(q.ParseFromString(*a));
    EXPECT_EQ(Initializer(q, "x_zero_point")->data_type(), onnx::TensorProto::UINT8);
    Write("q.onnx", *a);
    auto all_errors = quantize::CompareOutputs({file("q.onnx")}, {{path}}, Samples(2, 9), 1);
    ASSERT_TRUE(all_errors.ok()) << all_errors.status().message();
    const std::vector<quantize::OutputError>* errors = &(*all_errors)[0];
    EXPECT_LT((*errors)[0].rel_l2, 0.1) << static_cast<int>(method);
  }
}

TEST_F(QuantizeModelTest, OldOpsetsGetWeightsPerTensorAndANote) {
  quantize::QuantizeSummary s;
  const onnx::ModelProto q = Quantize(WriteModel(ConvNetModel(11)), {}, &s);
  EXPECT_EQ(s.weights, 2);
  EXPECT_EQ(s.per_channel_weights, 0);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("opset 13"), std::string::npos);
  EXPECT_EQ(Initializer(q, "conv.w_scale")->dims_size(), 0);

  auto too_old =
      quantize::QuantizeModel(WriteModel(ConvNetModel(9), "old.onnx"), Samples(1), {}, nullptr);
  ASSERT_FALSE(too_old.ok());
  EXPECT_NE(too_old.status().message().find("opset 10"), std::string::npos);
}

TEST_F(QuantizeModelTest, RefusesAModelAlreadyQuantized) {
  const std::string path = WriteModel(ConvNetModel());
  auto bytes = quantize::QuantizeModel(path, Samples(2), {}, nullptr);
  ASSERT_TRUE(bytes.ok());
  Write("q.onnx", *bytes);
  auto again = quantize::QuantizeModel(file("q.onnx"), Samples(2), {}, nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already quantized"), std::string::npos);
}

TEST_F(QuantizeModelTest, LoadsSamplesFromFilesFoldersAndBundles) {
  const std::string path = WriteModel(ConvNetModel());
  auto model = frontend::LoadModel(path);
  ASSERT_TRUE(model.ok());
  const auto samples = Samples(3);
  fs::create_directories(dir_ / "files");
  for (int i = 0; i < 3; ++i) {
    Write("files/s" + std::to_string(i) + ".npy", frontend::SerializeNpy(samples[i][0]));
    fs::create_directories(dir_ / "folders" / std::to_string(i));
    Write("folders/" + std::to_string(i) + "/x.npy", frontend::SerializeNpy(samples[i][0]));
  }
  for (const std::string sub : {"files", "folders"}) {
    auto loaded = quantize::LoadSamples(file(sub), *model->graph);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    ASSERT_EQ(loaded->size(), 3u);
    EXPECT_EQ(std::memcmp((*loaded)[2][0].raw(), samples[2][0].raw(), samples[2][0].nbytes()), 0);
  }
  ASSERT_EQ(RunKiln("bundle " + path + " --random 2 -o " + file("b.bpte")).code, 0);
  auto bundled = quantize::LoadSamples(file("b.bpte"), *model->graph);
  ASSERT_TRUE(bundled.ok()) << bundled.status().message();
  EXPECT_EQ(bundled->size(), 2u);

  Tensor wrong(DType::kFloat32, {1, 3, 8, 9});
  fs::create_directories(dir_ / "bad");
  Write("bad/a.npy", frontend::SerializeNpy(wrong));
  auto bad = quantize::LoadSamples(file("bad"), *model->graph);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("do not fit input 'x'"), std::string::npos);
  fs::create_directories(dir_ / "empty");
  EXPECT_FALSE(quantize::LoadSamples(file("empty"), *model->graph).ok());
}

// The float outputs a program printed, one "bits 0x%08lx" per line (newlib's printf has no %a).
std::vector<float> PrintedFloats(const std::string& out) {
  std::vector<float> v;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("bits ", 0) != 0) continue;
    const uint32_t bits = static_cast<uint32_t>(std::strtoul(line.c_str() + 5, nullptr, 16));
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  return v;
}

// n values uniform in [-0.5, 0.5).
std::vector<float> UniformValues(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// x[2, 4, 5, 5] -> Conv 1x1 in 2 groups (6 channels) -> Relu -> Conv 1x1 (4 channels) -> y: the
// kernels' pointwise path, with a batch, groups and a tail of pixels past the last four.
onnx::ModelProto PointwiseModel() {
  std::mt19937 rng(8);
  auto values = [&](int64_t n) { return UniformValues(rng, n); };
  onnx::ModelProto m = testing::EmptyModel("pointwise");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {2, 4, 5, 5});
  testing::AddFloatInitializer(g, "w1", {6, 2, 1, 1}, values(12));
  testing::AddFloatInitializer(g, "b1", {6}, values(6));
  testing::AddFloatInitializer(g, "w2", {4, 6, 1, 1}, values(24));
  testing::SetAttr(testing::AddNamedNode(g, "Conv", {"x", "w1", "b1"}, "c1"), "group", 2);
  testing::AddNamedNode(g, "Relu", {"c1"}, "r1");
  testing::AddNamedNode(g, "Conv", {"r1", "w2"}, "y");
  *g->add_output() = testing::FloatInfo("y", {2, 4, 5, 5});
  return m;
}

// x[1, 1, 9, 7] -> Conv 4x3, stride 2, asymmetric pads -> Relu -> depthwise Conv 3x3, pads 1
// -> y[1, 4, 5, 3]: the kernels' one-input-channel taps at every image border.
onnx::ModelProto StridedModel() {
  std::mt19937 rng(11);
  auto values = [&](int64_t n) { return UniformValues(rng, n); };
  onnx::ModelProto m = testing::EmptyModel("strided");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 1, 9, 7});
  testing::AddFloatInitializer(g, "w1", {4, 1, 4, 3}, values(48));
  testing::AddFloatInitializer(g, "w2", {4, 1, 3, 3}, values(36));
  testing::AddFloatInitializer(g, "b2", {4}, values(4));
  auto* c1 = testing::AddNamedNode(g, "Conv", {"x", "w1"}, "c1");
  testing::SetAttr(c1, "strides", std::vector<int64_t>{2, 2});
  testing::SetAttr(c1, "pads", std::vector<int64_t>{1, 0, 2, 1});
  testing::AddNamedNode(g, "Relu", {"c1"}, "r1");
  auto* c2 = testing::AddNamedNode(g, "Conv", {"r1", "w2", "b2"}, "y");
  testing::SetAttr(c2, "group", 4);
  testing::SetAttr(c2, "pads", std::vector<int64_t>{1, 1, 1, 1});
  *g->add_output() = testing::FloatInfo("y", {1, 4, 5, 3});
  return m;
}

// x[2, 3, 7, 5] -> Conv 3x3, pads 1 (5 channels) -> Relu -> GlobalAveragePool -> Flatten
// -> y[2, 5]: the integer pool, over a batch and an odd number of channels.
onnx::ModelProto PooledModel() {
  std::mt19937 rng(12);
  auto values = [&](int64_t n) { return UniformValues(rng, n); };
  onnx::ModelProto m = testing::EmptyModel("pooled");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {2, 3, 7, 5});
  testing::AddFloatInitializer(g, "w", {5, 3, 3, 3}, values(135));
  testing::AddFloatInitializer(g, "b", {5}, values(5));
  auto* c = testing::AddNamedNode(g, "Conv", {"x", "w", "b"}, "c");
  testing::SetAttr(c, "pads", std::vector<int64_t>{1, 1, 1, 1});
  testing::AddNamedNode(g, "Relu", {"c"}, "r");
  testing::AddNamedNode(g, "GlobalAveragePool", {"r"}, "p");
  testing::AddNamedNode(g, "Flatten", {"p"}, "y");
  *g->add_output() = testing::FloatInfo("y", {2, 5});
  return m;
}

// x[1, 3, 6, 6] -> Conv 3x3, pads 1 (4 channels) -> Relu -> r; Conv 3x3, pads 1 (r) -> Add(r)
// -> Relu -> y[1, 4, 6, 6]: a residual block, the integer Add.
onnx::ModelProto ResidualModel() {
  std::mt19937 rng(14);
  auto values = [&](int64_t n) { return UniformValues(rng, n); };
  onnx::ModelProto m = testing::EmptyModel("residual");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 3, 6, 6});
  testing::AddFloatInitializer(g, "w1", {4, 3, 3, 3}, values(108));
  testing::AddFloatInitializer(g, "w2", {4, 4, 3, 3}, values(144));
  for (auto [in, w, out] : {std::tuple{"x", "w1", "c1"}, {"r1", "w2", "c2"}})
    testing::SetAttr(testing::AddNamedNode(g, "Conv", {in, w}, out), "pads",
                     std::vector<int64_t>{1, 1, 1, 1});
  testing::AddNamedNode(g, "Relu", {"c1"}, "r1");
  testing::AddNamedNode(g, "Add", {"c2", "r1"}, "sum");
  testing::AddNamedNode(g, "Relu", {"sum"}, "y");
  *g->add_output() = testing::FloatInfo("y", {1, 4, 6, 6});
  return m;
}

// x[2, 6] -> Gemm(transB, bias; 5 outputs) -> Relu -> Gemm(3 outputs) -> y[2, 3]: Gemm as an
// integer matmul with its bias, its weights transposed or not.
onnx::ModelProto GemmModel() {
  std::mt19937 rng(15);
  auto values = [&](int64_t n) { return UniformValues(rng, n); };
  onnx::ModelProto m = testing::EmptyModel("gemm");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {2, 6});
  testing::AddFloatInitializer(g, "w1", {5, 6}, values(30));
  testing::AddFloatInitializer(g, "b1", {5}, values(5));
  testing::AddFloatInitializer(g, "w2", {5, 3}, values(15));
  testing::SetAttr(testing::AddNamedNode(g, "Gemm", {"x", "w1", "b1"}, "g1"), "transB", 1);
  testing::AddNamedNode(g, "Relu", {"g1"}, "r1");
  testing::AddNamedNode(g, "Gemm", {"r1", "w2"}, "y");
  *g->add_output() = testing::FloatInfo("y", {2, 3});
  return m;
}

// x[2, 3, 10] -> MatMul(6 outputs) + bias -> Relu -> MatMul(5 outputs) + bias -> y[2, 3, 5]: dense
// layers as Keras and torch export them, as integer matmuls with their biases (K and N not
// multiples of four, rows over a batch axis).
onnx::ModelProto DenseModel() {
  std::mt19937 rng(16);
  auto values = [&](int64_t n) { return UniformValues(rng, n); };
  onnx::ModelProto m = testing::EmptyModel("dense");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {2, 3, 10});
  testing::AddFloatInitializer(g, "w1", {10, 6}, values(60));
  testing::AddFloatInitializer(g, "b1", {6}, values(6));
  testing::AddFloatInitializer(g, "w2", {6, 5}, values(30));
  testing::AddFloatInitializer(g, "b2", {5}, values(5));
  testing::AddNamedNode(g, "MatMul", {"x", "w1"}, "m1");
  testing::AddNamedNode(g, "Add", {"m1", "b1"}, "a1");
  testing::AddNamedNode(g, "Relu", {"a1"}, "r1");
  testing::AddNamedNode(g, "MatMul", {"r1", "w2"}, "m2");
  testing::AddNamedNode(g, "Add", {"b2", "m2"}, "y");
  *g->add_output() = testing::FloatInfo("y", {2, 3, 5});
  return m;
}

// The generated C of a QDQ model runs Conv and MatMul on int8 (int8 weights in flash) and gives
// the host executor's outputs bit for bit, built with gcc and on the emulated Cortex-M4, where
// the instruction counter counts the same on every run.
void ExpectIntegerCMatchesTheHost(QuantizeModelTest& t, const onnx::ModelProto& m,
                                  const std::string& flags) {
  Dims in;
  for (const auto& d : m.graph().input(0).type().tensor_type().shape().dim())
    in.push_back(d.dim_value());
  const std::string path = t.WriteModel(m);
  ASSERT_EQ(RunKiln("quantize " + path + " --random 4 " + flags + " -o " + t.file("q.onnx")).code,
            0);
  for (const std::string cpu : {"generic", "cortex-m4"}) {
    Result r = RunKiln("compile " + t.file("q.onnx") + " --target c --name net --cpu " + cpu +
                       " --out " + t.file(cpu));
    ASSERT_EQ(r.code, 0) << r.err;
    auto c = ReadFile(t.file(cpu + "/net.c"));
    ASSERT_TRUE(c.ok());
    if (c->find("QLinearConv") != std::string::npos) {
      EXPECT_NE(c->find("kiln_qconv_packed_"), std::string::npos);
    }
    if (c->find("(QLinearMatMul)") != std::string::npos) {
      EXPECT_NE(c->find("kiln_qmatmul_packed_run("), std::string::npos);
    }
    EXPECT_EQ(c->find("kiln_qconv_run("), std::string::npos);
  }
  Tensor x(DType::kFloat32, in);
  for (int64_t i = 0; i < x.size(); ++i)
    x.data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  auto model = frontend::LoadModel(t.file("q.onnx"));
  ASSERT_TRUE(model.ok());
  auto exec = runtime::Executor::Create(std::move(*model));
  ASSERT_TRUE(exec.ok());
  std::vector<Tensor> host;
  ASSERT_TRUE((*exec)->Run({x}, &host).ok());
  const std::vector<float> want(host[0].data<float>(), host[0].data<float>() + host[0].size());
  const std::string n = std::to_string(x.size()), k = std::to_string(host[0].size());
  t.Write("main.c",
          "#include <stdio.h>\n#include <string.h>\n#include \"net.h\"\n"
          "static float x[" +
              n + "], y[" + k +
              "];\n"
              "static uint8_t arena[KILN_NET_WORKSPACE_SIZE] __attribute__((aligned(16)));\n"
              "int main(void) {\n"
              "  struct kiln_net_inputs in = {x};\n  struct kiln_net_outputs out = {y};\n"
              "  struct kiln_net_workspace ws = {arena};\n  int i;\n"
              "  for (i = 0; i < " +
              n +
              "; ++i) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;\n"
              "  if (kiln_net_run(&in, &out, &ws) != KILN_OK) return 2;\n"
              "  for (i = 0; i < " +
              k +
              "; ++i) {\n"
              "    uint32_t bits;\n    memcpy(&bits, &y[i], 4);\n"
              "    printf(\"bits 0x%08lx\\n\", (unsigned long)bits);\n  }\n  return 0;\n}\n");
  auto sources = [&](const std::string& cpu) {
    return t.file(cpu + "/net.c") + " " + t.file(cpu + "/net_params.c") + " " + t.file("main.c") +
           " -I" + t.file(cpu);
  };
  for (const std::string cc : {"gcc", "clang"}) {  // the portable kernels
    auto [rc, out] = Sh(cc + " -std=c99 -Wall -Wextra -Werror -pedantic -O2 -o " + t.file("main") +
                        " " + sources("generic") + " -lm && " + t.file("main"));
    ASSERT_EQ(rc, 0) << out;
    EXPECT_EQ(PrintedFloats(out), want) << flags << " " << cc;
  }
  // Generated for a Cortex-M4, the convolutions need a compiler targeting one.
  auto [rc, out] = Sh("gcc -std=c99 -c -o " + t.file("m4.o") + " " + t.file("cortex-m4/net.c"));
  if (ReadFile(t.file("cortex-m4/net.c"))->find("kiln_qconv_packed_") != std::string::npos) {
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("compile it with -mcpu=cortex-m4"), std::string::npos) << out;
  }
#ifdef KILN_CORTEX_M4_RUN
  for (const std::string cpu : {"generic", "cortex-m4"}) {  // the DSP extension's, and portable
    std::string counts[2];
    for (std::string& count : counts) {
      std::tie(rc, out) = Sh(std::string(KILN_CORTEX_M4_RUN) +
                             " --count-instructions --timeout 300 -- " + sources(cpu));
      ASSERT_EQ(rc, 0) << out;
      EXPECT_EQ(PrintedFloats(out), want) << flags << " " << cpu;
      const size_t at = out.find("kiln instructions: ");
      ASSERT_NE(at, std::string::npos) << out;
      count = out.substr(at, out.find('\n', at) - at);
    }
    EXPECT_EQ(counts[0], counts[1]);
  }
#endif
}

TEST_F(QuantizeModelTest, IntegerCMatchesTheHostBitForBit) {
  ExpectIntegerCMatchesTheHost(*this, ConvNetModel(), "");
  ExpectIntegerCMatchesTheHost(*this, ConvNetModel(17, true), "--activations uint8 --per-tensor");
  ExpectIntegerCMatchesTheHost(*this, PointwiseModel(), "");
  ExpectIntegerCMatchesTheHost(*this, PointwiseModel(), "--activations uint8");
  ExpectIntegerCMatchesTheHost(*this, StridedModel(), "");
  ExpectIntegerCMatchesTheHost(*this, StridedModel(), "--activations uint8 --per-tensor");
  ExpectIntegerCMatchesTheHost(*this, PooledModel(), "");
  ExpectIntegerCMatchesTheHost(*this, PooledModel(), "--activations uint8");
  ExpectIntegerCMatchesTheHost(*this, ResidualModel(), "");
  ExpectIntegerCMatchesTheHost(*this, ResidualModel(), "--activations uint8");
  ExpectIntegerCMatchesTheHost(*this, GemmModel(), "");
  ExpectIntegerCMatchesTheHost(*this, DenseModel(), "");
  ExpectIntegerCMatchesTheHost(*this, DenseModel(), "--activations uint8 --per-tensor");
}

// fuse-qdq runs Q(GlobalAveragePool(DQ(x))), Q(Add(DQ(a), DQ(b))), Q(Gemm(DQ(x), DQ(w), b)) and
// Q(Add(MatMul(DQ(x), DQ(w)), b)) as integer ops, near the float model.
TEST_F(QuantizeModelTest, PoolsAddsAndGemmsRunOnIntegers) {
  for (auto [model, op, fused, dims] :
       {std::tuple{PooledModel(), "GlobalAveragePool", "QLinearGlobalAveragePool",
                   Dims{2, 3, 7, 5}},
        std::tuple{ResidualModel(), "Add", "QLinearAdd", Dims{1, 3, 6, 6}},
        std::tuple{GemmModel(), "Gemm", "QLinearMatMul", Dims{2, 6}},
        std::tuple{DenseModel(), "Add", "QLinearMatMul", Dims{2, 3, 10}}}) {
    const std::string path = WriteModel(model);
    ASSERT_EQ(RunKiln("quantize " + path + " --random 8 -o " + file("q.onnx")).code, 0);
    auto loaded = frontend::LoadModel(file("q.onnx"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    auto exec = runtime::Executor::Create(std::move(*loaded));
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    std::set<std::string> ops;
    for (const ir::Node& n : (*exec)->model().graph->nodes) ops.insert(n.op_type);
    EXPECT_TRUE(ops.count(fused)) << op;
    EXPECT_FALSE(ops.count(op)) << op;
    auto errors = quantize::CompareOutputs({file("q.onnx")}, {{path}}, Samples(4, 3, dims), 1);
    ASSERT_TRUE(errors.ok()) << errors.status().message();
    EXPECT_LT((*errors)[0][0].rel_l2, 0.05) << op;
  }
}

TEST_F(QuantizeModelTest, CommandLine) {
  const std::string path = WriteModel(ConvNetModel());
  Result r = RunKiln("quantize " + path + " --random 4 --method percentile -o " + file("q.onnx"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("quantized 2 weights (2 per channel), 2 biases"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("output 'y': vs float max |err|"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(file("q.onnx")));
  EXPECT_EQ(RunKiln("run " + file("q.onnx") + " --output-dir " + file("out")).code, 0);

  fs::create_directories(dir_ / "cal");
  for (const auto& s : Samples(2)) {
    static int k = 0;
    Write("cal/" + std::to_string(k++) + ".npy", frontend::SerializeNpy(s[0]));
  }
  r = RunKiln("quantize " + path + " --calibration " + file("cal") +
              " --per-tensor --activations uint8 -o " + file("q2.onnx"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(0 per channel)"), std::string::npos) << r.out;

  for (const std::string& bad :
       {std::string("quantize ") + path + " -o " + file("x.onnx"),
        "quantize " + path + " --random 2 --calibration " + file("cal") + " -o " + file("x.onnx"),
        "quantize " + file("q.onnx") + " --random 2 -o " + file("x.onnx"),
        "quantize " + path + " --calibration " + file("nothing") + " -o " + file("x.onnx"),
        "quantize " + path + " --random 2 --method kl -o " + file("x.onnx")}) {
    r = RunKiln(bad);
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << ": " << r.err;
  }
}

}  // namespace
}  // namespace kiln
