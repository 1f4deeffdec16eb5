// The graph optimization passes other than the fusions (fusion_passes_test.cc): for each, a
// model where it applies and one where it must not (structure, ir::Verify, and the host
// executor's results before and after on random inputs: bit-identical for exact passes, relative
// L2 <= 1e-5 otherwise), subgraph and graph-output cases; then every registered pass, in
// registry order and twice, over the onnx-node models against their expected outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <set>

#include "compiler/compile.h"
#include "frontend/onnx_import.h"
#include "pass_test_util.h"
#include "passes/fold_constants.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// ---- The registry --------------------------------------------------------------------------

TEST(PassRegistry, ListsThePassesInOrder) {
  std::vector<std::string> names;
  for (const auto& p : passes::RegisteredPasses()) {
    names.push_back(p.name);
    EXPECT_FALSE(p.description.empty());
    EXPECT_EQ(p.exact, p.name != "fold-batchnorm" && p.name != "fuse-matmul-add" &&
                           p.name != "fuse-conv-activation" && p.name != "fuse-gelu" &&
                           p.name != "fuse-hardswish" && p.name != "fuse-swish" &&
                           p.name != "fuse-transpose-matmul" && p.name != "fuse-qdq" &&
                           p.name != "fuse-groupnorm" && p.name != "fuse-layernorm")
        << p.name;
  }
  std::vector<std::string> want = {"eliminate-dead-nodes",
                                   "fold-constants",
                                   "eliminate-identities",
                                   "eliminate-common-subexpressions",
                                   "cancel-transposes",
                                   "fold-batchnorm",
                                   "fuse-groupnorm",
                                   "fuse-conv-activation",
                                   "fuse-channel-shuffle",
                                   "fuse-gelu",
                                   "fuse-hardswish",
                                   "fuse-swish",
                                   "fuse-matmul-add",
                                   "fuse-transpose-matmul",
                                   "fuse-qdq",
                                   "fuse-layernorm"};
  EXPECT_EQ(names, want);
}

// The host fusions are registered passes, each once, and a host compile of a Conv + Relu leaves
// one FusedConv while the C target's keeps both nodes.
TEST(Compile, HostFusionsAreRegisteredAndOnlyTheHostRunsThem) {
  std::set<std::string> seen;
  for (const auto& name : compiler::HostFusions()) {
    EXPECT_NE(passes::FindPass(name), nullptr) << name;
    EXPECT_TRUE(seen.insert(name).second) << name;
  }
  Builder b;
  b.In("x", {1, 3, 8, 8});
  AddFloatInitializer(b.g, "w", {4, 3, 3, 3}, Ramp(108, 0.1f, 0.05f));
  AddNode(b.g, "Conv", {"x", "w"}, {"c"}, "conv");
  AddNode(b.g, "Relu", {"c"}, {"y"}, "relu");
  b.Out("y");
  for (compiler::Target t : {compiler::Target::kHost, compiler::Target::kC}) {
    compiler::CompileOptions o;
    o.target = t;
    auto p = compiler::Compile(Load(b.m), o);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->model.graph->nodes.size(), t == compiler::Target::kHost ? 1u : 2u);
    EXPECT_EQ(p->graphs.size(), 1u);
    EXPECT_EQ(p->main().plan.schedule.order.size(), p->model.graph->nodes.size());
  }
}

// ---- eliminate-dead-nodes ------------------------------------------------------------------

TEST(EliminateDeadNodes, RemovesUnreadChainsAndUnreadRandomDraws) {
  Builder b;
  b.In("x", {2, 3});
  AddNode(b.g, "Relu", {"x"}, {"y"}, "relu");
  AddNode(b.g, "Sigmoid", {"x"}, {"s"}, "dead1");
  AddNode(b.g, "Neg", {"s"}, {"n"}, "dead2");
  auto* r = AddNode(b.g, "RandomNormalLike", {"x"}, {"r"}, "unread_draw");
  (void)r;
  b.Out("y");
  ir::Model m = CheckPass(b.m, "eliminate-dead-nodes", true);
  ASSERT_EQ(m.graph->nodes.size(), 1u);
  EXPECT_EQ(m.graph->nodes[0].name, "relu");
  EXPECT_EQ(m.graph->values[m.graph->nodes[0].outputs[0]].producer, 0);
}

