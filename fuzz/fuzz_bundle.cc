// Any bytes as a .bpte bundle: the FlatBuffers verifier, the program inside, the digests, then
// every test set against the program. Each input runs twice: as it is and resealed, so that the
// validation behind the digests sees the mutations too. Whatever it accepts must pass the
// test-set check again.
#include <memory>
#include <vector>

#include "bundle/bundle.h"

namespace {

void Check(const uint8_t* data, size_t size) {
  auto b = kiln::bundle::LoadBundle(
      data, size, std::shared_ptr<const void>(data, [](const void*) {}), "fuzz.bpte");
  if (!b.ok()) return;
  if (!kiln::bundle::CheckTestSets(*b->program.model.graph, b->test_sets, "fuzz.bpte").ok())
    __builtin_trap();
  for (const auto& s : b->test_sets)
    for (const auto& t : s.inputs)
      if (t.nbytes() > 0) (void)static_cast<const volatile uint8_t*>(t.raw())[t.nbytes() - 1];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Check(data, size);
  std::vector<uint8_t> resealed(data, data + size);
  if (kiln::bundle::ResealBundle(resealed.data(), resealed.size()).ok())
    Check(resealed.data(), resealed.size());
  return 0;
}
