// What a fused convolution or GEMM applies to its product before it stores it, in this order:
// + z (an array shaped as the output), then the activation. FusedConv (ops/conv.cc) reads it
// from its attributes; the convolution and GEMM kernels apply it in their epilogues.
#pragma once

namespace kiln::ops {

struct PostOps {
  enum class Act { kNone, kRelu, kLeakyRelu, kClip, kSwish, kHardSwish };
  const float* z = nullptr;
  Act act = Act::kNone;
  float alpha = 0, beta = 0;  // LeakyRelu: alpha; Clip: [alpha, beta]
};

}  // namespace kiln::ops
