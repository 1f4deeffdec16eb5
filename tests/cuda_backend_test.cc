// The CUDA backend (--target cuda, scalar path) from the outside. Without a GPU the generated
// NAME.cu is checked two ways: compiled as host C++ (-DKILN_CUDA_HOST_CHECK) and driven sample by
// sample against the host executor (`kiln run` on the whole batch), and compiled by nvcc for
// sm_90 and a PTX target, with ptxas's register and spill counts parsed and printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>

#include "cli_fixture.h"
#include "codegen/cuda/cuda_tensor_core.h"
#include "formula_ops_model.h"
#include "frontend/npy.h"
#include "onnx/onnx_pb.h"
#include "test_models.h"

namespace kiln {
namespace {

std::string Models() { return std::string(KILN_SOURCE_DIR) + "/models/"; }
std::string NodeTests() {
  return std::string(KILN_SOURCE_DIR) + "/../shared/conformance/onnx-node/";
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Deterministic inputs in [-1.5, 1.5).
Tensor Ramp(Dims dims, int seed) {
  Tensor t(DType::kFloat32, dims);
  for (int64_t i = 0; i < t.size(); ++i)
    t.data<float>()[i] =
        static_cast<float>(((i + 1) * (37 + 2 * seed) + seed * 11) % 97) / 32.0f - 1.5f;
  return t;
}

double RelL2(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;  // also equal infinities (masked attention scores)
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

struct Input {
  std::string name;
  Tensor batch;  // the leading dim is the sample count
};

struct PtxasReport {
  int registers = -1, spill_stores = -1, spill_loads = -1;
};

class CudaBackendTest : public CliTest {
 protected:
  // kiln compile --target cuda into gen/NAME.
  void Compile(const std::string& model, const std::string& name, const std::string& extra = "") {
    Result r = RunKiln("compile " + model + " --target cuda --name " + name + " --out " +
                       file("gen_" + name) + " " + extra);
    ASSERT_EQ(r.code, 0) << r.err;
  }

  // Builds NAME.cu as host C++ with a driver that runs every sample through the per-sample
  // function (emulate: the kernel itself on the lane emulator, at most 3 blocks, so that the
  // grid-stride loop runs), runs the host executor on the same batch, and compares each output.
  // Outputs start as NaN: a sample the kernel does not write fails the check.
  void HostCheck(const std::string& model, const std::string& name,
                 const std::vector<Input>& inputs, int num_outputs, double tol,
                 const std::string& extra = "", bool emulate = false) {
    Compile(model, name, extra);
    if (HasFatalFailure()) return;
    int64_t K = inputs[0].batch.dims()[0];
    for (const auto& in : inputs)
      ASSERT_EQ(in.batch.dims()[0], K) << in.name << ": every input's leading dim is the batch";
    std::string u = Upper(name), gen = file("gen_" + name);
    std::string drv =
        "#include \"" + name +
        ".cu\"\n#include <cstdio>\n#include <cstdlib>\n#include <vector>\n"
        "static void io(const char *path, std::vector<float> &v, bool read) {\n"
        "  FILE *f = fopen(path, read ? \"rb\" : \"wb\");\n  if (!f) exit(2);\n"
        "  size_t n = read ? fread(v.data(), 4, v.size(), f) : fwrite(v.data(), 4, v.size(), f);\n"
        "  fclose(f);\n  if (n != v.size()) exit(3);\n}\n"
        "int main(int argc, char **argv) {\n  (void)argc;\n  const long K = atol(argv[1]);\n";
    std::string call = "int rc = kiln_" + name + (emulate ? "_emulate(" : "_host_check(");
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::string v = "in" + std::to_string(k);
      drv += "  std::vector<float> " + v + "(K * KILN_" + u + "_INPUT" + std::to_string(k) +
             "_ELEMENTS);\n";
      drv += "  io(argv[" + std::to_string(2 + k) + "], " + v + ", true);\n";
      call += (k ? ", " : "") + v + ".data()";
    }
    for (int k = 0; k < num_outputs; ++k) {
      drv += "  std::vector<float> out" + std::to_string(k) + "(K * KILN_" + u + "_OUTPUT" +
             std::to_string(k) + "_ELEMENTS, NAN);\n";
      call += ", out" + std::to_string(k) + ".data()";
    }
    drv += "  " + call + (emulate ? ", K, 3);\n" : ", K);\n") + "  if (rc != KILN_OK) return 4;\n";
    for (int k = 0; k < num_outputs; ++k)
      drv += "  io(argv[" + std::to_string(2 + inputs.size() + k) + "], out" + std::to_string(k) +
             ", false);\n";
    drv += "  return 0;\n}\n";
    Write("drv_" + name + ".cc", drv);
    build_driver_ = "g++ -std=c++17 -O1 -Wall -Wextra -Werror -x c++ -DKILN_CUDA_HOST_CHECK -I" +
                    gen + " " + file("drv_" + name + ".cc") + " -o " + file("drv_" + name) + " -lm";
    auto [rc, log] = Sh(build_driver_);
    ASSERT_EQ(rc, 0) << log;

    std::string args = std::to_string(K), shapes, feeds;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& t = inputs[k].batch;
      std::string raw = file(name + "_in" + std::to_string(k) + ".f32");
      Write(name + "_in" + std::to_string(k) + ".f32",
            std::string(static_cast<const char*>(t.raw()), t.nbytes()));
      Write(name + "_in" + std::to_string(k) + ".npy", frontend::SerializeNpy(t));
      args += " " + raw;
      std::string dims;
      for (size_t d = 0; d < t.dims().size(); ++d)
        dims += (d ? "," : "") + std::to_string(t.dims()[d]);
      shapes += " --shape " + inputs[k].name + "=" + dims;
      feeds += " --input " + inputs[k].name + "=" + file(name + "_in" + std::to_string(k) + ".npy");
    }
    for (int k = 0; k < num_outputs; ++k)
      args += " " + file(name + "_out" + std::to_string(k) + ".f32");
    run_driver_ = file("drv_" + name) + " " + args;
    auto [drc, dlog] = Sh(run_driver_);
    ASSERT_EQ(drc, 0) << dlog;
    Result ref = RunKiln("run " + model + shapes + feeds + " --output-dir " + file("ref_" + name));
    ASSERT_EQ(ref.code, 0) << ref.err;
    for (int k = 0; k < num_outputs; ++k) {
      auto want =
          frontend::LoadNpyFile(file("ref_" + name + "/output_" + std::to_string(k) + ".npy"));
      ASSERT_TRUE(want.ok()) << want.status().message();
      auto got = ReadFile(file(name + "_out" + std::to_string(k) + ".f32"));
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(got->size(), want->nbytes()) << name << " output " << k;
      double err =
          RelL2(reinterpret_cast<const float*>(got->data()), want->data<float>(), want->size());
      EXPECT_LE(err, tol) << name << " output " << k;
      std::cout << "[ host check ] " << name << " output " << k << ": " << K
                << " samples, rel L2 error " << err << "\n";
    }
  }

  // nvcc for sm_90 (ptxas -v: registers, spills) and for a PTX target.
  PtxasReport NvccCheck(const std::string& name) {
    PtxasReport r;
    std::string gen = file("gen_" + name);
    auto [rc, log] = Sh(std::string(KILN_NVCC) + " -arch=sm_90 -Xptxas -v -c " + gen + "/" + name +
                        ".cu -o " + gen + "/" + name + ".o");
    EXPECT_EQ(rc, 0) << log;
    std::smatch m;
    if (std::regex_search(log, m,
                          std::regex("(\\d+) bytes spill stores, (\\d+) bytes spill loads"))) {
      r.spill_stores = std::stoi(m[1]);
      r.spill_loads = std::stoi(m[2]);
    }
    if (std::regex_search(log, m, std::regex("Used (\\d+) registers")))
      r.registers = std::stoi(m[1]);
    auto [prc, plog] = Sh(std::string(KILN_NVCC) + " --gpu-architecture=compute_90 -ptx " + gen +
                          "/" + name + ".cu -o " + gen + "/" + name + ".ptx");
    EXPECT_EQ(prc, 0) << plog;
    auto ptx = ReadFile(gen + "/" + name + ".ptx");
    EXPECT_TRUE(ptx.ok() && ptx->find(".entry") != std::string::npos);
    int stack = -1;
    if (std::regex_search(log, m, std::regex("(\\d+) bytes stack frame"))) stack = std::stoi(m[1]);
    std::cout << "[ ptxas sm_90 ] " << name << ": " << r.registers << " registers, "
              << r.spill_stores << " bytes spill stores, " << r.spill_loads
              << " bytes spill loads, " << stack << " bytes stack frame\n";
    EXPECT_GE(r.registers, 0) << log;
    return r;
  }

  bool HaveNvcc() { return std::string(KILN_NVCC).size() > 0; }

  std::string build_driver_, run_driver_;  // of the last HostCheck
};

// A copy of the model whose first input and output have a symbolic leading dim, so that the host
// executor runs the whole batch of samples at once.
std::string WithBatchDim(const std::string& model, const std::string& out) {
  onnx::ModelProto m;
  auto bytes = ReadFile(model);
  EXPECT_TRUE(bytes.ok() && m.ParseFromString(*bytes)) << model;
  for (auto* vi : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)})
    vi->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param(
        "batch");
  EXPECT_TRUE(WriteFile(out, m.SerializeAsString()).ok());
  return out;
}

