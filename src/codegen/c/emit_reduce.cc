// C emitters for the reduce family.
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

void RegisterReduceEmitters(EmitterRegistry& r) { (void)r; }

}  // namespace kiln::codegen::c
