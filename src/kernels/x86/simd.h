// Portable vectors for the kernels that compile one body per instruction set: Vec<T, B> is B bytes
// of T (GCC / clang vector extensions), and a body written as a KILN_AI template over B is
// instantiated inside functions with target attributes (64: "avx512f,fma", 32: "avx2,fma") and
// once at the baseline (16: SSE2 / NEON), then chosen at run time (kernels/x86/cpu_isa.h). B should
// be the target's register width: a wider vector is split by the compiler, often through the stack.
#pragma once

#include <cstdint>

#define KILN_AI __attribute__((always_inline)) inline

// Before a loop: its iterations carry no dependence through memory (for pointers the compiler
// cannot prove apart, such as taps read from an array of them).
#if defined(__clang__)
#define KILN_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define KILN_IVDEP _Pragma("GCC ivdep")
#endif

namespace kiln::ops {

template <class T, int B>
struct VecOf {
  typedef T type __attribute__((vector_size(B)));
};
template <class T, int B>
using Vec = typename VecOf<T, B>::type;
template <class T, int B>
constexpr int64_t kLanes = B / static_cast<int>(sizeof(T));

}  // namespace kiln::ops
