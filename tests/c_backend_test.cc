// The embedded C backend from the outside: `kiln compile --target c` output built with strict
// flags by gcc and clang, driven by an application through the DESIGN.md 2.4 interface and
// compared with the host executor; determinism; parameter sections; odd tensor names; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli_fixture.h"
#include "codegen/c/c_names.h"
#include "codegen/c/emit_axes.h"
#include "codegen/c/emit_util.h"
#include "formula_ops_model.h"
#include "frontend/npy.h"
#include "test_models.h"

namespace kiln {
namespace {

const std::string kStrict = "-std=c99 -Wall -Wextra -Werror -pedantic";

std::string Models() { return std::string(KILN_SOURCE_DIR) + "/models/"; }

bool HaveTool(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

double RelL2(const std::vector<double>& got, const float* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

class CBackendTest : public CliTest {
 protected:
  void Compile(const std::string& model, const std::string& name, const std::string& extra = "") {
    Result r = RunKiln("compile " + model + " --target c --name " + name + " --out " + file("gen") +
                       " " + extra);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  std::map<std::string, std::string> ReadDir(const std::string& d) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(d))
      files[e.path().filename().string()] = *ReadFile(e.path().string());
    return files;
  }
};

// The application in tests/c_backend/app.c includes both model headers, checks run()'s error
// codes and prints both models' outputs; they must match the host executor on the same inputs.
TEST_F(CBackendTest, OutsideApplicationWithTwoModelsMatchesHost) {
  Compile(Models() + "kws_cnn.onnx", "kws");
  Compile(Models() + "mlp_field.onnx", "field", "--shape xyz=64,3");
  // The same inputs as app.c, for the host.
  Tensor kin(DType::kFloat32, {1, 1, 49, 10}), fin(DType::kFloat32, {64, 3});
  for (int i = 0; i < 490; ++i)
    kin.data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < 192; ++i)
    fin.data<float>()[i] = static_cast<float>((i * 13) % 97) / 48.0f - 1.0f;
  Write("kin.npy", frontend::SerializeNpy(kin));
  Write("fin.npy", frontend::SerializeNpy(fin));
  ASSERT_EQ(RunKiln("run " + Models() + "kws_cnn.onnx --input mfcc=" + file("kin.npy") +
                    " --output-dir " + file("kref"))
                .code,
            0);
  ASSERT_EQ(RunKiln("run " + Models() + "mlp_field.onnx --shape xyz=64,3 --input xyz=" +
                    file("fin.npy") + " --output-dir " + file("fref"))
                .code,
            0);
  auto kref = frontend::LoadNpyFile(file("kref/output_0.npy"));
  auto fref = frontend::LoadNpyFile(file("fref/output_0.npy"));
  ASSERT_TRUE(kref.ok() && fref.ok());

  std::vector<std::string> compilers = {"gcc"};
  if (HaveTool("clang")) compilers.push_back("clang");
  for (const auto& cc : compilers) {
    std::string gen = file("gen");
    auto [rc, log] = Sh("cd " + gen + " && " + cc + " " + kStrict + " -O2 -I. -o app_" + cc + " " +
                        std::string(KILN_SOURCE_DIR) +
                        "/tests/c_backend/app.c kws.c kws_params.c field.c field_params.c -lm");
    ASSERT_EQ(rc, 0) << cc << ":\n" << log;
    auto [run_rc, out] = Sh(gen + "/app_" + cc);
    ASSERT_EQ(run_rc, 0) << out;
    std::vector<double> kws, field;
    std::istringstream lines(out);
    std::string tag;
    int idx;
    double v;
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream ls(line);
      if (ls >> tag >> idx >> v) (tag == "kws" ? kws : field).push_back(v);
    }
    ASSERT_EQ(kws.size(), 12u);
    ASSERT_EQ(field.size(), 256u);
    EXPECT_LE(RelL2(kws, kref->data<float>(), 12), 1e-4) << cc;
    EXPECT_LE(RelL2(field, fref->data<float>(), 256), 1e-4) << cc;
    EXPECT_NE(out.find("0 failures"), std::string::npos) << out;
  }
}

TEST_F(CBackendTest, OutputIsDeterministicAndHeaderIsSelfContained) {
  Compile(Models() + "kws_cnn.onnx", "kws");
  auto first = ReadDir(file("gen"));
  fs::remove_all(file("gen"));
  Compile(Models() + "kws_cnn.onnx", "kws");
  auto second = ReadDir(file("gen"));
  EXPECT_EQ(first, second);
  std::set<std::string> names;
  for (const auto& [n, t] : first) names.insert(n);
  EXPECT_EQ(names, (std::set<std::string>{"kws.h", "kws.c", "kws_params.c", "kws_kernels.h"}));
  // Including the header alone adds no code or data.
  Write("only_header.c", "#include \"kws.h\"\n");
  auto [rc, log] = Sh("cd " + file("gen") + " && gcc " + kStrict +
                      " -I. -c ../only_header.c -o ../only_header.o && size ../only_header.o");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("      0\t      0\t      0"), std::string::npos) << log;
  EXPECT_NE(first["kws.c"].find("kiln 0.1.0"), std::string::npos);
  EXPECT_NE(first["kws.c"].find("static void node_conv1("), std::string::npos);
}

