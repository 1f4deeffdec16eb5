// kiln quantize: post-training static quantization to QDQ ONNX (quantize/quantize.h).
#include "quantize/quantize.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "support/file_io.h"

namespace kiln::cli {
namespace {

// The error report runs at most this many samples (each runs three models).
constexpr size_t kReportSamples = 32;

struct QuantizeCliOptions {
  std::string model, calibration, output, method = "minmax", activations = "int8";
  std::vector<std::string> shapes;
  int random = 0;
  uint64_t seed = 1;
  bool per_channel = false, per_tensor = false;
  double percentile = 99.999;
  int threads = 1;
};

// --random N: N samples of deterministic uniform data in [-1, 1) at the model's (or --shape's)
// dims.
Expected<std::vector<quantize::Sample>> RandomSamples(const QuantizeCliOptions& o) {
  KILN_ASSIGN_OR_RETURN(ir::Model model, LoadAnyModel(o.model));
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseShapes(o.shapes));
  const ir::Graph& g = *model.graph;
  std::vector<quantize::Sample> samples(o.random);
  for (int s = 0; s < o.random; ++s) {
    const std::vector<int> feeds = g.RuntimeInputs();
    for (size_t k = 0; k < feeds.size(); ++k) {
      const ir::Value& v = g.values[feeds[k]];
      auto shape = shapes.find(v.name);
      if (shape == shapes.end() && !v.type.shape_known()) {
        return Error("input '" + v.name + "' has dynamic dims " + v.type.ToString() +
                     "; fix them with --shape " + v.name + "=...");
      }
      const Dims& dims = shape != shapes.end() ? shape->second : v.type.dims;
      samples[s].push_back(RandomTensor(v.type.dtype, dims, o.seed + k + 1000 * s));
    }
  }
  return samples;
}

void PrintProgress(const char* stage, size_t done, size_t total) {
  if (!isatty(2)) return;
  std::fprintf(stderr, "\r%s: sample %zu / %zu", stage, done + 1, total);
  if (done + 1 == total) std::fprintf(stderr, "\n");
}

void PrintErrors(const std::vector<quantize::OutputError>& vs_float,
                 const std::vector<quantize::OutputError>& vs_simulated, size_t samples) {
  for (size_t k = 0; k < vs_float.size(); ++k) {
    std::printf(
        "output '%s': vs float max |err| %.4g, relative L2 %.4g; integer kernels vs QDQ in "
        "float max |err| %.4g (%zu samples)\n",
        vs_float[k].name.c_str(), vs_float[k].max_abs, vs_float[k].rel_l2, vs_simulated[k].max_abs,
        samples);
  }
}

Status RunQuantize(const QuantizeCliOptions& o) {
  if (o.calibration.empty() == (o.random == 0))
    return Error("give calibration data: --calibration DIR|FILE.bpte, or --random N");
  if (o.per_channel && o.per_tensor)
    return Error("--per-channel and --per-tensor exclude each other");
  quantize::QuantizeOptions qo;
  KILN_ASSIGN_OR_RETURN(qo.method, quantize::ParseCalibrationMethod(o.method));
  qo.percentile = o.percentile;
  qo.per_channel = !o.per_tensor;
  qo.activation_type = o.activations == "uint8" ? DType::kUInt8 : DType::kInt8;
  qo.threads = o.threads;
  qo.progress = PrintProgress;
  std::vector<quantize::Sample> samples;
  if (o.random > 0) {
    KILN_ASSIGN_OR_RETURN(samples, RandomSamples(o));
  } else {
    KILN_ASSIGN_OR_RETURN(ir::Model model, LoadAnyModel(o.model));
    KILN_ASSIGN_OR_RETURN(samples, quantize::LoadSamples(o.calibration, *model.graph));
  }
  quantize::QuantizeSummary summary;
  KILN_ASSIGN_OR_RETURN(std::string bytes, quantize::QuantizeModel(o.model, samples, qo, &summary));
  KILN_RETURN_IF_ERROR(WriteFile(o.output, bytes));
  for (const auto& note : summary.notes) std::printf("note: %s\n", note.c_str());
  std::printf(
      "quantized %d weights (%d per channel), %d biases, %d other constants and %d activations "
      "to %s over %d samples (%s)\n",
      summary.weights, summary.per_channel_weights, summary.biases, summary.constants,
      summary.activations, o.activations.c_str(), summary.samples, o.method.c_str());
  samples.resize(std::min(samples.size(), kReportSamples));
  // The integer kernels against the float model, and against the QDQ graph computed in float.
  KILN_ASSIGN_OR_RETURN(
      auto errors,
      quantize::CompareOutputs({o.output}, {{o.model}, {o.output, false}}, samples, o.threads));
  PrintErrors(errors[0], errors[1], samples.size());
  std::printf("wrote %s\n",
              std::filesystem::absolute(o.output).lexically_normal().string().c_str());
  return OkStatus();
}

}  // namespace

void AddQuantizeCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand(
      "quantize", "post-training static quantization to QDQ ONNX (int8 weights and activations)");
  auto o = std::make_shared<QuantizeCliOptions>();  // owned by the callback
  c->add_option("MODEL", o->model, "the float .onnx model")->required();
  c->add_option("--calibration", o->calibration,
                "samples: a folder of tensor files (one input), of folders with NAME.npy or "
                "input_K.pb, or a .bpte bundle");
  c->add_option("--random", o->random, "calibrate on N samples of uniform random data in [-1, 1)")
      ->check(IntegerIn(1, 1000000));
  c->add_option("--seed", o->seed, "the seed of --random's data")->check(UnsignedInteger());
  c->add_option("--shape", o->shapes, "fix an input's dims for --random: NAME=D0,D1,...");
  c->add_option("--method", o->method, "how ranges are chosen: minmax, percentile, entropy")
      ->check(OneOf({"minmax", "percentile", "entropy"}));
  c->add_option("--percentile", o->percentile, "percentile's p (default 99.999)")
      ->check(CLI::Range(50.0, 100.0));
  c->add_flag("--per-channel", o->per_channel, "weights per output channel (the default)");
  c->add_flag("--per-tensor", o->per_tensor, "weights per tensor");
  c->add_option("--activations", o->activations, "activation type: int8 (default) or uint8")
      ->check(OneOf({"int8", "uint8"}));
  c->add_option("--threads", o->threads, "worker threads")->check(IntegerIn(1, kMaxThreads));
  c->add_option("-o,--output", o->output, "the QDQ .onnx model to write")->required();
  c->callback([&rc, o] {
    Status st = RunQuantize(*o);
    rc = st.ok() ? 0 : Fail(st);
  });
}

}  // namespace kiln::cli
