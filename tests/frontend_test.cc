#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/json_import.h"
#include "frontend/model_loader.h"
#include "frontend/npy.h"
#include "frontend/onnx_import.h"
#include "frontend/safetensors.h"
#include "support/file_io.h"
#include "test_models.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("kiln_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

void Write(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(WriteFile(path, bytes).ok());
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8, DType::kInt64,
                  DType::kUInt16, DType::kBool}) {
    Tensor x(t, {2, 3});
    for (size_t i = 0; i < x.nbytes(); ++i) static_cast<uint8_t*>(x.raw())[i] = i % 2;
    std::string bytes = frontend::SerializeNpy(x);
    auto y = frontend::ParseNpy(bytes.data(), bytes.size(), "x.npy");
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(y->dtype(), t);
    EXPECT_EQ(y->dims(), x.dims());
    EXPECT_EQ(std::memcmp(y->raw(), x.raw(), x.nbytes()), 0);
  }
  Tensor scalar(DType::kFloat32, {});
  std::string bytes = frontend::SerializeNpy(scalar);
  auto y = frontend::ParseNpy(bytes.data(), bytes.size(), "s.npy");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->rank(), 0);
}

// NumPy has no 8-bit floats: their values are written as float32, exactly.
TEST(Npy, WritesEightBitFloatsAsTheirFloat32Values) {
  Tensor x(DType::kFloat8E5M2, {4});
  const uint8_t codes[] = {0x3C, 0xC2, 0x7B, 0x7C};  // 1, -3, 57344, inf
  std::memcpy(x.raw(), codes, 4);
  std::string bytes = frontend::SerializeNpy(x);
  auto y = frontend::ParseNpy(bytes.data(), bytes.size(), "x.npy");
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y->dtype(), DType::kFloat32);
  EXPECT_EQ(y->data<float>()[0], 1.0f);
  EXPECT_EQ(y->data<float>()[1], -3.0f);
  EXPECT_EQ(y->data<float>()[2], 57344.0f);
  EXPECT_TRUE(std::isinf(y->data<float>()[3]));
}

TEST(Npy, RejectsMalformedFiles) {
  Tensor x(DType::kFloat32, {4});
  std::string good = frontend::SerializeNpy(x);
  auto check = [](const std::string& bytes, const std::string& expect) {
    auto r = frontend::ParseNpy(bytes.data(), bytes.size(), "in.npy");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  };
  check("PK\x03\x04 not numpy", "bad magic");
  check(good.substr(0, good.size() - 3), "expected 16");
  check(good.substr(0, 12), "truncated");
  std::string bad_type = good;
  bad_type.replace(bad_type.find("<f4"), 3, "<c8");
  check(bad_type, "unsupported .npy dtype");
}

