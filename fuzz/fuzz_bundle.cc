// Any bytes as a .bpte bundle: the FlatBuffers verifier, the program inside, then every test set
// against the program. Whatever it accepts must pass the test-set check again.
#include <memory>

#include "bundle/bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto b = kiln::bundle::LoadBundle(data, size, std::shared_ptr<const void>(data, [](const void*) {}), "fuzz.bpte");
  if (!b.ok()) return 0;
  if (!kiln::bundle::CheckTestSets(*b->program.model.graph, b->test_sets, "fuzz.bpte").ok()) __builtin_trap();
  for (const auto& s : b->test_sets)
    for (const auto& t : s.inputs)
      if (t.nbytes() > 0) (void)static_cast<const volatile uint8_t*>(t.raw())[t.nbytes() - 1];
  return 0;
}
