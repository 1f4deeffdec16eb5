#include "frontend/json_import.h"

#include <google/protobuf/util/json_util.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "frontend/onnx_proto.h"
#include "frontend/safetensors.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace {

// Carried in TensorProto.doc_string between the JSON rewrite and the proto walk.
constexpr const char* kOffsetsMarker = "\x01kiln-data-offsets:";

Expected<uint64_t> JsonUInt(const nlohmann::json& j, const std::string& what) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos)
      return std::stoull(s);
  }
  return Error(what + " must be a non-negative integer");
}

// Rewrites what the protobuf JSON parser would reject: dtype names and data_offsets.
Status Preprocess(nlohmann::json& j, const std::string& label, int depth) {
  if (depth > 200) return Error(label + ": JSON nests too deeply");
  if (j.is_array()) {
    for (auto& e : j) KILN_RETURN_IF_ERROR(Preprocess(e, label, depth + 1));
    return OkStatus();
  }
  if (!j.is_object()) return OkStatus();
  for (const char* key : {"elem_type", "data_type"}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) continue;
    std::string name = it->get<std::string>();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) continue;
    DType t = DTypeFromName(name);
    if (t == DType::kUndefined && name != "UNDEFINED")
      return Error(label + ": unknown " + key + " '" + name + "'");
    *it = static_cast<int>(t);
  }
  auto off = j.find("data_offsets");
  if (off != j.end()) {
    std::string name =
        j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : "?";
    std::string what = label + ": initializer '" + name + "' data_offsets";
    if (!off->is_array() || off->size() != 2) return Error(what + " must be [begin, end]");
    KILN_ASSIGN_OR_RETURN(uint64_t b, JsonUInt((*off)[0], what));
    KILN_ASSIGN_OR_RETURN(uint64_t e, JsonUInt((*off)[1], what));
    std::string doc = j.contains("doc_string") && j["doc_string"].is_string()
                          ? j["doc_string"].get<std::string>()
                          : "";
    j["doc_string"] =
        std::string(kOffsetsMarker) + std::to_string(b) + ":" + std::to_string(e) + ":" + doc;
    j.erase(off);
  }
  for (auto& [k, v] : j.items()) KILN_RETURN_IF_ERROR(Preprocess(v, label, depth + 1));
  return OkStatus();
}

// Visits every TensorProto in a graph: initializers and tensor attributes, recursively.
void ForEachTensor(onnx::GraphProto* g, const std::function<void(onnx::TensorProto*)>& fn) {
  for (auto& t : *g->mutable_initializer()) fn(&t);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) fn(a.mutable_t());
      for (auto& t : *a.mutable_tensors()) fn(&t);
      if (a.has_g()) ForEachTensor(a.mutable_g(), fn);
      for (auto& sg : *a.mutable_graphs()) ForEachTensor(&sg, fn);
    }
}
void ForEachTensor(onnx::ModelProto* m, const std::function<void(onnx::TensorProto*)>& fn) {
  ForEachTensor(m->mutable_graph(), fn);
  for (auto& f : *m->mutable_functions())
    for (auto& n : *f.mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_t()) fn(a.mutable_t());
        if (a.has_g()) ForEachTensor(a.mutable_g(), fn);
      }
}

}  // namespace

