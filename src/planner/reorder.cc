#include "planner/reorder.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::planner {
namespace {

// The bytes each value occupies while live (0 for constants, inputs and unknown sizes).
struct Costs {
  std::vector<size_t> bytes;
  std::vector<int> consumers;           // count of consuming nodes per value
  std::vector<std::vector<int>> preds;  // per node: producer nodes
  std::vector<char> is_output;
};

Costs Analyze(const ir::Graph& g) {
  Costs c;
  c.bytes.assign(g.values.size(), 0);
  c.consumers.assign(g.values.size(), 0);
  c.is_output.assign(g.values.size(), 0);
  for (int v : g.outputs) c.is_output[v] = 1;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const auto& t = g.values[v].type;
    if (g.values[v].producer >= 0 && t.shape_known())
      c.bytes[v] = static_cast<size_t>(NumElements(t.dims)) * DTypeSize(t.dtype);
  }
  c.preds.resize(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    std::vector<int> ins = g.nodes[n].inputs;
    ins.insert(ins.end(), g.nodes[n].implicit_inputs.begin(), g.nodes[n].implicit_inputs.end());
    std::sort(ins.begin(), ins.end());
    ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
    for (int v : ins) {
      if (v < 0) continue;
      ++c.consumers[v];
      if (g.values[v].producer >= 0) c.preds[n].push_back(g.values[v].producer);
    }
  }
  return c;
}

std::vector<int> UniqueInputs(const ir::Node& n) {
  std::vector<int> ins = n.inputs;
  ins.insert(ins.end(), n.implicit_inputs.begin(), n.implicit_inputs.end());
  std::sort(ins.begin(), ins.end());
  ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
  return ins;
}

// Simulates an order; returns the peak.
size_t Simulate(const ir::Graph& g, const Costs& c, const std::vector<int>& order) {
  std::vector<int> remaining = c.consumers;
  size_t live = 0, peak = 0;
  for (int n : order) {
    size_t out = 0;
    for (int v : g.nodes[n].outputs)
      if (v >= 0) out += c.bytes[v];
    peak = std::max(peak, live + out);
    live += out;
    for (int v : UniqueInputs(g.nodes[n]))
      if (v >= 0 && --remaining[v] == 0 && !c.is_output[v]) live -= c.bytes[v];
    for (int v : g.nodes[n].outputs)  // never-read intermediates die at once
      if (v >= 0 && c.consumers[v] == 0 && !c.is_output[v]) live -= c.bytes[v];
  }
  return peak;
}

// Greedy: among ready nodes, run the one with the smallest (allocated - freed), ties to the
// file's order.
std::vector<int> Greedy(const ir::Graph& g, const Costs& c) {
  const size_t n = g.nodes.size();
  std::vector<int> pending(n), remaining = c.consumers;
  std::vector<std::vector<int>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = static_cast<int>(c.preds[i].size());
    for (int p : c.preds[i]) succ[p].push_back(static_cast<int>(i));
  }
  std::vector<int> ready, order;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    int best = -1;
    long long best_delta = 0;
    for (int r : ready) {
      long long delta = 0;
      for (int v : g.nodes[r].outputs)
        if (v >= 0 && (c.consumers[v] > 0 || c.is_output[v]))
          delta += static_cast<long long>(c.bytes[v]);
      for (int v : UniqueInputs(g.nodes[r]))
        if (v >= 0 && remaining[v] == 1 && !c.is_output[v])
          delta -= static_cast<long long>(c.bytes[v]);
      if (best < 0 || delta < best_delta || (delta == best_delta && r < best)) {
        best = r;
        best_delta = delta;
      }
    }
    ready.erase(std::find(ready.begin(), ready.end(), best));
    order.push_back(best);
    for (int v : UniqueInputs(g.nodes[best]))
      if (v >= 0) --remaining[v];
    for (int s : succ[best])
      if (--pending[s] == 0) ready.push_back(s);
  }
  return order;
}

