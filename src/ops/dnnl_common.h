// What the oneDNN-backed kernels share (conv_dnnl.cc, pool_dnnl.cc, gemm_dnnl.cc): one CPU
// engine, a stream per thread, and one thread per primitive. Include only where KILN_WITH_DNNL is set.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

// libgomp, which the Debian oneDNN runs on (its C header is not always installed for clang).
extern "C" void omp_set_num_threads(int);

namespace kiln::ops::dnnl_common {

inline dnnl::engine& Engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A stream must not be used by two threads at once; executors run on many threads (the gym).
inline dnnl::stream& Stream() {
  thread_local dnnl::stream s(Engine());
  return s;
}

// Every primitive runs on the calling thread alone: the threads of a call are kiln's pool
// (ops/thread_pool.h), which splits the work into one primitive per thread, so oneDNN's OpenMP
// team is never started (its threads spin after each call and would take the cores from
// kiln's workers).
inline void SingleThreaded() { omp_set_num_threads(1); }

}  // namespace kiln::ops::dnnl_common
