#include "planner/lifetimes.h"

#include <algorithm>
#include <set>
#include <string>

#include "ops/op_traits.h"

namespace kiln::planner {
namespace {

size_t Bytes(const ir::TypeInfo& t) {
  return static_cast<size_t>(NumElements(t.dims)) * DTypeSize(t.dtype);
}

// Product of dims before `axis`: 1 means slices along axis are contiguous.
int64_t Outer(const Dims& d, int64_t axis) {
  int64_t p = 1;
  for (int64_t i = 0; i < axis; ++i) p *= d[i];
  return p;
}

// For a Slice whose output is one contiguous run of its input's bytes (every axis before the
// first sliced one has size 1, every axis after it is whole, step 1), the byte offset of that run.
bool ContiguousSlice(const ir::Graph& g, const ir::Node& n, size_t* offset) {
  const ir::TypeInfo& it = g.values[n.inputs[0]].type;
  const ir::TypeInfo& ot = g.values[n.outputs[0]].type;
  const Dims& d = it.dims;
  const Dims& o = ot.dims;
  const int64_t r = static_cast<int64_t>(d.size());
  if (o.size() != d.size()) return false;
  int64_t k = 0;
  while (k < r && o[k] == d[k]) ++k;
  if (k == r) {  // nothing sliced away
    *offset = 0;
    return true;
  }
  for (int64_t j = k + 1; j < r; ++j)
    if (o[j] != d[j]) return false;
  if (Outer(d, k) != 1) return false;
  // starts / axes / steps from constant inputs (opset >= 10) or attributes.
  auto ints = [&](int input, const char* attr, bool* ok) -> std::vector<int64_t> {
    if (n.inputs.size() > 1) {
      if (input >= static_cast<int>(n.inputs.size()) || n.inputs[input] < 0) return {};
      const auto& c = g.values[n.inputs[input]].constant;
      if (!c) {
        *ok = false;
        return {};
      }
      return c->ToInt64Vector();
    }
    return n.attr_ints(attr);
  };
  bool ok = true;
  std::vector<int64_t> starts = ints(1, "starts", &ok), axes = ints(3, "axes", &ok),
                       steps = ints(4, "steps", &ok);
  if (!ok || starts.empty()) return false;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
    return false;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (a != k) continue;
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step != 1) return false;
    int64_t st = starts[i] < 0 ? starts[i] + d[k] : starts[i];
    st = std::clamp<int64_t>(st, 0, d[k]);
    if (st + o[k] > d[k]) return false;
    int64_t inner = 1;
    for (int64_t j = k + 1; j < r; ++j) inner *= d[j];
    *offset = static_cast<size_t>(st * inner) * DTypeSize(it.dtype);
    return true;
  }
  return false;
}

}  // namespace

std::vector<int> LastUses(const ir::Graph& g, const std::vector<int>& order) {
  std::vector<int> last(g.values.size(), -1);
  for (size_t p = 0; p < order.size(); ++p) {
    const ir::Node& n = g.nodes[order[p]];
    for (int v : n.inputs)
      if (v >= 0) last[v] = static_cast<int>(p);
    for (int v : n.implicit_inputs)
      if (v >= 0) last[v] = static_cast<int>(p);
  }
  for (int v : g.outputs) last[v] = static_cast<int>(order.size());
  return last;
}

namespace {

// The buffers' aliasing as it is decided: which buffer each value has, and how many others
// alias each buffer.
struct Aliasing {
  const ir::Graph& g;
  BufferSet& set;
  std::vector<Buffer>& bufs;
  std::vector<int> aliased_by;