TEST(EliminateDeadNodes, KeepsReadNodesAndMultinomial) {
  Builder b;
  b.In("x", {2, 3});
  AddNode(b.g, "Relu", {"x"}, {"y"}, "relu");
  AddNode(b.g, "Multinomial", {"x"}, {"draw"}, "kept_draw");  // the fold-constants rule keeps it
  b.Out("y");
  ir::Model m = Load(b.m);
  auto changed = passes::FindPass("eliminate-dead-nodes")->run(m);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(m.graph->nodes.size(), 2u);
}

TEST(EliminateDeadNodes, DropsDeadSubgraphNodesAndWhatOnlyTheirCapturesRead) {
  Builder b;
  b.In("x", {2, 3});
  b.In("c", {}, TensorProto::BOOL);
  AddNode(b.g, "Sigmoid", {"x"}, {"h"}, "only_for_the_dead");
  onnx::GraphProto then_g, else_g;
  then_g.set_name("then");
  AddNode(&then_g, "Neg", {"h"}, {"dead"}, "dead_in_branch");
  AddNode(&then_g, "Relu", {"x"}, {"t"}, "then_relu");
  *then_g.add_output() = Info("t", {2, 3});
  else_g.set_name("else");
  AddNode(&else_g, "Abs", {"x"}, {"e"}, "else_abs");
  *else_g.add_output() = Info("e", {2, 3});
  auto* iff = AddNode(b.g, "If", {"c"}, {"y"}, "branch");
  AttrGraph(iff, "then_branch", then_g);
  AttrGraph(iff, "else_branch", else_g);
  b.Out("y");
  ir::Model proto_model = Load(b.m);
  ir::Model m = CheckPass(b.m, "eliminate-dead-nodes", true,
                          {WithCond(proto_model, true), WithCond(proto_model, false)});
  EXPECT_EQ(CountOps(*m.graph, "Sigmoid"), 0);
  EXPECT_EQ(Branch(*m.graph, "then_branch").nodes.size(), 1u);
  EXPECT_EQ(Branch(*m.graph, "then_branch").captures.size(), 1u);  // x only
  const ir::Node* n = NodeNamed(*m.graph, "branch");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->implicit_inputs.size(), 2u);  // x from each branch
}

// ---- fold-constants ------------------------------------------------------------------------

TEST(FoldConstants, ReportsChangedTruthfully) {
  Builder b;
  b.In("x", {4});
  AddFloatInitializer(b.g, "a", {4}, {1, 2, 3, 4});
  AddFloatInitializer(b.g, "c", {4}, {0.5f, 0.5f, 0.5f, 0.5f});
  AddNode(b.g, "Add", {"a", "c"}, {"k"}, "const_add");
  AddNode(b.g, "Mul", {"x", "k"}, {"y"}, "mul");
  b.Out("y");
  ir::Model m = CheckPass(b.m, "fold-constants", true);
  ASSERT_EQ(m.graph->nodes.size(), 1u);
  EXPECT_EQ(m.graph->nodes[0].name, "mul");
  // Nothing to fold: unchanged, and the Status form says so too.
  ir::Model plain = Load(testing::AddReluModel(4));
  bool changed = true;
  ASSERT_TRUE(passes::FoldConstants(plain, 64 * 1024, &changed).ok());
  EXPECT_FALSE(changed);
  CheckPass(testing::AddReluModel(4), "fold-constants", false);
}

// ---- eliminate-identities ------------------------------------------------------------------

