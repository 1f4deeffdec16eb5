#include "codegen/c/verify_main.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "codegen/c/c_names.h"

namespace kiln::codegen::c {
namespace {

std::string Comment(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size() && o.size() < 400; ++i) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch == '*' && i + 1 < s.size() && s[i + 1] == '/') {
      o += "* /";
      ++i;
    } else if (ch == '\n' || ch == '\r' || ch == '\t') {
      o += ' ';
    } else if (ch >= 32 && ch < 127 && ch != '?') {  // '?' avoids trigraphs
      o += static_cast<char>(ch);
    } else {
      o += '_';
    }
  }
  return o;
}

std::string TypeText(DType t, const Dims& dims) {
  return std::string(DTypeName(t)) + DimsToString(dims);
}

bool IsFloating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

// The shortest %g spelling that reads back as v.
std::string Num(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// `static const T sym[n] = {...};` with the tensor's elements as exact literals.
std::string Array(const std::string& sym, const Tensor& t, const std::string& what,
                  bool* needs_math) {
  const size_t esize = DTypeSize(t.dtype());
  const int64_t n = t.size();
  std::string s = "/* " + what + " */\nstatic const " + CType(t.dtype()) + " " + sym + "[" +
                  std::to_string(std::max<int64_t>(n, 1)) + "] = {";
  if (n == 0) return s + "0};\n";
  const uint8_t* p = static_cast<const uint8_t*>(t.raw());
  const int per_line = esize >= 4 ? 6 : 12;
  for (int64_t i = 0; i < n; ++i) {
    if (i % per_line == 0) s += "\n   ";
    std::string lit = CLiteral(t.dtype(), p + i * esize);
    if (lit.find("NAN") != std::string::npos || lit.find("INFINITY") != std::string::npos)
      *needs_math = true;
    s += " " + lit + (i + 1 < n ? "," : "");
  }
  return s + "};\n";
}

// The C helpers: the tolerance test and the statistics, then one compare function per dtype used.
std::string Helpers(const std::set<DType>& dtypes) {
  std::string s = R"(struct kiln_verify_stats {
  double max_abs, max_rel; /* over finite differences; rel over non-zero expected values */
  long bad, first_bad;     /* elements outside the tolerance, and the first of them */
  double bad_got, bad_want;
};

/* Records element i: its error and whether it is within the tolerance. */
static void kiln_verify_add(struct kiln_verify_stats *s, long i, double got, double want, int ok) {
  double d = got > want ? got - want : want - got;
  if (d == d && d - d == 0.0) {
    if (d > s->max_abs) s->max_abs = d;
    if (want != 0.0 && d / (want < 0.0 ? -want : want) > s->max_rel) s->max_rel = d / (want < 0.0 ? -want : want);
  }
  if (!ok && s->bad++ == 0) {
    s->first_bad = i;
    s->bad_got = got;
    s->bad_want = want;
  }
}
)";
  bool floating = false;
  for (DType t : dtypes) floating = floating || IsFloating(t);
  if (floating)
    s += R"(
/* |got - want| <= atol + rtol * |want|; NaN matches NaN, an infinity only the same infinity. */
static int kiln_verify_close(double got, double want) {
  double d;
  if (got == want || (got != got && want != want)) return 1;
  if (got != got || want != want || got - got != 0.0 || want - want != 0.0) return 0;
  d = got > want ? got - want : want - got;
  return d <= KILN_VERIFY_ATOL + KILN_VERIFY_RTOL * (want < 0.0 ? -want : want);
}
)";
  if (dtypes.count(DType::kFloat16) || dtypes.count(DType::kBFloat16))
    s += R"(
union kiln_verify_bits {
  uint32_t u;
  float f;
};
)";
  if (dtypes.count(DType::kFloat16))
    s += R"(
static double kiln_verify_half(uint16_t h) {
  union kiln_verify_bits v;
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (uint32_t)(h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) {
    v.u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0u) {
    v.u = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    double x = (double)m / 16777216.0; /* subnormal: m * 2^-24 */
    return sign ? -x : x;
  }
  return (double)v.f;
}
)";
  if (dtypes.count(DType::kBFloat16))
    s += R"(
