#include "passes/pipeline.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace kiln::passes {

Pipeline DefaultPipeline() {
  // Only exact passes: the default never changes a result by rounding. Dead nodes go last so that
  // what the others disconnect is removed.
  Pipeline p;
  for (const char* name :
       {"fold-constants", "eliminate-identities", "eliminate-common-subexpressions",
        "cancel-transposes", "eliminate-dead-nodes"})
    if (FindPass(name)) p.passes.push_back(name);
  return p;
}

Expected<Pipeline> ParsePipeline(const std::string& text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error(source + ": not a JSON object");
  if (!j.contains("kiln_pipeline") || !j["kiln_pipeline"].is_number_integer() ||
      j["kiln_pipeline"].get<int64_t>() != 1)
    return Error(source + ": expected \"kiln_pipeline\": 1");
  Pipeline p;
  for (const auto& [key, v] : j.items()) {
    if (key == "kiln_pipeline") continue;
    if (key == "passes") {
      if (!v.is_array()) return Error(source + ": \"passes\" must be a list of pass names");
      for (const auto& e : v) {
        if (!e.is_string()) return Error(source + ": \"passes\" must be a list of pass names");
        std::string name = e.get<std::string>();
        if (!FindPass(name)) return Error(source + ": unknown pass '" + name + "'");
        p.passes.push_back(name);
      }
    } else if (key == "planner") {
      if (!v.is_string()) return Error(source + ": \"planner\" must be a string");
      p.planner = v.get<std::string>();  // checked by the planner when it runs
    } else if (key == "reorder") {
      if (!v.is_boolean()) return Error(source + ": \"reorder\" must be true or false");
      p.reorder = v.get<bool>();
    } else if (key == "planner_steps") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 40))
        return Error(source + ": \"planner_steps\" must be a non-negative integer");
      p.planner_steps = static_cast<long>(v.get<int64_t>());
    } else if (key == "shapes") {
      if (!v.is_object())
        return Error(source + ": \"shapes\" must map input names to lists of dims");
      for (const auto& [name, dims] : v.items()) {
        if (!dims.is_array() || dims.size() > 64)
          return Error(source + ": shape of '" + name + "' must be a list of at most 64 dims");
        Dims d;
        for (const auto& x : dims) {
          if (!x.is_number_integer() || x.get<int64_t>() < 0 ||
              x.get<int64_t>() > (int64_t{1} << 40))
            return Error(source + ": shape of '" + name + "' must hold non-negative integers");
          d.push_back(x.get<int64_t>());
        }
        p.shapes[name] = d;
      }
    } else {
      return Error(source + ": unknown key '" + key + "'");
    }
  }
  return p;
}

Expected<Pipeline> LoadPipelineFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParsePipeline(text, path);
}

std::string PipelineToJson(const Pipeline& p) {
  nlohmann::ordered_json j;
  j["kiln_pipeline"] = 1;
  j["passes"] = p.passes;
  j["planner"] = p.planner;
  j["reorder"] = p.reorder;
  j["planner_steps"] = p.planner_steps;
  if (!p.shapes.empty()) {
    nlohmann::ordered_json s = nlohmann::ordered_json::object();
    for (const auto& [name, dims] : p.shapes) s[name] = dims;
    j["shapes"] = s;
  }
  return j.dump(2) + "\n";
}

Status RunPasses(ir::Model& model, const std::vector<std::string>& passes,
                 const PipelineOptions& options) {
  for (const auto& d : options.dump_ir_after)
    if (d != "all" && !FindPass(d)) return Error("--dump-ir-after " + d + ": no pass of that name");
  for (const auto& name : passes) {
    const PassInfo* pass = FindPass(name);
    if (!pass) return Error("unknown pass '" + name + "'");
    auto changed = pass->run(model);
    if (!changed.ok()) return changed.status().Context("pass " + name);
    KILN_RETURN_IF_ERROR(ir::Verify(*model.graph).Context("after pass " + name));
    for (const auto& d : options.dump_ir_after)
      if (d == name || d == "all")
        std::fprintf(stderr, "// IR after %s%s\n%s", name.c_str(), *changed ? "" : " (no change)",
                     ir::PrintModel(model).c_str());
  }
  return OkStatus();
}

}  // namespace kiln::passes
