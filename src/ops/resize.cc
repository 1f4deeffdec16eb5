#include "ops/common.h"

namespace kiln::ops {

void RegisterResizeOps(OpRegistry& r) {}

}  // namespace kiln::ops