onnx::ValueInfoProto BatchInfo(const std::string& name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto vi = testing::FloatInfo(name, dims);
  vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  return vi;
}

void AddWeight(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, int seed,
               float scale) {
  auto* w = g->add_initializer();
  w->set_name(name);
  w->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    w->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i)
    w->add_float_data(scale * (static_cast<float>(((i + 3) * (29 + seed)) % 61) / 30.0f - 1.0f));
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
                         std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// A pre-norm transformer block on [batch, T, D]: single-head attention (MatMul, a per-sample
// Transpose, Softmax) and a Gelu MLP of width 2D, with residuals and two LayerNormalizations.
onnx::ModelProto TransformerBlock(int64_t T, int64_t D) {
  onnx::ModelProto m;
  m.set_ir_version(9);
  m.add_opset_import()->set_version(20);
  auto* g = m.mutable_graph();
  g->set_name("block");
  *g->add_input() = BatchInfo("x", {1, T, D});
  *g->add_output() = BatchInfo("y", {1, T, D});
  int seed = 0;
  for (const char* w : {"wq", "wk", "wv", "wo"}) AddWeight(g, w, {D, D}, seed++, 0.25f);
  AddWeight(g, "w1", {D, 2 * D}, seed++, 0.25f);
  AddWeight(g, "b1", {2 * D}, seed++, 0.1f);
  AddWeight(g, "w2", {2 * D, D}, seed++, 0.2f);
  AddWeight(g, "b2", {D}, seed++, 0.1f);
  AddWeight(g, "ln1.scale", {D}, seed++, 1.0f);
  AddWeight(g, "ln1.bias", {D}, seed++, 0.1f);
  AddWeight(g, "ln2.scale", {D}, seed++, 1.0f);
  AddWeight(g, "ln2.bias", {D}, seed++, 0.1f);
  auto* s = g->add_initializer();
  s->set_name("scale");
  s->set_data_type(onnx::TensorProto::FLOAT);
  s->add_float_data(1.0f / std::sqrt(static_cast<float>(D)));
  AddNode(g, "LayerNormalization", "ln1", {"x", "ln1.scale", "ln1.bias"}, {"h"});
  AddNode(g, "MatMul", "q", {"h", "wq"}, {"q"});
  AddNode(g, "MatMul", "k", {"h", "wk"}, {"k"});
  AddNode(g, "MatMul", "v", {"h", "wv"}, {"v"});
  auto* t = AddNode(g, "Transpose", "kt", {"k"}, {"kt"});
  auto* perm = t->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int p : {0, 2, 1}) perm->add_ints(p);
  AddNode(g, "MatMul", "qk", {"q", "kt"}, {"s"});
  AddNode(g, "Mul", "scaled", {"s", "scale"}, {"ss"});
  AddNode(g, "Softmax", "softmax", {"ss"}, {"p"});
  AddNode(g, "MatMul", "pv", {"p", "v"}, {"a"});
  AddNode(g, "MatMul", "o", {"a", "wo"}, {"o"});
  AddNode(g, "Add", "res1", {"x", "o"}, {"r"});
  AddNode(g, "LayerNormalization", "ln2", {"r", "ln2.scale", "ln2.bias"}, {"h2"});
  AddNode(g, "MatMul", "fc1", {"h2", "w1"}, {"f1"});
  AddNode(g, "Add", "fc1.bias", {"f1", "b1"}, {"f1b"});
  AddNode(g, "Gelu", "gelu", {"f1b"}, {"gl"});
  AddNode(g, "MatMul", "fc2", {"gl", "w2"}, {"f2"});
  AddNode(g, "Add", "fc2.bias", {"f2", "b2"}, {"f2b"});
  AddNode(g, "Add", "res2", {"r", "f2b"}, {"y"});
  return m;
}

