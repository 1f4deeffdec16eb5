// The graph optimization passes: for each, a model where it applies and one where it must not
// (structure, ir::Verify, and the host executor's results before and after on random inputs:
// bit-identical for exact passes, relative L2 <= 1e-5 otherwise), subgraph and graph-output
// cases; then every registered pass, in registry order and twice, over the onnx-node models
// against their expected outputs.
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
#include "passes/fold_constants.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

// ---- Building ONNX models ------------------------------------------------------------------

onnx::ValueInfoProto Info(const std::string& name, const std::vector<int64_t>& dims,
                          int elem = TensorProto::FLOAT) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return vi;
}

void AttrInt(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void AttrFloat(onnx::NodeProto* n, const std::string& k, float v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void AttrInts(onnx::NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void AttrGraph(onnx::NodeProto* n, const std::string& k, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void InitFloats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<float>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
}
void InitInts(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
              const std::vector<int64_t>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
}
void InitBool(onnx::GraphProto* g, const std::string& name, bool v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::BOOL);
  t->add_int32_data(v ? 1 : 0);
}

std::vector<float> Ramp(int64_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 11 - 5);
  return v;
}

struct Builder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit Builder(int opset = 17) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
  }
  void In(const std::string& n, std::vector<int64_t> d, int elem = TensorProto::FLOAT) {
    *g->add_input() = Info(n, d, elem);
  }
  void Out(const std::string& n) { g->add_output()->set_name(n); }
};

// ---- Loading, running, comparing -----------------------------------------------------------

ir::Model Load(const onnx::ModelProto& proto) {
  std::string bytes = proto.SerializeAsString();
  auto m = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
  KILN_CHECK(m.ok(), m.status().message());
  Status st = passes::InferShapes(*m);
  KILN_CHECK(st.ok(), st.message());
  return std::move(*m);
}

std::vector<Tensor> RandomInputs(const ir::Model& m, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<Tensor> r;
  for (int v : m.graph->RuntimeInputs()) {
    const ir::TypeInfo& t = m.graph->values[v].type;
    KILN_CHECK(t.shape_known(), "test inputs need known shapes");
    Tensor x(t.dtype, t.dims);
    for (int64_t i = 0; i < x.size(); ++i) {
      switch (t.dtype) {
        case DType::kFloat32:
          x.data<float>()[i] = u(gen);
          break;
        case DType::kFloat64:
          x.data<double>()[i] = u(gen);
          break;
        case DType::kBool:
          x.data<bool>()[i] = gen() & 1;
          break;
        case DType::kInt64:
          x.data<int64_t>()[i] = static_cast<int64_t>(gen() % 7) - 3;
          break;
        default:
          KILN_CHECK(false, "unsupported test input dtype");
      }
    }
    r.push_back(std::move(x));
  }
  return r;
}

// Runs m as it is (without the executor's own host fusions, so that "before" is unfused).
std::vector<Tensor> RunHost(const ir::Model& m, const std::vector<Tensor>& inputs) {
  runtime::ExecutorOptions o;
  o.host_passes = false;
  auto exec = runtime::Executor::Create(m, o);
  KILN_CHECK(exec.ok(), exec.status().message());
  std::vector<Tensor> out;
  Status st = (*exec)->Run(inputs, &out);
  KILN_CHECK(st.ok(), st.message());
  return out;
}

double RelL2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double a = got.GetDouble(i), b = want.GetDouble(i);
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

void ExpectSameOutputs(const std::vector<Tensor>& before, const std::vector<Tensor>& after,
                       bool exact) {
  ASSERT_EQ(before.size(), after.size());
  for (size_t k = 0; k < before.size(); ++k) {
    ASSERT_EQ(before[k].dtype(), after[k].dtype()) << "output " << k;
    ASSERT_EQ(before[k].dims(), after[k].dims()) << "output " << k;
    if (exact) {
      EXPECT_EQ(std::memcmp(before[k].raw(), after[k].raw(), before[k].nbytes()), 0)
          << "output " << k << " differs";
    } else {
      EXPECT_LE(RelL2(after[k], before[k]), 1e-5) << "output " << k;
    }
  }
}

