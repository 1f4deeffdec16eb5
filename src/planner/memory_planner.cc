#include "planner/memory_planner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

namespace kiln::planner {
namespace {

// How long the search planners may run: a number of search steps, never a clock, so that a graph
// gets the same plan on every machine and from every command.
class SearchBudget {
 public:
  explicit SearchBudget(long max_steps) : max_steps_(max_steps) {}
  bool left() { return steps_++ < max_steps_; }

 private:
  long max_steps_;
  long steps_ = 0;
};

// What the packers place: one item per alias group.
struct Item {
  size_t size;
  int first, last;
};

bool Interfere(const Item& a, const Item& b) { return a.first <= b.last && b.first <= a.last; }

// Places items in `order`, each at the best (or first) gap among interfering placed items.
size_t Pack(const std::vector<Item>& items, const std::vector<int>& order, bool best_fit,
            std::vector<size_t>* offsets) {
  offsets->assign(items.size(), 0);
  std::vector<int> placed;
  placed.reserve(items.size());
  std::vector<std::pair<size_t, size_t>> busy;
  size_t arena = 0;
  for (int i : order) {
    const Item& it = items[i];
    busy.clear();
    for (int p : placed)
      if (Interfere(it, items[p])) busy.push_back({(*offsets)[p], (*offsets)[p] + items[p].size});
    std::sort(busy.begin(), busy.end());
    size_t best = std::numeric_limits<size_t>::max(), best_gap = best;
    size_t end = 0;
    for (auto [b, e] : busy) {
      if (b > end && b - end >= it.size) {
        size_t gap = b - end;
        if (!best_fit) {
          best = end;
          break;
        }
        if (gap < best_gap) {
          best_gap = gap;
          best = end;
        }
      }
      end = std::max(end, e);
    }
    size_t off = best != std::numeric_limits<size_t>::max() ? best : end;
    (*offsets)[i] = off;
    placed.push_back(i);
    arena = std::max(arena, off + it.size);
  }
  return arena;
}

std::vector<int> OrderBySizeDesc(const std::vector<Item>& items) {
  std::vector<int> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (items[a].size != items[b].size) return items[a].size > items[b].size;
    return items[a].first < items[b].first;
  });
  return order;
}

// Adjacency lists of the interference graph, by a sweep over start times.
std::vector<std::vector<int>> InterferenceGraph(const std::vector<Item>& items) {
  std::vector<int> by_start(items.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(),
            [&](int a, int b) { return items[a].first < items[b].first; });
  std::vector<std::vector<int>> adj(items.size());
  std::vector<int> active;
  for (int i : by_start) {
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](int a) { return items[a].last < items[i].first; }),
                 active.end());
    for (int a : active) {
      adj[a].push_back(i);
      adj[i].push_back(a);
    }
    active.push_back(i);
  }
  return adj;
}

std::vector<int> OrderByConflicts(const std::vector<Item>& items) {
  auto adj = InterferenceGraph(items);
  std::vector<size_t> weight(items.size(), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    weight[i] = items[i].size;
    for (int j : adj[i]) weight[i] += items[j].size;
  }
  std::vector<int> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (weight[a] != weight[b]) return weight[a] > weight[b];
    return items[a].size > items[b].size;
  });
  return order;
}

// Interference-graph colouring: every colour is one slot of the arena, as large as its largest
// member; members of a colour never interfere.
class Colouring {
 public:
  Colouring(const std::vector<Item>& items) : items_(items), adj_(InterferenceGraph(items)) {}

  size_t Run(SearchBudget budget, std::vector<size_t>* offsets) {
    colour_.assign(items_.size(), -1);
    for (int i : OrderBySizeDesc(items_)) {
      int best = -1;
      size_t best_cost = std::numeric_limits<size_t>::max();
      for (size_t c = 0; c < members_.size(); ++c) {
        if (!Fits(i, static_cast<int>(c), -1)) continue;
        size_t cs = ColourSize(static_cast<int>(c));
        size_t cost = items_[i].size > cs ? items_[i].size - cs : 0;
        // Prefer no growth, then the tightest colour.
        size_t key = cost * 2 + (cost == 0 ? 0 : 1);
        if (best < 0 || key < best_cost || (key == best_cost && cs < ColourSize(best))) {
          best = static_cast<int>(c);
          best_cost = key;
        }
      }
      if (best < 0) {
        best = static_cast<int>(members_.size());
        members_.emplace_back();
      }
      Assign(i, best);
    }
    LocalSearch(budget);
    // Lay colours out end to end, largest first.
    std::vector<int> cols;
    for (size_t c = 0; c < members_.size(); ++c)
      if (!members_[c].empty()) cols.push_back(static_cast<int>(c));
    std::stable_sort(cols.begin(), cols.end(),
                     [&](int a, int b) { return ColourSize(a) > ColourSize(b); });
    offsets->assign(items_.size(), 0);
    size_t off = 0;
    for (int c : cols) {
      for (int i : members_[c]) (*offsets)[i] = off;
      off += ColourSize(c);
    }
    return off;
  }