TEST_F(CudaBackendTest, MlpFieldMatchesHostFp32AndFp16) {
  HostCheck(Models() + "mlp_field.onnx", "field", {{"xyz", Ramp({257, 3}, 1)}}, 1, 1e-5);
  HostCheck(Models() + "mlp_field.onnx", "field16", {{"xyz", Ramp({257, 3}, 1)}}, 1, 1e-2,
            "--precision fp16 --tensor-cores off");
}

TEST_F(CudaBackendTest, KwsCnnMatchesHost) {
  HostCheck(WithBatchDim(Models() + "kws_cnn.onnx", file("kws.onnx")), "kws",
            {{"mfcc", Ramp({3, 1, 49, 10}, 2)}}, 1, 1e-5);
}

TEST_F(CudaBackendTest, TransformerBlockMatchesHostFp32AndFp16) {
  Write("block.onnx", TransformerBlock(4, 16).SerializeAsString());
  HostCheck(file("block.onnx"), "block", {{"x", Ramp({33, 4, 16}, 3)}}, 1, 1e-5);
  HostCheck(file("block.onnx"), "block16", {{"x", Ramp({33, 4, 16}, 3)}}, 1, 1e-2,
            "--precision fp16 --tensor-cores off");
}

// A SIREN-style field: 3 inputs, three Gemm + Sin layers of `width` (sin(30 x) folded into the
// weights, as exported), a linear head of 3.
onnx::ModelProto SirenModel(int64_t width) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("siren");
  *g->add_input() = BatchInfo("x", {1, 3});
  *g->add_output() = BatchInfo("y", {1, 3});
  std::string h = "x";
  int64_t k = 3;
  for (int l = 0; l < 3; ++l) {
    std::string w = "w" + std::to_string(l), b = "b" + std::to_string(l);
    AddWeight(g, w, {k, width}, 10 + l, l == 0 ? 3.0f : std::sqrt(6.0f / width));
    AddWeight(g, b, {width}, 20 + l, 0.5f);
    AddNode(g, "Gemm", "fc" + std::to_string(l), {h, w, b}, {"z" + std::to_string(l)});
    AddNode(g, "Sin", "sin" + std::to_string(l), {"z" + std::to_string(l)},
            {"h" + std::to_string(l)});
    h = "h" + std::to_string(l);
    k = width;
  }
  AddWeight(g, "wo", {width, 3}, 30, 0.1f);
  AddNode(g, "MatMul", "head", {h, "wo"}, {"y"});
  return m;
}

// An MLP of its own: a Gemm with transB, alpha and beta, widths that need padding (7 -> 16,
// 96, 40 -> 48, 5 -> 8), Tanh, Sigmoid and LeakyRelu, a bias of one element broadcast, and a
// per-sample Softmax epilogue.
onnx::ModelProto MixedMlp() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("mixed");
  *g->add_input() = BatchInfo("x", {1, 7});
  *g->add_output() = BatchInfo("y", {1, 5});
  AddWeight(g, "w0", {96, 7}, 1, 0.6f);
  AddWeight(g, "c0", {1, 96}, 2, 0.3f);
  AddWeight(g, "w1", {96, 128}, 3, 0.15f);
  AddWeight(g, "b1", {128}, 4, 0.2f);
  AddWeight(g, "w2", {128, 40}, 5, 0.15f);
  AddWeight(g, "b2", {1}, 6, 0.4f);
  AddWeight(g, "w3", {40, 5}, 7, 0.3f);
  AddWeight(g, "b3", {1, 5}, 8, 0.1f);
  auto* gemm = AddNode(g, "Gemm", "fc0", {"x", "w0", "c0"}, {"z0"});
  testing::SetAttr(gemm, "transB", int64_t{1});
  testing::SetAttr(gemm, "alpha", 0.7f);
  testing::SetAttr(gemm, "beta", 1.3f);
  AddNode(g, "Tanh", "tanh0", {"z0"}, {"h0"});
  AddNode(g, "MatMul", "mm1", {"h0", "w1"}, {"p1"});
  AddNode(g, "Add", "bias1", {"b1", "p1"}, {"z1"});
  AddNode(g, "Sigmoid", "sig1", {"z1"}, {"h1"});
  AddNode(g, "MatMul", "mm2", {"h1", "w2"}, {"p2"});
  AddNode(g, "Add", "bias2", {"p2", "b2"}, {"z2"});
  testing::SetAttr(AddNode(g, "LeakyRelu", "leaky2", {"z2"}, {"h2"}), "alpha", 0.1f);
  AddNode(g, "MatMul", "mm3", {"h2", "w3"}, {"p3"});
  AddNode(g, "Add", "bias3", {"p3", "b3"}, {"z3"});
  AddNode(g, "Softmax", "softmax", {"z3"}, {"y"});
  return m;
}