Expected<ir::Model> ParseJsonModel(const std::string& text, const std::string& weights_path,
                                   const std::string& base_dir, const std::string& label) {
  nlohmann::json j;
  std::string normalized;
  try {  // parse errors, numbers out of range, invalid UTF-8 on dump: all the file's fault
    j = nlohmann::json::parse(text);
    if (!j.is_object()) return Error(label + ": the JSON model must be an object (a ModelProto)");
    KILN_RETURN_IF_ERROR(Preprocess(j, label, 0));
    normalized = j.dump();
  } catch (const nlohmann::json::exception& e) {
    return Error(label + ": not valid JSON (" + std::string(e.what()).substr(0, 120) + ")");
  }
  onnx::ModelProto mp;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;  // fields of ONNX releases newer than kiln's proto
  auto st = google::protobuf::util::JsonStringToMessage(normalized, &mp, opts);
  if (!st.ok())
    return Error(label + ": not an ONNX ModelProto: " + std::string(st.message()).substr(0, 200));

  std::optional<SafetensorsFile> weights;
  if (!weights_path.empty()) {
    KILN_ASSIGN_OR_RETURN(auto w, SafetensorsFile::Open(weights_path));
    weights = std::move(w);
  }
  Status err;
  ForEachTensor(&mp, [&](onnx::TensorProto* t) {
    if (!err.ok() || t->doc_string().rfind(kOffsetsMarker, 0) != 0) return;
    std::string rest = t->doc_string().substr(std::strlen(kOffsetsMarker));
    size_t c1 = rest.find(':'), c2 = c1 == std::string::npos ? c1 : rest.find(':', c1 + 1);
    uint64_t b = 0, e = 0;
    try {  // written by Preprocess, unless the file itself spelled the marker
      if (c2 == std::string::npos) throw std::invalid_argument("marker");
      b = std::stoull(rest.substr(0, c1));
      e = std::stoull(rest.substr(c1 + 1, c2 - c1 - 1));
    } catch (const std::exception&) {
      err = Error(label + ": initializer '" + t->name() + "' has a malformed doc_string");
      return;
    }
    t->set_doc_string(rest.substr(c2 + 1));
    std::string at = label + ": initializer '" + t->name() + "'";
    if (!weights) {
      err = Error(at + " uses data_offsets but no --weights file was given");
      return;
    }
    auto entry = weights->entries().find(t->name());
    if (entry != weights->entries().end() && (entry->second.begin != b || entry->second.end != e)) {
      err = Error(at + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                  "] disagree with " + weights_path + " which lists [" +
                  std::to_string(entry->second.begin) + ", " + std::to_string(entry->second.end) +
                  "]");
      return;
    }
    if (b > e || e > weights->data_size()) {
      err = Error(at + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                  "] lie outside the " + std::to_string(weights->data_size()) +
                  "-byte data section of " + weights_path);
      return;
    }
    t->set_raw_data(weights->data() + b, e - b);
  });
  if (!err.ok()) return err;
  return ImportModelProto(mp, base_dir, label);
}

Expected<ir::Model> LoadJsonModel(const std::string& path, const std::string& weights_path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  KILN_ASSIGN_OR_RETURN(auto m, ParseJsonModel(text, weights_path, dir.empty() ? "." : dir, path));
  m.source_path = path;
  return m;
}

Status ConvertOnnxToJson(const std::string& onnx_path, const std::string& json_path,
                         const std::string& weights_path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(onnx_path));
  onnx::ModelProto mp;
  if (file->size() > static_cast<size_t>(INT32_MAX) ||
      !mp.ParseFromArray(file->data(), static_cast<int>(file->size())))
    return Error(onnx_path + ": not a valid ONNX model (protobuf parse failed)");
  std::string dir = std::filesystem::path(onnx_path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, int> used;
  Status err;
  ForEachTensor(mp.mutable_graph(), [&](onnx::TensorProto* t) {
    if (!err.ok()) return;
    auto tensor = TensorFromProto(*t, dir, onnx_path);
    if (!tensor.ok()) {
      err = tensor.status();
      return;
    }
    std::string key = t->name().empty() ? "tensor" : t->name();
    if (used[key]++ > 0)
      key += "#" + std::to_string(used[key] - 1);  // names may repeat in subgraphs
    t->set_doc_string(std::string(kOffsetsMarker) + std::to_string(tensors.size()) + ":" +
                      t->doc_string());
    t->clear_raw_data();
    t->clear_float_data();
    t->clear_int32_data();
    t->clear_int64_data();
    t->clear_double_data();
    t->clear_uint64_data();
    t->clear_external_data();
    t->clear_data_location();
    tensors.push_back({key, std::move(*tensor)});
  });
  if (!err.ok()) return err;
  std::vector<std::pair<size_t, size_t>> offsets;
  KILN_RETURN_IF_ERROR(WriteSafetensors(weights_path, tensors, &offsets));

  std::string text;
  google::protobuf::util::JsonPrintOptions po;
  po.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(mp, &text, po).ok())
    return Error(onnx_path + ": cannot express the model as JSON");
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  std::function<void(nlohmann::ordered_json&)> walk = [&](nlohmann::ordered_json& v) {
    if (v.is_array()) {
      for (auto& e : v) walk(e);
      return;
    }
    if (!v.is_object()) return;
    auto doc = v.find("doc_string");
    if (doc != v.end() && doc->is_string() &&
        doc->get<std::string>().rfind(kOffsetsMarker, 0) == 0) {
      std::string rest = doc->get<std::string>().substr(std::strlen(kOffsetsMarker));
      size_t c = rest.find(':');
      size_t k = std::stoull(rest.substr(0, c));
      std::string original = rest.substr(c + 1);
      if (original.empty())
        v.erase("doc_string");
      else
        *doc = original;
      v["data_offsets"] = {offsets[k].first, offsets[k].second};
    }
    for (auto& [key, child] : v.items()) walk(child);
  };
  walk(j);
  return WriteFile(json_path, j.dump(1) + "\n");
}

}  // namespace kiln::frontend
