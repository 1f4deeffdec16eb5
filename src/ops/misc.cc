#include "ops/common.h"

namespace kiln::ops {

void RegisterMiscOps(OpRegistry& r) {}

}  // namespace kiln::ops
