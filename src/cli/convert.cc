// kiln convert: ONNX protobuf to ONNX JSON + safetensors.
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "frontend/json_import.h"

namespace kiln::cli {

void AddConvertCommand(CLI::App& app, int& rc) {
  auto* c =
      app.add_subcommand("convert", "convert MODEL.onnx to ONNX JSON with safetensors weights");
  struct Options {
    std::string model, to = "json", weights, output;
  };
  auto o = std::make_shared<Options>();  // owned by the callback
  c->add_option("MODEL", o->model, "the .onnx model")->required();
  c->add_option("--to", o->to, "target format (json)")->check(OneOf({"json"}));
  c->add_option("--weights", o->weights, "the safetensors file to write")->required();
  c->add_option(
      "-o,--output", o->output,
      "the JSON file to write (default: the model's name with .json, in the current folder)");
  c->callback([&rc, o] {
    std::string out = o->output;
    if (out.empty())
      out = std::filesystem::path(o->model).filename().replace_extension(".json").string();
    Status st = frontend::ConvertOnnxToJson(o->model, out, o->weights);
    if (!st.ok()) {
      rc = Fail(st);
      return;
    }
    std::printf("wrote %s and %s\n",
                std::filesystem::absolute(out).lexically_normal().string().c_str(),
                std::filesystem::absolute(o->weights).lexically_normal().string().c_str());
    rc = 0;
  });
}

}  // namespace kiln::cli
