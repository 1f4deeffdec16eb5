// C emitters for the indexing family.
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

void RegisterIndexingEmitters(EmitterRegistry& r) { (void)r; }

}  // namespace kiln::codegen::c