// The fused-MLP path (mma.sync, activations in registers) on the lane emulator: mlp_field at
// batch tails that leave warps partly empty (1, 31, 33) and one (4093) where three blocks loop
// grid-stride over 16 warp iterations each; fp32 (the scalar kernel) on the emulator too.
TEST_F(CudaBackendTest, FusedMlpOnLaneEmulatorMatchesHost) {
  for (int64_t n : {1, 31, 33, 4093}) {
    std::string k = std::to_string(n);
    HostCheck(Models() + "mlp_field.onnx", "mma16_" + k, {{"xyz", Ramp({n, 3}, 1)}}, 1, 1e-2,
              "--precision fp16", true);
    // E4M3 keeps 3 mantissa bits (2^-4 relative rounding per weight): 4e-2 over many samples.
    HostCheck(Models() + "mlp_field.onnx", "mma8_" + k, {{"xyz", Ramp({n, 3}, 2)}}, 1, 8e-2,
              "--precision fp8", true);
    HostCheck(Models() + "mlp_field.onnx", "emu32_" + k, {{"xyz", Ramp({n, 3}, 3)}}, 1, 1e-5, "",
              true);
  }
  auto cu = ReadFile(file("gen_mma16_1/mma16_1.cu"));
  ASSERT_TRUE(cu.ok());
  EXPECT_NE(cu->find(" * tensor cores: a fused MLP of 5 layers (100% of the multiply-adds)"),
            std::string::npos);
  EXPECT_NE(cu->find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), std::string::npos);
  EXPECT_NE(cu->find("= kiln_pack_relu(kiln_cc[0], kiln_cc[1]);"), std::string::npos)
      << "ReLU with the packing: cvt.rn.relu.f16x2.f32";
  auto cu8 = ReadFile(file("gen_mma8_1/mma8_1.cu"));
  ASSERT_TRUE(cu8.ok());
  EXPECT_NE(cu8->find("kiln_e4m3x4(kiln_e[0], &kiln_w[0], &kiln_w[1]);"), std::string::npos);
}

// Models the repository does not hold: a mixed-width MLP (Gemm attributes, padding, three
// activations, a Softmax epilogue) and a 3 x 128 SIREN.
TEST_F(CudaBackendTest, FusedMlpOfItsOwnMatchesHost) {
  Write("mixed.onnx", MixedMlp().SerializeAsString());
  Write("siren.onnx", SirenModel(128).SerializeAsString());
  for (int64_t n : {33, 1000}) {
    std::string k = std::to_string(n);
    HostCheck(file("mixed.onnx"), "mixed16_" + k, {{"x", Ramp({n, 7}, 5)}}, 1, 1e-2,
              "--precision fp16", true);
    HostCheck(file("mixed.onnx"), "mixed8_" + k, {{"x", Ramp({n, 7}, 6)}}, 1, 5e-2,
              "--precision fp8", true);
    HostCheck(file("siren.onnx"), "siren16_" + k, {{"x", Ramp({n, 3}, 7)}}, 1, 1e-2,
              "--precision fp16", true);
  }
  auto cu = ReadFile(file("gen_mixed16_33/mixed16_33.cu"));
  ASSERT_TRUE(cu.ok());
  EXPECT_NE(cu->find(" * tensor cores: a fused MLP of 4 layers"), std::string::npos);
  EXPECT_NE(cu->find("32 samples per warp"), std::string::npos) << "width 128: two m-tiles";
}

// The emulator's race checker: the kernel without the barrier after the weights' staging, or
// without the __syncwarp between the prologue's tile writes and ldmatrix, is reported.
TEST_F(CudaBackendTest, LaneEmulatorReportsADeletedBarrier) {
  const std::pair<const char*, const char*> barriers[] = {
      {"  KILN_SYNCTHREADS(); /* the weights are staged */\n", "block"},
      {"  kiln_syncwarp(); /* the input rows are in the tile */\n", "warp"}};
  for (const auto& [line, what] : barriers) {
    std::string name = std::string("race_") + what;
    HostCheck(Models() + "mlp_field.onnx", name, {{"xyz", Ramp({300, 3}, 1)}}, 1, 1e-2,
              "--precision fp16", true);
    std::string path = file("gen_" + name + "/" + name + ".cu");
    auto cu = ReadFile(path);
    ASSERT_TRUE(cu.ok());
    size_t at = cu->find(line);
    ASSERT_NE(at, std::string::npos) << line;
    Write("gen_" + name + "/" + name + ".cu", cu->substr(0, at) + cu->substr(at + strlen(line)));
    auto [rc, log] = Sh(build_driver_);
    ASSERT_EQ(rc, 0) << log;
    auto [drc, dlog] = Sh(run_driver_);
    EXPECT_NE(drc, 0) << what;
    EXPECT_NE(dlog.find("shared-memory race (RAW)"), std::string::npos) << dlog.substr(0, 2000);
  }
}

