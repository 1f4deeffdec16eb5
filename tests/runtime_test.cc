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

}  // namespace
}  // namespace kiln
