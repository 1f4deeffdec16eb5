#include "ops/common.h"

namespace kiln::ops {

void RegisterActivationOps(OpRegistry& r) {}

}  // namespace kiln::ops