static double kiln_verify_bfloat16(uint16_t h) {
  union kiln_verify_bits v;
  v.u = (uint32_t)h << 16;
  return (double)v.f;
}
)";
  for (DType t : dtypes) {
    std::string ct = CType(t), fn = "kiln_verify_cmp_" + CSuffix(t);
    std::string g = "g[i]", w = "w[i]", ok;
    if (t == DType::kFloat16) g = "kiln_verify_half(g[i])", w = "kiln_verify_half(w[i])";
    if (t == DType::kBFloat16) g = "kiln_verify_bfloat16(g[i])", w = "kiln_verify_bfloat16(w[i])";
    if (IsFloating(t)) {
      ok = "kiln_verify_close(a, b)";
    } else {
      ok = "g[i] == w[i]";
    }
    s += "\nstatic void " + fn +
         "(const void *got, const void *want, long n, struct kiln_verify_stats *s) {\n"
         "  const " +
         ct + " *g = (const " + ct + " *)got, *w = (const " + ct +
         " *)want;\n"
         "  long i;\n"
         "  for (i = 0; i < n; ++i) {\n"
         "    double a = (double)" +
         g + ", b = (double)" + w +
         ";\n"
         "    kiln_verify_add(s, i, a, b, " +
         ok +
         ");\n"
         "  }\n}\n";
  }
  return s;
}

// The error for test sets that do not fit the generated code's inputs and outputs, or OK.
Status CheckTestSets(const CompiledInterface& iface, const std::vector<VerifyTestSet>& sets) {
  auto check = [](const ir::Value& v, const Tensor& t, const std::string& where) -> Status {
    if (t.kind() != Tensor::Kind::kTensor || t.dtype() != v.type.dtype || t.dims() != v.type.dims)
      return Error(where + " '" + v.name + "': the generated code takes " +
                   TypeText(v.type.dtype, v.type.dims) + ", the test set holds " +
                   TypeText(t.dtype(), t.dims()));
    if (CType(t.dtype()).empty())
      return Error(where + " '" + v.name + "': element type " + std::string(DTypeName(t.dtype())) +
                   " has no C type");
    return OkStatus();
  };
  for (size_t k = 0; k < sets.size(); ++k) {
    std::string where = "test set " + std::to_string(k);
    if (sets[k].inputs.size() != iface.inputs.size() ||
        sets[k].expected.size() != iface.outputs.size())
      return Error(where + " has " + std::to_string(sets[k].inputs.size()) + " inputs and " +
                   std::to_string(sets[k].expected.size()) + " outputs; the generated code takes " +
                   std::to_string(iface.inputs.size()) + " and " +
                   std::to_string(iface.outputs.size()));
    for (size_t i = 0; i < iface.inputs.size(); ++i)
      KILN_RETURN_IF_ERROR(check(iface.inputs[i], sets[k].inputs[i], where + " input"));
    for (size_t i = 0; i < iface.outputs.size(); ++i)
      KILN_RETURN_IF_ERROR(check(iface.outputs[i], sets[k].expected[i], where + " output"));
  }
  return OkStatus();
}

// The test sets' input and expected-output arrays; sets *needs_math where they hold NaN or inf.
std::string TestData(const CompiledInterface& iface, const std::vector<VerifyTestSet>& sets,
                     bool* needs_math) {
  const size_t nin = iface.inputs.size(), nout = iface.outputs.size(), nsets = sets.size();
  std::string data;
  for (size_t k = 0; k < nsets; ++k) {
    data += "\n/* Test set " + std::to_string(k) + ". */\n";
    for (size_t i = 0; i < nin; ++i)
      data += Array("kiln_verify_set" + std::to_string(k) + "_in" + std::to_string(i),
                    sets[k].inputs[i],
                    "input " + std::to_string(i) + " '" + Comment(iface.inputs[i].name) +
                        "': " + TypeText(sets[k].inputs[i].dtype(), sets[k].inputs[i].dims()),
                    needs_math);
    for (size_t i = 0; i < nout; ++i)
      data += Array("kiln_verify_set" + std::to_string(k) + "_out" + std::to_string(i),
                    sets[k].expected[i],
                    "expected output " + std::to_string(i) + " '" + Comment(iface.outputs[i].name) +
                        "': " + TypeText(sets[k].expected[i].dtype(), sets[k].expected[i].dims()),
                    needs_math);
  }
  return data;
}

