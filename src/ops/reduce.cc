#include "ops/common.h"

namespace kiln::ops {

void RegisterReduceOps(OpRegistry& r) {}

}  // namespace kiln::ops