TEST(EliminateIdentities, RemovesEveryIdentityForm) {
  Builder b(17);
  b.In("x", {2, 3});
  AddInt64Initializer(b.g, "same_shape", {2}, {2, 3});
  AddInt64Initializer(b.g, "zero_pads", {4}, {0, 0, 0, 0});
  AddInt64Initializer(b.g, "starts", {2}, {0, 0});
  AddInt64Initializer(b.g, "ends", {2}, {100, 3});
  AddInt64Initializer(b.g, "steps", {2}, {1, 1});
  InitBool(b.g, "not_training", false);
  InitBool(b.g, "training", true);
  AddFloatInitializer(b.g, "no_drop", {}, {0.0f});
  AddNode(b.g, "Relu", {"x"}, {"r"}, "relu");
  AddNode(b.g, "Identity", {"r"}, {"i"});
  SetAttr(AddNode(b.g, "Cast", {"i"}, {"c"}), "to", TensorProto::FLOAT);
  AddNode(b.g, "Reshape", {"c", "same_shape"}, {"rs"});
  SetAttr(AddNode(b.g, "Transpose", {"rs"}, {"t"}), "perm", {0, 1});
  AddNode(b.g, "Pad", {"t", "zero_pads"}, {"p"});
  AddNode(b.g, "Slice", {"p", "starts", "ends", "", "steps"}, {"s"});
  AddNode(b.g, "Dropout", {"s", "", "not_training"}, {"d0", ""});
  AddNode(b.g, "Dropout", {"d0", "no_drop", "training"}, {"d"});  // training, ratio 0
  AddNode(b.g, "Expand", {"d", "same_shape"}, {"e"});
  SetAttr(AddNode(b.g, "Flatten", {"e"}, {"f"}), "axis", 1);
  AddNode(b.g, "Squeeze", {"f"}, {"q"});  // no axes, no 1-dims
  AddNode(b.g, "CastLike", {"q", "x"}, {"cl"});
  AddNode(b.g, "Neg", {"cl"}, {"y"}, "neg");
  b.Out("y");
  ir::Model m = CheckPass(b.m, "eliminate-identities", true);
  ASSERT_EQ(m.graph->nodes.size(), 2u) << ir::PrintModel(m);
  EXPECT_EQ(m.graph->nodes[0].name, "relu");
  EXPECT_EQ(m.graph->nodes[1].name, "neg");
  EXPECT_EQ(m.graph->nodes[1].inputs[0], m.graph->nodes[0].outputs[0]);
}

TEST(EliminateIdentities, KeepsNodesThatChangeTheirInput) {
  Builder b(17);
  b.In("x", {2, 3});
  b.In("training", {}, TensorProto::BOOL);
  AddInt64Initializer(b.g, "other_shape", {2}, {3, 2});
  AddInt64Initializer(b.g, "pads", {4}, {0, 1, 0, 0});
  AddInt64Initializer(b.g, "starts", {1}, {-1});
  AddInt64Initializer(b.g, "ends", {1}, {-100});
  AddInt64Initializer(b.g, "axes", {1}, {1});
  AddInt64Initializer(b.g, "back", {1}, {-1});
  AddNode(b.g, "Reshape", {"x", "other_shape"}, {"a"});
  SetAttr(AddNode(b.g, "Transpose", {"a"}, {"b"}), "perm", {1, 0});  // back to [2, 3]
  SetAttr(AddNode(b.g, "Cast", {"b"}, {"c"}), "to", TensorProto::DOUBLE);
  SetAttr(AddNode(b.g, "Cast", {"c"}, {"c2"}), "to", TensorProto::FLOAT);
  AddNode(b.g, "Slice", {"c2", "starts", "ends", "axes", "back"}, {"rev"});  // same dims, reversed
  AddNode(b.g, "Pad", {"rev", "pads"}, {"padded"});
  AddNode(b.g, "Dropout", {"padded", "", "training"}, {"y"});  // training_mode from the caller
  b.Out("y");
  ir::Model proto_model = Load(b.m);
  std::vector<Tensor> in = RandomInputs(proto_model, 3);
  in[1].data<bool>()[0] = false;
  ir::Model m = CheckPass(b.m, "eliminate-identities", false, {in});
  EXPECT_EQ(m.graph->nodes.size(), 7u);
}

