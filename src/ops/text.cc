// Text: ops on string tensors (StringNormalizer, StringConcat, StringSplit, RegexFullMatch, Equal's
// string case lives with Equal) and TfIdfVectorizer over integer token ids or strings.
#include <locale.h>
#include <re2/re2.h>
#include <wctype.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/common.h"
#include "support/utf8.h"

namespace kiln::ops {
namespace {

// The attributes of a TfIdfVectorizer, checked, with its pool as a trie of n-grams.
struct TfIdfPlan {
  struct Node {
    std::map<int64_t, std::unique_ptr<Node>> next;
    int64_t id = -1;  // the n-gram ending here: its index into ngram_indexes, or -1
  };
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  int mode = 0;  // 0 TF, 1 IDF, 2 TFIDF
  std::vector<int64_t> ngram_indexes;
  std::vector<float> weights;
  int64_t output_size = 0;
  Node root;
  bool strings = false;  // the pool is pool_strings, the tokens are strings
  std::unordered_map<std::string, int64_t> vocabulary;
  // The id of token i of x: a word outside the pool gets -1, which no n-gram holds.
  int64_t Token(const Tensor& x, int64_t i) const {
    if (!strings) return x.GetInt(i);
    auto it = vocabulary.find(x.strings()[i]);
    return it == vocabulary.end() ? -1 : it->second;
  }
};

Status MakeTfIdfPlan(const ir::Node& node, TfIdfPlan* p,
                     const std::function<Status(std::string)>& err) {
  p->min_gram = node.attr_int("min_gram_length", 0);
  p->max_gram = node.attr_int("max_gram_length", 0);
  p->max_skip = node.attr_int("max_skip_count", 0);
  if (p->min_gram < 1 || p->max_gram < p->min_gram)
    return err("needs 1 <= min_gram_length <= max_gram_length");
  if (p->max_skip < 0) return err("max_skip_count must be >= 0");
  const std::string mode = node.attr_string("mode", "");
  p->mode = mode == "TF" ? 0 : mode == "IDF" ? 1 : mode == "TFIDF" ? 2 : -1;
  if (p->mode < 0) return err("mode must be TF, IDF or TFIDF, not '" + mode + "'");
  // A string pool is held as ids: each distinct string's first position in it.
  std::vector<int64_t> pool = node.attr_ints("pool_int64s");
  if (const ir::Attribute* a = node.attr("pool_strings")) {
    if (node.attr("pool_int64s")) return err("has both pool_strings and pool_int64s");
    p->strings = true;
    for (const std::string& w : a->strings)
      pool.push_back(p->vocabulary.emplace(w, static_cast<int64_t>(pool.size())).first->second);
  }
  const std::vector<int64_t> counts = node.attr_ints("ngram_counts");
  p->ngram_indexes = node.attr_ints("ngram_indexes");
  p->weights = node.attr_floats("weights");
  if (!p->weights.empty() && p->weights.size() != p->ngram_indexes.size())
    return err("weights must have one value per n-gram");
  for (int64_t i : p->ngram_indexes) {
    if (i < 0 || i >= (int64_t{1} << 30)) return err("ngram_indexes must be in [0, 2^30)");
    p->output_size = std::max(p->output_size, i + 1);
  }
  // Level n (1-based) holds n-grams of n tokens from pool[counts[n-1]] to the next level's start.
  int64_t id = 0;
  for (size_t level = 0; level < counts.size(); ++level) {
    const int64_t n = static_cast<int64_t>(level) + 1;
    const int64_t begin = counts[level];
    const int64_t end =
        level + 1 < counts.size() ? counts[level + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) ||
        (end - begin) % n != 0)
      return err("ngram_counts do not split pool_int64s into whole n-grams");
    for (int64_t g = begin; g < end; g += n, ++id) {
      if (id >= static_cast<int64_t>(p->ngram_indexes.size()))
        return err("ngram_indexes has fewer entries than the pool has n-grams");
      TfIdfPlan::Node* at = &p->root;
      for (int64_t k = 0; k < n; ++k) {
        auto& next = at->next[pool[g + k]];
        if (!next) next = std::make_unique<TfIdfPlan::Node>();
        at = next.get();
      }
      at->id = id;
    }
  }
  return OkStatus();
}

Status TfIdfInfer(InferContext& ctx) {
  TfIdfPlan p;
  KILN_RETURN_IF_ERROR(MakeTfIdfPlan(ctx.node(), &p, [&](std::string m) { return ctx.error(m); }));
  const DType t = ctx.input_dtype(0);
  if (p.strings && t != DType::kString)
    return ctx.error("X must be strings for a pool_strings pool, not " + std::string(DTypeName(t)));
  if (!p.strings && t != DType::kInt32 && t != DType::kInt64)
    return ctx.error("X must be int32 or int64 token ids, not " + std::string(DTypeName(t)));
  const Dims& x = ctx.input_dims(0);
  if (x.size() != 1 && x.size() != 2) return ctx.error("X must be [C] or [N, C]");
  ctx.set_output(0, DType::kFloat32,
                 x.size() == 1 ? Dims{p.output_size} : Dims{x[0], p.output_size});
  return OkStatus();
}

// Counts every n-gram of the pool in a row, as the ONNX reference walks it: for each skip
// distance, from each start, along the trie; unigrams once, not once per distance.
void CountRow(const TfIdfPlan& p, const Tensor& x, int64_t row, int64_t width, float* counts) {
  auto token = [&](int64_t i) { return p.Token(x, row * width + i); };
  int64_t first_size = p.min_gram;
  for (int64_t skip = 1; skip <= p.max_skip + 1; ++skip) {
    for (int64_t start = 0; start < width; ++start) {
      if (start + skip * (first_size - 1) >= width) break;
      const TfIdfPlan::Node* at = &p.root;
      for (int64_t i = start, n = 1; n <= p.max_gram && i < width; i += skip, ++n) {
        auto hit = at->next.find(token(i));
        if (hit == at->next.end()) break;
        at = hit->second.get();
        if (n >= first_size && at->id >= 0) counts[p.ngram_indexes[at->id]] += 1;
      }
    }
    if (first_size == 1 && ++first_size > p.max_gram) break;
  }
}

Status TfIdfCompute(ComputeContext& ctx) {
  TfIdfPlan p;
  KILN_RETURN_IF_ERROR(MakeTfIdfPlan(ctx.node(), &p, [&](std::string m) { return ctx.error(m); }));
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, width = x.dims().back();
  float* out = y.data<float>();
  std::fill(out, out + y.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) CountRow(p, x, r, width, out + r * p.output_size);
  // IDF: presence times the weight; TFIDF: the count times the weight (an output column's weight
  // is that of the n-gram mapped to it).
  if (p.mode != 0) {
    std::vector<float> weight(p.output_size, 1.0f);
    for (size_t k = 0; k < p.weights.size(); ++k) weight[p.ngram_indexes[k]] = p.weights[k];
    for (int64_t i = 0; i < y.size(); ++i) {
      float& v = out[i];
      v = (p.mode == 1 ? (v > 0 ? 1.0f : 0.0f) : v) * weight[i % p.output_size];
    }
  }
  return OkStatus();
}

// ---- Case mapping and whitespace ------------------------------------------------------------

// Unicode simple case mapping through the C.UTF-8 locale (ASCII only where it is missing).
class CaseMapper {
 public:
  static const CaseMapper& Get() {
    static const CaseMapper m;
    return m;
  }
  std::string Map(const std::string& s, bool upper) const {
    std::u32string text = DecodeUtf8(s);
    for (char32_t& c : text) c = Map(c, upper);
    return EncodeUtf8(text);
  }

