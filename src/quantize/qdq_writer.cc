#include "quantize/qdq_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace kiln::quantize {
namespace {

// Which inputs of an op are data (quantized as activations or constants), which is its weight
// and which its bias. `all_data`: every input (Concat).
struct OpRoles {
  std::vector<int> data;
  bool all_data = false;
  int weight = -1, bias = -1;
};

const std::map<std::string, OpRoles>& QuantizedOps() {
  static const std::map<std::string, OpRoles> kOps = {
      {"Conv", {{0}, false, 1, 2}},
      {"ConvTranspose", {{0}, false, 1, -1}},
      {"MatMul", {{0}, false, 1, -1}},
      {"Gemm", {{0}, false, 1, 2}},
      {"Add", {{0, 1}}},
      {"Mul", {{0, 1}}},
      {"Concat", {{}, true}},
      {"MaxPool", {{0}}},
      {"AveragePool", {{0}}},
      {"GlobalAveragePool", {{0}}},
      {"GlobalMaxPool", {{0}}},
      {"Relu", {{0}}},
      {"Clip", {{0}}},
      {"LeakyRelu", {{0}}},
      {"Sigmoid", {{0}}},
      {"Tanh", {{0}}},
      {"Reshape", {{0}}},
      {"Flatten", {{0}}},
      {"Transpose", {{0}}},
      {"Squeeze", {{0}}},
      {"Unsqueeze", {{0}}},
  };
  return kOps;
}

const OpRoles* RolesOf(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return nullptr;
  auto it = QuantizedOps().find(n.op_type());
  return it == QuantizedOps().end() ? nullptr : &it->second;
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::INT) return a.i();
  return def;
}

// The output-channel axis of a weight, or -1 where it is not one kiln quantizes per channel.
int WeightAxis(const onnx::NodeProto& n, const Tensor& w) {
  if (n.op_type() == "Conv") return w.rank() >= 3 ? 0 : -1;
  if (n.op_type() == "ConvTranspose") return w.rank() >= 3 && IntAttr(n, "group", 1) == 1 ? 1 : -1;
  if (n.op_type() == "Gemm") return IntAttr(n, "transB", 0) ? 0 : 1;
  return 1;  // MatMul's [K, N]
}

bool IsFloatConstant(const std::map<std::string, Tensor>& constants, const std::string& name) {
  auto it = constants.find(name);
  return it != constants.end() && it->second.kind() == Tensor::Kind::kTensor &&
         it->second.dtype() == DType::kFloat32;
}

// Every name in a graph and its subgraphs, so that new names never shadow one.
void CollectNames(const onnx::GraphProto& g, std::set<std::string>* names) {
  for (const auto& v : g.input()) names->insert(v.name());
  for (const auto& v : g.output()) names->insert(v.name());
  for (const auto& v : g.value_info()) names->insert(v.name());
  for (const auto& t : g.initializer()) names->insert(t.name());
  for (const auto& n : g.node()) {
    names->insert(n.name());
    names->insert(n.input().begin(), n.input().end());
    names->insert(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectNames(a.g(), names);
      for (const auto& sub : a.graphs()) CollectNames(sub, names);
    }
  }
}

class NameSet {
 public:
  explicit NameSet(const onnx::GraphProto& g) { CollectNames(g, &names_); }
  // `base`, or `base_K` with the first K that is free.
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

 private:
  std::set<std::string> names_;
};

onnx::TensorProto MakeTensor(const std::string& name, DType t, const Dims& dims,
                             const void* bytes) {
  onnx::TensorProto tp;
  tp.set_name(name);
  tp.set_data_type(static_cast<int32_t>(t));
  for (int64_t d : dims) tp.add_dims(d);
  tp.set_raw_data(bytes, static_cast<size_t>(NumElements(dims)) * DTypeSize(t));
  return tp;
}

onnx::NodeProto MakeNode(const std::string& op, const std::string& name,
                         const std::vector<std::string>& inputs, const std::string& output,
                         int axis = -1) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  n.add_output(output);
  if (axis >= 0) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return n;
}

