// One entry point for every model format kiln reads, chosen by extension: .onnx (protobuf) and
// .json (ONNX JSON, weights from a safetensors file).
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::frontend {

Expected<ir::Model> LoadModel(const std::string& path, const std::string& weights_path = "");
// Reads an input tensor from .npy or .pb (TensorProto).
Expected<Tensor> LoadTensorFile(const std::string& path);

}  // namespace kiln::frontend
