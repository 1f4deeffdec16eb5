// The one gate every oneDNN entry checks (ops/conv_dnnl.h and its siblings).
#pragma once

namespace kiln::ops {

// True when oneDNN is built in and the thread's kernels may use it (not the reference set,
// ops/cpu_isa.h); defined in ops/conv_dnnl.cc.
bool DnnlAvailable();

}  // namespace kiln::ops
