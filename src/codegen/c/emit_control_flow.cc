// C emitters for the control flow family.
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

void RegisterControlFlowEmitters(EmitterRegistry& r) { (void)r; }

}  // namespace kiln::codegen::c
