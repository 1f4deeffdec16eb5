// Builders for small ONNX models used by the tests (serialized ModelProto bytes).
#pragma once

#include <onnx/onnx_pb.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace kiln::testing {

inline onnx::ValueInfoProto FloatInfo(const std::string& name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return vi;
}

// A model of IR version 8 at opset 17 whose graph, named `graph_name`, is still empty.
inline onnx::ModelProto EmptyModel(const std::string& graph_name) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  m.mutable_graph()->set_name(graph_name);
  return m;
}

// Adds node `op` reading `inputs` and writing `output`, named after its output.
inline onnx::NodeProto* AddNamedNode(onnx::GraphProto* g, const std::string& op,
                                     const std::vector<std::string>& inputs,
                                     const std::string& output) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(output);
  for (const auto& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

// Sets attribute `name` of n: an int, a float, a string, ints or strings.
inline onnx::AttributeProto* NewAttribute(onnx::NodeProto* n, const std::string& name,
                                          onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  NewAttribute(n, name, onnx::AttributeProto::INT)->set_i(v);
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name, int v) {
  SetAttr(n, name, int64_t{v});
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name, float v) {
  NewAttribute(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  NewAttribute(n, name, onnx::AttributeProto::STRING)->set_s(v);
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = NewAttribute(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = NewAttribute(n, name, onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
// A braced list of integers, {1, 0} or {axis}, is INTS (not an INT, nor STRINGS).
inline void SetAttr(onnx::NodeProto* n, const std::string& name, std::initializer_list<int64_t> v) {
  SetAttr(n, name, std::vector<int64_t>(v));
}
inline void SetAttr(onnx::NodeProto* n, const std::string& name,
                    const std::vector<std::string>& v) {
  auto* a = NewAttribute(n, name, onnx::AttributeProto::STRINGS);
  for (const auto& x : v) a->add_strings(x);
}

// Adds an int64 initializer.
inline void AddInt64Initializer(onnx::GraphProto* g, const std::string& name,
                                const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

// Adds a float32 initializer.
inline void AddFloatInitializer(onnx::GraphProto* g, const std::string& name,
                                const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

// y = Relu(x + w) with w an initializer of `n` floats.
inline onnx::ModelProto AddReluModel(int64_t n = 4) {
  onnx::ModelProto m = EmptyModel("add_relu");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatInfo("x", {n});
  *g->add_output() = FloatInfo("y", {n});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(n);
  for (int64_t i = 0; i < n; ++i) w->add_float_data(static_cast<float>(i) - 1.5f);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("x");
  add->add_input("w");
  add->add_output("s");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("s");
  relu->add_output("y");
  return m;
}

}  // namespace kiln::testing
