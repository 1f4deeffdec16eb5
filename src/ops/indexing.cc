#include "ops/common.h"

namespace kiln::ops {

void RegisterIndexingOps(OpRegistry& r) {}

}  // namespace kiln::ops
