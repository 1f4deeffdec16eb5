// Test data for the kernel tests (kernels_test, dnnl_test): uniform random values in [-1, 1),
// and [N, C, HW] tensors relaid out channels-last.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::testing {

template <class T = float>
std::vector<T> RandomVector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& e : v) e = static_cast<T>(d(rng));
  return v;
}

// [N, C, HW] -> [N, HW, C] (to_nhwc), or back.
inline std::vector<float> Relayout(const std::vector<float>& v, int64_t N, int64_t C, int64_t HW,
                                   bool to_nhwc) {
  std::vector<float> out(v.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t nchw = (n * C + c) * HW + i, nhwc = (n * HW + i) * C + c;
        out[static_cast<size_t>(to_nhwc ? nhwc : nchw)] =
            v[static_cast<size_t>(to_nhwc ? nchw : nhwc)];
      }
  return out;
}

}  // namespace kiln::testing
