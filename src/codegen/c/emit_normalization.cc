// C emitters for the normalization family.
#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

void RegisterNormalizationEmitters(EmitterRegistry& r) { (void)r; }

}  // namespace kiln::codegen::c
