// The one gate every oneDNN entry checks (kernels/dnnl/conv_dnnl.h and its siblings).
#pragma once

namespace kiln::ops {

// True when oneDNN is built in and the thread's kernels may use it (not the reference set,
// kernels/x86/cpu_isa.h); defined in kernels/dnnl/conv_dnnl.cc.
bool DnnlAvailable();

}  // namespace kiln::ops