 private:
  CaseMapper() : locale_(newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0))) {}
  char32_t Map(char32_t c, bool upper) const {
    if (locale_)
      return static_cast<char32_t>(upper ? towupper_l(static_cast<wint_t>(c), locale_)
                                         : towlower_l(static_cast<wint_t>(c), locale_));
    if (c < 0x80) return static_cast<char32_t>(upper ? std::toupper(c) : std::tolower(c));
    return c;
  }
  locale_t locale_;
};

// Python's str.isspace, which StringSplit's default separator follows.
bool IsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// ---- StringNormalizer -------------------------------------------------------------------------

struct NormalizerPlan {
  int case_change = 0;  // 0 NONE, 1 LOWER, 2 UPPER
  bool case_sensitive = false;
  std::set<std::string> stopwords;  // lower-cased when matching ignores case
};

Status MakeNormalizerPlan(const ir::Node& n, NormalizerPlan* p,
                          const std::function<Status(std::string)>& err) {
  const std::string action = n.attr_string("case_change_action", "NONE");
  p->case_change = action == "NONE" ? 0 : action == "LOWER" ? 1 : action == "UPPER" ? 2 : -1;
  if (p->case_change < 0)
    return err("case_change_action must be NONE, LOWER or UPPER, not '" + action + "'");
  p->case_sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  if (const ir::Attribute* a = n.attr("stopwords"))
    for (const std::string& w : a->strings)
      p->stopwords.insert(p->case_sensitive ? w : CaseMapper::Get().Map(w, false));
  return OkStatus();
}