// The tensor-core path on the host: lanes as a loop, WMMA as an emulation that enforces WMMA's
// alignment rules, so the tile layout, padding and staging are what is checked here.
TEST_F(CudaBackendTest, TensorCoreMlpFieldMatchesHost) {
  // 257 samples: the last warp has one live lane.
  HostCheck(Models() + "mlp_field.onnx", "tc16", {{"xyz", Ramp({257, 3}, 1)}}, 1, 1e-2,
            "--precision fp16 --tensor-cores wmma");
  auto cu = ReadFile(file("gen_tc16/tc16.cu"));
  ASSERT_TRUE(cu.ok());
  EXPECT_NE(cu->find(" * tensor cores: 5 matrix products (100% of the multiply-adds)"),
            std::string::npos)
      << "--tensor-cores wmma: the MLP as warp steps";
  EXPECT_NE(cu->find("kiln_tc_matmul<2, 3, 4, 56, 72, 68>"), std::string::npos)
      << "fc0: K 39 padded to 48, N 64";
  EXPECT_NE(cu->find("= kiln_fast_sinf(slot"), std::string::npos)
      << "fp16: the encoding's Sin on __sinf";
  // E4M3 keeps 3 mantissa bits: the error is the weights' rounding, about 2^-5 each.
  HostCheck(Models() + "mlp_field.onnx", "tc8", {{"xyz", Ramp({100, 3}, 1)}}, 1, 5e-2,
            "--precision fp8 --tensor-cores wmma");
  auto cu8 = ReadFile(file("gen_tc8/tc8.cu"));
  ASSERT_TRUE(cu8.ok());
  EXPECT_NE(cu8->find("kiln_tc_stage8("), std::string::npos);
  auto h16 = ReadFile(file("gen_tc16/tc16.h")), h8 = ReadFile(file("gen_tc8/tc8.h"));
  ASSERT_TRUE(h16.ok() && h8.ok());
  std::smatch m16, m8;
  ASSERT_TRUE(std::regex_search(*h16, m16, std::regex("WEIGHT_BYTES (\\d+)")));
  ASSERT_TRUE(std::regex_search(*h8, m8, std::regex("WEIGHT_BYTES (\\d+)")));
  EXPECT_LT(std::stoi(m8[1]), std::stoi(m16[1]) * 6 / 10)
      << "E4M3 weights take half the bytes of half ones";
}

// Convolution and pooling geometry: groups of several output channels, a depthwise conv with
// dilation, pads and strides (bounds checks kept only where a tap can cross an edge), a
// pointwise conv (no loops or checks for the window), average pooling that counts the taps
// inside and max pooling with pads.
TEST_F(CudaBackendTest, ConvAndPoolGeometryMatchHost) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("geometry");
  *g->add_input() = BatchInfo("x", {1, 4, 9, 7});
  *g->add_output() = BatchInfo("y", {1, 6, 3, 3});
  AddWeight(g, "wg", {6, 2, 3, 3}, 1, 0.4f);
  AddWeight(g, "bg", {6}, 2, 0.2f);
  AddWeight(g, "wd", {6, 1, 3, 3}, 3, 0.4f);
  AddWeight(g, "wp", {6, 6, 1, 1}, 4, 0.4f);
  auto* grouped = AddNode(g, "Conv", "grouped", {"x", "wg", "bg"}, {"a"});
  testing::SetAttr(grouped, "group", int64_t{2});
  testing::SetAttr(grouped, "pads", std::vector<int64_t>{1, 1, 1, 1});
  testing::SetAttr(grouped, "strides", std::vector<int64_t>{2, 1});
  auto* dw = AddNode(g, "Conv", "depthwise", {"a", "wd"}, {"b"});
  testing::SetAttr(dw, "group", int64_t{6});
  testing::SetAttr(dw, "dilations", std::vector<int64_t>{2, 2});
  testing::SetAttr(dw, "pads", std::vector<int64_t>{2, 1, 2, 1});
  AddNode(g, "Conv", "pointwise", {"b", "wp"}, {"c"});
  auto* avg = AddNode(g, "AveragePool", "avg", {"c"}, {"d"});
  testing::SetAttr(avg, "kernel_shape", std::vector<int64_t>{3, 3});
  testing::SetAttr(avg, "pads", std::vector<int64_t>{1, 1, 1, 1});
  auto* mx = AddNode(g, "MaxPool", "max", {"d"}, {"y"});
  testing::SetAttr(mx, "kernel_shape", std::vector<int64_t>{2, 3});
  testing::SetAttr(mx, "strides", std::vector<int64_t>{2, 2});
  testing::SetAttr(mx, "pads", std::vector<int64_t>{0, 1, 1, 1});
  Write("geometry.onnx", m.SerializeAsString());
  HostCheck(file("geometry.onnx"), "geometry", {{"x", Ramp({5, 4, 9, 7}, 2)}}, 1, 1e-5);
  auto cu = ReadFile(file("gen_geometry/geometry.cu"));
  ASSERT_TRUE(cu.ok());
  EXPECT_EQ(cu->find(" * 1 "), std::string::npos) << "indices are folded";
  EXPECT_EQ(cu->find(" < 1; "), std::string::npos) << "no loop of one trip";
}

TEST_F(CudaBackendTest, TensorCoreTransformerBlockMatchesHost) {
  Write("block.onnx", TransformerBlock(4, 16).SerializeAsString());
  HostCheck(file("block.onnx"), "tcblock", {{"x", Ramp({45, 4, 16}, 3)}}, 1, 1e-2,
            "--precision fp16 --tensor-cores on");
  auto cu = ReadFile(file("gen_tcblock/tcblock.cu"));
  ASSERT_TRUE(cu.ok());
  // q, k, v, o, fc1, fc2 (4 rows per sample: 128-row tiles); the attention products stay per lane.
  EXPECT_NE(cu->find(" * tensor cores: 6 matrix products"), std::string::npos);
  EXPECT_NE(cu->find("kiln_tc_matmul<8, 1, 2, 24, 40, 36>"), std::string::npos)
      << "fc1: 4 rows, K 16, N 32";
}

