// TopK and NonMaxSuppression.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/x86/thread_pool.h"
#include "ops/common.h"

namespace kiln::ops {
namespace {

// ---- TopK ----

// k from the attribute (opset 1) or the second input (opset 10+); false when not known yet.
Status TopKParams(const ir::Node& node, int64_t opset, const Tensor* k_input, bool has_k_input,
                  const Dims& in, int64_t* axis, int64_t* k, bool* known,
                  const std::function<Status(const std::string&)>& error) {
  *axis = node.attr_int("axis", -1);
  if (!NormalizeAxis(*axis, static_cast<int64_t>(in.size())))
    return error("axis " + std::to_string(node.attr_int("axis", -1)) +
                 " is out of range for rank " + std::to_string(in.size()));
  *known = true;
  if (opset < 10) {
    if (!node.attr("k")) return error("missing attribute 'k'");
    *k = node.attr_int("k", 0);
  } else {
    if (!has_k_input) return error("missing input 'K'");
    if (!k_input) {
      *known = false;
      return OkStatus();
    }
    if (k_input->size() != 1) return error("'K' must hold exactly one value");
    *k = k_input->GetInt(0);
  }
  if (*k < 0 || *k > in[*axis])
    return error("k = " + std::to_string(*k) + " is out of range [0, " + std::to_string(in[*axis]) +
                 "] for axis " + std::to_string(*axis));
  return OkStatus();
}

Status TopKInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("missing input 'X'");
  DType dt = ctx.input_dtype(0);
  if (!IsFloatingDType(dt) && !IsSignedIntDType(dt) && !IsUnsignedIntDType(dt))
    return ctx.error("unsupported input type " + std::string(DTypeName(dt)));
  if (ctx.opset() >= 10 && ctx.has_input(1) && ctx.input_dtype(1) != DType::kInt64)
    return ctx.error("'K' must be int64");
  int64_t axis, k;
  bool known;
  KILN_RETURN_IF_ERROR(TopKParams(ctx.node(), ctx.opset(), ctx.input_value(1), ctx.has_input(1),
                                  ctx.input_dims(0), &axis, &k, &known,
                                  [&](const std::string& m) { return ctx.error(m); }));
  if (!known) {
    ctx.set_output_dynamic(0, dt);
    if (ctx.num_outputs() > 1) ctx.set_output_dynamic(1, DType::kInt64);
    return OkStatus();
  }
  Dims out = ctx.input_dims(0);
  out[axis] = k;
  ctx.set_output(0, dt, out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, out);
  return OkStatus();
}

// The k largest (smallest) of src[0, n) when none is NaN, best first. Candidates gather in
// `buf`; when it holds 4k, nth_element keeps the best k and the k-th best becomes the bar a later
// element must beat strictly (so ties stay with the smaller index, seen first). Blocks of 16 in
// which nothing beats the bar are passed over after one vectorized count; in the others every
// element is written and kept by the count of its compare, without a branch.
template <bool kLargest, class T>
void SelectRow(const T* src, int64_t n, int64_t k, T* vo, int64_t* io,
               std::vector<std::pair<Acc<T>, int64_t>>& buf) {
  using A = Acc<T>;
  auto before = [](const std::pair<A, int64_t>& a, const std::pair<A, int64_t>& b) {
    if (a.first != b.first) return kLargest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  };
  constexpr int64_t kBlock = 16;
  const size_t keep = static_cast<size_t>(k), cap = 4 * keep;
  buf.resize(cap + kBlock);
  size_t size = 0;
  A bar = kLargest ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  bool all = true;  // until the first compaction every element is a candidate
  for (int64_t j = 0; j < n; j += kBlock) {
    if (size >= cap) {
      std::nth_element(buf.begin(), buf.begin() + (keep - 1), buf.begin() + size, before);
      size = keep;
      bar = std::max_element(buf.begin(), buf.begin() + keep, before)->first;
      all = false;
    }
    const int64_t e = std::min(n, j + kBlock);
    auto take = [&](A v) { return all || (kLargest ? v > bar : v < bar); };
    int32_t better = 0;
    for (int64_t i = j; i < e; ++i) better += take(static_cast<A>(src[i])) ? 1 : 0;
    if (better == 0) continue;
    for (int64_t i = j; i < e; ++i) {
      const A v = static_cast<A>(src[i]);
      buf[size] = {v, i};
      size += take(v) ? 1 : 0;
    }
  }
  if (size > keep)
    std::nth_element(buf.begin(), buf.begin() + (keep - 1), buf.begin() + size, before);
  std::sort(buf.begin(), buf.begin() + keep, before);
  for (int64_t j = 0; j < k; ++j) {
    vo[j] = src[buf[j].second];
    io[j] = buf[j].second;
  }
}

template <class T>
bool HasNaN(const T* p, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    int32_t any = 0;
    for (int64_t i = 0; i < n; ++i) any |= static_cast<Acc<T>>(p[i]) != static_cast<Acc<T>>(p[i]);
    return any != 0;
  }
}

