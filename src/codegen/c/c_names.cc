#include "codegen/c/c_names.h"

#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ir/half.h"

namespace kiln::codegen::c {
namespace {

bool IsKeyword(const std::string& s) {
  static const std::set<std::string> kWords = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
      "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
      "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
      "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
      // Names the generated code itself uses inside functions.
      "arena", "inputs", "outputs", "workspace", "index", "data", "rc", "i", "j", "k", "n",
      // Common macros and library names that would change meaning.
      "NULL", "EOF", "INFINITY", "NAN", "errno", "assert", "main", "exp", "log", "sqrt", "memcpy",
      "memset", "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
      "uint32_t", "uint64_t", "uintptr_t", "bool", "true", "false", "isnan", "isinf", "isfinite",
      "isnormal", "signbit", "fpclassify", "HUGE_VAL", "HUGE_VALF", "offsetof"};
  return kWords.count(s) > 0;
}

}  // namespace

std::string NameScope::Take(const std::string& onnx_name, const std::string& prefix) {
  std::string id = prefix;
  for (unsigned char ch : onnx_name)
    id += std::isalnum(ch) && ch < 128 ? static_cast<char>(ch) : '_';
  if (id.empty()) id = "t";
  if (std::isdigit(static_cast<unsigned char>(id[0]))) id = "t" + id;
  if (id[0] == '_') id = "t" + id;  // leading underscores are reserved in C
  if (IsKeyword(id)) id += "_";
  if (id.size() > 60) id.resize(60);  // keep identifiers readable and inside compiler limits
  std::string base = id;
  for (int k = 2; taken_.count(id); ++k) id = base + "_" + std::to_string(k);
  taken_.insert(id);
  return id;
}

void ForEachIdentifier(const std::string& text,
                       const std::function<void(size_t pos, size_t len)>& fn) {
  auto word = [&](size_t i) {
    return i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_');
  };
  for (size_t i = 0; i < text.size();) {
    const char ch = text[i];
    if (text.compare(i, 2, "/*") == 0) {
      const size_t e = text.find("*/", i + 2);
      i = e == std::string::npos ? text.size() : e + 2;
    } else if (text.compare(i, 2, "//") == 0) {
      const size_t e = text.find('\n', i);
      i = e == std::string::npos ? text.size() : e;
    } else if (ch == '"' || ch == '\'') {
      for (++i; i < text.size() && text[i] != ch; ++i)
        if (text[i] == '\\') ++i;
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(ch)) ||
               (ch == '.' && i + 1 < text.size() &&
                std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      // A preprocessing number: digits, letters, '_', '.', and a sign after an exponent.
      for (++i; i < text.size(); ++i) {
        const char c = text[i];
        if ((c == '+' || c == '-') && std::strchr("eEpP", text[i - 1])) continue;
        if (!word(i) && c != '.') break;
      }
    } else if (word(i)) {
      const size_t start = i;
      while (word(i)) ++i;
      fn(start, i - start);
    } else {
      ++i;
    }
  }
}

std::set<std::string> Identifiers(const std::string& text) {
  std::set<std::string> idents;
  ForEachIdentifier(text, [&](size_t pos, size_t len) { idents.insert(text.substr(pos, len)); });
  return idents;
}

std::string RenameIdentifiers(const std::string& text,
                              const std::map<std::string, std::string>& names) {
  std::string out;
  size_t done = 0;
  ForEachIdentifier(text, [&](size_t pos, size_t len) {
    auto it = names.find(text.substr(pos, len));
    if (it == names.end()) return;
    out.append(text, done, pos - done);
    out += it->second;
    done = pos + len;
  });
  return out + text.substr(done);
}

std::string CType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kInt8:
      return "int8_t";
    case DType::kInt16:
      return "int16_t";
    case DType::kInt32:
      return "int32_t";
    case DType::kInt64:
      return "int64_t";
    case DType::kUInt8:
      return "uint8_t";
    case DType::kUInt16:
      return "uint16_t";
    case DType::kUInt32:
      return "uint32_t";
    case DType::kUInt64:
      return "uint64_t";
    case DType::kBool:
      return "uint8_t";
    case DType::kFloat16:
      return "uint16_t";
    case DType::kBFloat16:
      return "uint16_t";
    default:
      return "";
  }
}

std::string CSuffix(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
    case DType::kInt8:
      return "i8";
    case DType::kInt16:
      return "i16";
    case DType::kInt32:
      return "i32";
    case DType::kInt64:
      return "i64";
    case DType::kUInt8:
      return "u8";
    case DType::kUInt16:
      return "u16";
    case DType::kUInt32:
      return "u32";
    case DType::kUInt64:
      return "u64";
    case DType::kBool:
      return "b";
    case DType::kFloat16:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    default:
      return "";
  }
}

