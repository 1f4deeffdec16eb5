// The body of a generated function as an emitter writes it, for the C and the CUDA emitters
// alike: lines at the current depth (two spaces a level, under the function's own level),
// scopes opened by "head {" and closed by "}", fresh local names.
#pragma once

#include <string>

namespace kiln::codegen::c {

class CodeWriter {
 public:
  // depth: the levels the body starts under its function's (a CUDA node's block is one).
  explicit CodeWriter(int depth = 0) : depth_(depth) {}

  // Appends a line at the current depth.
  void Line(const std::string& text) { body_ += std::string(2 * depth_ + 2, ' ') + text + "\n"; }
  // `head {` (a bare block for ""), then one level deeper until Close(), which writes `}` and
  // `tail` (";", " else").
  void Open(const std::string& head) {
    Line(head.empty() ? "{" : head + " {");
    ++depth_;
  }
  void Close(const std::string& tail = "") {
    --depth_;
    Line("}" + tail);
  }
  // One level deeper or shallower without a brace (a brace the emitter writes itself).
  void Indent() { ++depth_; }
  void Dedent() { --depth_; }
  // A fresh local identifier: `prefix` and a number (t0, t1, ...; k0, ... per prefix letter).
  std::string Fresh(char prefix) {
    int& n = prefix == 't' ? temps_ : prefix == 'k' ? vars_ : others_;
    return std::string(1, prefix) + std::to_string(n++);
  }

  const std::string& body() const { return body_; }

 private:
  std::string body_;
  int depth_;
  int temps_ = 0, vars_ = 0, others_ = 0;
};

}  // namespace kiln::codegen::c
