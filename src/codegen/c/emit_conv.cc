// C emitters for the conv family.
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

void RegisterConvEmitters(EmitterRegistry& r) { (void)r; }

}  // namespace kiln::codegen::c