// Applies `pass` to the model, checks Verify, the changed answer and the host's results on
// random inputs (or `inputs` when given) against the unchanged model; returns the model after.
ir::Model CheckPass(const onnx::ModelProto& proto, const std::string& pass, bool expect_changed,
                    std::vector<std::vector<Tensor>> input_sets = {}) {
  const passes::PassInfo* info = passes::FindPass(pass);
  KILN_CHECK(info, "unknown pass " + pass);
  ir::Model after = Load(proto);
  auto changed = info->run(after);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  if (!changed.ok()) return after;
  EXPECT_EQ(*changed, expect_changed) << pass;
  Status v = ir::Verify(*after.graph);
  EXPECT_TRUE(v.ok()) << v.message();
  // Run to its end on a fresh copy, a second run finds nothing left to do (the answer is truthful).
  ir::Model again = Load(proto);
  auto first = info->run(again);
  auto second = info->run(again);
  EXPECT_TRUE(first.ok() && second.ok() && !*second)
      << pass << " changed the model on a second run";
  ir::Model before = Load(proto);
  if (input_sets.empty()) input_sets.push_back(RandomInputs(before, 7));
  for (const auto& inputs : input_sets) {
    std::vector<Tensor> want = RunHost(before, inputs);
    std::vector<Tensor> got = RunHost(Load(proto), inputs);  // the executor is deterministic
    ExpectSameOutputs(want, got, true);
    ExpectSameOutputs(want, RunHost(after, inputs), info->exact);
  }
  return after;
}

int CountOps(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const ir::Node& n) { return n.op_type == op; }));
}