// Per set, the input and expected-output arrays; per output, its name, size, compare function
// and the buffer run() writes.
std::string OutputTables(const CompiledInterface& iface, size_t nsets, const std::string& upper) {
  const size_t nin = iface.inputs.size(), nout = iface.outputs.size();
  std::string s = "\n/* Outputs of run(), reused by every test set. */\n";
  for (size_t i = 0; i < nout; ++i)
    s += "static " + CType(iface.outputs[i].type.dtype) + " kiln_verify_out" + std::to_string(i) +
         "[" + std::to_string(std::max<int64_t>(NumElements(iface.outputs[i].type.dims), 1)) +
         "];\n";
  s += "static uint8_t kiln_verify_arena[KILN_" + upper + "_WORKSPACE_SIZE + KILN_" + upper +
       "_WORKSPACE_ALIGNMENT];\n\n";
  auto table = [&](const std::string& sym, const char* part, size_t count) {
    std::string t = "static const void *const " + sym + "[KILN_VERIFY_SETS][" +
                    std::to_string(std::max<size_t>(count, 1)) + "] = {\n";
    for (size_t k = 0; k < nsets; ++k) {
      t += "    {";
      for (size_t i = 0; i < count; ++i)
        t += std::string(i ? ", " : "") + "kiln_verify_set" + std::to_string(k) + part +
             std::to_string(i);
      if (count == 0) t += "0";
      t += k + 1 < nsets ? "},\n" : "}\n";
    }
    return t + "};\n";
  };
  s += table("kiln_verify_inputs", "_in", nin);
  s += table("kiln_verify_expected", "_out", nout);
  s += "\ntypedef void (*kiln_verify_cmp)(const void *, const void *, long, struct "
       "kiln_verify_stats *);\n";
  s += "static const struct {\n  const char *name;\n  long count;\n  kiln_verify_cmp cmp;\n  void "
       "*buffer;\n"
       "} kiln_verify_outputs[" +
       std::to_string(std::max<size_t>(nout, 1)) + "] = {\n";
  for (size_t i = 0; i < nout; ++i)
    s += "    {" + CStringLiteral(iface.outputs[i].name) + ", " +
         std::to_string(NumElements(iface.outputs[i].type.dims)) + "L, kiln_verify_cmp_" +
         CSuffix(iface.outputs[i].type.dtype) + ", kiln_verify_out" + std::to_string(i) + "}" +
         (i + 1 < nout ? ",\n" : "\n");
  if (nout == 0) s += "    {0, 0L, 0, 0}\n";
  s += "};\n\n";
  return s;
}

// main(): every set through run(), one line each, and the summary.
std::string MainFunction(const std::string& n, const std::string& upper) {
  return "int main(void) {\n"
         "  struct kiln_" +
         n +
         "_inputs in;\n"
         "  struct kiln_" +
         n +
         "_outputs out;\n"
         "  struct kiln_" +
         n +
         "_workspace ws;\n"
         "  int set, k, passed = 0, failed = 0, errors = 0;\n"
         "  size_t mis = (size_t)((uintptr_t)kiln_verify_arena % KILN_" +
         upper +
         "_WORKSPACE_ALIGNMENT);\n"
         "  ws.arena = kiln_verify_arena + (mis ? KILN_" +
         upper +
         "_WORKSPACE_ALIGNMENT - mis : 0);\n"
         "  for (set = 0; set < KILN_VERIFY_SETS; ++set) {\n"
         "    struct kiln_verify_stats st[KILN_VERIFY_OUTPUTS + 1];\n"
         "    int32_t rc = KILN_OK;\n"
         "    int bad = 0;\n"
         "    for (k = 0; k < KILN_VERIFY_INPUTS && rc == KILN_OK; ++k)\n"
         "      rc = kiln_" +
         n +
         "_set_input(&in, k, (void *)kiln_verify_inputs[set][k]);\n"
         "    for (k = 0; k < KILN_VERIFY_OUTPUTS && rc == KILN_OK; ++k)\n"
         "      rc = kiln_" +
         n +
         "_set_output(&out, k, kiln_verify_outputs[k].buffer);\n"
         "    if (rc == KILN_OK) rc = kiln_" +
         n +
         "_run(&in, &out, &ws);\n"
         "    if (rc != KILN_OK) {\n"
         "      printf(\"test set %d: ERROR: run() returned %d\\n\", set, (int)rc);\n"
         "      ++errors;\n"
         "      continue;\n"
         "    }\n"
         "    for (k = 0; k < KILN_VERIFY_OUTPUTS; ++k) {\n"
         "      st[k].max_abs = st[k].max_rel = st[k].bad_got = st[k].bad_want = 0.0;\n"
         "      st[k].bad = st[k].first_bad = 0;\n"
         "      kiln_verify_outputs[k].cmp(kiln_verify_outputs[k].buffer, "
         "kiln_verify_expected[set][k],\n"
         "                                 kiln_verify_outputs[k].count, &st[k]);\n"
         "      if (st[k].bad) bad = 1;\n"
         "    }\n"
         "    printf(\"test set %d: %s\", set, bad ? \"FAIL\" : \"pass\");\n"
         "    for (k = 0; k < KILN_VERIFY_OUTPUTS; ++k) {\n"
         "      printf(\"%s '%s' max abs error %.3g, max rel error %.3g\", k ? \";\" : \"\",\n"
         "             kiln_verify_outputs[k].name, st[k].max_abs, st[k].max_rel);\n"
         "      if (st[k].bad)\n"
         "        printf(\", %ld of %ld elements outside the tolerance (first at %ld: got %.9g, "
         "expected %.9g)\",\n"
         "               st[k].bad, kiln_verify_outputs[k].count, st[k].first_bad, st[k].bad_got, "
         "st[k].bad_want);\n"
         "    }\n"
         "    printf(\"\\n\");\n"
         "    if (bad) ++failed; else ++passed;\n"
         "  }\n"
         "  printf(\"kiln verify " +
         n +
         ": %d of %d test sets passed (rtol %g, atol %g)%s\\n\", passed,\n"
         "         KILN_VERIFY_SETS, (double)KILN_VERIFY_RTOL, (double)KILN_VERIFY_ATOL,\n"
         "         errors ? \", run() failed\" : failed ? \", MISMATCH\" : \"\");\n"
         "  return errors ? 2 : failed ? 1 : 0;\n"
         "}\n";
}

}  // namespace