 private:
  size_t ColourSize(int c) const {
    size_t s = 0;
    for (int i : members_[c]) s = std::max(s, items_[i].size);
    return s;
  }
  size_t Total() const {
    size_t t = 0;
    for (size_t c = 0; c < members_.size(); ++c) t += ColourSize(static_cast<int>(c));
    return t;
  }
  // Can item i join colour c (ignoring item `except`, which is leaving it)?
  bool Fits(int i, int c, int except) const {
    for (int j : adj_[i])
      if (j != except && colour_[j] == c) return false;
    return true;
  }
  void Assign(int i, int c) {
    colour_[i] = c;
    members_[c].push_back(i);
  }
  void Remove(int i) {
    auto& m = members_[colour_[i]];
    m.erase(std::find(m.begin(), m.end(), i));
    colour_[i] = -1;
  }

  void LocalSearch(SearchBudget& budget) {
    bool improved = true;
    while (improved && budget.left()) {
      improved = false;
      size_t total = Total();
      // Moves: an item to another colour where it fits.
      for (size_t i = 0; i < items_.size(); ++i) {
        int from = colour_[i];
        for (size_t c = 0; c < members_.size(); ++c) {
          if (static_cast<int>(c) == from || !Fits(static_cast<int>(i), static_cast<int>(c), -1))
            continue;
          Remove(static_cast<int>(i));
          Assign(static_cast<int>(i), static_cast<int>(c));
          size_t t = Total();
          if (t < total) {
            total = t;
            improved = true;
            break;
          }
          Remove(static_cast<int>(i));
          Assign(static_cast<int>(i), from);
        }
      }
      // Swaps: two items of different colours trade places.
      for (size_t i = 0; i < items_.size() && budget.left(); ++i) {
        for (size_t j = i + 1; j < items_.size(); ++j) {
          int ci = colour_[i], cj = colour_[j];
          if (ci == cj || items_[i].size == items_[j].size) continue;
          if (!Fits(static_cast<int>(i), cj, static_cast<int>(j)) ||
              !Fits(static_cast<int>(j), ci, static_cast<int>(i)))
            continue;
          Remove(static_cast<int>(i));
          Remove(static_cast<int>(j));
          Assign(static_cast<int>(i), cj);
          Assign(static_cast<int>(j), ci);
          size_t t = Total();
          if (t < total) {
            total = t;
            improved = true;
            continue;
          }
          Remove(static_cast<int>(i));
          Remove(static_cast<int>(j));
          Assign(static_cast<int>(i), ci);
          Assign(static_cast<int>(j), cj);
        }
      }
      // Dissolve: empty a colour by moving every member elsewhere.
      for (size_t c = 0; c < members_.size() && budget.left(); ++c) {
        if (members_[c].empty()) continue;
        std::vector<int> moved = members_[c];
        std::vector<int> old(moved.size(), static_cast<int>(c));
        bool ok = true;
        for (int i : moved) Remove(i);
        std::vector<int> placed;
        for (int i : moved) {
          int target = -1;
          for (size_t d = 0; d < members_.size(); ++d) {
            if (d == c || members_[d].empty() || !Fits(i, static_cast<int>(d), -1)) continue;
            if (target < 0 || ColourSize(static_cast<int>(d)) > ColourSize(target))
              target = static_cast<int>(d);
          }
          if (target < 0) {
            ok = false;
            break;
          }
          Assign(i, target);
          placed.push_back(i);
        }
        if (ok && Total() < total) {
          total = Total();
          improved = true;
          continue;
        }
        for (int i : placed) Remove(i);
        for (int i : moved) Assign(i, static_cast<int>(c));
      }
    }
  }

  const std::vector<Item>& items_;
  std::vector<std::vector<int>> adj_;
  std::vector<int> colour_;
  std::vector<std::vector<int>> members_;
};