template <class T>
void TopKKernel(const Tensor& x, int64_t axis, int64_t k, bool largest, T* values, int64_t* indices,
                int threads) {
  const Dims& d = x.dims();
  int64_t outer = 1, inner = 1, n = d[axis];
  for (int64_t i = 0; i < axis; ++i) outer *= d[i];
  for (size_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
  using A = Acc<T>;
  const T* xd = x.data<T>();
  // Rows along the last axis, k small beside n, without NaN: the heap selection, rows over threads.
  if (inner == 1 && k > 0 && k * 8 <= n && !HasNaN(xd, outer * n)) {
    const int t = static_cast<int>(std::min<int64_t>(threads, outer * n / (1 << 15) + 1));
    ParallelFor(t, outer, [&](int64_t o0, int64_t o1) {
      std::vector<std::pair<A, int64_t>> heap;
      for (int64_t o = o0; o < o1; ++o)
        if (largest)
          SelectRow<true>(xd + o * n, n, k, values + o * k, indices + o * k, heap);
        else
          SelectRow<false>(xd + o * n, n, k, values + o * k, indices + o * k, heap);
    });
    return;
  }
  std::vector<A> v(n);
  std::vector<int64_t> idx(n);
  // A total order: NaN ranks above every number; ties go to the smaller index.
  auto before = [&](int64_t a, int64_t b) {
    A va = v[a], vb = v[b];
    bool na = va != va, nb = vb != vb;
    if (na || nb) {
      if (na && nb) return a < b;
      return largest ? na : nb;
    }
    if (va != vb) return largest ? va > vb : va < vb;
    return a < b;
  };
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* src = xd + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) v[j] = static_cast<A>(src[j * inner]);
      std::iota(idx.begin(), idx.end(), int64_t{0});
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
      T* vo = values + o * k * inner + i;
      int64_t* io = indices + o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        vo[j * inner] = src[idx[j] * inner];
        io[j * inner] = idx[j];
      }
    }
}

Status TopKCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis, k;
  bool known;
  KILN_RETURN_IF_ERROR(TopKParams(
      ctx.node(), ctx.opset(), ctx.has_input(1) ? &ctx.input(1) : nullptr, ctx.has_input(1),
      x.dims(), &axis, &k, &known, [&](const std::string& m) { return ctx.error(m); }));
  Dims out = x.dims();
  out[axis] = k;
  Tensor& values = ctx.output(0);
  if (!values.defined() || values.dims() != out) ctx.allocate_output(0, x.dtype(), out);
  // Indices are computed even when the model drops them.
  Tensor scratch;
  Tensor* ind = &scratch;
  if (ctx.num_outputs() > 1) ind = &ctx.output(1);
  if (!ind->defined() || ind->dims() != out || ind->dtype() != DType::kInt64) {
    if (ctx.num_outputs() > 1)
      ctx.allocate_output(1, DType::kInt64, out);
    else
      scratch = Tensor(DType::kInt64, out);
  }
  const bool largest = ctx.opset() < 11 || ctx.node().attr_int("largest", 1) != 0;
  bool ok = Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
    TopKKernel<T>(x, axis, k, largest, ctx.output(0).data<T>(), ind->data<int64_t>(),
                  ctx.threads());
  });
  if (!ok) return ctx.error("unsupported input type " + std::string(DTypeName(x.dtype())));
  return OkStatus();
}

// ---- NonMaxSuppression ----

Status NmsCheck(const Dims& boxes, const Dims& scores,
                const std::function<Status(const std::string&)>& error) {
  if (boxes.size() != 3 || boxes[2] != 4)
    return error("boxes must have shape [num_batches, spatial_dimension, 4], got " +
                 DimsToString(boxes));
  if (scores.size() != 3)
    return error("scores must have shape [num_batches, num_classes, spatial_dimension], got " +
                 DimsToString(scores));
  if (boxes[0] != scores[0] || boxes[1] != scores[2])
    return error("boxes " + DimsToString(boxes) + " and scores " + DimsToString(scores) +
                 " disagree on batches or boxes");
  return OkStatus();
}