TEST_F(CBackendTest, ParamsGoToTheRequestedSection) {
  Compile(Models() + "kws_cnn.onnx", "kws", "--params-section .kiln_weights");
  auto [rc, log] =
      Sh("cd " + file("gen") + " && gcc " + kStrict + " -c kws_params.c -o p.o && readelf -S p.o");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find(".kiln_weights"), std::string::npos) << log;
}

// Tensor names with quotes, slashes, colons, leading digits, C keywords and names that mangle
// alike: the generated identifiers are valid and distinct, the descriptor keeps the ONNX names.
TEST_F(CBackendTest, OddTensorNames) {
  onnx::ModelProto m = testing::AddReluModel(6);
  auto* g = m.mutable_graph();
  g->mutable_input(0)->set_name("1st/in:0\"q");
  g->mutable_node(0)->set_input(0, "1st/in:0\"q");
  g->mutable_initializer(0)->set_name("int");
  g->mutable_node(0)->set_input(1, "int");
  g->mutable_node(0)->set_output(0, "a.b");
  g->mutable_node(1)->set_input(0, "a.b");
  g->mutable_node(1)->set_output(0, "a_b");
  g->mutable_output(0)->set_name("a_b");
  g->mutable_node(0)->set_name("*/ node");
  Write("odd.onnx", m.SerializeAsString());
  Compile(file("odd.onnx"), "odd");
  auto files = ReadDir(file("gen"));
  EXPECT_NE(files["odd.c"].find("\"1st/in:0\\\"q\""), std::string::npos);
  Result r = RunKiln("test-onnx --backend c " + file("odd.onnx"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 passed"), std::string::npos) << r.out;
}

// Node functions name their parameters after the model's values; a name that is also an
// identifier of the body (the loop index i0, a kernel), a macro, a keyword or an OFF_ offset
// macro's prefix gets a suffix or a prefix, and the C still builds warning-free and matches the
// host.
TEST_F(CBackendTest, ParametersAreNamedFromTheModel) {
  onnx::ModelProto m = testing::AddReluModel(6);
  auto* g = m.mutable_graph();
  g->mutable_input(0)->set_name("i0");
  g->mutable_node(0)->set_input(0, "i0");
  g->mutable_initializer(0)->set_name("OFF_w");
  g->mutable_node(0)->set_input(1, "OFF_w");
  g->mutable_node(0)->set_output(0, "NAN");
  g->mutable_node(1)->set_input(0, "NAN");
  g->mutable_node(1)->set_output(0, "float");
  g->mutable_output(0)->set_name("float");
  Write("names.onnx", m.SerializeAsString());
  Compile(file("names.onnx"), "names");
  const std::string c = ReadDir(file("gen"))["names.c"];
  EXPECT_NE(c.find("(const float *i0_2, const float *v_OFF_w, float *NAN_)"), std::string::npos)
      << c;
  EXPECT_NE(c.find("(const float *NAN_, float *float_)"), std::string::npos) << c;
  EXPECT_EQ(c.find("in0"), std::string::npos) << c;
  auto [rc, log] = Sh("cd " + file("gen") + " && gcc " + kStrict + " -O2 -c names.c -o names.o");
  EXPECT_EQ(rc, 0) << log;
  Result r = RunKiln("test-onnx --backend c " + file("names.onnx"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 passed"), std::string::npos) << r.out;
}

// A Conv and the HardSwish written out after it (x * Clip(x + 3, 0, 6) / 6) become one FusedConv
// with activation HardSwish under fuse-hardswish and fuse-conv-activation; the generated C
// matches the host.
TEST_F(CBackendTest, ConvWithWrittenOutHardSwish) {
  onnx::ModelProto m = testing::EmptyModel("conv_hardswish");
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 3, 6, 5});
  *g->add_output() = testing::FloatInfo("y", {1, 4, 6, 5});
  auto ramp = [](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 13 - 6);
    return v;
  };
  testing::AddFloatInitializer(g, "w", {4, 3, 3, 3}, ramp(108, 0.1f));
  testing::AddFloatInitializer(g, "b", {4}, ramp(4, 0.2f));
  testing::AddFloatInitializer(g, "three", {}, {3.0f});
  testing::AddFloatInitializer(g, "zero", {}, {0.0f});
  testing::AddFloatInitializer(g, "six", {}, {6.0f});
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    return testing::AddNamedNode(g, op, in, out);
  };
  auto* pads = node("Conv", {"x", "w", "b"}, "c")->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int k = 0; k < 4; ++k) pads->add_ints(1);
  node("Add", {"c", "three"}, "a");
  node("Clip", {"a", "zero", "six"}, "r");
  node("Mul", {"c", "r"}, "m");
  node("Div", {"m", "six"}, "y");
  Write("hs.onnx", m.SerializeAsString());
  Write("hs.json", R"({"kiln_pipeline": 1, "passes": ["fuse-hardswish", "fuse-conv-activation"]})");
  Result ir = RunKiln("run " + file("hs.onnx") + " --pipeline " + file("hs.json") +
                      " --dump-ir-after fuse-conv-activation --output-dir " + file("out"));
  ASSERT_EQ(ir.code, 0) << ir.err;
  EXPECT_NE(ir.err.find("activation=\"HardSwish\""), std::string::npos) << ir.err;
  Result r = RunKiln("test-onnx --backend c --pipeline " + file("hs.json") + " " + file("hs.onnx"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 passed"), std::string::npos) << r.out;
}

// Every op of ops/unary_ops.h, on float32 and float64, default and other attribute values: the
// generated C computes what the host does from the one formula.
TEST_F(CBackendTest, EveryFormulaOpMatchesTheHost) {
  Write("formulas32.onnx", testing::FormulaOpsModel(3, 64, /*float64=*/false).SerializeAsString());
  Write("formulas64.onnx", testing::FormulaOpsModel(3, 64, /*float64=*/true).SerializeAsString());
  Result r =
      RunKiln("test-onnx --backend c " + file("formulas32.onnx") + " " + file("formulas64.onnx"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 passed"), std::string::npos) << r.out;
}

// The row-wise ops and pools at batch 1 (outer and inner extents of one): the generated C has no
// loops of one trip and folds the indices they would have added, and computes what the host does.
TEST_F(CBackendTest, RowOpsAtBatchOneHaveNoOneTripLoops) {
  onnx::ModelProto m = testing::EmptyModel("rows");
  m.mutable_opset_import(0)->set_version(17);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 6});
  testing::AddFloatInitializer(g, "scale", {6}, {1.0f, 0.5f, 2.0f, 1.5f, 0.25f, 1.0f});
  testing::AddFloatInitializer(g, "bias", {6}, {0.0f, 0.1f, -0.2f, 0.3f, 0.0f, 1.0f});
  testing::AddInt64Initializer(g, "axis", {}, {1});
  auto out = [&](const std::string& name, std::vector<int64_t> dims, bool int64 = false) {
    auto info = testing::FloatInfo(name, std::move(dims));
    if (int64) info.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    *g->add_output() = info;
  };
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    testing::AddNamedNode(g, op, {"x"}, std::string("y_") + op);
    out(std::string("y_") + op, {1, 6});
  }
  testing::SetAttr(testing::AddNamedNode(g, "LpNormalization", {"x"}, "y_lp"), "axis", int64_t{1});
  out("y_lp", {1, 6});
  testing::AddNamedNode(g, "LayerNormalization", {"x", "scale", "bias"}, "y_ln");
  out("y_ln", {1, 6});
  testing::SetAttr(testing::AddNamedNode(g, "ArgMax", {"x"}, "y_argmax0"), "axis", int64_t{0});
  out("y_argmax0", {1, 6}, true);
  testing::SetAttr(testing::AddNamedNode(g, "ArgMin", {"x"}, "y_argmin1"), "axis", int64_t{1});
  out("y_argmin1", {1, 1}, true);
  testing::AddNamedNode(g, "CumSum", {"x", "axis"}, "y_cumsum");
  out("y_cumsum", {1, 6});
  testing::SetAttr(testing::AddNamedNode(g, "CumSum", {"x", "axis"}, "y_cumsum_rev"), "reverse",
                   int64_t{1});
  out("y_cumsum_rev", {1, 6});
  // Pools over one plane.
  *g->add_input() = testing::FloatInfo("x2", {1, 1, 4, 4});
  auto* mp = testing::AddNamedNode(g, "MaxPool", {"x2"}, "y_maxpool");
  testing::SetAttr(mp, "kernel_shape", std::vector<int64_t>{2, 2});
  testing::SetAttr(mp, "strides", std::vector<int64_t>{2, 2});
  out("y_maxpool", {1, 1, 2, 2});
  testing::AddNamedNode(g, "GlobalAveragePool", {"x2"}, "y_gap");
  out("y_gap", {1, 1, 1, 1});
  // One window (no output loops), and windows of one tap (no tap loops).
  testing::SetAttr(testing::AddNamedNode(g, "AveragePool", {"x2"}, "y_avg_one"), "kernel_shape",
                   std::vector<int64_t>{4, 4});
  out("y_avg_one", {1, 1, 1, 1});
  auto* tap = testing::AddNamedNode(g, "MaxPool", {"x2"}, "y_max_tap");
  testing::SetAttr(tap, "kernel_shape", std::vector<int64_t>{1, 1});
  testing::SetAttr(tap, "strides", std::vector<int64_t>{2, 2});
  out("y_max_tap", {1, 1, 2, 2});
  Write("rows.onnx", m.SerializeAsString());
  Compile(file("rows.onnx"), "rows");
  const std::string c = *ReadFile(file("gen/rows.c"));
  EXPECT_FALSE(std::regex_search(c, std::regex(R"(for \(size_t (\w+) = 0; \1 < 1;)"))) << c;
  EXPECT_EQ(c.find("+ 0]"), std::string::npos) << c;
  EXPECT_EQ(c.find("* 1]"), std::string::npos) << c;
  Result r = RunKiln("test-onnx --backend c " + file("rows.onnx"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 passed"), std::string::npos) << r.out;
}

// The C tokenizer sees identifiers, not comments, literals or numbers.
TEST(CNames, IdentifiersSkipCommentsLiteralsAndNumbers) {
  const std::string text =
      "in0[i] = 1e5f + 0x1p-3 + in01 /* in0 */ + x_in0; // in0\n"
      "s = \"in0\\\" in0\"; c = 'i'; in0 += .5e+2in0;";
  std::vector<std::string> ids;
  codegen::c::ForEachIdentifier(
      text, [&](size_t pos, size_t len) { ids.push_back(text.substr(pos, len)); });
  EXPECT_EQ(ids, (std::vector<std::string>{"in0", "i", "in01", "x_in0", "s", "c", "in0"}));
  EXPECT_EQ(codegen::c::RenameIdentifiers(text, {{"in0", "x"}, {"c", "d"}}),
            "x[i] = 1e5f + 0x1p-3 + in01 /* in0 */ + x_in0; // in0\n"
            "s = \"in0\\\" in0\"; d = 'i'; x += .5e+2in0;");
  const std::set<std::string> idents = codegen::c::Identifiers(text);
  EXPECT_TRUE(idents.count("x_in0"));
  EXPECT_FALSE(idents.count("x"));
}

// An index expression prints folded: no `* 1`, no `+ 0`, one constant, cancelled terms gone.
TEST(EmitIndex, IxPrintsFolded) {
  using codegen::c::Ix;
  const Ix o = Ix::Var("o"), i = Ix::Var("i"), j = Ix::Var("j");
  EXPECT_EQ((o * 12 + i + Ix(3) - j * 4).str(), "o * 12 + i + 3 - j * 4");
  EXPECT_EQ((Ix(0) * 5 + i * 1 + Ix(0)).str(), "i");
  EXPECT_EQ((Ix(4) - j).str(), "4 - j");
  EXPECT_EQ((o - o).str(), "0");
  EXPECT_EQ((o * 0).str(), "0");
  EXPECT_EQ((Ix(2) + Ix(3)).str(), "5");
  EXPECT_EQ((Ix(0) - j * 2).str(), "-j * 2");
  EXPECT_EQ(codegen::c::Offset("in0", Ix(0)), "in0");
  EXPECT_EQ(codegen::c::Offset("in0", o * 8 + Ix(2)), "in0 + o * 8 + 2");
}

// A formula prints as C in the compute type: math functions by type, literals of the type,
// multiplications and divisions by one left out.
TEST(FormulaC, PrintsTheFormulaInTheComputeType) {
  using ops::SymExpr;
  const SymExpr x = SymExpr::Var("x");
  EXPECT_EQ(codegen::c::FormulaC(ops::unary::Celu()(x), DType::kFloat32),
            "(x > 0.0f ? x : expm1f(x))");
  EXPECT_EQ(codegen::c::FormulaC(ops::unary::Celu()(x), DType::kFloat64),
            "(x > 0.0 ? x : expm1(x))");
  EXPECT_EQ(codegen::c::FormulaC(ops::unary::Swish()(x), DType::kFloat32),
            "(x * (x >= 0.0f ? 1.0f / (1.0f + expf(-fabsf(x))) : expf(-fabsf(x)) / (1.0f + "
            "expf(-fabsf(x)))))");
  // Parentheses only where precedence and order ask for them.
  EXPECT_EQ(codegen::c::FormulaC(-(-x), DType::kFloat32), "-(-x)");
  EXPECT_EQ(codegen::c::FormulaC(-SymExpr(2) * x, DType::kFloat32), "(-2.0f * x)");
  EXPECT_EQ(codegen::c::FormulaC(x - (x + x) * x - (x - x), DType::kFloat64),
            "(x - (x + x) * x - (x - x))");
  EXPECT_EQ(codegen::c::FormulaC(x / (x * x) + -(x * x), DType::kFloat64),
            "(x / (x * x) + -(x * x))");
  EXPECT_EQ(codegen::c::FormulaC(x, DType::kFloat64), "x");
}

// Generated C builds warning-free with the strict flags at every optimization level users pick, on
// gcc and clang: constants the generator writes into kernel calls must not feed a compiler's
// loop analysis something it warns about (a MatMul [1, 200] x [200, 2], as in PaddleOCR's direction
// classifier, once tripped GCC's -Waggressive-loop-optimizations at -O2).
TEST_F(CBackendTest, EveryOptimizationLevelBuildsWarningFree) {
  onnx::ModelProto mm = testing::EmptyModel("matmul");
  auto* g = mm.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 200});
  *g->add_output() = testing::FloatInfo("y", {1, 2});
  testing::AddFloatInitializer(g, "w", {200, 2}, std::vector<float>(400, 0.25f));
  testing::AddNamedNode(g, "MatMul", {"x", "w"}, "y");
  Write("mm.onnx", mm.SerializeAsString());
  std::vector<std::pair<std::string, std::string>> models = {
      {Models() + "kws_cnn.onnx", ""},
      {Models() + "mlp_field.onnx", "--shape xyz=64,3"},
      {file("mm.onnx"), ""}};
  const std::string node = std::string(KILN_SOURCE_DIR) + "/../shared/conformance/onnx-node/";
  for (const char* t :
       {"test_lstm_defaults", "test_gru_defaults", "test_averagepool_2d_pads",
        "test_layer_normalization_2d_axis0", "test_conv_with_strides_and_asymmetric_padding",
        "test_gemm_all_attributes", "test_softmax_axis_1", "test_argmax_keepdims_example",
        "test_einsum_batch_matmul"})
    if (fs::exists(node + t)) models.push_back({node + t + "/model.onnx", ""});
  std::vector<std::string> compilers = {"gcc"};
  if (HaveTool("clang")) compilers.push_back("clang");
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string name = "m" + std::to_string(i);
    Compile(models[i].first, name, models[i].second);
    for (const auto& cc : compilers)
      for (const char* opt : {"-O0", "-O2", "-O3", "-Os"}) {
        auto [rc, log] = Sh("cd " + file("gen") + " && " + cc + " " + kStrict + " " + opt + " -c " +
                            name + ".c -o " + name + ".o && " + cc + " " + kStrict + " " + opt +
                            " -c " + name + "_params.c -o p.o");
        EXPECT_EQ(rc, 0) << models[i].first << " " << cc << " " << opt << ":\n" << log;
      }
  }
}

TEST_F(CBackendTest, UserErrors) {
  std::string kws = Models() + "kws_cnn.onnx";
  ExpectUserError("compile " + kws + " --target c --name 3x --out " + file("o"),
                  "must be a C identifier");
  ExpectUserError("compile " + kws + " --target c --name kiln_x --out " + file("o"),
                  "must be a C identifier");
  ExpectUserError("compile " + kws + " --target c --name model --out " + file("o"),
                  "must be a C identifier");
  ExpectUserError("compile " + kws + " --target c --name int --out " + file("o"),
                  "must be a C identifier");
  ExpectUserError(
      "compile " + Models() + "mlp_field.onnx --target c --name f --out " + file("o"),
      "input 'xyz' has dims [batch,3] not fixed at compile time; give them with --shape");
  // An op the C backend has no emitter for is named.
  onnx::ModelProto m = testing::AddReluModel(4);
  m.mutable_graph()->mutable_node(1)->set_op_type("Unique");
  Write("unique.onnx", m.SerializeAsString());
  ExpectUserError("compile " + file("unique.onnx") + " --target c --name u --out " + file("o"),
                  "the C backend cannot emit Unique (node 'relu' (Unique))");
}

}  // namespace
}  // namespace kiln
