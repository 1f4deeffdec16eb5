// Internal to frontend/: the protobuf ONNX types and conversions shared by the ONNX and JSON
// readers and the converter.
#pragma once

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace kiln::frontend {

// take_raw: tp's own raw_data in a proto the caller owns; the bytes then move into the tensor
// (no copy) where they are 16-byte aligned, and tp is left without them.
Expected<Tensor> TensorFromProto(const onnx::TensorProto& tp, const std::string& base_dir,
                                 const std::string& label, std::string* take_raw = nullptr);
// Moves the main graph's initializer bytes out of mp (TensorFromProto's take_raw): a model's
// weights are held once while it loads.
Expected<ir::Model> ImportModelProto(onnx::ModelProto& mp, const std::string& base_dir,
                                     const std::string& label);

}  // namespace kiln::frontend
