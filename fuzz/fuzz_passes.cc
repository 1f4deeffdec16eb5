// Any bytes as an .onnx file (what AddBenchmark hands the optimization service), then every
// registered pass over what loads and infers: a pass must answer an error or a verified graph.
#include "frontend/onnx_import.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = kiln::frontend::ParseOnnxModel(data, size, "", "fuzz.onnx");
  if (!m.ok() || !kiln::passes::InferShapes(*m).ok()) return 0;
  for (const auto& p : kiln::passes::RegisteredPasses()) {
    kiln::ir::Model copy = kiln::ir::CloneModel(*m);
    (void)kiln::passes::RunPasses(copy, {p.name});
  }
  return 0;
}
