#include "ops/common.h"

namespace kiln::ops {

void RegisterConvOps(OpRegistry& r) {}

}  // namespace kiln::ops
