// Helpers of the graph-pass tests (passes_test.cc, fusion_passes_test.cc): small ONNX models
// built in code, loading and running them on the host, and CheckPass, which applies a pass and
// checks the model and its results after it.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {

using onnx::TensorProto;
using testing::AddFloatInitializer;
using testing::AddInt64Initializer;
using testing::SetAttr;

// ---- Building ONNX models ------------------------------------------------------------------

inline onnx::ValueInfoProto Info(const std::string& name, const std::vector<int64_t>& dims,
                                 int elem = TensorProto::FLOAT) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return vi;
}

inline void AttrGraph(onnx::NodeProto* n, const std::string& k, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                                std::vector<std::string> in, std::vector<std::string> out,
                                const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

inline void InitBool(onnx::GraphProto* g, const std::string& name, bool v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::BOOL);
  t->add_int32_data(v ? 1 : 0);
}

inline std::vector<float> Ramp(int64_t n, float scale, float offset) {
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

inline ir::Model Load(const onnx::ModelProto& proto) {
  std::string bytes = proto.SerializeAsString();
  auto m = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
  KILN_CHECK(m.ok(), m.status().message());
  Status st = passes::InferShapes(*m);
  KILN_CHECK(st.ok(), st.message());
  return std::move(*m);
}

inline std::vector<Tensor> RandomInputs(const ir::Model& m, uint32_t seed) {
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
inline std::vector<Tensor> RunHost(const ir::Model& m, const std::vector<Tensor>& inputs) {
  runtime::ExecutorOptions o;
  o.host_passes = false;
  auto exec = runtime::Executor::Create(m, o);
  KILN_CHECK(exec.ok(), exec.status().message());
  std::vector<Tensor> out;
  Status st = (*exec)->Run(inputs, &out);
  KILN_CHECK(st.ok(), st.message());
  return out;
}

inline double RelL2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double a = got.GetDouble(i), b = want.GetDouble(i);
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline void ExpectSameOutputs(const std::vector<Tensor>& before, const std::vector<Tensor>& after,
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
inline ir::Model CheckPass(const onnx::ModelProto& proto, const std::string& pass,
                           bool expect_changed, std::vector<std::vector<Tensor>> input_sets = {}) {
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

inline int CountOps(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const ir::Node& n) { return n.op_type == op; }));
}

inline const ir::Node* NodeNamed(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

inline const ir::Graph& Branch(const ir::Graph& g, const std::string& attr) {
  for (const auto& n : g.nodes)
    if (n.op_type == "If") return *n.attr(attr)->g;
  KILN_CHECK(false, "no If node");
  std::abort();
}

inline std::string OutputName(const ir::Graph& g, int k) { return g.values[g.outputs[k]].name; }

inline std::vector<Tensor> WithCond(const ir::Model& m, bool cond) {
  std::vector<Tensor> in = RandomInputs(m, 11);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].dtype() == DType::kBool) in[i].data<bool>()[0] = cond;
  return in;
}

}  // namespace kiln
