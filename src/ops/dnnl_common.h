// What the oneDNN-backed kernels share (conv_dnnl.cc, pool_dnnl.cc): one CPU engine, a stream
// per thread, and the thread count of a call. Include only where KILN_WITH_DNNL is set.
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

// oneDNN's OpenMP team for this thread's next primitives: exactly `threads` threads.
inline void SetThreads(int threads) { omp_set_num_threads(threads); }

}  // namespace kiln::ops::dnnl_common
