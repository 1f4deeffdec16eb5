// Any bytes as an .onnx file: the reader must return a model or an error, never crash.
#include "frontend/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::frontend::ParseOnnxModel(data, size, "", "fuzz.onnx");
  return 0;
}
