// The packed int8 kernels' emitters (emit_qconv.cc) that other emitters call.
#pragma once

#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

// fuse-qdq's com.kiln QLinearMatMul on the packed fully connected kernel
// (kernels/reference/qmatmul_packed.c) when its weights are a constant int8 [K, N] with zero point
// 0 and its zero points, scales and bias (input 8) constant: the weights rearranged for the kernel
// and x's zero point folded into the bias. False, emitting nothing, where the node is not of that
// form.
Expected<bool> EmitQMatMulPacked(NodeContext& ctx);

}  // namespace kiln::codegen::c
