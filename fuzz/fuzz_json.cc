// Any bytes as an ONNX JSON model (without weights).
#include <string>

#include "frontend/json_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)kiln::frontend::ParseJsonModel(text, "", "", "fuzz.json");
  return 0;
}