// Per-tensor parameters of an activation range (ONNX Runtime's compute_scale_zp).
struct QParams {
  float scale = 1;
  int32_t zero_point = 0;
};

std::pair<int32_t, int32_t> QRange(DType t) {
  return t == DType::kUInt8 ? std::pair{0, 255} : std::pair{-128, 127};
}

QParams ActivationParams(Range r, DType t) {
  const auto [qmin, qmax] = QRange(t);
  const double lo = std::min<double>(r.lo, 0), hi = std::max<double>(r.hi, 0);
  QParams p;
  if (hi == lo) return p;
  p.scale = static_cast<float>((hi - lo) / (qmax - qmin));
  p.zero_point = static_cast<int32_t>(std::clamp(
      std::nearbyint(qmin - lo / p.scale), static_cast<double>(qmin), static_cast<double>(qmax)));
  return p;
}

// x / scale + zero point, rounded half to even and saturated to [lo, hi] (QuantizeLinear); a NaN
// weight becomes the zero point.
int32_t QuantizeValue(float x, float scale, int32_t zero_point, double lo, double hi) {
  const double q = std::nearbyint(double{x} / scale) + zero_point;
  return std::isnan(q) ? zero_point : static_cast<int32_t>(std::clamp(q, lo, hi));
}

// A constant stored quantized: its integer bytes, and the scales and zero points along `axis`
// (one each where axis is -1).
struct QuantizedConstant {
  DType type;
  Dims dims;
  std::vector<uint8_t> data;  // row-major, type's width
  std::vector<float> scales;
  std::vector<int32_t> zero_points;
  int axis = -1;
};

void StoreInt(DType type, int32_t v, std::vector<uint8_t>* out) {
  if (type == DType::kInt32) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out->insert(out->end(), b, b + 4);
  } else {
    out->push_back(static_cast<uint8_t>(v));  // int8's two's complement or uint8
  }
}

// Element i of a tensor of `dims` lies in which slice along axis (0 where axis is -1).
int64_t SliceOf(int64_t i, const Dims& dims, int axis) {
  if (axis < 0) return 0;
  int64_t inner = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  return (i / inner) % dims[axis];
}

// Symmetric int8 in [-127, 127], zero point 0, scale max |w| / 127 per slice along axis.
QuantizedConstant QuantizeWeight(const Tensor& w, int axis) {
  if (axis >= w.rank()) axis = -1;  // a malformed Gemm's weight of rank under 2
  QuantizedConstant q{DType::kInt8, w.dims(), {}, {}, {}, axis};
  const int64_t slices = axis < 0 ? 1 : w.dim(axis);
  std::vector<float> absmax(slices, 0.0f);
  const float* x = w.data<float>();
  for (int64_t i = 0; i < w.size(); ++i) {
    float& m = absmax[SliceOf(i, w.dims(), axis)];
    if (std::isfinite(x[i])) m = std::max(m, std::fabs(x[i]));
  }
  for (float m : absmax) q.scales.push_back(m > 0 ? m / 127.0f : 1.0f);
  q.zero_points.assign(slices, 0);
  for (int64_t i = 0; i < w.size(); ++i)
    StoreInt(q.type, QuantizeValue(x[i], q.scales[SliceOf(i, w.dims(), axis)], 0, -127, 127),
             &q.data);
  return q;
}

QuantizedConstant QuantizeAsActivation(const Tensor& c, DType type) {
  Range r;
  RangeCollector collect;
  collect.ObserveMinMax(c.data<float>(), c.size());
  r = collect.Result(CalibrationMethod::kMinMax, 0);
  const QParams p = ActivationParams(r, type);
  const auto [qmin, qmax] = QRange(type);
  QuantizedConstant q{type, c.dims(), {}, {p.scale}, {p.zero_point}, -1};
  for (int64_t i = 0; i < c.size(); ++i)
    StoreInt(type, QuantizeValue(c.data<float>()[i], p.scale, p.zero_point, qmin, qmax), &q.data);
  return q;
}

