// Any bytes as a .kiln program file: the FlatBuffers verifier, the digest, then kiln's validation.
// Each input runs twice: as it is (almost always refused by the digest) and resealed, so that the
// validation behind the digest sees the mutations too. Whatever it accepts must be a graph
// ir::Verify accepts, with constants inside the bytes.
#include <memory>
#include <vector>

#include "bundle/program.h"

namespace {

void Check(const uint8_t* data, size_t size) {
  auto p = kiln::bundle::LoadProgram(
      data, size, std::shared_ptr<const void>(data, [](const void*) {}), "fuzz.kiln");
  if (!p.ok()) return;
  if (!kiln::ir::Verify(*p->model.graph).ok()) __builtin_trap();
  for (const auto& v : p->model.graph->values)
    if (v.constant && v.constant->kind() == kiln::Tensor::Kind::kTensor && v.constant->nbytes() > 0)
      (void)static_cast<const volatile uint8_t*>(v.constant->raw())[v.constant->nbytes() - 1];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Check(data, size);
  std::vector<uint8_t> resealed(data, data + size);
  if (kiln::bundle::ResealProgram(resealed.data(), resealed.size()).ok())
    Check(resealed.data(), resealed.size());
  return 0;
}
