#include "ops/common.h"

namespace kiln::ops {

void RegisterSortOps(OpRegistry& r) {}

}  // namespace kiln::ops
