// Small graph-editing helpers the optimization passes share: who reads a value, rewiring readers
// from one value to another (node inputs, subgraph captures, graph outputs), removing nodes and
// the dead-node sweep. None of them checks the graph; the passes run ir::Verify at the end.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// How many times each value of g is read: by node inputs, by subgraph captures (through the
// owning node's implicit_inputs) and by g's outputs.
std::vector<int> ReadCounts(const ir::Graph& g);

// 1 for every value that is one of g's outputs.
std::vector<char> OutputMask(const ir::Graph& g);

// Who reads each value of g (for the fusion passes): ReadCounts, OutputMask and, per value, the
// nodes reading it as an input (each node once, in node order).
struct ValueReaders {
  explicit ValueReaders(const ir::Graph& g);
  std::vector<int> reads;
  std::vector<char> is_output;
  std::vector<std::vector<int>> nodes;
  // The node that alone reads v (read once, by a node input; v not a graph output), or -1.
  int Sole(int v) const;
};

// True for a node of the default ONNX domain ("" or "ai.onnx").
bool IsDefaultDomain(const ir::Node& n);

// True for a value whose bytes the compiler can rely on: a constant that is not also a graph
// input (an initializer listed as an input is a default a caller may override in ONNX).
bool IsFixedConstant(const ir::Graph& g, int v);

// True when a node whose outputs nobody reads may be dropped: no subgraphs and no side effects.
// Random draws count as pure here (an unread draw changes nothing), Multinomial and Bernoulli
// are kept as fold_constants always did.
bool IsRemovableWhenUnread(const ir::Node& n);

// Calls f on every subgraph held in n's attributes.
void ForEachSubgraph(ir::Node& n, const std::function<void(ir::Graph&)>& f);
void ForEachSubgraph(const ir::Node& n, const std::function<void(const ir::Graph&)>& f);

// Rewires readers of values: Merge(from, to) makes every reader of `from` read `to` when Apply
// runs. Chains resolve (a -> b, b -> c gives a -> c). Apply rewrites node inputs, implicit inputs,
// the `outer` side of the captures of every direct subgraph, and, when `outputs` is true, g's
// outputs (a subgraph's outputs are positional, so they may be renamed; the main graph's names
// are its interface and are left to the caller).
class ValueRewirer {
 public:
  explicit ValueRewirer(const ir::Graph& g);
  int Find(int v);
  void Merge(int from, int to);
  bool empty() const { return merges_ == 0; }
  void Apply(ir::Graph& g, bool outputs);

 private:
  std::vector<int> to_;
  int merges_ = 0;
};

// Makes node `n`'s output slot `slot` write value `v` instead of its current value, which loses
// its producer and whose readers move to v. For a node whose result is a main-graph output
// reached through a removable node (the Identity at the end of an exported graph): the producer
// writes the output value itself. The caller removes v's old producer.
void RetargetOutput(ir::Graph& g, int n, int slot, int v, ValueRewirer& rewire);

// Drops the nodes whose keep entry is 0 and renumbers every producer.
void CompactNodes(ir::Graph& g, const std::vector<char>& keep);

// Marks (keep = 0) every node whose outputs end up unread once the other dead nodes are gone and
// that IsRemovableWhenUnread allows; returns how many it marked. Last to first, so a whole dead
// chain goes in one sweep. Nodes already marked count as gone.
int MarkDeadNodes(const ir::Graph& g, std::vector<char>& keep);

// The value of a one-element float32 fixed constant (IsFixedConstant), if v is one.
std::optional<float> ScalarFloatConstant(const ir::Graph& g, int v);

// The float32 fixed constant behind input i of n, 1-D with exactly `count` elements, or null
// (a per-channel or per-group parameter).
const Tensor* VectorFloatInput(const ir::Graph& g, const ir::Node& n, size_t i, int64_t count);

// The fusion passes' pattern helpers. A default-domain node `op` with two present inputs and one
// present output:
bool IsOnnxBinary(const ir::Node& n, const char* op);
// For a binary node n with v as one operand: the other operand, or -1.
int OtherOperand(const ir::Node& n, int v);
// c is a constant within 1e-5 (relative) of `want`.
bool Near(std::optional<float> c, double want);
// The bounds of a default-domain Clip node (attributes before opset 11, constant scalar inputs
// after; an absent bound is infinite), or false when they are not constants.
bool ClipBounds(const ir::Graph& g, const ir::Node& clip, int64_t opset, float* lo, float* hi);

// A fusion tried at node i of g: it rewrites g, marking the nodes it replaces (keep = 0), and
// returns true, or changes nothing and returns false. `readers` is g as the sweep began.
using FuseAtFn =
    std::function<bool(ir::Graph& g, const ValueReaders& readers, std::vector<char>& keep, int i)>;

// The sweep of the fusion passes: fuse_at at every node of g's subgraphs (innermost first) and
// then at every node of g still kept, in order; the marked nodes go after each graph's sweep.
// True if any fusion was made.
bool FuseEachNode(ir::Graph& g, const FuseAtFn& fuse_at);

// What a pass returns: whether it changed g, once g still verifies (ir::Verify).
Expected<bool> VerifiedChange(const ir::Graph& g, bool changed);

// True when neither `last` nor any node of `gone` is marked (keep = 0) yet: none is the place of
// another fusion in this sweep.
bool ChainIsFree(const std::vector<char>& keep, const std::vector<int>& gone, int last);
// Puts `fused` in the place of a matched chain's last node `last`, with its name and output; the
// nodes of `gone` other than last are marked (keep = 0) for CompactNodes and lose their outputs'
// producer. Check ChainIsFree first.
void ReplaceChain(ir::Graph& g, std::vector<char>& keep, const std::vector<int>& gone, int last,
                  ir::Node fused);

// Replaces a matched chain by one node `op` (in `domain`) reading x alone: named as the chain's
// last node `last`, writing its output, in its place; the nodes of `gone` other than last are
// marked (keep = 0) for CompactNodes. False, changing nothing, when one of them is already
// marked (the place of another fusion in this sweep).
bool ReplaceChainWithUnary(ir::Graph& g, std::vector<char>& keep, const std::vector<int>& gone,
                           int last, int x, const std::string& op, const std::string& domain);

// Swish (SiLU) as exporters write it: Sigmoid(v) -> s and Mul(v, s) in either order, where the
// two are v's only readers and the Mul is s's. Returns the Mul (or -1).
int SwishMul(const ir::Graph& g, int v, const ValueReaders& r);

// A value name not yet used in g, `base` when it is free.
std::string UniqueValueName(const ir::Graph& g, const std::string& base);

// A new constant value holding t, named `base` (made unique).
int AddConstant(ir::Graph& g, const std::string& base, Tensor t);

}  // namespace kiln::passes
