// Text features: TfIdfVectorizer over integer token ids (string tokens need string tensors, which
// kiln does not hold).
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"

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
  if (node.attr("pool_strings")) return err("string pools need string tensors, which kiln lacks");
  const std::vector<int64_t> pool = node.attr_ints("pool_int64s");
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
  if (t != DType::kInt32 && t != DType::kInt64)
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
  auto token = [&](int64_t i) { return x.GetInt(row * width + i); };
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

}  // namespace

void RegisterTextOps(OpRegistry& r) { r.Register("TfIdfVectorizer", TfIdfInfer, TfIdfCompute); }

}  // namespace kiln::ops