const ir::Node* NodeNamed(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

const ir::Graph& Branch(const ir::Graph& g, const std::string& attr) {
  for (const auto& n : g.nodes)
    if (n.op_type == "If") return *n.attr(attr)->g;
  KILN_CHECK(false, "no If node");
  std::abort();
}

std::string OutputName(const ir::Graph& g, int k) { return g.values[g.outputs[k]].name; }

std::vector<Tensor> WithCond(const ir::Model& m, bool cond) {
  std::vector<Tensor> in = RandomInputs(m, 11);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].dtype() == DType::kBool) in[i].data<bool>()[0] = cond;
  return in;
}

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
  InitFloats(b.g, "w", {4, 3, 3, 3}, Ramp(108, 0.1f, 0.05f));
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
  InitFloats(b.g, "a", {4}, {1, 2, 3, 4});
  InitFloats(b.g, "c", {4}, {0.5f, 0.5f, 0.5f, 0.5f});
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
  InitInts(b.g, "same_shape", {2}, {2, 3});
  InitInts(b.g, "zero_pads", {4}, {0, 0, 0, 0});
  InitInts(b.g, "starts", {2}, {0, 0});
  InitInts(b.g, "ends", {2}, {100, 3});
  InitInts(b.g, "steps", {2}, {1, 1});
  InitBool(b.g, "not_training", false);
  InitBool(b.g, "training", true);
  InitFloats(b.g, "no_drop", {}, {0.0f});
  AddNode(b.g, "Relu", {"x"}, {"r"}, "relu");
  AddNode(b.g, "Identity", {"r"}, {"i"});
  AttrInt(AddNode(b.g, "Cast", {"i"}, {"c"}), "to", TensorProto::FLOAT);
  AddNode(b.g, "Reshape", {"c", "same_shape"}, {"rs"});
  AttrInts(AddNode(b.g, "Transpose", {"rs"}, {"t"}), "perm", {0, 1});
  AddNode(b.g, "Pad", {"t", "zero_pads"}, {"p"});
  AddNode(b.g, "Slice", {"p", "starts", "ends", "", "steps"}, {"s"});
  AddNode(b.g, "Dropout", {"s", "", "not_training"}, {"d0", ""});
  AddNode(b.g, "Dropout", {"d0", "no_drop", "training"}, {"d"});  // training, ratio 0
  AddNode(b.g, "Expand", {"d", "same_shape"}, {"e"});
  AttrInt(AddNode(b.g, "Flatten", {"e"}, {"f"}), "axis", 1);
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
  InitInts(b.g, "other_shape", {2}, {3, 2});
  InitInts(b.g, "pads", {4}, {0, 1, 0, 0});
  InitInts(b.g, "starts", {1}, {-1});
  InitInts(b.g, "ends", {1}, {-100});
  InitInts(b.g, "axes", {1}, {1});
  InitInts(b.g, "back", {1}, {-1});
  AddNode(b.g, "Reshape", {"x", "other_shape"}, {"a"});
  AttrInts(AddNode(b.g, "Transpose", {"a"}, {"b"}), "perm", {1, 0});  // back to [2, 3]
  AttrInt(AddNode(b.g, "Cast", {"b"}, {"c"}), "to", TensorProto::DOUBLE);
  AttrInt(AddNode(b.g, "Cast", {"c"}, {"c2"}), "to", TensorProto::FLOAT);
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
  AttrInts(AddNode(&else_g, "Transpose", {"e1"}, {"e2"}), "perm", {0, 1});
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
  InitFloats(b.g, "c1", {3}, {1, 2, 3});
  InitFloats(b.g, "c2", {3}, {1, 2, 3});  // other name, same bytes
  AddNode(b.g, "Add", {"x", "c1"}, {"a1"}, "add1");
  AddNode(b.g, "Add", {"x", "c2"}, {"a2"}, "add2");
  AttrFloat(AddNode(b.g, "LeakyRelu", {"a1"}, {"l1"}, "leaky1"), "alpha", 0.25f);
  AttrFloat(AddNode(b.g, "LeakyRelu", {"a2"}, {"l2"}, "leaky2"), "alpha",
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
  InitFloats(b.g, "c1", {3}, {1, 2, 3});
  InitFloats(b.g, "c3", {3}, {1, 2, 4});
  AddNode(b.g, "Add", {"x", "c1"}, {"a1"});
  AddNode(b.g, "Add", {"x", "c3"}, {"a3"});
  AttrFloat(AddNode(b.g, "LeakyRelu", {"a1"}, {"l1"}), "alpha", 0.25f);
  AttrFloat(AddNode(b.g, "LeakyRelu", {"a1"}, {"l2"}), "alpha", 0.5f);
  AttrInt(AddNode(b.g, "RandomUniformLike", {"x"}, {"r1"}), "seed", 1);
  AttrInt(AddNode(b.g, "RandomUniformLike", {"x"}, {"r2"}), "seed", 1);
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
  AttrInts(AddNode(b.g, "Transpose", {"r"}, {"t1"}, "t1"), "perm", {1, 0, 2});
  AttrInts(AddNode(b.g, "Transpose", {"t1"}, {"t2"}, "t2"), "perm", {1, 0, 2});  // undoes t1
  AddNode(b.g, "Neg", {"t2"}, {"n"}, "neg");
  AttrInts(AddNode(b.g, "Transpose", {"n"}, {"u1"}, "u1"), "perm", {0, 2, 1});   // [2, 4, 3]
  AttrInts(AddNode(b.g, "Transpose", {"u1"}, {"u2"}, "u2"), "perm", {2, 0, 1});  // [3, 2, 4]
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
  AttrInts(AddNode(b.g, "Transpose", {"x"}, {"t"}, "moves_unit"), "perm", {1, 0, 2});  // [4, 1, 3]
  AttrInts(AddNode(b.g, "Transpose", {"x"}, {"u"}, "real"), "perm", {0, 2, 1});        // [1, 3, 4]
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
  AttrInts(AddNode(b.g, "Transpose", {"x"}, {"t1"}, "t1"), "perm", {1, 0});
  AttrInts(AddNode(b.g, "Transpose", {"t1"}, {"t2"}, "t2"), "perm", {1, 0});
  AddNode(b.g, "Neg", {"t1"}, {"other"}, "other_reader");
  b.Out("t2");
  b.Out("other");
  ir::Model m = CheckPass(b.m, "cancel-transposes", false);
  EXPECT_EQ(CountOps(*m.graph, "Transpose"), 2);

  // The identity result is a graph output and x a graph input: one Transpose (identity) stays.
  Builder c;
  c.In("x", {2, 3});
  AttrInts(AddNode(c.g, "Transpose", {"x"}, {"t1"}, "t1"), "perm", {1, 0});
  AttrInts(AddNode(c.g, "Transpose", {"t1"}, {"y"}, "t2"), "perm", {1, 0});
  c.Out("y");
  ir::Model m2 = CheckPass(c.m, "cancel-transposes", true);
  ASSERT_EQ(m2.graph->nodes.size(), 1u);
  EXPECT_EQ(m2.graph->nodes[0].name, "t2");
  EXPECT_EQ(OutputName(*m2.graph, 0), "y");

  // With a producer before it, the producer writes the output.
  Builder d;
  d.In("x", {2, 3});
  AddNode(d.g, "Relu", {"x"}, {"r"}, "relu");
  AttrInts(AddNode(d.g, "Transpose", {"r"}, {"t1"}, "t1"), "perm", {1, 0});
  AttrInts(AddNode(d.g, "Transpose", {"t1"}, {"y"}, "t2"), "perm", {1, 0});
  d.Out("y");
  ir::Model m3 = CheckPass(d.m, "cancel-transposes", true);
  ASSERT_EQ(m3.graph->nodes.size(), 1u);
  EXPECT_EQ(m3.graph->nodes[0].name, "relu");
  EXPECT_EQ(OutputName(*m3.graph, 0), "y");
}

