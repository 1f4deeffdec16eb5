#include "ops/common.h"

namespace kiln::ops {

void RegisterQuantizeOps(OpRegistry& r) {}

}  // namespace kiln::ops
