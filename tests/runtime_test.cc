#include <gtest/gtest.h>

#include <cstring>

#include "frontend/onnx_import.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln {
namespace {

Expected<ir::Model> Parse(const onnx::ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  return frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
}

TEST(Executor, RunsAndIsDeterministicAcrossThreadsAndPlanners) {
  auto model = Parse(testing::AddReluModel(6));
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {6});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) * 0.5f - 1.0f;
  std::vector<Tensor> first;
  for (int threads : {1, 2}) {
    for (const char* planner : {"default", "none", "tflm", "coloring"}) {
      runtime::ExecutorOptions o;
      o.threads = threads;
      o.planner = planner;
      o.poison = true;
      auto exec = runtime::Executor::Create(*model, o);
      ASSERT_TRUE(exec.ok()) << exec.status().message();
      std::vector<Tensor> out;
      ASSERT_TRUE((*exec)->Run({x}, &out).ok());
      ASSERT_EQ(out.size(), 1u);
      for (int i = 0; i < 6; ++i) {
        float w = static_cast<float>(i) - 1.5f;
        EXPECT_EQ(out[0].data<float>()[i], std::max(0.0f, x.data<float>()[i] + w));
      }
      if (first.empty()) first = out;
      EXPECT_EQ(std::memcmp(first[0].raw(), out[0].raw(), out[0].nbytes()), 0);
    }
  }
}

TEST(Executor, ShapeInferenceErrorsNameTheNode) {
  auto m = testing::AddReluModel(4);
  // Declare the Add output with a shape that contradicts what the node computes.
  *m.mutable_graph()->add_value_info() = testing::FloatInfo("s", {5});
  auto model = Parse(m);
  ASSERT_TRUE(model.ok());
  auto exec = runtime::Executor::Create(std::move(*model));
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("node 'add'"), std::string::npos) << exec.status().message();
}

TEST(Executor, RejectsWrongInputs) {
  auto model = Parse(testing::AddReluModel(4));
  auto exec = runtime::Executor::Create(std::move(*model));
  ASSERT_TRUE(exec.ok());
  std::vector<Tensor> out;
  Status st = (*exec)->Run({Tensor(DType::kFloat32, {3})}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input 'x'"), std::string::npos);
  EXPECT_FALSE((*exec)->Run({}, &out).ok());
}

// x -> Relu -> r; Slice(r, rows 1..3) -> Neg; Split(r) -> Concat(q, p) -> Sigmoid.
onnx::ModelProto ViewModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::FloatInfo("x", {1, 4, 3});
  for (const char* o : {"y", "w"}) g->add_output()->set_name(o);
  auto ints = [&](const char* name, int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(1);
    t->add_int64_data(v);
  };
  ints("starts", 1);
  ints("ends", 3);
  ints("axes", 1);
  auto node = [&](const char* op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(std::string(op) + "_" + out[0]);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  };
  node("Relu", {"x"}, {"r"});
  node("Slice", {"r", "starts", "ends", "axes"}, {"s"});
  node("Neg", {"s"}, {"y"});
  auto* split = node("Split", {"r"}, {"p", "q"});
  auto* a = split->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  auto* concat = node("Concat", {"q", "p"}, {"c"});
  auto* ca = concat->add_attribute();
  ca->set_name("axis");
  ca->set_type(onnx::AttributeProto::INT);
  ca->set_i(1);
  node("Sigmoid", {"c"}, {"w"});
  return m;
}

TEST(Executor, ViewsSlicesAndConcatInPlaceGiveTheSameResults) {
  auto model = Parse(ViewModel());
  ASSERT_TRUE(model.ok()) << model.status().message();
  Tensor x(DType::kFloat32, {1, 4, 3});
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 2.0f;
  std::vector<std::vector<Tensor>> results;
  for (bool aliasing : {true, false}) {
    runtime::ExecutorOptions o;
    o.aliasing = aliasing;
    o.poison = true;
    auto exec = runtime::Executor::Create(*model, o);
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    int aliased = 0;
    for (const auto& b : (*exec)->plan().buffers) aliased += b.alias_of >= 0;
    if (aliasing) EXPECT_GE(aliased, 3);  // the slice, both split halves / concat inputs
    std::vector<Tensor> out;
    ASSERT_TRUE((*exec)->Run({x}, &out).ok());
    results.push_back(out);
  }
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(std::memcmp(results[0][k].raw(), results[1][k].raw(), results[0][k].nbytes()), 0) << k;
  // y = -relu(x)[:, 1:3]
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(results[0][0].data<float>()[i], -std::max(0.0f, x.data<float>()[3 + i]));
}

}  // namespace
}  // namespace kiln