TEST(EliminateIdentities, GraphOutputKeepsItsNameThroughTheProducer) {
  Builder b;
  b.In("x", {2, 3});
  AddNode(b.g, "Relu", {"x"}, {"r"}, "relu");
  AddNode(b.g, "Identity", {"r"}, {"y"}, "to_output");
  AddNode(b.g, "Identity", {"x"}, {"passthrough"}, "input_to_output");  // must stay
  AddNode(b.g, "Neg", {"r"}, {"n"}, "neg");
  b.Out("y");
  b.Out("passthrough");
  b.Out("n");
  ir::Model m = CheckPass(b.m, "eliminate-identities", true);
  const ir::Graph& g = *m.graph;
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(OutputName(g, 0), "y");
  EXPECT_EQ(OutputName(g, 1), "passthrough");
  EXPECT_EQ(OutputName(g, 2), "n");
  const ir::Node* relu = NodeNamed(g, "relu");
  ASSERT_TRUE(relu);
  EXPECT_EQ(g.values[relu->outputs[0]].name, "y");
  EXPECT_EQ(NodeNamed(g, "neg")->inputs[0], relu->outputs[0]);
  EXPECT_TRUE(NodeNamed(g, "input_to_output"));
}

TEST(EliminateIdentities, InsideIfBranches) {
  Builder b;
  b.In("x", {2, 3});
  b.In("c", {}, TensorProto::BOOL);
  AddNode(b.g, "Relu", {"x"}, {"r"}, "relu");
  onnx::GraphProto then_g, else_g;
  then_g.set_name("then");
  AddNode(&then_g, "Identity", {"r"}, {"t"});  // returns the captured value itself
  *then_g.add_output() = Info("t", {2, 3});
  else_g.set_name("else");
  AddNode(&else_g, "Neg", {"r"}, {"e1"});
  SetAttr(AddNode(&else_g, "Transpose", {"e1"}, {"e2"}), "perm", {0, 1});
  *else_g.add_output() = Info("e2", {2, 3});
  auto* iff = AddNode(b.g, "If", {"c"}, {"y"}, "branch");
  AttrGraph(iff, "then_branch", then_g);
  AttrGraph(iff, "else_branch", else_g);
  b.Out("y");
  ir::Model pm = Load(b.m);
  ir::Model m =
      CheckPass(b.m, "eliminate-identities", true, {WithCond(pm, true), WithCond(pm, false)});
  EXPECT_EQ(Branch(*m.graph, "then_branch").nodes.size(), 0u);
  EXPECT_EQ(Branch(*m.graph, "else_branch").nodes.size(), 1u);
}

// ---- eliminate-common-subexpressions -------------------------------------------------------

TEST(EliminateCommonSubexpressions, MergesSameNodesAndEqualConstants) {
  Builder b;
  b.In("x", {2, 3});
  AddFloatInitializer(b.g, "c1", {3}, {1, 2, 3});
  AddFloatInitializer(b.g, "c2", {3}, {1, 2, 3});  // other name, same bytes
  AddNode(b.g, "Add", {"x", "c1"}, {"a1"}, "add1");
  AddNode(b.g, "Add", {"x", "c2"}, {"a2"}, "add2");
  SetAttr(AddNode(b.g, "LeakyRelu", {"a1"}, {"l1"}, "leaky1"), "alpha", 0.25f);
  SetAttr(AddNode(b.g, "LeakyRelu", {"a2"}, {"l2"}, "leaky2"), "alpha",
          0.25f);  // same once add2 goes
  AddNode(b.g, "Mul", {"l1", "l2"}, {"y"}, "mul");
  b.Out("y");
  ir::Model m = CheckPass(b.m, "eliminate-common-subexpressions", true);
  const ir::Graph& g = *m.graph;
  ASSERT_EQ(g.nodes.size(), 3u) << ir::PrintModel(m);
  EXPECT_TRUE(NodeNamed(g, "add1") && NodeNamed(g, "leaky1") && NodeNamed(g, "mul"));
  const ir::Node* mul = NodeNamed(g, "mul");
  EXPECT_EQ(mul->inputs[0], mul->inputs[1]);
}

