// Any bytes as an .onnx file, then shape inference (with constant folding) over what loads:
// every op's infer function must reject bad attributes and shapes with an error.
#include "frontend/onnx_import.h"
#include "passes/infer_shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = kiln::frontend::ParseOnnxModel(data, size, "", "fuzz.onnx");
  if (m.ok()) (void)kiln::passes::InferShapes(*m);
  return 0;
}
