#include "ops/common.h"

namespace kiln::ops {

void RegisterMatMulOps(OpRegistry& r) {}

}  // namespace kiln::ops
