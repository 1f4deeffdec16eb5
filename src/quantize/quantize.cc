#include "quantize/quantize.h"

#include <cmath>
#include <map>
#include <memory>

#include "frontend/model_loader.h"
#include "quantize/qdq_writer.h"
#include "runtime/executor.h"
#include "support/file_io.h"

namespace kiln::quantize {
namespace {

// Runs a model on samples, compiling it again whenever the samples' dims change.
class SampleRunner {
 public:
  SampleRunner(ir::Model model, runtime::ExecutorOptions options)
      : model_(std::move(model)), options_(std::move(options)) {}

  Expected<std::vector<Tensor>> Run(const Sample& sample) {
    const std::vector<int> feeds = model_.graph->RuntimeInputs();
    if (sample.size() != feeds.size()) {
      return Error("a sample has " + std::to_string(sample.size()) + " inputs; the model takes " +
                   std::to_string(feeds.size()));
    }
    bool same = exec_ != nullptr;
    for (size_t k = 0; k < feeds.size(); ++k) {
      const std::string& name = model_.graph->values[feeds[k]].name;
      same = same && options_.shapes[name] == sample[k].dims();
      options_.shapes[name] = sample[k].dims();
    }
    if (!same) {
      exec_.reset();
      KILN_ASSIGN_OR_RETURN(exec_, runtime::Executor::Create(ir::CloneModel(model_), options_));
    }
    std::vector<Tensor> outputs;
    KILN_RETURN_IF_ERROR(exec_->Run(sample, &outputs));
    return outputs;
  }

 private:
  ir::Model model_;
  runtime::ExecutorOptions options_;
  std::unique_ptr<runtime::Executor> exec_;
};

runtime::ExecutorOptions RunOptions(bool host_passes, int threads) {
  runtime::ExecutorOptions eo;
  eo.threads = threads;
  eo.host_passes = host_passes;
  return eo;
}

bool IsFloatTensor(const Tensor& t) {
  return t.kind() == Tensor::Kind::kTensor && t.dtype() == DType::kFloat32;
}

// The ranges of the named values of `model` over the samples, for those that are float32.
Expected<std::map<std::string, Range>> Calibrate(const ir::Model& model,
                                                 const std::vector<std::string>& names,
                                                 const std::vector<Sample>& samples,
                                                 const QuantizeOptions& o) {
  ir::Model watched = ir::CloneModel(model);
  ir::Graph& g = *watched.graph;
  std::map<std::string, int> ids;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (!g.values[v].name.empty()) ids[g.values[v].name] = static_cast<int>(v);
  std::vector<std::string> found;
  std::vector<size_t> slot;  // each found value's position among the graph outputs
  for (const auto& name : names) {
    auto id = ids.find(name);
    if (id == ids.end()) continue;
    auto out = std::find(g.outputs.begin(), g.outputs.end(), id->second);
    if (out == g.outputs.end()) out = g.outputs.insert(g.outputs.end(), id->second);
    found.push_back(name);
    slot.push_back(static_cast<size_t>(out - g.outputs.begin()));
  }
  SampleRunner runner(std::move(watched), RunOptions(false, o.threads));
  std::vector<RangeCollector> ranges(found.size());
  std::vector<bool> is_float(found.size(), true);
  const int passes = o.method == CalibrationMethod::kMinMax ? 1 : 2;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<bool> watch(found.size(), true);
    if (pass == 1) {
      bool any = false;
      for (size_t k = 0; k < found.size(); ++k)
        any |= watch[k] = is_float[k] && ranges[k].StartHistogram(o.method);
      if (!any) break;
    }
    for (size_t s = 0; s < samples.size(); ++s) {
      if (o.progress) o.progress(pass == 0 ? "calibrating" : "histograms", s, samples.size());
      KILN_ASSIGN_OR_RETURN(auto outputs, runner.Run(samples[s]));
      for (size_t k = 0; k < found.size(); ++k) {
        const Tensor& t = outputs[slot[k]];
        if (!watch[k] || !is_float[k]) continue;
        if (!IsFloatTensor(t)) {
          is_float[k] = false;
        } else if (pass == 0) {
          ranges[k].ObserveMinMax(t.data<float>(), t.size());
        } else {
          ranges[k].ObserveHistogram(t.data<float>(), t.size());
        }
      }
    }
  }
  std::map<std::string, Range> result;
  for (size_t k = 0; k < found.size(); ++k)
    if (is_float[k]) result[found[k]] = ranges[k].Result(o.method, o.percentile);
  return result;
}

// A model that kiln quantize would quantize twice.
Status CheckNotQuantized(const onnx::ModelProto& mp, const std::string& label) {
  for (const auto& n : mp.graph().node()) {
    const std::string& op = n.op_type();
    if (op == "QuantizeLinear" || op == "DequantizeLinear" || op == "DynamicQuantizeLinear" ||
        op.rfind("QLinear", 0) == 0 || op == "MatMulInteger" || op == "ConvInteger") {
      return Error(label + ": already quantized (node " +
                   (n.name().empty() ? op : "'" + n.name() + "'") + " is " + op + ")");
    }
  }
  return OkStatus();
}

// Initializers whose bytes lie in external files get them inline, so the written model stands
// alone wherever it is written.
Status InlineExternalData(onnx::ModelProto& mp, const std::map<std::string, Tensor>& constants) {
  for (auto& t : *mp.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    auto it = constants.find(t.name());
    if (it == constants.end() || it->second.dtype() == DType::kString)
      return Error("initializer '" + t.name() + "': its external data cannot be written inline");
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(it->second.raw(), it->second.nbytes());
  }
  return OkStatus();
}

}  // namespace

