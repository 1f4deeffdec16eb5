#include "ops/common.h"
namespace kiln::ops {
void RegisterAttentionOps(OpRegistry& r) {}
}
