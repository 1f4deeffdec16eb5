// Internal to frontend/: the protobuf ONNX types and conversions shared by the ONNX and JSON
// readers and the converter.
#pragma once

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace kiln::frontend {

Expected<Tensor> TensorFromProto(const onnx::TensorProto& tp, const std::string& base_dir,
                                 const std::string& label);
Expected<ir::Model> ImportModelProto(const onnx::ModelProto& mp, const std::string& base_dir,
                                     const std::string& label);

}  // namespace kiln::frontend
