#include "ops/common.h"

namespace kiln::ops {

void RegisterPoolOps(OpRegistry& r) {}

}  // namespace kiln::ops