Status NmsInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects boxes and scores");
  if (!IsFloatingDType(ctx.input_dtype(0)) || ctx.input_dtype(1) != ctx.input_dtype(0))
    return ctx.error("boxes and scores must be float tensors of one type");
  if (ctx.has_input(2) && ctx.input_dtype(2) != DType::kInt64)
    return ctx.error("max_output_boxes_per_class must be int64");
  int64_t cpb = ctx.node().attr_int("center_point_box", 0);
  if (cpb != 0 && cpb != 1) return ctx.error("center_point_box must be 0 or 1");
  KILN_RETURN_IF_ERROR(NmsCheck(ctx.input_dims(0), ctx.input_dims(1),
                                [&](const std::string& m) { return ctx.error(m); }));
  ctx.set_output_dynamic(0, DType::kInt64);
  return OkStatus();
}

// True when box b suppresses box a: their IoU exceeds the threshold. Arithmetic in the boxes'
// type (float for float32), as the reference does.
template <class A>
bool Suppress(const A* a, const A* b, bool center, A iou_threshold) {
  A ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (!center) {  // [y1, x1, y2, x2], corners in either order
    ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]);
    ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]);
    by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
  } else {  // [x_center, y_center, width, height]
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2;
    ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2;
    by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  }
  A ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0) return false;
  A iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (iy1 <= iy0) return false;
  A inter = (ix1 - ix0) * (iy1 - iy0);
  if (inter <= 0) return false;
  A area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  A uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

Status NmsCompute(ComputeContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  KILN_RETURN_IF_ERROR(
      NmsCheck(boxes.dims(), scores.dims(), [&](const std::string& m) { return ctx.error(m); }));
  auto scalar = [&](int i, const char* name, bool* present) -> Expected<double> {
    *present = ctx.has_input(i) && ctx.input(i).size() > 0;
    if (!*present) return 0.0;
    if (ctx.input(i).size() != 1) return ctx.error(std::string(name) + " must be a scalar");
    return ctx.input(i).GetDouble(0);
  };
  bool has_max, has_iou, has_score;
  Expected<double> max_out = scalar(2, "max_output_boxes_per_class", &has_max);
  if (!max_out.ok()) return max_out.status();
  Expected<double> iou = scalar(3, "iou_threshold", &has_iou);
  if (!iou.ok()) return iou.status();
  Expected<double> score_thr = scalar(4, "score_threshold", &has_score);
  if (!score_thr.ok()) return score_thr.status();
  const int64_t max_per_class = has_max ? std::max<int64_t>(0, ctx.input(2).GetInt(0)) : int64_t{0};
  const bool center = ctx.node().attr_int("center_point_box", 0) != 0;
  const int64_t nb = boxes.dim(0), ns = boxes.dim(1), nc = scores.dim(1);
  std::vector<int64_t> selected;  // triples
  Dispatch<kFloatTypes>(boxes.dtype(), [&]<class T>() {
    using A = Acc<T>;
    std::vector<A> bx(boxes.size()), sc(scores.size());
    for (size_t i = 0; i < bx.size(); ++i) bx[i] = static_cast<A>(boxes.data<T>()[i]);
    for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<A>(scores.data<T>()[i]);
    const A iou_thr = static_cast<A>(*iou);
    const A s_thr = static_cast<A>(*score_thr);
    std::vector<int64_t> cand, kept;
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t c = 0; c < nc; ++c) {
        const A* s = sc.data() + (b * nc + c) * ns;
        const A* bb = bx.data() + b * ns * 4;
        cand.clear();
        for (int64_t i = 0; i < ns; ++i)
          if (!has_score || s[i] > s_thr) cand.push_back(i);
        // Highest score first (NaN last); equal scores by box index.
        auto key = [&](int64_t i) {
          return s[i] != s[i] ? -std::numeric_limits<A>::infinity() : s[i];
        };
        std::stable_sort(cand.begin(), cand.end(),
                         [&](int64_t x, int64_t y) { return key(x) > key(y); });
        kept.clear();
        for (int64_t i : cand) {
          if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
          bool keep = true;
          for (int64_t k : kept)
            if (Suppress<A>(bb + i * 4, bb + k * 4, center, iou_thr)) {
              keep = false;
              break;
            }
          if (!keep) continue;
          kept.push_back(i);
          selected.insert(selected.end(), {b, c, i});
        }
      }
  });
  Tensor& out =
      ctx.allocate_output(0, DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
  if (!selected.empty()) std::memcpy(out.raw(), selected.data(), selected.size() * sizeof(int64_t));
  return OkStatus();
}

}  // namespace

void RegisterSortOps(OpRegistry& r) {
  r.Register("TopK", TopKInfer, TopKCompute);
  r.Register("NonMaxSuppression", NmsInfer, NmsCompute);
}

}  // namespace kiln::ops
