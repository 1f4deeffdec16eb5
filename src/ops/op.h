// The operator interface. Every op is a pair of plain functions registered by (domain, op_type):
//   infer:   output dtypes and dims from input types, and from input values where they are known
//            (constants at compile time; everything at run time). It is the shape inference.
//   compute: the kernel glue; reads inputs, writes outputs that the executor has already
//            allocated with the inferred dims.
// An infer function that cannot know an output's dims before running (NonZero, Loop scan outputs)
// calls set_output_dynamic; compute then calls allocate_output for it.
// Opset-version semantics are handled inside the functions through `opset`.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "kernels/x86/node_state.h"
#include "support/status.h"

namespace kiln::ops {

// The domain of kiln's own ops, which only its passes write (ChannelShuffle).
inline constexpr char kKilnDomain[] = "com.kiln";

// Runs If/Loop/Scan bodies. Body inputs are bound in order; captured outer values are resolved by
// the runner from the enclosing frame.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual Status Run(const ir::Graph& body, const std::vector<Tensor>& inputs,
                     std::vector<Tensor>* outputs) = 0;
};

class InferContext {
 public:
  InferContext(const ir::Node& node, const ir::Graph& graph, int64_t opset)
      : node_(node), graph_(graph), opset_(opset) {}

  const ir::Node& node() const { return node_; }
  const ir::Graph& graph() const { return graph_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool has_input(int i) const { return i >= 0 && i < num_inputs() && input_types_[i] != nullptr; }
  // A missing input (omitted, or absent from a malformed model) reads as an undefined, rank-0
  // type, so an infer function rejects it through its ordinary dtype and rank checks.
  DType input_dtype(int i) const { return input_type(i).dtype; }
  const Dims& input_dims(int i) const { return input_type(i).dims; }
  int input_rank(int i) const { return static_cast<int>(input_type(i).dims.size()); }
  const ir::TypeInfo& input_type(int i) const {
    static const ir::TypeInfo kMissing;
    return has_input(i) ? *input_types_[i] : kMissing;
  }
  // The input's data when known now; nullptr otherwise.
  const Tensor* input_value(int i) const {
    return i >= 0 && i < static_cast<int>(input_values_.size()) ? input_values_[i] : nullptr;
  }

  // Outputs beyond the node's count are ignored (a malformed node may declare fewer).
  void set_output(int i, DType t, Dims d) {
    if (i >= 0 && i < static_cast<int>(outputs_.size()))
      outputs_[i] = ir::TypeInfo::Tensor(t, std::move(d));
  }
  void set_output_type(int i, ir::TypeInfo t) {
    if (i >= 0 && i < static_cast<int>(outputs_.size())) outputs_[i] = std::move(t);
  }
  void set_output_dynamic(int i, DType t) {
    if (i < 0 || i >= static_cast<int>(outputs_.size())) return;
    outputs_[i] = ir::TypeInfo{};
    outputs_[i].dtype = t;
  }
  // An error that names this node.
  Status error(const std::string& msg) const { return Error(node_.Label(graph_) + ": " + msg); }

  // Used by the executor and shape inference to set the context up and read results.
  std::vector<const ir::TypeInfo*> input_types_;
  std::vector<const Tensor*> input_values_;
  std::vector<ir::TypeInfo> outputs_;

 private:
  const ir::Node& node_;
  const ir::Graph& graph_;
  int64_t opset_;
};

class ComputeContext {
 public:
  ComputeContext(const ir::Node& node, const ir::Graph& graph, int64_t opset)
      : node_(node), graph_(graph), opset_(opset) {}

  const ir::Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  const Tensor& input(int i) const { return *inputs_[i]; }
  // True when the model uses output i (an omitted optional output is still allocated).
  bool output_used(int i) const { return node_.outputs[i] >= 0; }
  // An index past the node's outputs (a malformed node declaring too few) gets a scratch
  // tensor that is dropped, rather than memory the kernel does not own.
  Tensor& output(int i) {
    if (i >= 0 && i < static_cast<int>(outputs_.size())) return *outputs_[i];
    overflow_.emplace_back();
    return overflow_.back();
  }
  // For outputs that infer marked dynamic.
  Tensor& allocate_output(int i, DType t, Dims d) {
    Tensor& o = output(i);
    o = Tensor(t, std::move(d));
    return o;
  }
  SubgraphRunner& subgraphs() const { return *subgraphs_; }
  int threads() const { return threads_; }
  // Bytes of optional working memory a kernel may take for speed (oneDNN's Winograd scratchpad
  // and transformed weights), so that a small model's peak stays near its weights and plan;
  // 0: no limit (one-off runs, constant folding).
  int64_t scratch_budget() const { return scratch_budget_; }
  // This node's state slot; null where the caller keeps none (constant folding, one-off runs).
  std::unique_ptr<NodeState>* state() const { return state_; }
  // True when input i is a constant of the graph (an initializer): its bytes, at the same
  // address, do not change while the state slot lives.
  bool input_constant(int i) const {
    return i >= 0 && i < static_cast<int>(input_constant_.size()) && input_constant_[i];
  }
  // True when the executor keeps input / output i channels-last
  // (ops/channels_last.h) instead of the ONNX one; only for nodes CanRunChannelsLast accepts.
  bool input_channels_last(int i) const {
    return i >= 0 && i < static_cast<int>(input_channels_last_.size()) && input_channels_last_[i];
  }
  bool output_channels_last(int i) const {
    return i >= 0 && i < static_cast<int>(output_channels_last_.size()) && output_channels_last_[i];
  }
  // Channels per pixel of the memory channels-last output i sits in: more than its own where it
  // is a slice of a wider tensor (CanWriteChannelsLastInterleaved), else 0 (dense).
  int64_t output_pixel_channels(int i) const {
    return i >= 0 && i < static_cast<int>(output_pixel_channels_.size()) ? output_pixel_channels_[i]
                                                                         : 0;
  }
  Status error(const std::string& msg) const { return Error(node_.Label(graph_) + ": " + msg); }