TEST(EliminateCommonSubexpressions, KeepsDifferentNodesRandomDrawsAndGraphOutputs) {
  Builder b;
  b.In("x", {2, 3});
  AddFloatInitializer(b.g, "c1", {3}, {1, 2, 3});
  AddFloatInitializer(b.g, "c3", {3}, {1, 2, 4});
  AddNode(b.g, "Add", {"x", "c1"}, {"a1"});
  AddNode(b.g, "Add", {"x", "c3"}, {"a3"});
  SetAttr(AddNode(b.g, "LeakyRelu", {"a1"}, {"l1"}), "alpha", 0.25f);
  SetAttr(AddNode(b.g, "LeakyRelu", {"a1"}, {"l2"}), "alpha", 0.5f);
  SetAttr(AddNode(b.g, "RandomUniformLike", {"x"}, {"r1"}), "seed", 1);
  SetAttr(AddNode(b.g, "RandomUniformLike", {"x"}, {"r2"}), "seed", 1);
  AddNode(b.g, "Relu", {"x"}, {"o1"});  // both are graph outputs: names are the interface
  AddNode(b.g, "Relu", {"x"}, {"o2"});
  AddNode(b.g, "Sum", {"a3", "l1", "l2"}, {"y"});
  AddNode(b.g, "Sub", {"r1", "r2"}, {"rr"});
  b.Out("y");
  b.Out("o1");
  b.Out("o2");
  b.Out("rr");
  ir::Model m = Load(b.m);
  auto changed = passes::FindPass("eliminate-common-subexpressions")->run(m);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(m.graph->nodes.size(), 10u);
  // Without the random outputs the result is deterministic: check it end to end.
  b.m.mutable_graph()->mutable_output()->RemoveLast();
  CheckPass(b.m, "eliminate-common-subexpressions", false);
}

TEST(EliminateCommonSubexpressions, InsideIfBranches) {
  Builder b;
  b.In("x", {2, 3});
  b.In("c", {}, TensorProto::BOOL);
  onnx::GraphProto then_g, else_g;
  then_g.set_name("then");
  AddNode(&then_g, "Relu", {"x"}, {"a"});
  AddNode(&then_g, "Relu", {"x"}, {"b"});
  AddNode(&then_g, "Add", {"a", "b"}, {"t"});
  *then_g.add_output() = Info("t", {2, 3});
  else_g.set_name("else");
  AddNode(&else_g, "Abs", {"x"}, {"e"});
  AddNode(&else_g, "Abs", {"x"}, {"e2"});  // a branch output: positional, so it may merge
  *else_g.add_output() = Info("e2", {2, 3});
  AddNode(&else_g, "Identity", {"e"}, {"unused"});
  auto* iff = AddNode(b.g, "If", {"c"}, {"y"}, "branch");
  AttrGraph(iff, "then_branch", then_g);
  AttrGraph(iff, "else_branch", else_g);
  b.Out("y");
  ir::Model pm = Load(b.m);
  ir::Model m = CheckPass(b.m, "eliminate-common-subexpressions", true,
                          {WithCond(pm, true), WithCond(pm, false)});
  EXPECT_EQ(CountOps(Branch(*m.graph, "then_branch"), "Relu"), 1);
  EXPECT_EQ(CountOps(Branch(*m.graph, "else_branch"), "Abs"), 1);
}

// ---- cancel-transposes ---------------------------------------------------------------------