// A model of its own: rows of A per sample (3), K and N that need padding (20 -> 32, 24 -> 32,
// 72 -> 80, 40 -> 48), Gemm's transB, alpha, beta and broadcast bias.
TEST_F(CudaBackendTest, TensorCoreGemmAttributesMatchHost) {
  onnx::ModelProto m;
  m.set_ir_version(9);
  m.add_opset_import()->set_version(20);
  auto* g = m.mutable_graph();
  g->set_name("gemms");
  *g->add_input() = BatchInfo("x", {1, 3, 20});
  *g->add_output() = BatchInfo("y", {1, 40});
  AddWeight(g, "w0", {20, 24}, 1, 0.3f);
  AddWeight(g, "w1", {40, 72}, 2, 0.2f);
  AddWeight(g, "c1", {1, 40}, 3, 0.5f);
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(0);
  shape->add_int64_data(72);
  AddNode(g, "MatMul", "mm0", {"x", "w0"}, {"h"});
  AddNode(g, "Relu", "relu", {"h"}, {"hr"});
  AddNode(g, "Reshape", "flat", {"hr", "shape"}, {"hf"});
  auto* gemm = AddNode(g, "Gemm", "gemm", {"hf", "w1", "c1"}, {"z"});
  testing::SetAttr(gemm, "transB", int64_t{1});
  testing::SetAttr(gemm, "alpha", 0.5f);
  testing::SetAttr(gemm, "beta", 2.0f);
  AddNode(g, "Tanh", "tanh", {"z"}, {"y"});
  Write("gemms.onnx", m.SerializeAsString());
  HostCheck(file("gemms.onnx"), "gemms", {{"x", Ramp({70, 3, 20}, 4)}}, 1, 1e-2,
            "--precision fp16 --tensor-cores wmma");
  auto cu = ReadFile(file("gen_gemms/gemms.cu"));
  ASSERT_TRUE(cu.ok());
  EXPECT_NE(cu->find("kiln_tc_matmul<6, 2, 2, 40, 40, 36>"), std::string::npos)
      << "mm0: 3 rows, K 20, N 24";
  EXPECT_NE(cu->find("kiln_tc_matmul<2, 5, 3, 88, 56, 52>"), std::string::npos)
      << "gemm: K 72, N 40";
}

TEST_F(CudaBackendTest, TensorCoreOptionErrors) {
  std::string field = Models() + "mlp_field.onnx --target cuda --name f --out " + file("gen");
  ExpectUserError("compile " + field + " --tensor-cores on",
                  "--tensor-cores on multiplies half inputs: give --precision fp16 or fp8");
  ExpectUserError("compile " + field + " --precision fp8 --tensor-cores off",
                  "--precision fp8 stores the tensor-core layers' weights");
  ExpectUserError("compile " + Models() +
                      "mlp_field.onnx --target c --tensor-cores on --name f --out " + file("gen"),
                  "--tensor-cores goes with --target cuda");
  onnx::ModelProto relu;
  relu.set_ir_version(8);
  relu.add_opset_import()->set_version(17);
  *relu.mutable_graph()->add_input() = BatchInfo("x", {1, 6});
  *relu.mutable_graph()->add_output() = BatchInfo("y", {1, 6});
  AddNode(relu.mutable_graph(), "Relu", "relu", {"x"}, {"y"});
  Write("relu.onnx", relu.SerializeAsString());
  ExpectUserError("compile " + file("relu.onnx") +
                      " --target cuda --name r --precision fp16 --tensor-cores on --out " +
                      file("gen"),
                  "--tensor-cores on: no MatMul or Gemm fits the tensor-core path");
}

TEST(CudaE4M3, RoundsToNearestEvenAndSaturates) {
  using codegen::cuda::E4M3ToFloat;
  using codegen::cuda::FloatToE4M3;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(FloatToE4M3(E4M3ToFloat(static_cast<uint8_t>(c))), c)
        << "code " << c << " round-trips";
  }
  EXPECT_EQ(E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(E4M3ToFloat(FloatToE4M3(1000.0f)), 448.0f);
  EXPECT_EQ(E4M3ToFloat(FloatToE4M3(-1000.0f)), -448.0f);
  EXPECT_EQ(E4M3ToFloat(FloatToE4M3(1.0625f)), 1.0f);  // halfway between 1 and 1.125: the even code
  EXPECT_EQ(E4M3ToFloat(FloatToE4M3(1.1875f)),
            1.25f);  // halfway between 1.125 and 1.25: the even code
  EXPECT_EQ(E4M3ToFloat(FloatToE4M3(1.07f)), 1.125f);
  EXPECT_EQ(FloatToE4M3(std::ldexp(1.0f, -11)), 0);  // under half the smallest subnormal
  EXPECT_EQ(FloatToE4M3(std::nanf("")) & 0x7f, 0x7f);
}

