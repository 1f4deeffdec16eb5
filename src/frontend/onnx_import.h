// ONNX protobuf frontend: .onnx files and TensorProto .pb files into the IR. Protobuf types stay
// inside this folder.
#pragma once

#include <string>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::frontend {

// Loads a model. External data files are resolved relative to the model's folder and must stay
// inside it. Model-local functions are inlined; nodes are sorted topologically.
Expected<ir::Model> LoadOnnxModel(const std::string& path);
Expected<ir::Model> ParseOnnxModel(const void* data, size_t size, const std::string& base_dir,
                                   const std::string& label);

// Reads a serialized onnx.TensorProto (the backend test-data format).
Expected<Tensor> LoadTensorProtoFile(const std::string& path);
Expected<Tensor> ParseTensorProto(const void* data, size_t size, const std::string& label);
// Reads a backend test-data file as a value of `type`: a TensorProto for tensors, a
// SequenceProto for sequences and an OptionalProto for optionals (empty -> Tensor::None()).
Expected<Tensor> LoadValueProtoFile(const std::string& path, const ir::TypeInfo& type);
// Serializes a tensor as onnx.TensorProto (raw_data).
std::string SerializeTensorProto(const Tensor& t, const std::string& name);

}  // namespace kiln::frontend