TEST(CancelTransposes, CancelsAndComposes) {
  Builder b;
  b.In("x", {2, 3, 4});
  AddNode(b.g, "Relu", {"x"}, {"r"}, "relu");
  SetAttr(AddNode(b.g, "Transpose", {"r"}, {"t1"}, "t1"), "perm", {1, 0, 2});
  SetAttr(AddNode(b.g, "Transpose", {"t1"}, {"t2"}, "t2"), "perm", {1, 0, 2});  // undoes t1
  AddNode(b.g, "Neg", {"t2"}, {"n"}, "neg");
  SetAttr(AddNode(b.g, "Transpose", {"n"}, {"u1"}, "u1"), "perm", {0, 2, 1});   // [2, 4, 3]
  SetAttr(AddNode(b.g, "Transpose", {"u1"}, {"u2"}, "u2"), "perm", {2, 0, 1});  // [3, 2, 4]
  AddNode(b.g, "Transpose", {"u2"}, {"u3"}, "u3");  // default: [4, 2, 3]
  AddNode(b.g, "Sigmoid", {"u3"}, {"y"}, "sigmoid");
  b.Out("y");
  ir::Model m = CheckPass(b.m, "cancel-transposes", true);
  const ir::Graph& g = *m.graph;
  ASSERT_EQ(g.nodes.size(), 4u) << ir::PrintModel(m);
  EXPECT_EQ(NodeNamed(g, "neg")->inputs[0], NodeNamed(g, "relu")->outputs[0]);
  const ir::Node* u3 = NodeNamed(g, "u3");
  ASSERT_TRUE(u3);
  EXPECT_EQ(u3->inputs[0], NodeNamed(g, "neg")->outputs[0]);
  // u1 then u2 then the reversal: out[j] = n[p1[p2[p3[j]]]].
  EXPECT_EQ(u3->attr_ints("perm"), (std::vector<int64_t>{2, 0, 1}));
}

TEST(CancelTransposes, UnitAxisTransposesBecomeReshapes) {
  Builder b;
  b.In("x", {1, 4, 3});
  SetAttr(AddNode(b.g, "Transpose", {"x"}, {"t"}, "moves_unit"), "perm", {1, 0, 2});  // [4, 1, 3]
  SetAttr(AddNode(b.g, "Transpose", {"x"}, {"u"}, "real"), "perm", {0, 2, 1});        // [1, 3, 4]
  AddNode(b.g, "Neg", {"t"}, {"y"}, "neg");
  b.Out("y");
  b.Out("u");
  ir::Model m = CheckPass(b.m, "cancel-transposes", true);
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(NodeNamed(g, "moves_unit")->op_type, "Reshape");
  EXPECT_EQ(NodeNamed(g, "real")->op_type, "Transpose");
}

TEST(CancelTransposes, LeavesSharedInnerResultsAndKeepsOutputs) {
  Builder b;
  b.In("x", {2, 3});
  SetAttr(AddNode(b.g, "Transpose", {"x"}, {"t1"}, "t1"), "perm", {1, 0});
  SetAttr(AddNode(b.g, "Transpose", {"t1"}, {"t2"}, "t2"), "perm", {1, 0});
  AddNode(b.g, "Neg", {"t1"}, {"other"}, "other_reader");
  b.Out("t2");
  b.Out("other");
  ir::Model m = CheckPass(b.m, "cancel-transposes", false);
  EXPECT_EQ(CountOps(*m.graph, "Transpose"), 2);

  // The identity result is a graph output and x a graph input: one Transpose (identity) stays.
  Builder c;
  c.In("x", {2, 3});
  SetAttr(AddNode(c.g, "Transpose", {"x"}, {"t1"}, "t1"), "perm", {1, 0});
  SetAttr(AddNode(c.g, "Transpose", {"t1"}, {"y"}, "t2"), "perm", {1, 0});
  c.Out("y");
  ir::Model m2 = CheckPass(c.m, "cancel-transposes", true);
  ASSERT_EQ(m2.graph->nodes.size(), 1u);
  EXPECT_EQ(m2.graph->nodes[0].name, "t2");
  EXPECT_EQ(OutputName(*m2.graph, 0), "y");

  // With a producer before it, the producer writes the output.
  Builder d;
  d.In("x", {2, 3});
  AddNode(d.g, "Relu", {"x"}, {"r"}, "relu");
  SetAttr(AddNode(d.g, "Transpose", {"r"}, {"t1"}, "t1"), "perm", {1, 0});
  SetAttr(AddNode(d.g, "Transpose", {"t1"}, {"y"}, "t2"), "perm", {1, 0});
  d.Out("y");
  ir::Model m3 = CheckPass(d.m, "cancel-transposes", true);
  ASSERT_EQ(m3.graph->nodes.size(), 1u);
  EXPECT_EQ(m3.graph->nodes[0].name, "relu");
  EXPECT_EQ(OutputName(*m3.graph, 0), "y");
}