Expected<std::string> QuantizeModel(const std::string& model_path,
                                    const std::vector<Sample>& samples,
                                    const QuantizeOptions& options, QuantizeSummary* summary) {
  if (samples.empty()) return Error("no calibration samples");
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(model_path));
  onnx::ModelProto mp;
  if (!mp.ParseFromString(bytes)) return Error(model_path + ": not an ONNX model (.onnx)");
  KILN_ASSIGN_OR_RETURN(ir::Model model, frontend::LoadModel(model_path));
  KILN_RETURN_IF_ERROR(CheckNotQuantized(mp, model_path));
  std::map<std::string, Tensor> constants;
  for (const ir::Value& v : model.graph->values)
    if (v.constant && !v.name.empty()) constants[v.name] = *v.constant;

  QuantizeSummary s;
  const int64_t opset = DefaultOpset(mp);
  if (options.per_channel && opset >= 10 && opset < 13) {
    s.notes.push_back(
        "weights per tensor: per-channel DequantizeLinear needs opset 13, and the "
        "model imports opset " +
        std::to_string(opset));
  }
  const QdqChoice choice = ChooseTensors(mp.graph(), constants, options.per_channel);
  QdqSettings settings;
  settings.activation_type = options.activation_type;
  KILN_ASSIGN_OR_RETURN(settings.ranges, Calibrate(model, choice.activations, samples, options));
  KILN_RETURN_IF_ERROR(InlineExternalData(mp, constants));
  KILN_ASSIGN_OR_RETURN(QdqCounts counts, RewriteToQdq(mp, choice, constants, settings));
  s.activations = counts.activations;
  s.weights = counts.weights;
  s.per_channel_weights = counts.per_channel_weights;
  s.biases = counts.biases;
  s.constants = counts.constants;
  s.samples = static_cast<int>(samples.size());
  if (summary) *summary = s;
  std::string out;
  if (!mp.SerializeToString(&out)) return Error(model_path + ": the quantized model is too large");
  return out;
}

Expected<std::vector<std::vector<OutputError>>> CompareOutputs(
    const ModelRun& run, const std::vector<ModelRun>& references,
    const std::vector<Sample>& samples, int threads) {
  KILN_ASSIGN_OR_RETURN(ir::Model model, frontend::LoadModel(run.path));
  std::vector<OutputError> names;
  for (int v : model.graph->outputs) names.push_back({model.graph->values[v].name});
  SampleRunner runner(std::move(model), RunOptions(run.host_passes, threads));
  std::vector<SampleRunner> ref_runners;
  for (const ModelRun& r : references) {
    KILN_ASSIGN_OR_RETURN(ir::Model ref, frontend::LoadModel(r.path));
    if (ref.graph->outputs.size() != names.size())
      return Error(run.path + ": its outputs are not those of " + r.path);
    ref_runners.emplace_back(std::move(ref), RunOptions(r.host_passes, threads));
  }
  std::vector<std::vector<OutputError>> errors(references.size(), names);
  // Per reference and output: the squared differences and the squared reference values.
  std::vector<std::vector<double>> diff2(references.size(), std::vector<double>(names.size())),
      ref2 = diff2;
  for (const Sample& s : samples) {
    KILN_ASSIGN_OR_RETURN(auto got, runner.Run(s));
    for (size_t r = 0; r < references.size(); ++r) {
      KILN_ASSIGN_OR_RETURN(auto expected, ref_runners[r].Run(s));
      for (size_t k = 0; k < names.size(); ++k) {
        const Tensor &e = expected[k], &g = got[k];
        if (!IsFloatTensor(e) || !IsFloatTensor(g) || e.size() != g.size()) continue;
        for (int64_t i = 0; i < e.size(); ++i) {
          const double d = double{g.data<float>()[i]} - e.data<float>()[i];
          diff2[r][k] += d * d;
          ref2[r][k] += double{e.data<float>()[i]} * e.data<float>()[i];
          errors[r][k].max_abs = std::max(errors[r][k].max_abs, std::fabs(d));
        }
      }
    }
  }
  for (size_t r = 0; r < references.size(); ++r)
    for (size_t k = 0; k < names.size(); ++k)
      errors[r][k].rel_l2 =
          ref2[r][k] > 0 ? std::sqrt(diff2[r][k] / ref2[r][k]) : std::sqrt(diff2[r][k]);
  return errors;
}

}  // namespace kiln::quantize