Status StringNormalizerInfer(InferContext& ctx) {
  NormalizerPlan p;
  KILN_RETURN_IF_ERROR(
      MakeNormalizerPlan(ctx.node(), &p, [&](std::string m) { return ctx.error(m); }));
  if (ctx.input_dtype(0) != DType::kString) return ctx.error("X must be a string tensor");
  const Dims& x = ctx.input_dims(0);
  if (x.size() != 1 && !(x.size() == 2 && x[0] == 1)) return ctx.error("X must be [C] or [1, C]");
  // Stopwords take elements out: how many shows only in the data.
  if (p.stopwords.empty() && x.back() > 0)
    ctx.set_output(0, DType::kString, x);
  else
    ctx.set_output_dynamic(0, DType::kString);
  return OkStatus();
}

Status StringNormalizerCompute(ComputeContext& ctx) {
  NormalizerPlan p;
  KILN_RETURN_IF_ERROR(
      MakeNormalizerPlan(ctx.node(), &p, [&](std::string m) { return ctx.error(m); }));
  const Tensor& x = ctx.input(0);
  std::vector<std::string> kept;
  for (int64_t i = 0; i < x.size(); ++i) {
    const std::string& w = x.strings()[i];
    if (!p.stopwords.empty() &&
        p.stopwords.count(p.case_sensitive ? w : CaseMapper::Get().Map(w, false)))
      continue;
    kept.push_back(p.case_change == 0 ? w : CaseMapper::Get().Map(w, p.case_change == 2));
  }
  if (kept.empty()) kept.emplace_back();  // all dropped: one empty string, as the spec says
  const int64_t c = static_cast<int64_t>(kept.size());
  Tensor& y = ctx.allocate_output(0, DType::kString, x.rank() == 2 ? Dims{1, c} : Dims{c});
  std::move(kept.begin(), kept.end(), y.strings());
  return OkStatus();
}

// ---- StringConcat, RegexFullMatch -----------------------------------------------------------

Status StringConcatInfer(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::kString || ctx.input_dtype(1) != DType::kString)
    return ctx.error("X and Y must be string tensors");
  Dims d;
  if (!BroadcastDims(ctx.input_dims(0), ctx.input_dims(1), &d))
    return ctx.error("shapes " + DimsToString(ctx.input_dims(0)) + " and " +
                     DimsToString(ctx.input_dims(1)) + " do not broadcast");
  ctx.set_output(0, DType::kString, d);
  return OkStatus();
}

Status StringConcatCompute(ComputeContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  ForEachBroadcast<2>(y.dims(),
                      {BroadcastStrides(a.dims(), y.dims()), BroadcastStrides(b.dims(), y.dims())},
                      [&](int64_t i, const std::array<int64_t, 2>& off) {
                        y.strings()[i] = a.strings()[off[0]] + b.strings()[off[1]];
                      });
  return OkStatus();
}

// The node's pattern, compiled (RE2 syntax, as the spec names); an error for a bad one.
Expected<std::unique_ptr<RE2>> CompilePattern(const ir::Node& n) {
  const ir::Attribute* a = n.attr("pattern");
  if (!a || a->kind != ir::Attribute::Kind::kString) return Error("needs a pattern");
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(a->s, options);
  if (!re->ok())
    return Error("pattern '" + a->s + "' is not a valid RE2 expression: " + re->error());
  return re;
}

