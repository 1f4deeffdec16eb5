// C emitters for the matmul family.
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

void RegisterMatMulEmitters(EmitterRegistry& r) { (void)r; }

}  // namespace kiln::codegen::c