// ---- Every pass over the onnx-node conformance models --------------------------------------

bool UsesTrainingOrStrings(const ir::Graph& g) {
  for (const auto& v : g.values)
    if (v.type.dtype == DType::kString || (v.type.elem && v.type.elem->dtype == DType::kString))
      return true;
  for (const auto& n : g.nodes) {
    if (n.domain == "ai.onnx.preview.training") return true;
    for (const auto& [k, a] : n.attrs) {
      if (a.g && UsesTrainingOrStrings(*a.g)) return true;
      for (const auto& sg : a.graphs)
        if (UsesTrainingOrStrings(*sg)) return true;
    }
  }
  return false;
}

// ONNX's tolerances (rtol 1e-3, atol 1e-7), as kiln test-onnx compares.
bool Matches(const Tensor& got, const Tensor& want) {
  if (got.kind() != want.kind()) return false;
  if (want.is_none()) return true;
  if (want.is_sequence()) {
    if (got.items().size() != want.items().size()) return false;
    for (size_t i = 0; i < want.items().size(); ++i)
      if (!Matches(got.items()[i], want.items()[i])) return false;
    return true;
  }
  if (got.dtype() != want.dtype() || got.dims() != want.dims()) return false;
  for (int64_t i = 0; i < want.size(); ++i) {
    if (IsFloatingDType(want.dtype())) {
      double a = got.GetDouble(i), b = want.GetDouble(i);
      bool ok = std::isnan(b)   ? std::isnan(a)
                : std::isinf(b) ? a == b
                                : std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b);
      if (!ok) return false;
    } else if (got.GetInt(i) != want.GetInt(i)) {
      return false;
    }
  }
  return true;
}

enum Outcome { kPass = 0, kFail = 1, kSkip = 2, kPassError = 3 };