bool IsValidModelName(const std::string& name) {
  // "model" would make kiln_model_descriptor both the type and the descriptor.
  if (name.empty() || name.size() > 40 || name.rfind("kiln", 0) == 0 || name == "model")
    return false;
  if (!std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (unsigned char ch : name)
    if (!(std::isalnum(ch) || ch == '_') || ch >= 128) return false;
  return !IsKeyword(name);
}

Status CheckModelName(const std::string& name) {
  if (IsValidModelName(name)) return OkStatus();
  return Error("--name '" + name +
               "': the model name must be a C identifier (letters, digits, '_', starting with a "
               "letter, at most 40 characters, not starting with 'kiln', not 'model' and not a C "
               "keyword)");
}

std::string CStringLiteral(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch >= 32 && ch < 127 && ch != '?') {  // '?' avoids trigraphs
      out += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", ch);
      out += buf;
    }
  }
  return out + "\"";
}

namespace {

std::string FloatLiteral(double v, bool is_float) {
  if (std::isnan(v)) return is_float ? "NAN" : "(double)NAN";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (is_float ? "INFINITY" : "(double)INFINITY");
  char buf[40];
  std::snprintf(buf, sizeof(buf), is_float ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  if (is_float) s += "f";
  return s;
}

}  // namespace

std::string CLiteral(DType t, const void* p) {
  char buf[48];
  switch (t) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return FloatLiteral(v, true);
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return FloatLiteral(v, false);
    }
    case DType::kInt8:
      return std::to_string(*static_cast<const int8_t*>(p));
    case DType::kInt16:
      return std::to_string(*static_cast<const int16_t*>(p));
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      if (v == INT32_MIN) return "(-2147483647 - 1)";
      return std::to_string(v);
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
      std::snprintf(buf, sizeof(buf), "%" PRId64 "LL", v);
      return buf;
    }
    case DType::kUInt8:
      return std::to_string(*static_cast<const uint8_t*>(p));
    case DType::kBool:
      return std::to_string(*static_cast<const uint8_t*>(p) ? 1 : 0);
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      std::snprintf(buf, sizeof(buf), "0x%04x", v);
      return buf;
    }
    case DType::kUInt32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return std::to_string(v) + "u";
    }
    case DType::kUInt64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      std::snprintf(buf, sizeof(buf), "%" PRIu64 "ULL", v);
      return buf;
    }
    default:
      return "0";
  }
}

std::string CNumber(DType t, double v) {
  switch (t) {
    case DType::kFloat32: {
      float f = static_cast<float>(v);
      return CLiteral(t, &f);
    }
    case DType::kFloat64:
      return CLiteral(t, &v);
    case DType::kInt64: {
      int64_t i = static_cast<int64_t>(v);
      return CLiteral(t, &i);
    }
    case DType::kUInt64: {
      uint64_t i = static_cast<uint64_t>(v);
      return CLiteral(t, &i);
    }
    default: {
      int64_t i = static_cast<int64_t>(v);
      return "(" + CType(t) + ")" + CLiteral(DType::kInt64, &i);
    }
  }
}

std::string Upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::string FileName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string CommentText(const std::string& s, size_t max_len) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch < 32 || ch == 127) ch = ' ';
    if (ch == '/' && !out.empty() && out.back() == '*') out += ' ';
    if (ch == '?' && !out.empty() && out.back() == '?') out += ' ';
    out += static_cast<char>(ch);
  }
  if (out.size() > max_len) out = out.substr(0, max_len) + "...";
  return out;
}

std::string BannerOpening(const std::string& what, const std::string& kiln_version,
                          const std::string& command_line, const std::string& model) {
  std::string s = "/* " + what + "\n * Generated by kiln " + kiln_version + ". Do not edit.\n";
  if (!command_line.empty()) s += " * command: " + CommentText(command_line, 400) + "\n";
  return s + " * model:   " + CommentText(model, 400);
}

const char kStatusCodeDefines[] = R"(#ifndef KILN_OK
#define KILN_OK 0
#define KILN_ERROR_NULL_ARGUMENT 1        /* inputs, outputs or workspace is NULL */
#define KILN_ERROR_NULL_TENSOR 2          /* an input or output pointer is NULL */
#define KILN_ERROR_NULL_WORKSPACE 3       /* workspace->arena is NULL */
#define KILN_ERROR_MISALIGNED_WORKSPACE 4 /* workspace->arena is not WORKSPACE_ALIGNMENT-aligned */
#define KILN_ERROR_INVALID_INDEX 5        /* set_input / set_output: no tensor at that index */
#define KILN_ERROR_INVALID_DATA 6         /* an index in the input data is out of range */
#endif
)";

}  // namespace kiln::codegen::c