// The rewrite of one graph: new initializers and nodes, then the node list rebuilt.
class QdqRewriter {
 public:
  QdqRewriter(onnx::GraphProto& g, DType activation_type)
      : g_(g), names_(g), activation_type_(activation_type) {
    for (int n = 0; n < g.node_size(); ++n)
      for (const auto& o : g.node(n).output()) producer_[o] = n;
  }

  // Replaces initializer `name` by its quantized bytes, scales and zero points and a
  // DequantizeLinear that writes `name` again, so its readers are unchanged.
  void ReplaceConstant(const std::string& name, const QuantizedConstant& q) {
    const std::string qname = names_.Unique(name + "_quantized");
    const std::string scale = names_.Unique(name + "_scale");
    const std::string zp = names_.Unique(name + "_zero_point");
    *g_.add_initializer() = MakeTensor(qname, q.type, q.dims, q.data.data());
    const Dims param_dims = q.axis < 0 ? Dims{} : Dims{static_cast<int64_t>(q.scales.size())};
    *g_.add_initializer() = MakeTensor(scale, DType::kFloat32, param_dims, q.scales.data());
    std::vector<uint8_t> zps;
    for (int32_t z : q.zero_points) StoreInt(q.type, z, &zps);
    *g_.add_initializer() = MakeTensor(zp, q.type, param_dims, zps.data());
    front_.push_back(MakeNode("DequantizeLinear", names_.Unique(name + "_DequantizeLinear"),
                              {qname, scale, zp}, name, q.axis));
    removed_.insert(name);
  }

  // A QuantizeLinear / DequantizeLinear pair on activation `name`: after its producer, which
  // then writes `name`_QuantizeLinear_Input while the DequantizeLinear writes `name` (readers and
  // graph outputs unchanged); or, for a graph input, before every node, with its readers moved to
  // the DequantizeLinear's output.
  void QuantizeActivation(const std::string& name, QParams p) {
    const std::string scale = names_.Unique(name + "_scale");
    const std::string zp = names_.Unique(name + "_zero_point");
    *g_.add_initializer() = MakeTensor(scale, DType::kFloat32, {}, &p.scale);
    std::vector<uint8_t> zp_byte;
    StoreInt(activation_type_, p.zero_point, &zp_byte);
    *g_.add_initializer() = MakeTensor(zp, activation_type_, {}, zp_byte.data());
    const std::string q = names_.Unique(name + "_QuantizeLinear_Output");
    auto writer = producer_.find(name);
    onnx::NodeProto* producer =
        writer == producer_.end() ? nullptr : g_.mutable_node(writer->second);
    std::string float_in = name, dq_out = name;
    if (producer) {
      float_in = names_.Unique(name + "_QuantizeLinear_Input");
      for (auto& o : *producer->mutable_output())
        if (o == name) o = float_in;
    } else {
      dq_out = names_.Unique(name + "_DequantizeLinear_Output");
      for (auto& n : *g_.mutable_node())
        for (auto& i : *n.mutable_input())
          if (i == name) i = dq_out;
    }
    auto& at = producer ? after_[float_in] : front_;
    at.push_back(MakeNode("QuantizeLinear", names_.Unique(name + "_QuantizeLinear"),
                          {float_in, scale, zp}, q));
    at.push_back(MakeNode("DequantizeLinear", names_.Unique(name + "_DequantizeLinear"),
                          {q, scale, zp}, dq_out));
  }

  // The node list with the new nodes in place, and the replaced initializers gone.
  void Finish() {
    std::vector<onnx::NodeProto> nodes = front_;
    for (const auto& n : g_.node()) {
      nodes.push_back(n);
      for (const auto& o : n.output()) {
        auto it = after_.find(o);
        if (it != after_.end()) nodes.insert(nodes.end(), it->second.begin(), it->second.end());
      }
    }
    g_.clear_node();
    for (auto& n : nodes) *g_.add_node() = std::move(n);
    RemoveNamed(g_.mutable_initializer());
    RemoveNamed(g_.mutable_input());
  }

