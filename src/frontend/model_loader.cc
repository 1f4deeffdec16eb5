#include "frontend/model_loader.h"

#include "frontend/json_import.h"
#include "frontend/npy.h"
#include "frontend/onnx_import.h"

namespace kiln::frontend {
namespace {
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

Expected<ir::Model> LoadModel(const std::string& path, const std::string& weights_path) {
  if (EndsWith(path, ".json")) return LoadJsonModel(path, weights_path);
  if (!weights_path.empty()) return Error("--weights is only meaningful with a .json model");
  return LoadOnnxModel(path);
}

Expected<Tensor> LoadTensorFile(const std::string& path) {
  if (EndsWith(path, ".npy")) return LoadNpyFile(path);
  if (EndsWith(path, ".pb")) return LoadTensorProtoFile(path);
  return Error(path + ": unknown tensor file type (expected .npy or .pb)");
}

}  // namespace kiln::frontend
