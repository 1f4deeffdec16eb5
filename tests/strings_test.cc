// String tensors: the reader, the text ops beyond the conformance suite's cases, the refusals
// (ops without kTakesStrings, generated code), and the passes that compare constants.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/compile.h"
#include "frontend/npy.h"
#include "frontend/onnx_import.h"
#include "frontend/onnx_proto.h"
#include "passes/compress_constants.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "support/utf8.h"
#include "test_models.h"

namespace kiln {
namespace {

using testing::AddNamedNode;
using testing::EmptyModel;
using testing::SetAttr;

onnx::ValueInfoProto StringInfo(const std::string& name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto vi = testing::FloatInfo(name, std::move(dims));
  vi.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  return vi;
}

onnx::ValueInfoProto TypedInfo(const std::string& name, onnx::TensorProto::DataType t,
                               std::vector<int64_t> dims) {
  onnx::ValueInfoProto vi = testing::FloatInfo(name, std::move(dims));
  vi.mutable_type()->mutable_tensor_type()->set_elem_type(t);
  return vi;
}

Tensor Strings(Dims dims, std::vector<std::string> v) {
  return Tensor::FromVector(DType::kString, std::move(dims), v);
}

std::vector<std::string> StringsOf(const Tensor& t) {
  EXPECT_TRUE(t.is_string());
  return t.is_string() ? std::vector<std::string>(t.strings(), t.strings() + t.size())
                       : std::vector<std::string>{};
}

Expected<ir::Model> Parse(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  return frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
}

// Runs m on `inputs` with the host executor (its passes included).
Expected<std::vector<Tensor>> RunStrings(const onnx::ModelProto& m,
                                         const std::vector<Tensor>& inputs) {
  KILN_ASSIGN_OR_RETURN(ir::Model model, Parse(m));
  KILN_ASSIGN_OR_RETURN(auto exec, runtime::Executor::Create(std::move(model), {}));
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(exec->Run(inputs, &out));
  return out;
}

// One node `op` from x (STRING [n]) to y of element type `out`.
onnx::ModelProto OneNode(const std::string& op, onnx::TensorProto::DataType in,
                         onnx::TensorProto::DataType out, int64_t n, onnx::NodeProto** node,
                         const std::string& domain = "") {
  onnx::ModelProto m = EmptyModel("strings");
  if (!domain.empty()) {
    auto* o = m.add_opset_import();
    o->set_domain(domain);
    o->set_version(op == "LabelEncoder" ? 4 : 1);
  }
  auto* g = m.mutable_graph();
  *g->add_input() = TypedInfo("x", in, {n});
  *g->add_output() = TypedInfo("y", out, {});
  *node = AddNamedNode(g, op, {"x"}, "y");
  (*node)->set_domain(domain);
  return m;
}

TEST(Strings, Utf8DecodesInvalidBytesAsReplacement) {
  EXPECT_EQ(DecodeUtf8("a\xC3\xA9z"), std::u32string({U'a', U'\u00E9', U'z'}));
  // A lone continuation byte, an overlong '/', a surrogate, a truncated sequence.
  EXPECT_EQ(DecodeUtf8("\x80"), std::u32string(1, kReplacementChar));
  EXPECT_EQ(DecodeUtf8("\xC0\xAF"), std::u32string(2, kReplacementChar));
  EXPECT_EQ(DecodeUtf8("\xED\xA0\x80").front(), kReplacementChar);
  EXPECT_EQ(DecodeUtf8("\xE4\xB8"), std::u32string(2, kReplacementChar));
  EXPECT_EQ(EncodeUtf8(U"\u4E2D\U0001F600"), "\xE4\xB8\xAD\xF0\x9F\x98\x80");
}

TEST(Strings, TensorProtoStringDataIsReadAndChecked) {
  onnx::TensorProto tp;
  tp.set_name("s");
  tp.set_data_type(onnx::TensorProto::STRING);
  tp.add_dims(2);
  tp.add_string_data("ab");
  tp.add_string_data(std::string("\0c", 2));
  auto t = frontend::TensorFromProto(tp, "", "test", nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(StringsOf(*t), (std::vector<std::string>{"ab", std::string("\0c", 2)}));
  tp.add_dims(3);  // claims 6 strings, holds 2
  t = frontend::TensorFromProto(tp, "", "test", nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("has 2 strings, expected 6"), std::string::npos);
  tp.clear_dims();
  tp.add_dims(2);
  tp.set_raw_data("xx");
  EXPECT_FALSE(frontend::TensorFromProto(tp, "", "test", nullptr).ok());
}

TEST(Strings, NpyTextRoundTripsAndRejectsBadCodePoints) {
  const Tensor t = Strings({2, 2}, {"a", "", "\xE4\xB8\xAD\xE6\x96\x87", "longer one"});
  const std::string bytes = frontend::SerializeNpy(t);
  EXPECT_NE(bytes.find("'<U10'"), std::string::npos);
  auto back = frontend::ParseNpy(bytes.data(), bytes.size(), "t.npy");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->dims(), t.dims());
  EXPECT_EQ(StringsOf(*back), StringsOf(t));
  std::string bad = bytes;
  bad[bad.size() - 4] = '\x11';  // a code unit past U+10FFFF
  bad[bad.size() - 1] = '\x11';
  EXPECT_FALSE(frontend::ParseNpy(bad.data(), bad.size(), "t.npy").ok());
  EXPECT_FALSE(frontend::ParseNpy(bytes.data(), bytes.size() - 1, "t.npy").ok());
  // Width 0: a header claiming 10^8 strings with no bytes behind them.
  std::string zero = bytes.substr(0, bytes.find('\n') + 1);
  zero.replace(zero.find("'<U10'"), 6, "'<U0' ");
  zero.replace(zero.find("(2,2)"), 5, "(99999999,)");
  zero.resize(bytes.find('\n') + 1, ' ');
  zero.back() = '\n';
  auto empty = frontend::ParseNpy(zero.data(), zero.size(), "t.npy");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("width 0"), std::string::npos)
      << empty.status().message();
}

TEST(Strings, ViewsAndEqualCarryStrings) {
  onnx::ModelProto m = EmptyModel("views");
  auto* g = m.mutable_graph();
  *g->add_input() = StringInfo("x", {2, 3});
  *g->add_input() = StringInfo("w", {3});
  *g->add_output() = StringInfo("flat", {6});
  *g->add_output() = TypedInfo("same", onnx::TensorProto::BOOL, {2, 3});
  testing::AddInt64Initializer(g, "shape", {1}, {6});
  AddNamedNode(g, "Identity", {"x"}, "id");
  AddNamedNode(g, "Reshape", {"id", "shape"}, "flat");
  AddNamedNode(g, "Equal", {"x", "w"}, "same");
  auto out = RunStrings(
      m, {Strings({2, 3}, {"a", "b", "c", "d", "b", "f"}), Strings({3}, {"a", "b", "x"})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(StringsOf((*out)[0]), (std::vector<std::string>{"a", "b", "c", "d", "b", "f"}));
  const bool* same = (*out)[1].data<bool>();
  EXPECT_EQ(std::vector<bool>(same, same + 6),
            (std::vector<bool>{true, true, false, false, true, false}));
}

TEST(Strings, OpsWithoutStringsRefuseThemByName) {
  onnx::NodeProto* n;
  // Pad would fill with a number.
  onnx::ModelProto m = OneNode("Pad", onnx::TensorProto::STRING, onnx::TensorProto::STRING, 3, &n);
  n->add_input("pads");
  testing::AddInt64Initializer(m.mutable_graph(), "pads", {2}, {1, 1});
  auto out = RunStrings(m, {Strings({3}, {"a", "b", "c"})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Pad does not take string tensors"), std::string::npos)
      << out.status().message();
}

TEST(Strings, DataMovementOpsMoveStrings) {
  onnx::ModelProto m = EmptyModel("moves");
  m.mutable_opset_import(0)->set_version(12);
  auto* g = m.mutable_graph();
  *g->add_input() = StringInfo("x", {2, 3});
  *g->add_input() = TypedInfo("pick", onnx::TensorProto::INT64, {2});
  *g->add_input() = TypedInfo("keep", onnx::TensorProto::BOOL, {3});
  for (const char* o : {"labels", "t", "both", "kept", "first", "rest", "either"})
    *g->add_output() = StringInfo(o, {});
  auto* names = g->add_initializer();  // a class-label table, as classifiers export it
  names->set_name("names");
  names->set_data_type(onnx::TensorProto::STRING);
  names->add_dims(3);
  for (const char* w : {"cat", "dog", "bird"}) names->add_string_data(w);
  AddNamedNode(g, "Gather", {"names", "pick"}, "labels");
  SetAttr(AddNamedNode(g, "Transpose", {"x"}, "t"), "perm", std::vector<int64_t>{1, 0});
  SetAttr(AddNamedNode(g, "Concat", {"x", "x"}, "both"), "axis", int64_t{0});
  SetAttr(AddNamedNode(g, "Compress", {"x", "keep"}, "kept"), "axis", int64_t{1});
  auto* split = AddNamedNode(g, "Split", {"x"}, "first");
  split->add_output("rest");
  SetAttr(split, "axis", int64_t{1});
  SetAttr(split, "split", std::vector<int64_t>{1, 2});
  AddNamedNode(g, "Where", {"keep", "names", "x"}, "either");
  auto out = RunStrings(m, {Strings({2, 3}, {"a", "b", "c", "d", "e", "f"}),
                            Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{2, 0}),
                            Tensor::FromVector(DType::kBool, {3}, std::vector<uint8_t>{1, 0, 1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  using V = std::vector<std::string>;
  EXPECT_EQ(StringsOf((*out)[0]), (V{"bird", "cat"}));
  EXPECT_EQ(StringsOf((*out)[1]), (V{"a", "d", "b", "e", "c", "f"}));
  EXPECT_EQ(StringsOf((*out)[2]), (V{"a", "b", "c", "d", "e", "f", "a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ((*out)[3].dims(), (Dims{2, 2}));
  EXPECT_EQ(StringsOf((*out)[3]), (V{"a", "c", "d", "f"}));
  EXPECT_EQ(StringsOf((*out)[4]), (V{"a", "d"}));
  EXPECT_EQ(StringsOf((*out)[5]), (V{"b", "c", "e", "f"}));
  EXPECT_EQ(StringsOf((*out)[6]), (V{"cat", "b", "bird", "cat", "e", "bird"}));
}

TEST(Strings, GeneratedCodeRefusesStrings) {
  onnx::NodeProto* n;
  onnx::ModelProto m =
      OneNode("RegexFullMatch", onnx::TensorProto::STRING, onnx::TensorProto::BOOL, 2, &n);
  SetAttr(n, "pattern", std::string("a+"));
  m.mutable_opset_import(0)->set_version(20);
  for (auto target : {compiler::Target::kC, compiler::Target::kCuda}) {
    auto model = Parse(m);
    ASSERT_TRUE(model.ok());
    compiler::CompileOptions o;
    o.target = target;
    auto program = compiler::Compile(std::move(*model), o);
    ASSERT_FALSE(program.ok());
    EXPECT_NE(program.status().message().find("strings run on the host only"), std::string::npos)
        << program.status().message();
  }
}

TEST(Strings, RegexFullMatchChecksItsPattern) {
  onnx::NodeProto* n;
  onnx::ModelProto m =
      OneNode("RegexFullMatch", onnx::TensorProto::STRING, onnx::TensorProto::BOOL, 3, &n);
  m.mutable_opset_import(0)->set_version(20);
  SetAttr(n, "pattern", std::string("[a-c]+\\d?"));
  auto out = RunStrings(m, {Strings({3}, {"abc1", "abcd", ""})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const bool* y = (*out)[0].data<bool>();
  EXPECT_TRUE(y[0]);
  EXPECT_FALSE(y[1]);
  EXPECT_FALSE(y[2]);
  n->mutable_attribute(0)->set_s("(unclosed");
  out = RunStrings(m, {Strings({3}, {"a", "b", "c"})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("not a valid RE2 expression"), std::string::npos);
}

TEST(Strings, StringSplitFollowsPythonSplit) {
  onnx::NodeProto* n;
  onnx::ModelProto m =
      OneNode("StringSplit", onnx::TensorProto::STRING, onnx::TensorProto::STRING, 3, &n);
  m.mutable_opset_import(0)->set_version(20);
  *m.mutable_graph()->add_output() = TypedInfo("z", onnx::TensorProto::INT64, {3});
  n->add_output("z");
  SetAttr(n, "maxsplit", int64_t{1});
  // U+3000 (ideographic space) separates as Python's str.split() does; the rest keeps its spaces.
  auto out = RunStrings(m, {Strings({3}, {"  a  b c ", "x\xE3\x80\x80y", ""})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (Dims{3, 2}));
  EXPECT_EQ(StringsOf((*out)[0]), (std::vector<std::string>{"a", "b c ", "x", "y", "", ""}));
  EXPECT_EQ((*out)[1].ToInt64Vector(), (std::vector<int64_t>{2, 2, 0}));
}

TEST(Strings, StringNormalizerMapsCaseBeyondAscii) {
  onnx::NodeProto* n;
  onnx::ModelProto m =
      OneNode("StringNormalizer", onnx::TensorProto::STRING, onnx::TensorProto::STRING, 3, &n);
  SetAttr(n, "case_change_action", std::string("UPPER"));
  SetAttr(n, "stopwords", std::vector<std::string>{"\xC3\x84PFEL"});  // ÄPFEL, any case
  auto out = RunStrings(m, {Strings({3}, {"\xC3\xA4pfel",
                                          "stra\xC3\x9F"
                                          "e",
                                          "\xC3\xA9t\xC3\xA9"})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // ß has no one-letter capital in simple case mapping: it stays.
  EXPECT_EQ(StringsOf((*out)[0]), (std::vector<std::string>{"STRA\xC3\x9F"
                                                            "E",
                                                            "\xC3\x89T\xC3\x89"}));
}

TEST(Strings, LabelEncoderMapsEveryWay) {
  // int64 -> string, with default_string.
  onnx::NodeProto* n;
  onnx::ModelProto m = OneNode("LabelEncoder", onnx::TensorProto::INT64, onnx::TensorProto::STRING,
                               3, &n, "ai.onnx.ml");
  SetAttr(n, "keys_int64s", std::vector<int64_t>{7, 9});
  SetAttr(n, "values_strings", std::vector<std::string>{"seven", "nine"});
  SetAttr(n, "default_string", std::string("?"));
  auto out = RunStrings(m, {Tensor::FromVector(DType::kInt64, {3}, std::vector<int64_t>{9, 1, 7})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(StringsOf((*out)[0]), (std::vector<std::string>{"nine", "?", "seven"}));
  // ML opset 1: classes_strings, string -> index with default_int64.
  m = OneNode("LabelEncoder", onnx::TensorProto::STRING, onnx::TensorProto::INT64, 3, &n,
              "ai.onnx.ml");
  m.mutable_opset_import(1)->set_version(1);
  SetAttr(n, "classes_strings", std::vector<std::string>{"a", "b"});
  SetAttr(n, "default_int64", int64_t{-5});
  out = RunStrings(m, {Strings({3}, {"b", "z", "a"})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].ToInt64Vector(), (std::vector<int64_t>{1, -5, 0}));
}

// LinearRegressor's plan (ops/ml_plans.h): the rows it computes, and malformed attributes
// refused when the model loads, before any run.
TEST(MlOps, LinearRegressorRowsAndAttributeErrors) {
  auto make = [](const std::vector<float>& coefficients, const std::string& post) {
    onnx::NodeProto* n;
    onnx::ModelProto m = OneNode("LinearRegressor", onnx::TensorProto::FLOAT,
                                 onnx::TensorProto::FLOAT, 3, &n, "ai.onnx.ml");
    SetAttr(n, "targets", int64_t{2});
    SetAttr(n, "coefficients", coefficients);
    SetAttr(n, "intercepts", std::vector<float>{1, -1});
    SetAttr(n, "post_transform", post);
    return m;
  };
  const Tensor x = Tensor::FromVector(DType::kFloat32, {3}, std::vector<float>{1, 1, 2});
  auto out = RunStrings(make({1, 2, 3, 0, 0, 1}, "NONE"), {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (Dims{1, 2}));
  const float* y = (*out)[0].data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 2), (std::vector<float>{10, 1}));
  out = RunStrings(make({1, 2, 3, 0, 0, 1}, "LOGISTIC"), {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_NEAR((*out)[0].data<float>()[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  for (const auto& [coefficients, post, why] :
       {std::tuple{std::vector<float>{1, 2, 3}, "NONE", "coefficients must have targets*F"},
        std::tuple{std::vector<float>(6, 1.0f), "SIGMOID", "unknown post_transform 'SIGMOID'"}}) {
    out = RunStrings(make(coefficients, post), {x});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find(why), std::string::npos) << out.status().message();
  }
}

// Scaler, Normalizer and Imputer check their attributes in their plans (ops/ml_plans.h) when the
// model loads: each malformed one is an error that names it.
TEST(MlOps, MalformedAttributesAreErrorsAtLoad) {
  struct Case {
    const char* op;
    std::function<void(onnx::NodeProto*)> set;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"Scaler",
       [](onnx::NodeProto* n) {
         SetAttr(n, "offset", std::vector<float>{1, 2});
       },
       "offset/scale must have 1 or C entries"},
      {"Scaler",
       [](onnx::NodeProto* n) {
         SetAttr(n, "scale", std::vector<float>{1, 2, 3, 4});
       },
       "offset/scale must have 1 or C entries"},
      {"Normalizer", [](onnx::NodeProto* n) { SetAttr(n, "norm", std::string("L3")); },
       "unknown norm 'L3'"},
      {"Imputer", [](onnx::NodeProto*) {}, "imputed values must have 1 or C entries"},
      {"Imputer",
       [](onnx::NodeProto* n) {
         SetAttr(n, "imputed_value_floats", std::vector<float>{1, 2});
       },
       "imputed values must have 1 or C entries"}};
  const Tensor x = Tensor::FromVector(DType::kFloat32, {3}, std::vector<float>{1, 1, 2});
  for (const Case& c : cases) {
    onnx::NodeProto* n;
    onnx::ModelProto m =
        OneNode(c.op, onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT, 3, &n, "ai.onnx.ml");
    c.set(n);
    auto out = RunStrings(m, {x});
    ASSERT_FALSE(out.ok()) << c.op;
    EXPECT_NE(out.status().message().find(c.why), std::string::npos) << out.status().message();
  }
  // Well-formed: offset and scale per feature, and one imputed value for all.
  onnx::NodeProto* n;
  onnx::ModelProto m =
      OneNode("Scaler", onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT, 3, &n, "ai.onnx.ml");
  SetAttr(n, "offset", std::vector<float>{1, 0, 1});
  SetAttr(n, "scale", std::vector<float>{2, 3, 4});
  auto out = RunStrings(m, {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const float* y = (*out)[0].data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{0, 3, 4}));
  m = OneNode("Imputer", onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT, 3, &n, "ai.onnx.ml");
  SetAttr(n, "imputed_value_floats", std::vector<float>{9});
  SetAttr(n, "replaced_value_float", 1.0f);
  out = RunStrings(m, {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  y = (*out)[0].data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{9, 9, 2}));
}

TEST(Strings, TfIdfVectorizerCountsStringNgrams) {
  onnx::NodeProto* n;
  onnx::ModelProto m =
      OneNode("TfIdfVectorizer", onnx::TensorProto::STRING, onnx::TensorProto::FLOAT, 6, &n);
  SetAttr(n, "mode", std::string("TF"));
  SetAttr(n, "min_gram_length", int64_t{1});
  SetAttr(n, "max_gram_length", int64_t{2});
  SetAttr(n, "max_skip_count", int64_t{0});
  SetAttr(n, "pool_strings", std::vector<std::string>{"a", "b", "a", "b"});  // a, b, (a b)
  SetAttr(n, "ngram_counts", std::vector<int64_t>{0, 2});
  SetAttr(n, "ngram_indexes", std::vector<int64_t>{0, 1, 2});
  auto out = RunStrings(m, {Strings({6}, {"a", "b", "c", "a", "b", "a"})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const float* y = (*out)[0].data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{3, 2, 2}));
}

TEST(Strings, CastParsesAndPrintsNumbers) {
  onnx::NodeProto* n;
  onnx::ModelProto m = OneNode("Cast", onnx::TensorProto::STRING, onnx::TensorProto::INT64, 4, &n);
  SetAttr(n, "to", int64_t{onnx::TensorProto::INT64});
  auto out = RunStrings(m, {Strings({4}, {"9007199254740993", " -7 ", "2.9", "1e3"})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // Integers read exactly (2^53 + 1 has no double), the rest through double, truncated.
  EXPECT_EQ((*out)[0].ToInt64Vector(), (std::vector<int64_t>{9007199254740993, -7, 2, 1000}));
  out = RunStrings(m, {Strings({4}, {"1", "2", "three", "4"})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("\"three\" is not a number"), std::string::npos);

  m = OneNode("Cast", onnx::TensorProto::FLOAT, onnx::TensorProto::STRING, 4, &n);
  SetAttr(n, "to", int64_t{onnx::TensorProto::STRING});
  out = RunStrings(m, {Tensor::FromVector(DType::kFloat32, {4},
                                          std::vector<float>{0.1f, -2.0f, 1e8f, INFINITY})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(StringsOf((*out)[0]), (std::vector<std::string>{"0.1", "-2", "1e+08", "inf"}));
}

TEST(Strings, ConstantPassesKeepDistinctStringsApart) {
  onnx::ModelProto m = EmptyModel("consts");
  auto* g = m.mutable_graph();
  *g->add_input() = StringInfo("x", {2});
  *g->add_output() = StringInfo("y1", {2});
  *g->add_output() = StringInfo("y2", {2});
  for (const char* name : {"c1", "c2"}) {
    auto* c = AddNamedNode(g, "Constant", {}, name);
    auto* a = testing::NewAttribute(c, "value", onnx::AttributeProto::TENSOR)->mutable_t();
    a->set_data_type(onnx::TensorProto::STRING);
    a->add_dims(2);
    a->add_string_data(name);
    a->add_string_data("!");
  }
  m.mutable_opset_import(0)->set_version(20);
  AddNamedNode(g, "StringConcat", {"x", "c1"}, "y1");
  AddNamedNode(g, "StringConcat", {"x", "c2"}, "y2");
  auto out = RunStrings(m, {Strings({2}, {"a", "b"})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(StringsOf((*out)[0]), (std::vector<std::string>{"ac1", "b!"}));
  EXPECT_EQ(StringsOf((*out)[1]), (std::vector<std::string>{"ac2", "b!"}));
  auto model = Parse(m);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(passes::InferShapes(*model, {}).ok());
  ASSERT_TRUE(
      passes::RunPasses(*model, {"fold-constants", "eliminate-common-subexpressions"}, {}).ok());
  EXPECT_EQ(passes::CompressConstants(*model->graph).duplicates, 0);
  EXPECT_FALSE(Tensor(Strings({1}, {"p"})).SameContents(Strings({1}, {"q"})));
}

}  // namespace
}  // namespace kiln