  // Set up by the executor.
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor*> outputs_;
  SubgraphRunner* subgraphs_ = nullptr;
  int threads_ = 1;
  int64_t scratch_budget_ = 0;
  std::unique_ptr<NodeState>* state_ = nullptr;
  std::vector<bool> input_constant_, input_channels_last_, output_channels_last_;
  std::vector<int64_t> output_pixel_channels_;

 private:
  std::deque<Tensor> overflow_;
  const ir::Node& node_;
  const ir::Graph& graph_;
  int64_t opset_;
};

using InferFn = std::function<Status(InferContext&)>;
using ComputeFn = std::function<Status(ComputeContext&)>;

struct OpSchema {
  std::string domain;
  std::string op_type;
  InferFn infer;
  ComputeFn compute;
  // Leading inputs that must be present; checked before infer so kernels never see them missing.
  int required_inputs = 1;
  // The kernel writes every element of every output it is given, so the executor need not clear
  // them first (the others may accumulate into theirs).
  bool writes_whole_outputs = false;
  // Infer depends on the inputs' types and dims only, never on their values, so the executor
  // may reuse its result while they stay the same.
  bool infer_from_types_only = false;
};

// `infer` behind a check that no input or output is a string tensor (or a sequence of them): what
// the registry gives every op without kTakesStrings (ops/op_traits.h).
InferFn RefuseStrings(InferFn infer);
// `infer` and `compute` of a kMovesElements op run on string inputs through UINT64 stand-ins, the
// numbers of their elements; string outputs take the strings their stand-ins number.
InferFn MoveStringsByIndex(InferFn infer);
ComputeFn MoveStringsByIndex(ComputeFn compute);

// Infer and compute see this many outputs beyond the node's own, so a kernel that writes an
// output a malformed node omits writes into scratch instead of through a null pointer.
constexpr int kScratchOutputs = 4;

// The error for a node that lacks one of its schema's required inputs (or has no output), or OK.
Status CheckRequiredInputs(const OpSchema& schema, const ir::Node& node, const ir::Graph& graph);

class OpRegistry {
 public:
  // The registry with every family of kernels registered (built once, then read-only).
  static const OpRegistry& Global();

  void Register(const std::string& op_type, InferFn infer, ComputeFn compute,
                const std::string& domain = "");
  // Marks a registered op whose kernel writes every element of every output (every path; a wrong
  // mark shows in the poison conformance runs), so the executor does not clear them first;
  // `types_only`: its shape rule reads no input values either (OpSchema::infer_from_types_only).
  void MarkWritesWholeOutputs(const std::string& op_type, bool types_only,
                              const std::string& domain = "");
  const OpSchema* Find(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> ops_;
};

// One registration function per family (one file each in this folder).
void RegisterElementwiseOps(OpRegistry& r);
void RegisterActivationOps(OpRegistry& r);
void RegisterShapeOps(OpRegistry& r);
void RegisterIndexingOps(OpRegistry& r);
void RegisterConvOps(OpRegistry& r);
// FusedConv's `activation` and `activation_params` attributes of the node as PostOps (also
// com.kiln ConvGlobalPool's); an error naming the ones it takes otherwise.
struct PostOps;
Status ActivationOf(ComputeContext& ctx, PostOps* post);
void RegisterConvGlobalPoolOps(OpRegistry& r);
void RegisterPoolOps(OpRegistry& r);
void RegisterNormalizationOps(OpRegistry& r);
void RegisterMatMulOps(OpRegistry& r);
void RegisterReduceOps(OpRegistry& r);
void RegisterSortOps(OpRegistry& r);
void RegisterQuantizeOps(OpRegistry& r);
void RegisterQuantizeIntegerOps(OpRegistry& r);
void RegisterResizeOps(OpRegistry& r);
void RegisterMiscOps(OpRegistry& r);
void RegisterControlFlowOps(OpRegistry& r);
void RegisterRecurrentOps(OpRegistry& r);
void RegisterSequenceOps(OpRegistry& r);
void RegisterTextOps(OpRegistry& r);
void RegisterImageOps(OpRegistry& r);

}  // namespace kiln::ops
