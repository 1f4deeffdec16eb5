// RoiAlign read and checked once from the node's attributes: the plan that shape inference, the
// host kernel (ops/pool.cc) and the C emitter (codegen/c/emit_conv.cc) read.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace kiln::ops {

struct RoiAlignPlan {
  int64_t out_h = 1, out_w = 1;
  int64_t sampling = 0;  // samples per bin along each axis; 0: ceil(region / bins) per region
  float spatial_scale = 1;
  bool max_mode = false;   // else avg
  bool half_pixel = true;  // else output_half_pixel (opset 10's only behaviour)
};

// Reads and checks the attributes; "" or why they are malformed.
std::string MakeRoiAlignPlan(const ir::Node& n, int64_t opset, RoiAlignPlan* p);

}  // namespace kiln::ops
