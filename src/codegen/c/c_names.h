// Names in generated C: ONNX names made valid, collision-free C identifiers, and C spellings of
// element types and literals.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "ir/dtype.h"
#include "support/status.h"

namespace kiln::codegen::c {

// Hands out identifiers within one scope: each ONNX name becomes letters, digits and '_' (other
// characters -> '_', a leading digit or a C keyword gets a prefix), and a name already taken gets
// a numeric suffix. The same calls in the same order give the same names.
class NameScope {
 public:
  std::string Take(const std::string& onnx_name, const std::string& prefix = "");
  void Reserve(const std::string& identifier) { taken_.insert(identifier); }

 private:
  std::set<std::string> taken_;
};

// Calls fn(pos, len) for every identifier token of C text, outside comments, string and
// character literals and numbers (1e5f, 0x1p-3).
void ForEachIdentifier(const std::string& text,
                       const std::function<void(size_t pos, size_t len)>& fn);
// The identifier tokens of C text (ForEachIdentifier's), each once.
std::set<std::string> Identifiers(const std::string& text);
// text with the identifier tokens that are keys of `names` replaced by their values.
std::string RenameIdentifiers(const std::string& text,
                              const std::map<std::string, std::string>& names);

// The C element type of a dtype ("float", "int64_t", ...; bool is uint8_t, float16/bfloat16
// are uint16_t bit patterns); "" for types the C backend cannot hold.
std::string CType(DType t);
// A short suffix for kernel names: f32, f64, i8, ..., u64, b (bool), f16, bf16.
std::string CSuffix(DType t);
// True when NAME can be the model name (a C identifier that does not start with "kiln_").
bool IsValidModelName(const std::string& name);
// IsValidModelName's verdict as the one-line error `--name` gets.
Status CheckModelName(const std::string& name);
// C string literal with every non-printable or non-ASCII byte escaped.
std::string CStringLiteral(const std::string& s);
// C literal for an element at p of type t: exact for every value (floats use enough digits to
// round-trip, infinities and NaN use <math.h> macros, INT64_MIN is spelled as an expression).
std::string CLiteral(DType t, const void* p);
// A number as a C literal of type t (for constants computed by the emitter).
std::string CNumber(DType t, double v);
// s in upper case (macro names from the model name).
std::string Upper(std::string s);
// Text safe inside a C comment: no "*/", no control characters, no trigraph-starting "??";
// longer than max_len: cut, with "...".
std::string CommentText(const std::string& s, size_t max_len = 160);
// The last component of a path ("" for ""): what generated files say of a source file, so that
// their bytes do not depend on the folder kiln ran in.
std::string FileName(const std::string& path);

// The opening of a generated file's banner comment, without its closing " */": what the file
// is, the kiln version, the command line (when known) and the model (`model`: its file name and
// SHA-256, or what the caller names it).
std::string BannerOpening(const std::string& what, const std::string& kiln_version,
                          const std::string& command_line, const std::string& model);

// KILN_OK and the KILN_ERROR_* codes of the generated C API (DESIGN.md 2.4), as guarded #defines;
// the C and the CUDA headers declare the same codes.
extern const char kStatusCodeDefines[];

}  // namespace kiln::codegen::c