// Models from ONNX's own backend tests (not in this repository) whose inputs all have the same
// leading dim, taken as the batch: each row of the test's inputs is a sample. Among them the
// expanded (MatMul / Softmax / Transpose) attention tests.
TEST_F(CudaBackendTest, OnnxNodeTestsMatchHost) {
  const std::vector<std::string> tests = {
      "test_relu",
      "test_sigmoid",
      "test_tanh",
      "test_softmax_axis_1",
      "test_softmax_axis_2",
      "test_softmax_large_number",
      "test_logsoftmax_axis_1",
      "test_erf",
      "test_gelu_default_2",
      "test_gelu_tanh_2",
      "test_gelu_default_2_expanded",
      "test_leakyrelu",
      "test_softplus",
      "test_exp",
      "test_sin",
      "test_cos",
      "test_log",
      "test_sqrt",
      "test_neg",
      "test_abs",
      "test_add",
      "test_sub",
      "test_mul",
      "test_div",
      "test_pow",
      "test_max_two_inputs",
      "test_min_two_inputs",
      "test_sum_two_inputs",
      "test_clip_default_inbounds",
      "test_hardswish",
      "test_mish_expanded",
      "test_concat_3d_axis_1",
      "test_concat_3d_axis_negative_1",
      "test_flatten_axis1",
      "test_transpose_all_permutations_1",
      "test_matmul_3d",
      "test_matmul_4d",
      "test_basic_conv_with_padding",
      "test_conv_with_strides_and_asymmetric_padding",
      "test_globalaveragepool",
      "test_globalmaxpool",
      "test_maxpool_2d_pads",
      "test_maxpool_2d_dilations",
      "test_averagepool_2d_pads",
      "test_averagepool_2d_pads_count_include_pad",
      "test_averagepool_2d_ceil",
      "test_attention_3d_expanded",
      "test_attention_3d_causal_expanded",
      "test_attention_4d_expanded",
      "test_attention_4d_diff_heads_sizes_scaled_expanded",
      "test_attention_4d_with_qk_matmul_expanded",
  };
  int ran = 0;
  for (const auto& t : tests) {
    std::string dir = NodeTests() + t;
    onnx::ModelProto m;
    auto model_bytes = ReadFile(dir + "/model.onnx");
    if (!model_bytes.ok()) continue;  // the conformance folder is not here
    ASSERT_TRUE(m.ParseFromString(*model_bytes)) << t;
    std::vector<Input> inputs;
    for (int k = 0; k < m.graph().input_size(); ++k) {
      auto bytes = ReadFile(dir + "/test_data_set_0/input_" + std::to_string(k) + ".pb");
      ASSERT_TRUE(bytes.ok()) << t;
      onnx::TensorProto tp;
      ASSERT_TRUE(tp.ParseFromString(*bytes)) << t;
      ASSERT_EQ(tp.data_type(), onnx::TensorProto::FLOAT) << t;
      Tensor x(DType::kFloat32, Dims(tp.dims().begin(), tp.dims().end()));
      if (!tp.raw_data().empty())
        std::memcpy(x.raw(), tp.raw_data().data(), x.nbytes());
      else
        std::copy(tp.float_data().begin(), tp.float_data().end(), x.data<float>());
      inputs.push_back({m.graph().input(k).name(), x});
    }
    SCOPED_TRACE(t);
    std::string name = "n";
    name += std::to_string(ran);  // (not "n" + ...: GCC 12 warns -Wrestrict on that spelling)
    HostCheck(dir + "/model.onnx", name, inputs, m.graph().output_size(), 1e-5);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no onnx-node conformance tests under " << NodeTests();
}

// Every op of ops/unary_ops.h that --target cuda emits (kCudaUnary), default and other attribute
// values, as device expressions against the host executor.
TEST_F(CudaBackendTest, EveryFormulaOpMatchesHost) {
  onnx::ModelProto m = testing::FormulaOpsModel(5, 24, /*float64=*/false, ops::kCudaUnary);
  Write("formulas.onnx", m.SerializeAsString());
  HostCheck(file("formulas.onnx"), "formulas", {{"x", Ramp({5, 24}, 3)}}, m.graph().output_size(),
            1e-5);
}

TEST_F(CudaBackendTest, NvccBuildsWithoutSpills) {
  if (!HaveNvcc()) GTEST_SKIP() << "nvcc not found; the CUDA build check is skipped";
  Compile(Models() + "mlp_field.onnx", "field");
  Compile(Models() + "mlp_field.onnx", "field16", "--precision fp16 --tensor-cores off");
  Write("block.onnx", TransformerBlock(4, 8).SerializeAsString());
  Compile(file("block.onnx"), "block");
  Compile(Models() + "mlp_field.onnx", "tc16", "--precision fp16 --tensor-cores wmma");
  Compile(Models() + "mlp_field.onnx", "tc8", "--precision fp8 --tensor-cores wmma");
  Compile(file("block.onnx"), "tcblock", "--precision fp16 --tensor-cores on");
  // The fused-MLP path up to width 128: mlp_field, a 3 x 128 SIREN and a mixed-width MLP.
  Compile(Models() + "mlp_field.onnx", "mma16", "--precision fp16");
  Compile(Models() + "mlp_field.onnx", "mma8", "--precision fp8");
  Write("siren.onnx", SirenModel(128).SerializeAsString());
  Compile(file("siren.onnx"), "siren16", "--precision fp16");
  Compile(file("siren.onnx"), "siren8", "--precision fp8");
  Write("mixed.onnx", MixedMlp().SerializeAsString());
  Compile(file("mixed.onnx"), "mixed16", "--precision fp16");
  for (const char* name : {"field", "field16", "block", "tc16", "tc8", "tcblock", "mma16", "mma8",
                           "siren16", "siren8", "mixed16"}) {
    PtxasReport r = NvccCheck(name);
    EXPECT_EQ(r.spill_stores, 0) << name;
    EXPECT_EQ(r.spill_loads, 0) << name;
  }
  // Reported, not asserted: with D = 16 five [4, 16] values are live at the attention scores
  // (x, h, q, k and its transpose: 320 floats), more than a thread's 255 registers.
  Write("block16.onnx", TransformerBlock(4, 16).SerializeAsString());
  Compile(file("block16.onnx"), "block_d16");
  NvccCheck("block_d16");
  // On tensor cores the products' operands leave the registers: fewer spills, still some.
  Compile(file("block16.onnx"), "tcblock_d16", "--precision fp16 --tensor-cores on");
  NvccCheck("tcblock_d16");
  // kws_cnn's 64x25x5 maps cannot be registers: its slots live in local memory (stack frame) and
  // its loops stay rolled, which keeps nvcc fast.
  Compile(WithBatchDim(Models() + "kws_cnn.onnx", file("kws.onnx")), "kws");
  NvccCheck("kws");
}

TEST_F(CudaBackendTest, OutputIsDeterministic) {
  Compile(Models() + "mlp_field.onnx", "field");
  auto first = ReadFile(file("gen_field/field.cu"));
  fs::remove_all(file("gen_field"));
  Compile(Models() + "mlp_field.onnx", "field");
  auto second = ReadFile(file("gen_field/field.cu"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

// An RMS norm and reductions over non-batch axes (axes as attribute and as a constant input).
TEST_F(CudaBackendTest, ReductionsMatchHost) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  *g->add_input() = BatchInfo("x", {1, 4, 8});
  *g->add_output() = BatchInfo("sum", {1, 8});
  *g->add_output() = BatchInfo("max", {1});
  *g->add_output() = BatchInfo("lse", {1, 4, 1});
  auto ints_attr = [](onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto int_attr = [](onnx::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto* axes = g->add_initializer();
  axes->set_name("axes1");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(1);
  AddNode(g, "Mul", "sq", {"x", "x"}, {"x2"});
  ints_attr(AddNode(g, "ReduceMean", "ms", {"x2"}, {"ms"}), "axes", {-1});
  AddNode(g, "Sqrt", "rms", {"ms"}, {"rms"});
  AddNode(g, "Div", "norm", {"x", "rms"}, {"xn"});
  int_attr(AddNode(g, "ReduceSum", "sum", {"xn", "axes1"}, {"sum"}), "keepdims", 0);
  auto* mx = AddNode(g, "ReduceMax", "max", {"x"}, {"max"});
  ints_attr(mx, "axes", {1, 2});
  int_attr(mx, "keepdims", 0);
  ints_attr(AddNode(g, "ReduceLogSumExp", "lse", {"x"}, {"lse"}), "axes", {2});
  Write("reduce.onnx", m.SerializeAsString());
  HostCheck(file("reduce.onnx"), "reduce", {{"x", Ramp({9, 4, 8}, 5)}}, 3, 1e-5);
}

// Generated files share guarded helpers: two models (fp32 and fp16) build in one program.
TEST_F(CudaBackendTest, TwoModelsInOneProgram) {
  Compile(Models() + "mlp_field.onnx", "field");
  Compile(Models() + "mlp_field.onnx", "field16", "--precision fp16");
  Write("two.cc",
        "#include \"field.cu\"\n#include \"field16.cu\"\nint main() { return "
        "KILN_FIELD16_WEIGHT_BYTES < KILN_FIELD_WEIGHT_BYTES ? 0 : 1; }\n");
  auto [rc, log] = Sh("g++ -std=c++17 -Wall -Wextra -Werror -x c++ -DKILN_CUDA_HOST_CHECK -I" +
                      file("gen_field") + " -I" + file("gen_field16") + " " + file("two.cc") +
                      " -o " + file("two"));
  ASSERT_EQ(rc, 0) << log;
  EXPECT_EQ(Sh(file("two")).first, 0) << "fp16 weights should take fewer bytes";
}

// y = Relu(x + w) with w = [-1.5, -0.5, ...] (an arithmetic progression) and a splat scale:
// both become formulas, so the weight buffer stays empty, and the results still match.
TEST_F(CudaBackendTest, CompressedConstantsAreFormulas) {
  onnx::ModelProto m = testing::AddReluModel(6);
  auto* g = m.mutable_graph();
  *g->mutable_input(0) = BatchInfo("x", {1, 6});
  *g->mutable_output(0) = BatchInfo("y", {1, 6});
  AddNode(g, "Mul", "scale", {"x", "half"}, {"xs"});
  g->mutable_node(0)->set_input(0, "xs");
  g->mutable_node()->SwapElements(0, 2);
  g->mutable_node()->SwapElements(1, 2);
  auto* h = g->add_initializer();
  h->set_name("half");
  h->set_data_type(onnx::TensorProto::FLOAT);
  h->add_dims(6);
  for (int i = 0; i < 6; ++i) h->add_float_data(0.5f);
  Write("ramp.onnx", m.SerializeAsString());
  HostCheck(file("ramp.onnx"), "ramp", {{"x", Ramp({5, 6}, 4)}}, 1, 1e-6);
  auto cu = ReadFile(file("gen_ramp/ramp.cu"));
  ASSERT_TRUE(cu.ok());
  EXPECT_NE(cu->find("0.5f"), std::string::npos);
  EXPECT_NE(cu->find("(float)(-1.5 + 1.0 * (double)("), std::string::npos) << *cu;
  auto h_text = ReadFile(file("gen_ramp/ramp.h"));
  ASSERT_TRUE(h_text.ok());
  EXPECT_NE(h_text->find("#define KILN_RAMP_WEIGHT_BYTES 0\n"), std::string::npos);
}

TEST_F(CudaBackendTest, UnsupportedOpIsOneLineError) {
  onnx::ModelProto m = testing::AddReluModel(6);
  m.mutable_graph()->mutable_node(1)->set_op_type("Round");
  Write("round.onnx", m.SerializeAsString());
  ExpectUserError("compile " + file("round.onnx") + " --target cuda --name r --out " + file("gen"),
                  "node 'relu': op Round is not supported by --target cuda");
  // An op over the batch axis would need other threads' samples.
  onnx::ModelProto sm;
  sm.set_ir_version(8);
  sm.add_opset_import()->set_version(17);
  *sm.mutable_graph()->add_input() = BatchInfo("x", {1, 6});
  *sm.mutable_graph()->add_output() = BatchInfo("y", {1, 6});
  auto* n = AddNode(sm.mutable_graph(), "Softmax", "sm", {"x"}, {"y"});
  auto* axis = n->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  Write("sm.onnx", sm.SerializeAsString());
  ExpectUserError("compile " + file("sm.onnx") + " --target cuda --name s --out " + file("gen"),
                  "node 'sm' (Softmax): a Softmax over axis 0 (the batch) mixes samples");
  // [batch, 1, 6] -> [1, batch, 6]: for one sample only size-1 axes move (a Reshape after
  // cancel-transposes), but the batched model interleaves samples.
  onnx::ModelProto tr;
  tr.set_ir_version(8);
  tr.add_opset_import()->set_version(17);
  *tr.mutable_graph()->add_input() = BatchInfo("x", {1, 1, 6});
  *tr.mutable_graph()->add_output() = testing::FloatInfo("y", {1, 1, 6});
  auto* perm = AddNode(tr.mutable_graph(), "Transpose", "tr", {"x"}, {"y"})->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int p : {1, 0, 2}) perm->add_ints(p);
  Write("tr.onnx", tr.SerializeAsString());
  ExpectUserError("compile " + file("tr.onnx") + " --target cuda --name t --out " + file("gen"),
                  "node 'tr' (Transpose): it moves axis 0 (the batch)");
  ExpectUserError(
      "compile " + Models() + "mlp_field.onnx --target cuda --name 1x --out " + file("gen"),
      "--name '1x'");
  ExpectUserError("compile " + Models() +
                      "mlp_field.onnx --target c --precision fp16 --name f --out " + file("gen"),
                  "--precision fp16 does not go with --target c");
  ExpectUserError("compile " + Models() +
                      "mlp_field.onnx --target cuda --precision fp4 --name f --out " + file("gen"),
                  "--precision fp4 does not go with --target cuda");
}

}  // namespace
}  // namespace kiln