 private:
  template <typename Field>
  void RemoveNamed(Field* field) {
    Field kept;
    for (auto& item : *field)
      if (!removed_.count(item.name())) *kept.Add() = std::move(item);
    field->Swap(&kept);
  }

  onnx::GraphProto& g_;
  NameSet names_;
  DType activation_type_;
  std::vector<onnx::NodeProto> front_;
  std::map<std::string, std::vector<onnx::NodeProto>> after_;
  std::set<std::string> removed_;
  std::map<std::string, int> producer_;  // the node writing each value, as the graph came
};

}  // namespace

int64_t DefaultOpset(const onnx::ModelProto& mp) {
  for (const auto& o : mp.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

QdqChoice ChooseTensors(const onnx::GraphProto& g, const std::map<std::string, Tensor>& constants,
                        bool per_channel) {
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  for (const auto& n : g.node())
    for (const auto& i : n.input())
      if (!i.empty()) readers[i].push_back(&n);
  std::set<std::string> graph_outputs;
  for (const auto& o : g.output()) graph_outputs.insert(o.name());

  // A MatMul by a 2-D weight whose result only an Add of a 1-D bias reads is a dense layer (as
  // Keras and torch's Linear export it): the bias is int32 like Gemm's and the MatMul's result
  // stays unquantized, so that fuse-qdq runs the pair as one integer MatMul with its bias.
  std::map<std::string, const onnx::NodeProto*> dense_bias;  // MatMul result -> its Add
  for (const auto& n : g.node()) {
    if (n.op_type() != "MatMul" || !RolesOf(n) || n.input_size() != 2 || n.output_size() != 1 ||
        !IsFloatConstant(constants, n.input(1)) || constants.at(n.input(1)).rank() != 2 ||
        graph_outputs.count(n.output(0)))
      continue;
    const auto& r = readers[n.output(0)];
    if (r.size() != 1 || r[0]->op_type() != "Add" || !RolesOf(*r[0]) || r[0]->input_size() != 2)
      continue;
    const std::string& b = r[0]->input(r[0]->input(0) == n.output(0) ? 1 : 0);
    if (IsFloatConstant(constants, b) && constants.at(b).rank() == 1 &&
        constants.at(b).size() == constants.at(n.input(1)).dim(1) && readers[b].size() == 1)
      dense_bias[n.output(0)] = r[0];
  }
  auto bias_of_dense = [&](const std::string& v) {
    auto it = dense_bias.find(v);
    if (it == dense_bias.end()) return std::string();
    const onnx::NodeProto& add = *it->second;
    return add.input(add.input(0) == v ? 1 : 0);
  };

  // A result read only by a Relu or a Clip is quantized after it (fuse-qdq folds the two).
  std::set<std::string> before_relu;
  for (const auto& n : g.node()) {
    if (!RolesOf(n) || n.output_size() == 0) continue;
    const auto& r = readers[n.output(0)];
    if ((n.op_type() == "Conv" || n.op_type() == "ConvTranspose" || n.op_type() == "MatMul" ||
         n.op_type() == "Gemm" || n.op_type() == "Add") &&
        r.size() == 1 && (r[0]->op_type() == "Relu" || r[0]->op_type() == "Clip") &&
        RolesOf(*r[0]) && !graph_outputs.count(n.output(0))) {
      before_relu.insert(n.output(0));
    }
  }
  QdqChoice c;
  std::set<std::string> chosen = before_relu;
  for (const auto& [result, add] : dense_bias) {  // neither the result nor the bias as data
    chosen.insert(result);
    chosen.insert(bias_of_dense(result));
  }
  auto add_data = [&](const std::string& name) {
    if (name.empty() || !chosen.insert(name).second) return;
    if (!constants.count(name)) {
      c.activations.push_back(name);
    } else if (IsFloatConstant(constants, name)) {
      c.constants.push_back(name);
    }
  };
  for (const auto& n : g.node()) {
    const OpRoles* roles = RolesOf(n);
    if (!roles) continue;
    for (int i = 0; i < n.input_size(); ++i) {
      const bool data = roles->all_data || std::count(roles->data.begin(), roles->data.end(), i) ||
                        (i == roles->weight && !IsFloatConstant(constants, n.input(i)));
      if (data) add_data(n.input(i));
    }
    if (roles->weight >= 0 && roles->weight < n.input_size()) {
      const std::string& w = n.input(roles->weight);
      const bool weight =
          IsFloatConstant(constants, w) && (n.op_type() != "MatMul" || constants.at(w).rank() == 2);
      if (!weight) {
        add_data(w);
      } else if (chosen.insert(w).second) {
        c.weights.push_back({w, per_channel ? WeightAxis(n, constants.at(w)) : -1});
        const int b = roles->bias;
        const std::string dense = n.output_size() > 0 ? bias_of_dense(n.output(0)) : "";
        if (!dense.empty()) {
          c.biases.push_back({dense, n.input(0), w});
        } else if (b >= 0 && b < n.input_size() && IsFloatConstant(constants, n.input(b)) &&
                   constants.at(n.input(b)).rank() == 1 && readers[n.input(b)].size() == 1 &&
                   chosen.insert(n.input(b)).second) {
          c.biases.push_back({n.input(b), n.input(0), w});
        }
      }
    }
    if (n.output_size() > 0) add_data(n.output(0));
  }
  return c;
}

Expected<QdqCounts> RewriteToQdq(onnx::ModelProto& mp, const QdqChoice& choice,
                                 const std::map<std::string, Tensor>& constants,
                                 const QdqSettings& settings) {
  const int64_t opset = DefaultOpset(mp);
  if (opset < 10) {
    return Error("QuantizeLinear needs opset 10 or later; the model imports opset " +
                 std::to_string(opset));
  }
  QdqRewriter rw(*mp.mutable_graph(), settings.activation_type);
  QdqCounts counts;
  std::map<std::string, std::vector<float>> weight_scales;
  for (const auto& w : choice.weights) {
    const QuantizedConstant q = QuantizeWeight(constants.at(w.name), opset >= 13 ? w.axis : -1);
    weight_scales[w.name] = q.scales;
    rw.ReplaceConstant(w.name, q);
    ++counts.weights;
    counts.per_channel_weights += q.axis >= 0;
  }
  std::map<std::string, float> input_scales;  // of activations and constants, for the biases
  for (const auto& name : choice.constants) {
    const QuantizedConstant q = QuantizeAsActivation(constants.at(name), settings.activation_type);
    input_scales[name] = q.scales[0];
    rw.ReplaceConstant(name, q);
    ++counts.constants;
  }
  for (const auto& name : choice.activations) {
    auto it = settings.ranges.find(name);
    if (it == settings.ranges.end()) continue;
    const QParams p = ActivationParams(it->second, settings.activation_type);
    input_scales[name] = p.scale;
    rw.QuantizeActivation(name, p);
    ++counts.activations;
  }
  for (const auto& b : choice.biases) {
    auto sx = input_scales.find(b.input);
    const Tensor& bias = constants.at(b.name);
    const std::vector<float>& sw = weight_scales[b.weight];
    if (sx == input_scales.end() ||
        (sw.size() > 1 && static_cast<int64_t>(sw.size()) != bias.size()))
      continue;
    QuantizedConstant q{DType::kInt32, bias.dims(), {}, {}, {}, sw.size() > 1 ? 0 : -1};
    for (float s : sw) q.scales.push_back(sx->second * s);
    q.zero_points.assign(q.scales.size(), 0);
    for (int64_t i = 0; i < bias.size(); ++i) {
      StoreInt(DType::kInt32,
               QuantizeValue(bias.data<float>()[i], q.scales[sw.size() > 1 ? i : 0], 0,
                             -2147483647.0, 2147483647.0),
               &q.data);
    }
    rw.ReplaceConstant(b.name, q);
    ++counts.biases;
  }
  rw.Finish();
  return counts;
}

}  // namespace kiln::quantize
