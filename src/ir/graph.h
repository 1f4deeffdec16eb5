// The graph IR: Model -> Graph (with subgraphs for If/Loop/Scan) -> Node / Value / Attribute.
// Values are identified by their index in Graph::values; nodes refer to them by index, -1 marks an
// omitted optional input or output. A subgraph reads outer values through `captures`.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::ir {

class Graph;

// Element type and shape of a value. A dim is a known size, or unknown (-1) with an optional
// symbolic name such as "batch".
struct TypeInfo {
  enum class Kind { kTensor, kSequence, kOptional };
  Kind kind = Kind::kTensor;
  DType dtype = DType::kUndefined;
  bool has_shape = false;
  Dims dims;                         // -1 where unknown
  std::vector<std::string> symbols;  // same length as dims; "" where none
  // For kSequence / kOptional: the element type.
  std::shared_ptr<TypeInfo> elem;

  bool shape_known() const;  // has_shape and every dim >= 0
  std::string ToString() const;
  static TypeInfo Tensor(DType t, Dims d);
  // The type of a runtime value (tensor, sequence or empty optional).
  static TypeInfo Of(const kiln::Tensor& value);
};

struct Attribute {
  enum class Kind {
    kUndefined,
    kFloat,
    kInt,
    kString,
    kTensor,
    kGraph,
    kFloats,
    kInts,
    kStrings,
    kTensors,
    kGraphs
  };
  Kind kind = Kind::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  kiln::Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<kiln::Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::string ToString() const;

  // Attributes of one kind, for the nodes passes make.
  static Attribute Int(int64_t v);
  static Attribute Float(float v);
  static Attribute String(std::string v);
  static Attribute Ints(std::vector<int64_t> v);
  static Attribute Floats(std::vector<float> v);
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::map<std::string, Attribute> attrs;
  // Values of the enclosing graph that this node's subgraphs read (If/Loop/Scan captures).
  std::vector<int> implicit_inputs;

  const Attribute* attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  }
  int64_t attr_int(const std::string& key, int64_t def) const;
  float attr_float(const std::string& key, float def) const;
  std::string attr_string(const std::string& key, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> def = {}) const;
  // A readable identity for error messages: the name, or op_type and output.
  std::string Label(const Graph& g) const;
};

struct Value {
  std::string name;
  TypeInfo type;
  std::optional<kiln::Tensor> constant;  // initializers
  int producer = -1;                     // node index, -1 for inputs/initializers/captures
};

class Graph {
 public:
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;
  // Values this (sub)graph reads from its enclosing graph: (local value, value in the parent).
  std::vector<std::pair<int, int>> captures;
  const Graph* parent = nullptr;

  int AddValue(std::string name, TypeInfo type = {});
  // Graph inputs that are not also initializers: what a caller must feed.
  std::vector<int> RuntimeInputs() const;
  // Node indices in a valid execution order (the stored order is already topological after
  // Verify; this is used by passes that insert nodes).
  Expected<std::vector<int>> TopologicalOrder() const;
};

struct Model {
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // domain -> version ("" = ai.onnx)
  std::string producer_name;
  std::string producer_version;
  std::string source_path;
  std::shared_ptr<Graph> graph;

  int64_t OpsetFor(const std::string& domain) const;
};

// A copy whose graphs (subgraphs included) can be changed without touching the original; constant
// tensors share their bytes (passes never write into a constant's bytes).
Model CloneModel(const Model& m);
std::shared_ptr<Graph> CloneGraph(const Graph& g, const Graph* parent = nullptr);

// Structural checks: indices in range, single producer per value, nodes topologically ordered
// (no cycles), graph outputs defined. Returns an error naming the first offending node or value.
Status Verify(const Graph& g);
// Human-readable dump of the whole model, subgraphs indented.
std::string PrintModel(const Model& m);
std::string PrintGraph(const Graph& g, int indent = 0);

}  // namespace kiln::ir
