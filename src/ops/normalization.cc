#include "ops/common.h"

namespace kiln::ops {

void RegisterNormalizationOps(OpRegistry& r) {}

}  // namespace kiln::ops