TEST(Safetensors, ValidatesHeaderAndOffsets) {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> ts = {{"a", Tensor(DType::kFloat32, {3})},
                                                    {"b", Tensor(DType::kInt64, {2, 2})}};
  std::vector<std::pair<size_t, size_t>> offsets;
  ASSERT_TRUE(frontend::WriteSafetensors(dir.file("w.safetensors"), ts, &offsets).ok());
  auto st = frontend::SafetensorsFile::Open(dir.file("w.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->entries().at("b").dims, (Dims{2, 2}));
  EXPECT_EQ(st->entries().at("b").begin, offsets[1].first);
  // The 8-bit floats under safetensors' names (F8_E4M3 is the FN kind).
  ts = {{"e4", Tensor(DType::kFloat8E4M3FN, {3})}, {"e5", Tensor(DType::kFloat8E5M2, {2})}};
  ASSERT_TRUE(frontend::WriteSafetensors(dir.file("f8.safetensors"), ts, &offsets).ok());
  const std::string f8 = *ReadFile(dir.file("f8.safetensors"));
  EXPECT_NE(f8.find("\"F8_E4M3\""), std::string::npos);
  EXPECT_NE(f8.find("\"F8_E5M2\""), std::string::npos);
  st = frontend::SafetensorsFile::Open(dir.file("f8.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->entries().at("e4").dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(st->entries().at("e5").dtype, DType::kFloat8E5M2);

  auto expect_error = [&](const std::string& bytes, const std::string& what) {
    Write(dir.file("bad.safetensors"), bytes);
    auto r = frontend::SafetensorsFile::Open(dir.file("bad.safetensors"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  auto with_header = [](const std::string& h, size_t data) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
    return s + h + std::string(data, '\0');
  };
  expect_error("abc", "shorter than its header");
  expect_error(std::string("\xff\xff\xff\xff\0\0\0\0", 8) + "{}", "exceeds the file size");
  expect_error(with_header("{not json", 0), "not valid JSON");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
               "outside");
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", 8),
               "its shape needs 16");
  expect_error(with_header(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1),
               "unsupported dtype");
}

TEST(Onnx, LoadsAndReportsMalformedFiles) {
  TempDir dir;
  std::string bytes = testing::AddReluModel().SerializeAsString();
  Write(dir.file("m.onnx"), bytes);
  auto m = frontend::LoadOnnxModel(dir.file("m.onnx"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->graph->nodes.size(), 2u);
  EXPECT_EQ(m->OpsetFor(""), 17);

  Write(dir.file("trunc.onnx"), bytes.substr(0, bytes.size() / 2));
  auto t = frontend::LoadOnnxModel(dir.file("trunc.onnx"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("trunc.onnx"), std::string::npos);

  Write(dir.file("junk.onnx"), "\x93NUMPY this is not protobuf at all");
  EXPECT_FALSE(frontend::LoadOnnxModel(dir.file("junk.onnx")).ok());
  EXPECT_FALSE(frontend::LoadOnnxModel(dir.file("missing.onnx")).ok());
}

TEST(Onnx, RejectsUndefinedInputsAndCycles) {
  TempDir dir;
  auto m = testing::AddReluModel();
  m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  Write(dir.file("undef.onnx"), m.SerializeAsString());
  auto r = frontend::LoadOnnxModel(dir.file("undef.onnx"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'nowhere' is not defined"), std::string::npos)
      << r.status().message();

  auto c = testing::AddReluModel();
  c.mutable_graph()->mutable_node(0)->set_input(0, "y");  // add reads relu's output: a cycle
  Write(dir.file("cycle.onnx"), c.SerializeAsString());
  auto rc = frontend::LoadOnnxModel(dir.file("cycle.onnx"));
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("cycle"), std::string::npos) << rc.status().message();
}

TEST(Onnx, ExternalDataIsConfinedToTheModelFolder) {
  TempDir dir;
  auto m = testing::AddReluModel();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  std::string data(16, '\0');
  float vals[4] = {1, 2, 3, 4};
  std::memcpy(data.data(), vals, 16);
  Write(dir.file("weights.bin"), data);
  Write(dir.file("ext.onnx"), m.SerializeAsString());
  auto ok = frontend::LoadOnnxModel(dir.file("ext.onnx"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  const Tensor* loaded = nullptr;
  for (const auto& v : ok->graph->values)
    if (v.name == "w" && v.constant) loaded = &*v.constant;
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->data<float>()[3], 4.0f);

  loc->set_value("../../etc/passwd");
  Write(dir.file("escape.onnx"), m.SerializeAsString());
  auto esc = frontend::LoadOnnxModel(dir.file("escape.onnx"));
  ASSERT_FALSE(esc.ok());
  EXPECT_NE(esc.status().message().find("leaves the model folder"), std::string::npos);

  loc->set_value("/etc/passwd");
  Write(dir.file("abs.onnx"), m.SerializeAsString());
  EXPECT_FALSE(frontend::LoadOnnxModel(dir.file("abs.onnx")).ok());

  loc->set_value("weights.bin");
  auto* off = w->add_external_data();
  off->set_key("offset");
  off->set_value("8");
  Write(dir.file("range.onnx"), m.SerializeAsString());
  auto range = frontend::LoadOnnxModel(dir.file("range.onnx"));
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("does not fit"), std::string::npos);
}

TEST(Json, ConvertRoundTripsWeights) {
  TempDir dir;
  Write(dir.file("m.onnx"), testing::AddReluModel(5).SerializeAsString());
  ASSERT_TRUE(
      frontend::ConvertOnnxToJson(dir.file("m.onnx"), dir.file("m.json"), dir.file("m.safetensors"))
          .ok());
  auto a = frontend::LoadOnnxModel(dir.file("m.onnx"));
  auto b = frontend::LoadModel(dir.file("m.json"), dir.file("m.safetensors"));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto find_w = [](const ir::Model& m) -> const Tensor* {
    for (const auto& v : m.graph->values)
      if (v.name == "w") return &*v.constant;
    return nullptr;
  };
  const Tensor* wa = find_w(*a);
  const Tensor* wb = find_w(*b);
  ASSERT_TRUE(wa && wb);
  ASSERT_EQ(wa->nbytes(), wb->nbytes());
  EXPECT_EQ(std::memcmp(wa->raw(), wb->raw(), wa->nbytes()), 0);
}

TEST(Json, AcceptsNamesStringsAndRejectsBadOffsets) {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> ts = {{"w", Tensor(DType::kFloat32, {2})}};
  std::vector<std::pair<size_t, size_t>> offsets;
  ASSERT_TRUE(frontend::WriteSafetensors(dir.file("w.safetensors"), ts, &offsets).ok());
  auto model = [](const std::string& offsets) {
    return std::string(R"({"ir_version": "8", "opset_import": [{"version": 17}],
      "graph": {"name": "g",
        "node": [{"op_type": "Add", "input": ["x", "w"], "output": ["y"]}],
        "initializer": [{"name": "w", "dims": ["2"], "data_type": "FLOAT", "data_offsets": )") +
           offsets + R"(}],
        "input": [{"name": "x", "type": {"tensor_type": {"elem_type": "FLOAT",
                   "shape": {"dim": [{"dim_value": 2}]}}}}],
        "output": [{"name": "y", "type": {"tensor_type": {"elem_type": 1}}}]}})";
  };
  auto ok =
      frontend::ParseJsonModel(model("[0, 8]"), dir.file("w.safetensors"), dir.file(""), "m.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  auto out = frontend::ParseJsonModel(model("[0, 800]"), dir.file("w.safetensors"), "", "m.json");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("initializer 'w'"), std::string::npos)
      << out.status().message();
  auto none = frontend::ParseJsonModel(model("[0, 8]"), "", "", "m.json");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no --weights"), std::string::npos);
  auto bad = frontend::ParseJsonModel("{\"graph\": [", "", "", "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace kiln