// Exact search over scheduled-node sets (bitmask), memoizing the best peak per set.
class Exact {
 public:
  Exact(const ir::Graph& g, const Costs& c) : g_(g), c_(c) {}
  static constexpr size_t kMaxNodes = 48;
  static constexpr size_t kMaxStates = 100000;

  bool Run(std::vector<int>* order) {
    const size_t n = g_.nodes.size();
    if (n > kMaxNodes) return false;
    pred_mask_.assign(n, 0);
    consumer_mask_.assign(g_.values.size(), 0);
    for (size_t i = 0; i < n; ++i) {
      for (int p : c_.preds[i]) pred_mask_[i] |= uint64_t{1} << p;
      for (int v : UniqueInputs(g_.nodes[i]))
        if (v >= 0) consumer_mask_[v] |= uint64_t{1} << i;
    }
    size_t best = Search(0);
    if (overflow_) return false;
    // Rebuild the order by following the memoized choices.
    uint64_t s = 0;
    order->clear();
    while (order->size() < n) {
      int u = choice_[s];
      order->push_back(u);
      s |= uint64_t{1} << u;
    }
    (void)best;
    return true;
  }

 private:
  size_t Live(uint64_t s) const {
    size_t live = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!(s >> i & 1)) continue;
      for (int v : g_.nodes[i].outputs) {
        if (v < 0) continue;
        if (c_.is_output[v]) {
          live += c_.bytes[v];
          continue;
        }
        if (consumer_mask_[v] & ~s) live += c_.bytes[v];  // an unscheduled node still reads it
      }
    }
    return live;
  }

  // Best peak to finish from set s.
  size_t Search(uint64_t s) {
    const size_t n = g_.nodes.size();
    if (s == (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1)) return 0;
    auto it = memo_.find(s);
    if (it != memo_.end()) return it->second;
    if (memo_.size() > kMaxStates) {
      overflow_ = true;
      return 0;
    }
    size_t live = Live(s);
    size_t best = SIZE_MAX;
    int best_u = -1;
    for (size_t u = 0; u < n && !overflow_; ++u) {
      if ((s >> u & 1) || (pred_mask_[u] & ~s)) continue;
      size_t out = 0;
      for (int v : g_.nodes[u].outputs)
        if (v >= 0) out += c_.bytes[v];
      size_t rest = Search(s | uint64_t{1} << u);
      size_t peak = std::max(live + out, rest);
      if (peak < best) {
        best = peak;
        best_u = static_cast<int>(u);
      }
    }
    memo_[s] = best;
    choice_[s] = best_u;
    return best;
  }

  const ir::Graph& g_;
  const Costs& c_;
  std::vector<uint64_t> pred_mask_;
  std::vector<uint64_t> consumer_mask_;  // per value: the nodes that read it
  std::unordered_map<uint64_t, size_t> memo_;
  std::unordered_map<uint64_t, int> choice_;
  bool overflow_ = false;
};

}  // namespace

size_t PeakBytes(const ir::Graph& g, const std::vector<int>& order) {
  return Simulate(g, Analyze(g), order);
}

Schedule ChooseSchedule(const ir::Graph& g) {
  Costs c = Analyze(g);
  Schedule s;
  s.order.resize(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) s.order[i] = static_cast<int>(i);
  s.original_peak = Simulate(g, c, s.order);
  s.peak_bytes = s.original_peak;
  std::vector<int> candidate;
  Exact exact(g, c);
  if (exact.Run(&candidate)) {
    s.exact = true;
  } else {
    candidate = Greedy(g, c);
  }
  size_t peak = Simulate(g, c, candidate);
  if (candidate.size() == g.nodes.size() && peak < s.peak_bytes) {
    s.order = std::move(candidate);
    s.peak_bytes = peak;
  }
  return s;
}

}  // namespace kiln::planner
