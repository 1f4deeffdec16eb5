// Helpers for the tests that run generated ONNX models through the host executor and compare
// outputs: tensors and value infos in FLOAT or DOUBLE, random inputs, runs at a thread count and
// kernel set, and the closeness check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "ops/common.h"
#include "runtime/executor.h"
#include "test_models.h"

namespace kiln::testing {

// A tensor proto of `dims` holding `values` as FLOAT or DOUBLE.
inline void FillTensor(onnx::TensorProto* t, const std::string& name,
                       onnx::TensorProto::DataType type, const std::vector<int64_t>& dims,
                       const std::vector<double>& values) {
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  for (double v : values) {
    if (type == onnx::TensorProto::DOUBLE)
      t->add_double_data(v);
    else
      t->add_float_data(static_cast<float>(v));
  }
}

inline onnx::ValueInfoProto Info(const std::string& name, onnx::TensorProto::DataType type,
                                 const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto vi = testing::FloatInfo(name, dims);
  vi.mutable_type()->mutable_tensor_type()->set_elem_type(type);
  return vi;
}

inline std::vector<double> Random(size_t n, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (auto& x : v)
    x = static_cast<float>(u(rng));  // representable in float: both runs see the same values
  return v;
}

// Runs the model (its one input given) with options `o` and returns every output as doubles.
inline std::vector<std::vector<double>> RunModel(const onnx::ModelProto& m, const Tensor& x,
                                                 const runtime::ExecutorOptions& o,
                                                 int* channels_last_values = nullptr) {
  std::string bytes = m.SerializeAsString();
  auto model = frontend::ParseOnnxModel(bytes.data(), bytes.size(), "", "test.onnx");
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return {};
  auto exec = runtime::Executor::Create(std::move(*model), o);
  EXPECT_TRUE(exec.ok()) << exec.status().message();
  if (!exec.ok()) return {};
  if (channels_last_values) *channels_last_values = (*exec)->channels_last_values();
  std::vector<Tensor> out;
  Status st = (*exec)->Run({x}, &out);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<std::vector<double>> r;
  for (const Tensor& t : out) {
    std::vector<double> v(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) v[i] = t.GetDouble(i);
    r.push_back(std::move(v));
  }
  return r;
}

// The same with the default options at `threads` threads.
inline std::vector<std::vector<double>> RunModel(const onnx::ModelProto& m, const Tensor& x,
                                                 int threads, int* channels_last_values = nullptr) {
  runtime::ExecutorOptions o;
  o.threads = threads;
  return RunModel(m, x, o, channels_last_values);
}

inline Tensor InputOf(DType t, const Dims& dims, const std::vector<double>& values) {
  Tensor x(t, dims);
  for (int64_t i = 0; i < x.size(); ++i) {
    if (t == DType::kFloat64)
      x.data<double>()[i] = values[i];
    else
      x.data<float>()[i] = static_cast<float>(values[i]);
  }
  return x;
}

// The float32 run against the float64 one: relative L2 and the worst element against 1 + |ref|.
inline void ExpectClose(const std::vector<std::vector<double>>& got,
                        const std::vector<std::vector<double>>& want, double tol,
                        const std::string& what) {
  ASSERT_FALSE(want.empty()) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size()) << what;
    double num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < got[k].size(); ++i) {
      const double d = got[k][i] - want[k][i];
      num += d * d;
      den += want[k][i] * want[k][i];
      worst = std::max(worst, std::fabs(d) / (1 + std::fabs(want[k][i])));
    }
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), tol) << what << " output " << k;
    EXPECT_LE(worst, 10 * tol) << what << " output " << k;
  }
}

// A model built in float32 by build(FLOAT) on input x (values xv, dims `dims`) at 1 and 2 threads
// against the same model built in float64, run on one thread (the reference code, in double).
inline void ExpectFloatMatchesDouble(
    const std::function<onnx::ModelProto(onnx::TensorProto::DataType)>& build, const Dims& dims,
    const std::vector<double>& xv, double tol, const std::string& what) {
  const auto want =
      RunModel(build(onnx::TensorProto::DOUBLE), InputOf(DType::kFloat64, dims, xv), 1);
  for (int threads : {1, 2})
    ExpectClose(
        RunModel(build(onnx::TensorProto::FLOAT), InputOf(DType::kFloat32, dims, xv), threads),
        want, tol, what + " threads " + std::to_string(threads));
}

}  // namespace kiln::testing
