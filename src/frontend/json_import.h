// ONNX JSON (the protobuf JSON mapping of ModelProto with original field names) with weights in
// a safetensors file referenced by per-initializer "data_offsets" — the LuisaML interchange form.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::frontend {

Expected<ir::Model> LoadJsonModel(const std::string& path, const std::string& weights_path);
Expected<ir::Model> ParseJsonModel(const std::string& text, const std::string& weights_path,
                                   const std::string& base_dir, const std::string& label);

// Writes MODEL.onnx as JSON + safetensors: every initializer's bytes move to the weights file
// and the JSON names them by data_offsets.
Status ConvertOnnxToJson(const std::string& onnx_path, const std::string& json_path,
                         const std::string& weights_path);

}  // namespace kiln::frontend
