// Uniform random test data in [-1, 1) for the kernel tests (kernels_test, dnnl_test).
#pragma once

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

}  // namespace kiln::testing