// Runs one onnx-node test folder, with or without every pass (twice); the exit code of a child.
int RunConformanceTest(const fs::path& dir, bool with_passes) {
  auto loaded = frontend::LoadOnnxModel((dir / "model.onnx").string());
  if (!loaded.ok())
    return loaded.status().message().find("string tensors") != std::string::npos ? kSkip : kFail;
  if (UsesTrainingOrStrings(*loaded->graph)) return kSkip;
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return kFail;
  for (const auto& set : sets) {
    auto model = frontend::LoadOnnxModel((dir / "model.onnx").string());
    if (!model.ok()) return kFail;
    const ir::Graph& g0 = *model->graph;
    std::vector<int> feeds = g0.RuntimeInputs();
    std::vector<Tensor> inputs;
    passes::ShapeOverrides shapes;
    for (size_t k = 0;; ++k) {
      fs::path f = set / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(f)) break;
      if (k >= feeds.size()) return kFail;
      const ir::Value& v = g0.values[feeds[k]];
      auto t = frontend::LoadValueProtoFile(f.string(), v.type);
      if (!t.ok()) return kFail;
      if (v.type.kind == ir::TypeInfo::Kind::kTensor) shapes[v.name] = t->dims();
      inputs.push_back(std::move(*t));
    }
    if (inputs.size() != feeds.size()) return kFail;
    std::vector<ir::TypeInfo> out_types;
    for (int v : g0.outputs) out_types.push_back(g0.values[v].type);
    if (with_passes) {
      if (!passes::InferShapes(*model, shapes).ok()) return kFail;
      for (int round = 0; round < 2; ++round)
        for (const auto& p : passes::RegisteredPasses()) {
          auto changed = p.run(*model);
          if (!changed.ok()) {
            std::fprintf(stderr, "%s: pass %s: %s\n", dir.filename().c_str(), p.name.c_str(),
                         changed.status().message().c_str());
            return kPassError;
          }
          if (*changed && std::getenv("KILN_SWEEP_VERBOSE"))  // which passes fire where
            std::fprintf(stderr, "changed round %d %s %s\n", round, p.name.c_str(),
                         dir.filename().c_str());
          Status v = ir::Verify(*model->graph);
          if (!v.ok()) {
            std::fprintf(stderr, "%s: after %s: %s\n", dir.filename().c_str(), p.name.c_str(),
                         v.message().c_str());
            return kPassError;
          }
        }
    }
    runtime::ExecutorOptions eo;
    eo.shapes = shapes;
    auto exec = runtime::Executor::Create(std::move(*model), eo);
    if (!exec.ok()) return kFail;
    std::vector<Tensor> outputs;
    if (!(*exec)->Run(inputs, &outputs).ok()) return kFail;
    for (size_t k = 0;; ++k) {
      fs::path f = set / ("output_" + std::to_string(k) + ".pb");
      if (!fs::exists(f)) {
        if (k != outputs.size()) return kFail;
        break;
      }
      if (k >= outputs.size()) return kFail;
      auto want = frontend::LoadValueProtoFile(f.string(), out_types[k]);
      if (!want.ok() || !Matches(outputs[k], *want)) return kFail;
    }
  }
  return kPass;
}

// In a child process, so that a crash or hang is that test's failure.
int RunIsolated(const fs::path& dir, bool with_passes) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(120);
    _exit(RunConformanceTest(dir, with_passes));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  std::fprintf(stderr, "%s: %s by signal %d\n", dir.filename().c_str(),
               with_passes ? "with passes" : "without passes", WTERMSIG(status));
  return kFail;
}

// Every test of a conformance suite without and with every pass (twice): no test may fail only
// with the passes, and no pass may fail.
void Sweep(const std::string& suite) {
  fs::path root = fs::path(KILN_CONFORMANCE_DIR) / suite;
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " not found";
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  int counts[2][4] = {};
  std::vector<std::string> regressions;
  for (const auto& t : tests) {
    int before = RunIsolated(t, false), after = RunIsolated(t, true);
    ++counts[0][before];
    ++counts[1][after];
    if (before == kPass && after != kPass) regressions.push_back(t.filename().string());
  }
  for (int w = 0; w < 2; ++w)
    std::cout << suite << (w ? " with every pass twice: " : " without passes:        ")
              << counts[w][kPass] << " passed, " << counts[w][kFail] + counts[w][kPassError]
              << " failed (" << counts[w][kPassError] << " by a pass error), " << counts[w][kSkip]
              << " skipped\n";
  ::testing::Test::RecordProperty("passed_without_passes", counts[0][kPass]);
  ::testing::Test::RecordProperty("passed_with_passes", counts[1][kPass]);
  std::string list;
  for (const auto& r : regressions) list += " " + r;
  EXPECT_TRUE(regressions.empty())
      << regressions.size() << " tests fail only with the passes:" << list;
  EXPECT_EQ(counts[1][kPassError], 0);
}

TEST(PassesSweep, OnnxNode) { Sweep("onnx-node"); }
TEST(PassesSweep, OnnxSimple) { Sweep("onnx-simple"); }
TEST(PassesSweep, OnnxPytorchOperator) { Sweep("onnx-pytorch-operator"); }
TEST(PassesSweep, OnnxPytorchConverted) { Sweep("onnx-pytorch-converted"); }
TEST(PassesSweep, OnnxLight) { Sweep("onnx-light"); }

}  // namespace
}  // namespace kiln
