#include "ops/common.h"

namespace kiln::ops {

void RegisterElementwiseOps(OpRegistry& r) {}

}  // namespace kiln::ops