// ---- fuse-transpose-matmul -----------------------------------------------------------------

// q [2, 3, 4, 8] times K^T (K [2, 3, 5, 8] transposed by perm [0, 1, 3, 2]); with `transpose_a`
// also x^T [.., 4, 8] times v [3, 8, 6]; `read_twice`: the transposed K is also a graph output.
onnx::ModelProto AttentionScoresModel(bool transpose_a, bool read_twice) {
  Builder b(17);
  b.In("q", {2, 3, 4, 8});
  b.In("k", {2, 3, 5, 8});
  AttrInts(AddNode(b.g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  AddNode(b.g, "MatMul", {"q", "kt"}, {"s"}, "scores");
  b.Out("s");
  if (transpose_a) {
    b.In("x", {2, 3, 8, 4});
    b.In("v", {3, 8, 6});
    AttrInts(AddNode(b.g, "Transpose", {"x"}, {"xt"}, "xt"), "perm", {0, 1, 3, 2});
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
  InitFloats(b.g, "W", {3, 2, 3, 3}, Ramp(54, 0.1f, 0.05f));
  if (with_bias) InitFloats(b.g, "B", {3}, {0.1f, -0.2f, 0.3f});
  InitFloats(b.g, "scale", {3}, {1.5f, 0.5f, -2.0f});
  InitFloats(b.g, "shift", {3}, {0.25f, -1.0f, 0.0f});
  InitFloats(b.g, "mean", {3}, {0.1f, 0.2f, -0.3f});
  InitFloats(b.g, "var", {3}, {0.5f, 2.0f, 1.0f});
  auto* conv = AddNode(
      b.g, "Conv",
      with_bias ? std::vector<std::string>{"X", "W", "B"} : std::vector<std::string>{"X", "W"},
      {"c"}, "conv1");
  AttrInts(conv, "pads", {1, 1, 1, 1});
  AttrFloat(
      AddNode(b.g, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn"}, "bn1"),
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
  InitFloats(g, "sc", spatial_mul ? std::vector<int64_t>{1, 1, 5} : std::vector<int64_t>{3, 1, 1},
             spatial_mul ? Ramp(5, 0.5f, 0.25f) : std::vector<float>{2.0f, -0.5f, 0.75f});
  InitFloats(g, "sh", {}, {0.125f});
  InitFloats(g, "sub", {1, 3, 1, 1}, {0.5f, -0.25f, 1.0f});
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
    InitFloats(b.g, "W", {4, 6 / group, 3, 3}, Ramp(4 * 6 / group * 9, 0.1f, 0.05f));
    InitFloats(b.g, "bias", {6, 1, 1}, {0.1f, -0.2f, 0.3f, 0.0f, 0.5f, -1.0f});
    InitFloats(b.g, "scale", {6}, {1.5f, 0.5f, -2.0f, 1.0f, 0.25f, 3.0f});
    InitFloats(b.g, "shift", {6}, {0.25f, -1.0f, 0.0f, 0.5f, 0.125f, -0.5f});
    InitFloats(b.g, "mean", {6}, {0.1f, 0.2f, -0.3f, 0.0f, 1.0f, -1.0f});
    InitFloats(b.g, "var", {6}, {0.5f, 2.0f, 1.0f, 0.25f, 4.0f, 1.5f});
    auto* ct = AddNode(b.g, "ConvTranspose", {"X", "W"}, {"c"}, "up");
    AttrInts(ct, "strides", {2, 2});
    AttrInt(ct, "group", group);
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
  InitFloats(b.g, "scale", {3}, {1.5f, 0.5f, -2.0f});
  InitFloats(b.g, "shift", {3}, {0.25f, -1.0f, 0.0f});
  InitFloats(b.g, "mean", {3}, {0.1f, 0.2f, -0.3f});
  InitFloats(b.g, "var", {3}, {0.5f, 2.0f, 1.0f});
  InitFloats(b.g, "sc", {3, 1, 1}, {2.0f, -0.5f, 0.75f});
  InitFloats(b.g, "sh", {1, 3, 1, 1}, {0.5f, -0.25f, 1.0f});
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
    InitFloats(b.g, "scale", {4}, {1.5f, 0.5f, -2.0f, 1.0f});
    InitFloats(b.g, "bias", {4}, {0.25f, -1.0f, 0.0f, 2.0f});
    InitFloats(b.g, "sc", {4, 1, 1}, {2.0f, -0.5f, 0.75f, 3.0f});
    InitFloats(b.g, "sh", {1, 4, 1, 1}, {0.5f, -0.25f, 1.0f, 0.0f});
    auto* n = AddNode(b.g, op, {"X", "scale", "bias"}, {"nrm"}, "norm");
    if (std::string(op) == "GroupNormalization") AttrInt(n, "num_groups", 2);
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
  InitInts(b.g, "grouped_shape", {3}, {2, 3, -1});
  InitInts(b.g, "x_shape", {4}, {2, 6, 4, 5});
  InitFloats(b.g, "ones", {3}, {1.0f, 0.5f, 2.0f});
  InitFloats(b.g, "zeros", {3}, {0.0f, 0.25f, -1.0f});
  InitFloats(b.g, "gamma", {6, 1, 1}, {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.5f});
  InitFloats(b.g, "beta", {6, 1, 1}, {0.0f, 1.0f, -2.0f, 0.5f, 0.25f, -0.75f});
  AddNode(b.g, "Neg", {"x"}, {"n"}, "neg");
  AddNode(b.g, "Reshape", {"n", "grouped_shape"}, {"r"}, "to_groups");
  AttrFloat(AddNode(b.g, "InstanceNormalization", {"r", "ones", "zeros"}, {"i"}, "norm"), "epsilon",
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
  InitFloats(b.g, "two", {}, {2.0f});
  InitFloats(b.g, "eps", {}, {1e-5f});
  InitFloats(b.g, "gamma", {8}, {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.5f, 0.25f, -2.0f});
  InitFloats(b.g, "beta", {8}, {0.0f, 1.0f, -2.0f, 0.5f, 0.25f, -0.75f, 2.0f, 0.125f});
  InitInts(b.g, "axes", {1}, {axis});
  AddNode(b.g, "Neg", {"x"}, {"n"}, "neg");
  auto mean = [&](const std::string& in, const std::string& out) {
    if (opset >= 18) return AddNode(b.g, "ReduceMean", {in, "axes"}, {out});
    auto* node = AddNode(b.g, "ReduceMean", {in}, {out});
    AttrInts(node, "axes", {axis});
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
  InitFloats(b.g, "two", {}, {2.0f});
  InitFloats(b.g, "eps", {}, {1e-6f});
  InitFloats(b.g, "gamma", {8}, {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.5f, 0.25f, -2.0f});
  AddNode(b.g, "Neg", {"x"}, {"n"}, "neg");
  if (square == "Pow")
    AddNode(b.g, "Pow", {"n", "two"}, {"sq"});
  else
    AddNode(b.g, "Mul", {"n", "n"}, {"sq"});
  AttrInts(AddNode(b.g, "ReduceMean", {"sq"}, {"ms"}), "axes", {-1});
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
  InitInts(b.g, "split", {5}, {1, groups, 6 / groups, 3, 4});
  InitInts(b.g, "merge", {4}, {1, 6, 3, 4});
  AddNode(b.g, "Reshape", {"x", "split"}, {"r"}, "split");
  AttrInts(AddNode(b.g, "Transpose", {"r"}, {"t"}, "swap"), "perm", perm);
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
  InitFloats(b.g, "k", {}, {mul_scale ? 1.0f / sqrt2 : sqrt2});
  InitFloats(b.g, "one", {}, {1.0f});
  InitFloats(b.g, "half", {}, {0.5f});
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
  InitFloats(b.g, "k", {}, {static_cast<float>(std::sqrt(2.0 / M_PI))});
  InitFloats(b.g, "c", {}, {c});
  InitFloats(b.g, "three", {}, {3.0f});
  InitFloats(b.g, "one", {}, {1.0f});
  InitFloats(b.g, "half", {}, {0.5f});
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
  InitFloats(b.g, "three", {}, {three});
  InitFloats(b.g, "six", {1}, {6.0f});
  InitFloats(b.g, "sixth", {}, {1.0f / 6.0f});
  InitFloats(b.g, "zero", {}, {0.0f});
  auto two = [&](const char* a, const char* c) {
    return swap ? std::vector<std::string>{c, a} : std::vector<std::string>{a, c};
  };
  if (form == 2) {
    auto* hs = AddNode(b.g, "HardSigmoid", {"x"}, {"c"}, "gate");
    AttrFloat(hs, "alpha", 1.0f / 6.0f);
    AddNode(b.g, "Mul", two("x", "c"), {"g"}, "times_x");
  } else {
    AddNode(b.g, "Add", two("x", "three"), {"a"}, "shift");
    if (opset < 11) {
      auto* clip = AddNode(b.g, "Clip", {"a"}, {"c"}, "relu6");
      AttrFloat(clip, "min", 0.0f);
      AttrFloat(clip, "max", 6.0f);
    } else {
      AddNode(b.g, "Clip", {"a", "zero", "six0"}, {"c"}, "relu6");
      InitFloats(b.g, "six0", {}, {6.0f});
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
  InitFloats(b.g, "Bw", {k, n}, Ramp(k * n, 0.2f, -0.1f));
  int64_t bias_n = 1;
  for (int64_t d : bias_dims) bias_n *= d;
  InitFloats(b.g, "bias", bias_dims, Ramp(bias_n, 0.3f, 0.5f));
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
  InitFloats(b.g, "W", {3, 2, 3, 3}, Ramp(54, 0.1f, -0.05f));
  InitFloats(b.g, "B", {3}, {0.1f, -0.2f, 0.3f});
  AttrInts(AddNode(b.g, "Conv", {"X", "W", "B"}, {"c"}, "conv1"), "pads", {1, 1, 1, 1});
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
    AttrFloat(AddNode(b.g, "LeakyRelu", {last}, {"y"}, "leaky"), "alpha", 0.2f);
    last = "y";
  } else if (tail == "hardswish" || tail == "add_hardswish") {
    AddNode(b.g, "HardSwish", {last}, {"y"}, "hardswish");
    last = "y";
  } else if (tail == "swish") {  // SiLU as exporters write it: Mul(c, Sigmoid(c))
    AddNode(b.g, "Sigmoid", {last}, {"sg"}, "sigmoid");
    AddNode(b.g, "Mul", {"sg", last}, {"y"}, "silu");
    last = "y";
  } else if (tail == "clip" || tail == "clip_input_bound") {
    InitFloats(b.g, "lo", {}, {-0.5f});
    if (tail == "clip")
      InitFloats(b.g, "hi", {}, {0.75f});
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
  InitFloats(b.g, "W", {3, 2, 3, 3}, Ramp(54, 0.1f, -0.05f));
  InitFloats(b.g, "K", {3, 1, 1}, {1.0f, 2.0f, 3.0f});
  AddNode(b.g, "Conv", {"X", "W"}, {"c"}, "conv1");
  AddNode(b.g, "Add", {"c", "K"}, {"y"}, "bias");
  b.Out("y");
  CheckPass(b.m, "fuse-conv-activation", false);
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