  Aliasing(const ir::Graph& graph, BufferSet& s)
      : g(graph), set(s), bufs(s.buffers), aliased_by(s.buffers.size(), 0) {}
  int BufferOf(int v) const { return v >= 0 ? set.buffer_of[v] : -1; }
  int Root(int b) const {
    while (bufs[b].alias_of >= 0) b = bufs[b].alias_of;
    return b;
  }
  int GroupLast(int r) const {  // latest use of any buffer in r's group
    int l = -1;
    for (size_t i = 0; i < bufs.size(); ++i)
      if (Root(static_cast<int>(i)) == r) l = std::max(l, bufs[i].last_use);
    return l;
  }
};

// Concat first: its inputs are then produced straight into the output's slices.
void AliasConcats(Aliasing& al, const std::vector<int>& order, const LifetimeOptions& options) {
  const ir::Graph& g = al.g;
  for (size_t p = 0; p < order.size(); ++p) {
    const ir::Node& n = g.nodes[order[p]];
    if (n.op_type != "Concat" || n.outputs.empty() || al.BufferOf(n.outputs[0]) < 0) continue;
    const ConcatPlacement placement =
        static_cast<size_t>(order[p]) < options.concat_placement.size()
            ? options.concat_placement[order[p]]
            : ConcatPlacement::kSlices;
    if (placement == ConcatPlacement::kCopies) continue;
    const bool interleaved = placement == ConcatPlacement::kInterleaved;
    const ir::TypeInfo& ot = g.values[n.outputs[0]].type;
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(ot.dims.size());
    if (axis < 0 || axis >= static_cast<int64_t>(ot.dims.size()) || Outer(ot.dims, axis) != 1)
      continue;
    if (interleaved && (ot.dims.size() != 4 || axis != 1 || ot.dims[2] * ot.dims[3] < 1)) continue;
    std::set<int> seen;
    bool ok = !n.inputs.empty();
    for (int v : n.inputs) {
      int b = al.BufferOf(v);
      ok = ok && b >= 0 && seen.insert(v).second && al.bufs[b].alias_of < 0 &&
           al.aliased_by[b] == 0 && g.values[v].type.dtype == ot.dtype;
    }
    if (!ok) continue;
    int out = al.BufferOf(n.outputs[0]);
    size_t off = 0;
    const size_t elem = DTypeSize(ot.dtype);
    const int64_t pixels = interleaved ? ot.dims[2] * ot.dims[3] : 0;
    for (int v : n.inputs) {
      int b = al.BufferOf(v);
      al.bufs[b].alias_of = out;
      al.bufs[b].alias_offset = off;
      ++al.aliased_by[out];
      if (interleaved) {  // channel offset; the span reaches the input's last pixel
        const int64_t channels = g.values[v].type.dims[1];
        al.bufs[b].size = static_cast<size_t>((pixels - 1) * ot.dims[1] + channels) * elem;
        off += static_cast<size_t>(channels) * elem;
      } else {
        off += Bytes(g.values[v].type);
      }
    }
    al.set.is_noop[p] = true;
  }
}

// Views and in-place results, in schedule order.
void AliasViewsAndInPlace(Aliasing& al, const std::vector<int>& order,
                          const LifetimeOptions& options) {
  const ir::Graph& g = al.g;
  for (size_t p = 0; p < order.size(); ++p) {
    const ir::Node& n = g.nodes[order[p]];
    if (n.inputs.empty() || n.outputs.empty()) continue;
    int in = al.BufferOf(n.inputs[0]);
    if (ops::HasTrait(n.domain, n.op_type, ops::kView) && n.outputs.size() == 1) {
      int out = al.BufferOf(n.outputs[0]);
      if (in < 0 || out < 0 || al.bufs[out].alias_of >= 0 || al.aliased_by[out] > 0) continue;
      al.bufs[out].alias_of = in;
      al.bufs[out].alias_offset = 0;
      ++al.aliased_by[in];
      al.set.is_noop[p] = true;
      continue;
    }
    if (n.op_type == "Split" && in >= 0) {
      const ir::TypeInfo& it = g.values[n.inputs[0]].type;
      int64_t axis = n.attr_int("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(it.dims.size());
      if (axis < 0 || axis >= static_cast<int64_t>(it.dims.size()) || Outer(it.dims, axis) != 1)
        continue;
      bool ok = true;
      for (int v : n.outputs) {
        int b = al.BufferOf(v);
        ok = ok && b >= 0 && al.bufs[b].alias_of < 0 && al.aliased_by[b] == 0;
      }
      if (!ok) continue;
      size_t off = 0;
      for (int v : n.outputs) {
        int b = al.BufferOf(v);
        al.bufs[b].alias_of = in;
        al.bufs[b].alias_offset = off;
        ++al.aliased_by[in];
        off += Bytes(g.values[v].type);
      }
      al.set.is_noop[p] = true;
      continue;
    }
    if (n.op_type == "Slice" && in >= 0 && n.outputs.size() == 1) {
      int out = al.BufferOf(n.outputs[0]);
      size_t off = 0;
      if (out < 0 || al.bufs[out].alias_of >= 0 || al.aliased_by[out] > 0 ||
          !ContiguousSlice(g, n, &off))
        continue;
      al.bufs[out].alias_of = in;
      al.bufs[out].alias_offset = off;
      ++al.aliased_by[in];
      al.set.is_noop[p] = true;
      continue;
    }
    const bool fused_conv = options.fused_conv_in_place && n.op_type == "FusedConv" &&
                            n.domain == "com.microsoft" && n.inputs.size() > 3;
    if ((ops::RunsInPlace(n.domain, n.op_type) || fused_conv) && n.outputs.size() == 1) {
      int out = al.BufferOf(n.outputs[0]);
      if (out < 0 || al.bufs[out].alias_of >= 0 || al.aliased_by[out] > 0) continue;
      const ir::TypeInfo& ot = g.values[n.outputs[0]].type;
      const std::vector<int> candidates = fused_conv ? std::vector<int>{n.inputs[3]} : n.inputs;
      for (int v : candidates) {
        int b = al.BufferOf(v);
        if (b < 0) continue;
        const ir::TypeInfo& it = g.values[v].type;
        if (it.dtype != ot.dtype || it.dims != ot.dims) continue;
        // Every byte of the input's storage must be dead after this node, and the input must
        // not be read twice by this node (a later operand would see the new values).
        int uses = 0;
        for (int u : n.inputs) uses += u == v;
        if (uses != 1 || al.GroupLast(al.Root(b)) > static_cast<int>(p)) continue;
        al.bufs[out].alias_of = b;
        al.bufs[out].alias_offset = 0;
        ++al.aliased_by[b];
        break;
      }
    }
  }
}

}  // namespace

BufferSet BuildBuffers(const ir::Graph& g, const std::vector<int>& order,
                       const LifetimeOptions& options) {
  BufferSet set;
  set.buffer_of.assign(g.values.size(), -1);
  set.is_noop.assign(order.size(), false);
  std::vector<int> last = LastUses(g, order);
  std::vector<char> is_output(g.values.size(), 0);
  for (int v : g.outputs) is_output[v] = 1;

  auto add = [&](int v, int first) {
    const ir::TypeInfo& t = g.values[v].type;
    if (!t.shape_known() || DTypeSize(t.dtype) == 0) return;
    Buffer b;
    b.name = g.values[v].name;
    b.value = v;
    b.size = std::max<size_t>(Bytes(t), 1);
    b.first_use = first;
    b.last_use = std::max(first, last[v]);
    set.buffer_of[v] = static_cast<int>(set.buffers.size());
    set.buffers.push_back(b);
  };
  if (options.include_io)
    for (int v : g.RuntimeInputs()) add(v, 0);
  for (size_t p = 0; p < order.size(); ++p) {
    for (int v : g.nodes[order[p]].outputs) {
      if (v < 0 || g.values[v].constant || (is_output[v] && !options.include_io)) continue;
      add(v, static_cast<int>(p));
    }
  }
  if (!options.aliasing) return set;
  Aliasing al(g, set);
  AliasConcats(al, order, options);
  AliasViewsAndInPlace(al, order, options);
  return set;
}

}  // namespace kiln::planner