// Hill climbing with restarts over the packing order: swap or move entries, keep what helps.
size_t Anneal(const std::vector<Item>& items, SearchBudget budget, std::vector<size_t>* offsets) {
  std::vector<int> best_order = OrderBySizeDesc(items);
  std::vector<size_t> tmp;
  size_t best = Pack(items, best_order, true, offsets);
  std::vector<int> conflict_order = OrderByConflicts(items);
  size_t c = Pack(items, conflict_order, true, &tmp);
  if (c < best) {
    best = c;
    best_order = conflict_order;
    *offsets = tmp;
  }
  if (items.size() < 2) return best;
  std::mt19937 rng(12345);  // fixed seed: the same graph always gets the same plan
  std::vector<int> order = best_order;
  size_t current = best;
  int iterations = 0;
  while ((iterations & 7) != 0 || budget.left()) {
    if (++iterations > 200000) break;
    std::vector<int> next = order;
    size_t a = rng() % next.size(), b = rng() % next.size();
    if (rng() & 1) {
      std::swap(next[a], next[b]);
    } else {
      int v = next[a];
      next.erase(next.begin() + static_cast<long>(a));
      next.insert(next.begin() + static_cast<long>(b), v);
    }
    size_t s = Pack(items, next, true, &tmp);
    if (s <= current) {
      current = s;
      order = std::move(next);
      if (s < best) {
        best = s;
        *offsets = tmp;
      }
    }
    if (iterations % 500 == 0) {  // restart from the best order
      order = best_order;
      current = best;
    }
  }
  return best;
}

// Resolves alias chains: root buffer and offset inside it, per buffer.
Status Groups(const std::vector<Buffer>& buffers, std::vector<int>* root,
              std::vector<size_t>* rel) {
  root->assign(buffers.size(), -1);
  rel->assign(buffers.size(), 0);
  for (size_t i = 0; i < buffers.size(); ++i) {
    int r = static_cast<int>(i);
    size_t off = 0;
    int steps = 0;
    while (buffers[r].alias_of >= 0) {
      if (buffers[r].alias_of >= static_cast<int>(buffers.size()) ||
          ++steps > static_cast<int>(buffers.size()))
        return Error("alias chain of buffer '" + buffers[i].name + "' is broken or cyclic");
      off += buffers[r].alias_offset;
      r = buffers[r].alias_of;
    }
    (*root)[i] = r;
    (*rel)[i] = off;
  }
  return OkStatus();
}

}  // namespace

const std::vector<std::string>& PlannerNames() {
  static const std::vector<std::string> kNames = {
      "greedy-size", "greedy-conflicts", "coloring", "anneal", "tflm", "none"};
  return kNames;
}

size_t LowerBound(const std::vector<Buffer>& buffers) {
  std::vector<int> root;
  std::vector<size_t> rel;
  if (!Groups(buffers, &root, &rel).ok()) return 0;
  // Group extents, then a sweep of +size at first use and -size after last use.
  std::vector<Item> items(buffers.size(), Item{0, std::numeric_limits<int>::max(), -1});
  for (size_t i = 0; i < buffers.size(); ++i) {
    Item& g = items[root[i]];
    // Group extents rounded up as the packers round them, so the bound is comparable.
    g.size = std::max(g.size, (rel[i] + buffers[i].size + kArenaAlignment - 1) / kArenaAlignment *
                                  kArenaAlignment);
    g.first = std::min(g.first, buffers[i].first_use);
    g.last = std::max(g.last, buffers[i].last_use);
  }
  std::vector<std::pair<int, long long>> events;
  for (size_t i = 0; i < items.size(); ++i) {
    if (root[i] != static_cast<int>(i)) continue;
    events.push_back({items[i].first * 2, static_cast<long long>(items[i].size)});
    events.push_back({items[i].last * 2 + 1, -static_cast<long long>(items[i].size)});
  }
  std::sort(events.begin(), events.end());
  long long live = 0, peak = 0;
  for (auto [t, d] : events) {
    live += d;
    peak = std::max(peak, live);
  }
  return static_cast<size_t>(peak);
}

