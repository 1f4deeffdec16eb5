#include "ops/common.h"

namespace kiln::ops {

void RegisterRecurrentOps(OpRegistry& r) {}

}  // namespace kiln::ops
