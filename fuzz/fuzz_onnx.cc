// Any bytes as an .onnx file: the reader must return a model or an error, never crash.
#include "frontend/onnx_import.h"
#include "passes/infer_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = kiln::frontend::ParseOnnxModel(data, size, "", "fuzz.onnx");
  if (m.ok()) (void)kiln::passes::InferShapes(*m);
  return 0;
}