Status RegexFullMatchInfer(InferContext& ctx) {
  auto re = CompilePattern(ctx.node());
  if (!re.ok()) return ctx.error(re.status().message());
  if (ctx.input_dtype(0) != DType::kString) return ctx.error("X must be a string tensor");
  ctx.set_output(0, DType::kBool, ctx.input_dims(0));
  return OkStatus();
}

// The compiled pattern, kept between runs of the node.
struct RegexState : NodeState {
  std::unique_ptr<RE2> re;
  std::string Kernel() const override { return "re2"; }
};

Status RegexFullMatchCompute(ComputeContext& ctx) {
  std::unique_ptr<NodeState>* slot = ctx.state();
  auto* kept = slot && *slot ? dynamic_cast<RegexState*>(slot->get()) : nullptr;
  std::unique_ptr<RE2> local;
  if (!kept) {
    auto re = CompilePattern(ctx.node());
    if (!re.ok()) return ctx.error(re.status().message());
    local = std::move(*re);
    if (slot) {
      auto state = std::make_unique<RegexState>();
      state->re = std::move(local);
      kept = state.get();
      *slot = std::move(state);
    }
  }
  const RE2& re = kept ? *kept->re : *local;
  const Tensor& x = ctx.input(0);
  bool* y = ctx.output(0).data<bool>();
  for (int64_t i = 0; i < x.size(); ++i) y[i] = RE2::FullMatch(x.strings()[i], re);
  return OkStatus();
}

// ---- StringSplit ------------------------------------------------------------------------------

// Python's str.split(delimiter, maxsplit): with no delimiter, runs of whitespace separate and the
// ends are trimmed; maxsplit < 0 splits everywhere.
std::vector<std::string> Split(const std::string& s, const std::string& delimiter,
                               int64_t maxsplit) {
  std::vector<std::string> parts;
  if (!delimiter.empty()) {
    size_t from = 0;
    for (size_t at; (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) &&
                    (at = s.find(delimiter, from)) != std::string::npos;
         from = at + delimiter.size())
      parts.push_back(s.substr(from, at - from));
    parts.push_back(s.substr(from));
    return parts;
  }
  const std::u32string text = DecodeUtf8(s);
  size_t i = 0;
  while (true) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(EncodeUtf8(text.substr(i)));
      break;
    }
    const size_t start = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    parts.push_back(EncodeUtf8(text.substr(start, i - start)));
  }
  return parts;
}

Status StringSplitInfer(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::kString) return ctx.error("X must be a string tensor");
  // The substrings' axis is as long as the longest split: known from the data only.
  ctx.set_output_dynamic(0, DType::kString);
  ctx.set_output(1, DType::kInt64, ctx.input_dims(0));
  return OkStatus();
}

Status StringSplitCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string delimiter = ctx.node().attr_string("delimiter", "");
  const int64_t maxsplit = ctx.node().attr("maxsplit") ? ctx.node().attr_int("maxsplit", -1) : -1;
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.size()));
  int64_t width = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    parts[i] = Split(x.strings()[i], delimiter, maxsplit);
    width = std::max(width, static_cast<int64_t>(parts[i].size()));
  }
  Dims yd = x.dims();
  yd.push_back(width);
  Tensor& y = ctx.allocate_output(0, DType::kString, yd);
  int64_t* z = ctx.output(1).data<int64_t>();
  for (int64_t i = 0; i < x.size(); ++i) {
    z[i] = static_cast<int64_t>(parts[i].size());
    std::move(parts[i].begin(), parts[i].end(), y.strings() + i * width);
  }
  return OkStatus();
}

}  // namespace

void RegisterTextOps(OpRegistry& r) {
  r.Register("TfIdfVectorizer", TfIdfInfer, TfIdfCompute);
  r.Register("StringNormalizer", StringNormalizerInfer, StringNormalizerCompute);
  r.Register("StringConcat", StringConcatInfer, StringConcatCompute);
  r.Register("RegexFullMatch", RegexFullMatchInfer, RegexFullMatchCompute);
  r.Register("StringSplit", StringSplitInfer, StringSplitCompute);
}

}  // namespace kiln::ops
