#include "ops/common.h"

namespace kiln::ops {

void RegisterSequenceOps(OpRegistry& r) {}

}  // namespace kiln::ops
