// What every oneDNN wrapper in this folder shares: the type names, one CPU engine, a stream per
// thread, and one thread per primitive. Include only where KILN_WITH_DNNL is set.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "kernels/x86/post_ops.h"
#include "kernels/x86/scratch.h"

// libgomp, which the Debian oneDNN runs on (its C header is not always installed for clang).
extern "C" void omp_set_num_threads(int);

namespace kiln::ops::dnnl_common {

// The names every wrapper uses; a wrapper's .cc takes them with `using namespace dnnl_common`.
using memory = dnnl::memory;
using Tag = memory::format_tag;
using dt = memory::data_type;
constexpr dt kF32 = dt::f32;

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
// (kernels/x86/thread_pool.h), which splits the work into one primitive per thread, so oneDNN's
// OpenMP team is never started (its threads spin after each call and would take the cores from
// kiln's workers).
inline void SingleThreaded() { omp_set_num_threads(1); }

// Every primitive is made with a user scratchpad: oneDNN's own (library mode) is not safe for
// primitives that run at once on several threads (two Winograd convolutions, one per thread,
// crashed in it), so each call takes its working memory from the calling thread's scratch.
inline dnnl::primitive_attr UserScratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// oneDNN's post-ops for PostOps: the sum (`sum`: dst holds z when the primitive runs), then the
// activation. Swish is not among them: callers run our Swish kernel over what the primitive wrote
// (oneDNN's swish, through its exp, took about twice as long).
inline dnnl::post_ops PostOpsOf(bool sum, PostOps::Act act, float alpha, float beta) {
  using Act = PostOps::Act;
  dnnl::post_ops po;
  if (sum) po.append_sum(1.0f);
  if (act == Act::kRelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (act == Act::kLeakyRelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, alpha, 0.0f);
  if (act == Act::kClip) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, alpha, beta);
  if (act == Act::kHardSwish)  // x * clamp(x / 6 + 1 / 2, 0, 1); alpha and beta unused
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
  return po;
}

// The scratchpad a primitive descriptor asks for, bound per call to the thread's buffer.
class Scratchpad {
 public:
  explicit Scratchpad(const dnnl::memory::desc& md = {}) : bytes_(md.get_size()) {
    if (bytes_ > 0) mem_ = dnnl::memory(md, Engine(), DNNL_MEMORY_NONE);
  }
  // Adds the scratchpad, pointed at this thread's buffer, to a call's arguments.
  void Bind(std::unordered_map<int, dnnl::memory>& args) {
    if (bytes_ == 0) return;
    mem_.set_data_handle(ScratchBytes(ScratchSlot::kDnnlScratchpad, bytes_));
    args[DNNL_ARG_SCRATCHPAD] = mem_;
  }

 private:
  size_t bytes_ = 0;
  dnnl::memory mem_;
};

}  // namespace kiln::ops::dnnl_common