Expected<GeneratedFile> GenerateVerifyMain(const CompiledInterface& iface,
                                           const std::vector<VerifyTestSet>& sets,
                                           const VerifyOptions& o) {
  if (!IsValidModelName(o.name))
    return Error("model name '" + o.name + "' is not a valid C identifier");
  if (sets.empty()) return Error("there are no test sets to verify");
  if (iface.outputs.empty()) return Error("the model has no outputs to verify");
  KILN_RETURN_IF_ERROR(CheckTestSets(iface, sets));

  const std::string n = o.name;
  std::string upper = n;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const size_t nin = iface.inputs.size(), nout = iface.outputs.size(), nsets = sets.size();
  std::set<DType> out_dtypes;
  for (const auto& v : iface.outputs) out_dtypes.insert(v.type.dtype);

  bool needs_math = false;
  const std::string data = TestData(iface, sets, &needs_math);

  std::string s =
      "/* " + n + "_verify.c: runs the " + std::to_string(nsets) + " test set" +
      (nsets == 1 ? "" : "s") + " of " + Comment(o.source) + " through model " + n +
      " and compares\n * every output with the expected values (|got - expected| <= atol + rtol * "
      "|expected| for\n * floating types, equality otherwise). Prints one line per test set and a "
      "summary; exits 0 when\n * every set passes, 1 on a mismatch, 2 when run() fails. "
      "-DKILN_VERIFY_RTOL=.. / -DKILN_VERIFY_ATOL=..\n * override the tolerances.\n"
      " * Generated by kiln " +
      Comment(o.kiln_version) + ". Do not edit.\n";
  if (!o.command_line.empty()) s += " * command: " + Comment(o.command_line) + "\n";
  s += " * build:   cc -std=c99 -Wall -Wextra -Werror -pedantic " + n + ".c " + n + "_params.c " +
       n + "_verify.c -lm\n */\n";
  s += "#include <stdio.h>\n";
  if (needs_math) s += "#include <math.h> /* NAN / INFINITY in the test data */\n";
  s += "\n#include \"" + n + ".h\"\n\n";
  s += "#ifndef KILN_VERIFY_RTOL\n#define KILN_VERIFY_RTOL " + Num(o.rtol) + "\n#endif\n";
  s += "#ifndef KILN_VERIFY_ATOL\n#define KILN_VERIFY_ATOL " + Num(o.atol) + "\n#endif\n\n";
  s += "#define KILN_VERIFY_SETS " + std::to_string(nsets) + "\n";
  s += "#define KILN_VERIFY_INPUTS " + std::to_string(nin) + "\n";
  s += "#define KILN_VERIFY_OUTPUTS " + std::to_string(nout) + "\n\n";
  s += Helpers(out_dtypes);
  s += data;

  s += OutputTables(iface, nsets, upper);
  s += MainFunction(n, upper);
  return GeneratedFile{n + "_verify.c", s};
}

}  // namespace kiln::codegen::c
