// On-device verification: NAME_verify.c, a C99 program (only <stdio.h> beyond the model's own
// header) that runs test sets through a model kiln generated, with the inputs and expected
// outputs embedded as const arrays, compares every output element
// (|got - expected| <= atol + rtol * |expected| for floating types, equality otherwise), prints a
// line per test set and a summary, and exits 0 when every set passes, 1 on a mismatch, 2 when
// run() returns an error. The tolerances are macros (KILN_VERIFY_RTOL / KILN_VERIFY_ATOL) that
// -D overrides.
//
// Takes plain tensors: the caller (kiln compile --bundle) reads them from a .bpte.
#pragma once

#include <string>
#include <vector>

#include "codegen/c/c_backend.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace kiln::codegen::c {

struct VerifyTestSet {
  std::vector<Tensor> inputs;    // one per interface input, graph order
  std::vector<Tensor> expected;  // one per interface output
};

struct VerifyOptions {
  std::string name;          // the model name given to CompileToC
  std::string source;        // where the test sets come from (a comment)
  std::string command_line;  // recorded in the header comment
  std::string kiln_version;
  double rtol = 1e-4, atol = 1e-5;
};

// Fails, naming the test set and tensor, when a set does not match the compiled interface in
// count, element type or dims.
Expected<GeneratedFile> GenerateVerifyMain(const CompiledInterface& iface,
                                           const std::vector<VerifyTestSet>& sets,
                                           const VerifyOptions& options);

}  // namespace kiln::codegen::c