Status VerifyNoOverlap(const std::vector<Buffer>& buffers, size_t arena_bytes) {
  std::vector<int> root;
  std::vector<size_t> rel;
  KILN_RETURN_IF_ERROR(Groups(buffers, &root, &rel));
  std::vector<int> by_start(buffers.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(),
            [&](int a, int b) { return buffers[a].first_use < buffers[b].first_use; });
  std::vector<int> active;
  for (int i : by_start) {
    const Buffer& b = buffers[i];
    if (b.offset + b.size > arena_bytes)
      return Error("buffer '" + b.name + "' [" + std::to_string(b.offset) + ", " +
                   std::to_string(b.offset + b.size) + ") lies outside the " +
                   std::to_string(arena_bytes) + "-byte arena");
    if (b.alias_of >= 0 && b.offset != buffers[root[i]].offset + rel[i])
      return Error("buffer '" + b.name + "' is not at its alias offset");
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](int a) { return buffers[a].last_use < b.first_use; }),
                 active.end());
    for (int a : active) {
      if (root[a] == root[i]) continue;  // shares bytes by design
      const Buffer& o = buffers[a];
      if (b.offset < o.offset + o.size && o.offset < b.offset + b.size)
        return Error("buffers '" + o.name + "' and '" + b.name + "' are live together (positions " +
                     std::to_string(std::max(o.first_use, b.first_use)) + ".." +
                     std::to_string(std::min(o.last_use, b.last_use)) + ") and overlap");
    }
    active.push_back(i);
  }
  return OkStatus();
}

long DefaultSearchSteps(size_t items) {
  // A search step of either planner packs or recolours every item against the ones it meets:
  // about items^2 work (10-25 ns a unit on a 2-core build machine). 3e6 units a planner is
  // under 0.1 s on any graph; past 1,700 items the greedy packings stand alone.
  const double units = 3e6 / std::max<double>(1.0, static_cast<double>(items) * items);
  return static_cast<long>(std::min(4000.0, units));
}

Expected<Plan> PlanMemory(std::vector<Buffer> buffers, const std::string& planner, long max_steps) {
  std::vector<int> root;
  std::vector<size_t> rel;
  KILN_RETURN_IF_ERROR(Groups(buffers, &root, &rel));
  for (auto& b : buffers)
    b.size = (b.size + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  // One item per group root.
  std::vector<int> item_of(buffers.size(), -1);
  std::vector<Item> items;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (root[i] == static_cast<int>(i)) {
      item_of[i] = static_cast<int>(items.size());
      items.push_back(Item{0, std::numeric_limits<int>::max(), -1});
    }
  for (size_t i = 0; i < buffers.size(); ++i) {
    Item& g = items[item_of[root[i]]];
    g.size = std::max(g.size, (rel[i] + buffers[i].size + kArenaAlignment - 1) / kArenaAlignment *
                                  kArenaAlignment);
    g.first = std::min(g.first, buffers[i].first_use);
    g.last = std::max(g.last, buffers[i].last_use);
  }

  const long steps = max_steps > 0 ? max_steps : DefaultSearchSteps(items.size());
  auto run = [&](const std::string& name, std::vector<size_t>* offs) -> Expected<size_t> {
    SearchBudget budget(steps);
    if (name == "none") {
      offs->assign(items.size(), 0);
      size_t off = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        (*offs)[i] = off;
        off += items[i].size;
      }
      return off;
    }
    if (name == "tflm") return Pack(items, OrderBySizeDesc(items), false, offs);
    if (name == "greedy-size") return Pack(items, OrderBySizeDesc(items), true, offs);
    if (name == "greedy-conflicts") return Pack(items, OrderByConflicts(items), true, offs);
    if (name == "coloring") return Colouring(items).Run(budget, offs);
    if (name == "anneal") return Anneal(items, budget, offs);
    std::string known;
    for (const auto& n : PlannerNames()) known += " " + n;
    return Error("unknown planner '" + name + "' (known: default" + known + ")");
  };

  Plan plan;
  plan.lower_bound_bytes = LowerBound(buffers);
  std::vector<size_t> offsets;
  if (planner == "default") {
    size_t best = std::numeric_limits<size_t>::max();
    std::string best_name;
    for (const auto& name : {"greedy-size", "greedy-conflicts", "coloring", "anneal"}) {
      if (best <= plan.lower_bound_bytes) break;  // no search can beat the bound
      std::vector<size_t> offs;
      KILN_ASSIGN_OR_RETURN(size_t a, run(name, &offs));
      if (a < best) {
        best = a;
        best_name = name;
        offsets = std::move(offs);
      }
    }
    plan.planner = best_name;
    plan.arena_bytes = best;
  } else {
    KILN_ASSIGN_OR_RETURN(plan.arena_bytes, run(planner, &offsets));
    plan.planner = planner;
  }
  if (items.empty()) plan.arena_bytes = 0;
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].offset = offsets.empty() ? 0 : offsets[item_of[root[i]]] + rel[i];
  plan.buffers = std::move(buffers);
  KILN_RETURN_IF_ERROR(VerifyNoOverlap(plan.buffers, plan.arena_bytes)
                           .Context("planner '" + plan.planner + "' produced an invalid plan"));
  return plan;
}

}  // namespace kiln::planner
