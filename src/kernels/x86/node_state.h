// The state slot of one node, which the executor owns and the kernels fill (ops/op.h).
#pragma once

#include <string>

namespace kiln::ops {

// What a kernel keeps between runs of one node (a prepared library primitive, weights laid out
// once): the executor owns one slot per node, keeps it for its own lifetime and never runs the
// same node twice at once. A kernel must check that what it stored still fits its inputs.
struct NodeState {
  virtual ~NodeState() = default;
  // The kernel the state runs, for profiles ("" when it does not say).
  virtual std::string Kernel() const { return ""; }
  // True when the state holds constant input `i` in a layout of its own (weights packed or
  // transformed once) and, while the node's inputs keep the shapes it was made for, reads only
  // that: it compares the input's address with the one it was made from, never its bytes. The
  // executor then drops the original bytes (Executor::Run).
  virtual bool HoldsConstant(int /*i*/) const { return false; }
};

}  // namespace kiln::ops
