// Any bytes as a safetensors file; every listed tensor is then sliced out.
#include <string>

#include "frontend/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kiln::MappedFile::FromBytes(std::string(reinterpret_cast<const char*>(data), size),
                                          "fuzz.safetensors");
  auto st = kiln::frontend::SafetensorsFile::Parse(file);
  if (!st.ok()) return 0;
  for (const auto& [name, e] : st->entries()) {
    auto t = st->Slice(e.dtype, e.dims, e.begin, e.end, name);
    if (t.ok() && t->nbytes() > 0) (void)static_cast<const uint8_t*>(t->raw())[t->nbytes() - 1];
  }
  return 0;
}
