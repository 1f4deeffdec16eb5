#include "ops/common.h"

namespace kiln::ops {

void RegisterShapeOps(OpRegistry& r) {}

}  // namespace kiln::ops
