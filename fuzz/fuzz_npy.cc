// Any bytes as a .npy file.
#include "frontend/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = kiln::frontend::ParseNpy(data, size, "fuzz.npy");
  if (t.ok() && t->nbytes() > 0) (void)static_cast<const uint8_t*>(t->raw())[t->nbytes() - 1];
  if (t.ok() && t->is_string() && t->size() > 0) (void)t->strings()[t->size() - 1].size();
  return 0;
}
