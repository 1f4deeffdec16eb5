#include "ops/common.h"

namespace kiln::ops {

void RegisterControlFlowOps(OpRegistry& r) {}

}  // namespace kiln::ops
