// Any bytes as a serialized onnx.TensorProto (.pb test data and inputs).
#include "frontend/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = kiln::frontend::ParseTensorProto(data, size, "fuzz.pb");
  if (t.ok() && t->nbytes() > 0) (void)static_cast<const uint8_t*>(t->raw())[t->nbytes() - 1];
  return 0;
}
