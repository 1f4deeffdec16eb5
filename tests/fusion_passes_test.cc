// The fusion passes (fuse-*, fold-batchnorm): for each, a model where it applies and one where
// it must not, checked as passes_test.cc checks the others (pass_test_util.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pass_test_util.h"

namespace kiln {
namespace {

// ---- fuse-transpose-matmul -----------------------------------------------------------------

// q [2, 3, 4, 8] times K^T (K [2, 3, 5, 8] transposed by perm [0, 1, 3, 2]); with `transpose_a`
// also x^T [.., 4, 8] times v [3, 8, 6]; `read_twice`: the transposed K is also a graph output.
onnx::ModelProto AttentionScoresModel(bool transpose_a, bool read_twice) {
  Builder b(17);
  b.In("q", {2, 3, 4, 8});
  b.In("k", {2, 3, 5, 8});
  SetAttr(AddNode(b.g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  AddNode(b.g, "MatMul", {"q", "kt"}, {"s"}, "scores");
  b.Out("s");
  if (transpose_a) {
    b.In("x", {2, 3, 8, 4});
    b.In("v", {3, 8, 6});
    SetAttr(AddNode(b.g, "Transpose", {"x"}, {"xt"}, "xt"), "perm", {0, 1, 3, 2});
    AddNode(b.g, "MatMul", {"xt", "v"}, {"o"}, "xtv");
    b.Out("o");
  }
  if (read_twice) b.Out("kt");
  return b.m;
}

TEST(FuseTransposeMatMul, ReadsTheOperandInPlace) {
  ir::Model m = CheckPass(AttentionScoresModel(true, false), "fuse-transpose-matmul", true);
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(CountOps(g, "Transpose"), 0);
  EXPECT_EQ(CountOps(g, "MatMul"), 0);
  const ir::Node* scores = NodeNamed(g, "scores");
  const ir::Node* xtv = NodeNamed(g, "xtv");
  ASSERT_TRUE(scores && xtv);
  EXPECT_EQ(scores->attr_string("equation", ""), "...mk,...nk->...mn");
  EXPECT_EQ(xtv->attr_string("equation", ""), "...km,...kn->...mn");
  EXPECT_EQ(g.values[scores->inputs[1]].name, "k");
  EXPECT_EQ(g.values[xtv->inputs[0]].name, "x");
}

TEST(FuseTransposeMatMul, LeavesATransposeReadElsewhere) {
  CheckPass(AttentionScoresModel(false, true), "fuse-transpose-matmul", false);
}

// ---- fold-batchnorm ------------------------------------------------------------------------

onnx::ModelProto ConvBnModel(bool bn_is_output, bool conv_read_twice, bool with_bias) {
  Builder b(15);
  b.In("X", {1, 2, 5, 5});
  AddFloatInitializer(b.g, "W", {3, 2, 3, 3}, Ramp(54, 0.1f, 0.05f));
  if (with_bias) AddFloatInitializer(b.g, "B", {3}, {0.1f, -0.2f, 0.3f});
  AddFloatInitializer(b.g, "scale", {3}, {1.5f, 0.5f, -2.0f});
  AddFloatInitializer(b.g, "shift", {3}, {0.25f, -1.0f, 0.0f});
  AddFloatInitializer(b.g, "mean", {3}, {0.1f, 0.2f, -0.3f});
  AddFloatInitializer(b.g, "var", {3}, {0.5f, 2.0f, 1.0f});
  auto* conv = AddNode(
      b.g, "Conv",
      with_bias ? std::vector<std::string>{"X", "W", "B"} : std::vector<std::string>{"X", "W"},
      {"c"}, "conv1");
  SetAttr(conv, "pads", {1, 1, 1, 1});
  SetAttr(AddNode(b.g, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn"}, "bn1"),
          "epsilon", 1e-3f);
  if (bn_is_output) {
    b.Out("bn");
  } else {
    AddNode(b.g, "Relu", {"bn"}, {"y"}, "relu");
    b.Out("y");
  }
  if (conv_read_twice) {
    AddNode(b.g, "Neg", {"c"}, {"n"}, "other_reader");
    b.Out("n");
  }
  return b.m;
}

TEST(FoldBatchNorm, FoldsIntoConvWithNewConstants) {
  for (bool with_bias : {true, false}) {
    onnx::ModelProto proto = ConvBnModel(false, false, with_bias);
    ir::Model m = Load(proto);
    int w = -1;
    for (size_t v = 0; v < m.graph->values.size(); ++v)
      if (m.graph->values[v].name == "W") w = static_cast<int>(v);
    ASSERT_GE(w, 0);
    const Tensor shared = *m.graph->values[w].constant;  // shares the bytes with the model's W
    const std::vector<float> original(shared.data<float>(), shared.data<float>() + shared.size());
    auto changed = passes::FindPass("fold-batchnorm")->run(m);
    ASSERT_TRUE(changed.ok() && *changed);
    EXPECT_TRUE(std::equal(original.begin(), original.end(), shared.data<float>()))
        << "the pass wrote into W's bytes";
    const ir::Graph& g = *m.graph;
    EXPECT_EQ(CountOps(g, "BatchNormalization"), 0);
    const ir::Node* conv = NodeNamed(g, "conv1");
    ASSERT_TRUE(conv);
    ASSERT_EQ(conv->inputs.size(), 3u);
    EXPECT_EQ(g.values[conv->inputs[1]].name, "W_bn");
    EXPECT_EQ(g.values[conv->inputs[2]].name, with_bias ? "B_bn" : "c_bias_bn");
    EXPECT_EQ(g.values[conv->outputs[0]].name, "bn");
    // The model no longer holds the replaced W (nothing else read it): weights are held once.
    EXPECT_FALSE(g.values[w].constant.has_value());
    CheckPass(proto, "fold-batchnorm", true);
  }
}

TEST(FoldBatchNorm, BatchNormOutputThatIsAGraphOutput) {
  ir::Model m = CheckPass(ConvBnModel(true, false, true), "fold-batchnorm", true);
  ASSERT_EQ(m.graph->nodes.size(), 1u);
  EXPECT_EQ(OutputName(*m.graph, 0), "bn");
  EXPECT_EQ(m.graph->values[m.graph->outputs[0]].producer, 0);
}

TEST(FoldBatchNorm, LeavesConvOutputsReadElsewhereAndNonConstantParameters) {
  CheckPass(ConvBnModel(false, true, true), "fold-batchnorm", false);
  onnx::ModelProto proto = ConvBnModel(false, false, true);
  // The variance comes from the caller.
  auto* g = proto.mutable_graph();
  for (int i = 0; i < g->initializer_size(); ++i)
    if (g->initializer(i).name() == "var") {
      g->mutable_initializer()->DeleteSubrange(i, 1);
      break;
    }
  *g->add_input() = Info("var", {3});
  ir::Model pm = Load(proto);
  std::vector<Tensor> in = RandomInputs(pm, 5);
  for (int64_t i = 0; i < in[1].size(); ++i)
    in[1].data<float>()[i] = 1.0f + 0.5f * static_cast<float>(i);
  CheckPass(proto, "fold-batchnorm", false, {in});
}

// Conv -> BatchNorm -> Mul / Add / Sub by per-channel constants (the order older exports write
// BatchNorm's scale and shift in) -> Relu. `spatial_mul`: the Mul's constant varies along W.
onnx::ModelProto ConvAffineChainModel(bool spatial_mul, bool constant_minus_conv) {
  onnx::ModelProto proto = ConvBnModel(true, false, true);
  auto* g = proto.mutable_graph();
  g->clear_output();
  AddFloatInitializer(g, "sc",
                      spatial_mul ? std::vector<int64_t>{1, 1, 5} : std::vector<int64_t>{3, 1, 1},
                      spatial_mul ? Ramp(5, 0.5f, 0.25f) : std::vector<float>{2.0f, -0.5f, 0.75f});
  AddFloatInitializer(g, "sh", {}, {0.125f});
  AddFloatInitializer(g, "sub", {1, 3, 1, 1}, {0.5f, -0.25f, 1.0f});
  AddNode(g, "Mul", {"bn", "sc"}, {"m"}, "scale");
  AddNode(g, "Add", {"sh", "m"}, {"a"}, "shift");
  AddNode(g, "Sub",
          constant_minus_conv ? std::vector<std::string>{"sub", "a"}
                              : std::vector<std::string>{"a", "sub"},
          {"s"}, "minus");
  AddNode(g, "Relu", {"s"}, {"y"}, "relu");
  *g->add_output() = Info("y", {1, 3, 5, 5});
  return proto;
}

TEST(FoldBatchNorm, FoldsPerChannelMulAddSubChains) {
  ir::Model m = CheckPass(ConvAffineChainModel(false, false), "fold-batchnorm", true);
  const ir::Graph& g = *m.graph;
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.values[g.nodes[0].outputs[0]].name, "s");
  EXPECT_EQ(g.nodes[1].op_type, "Relu");
}

// ConvTranspose (W [C, M / group, k, k], the output channels on its second axis) -> Add of a
// per-channel bias -> BatchNorm -> Relu, as DBNet's upsampling head writes it, with and without
// groups and a stride that overlaps the kernel.
TEST(FoldBatchNorm, FoldsIntoConvTranspose) {
  for (int64_t group : {1, 2}) {
    Builder b(15);
    b.In("X", {1, 4, 5, 4});
    AddFloatInitializer(b.g, "W", {4, 6 / group, 3, 3}, Ramp(4 * 6 / group * 9, 0.1f, 0.05f));
    AddFloatInitializer(b.g, "bias", {6, 1, 1}, {0.1f, -0.2f, 0.3f, 0.0f, 0.5f, -1.0f});
    AddFloatInitializer(b.g, "scale", {6}, {1.5f, 0.5f, -2.0f, 1.0f, 0.25f, 3.0f});
    AddFloatInitializer(b.g, "shift", {6}, {0.25f, -1.0f, 0.0f, 0.5f, 0.125f, -0.5f});
    AddFloatInitializer(b.g, "mean", {6}, {0.1f, 0.2f, -0.3f, 0.0f, 1.0f, -1.0f});
    AddFloatInitializer(b.g, "var", {6}, {0.5f, 2.0f, 1.0f, 0.25f, 4.0f, 1.5f});
    auto* ct = AddNode(b.g, "ConvTranspose", {"X", "W"}, {"c"}, "up");
    SetAttr(ct, "strides", {2, 2});
    SetAttr(ct, "group", group);
    AddNode(b.g, "Add", {"c", "bias"}, {"a"}, "up_bias");
    AddNode(b.g, "BatchNormalization", {"a", "scale", "shift", "mean", "var"}, {"bn"}, "bn1");
    AddNode(b.g, "Relu", {"bn"}, {"y"}, "relu");
    b.Out("y");
    ir::Model m = CheckPass(b.m, "fold-batchnorm", true);
    ASSERT_EQ(m.graph->nodes.size(), 2u) << group;
    EXPECT_EQ(m.graph->nodes[0].op_type, "ConvTranspose");
    EXPECT_EQ(m.graph->nodes[0].inputs.size(), 3u);
  }
}

TEST(FoldBatchNorm, StopsAtSpatialConstantsAndConstantMinusConv) {
  // The BatchNorm still folds; the Mul that varies along W and everything after it stay.
  ir::Model m = CheckPass(ConvAffineChainModel(true, false), "fold-batchnorm", true);
  EXPECT_EQ(CountOps(*m.graph, "Mul"), 1);
  EXPECT_EQ(CountOps(*m.graph, "Add"), 1);
  // c - y would negate the weights: the Sub stays, the Mul and Add before it fold.
  ir::Model m2 = CheckPass(ConvAffineChainModel(false, true), "fold-batchnorm", true);
  EXPECT_EQ(CountOps(*m2.graph, "Sub"), 1);
  EXPECT_EQ(CountOps(*m2.graph, "Mul"), 0);
  EXPECT_EQ(CountOps(*m2.graph, "Add"), 0);
}

TEST(FoldBatchNorm, FoldsMulAddIntoABatchNormAfterAnotherOp) {
  // DenseNet's pre-activation: Neg (any op) -> BatchNorm -> Mul -> Add -> Relu: one BatchNorm.
  Builder b(15);
  b.In("X", {1, 3, 4, 5});
  AddFloatInitializer(b.g, "scale", {3}, {1.5f, 0.5f, -2.0f});
  AddFloatInitializer(b.g, "shift", {3}, {0.25f, -1.0f, 0.0f});
  AddFloatInitializer(b.g, "mean", {3}, {0.1f, 0.2f, -0.3f});
  AddFloatInitializer(b.g, "var", {3}, {0.5f, 2.0f, 1.0f});
  AddFloatInitializer(b.g, "sc", {3, 1, 1}, {2.0f, -0.5f, 0.75f});
  AddFloatInitializer(b.g, "sh", {1, 3, 1, 1}, {0.5f, -0.25f, 1.0f});
  AddNode(b.g, "Neg", {"X"}, {"n"}, "neg");
  AddNode(b.g, "BatchNormalization", {"n", "scale", "shift", "mean", "var"}, {"bn"}, "bn1");
  AddNode(b.g, "Mul", {"bn", "sc"}, {"m"}, "scale_mul");
  AddNode(b.g, "Add", {"m", "sh"}, {"a"}, "shift_add");
  AddNode(b.g, "Relu", {"a"}, {"y"}, "relu");
  b.Out("y");
  ir::Model m = CheckPass(b.m, "fold-batchnorm", true);
  EXPECT_EQ(CountOps(*m.graph, "BatchNormalization"), 1);
  EXPECT_EQ(CountOps(*m.graph, "Mul") + CountOps(*m.graph, "Add"), 0);
  EXPECT_EQ(m.graph->nodes.size(), 3u);
}

TEST(FoldBatchNorm, FoldsMulAddIntoInstanceAndGroupNormalization) {
  for (const char* op : {"InstanceNormalization", "GroupNormalization"}) {
    Builder b(21);
    b.In("X", {2, 4, 3, 5});
    AddFloatInitializer(b.g, "scale", {4}, {1.5f, 0.5f, -2.0f, 1.0f});
    AddFloatInitializer(b.g, "bias", {4}, {0.25f, -1.0f, 0.0f, 2.0f});
    AddFloatInitializer(b.g, "sc", {4, 1, 1}, {2.0f, -0.5f, 0.75f, 3.0f});
    AddFloatInitializer(b.g, "sh", {1, 4, 1, 1}, {0.5f, -0.25f, 1.0f, 0.0f});
    auto* n = AddNode(b.g, op, {"X", "scale", "bias"}, {"nrm"}, "norm");
    if (std::string(op) == "GroupNormalization") SetAttr(n, "num_groups", 2);
    AddNode(b.g, "Mul", {"nrm", "sc"}, {"m"}, "scale_mul");
    AddNode(b.g, "Add", {"sh", "m"}, {"y"}, "shift_add");
    b.Out("y");
    ir::Model m = CheckPass(b.m, "fold-batchnorm", true);
    EXPECT_EQ(CountOps(*m.graph, op), 1) << op;
    EXPECT_EQ(m.graph->nodes.size(), 1u) << op;
  }
}

// ---- fuse-groupnorm ------------------------------------------------------------------------

// torch's export of nn.GroupNorm(3, 6) on x [2, 6, 4, 5] after a Neg: Reshape to [2, 3, -1],
// InstanceNormalization (scale and bias of the groups), Reshape back, Mul by gamma, Add beta,
// then a Relu. `groups_out`: the grouped value is also a graph output.
onnx::ModelProto GroupNormModel(bool groups_out) {
  Builder b;
  b.In("x", {2, 6, 4, 5});
  AddInt64Initializer(b.g, "grouped_shape", {3}, {2, 3, -1});
  AddInt64Initializer(b.g, "x_shape", {4}, {2, 6, 4, 5});
  AddFloatInitializer(b.g, "ones", {3}, {1.0f, 0.5f, 2.0f});
  AddFloatInitializer(b.g, "zeros", {3}, {0.0f, 0.25f, -1.0f});
  AddFloatInitializer(b.g, "gamma", {6, 1, 1}, {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.5f});
  AddFloatInitializer(b.g, "beta", {6, 1, 1}, {0.0f, 1.0f, -2.0f, 0.5f, 0.25f, -0.75f});
  AddNode(b.g, "Neg", {"x"}, {"n"}, "neg");
  AddNode(b.g, "Reshape", {"n", "grouped_shape"}, {"r"}, "to_groups");
  SetAttr(AddNode(b.g, "InstanceNormalization", {"r", "ones", "zeros"}, {"i"}, "norm"), "epsilon",
          1e-3f);
  AddNode(b.g, "Reshape", {"i", "x_shape"}, {"back"}, "to_channels");
  AddNode(b.g, "Mul", {"back", "gamma"}, {"m"}, "gamma_mul");
  AddNode(b.g, "Add", {"m", "beta"}, {"a"}, "beta_add");
  AddNode(b.g, "Relu", {"a"}, {"y"}, "relu");
  b.Out("y");
  if (groups_out) *b.g->add_output() = Info("r", {2, 3, 40});
  return b.m;
}

TEST(FuseGroupNorm, MakesOneGroupNormalizationThatFoldBatchNormCompletes) {
  ir::Model m = CheckPass(GroupNormModel(false), "fuse-groupnorm", true);
  ASSERT_EQ(CountOps(*m.graph, "GroupNormalization"), 1);
  EXPECT_EQ(CountOps(*m.graph, "Reshape") + CountOps(*m.graph, "InstanceNormalization"), 0);
  const ir::Node& gn = m.graph->nodes[1];
  EXPECT_EQ(gn.name, "to_channels");
  EXPECT_EQ(gn.attr_int("num_groups", 0), 3);
  EXPECT_FLOAT_EQ(gn.attr_float("epsilon", 0), 1e-3f);
  ir::Model both = Load(GroupNormModel(false));
  ASSERT_TRUE(passes::FindPass("fuse-groupnorm")->run(both).ok());
  ASSERT_TRUE(passes::FindPass("fold-batchnorm")->run(both).ok());
  EXPECT_EQ(both.graph->nodes.size(), 3u);  // Neg, GroupNormalization, Relu
  ExpectSameOutputs(RunHost(Load(GroupNormModel(false)), RandomInputs(both, 3)),
                    RunHost(both, RandomInputs(both, 3)), false);
  CheckPass(GroupNormModel(true), "fuse-groupnorm", false);
}

// ---- fuse-layernorm ------------------------------------------------------------------------

// LayerNorm over the last axis of x [2, 3, 8] after a Neg, decomposed as exporters before opset
// 17 write it, then a Relu. `square`: "Pow" or "Mul"; `affine`: with gamma and beta; `axis`: the
// ReduceMeans' axis; `opset` 18 gives the axes as an input.
onnx::ModelProto LayerNormModel(const std::string& square, bool affine, int64_t axis = -1,
                                int opset = 13) {
  Builder b(opset);
  b.In("x", {2, 3, 8});
  AddFloatInitializer(b.g, "two", {}, {2.0f});
  AddFloatInitializer(b.g, "eps", {}, {1e-5f});
  AddFloatInitializer(b.g, "gamma", {8}, {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.5f, 0.25f, -2.0f});
  AddFloatInitializer(b.g, "beta", {8}, {0.0f, 1.0f, -2.0f, 0.5f, 0.25f, -0.75f, 2.0f, 0.125f});
  AddInt64Initializer(b.g, "axes", {1}, {axis});
  AddNode(b.g, "Neg", {"x"}, {"n"}, "neg");
  auto mean = [&](const std::string& in, const std::string& out) {
    if (opset >= 18) return AddNode(b.g, "ReduceMean", {in, "axes"}, {out});
    auto* node = AddNode(b.g, "ReduceMean", {in}, {out});
    SetAttr(node, "axes", {axis});
    return node;
  };
  mean("n", "m");
  AddNode(b.g, "Sub", {"n", "m"}, {"d"});
  if (square == "Pow")
    AddNode(b.g, "Pow", {"d", "two"}, {"sq"});
  else
    AddNode(b.g, "Mul", {"d", "d"}, {"sq"});
  mean("sq", "var");
  AddNode(b.g, "Add", {"var", "eps"}, {"ve"});
  AddNode(b.g, "Sqrt", {"ve"}, {"sd"});
  AddNode(b.g, "Div", {"d", "sd"}, {affine ? "norm" : "a"}, "div");
  if (affine) {
    AddNode(b.g, "Mul", {"gamma", "norm"}, {"scaled"});
    AddNode(b.g, "Add", {"scaled", "beta"}, {"a"}, "beta_add");
  }
  AddNode(b.g, "Relu", {"a"}, {"y"}, "relu");
  b.Out("y");
  return b.m;
}

TEST(FuseLayerNorm, MakesOneLayerNormalizationFromEveryExportedForm) {
  for (const char* square : {"Pow", "Mul"})
    for (bool affine : {true, false})
      for (int opset : {13, 18}) {
        const std::string what =
            std::string(square) + (affine ? " affine" : "") + " opset " + std::to_string(opset);
        ir::Model m = CheckPass(LayerNormModel(square, affine, -1, opset), "fuse-layernorm", true);
        ASSERT_EQ(m.graph->nodes.size(), 3u) << what;  // Neg, LayerNormalization, Relu
        const ir::Node& ln = m.graph->nodes[1];
        EXPECT_EQ(ln.op_type, "LayerNormalization") << what;
        EXPECT_EQ(ln.name, affine ? "beta_add" : "div") << what;
        EXPECT_EQ(ln.inputs.size(), affine ? 3u : 2u) << what;
        EXPECT_FLOAT_EQ(ln.attr_float("epsilon", 0), 1e-5f) << what;
      }
  // Over the last axis as a positive index too; not over another axis.
  CheckPass(LayerNormModel("Pow", true, 2), "fuse-layernorm", true);
  CheckPass(LayerNormModel("Pow", true, 1), "fuse-layernorm", false);
}

// RMSNorm over the last axis of x [2, 3, 8] after a Neg, then a Relu. `square`: "Pow" or "Mul";
// `reciprocal`: x * Reciprocal(Sqrt) (LLaMA's rsqrt) instead of Div; `gamma`: with the scale;
// `shared`: the mean square is also a graph output.
onnx::ModelProto RmsNormModel(const std::string& square, bool reciprocal, bool gamma,
                              bool shared = false) {
  Builder b(13);
  b.In("x", {2, 3, 8});
  AddFloatInitializer(b.g, "two", {}, {2.0f});
  AddFloatInitializer(b.g, "eps", {}, {1e-6f});
  AddFloatInitializer(b.g, "gamma", {8}, {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.5f, 0.25f, -2.0f});
  AddNode(b.g, "Neg", {"x"}, {"n"}, "neg");
  if (square == "Pow")
    AddNode(b.g, "Pow", {"n", "two"}, {"sq"});
  else
    AddNode(b.g, "Mul", {"n", "n"}, {"sq"});
  SetAttr(AddNode(b.g, "ReduceMean", {"sq"}, {"ms"}), "axes", {-1});
  AddNode(b.g, "Add", {"ms", "eps"}, {"mse"});
  AddNode(b.g, "Sqrt", {"mse"}, {"rms"});
  const std::string normed = gamma ? "norm" : "a";
  if (reciprocal) {
    AddNode(b.g, "Reciprocal", {"rms"}, {"inv"});
    AddNode(b.g, "Mul", {"n", "inv"}, {normed}, "scale_x");
  } else {
    AddNode(b.g, "Div", {"n", "rms"}, {normed}, "scale_x");
  }
  if (gamma) AddNode(b.g, "Mul", {"norm", "gamma"}, {"a"}, "gamma_mul");
  AddNode(b.g, "Relu", {"a"}, {"y"}, "relu");
  b.Out("y");
  if (shared) *b.g->add_output() = Info("ms", {2, 3, 1});
  return b.m;
}

TEST(FuseLayerNorm, MakesOneRmsNormalizationFromEveryExportedForm) {
  for (const char* square : {"Pow", "Mul"})
    for (bool reciprocal : {false, true})
      for (bool gamma : {true, false}) {
        const std::string what =
            std::string(square) + (reciprocal ? " reciprocal" : " div") + (gamma ? " gamma" : "");
        ir::Model m = CheckPass(RmsNormModel(square, reciprocal, gamma), "fuse-layernorm", true);
        ASSERT_EQ(m.graph->nodes.size(), 3u) << what;  // Neg, RMSNormalization, Relu
        const ir::Node& rms = m.graph->nodes[1];
        EXPECT_EQ(rms.op_type, "RMSNormalization") << what;
        EXPECT_EQ(rms.name, gamma ? "gamma_mul" : "scale_x") << what;
        EXPECT_FLOAT_EQ(rms.attr_float("epsilon", 0), 1e-6f) << what;
      }
  CheckPass(RmsNormModel("Pow", false, true, true), "fuse-layernorm", false);
}

// ---- fuse-channel-shuffle -------------------------------------------------------------------

// ShuffleNet's channel shuffle of x [1, 6, 3, 4] in `groups` groups, as exporters write it, then
// a Neg. `perm`: the Transpose's permutation; `mid_is_output`: the transposed value is also a
// graph output.
onnx::ModelProto ShuffleModel(int64_t groups, std::vector<int64_t> perm, bool mid_is_output) {
  Builder b;
  b.In("x", {1, 6, 3, 4});
  AddInt64Initializer(b.g, "split", {5}, {1, groups, 6 / groups, 3, 4});
  AddInt64Initializer(b.g, "merge", {4}, {1, 6, 3, 4});
  AddNode(b.g, "Reshape", {"x", "split"}, {"r"}, "split");
  SetAttr(AddNode(b.g, "Transpose", {"r"}, {"t"}, "swap"), "perm", perm);
  AddNode(b.g, "Reshape", {"t", "merge"}, {"s"}, "merge");
  AddNode(b.g, "Neg", {"s"}, {"y"}, "neg");
  b.Out("y");
  if (mid_is_output) *b.g->add_output() = Info("t", {1, 6 / groups, groups, 3, 4});
  return b.m;
}

TEST(FuseChannelShuffle, MakesOneChannelShuffleNode) {
  for (int64_t groups : {2, 3}) {
    ir::Model m =
        CheckPass(ShuffleModel(groups, {0, 2, 1, 3, 4}, false), "fuse-channel-shuffle", true);
    const ir::Graph& g = *m.graph;
    ASSERT_EQ(g.nodes.size(), 2u);
    EXPECT_EQ(g.nodes[0].op_type, "ChannelShuffle");
    EXPECT_EQ(g.nodes[0].domain, "com.kiln");
    EXPECT_EQ(g.nodes[0].name, "merge");
    EXPECT_EQ(g.nodes[0].attr_int("group", 0), groups);
    EXPECT_EQ(m.OpsetFor("com.kiln"), 1);
  }
}

TEST(FuseChannelShuffle, LeavesOtherPermutationsAndSharedValues) {
  CheckPass(ShuffleModel(2, {0, 1, 2, 4, 3}, false), "fuse-channel-shuffle", false);
  CheckPass(ShuffleModel(2, {0, 2, 1, 3, 4}, true), "fuse-channel-shuffle", false);
  CheckPass(ShuffleModel(1, {0, 2, 1, 3, 4}, false), "fuse-channel-shuffle", false);  // one group
}

// ---- fuse-gelu ------------------------------------------------------------------------------

// GELU's tail after its 1 + f (value `sum`): the product with x and a constant "half" in `order`,
// 0 (x * sum) * 0.5 (torch), 1 (x * 0.5) * sum, 2 x * (sum * 0.5); then a Neg to the output y.
void AddGeluTail(Builder& b, const std::string& sum, int order) {
  if (order == 0) {
    AddNode(b.g, "Mul", {sum, "x"}, {"m"}, "times_x");
    AddNode(b.g, "Mul", {"m", "half"}, {"g"}, "halve");
  } else if (order == 1) {
    AddNode(b.g, "Mul", {"half", "x"}, {"h"}, "halve");
    AddNode(b.g, "Mul", {"h", sum}, {"g"}, "times_x");
  } else {
    AddNode(b.g, "Mul", {sum, "half"}, {"h"}, "halve");
    AddNode(b.g, "Mul", {"x", "h"}, {"g"}, "times_x");
  }
  AddNode(b.g, "Neg", {"g"}, {"y"}, "neg");
}

// The erf GELU of x [2, 7] then a Neg, in `order`: 0 (x * (1 + erf)) * 0.5 (torch), 1 (x * 0.5)
// * (1 + erf), 2 x * ((1 + erf) * 0.5); `mul_scale`: x * (1 / sqrt 2) instead of x / sqrt 2;
// `sqrt2`: the divisor; `shared`: the Erf's result is also a graph output.
onnx::ModelProto GeluModel(int order, bool mul_scale, float sqrt2, bool shared) {
  Builder b;
  b.In("x", {2, 7});
  AddFloatInitializer(b.g, "k", {}, {mul_scale ? 1.0f / sqrt2 : sqrt2});
  AddFloatInitializer(b.g, "one", {}, {1.0f});
  AddFloatInitializer(b.g, "half", {}, {0.5f});
  AddNode(b.g, mul_scale ? "Mul" : "Div", {"x", "k"}, {"d"}, "scale");
  AddNode(b.g, "Erf", {"d"}, {"e"}, "erf");
  AddNode(b.g, "Add", {"one", "e"}, {"a"}, "plus_one");
  AddGeluTail(b, "a", order);
  b.Out("y");
  if (shared) *b.g->add_output() = Info("e", {2, 7});
  return b.m;
}

TEST(FuseGelu, MakesOneGeluForEveryOrder) {
  for (int order = 0; order < 3; ++order)
    for (bool mul_scale : {false, true}) {
      ir::Model m =
          CheckPass(GeluModel(order, mul_scale, std::sqrt(2.0f), false), "fuse-gelu", true);
      const ir::Graph& g = *m.graph;
      ASSERT_EQ(g.nodes.size(), 2u) << order;
      EXPECT_EQ(g.nodes[0].op_type, "Gelu");
      EXPECT_EQ(g.nodes[0].domain, "com.microsoft");
      EXPECT_EQ(g.nodes[0].name, order == 0 ? "halve" : "times_x");  // the last Mul
      EXPECT_EQ(m.OpsetFor("com.microsoft"), 1);
    }
}

TEST(FuseGelu, LeavesOtherConstantsAndSharedValues) {
  CheckPass(GeluModel(0, false, 1.5f, false), "fuse-gelu", false);
  CheckPass(GeluModel(1, false, std::sqrt(2.0f), true), "fuse-gelu", false);
}

// The tanh GELU of x [2, 7] then a Neg: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + c * x^3))) with
// the tail in `order` (as GeluModel), x^3 as `cube` 0 Pow(x, 3), 1 (x * x) * x, 2 x * (x * x);
// `swap` swaps the operands of the Muls and Add in front; `c` the cube's coefficient.
onnx::ModelProto TanhGeluModel(int order, int cube, bool swap, float c) {
  Builder b;
  b.In("x", {2, 7});
  AddFloatInitializer(b.g, "k", {}, {static_cast<float>(std::sqrt(2.0 / M_PI))});
  AddFloatInitializer(b.g, "c", {}, {c});
  AddFloatInitializer(b.g, "three", {}, {3.0f});
  AddFloatInitializer(b.g, "one", {}, {1.0f});
  AddFloatInitializer(b.g, "half", {}, {0.5f});
  auto two = [&](const char* a, const char* bb) {
    return swap ? std::vector<std::string>{bb, a} : std::vector<std::string>{a, bb};
  };
  if (cube == 0) {
    AddNode(b.g, "Pow", {"x", "three"}, {"x3"}, "cube");
  } else {
    AddNode(b.g, "Mul", {"x", "x"}, {"x2"}, "square");
    AddNode(b.g, "Mul",
            cube == 1 ? std::vector<std::string>{"x2", "x"} : std::vector<std::string>{"x", "x2"},
            {"x3"}, "cube");
  }
  AddNode(b.g, "Mul", two("c", "x3"), {"cx3"}, "scale_cube");
  AddNode(b.g, "Add", two("x", "cx3"), {"inner"}, "inner");
  AddNode(b.g, "Mul", two("inner", "k"), {"arg"}, "scale");
  AddNode(b.g, "Tanh", {"arg"}, {"t"}, "tanh");
  AddNode(b.g, "Add", {"t", "one"}, {"a"}, "plus_one");
  AddGeluTail(b, "a", order);
  b.Out("y");
  return b.m;
}

TEST(FuseGelu, MakesOneTanhGeluForEveryForm) {
  for (int order = 0; order < 3; ++order)
    for (int cube = 0; cube < 3; ++cube)
      for (bool swap : {false, true}) {
        ir::Model m = CheckPass(TanhGeluModel(order, cube, swap, 0.044715f), "fuse-gelu", true);
        const ir::Graph& g = *m.graph;
        ASSERT_EQ(g.nodes.size(), 2u) << order << " " << cube << " " << swap;
        EXPECT_EQ(g.nodes[0].op_type, "Gelu");
        EXPECT_EQ(g.nodes[0].attr_string("approximate", "none"), "tanh");
      }
  CheckPass(TanhGeluModel(0, 0, false, 0.05f), "fuse-gelu", false);  // another coefficient
}

// ---- fuse-hardswish -------------------------------------------------------------------------

// x * relu6(x + 3) / 6 of x [2, 3, 4, 5] then a Neg, in `form`: 0 (x * clip) / 6 (paddle2onnx),
// 1 x * (clip * (1/6)), 2 x * HardSigmoid(x) {1/6, 0.5}; the Add's and the Muls' operands
// swapped when `swap`; `three`: the shift; `shared`: the Clip's result is also a graph output.
// Opset 9 writes Clip's bounds as attributes.
onnx::ModelProto HardSwishModel(int form, bool swap, float three, bool shared, int opset = 17) {
  Builder b(opset);
  b.In("x", {2, 3, 4, 5});
  AddFloatInitializer(b.g, "three", {}, {three});
  AddFloatInitializer(b.g, "six", {1}, {6.0f});
  AddFloatInitializer(b.g, "sixth", {}, {1.0f / 6.0f});
  AddFloatInitializer(b.g, "zero", {}, {0.0f});
  auto two = [&](const char* a, const char* c) {
    return swap ? std::vector<std::string>{c, a} : std::vector<std::string>{a, c};
  };
  if (form == 2) {
    auto* hs = AddNode(b.g, "HardSigmoid", {"x"}, {"c"}, "gate");
    SetAttr(hs, "alpha", 1.0f / 6.0f);
    AddNode(b.g, "Mul", two("x", "c"), {"g"}, "times_x");
  } else {
    AddNode(b.g, "Add", two("x", "three"), {"a"}, "shift");
    if (opset < 11) {
      auto* clip = AddNode(b.g, "Clip", {"a"}, {"c"}, "relu6");
      SetAttr(clip, "min", 0.0f);
      SetAttr(clip, "max", 6.0f);
    } else {
      AddNode(b.g, "Clip", {"a", "zero", "six0"}, {"c"}, "relu6");
      AddFloatInitializer(b.g, "six0", {}, {6.0f});
    }
    if (form == 0) {
      AddNode(b.g, "Mul", two("x", "c"), {"m"}, "times_x");
      AddNode(b.g, "Div", {"m", "six"}, {"g"}, "sixth");
    } else {
      AddNode(b.g, "Mul", two("c", "sixth"), {"m"}, "sixth");
      AddNode(b.g, "Mul", two("m", "x"), {"g"}, "times_x");
    }
  }
  AddNode(b.g, "Neg", {"g"}, {"y"}, "neg");
  b.Out("y");
  if (shared) *b.g->add_output() = Info("c", {2, 3, 4, 5});
  return b.m;
}

TEST(FuseHardSwish, MakesOneHardSwishForEveryForm) {
  for (int form = 0; form < 3; ++form)
    for (bool swap : {false, true}) {
      ir::Model m = CheckPass(HardSwishModel(form, swap, 3.0f, false), "fuse-hardswish", true);
      const ir::Graph& g = *m.graph;
      ASSERT_EQ(g.nodes.size(), 2u) << form;
      EXPECT_EQ(g.nodes[0].op_type, "HardSwish");
      EXPECT_EQ(g.nodes[0].name, form == 0 ? "sixth" : "times_x");  // the last node
      EXPECT_EQ(g.values[g.nodes[0].inputs[0]].name, "x");
    }
  ir::Model m = CheckPass(HardSwishModel(0, false, 3.0f, false, 9), "fuse-hardswish", true);
  EXPECT_EQ(CountOps(*m.graph, "HardSwish"), 1);
}

TEST(FuseHardSwish, LeavesOtherConstantsAndSharedValues) {
  CheckPass(HardSwishModel(0, false, 2.5f, false), "fuse-hardswish", false);
  CheckPass(HardSwishModel(1, true, 3.0f, true), "fuse-hardswish", false);
}

// ---- fuse-swish ----------------------------------------------------------------------------

// Add(x, x) -> v, then v * Sigmoid(v) (operands swapped when `swap`), then a Neg; `shared`: the
// sigmoid is also a graph output.
onnx::ModelProto SiluModel(bool swap, bool shared) {
  Builder b(17);
  b.In("x", {2, 3, 4, 5});
  AddNode(b.g, "Add", {"x", "x"}, {"v"}, "twice");
  AddNode(b.g, "Sigmoid", {"v"}, {"s"}, "gate");
  AddNode(b.g, "Mul",
          swap ? std::vector<std::string>{"s", "v"} : std::vector<std::string>{"v", "s"}, {"g"},
          "silu");
  AddNode(b.g, "Neg", {"g"}, {"y"}, "neg");
  b.Out("y");
  if (shared) *b.g->add_output() = Info("s", {2, 3, 4, 5});
  return b.m;
}

TEST(FuseSwish, MakesOneSwishInEitherOrder) {
  for (bool swap : {false, true}) {
    ir::Model m = CheckPass(SiluModel(swap, false), "fuse-swish", true);
    const ir::Graph& g = *m.graph;
    ASSERT_EQ(g.nodes.size(), 3u) << swap;
    EXPECT_EQ(g.nodes[1].op_type, "Swish");
    EXPECT_EQ(g.nodes[1].name, "silu");
    EXPECT_EQ(g.values[g.nodes[1].inputs[0]].name, "v");
  }
  CheckPass(SiluModel(false, true), "fuse-swish", false);
}

// ---- fuse-matmul-add -----------------------------------------------------------------------

onnx::ModelProto MatMulAddModel(std::vector<int64_t> a_dims, std::vector<int64_t> bias_dims,
                                bool bias_first) {
  Builder b;
  int64_t n = 5, k = a_dims.back();
  b.In("A", a_dims);
  AddFloatInitializer(b.g, "Bw", {k, n}, Ramp(k * n, 0.2f, -0.1f));
  int64_t bias_n = 1;
  for (int64_t d : bias_dims) bias_n *= d;
  AddFloatInitializer(b.g, "bias", bias_dims, Ramp(bias_n, 0.3f, 0.5f));
  AddNode(b.g, "MatMul", {"A", "Bw"}, {"mm"}, "fc1");
  AddNode(
      b.g, "Add",
      bias_first ? std::vector<std::string>{"bias", "mm"} : std::vector<std::string>{"mm", "bias"},
      {"y"}, "fc1_bias");
  b.Out("y");
  return b.m;
}

TEST(FuseMatMulAdd, BecomesGemm) {
  for (auto bias : {std::vector<int64_t>{5}, {1, 5}, {3, 5}, {3, 1}})
    for (bool first : {false, true}) {
      ir::Model m = CheckPass(MatMulAddModel({3, 4}, bias, first), "fuse-matmul-add", true);
      ASSERT_EQ(m.graph->nodes.size(), 1u);
      const ir::Node& gemm = m.graph->nodes[0];
      EXPECT_EQ(gemm.op_type, "Gemm");
      EXPECT_EQ(gemm.name, "fc1");
      EXPECT_EQ(m.graph->values[gemm.inputs[2]].name, "bias");
      EXPECT_EQ(OutputName(*m.graph, 0), "y");
    }
}

TEST(FuseMatMulAdd, HigherRankThroughReshapes) {
  for (auto bias :
       {std::vector<int64_t>{5}, std::vector<int64_t>{1, 1, 5}, std::vector<int64_t>{1}}) {
    SCOPED_TRACE("bias rank " + std::to_string(bias.size()) + " size " +
                 std::to_string(bias.back()));
    ir::Model m = CheckPass(MatMulAddModel({2, 3, 4}, bias, true), "fuse-matmul-add", true);
    const ir::Graph& g = *m.graph;
    ASSERT_EQ(g.nodes.size(), 3u);
    EXPECT_EQ(g.nodes[0].op_type, "Reshape");
    EXPECT_EQ(g.nodes[1].op_type, "Gemm");
    EXPECT_EQ(g.nodes[1].name, "fc1");
    EXPECT_EQ(g.values[g.nodes[1].outputs[0]].type.dims, (Dims{6, 5}));
    EXPECT_EQ(g.nodes[2].op_type, "Reshape");
    EXPECT_EQ(OutputName(g, 0), "y");
  }
}

TEST(FuseMatMulAdd, LeavesHigherRankAndBroadcastingBiases) {
  CheckPass(MatMulAddModel({2, 3, 4}, {3, 5}, false), "fuse-matmul-add", false);  // per row of 3
  CheckPass(MatMulAddModel({3, 4}, {2, 3, 5}, false), "fuse-matmul-add", false);  // Add grows it
  // The MatMul result is read by another node too.
  onnx::ModelProto proto = MatMulAddModel({3, 4}, {5}, false);
  AddNode(proto.mutable_graph(), "Relu", {"mm"}, {"r"});
  proto.mutable_graph()->add_output()->set_name("r");
  CheckPass(proto, "fuse-matmul-add", false);
}

// ---- fuse-conv-activation ------------------------------------------------------------------

// X -> Conv -> c; then `tail`: "relu", "add" (Add(c, Z) with Z = Neg(X2) computed after the
// Conv), "add_relu", "clip" (constant bounds), "leaky", "swish", "clip_input_bound" (a bound from
// the caller).
onnx::ModelProto ConvTailModel(const std::string& tail, int opset = 17) {
  Builder b(opset);
  b.In("X", {1, 2, 6, 5});
  AddFloatInitializer(b.g, "W", {3, 2, 3, 3}, Ramp(54, 0.1f, -0.05f));
  AddFloatInitializer(b.g, "B", {3}, {0.1f, -0.2f, 0.3f});
  SetAttr(AddNode(b.g, "Conv", {"X", "W", "B"}, {"c"}, "conv1"), "pads", {1, 1, 1, 1});
  std::string last = "c";
  if (tail == "add" || tail == "add_relu" || tail == "sum_relu" || tail == "add_hardswish") {
    b.In("X2", {1, 3, 6, 5});
    AddNode(b.g, "Neg", {"X2"}, {"z"}, "branch");
    AddNode(b.g, tail == "sum_relu" ? "Sum" : "Add", {"z", "c"}, {"s"}, "residual");
    last = "s";
  }
  if (tail == "sum_relu") {
    AddNode(b.g, "Relu", {last}, {"y"}, "relu");
    last = "y";
  }
  if (tail == "relu" || tail == "add_relu") {
    AddNode(b.g, "Relu", {last}, {"y"}, "relu");
    last = "y";
  } else if (tail == "leaky") {
    SetAttr(AddNode(b.g, "LeakyRelu", {last}, {"y"}, "leaky"), "alpha", 0.2f);
    last = "y";
  } else if (tail == "hardswish" || tail == "add_hardswish") {
    AddNode(b.g, "HardSwish", {last}, {"y"}, "hardswish");
    last = "y";
  } else if (tail == "swish") {  // SiLU as exporters write it: Mul(c, Sigmoid(c))
    AddNode(b.g, "Sigmoid", {last}, {"sg"}, "sigmoid");
    AddNode(b.g, "Mul", {"sg", last}, {"y"}, "silu");
    last = "y";
  } else if (tail == "clip" || tail == "clip_input_bound") {
    AddFloatInitializer(b.g, "lo", {}, {-0.5f});
    if (tail == "clip")
      AddFloatInitializer(b.g, "hi", {}, {0.75f});
    else
      b.In("hi", {});
    AddNode(b.g, "Clip", {last, "lo", "hi"}, {"y"}, "clip");
    last = "y";
  }
  b.Out(last);
  return b.m;
}

TEST(FuseConvActivation, FusesActivationsAndResidualAdds) {
  const std::map<std::string, std::pair<std::string, size_t>> want = {
      {"relu", {"Relu", 3}},
      {"add", {"", 4}},
      {"add_relu", {"Relu", 4}},
      {"clip", {"Clip", 3}},
      {"leaky", {"LeakyRelu", 3}},
      {"swish", {"Swish", 3}},
      {"sum_relu", {"Relu", 4}},
      {"hardswish", {"HardSwish", 3}},
      {"add_hardswish", {"HardSwish", 4}}};
  for (const auto& [tail, expect] : want) {
    ir::Model m = CheckPass(ConvTailModel(tail), "fuse-conv-activation", true);
    const ir::Node* fused = nullptr;
    for (const auto& n : m.graph->nodes)
      if (n.op_type == "FusedConv") fused = &n;
    ASSERT_NE(fused, nullptr) << tail;
    EXPECT_EQ(CountOps(*m.graph, "Conv") + CountOps(*m.graph, "Relu") + CountOps(*m.graph, "Add") +
                  CountOps(*m.graph, "Sum") + CountOps(*m.graph, "Sigmoid") +
                  CountOps(*m.graph, "Mul") + CountOps(*m.graph, "HardSwish"),
              0)
        << tail;
    EXPECT_EQ(fused->domain, "com.microsoft");
    EXPECT_EQ(fused->attr_string("activation", ""), expect.first) << tail;
    EXPECT_EQ(fused->inputs.size(), expect.second) << tail;
    EXPECT_EQ(fused->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(OutputName(*m.graph, 0), tail == "add" ? "s" : "y");
    EXPECT_EQ(m.OpsetFor("com.microsoft"), 1);
  }
  ir::Model clip = CheckPass(ConvTailModel("clip"), "fuse-conv-activation", true);
  for (const auto& n : clip.graph->nodes) {
    if (n.op_type == "FusedConv") {
      EXPECT_EQ(n.attr_floats("activation_params"), (std::vector<float>{-0.5f, 0.75f}));
    }
  }
}

TEST(FuseConvActivation, LeavesSharedResultsBroadcastsAndCallerBounds) {
  CheckPass(ConvTailModel("clip_input_bound"), "fuse-conv-activation", false);
  CheckPass(ConvTailModel(""), "fuse-conv-activation", false);  // a lone Conv
  onnx::ModelProto shared = ConvTailModel("relu");              // the Conv result is read twice
  AddNode(shared.mutable_graph(), "Neg", {"c"}, {"n"}, "other_reader");
  shared.mutable_graph()->add_output()->set_name("n");
  CheckPass(shared, "fuse-conv-activation", false);
  Builder b;  // Add broadcasts a [3, 1, 1] constant: not a residual of the output's shape
  b.In("X", {1, 2, 6, 5});
  AddFloatInitializer(b.g, "W", {3, 2, 3, 3}, Ramp(54, 0.1f, -0.05f));
  AddFloatInitializer(b.g, "K", {3, 1, 1}, {1.0f, 2.0f, 3.0f});
  AddNode(b.g, "Conv", {"X", "W"}, {"c"}, "conv1");
  AddNode(b.g, "Add", {"c", "K"}, {"y"}, "bias");
  b.Out("y");
  CheckPass(b.m, "fuse-conv-activation", false);
}

}  // namespace
}  // namespace kiln
