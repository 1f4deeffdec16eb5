// Any bytes as a .kiln program file: the FlatBuffers verifier, then kiln's validation. Whatever it
// accepts must be a graph ir::Verify accepts, with constants inside the bytes.
#include <memory>

#include "bundle/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = kiln::bundle::LoadProgram(data, size, std::shared_ptr<const void>(data, [](const void*) {}), "fuzz.kiln");
  if (!p.ok()) return 0;
  if (!kiln::ir::Verify(*p->model.graph).ok()) __builtin_trap();
  for (const auto& v : p->model.graph->values)
    if (v.constant && v.constant->kind() == kiln::Tensor::Kind::kTensor && v.constant->nbytes() > 0)
      (void)static_cast<const volatile uint8_t*>(v.constant->raw())[v.constant->nbytes() - 1];
  return 0;
}
