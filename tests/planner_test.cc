#include <gtest/gtest.h>

#include <random>

#include "planner/lifetimes.h"
#include "planner/memory_planner.h"
#include "planner/reorder.h"

namespace kiln::planner {
namespace {

// A chain a0 -> a1 -> ... : each buffer lives from its producer to its single consumer.
std::vector<Buffer> Chain(const std::vector<size_t>& sizes) {
  std::vector<Buffer> b;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Buffer x;
    x.name = "t" + std::to_string(i);
    x.size = sizes[i];
    x.first_use = static_cast<int>(i);
    x.last_use = static_cast<int>(i) + 1;
    b.push_back(x);
  }
  return b;
}

std::vector<Buffer> Random(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Buffer> b;
  for (int i = 0; i < n; ++i) {
    Buffer x;
    x.name = "r" + std::to_string(i);
    x.size = 64 * (1 + rng() % 64);
    x.first_use = static_cast<int>(rng() % n);
    x.last_use = x.first_use + static_cast<int>(rng() % 8);
    b.push_back(x);
  }
  return b;
}

TEST(MemoryPlanner, PackersReachTheLowerBoundOnChains) {
  auto bufs = Chain({6400, 128, 25600, 64, 3200, 3200, 640});
  // Colouring gives each colour its largest member's size, so it cannot on mixed sizes.
  for (const auto& name : PlannerNames()) {
    if (name == "none" || name == "coloring") continue;
    auto plan = PlanMemory(bufs, name);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status().message();
    EXPECT_EQ(plan->arena_bytes, plan->lower_bound_bytes) << name;
  }
  auto def = PlanMemory(bufs, "default");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->arena_bytes, def->lower_bound_bytes);
}

TEST(MemoryPlanner, PlansAreValidAndNeverBelowTheBound) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    auto bufs = Random(200, seed);
    for (const auto& name : PlannerNames()) {
      auto plan = PlanMemory(bufs, name, 20);
      ASSERT_TRUE(plan.ok()) << name << ": " << plan.status().message();
      EXPECT_TRUE(VerifyNoOverlap(plan->buffers, plan->arena_bytes).ok());
      EXPECT_GE(plan->arena_bytes, plan->lower_bound_bytes) << name;
    }
    auto none = PlanMemory(bufs, "none");
    auto def = PlanMemory(bufs, "default", 20);
    EXPECT_LE(def->arena_bytes, none->arena_bytes);
  }
}

// Plans depend on the graph alone, never on how fast the machine is: the same buffers give the
// same offsets every time, and larger graphs get fewer search steps.
TEST(MemoryPlanner, DefaultPlansAreDeterministic) {
  for (unsigned seed = 0; seed < 3; ++seed) {
    auto bufs = Random(150, seed);
    auto a = PlanMemory(bufs, "default"), b = PlanMemory(bufs, "default");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->arena_bytes, b->arena_bytes) << seed;
    EXPECT_EQ(a->planner, b->planner) << seed;
    for (size_t i = 0; i < bufs.size(); ++i)
      EXPECT_EQ(a->buffers[i].offset, b->buffers[i].offset) << seed << " " << i;
  }
  EXPECT_EQ(DefaultSearchSteps(10), 4000);
  EXPECT_GT(DefaultSearchSteps(100), DefaultSearchSteps(1000));
  EXPECT_EQ(DefaultSearchSteps(10000), 0);
}

TEST(MemoryPlanner, VerifyFindsOverlapsAndRespectsAliases) {
  auto bufs = Chain({128, 128, 128});
  bufs[0].offset = 0;
  bufs[1].offset = 64;  // live together with t0 at position 1 and overlapping
  bufs[2].offset = 0;
  Status st = VerifyNoOverlap(bufs, 256);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'t0' and 't1'"), std::string::npos) << st.message();
  bufs[1].alias_of = 0;  // a view of t0 shares its bytes by design
  bufs[1].offset = 0;
  bufs[2].offset = 128;
  EXPECT_TRUE(VerifyNoOverlap(bufs, 256).ok());
  EXPECT_FALSE(VerifyNoOverlap(bufs, 100).ok());  // outside the arena
}

TEST(MemoryPlanner, AliasGroupsArePlacedTogether) {
  auto bufs = Chain({256, 256, 512});
  // t0 and t1 are the two halves of t2 (Concat inputs written into their slice).
  bufs[0].alias_of = 2;
  bufs[0].alias_offset = 0;
  bufs[1].alias_of = 2;
  bufs[1].alias_offset = 256;
  auto plan = PlanMemory(bufs, "default");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->buffers[0].offset, plan->buffers[2].offset);
  EXPECT_EQ(plan->buffers[1].offset, plan->buffers[2].offset + 256);
  EXPECT_EQ(plan->arena_bytes, 512u);
}

// x -> a (24 channels), b (8 channels) -> Concat c [1, 32, 5, 3] -> FusedConv y (Z = r, the
// graph input's Relu): the Concat's inputs interleaved or in slices, and y in r's bytes only
// when the caller says so.
ir::Graph ConcatAndResidual() {
  ir::Graph g;
  auto t = [](int64_t c) { return ir::TypeInfo::Tensor(DType::kFloat32, {1, c, 5, 3}); };
  const int x = g.AddValue("x", t(4)), a = g.AddValue("a", t(24)), b = g.AddValue("b", t(8)),
            c = g.AddValue("c", t(32)), r = g.AddValue("r", t(16)), y = g.AddValue("y", t(16));
  g.inputs = {x};
  g.outputs = {y};
  auto node = [&](const char* op, std::vector<int> in, int out, const char* domain = "") {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.values[out].producer = static_cast<int>(g.nodes.size());
    g.nodes.push_back(n);
  };
  node("Conv", {x}, a);
  node("Conv", {x}, b);
  node("Concat", {a, b}, c);
  g.nodes.back().attrs["axis"] = ir::Attribute::Int(1);
  node("Relu", {x}, r);
  node("FusedConv", {c, -1, -1, r}, y, "com.microsoft");
  return g;
}

TEST(Lifetimes, InterleavedConcatsAndFusedConvInPlace) {
  const ir::Graph g = ConcatAndResidual();
  const std::vector<int> order = {0, 1, 2, 3, 4};
  for (ConcatPlacement placement :
       {ConcatPlacement::kSlices, ConcatPlacement::kInterleaved, ConcatPlacement::kCopies}) {
    for (bool in_place : {false, true}) {
      LifetimeOptions o;
      o.concat_placement.assign(g.nodes.size(), ConcatPlacement::kSlices);
      o.concat_placement[2] = placement;
      o.fused_conv_in_place = in_place;
      const BufferSet set = BuildBuffers(g, order, o);
      const Buffer& a = set.buffers[set.buffer_of[1]];
      const Buffer& b = set.buffers[set.buffer_of[2]];
      const int c = set.buffer_of[3];
      if (placement == ConcatPlacement::kCopies) {
        EXPECT_EQ(a.alias_of, -1);
        EXPECT_FALSE(set.is_noop[2]);
      } else {
        EXPECT_TRUE(set.is_noop[2]);
        EXPECT_EQ(a.alias_of, c);
        EXPECT_EQ(b.alias_of, c);
        EXPECT_EQ(a.alias_offset, 0u);
        if (placement == ConcatPlacement::kSlices) {
          EXPECT_EQ(b.alias_offset, 24u * 15 * 4);
          EXPECT_EQ(b.size, 8u * 15 * 4);
        } else {  // channel 24 of pixel 0, to channel 31 of pixel 14
          EXPECT_EQ(b.alias_offset, 24u * 4);
          EXPECT_EQ(a.size, (14u * 32 + 24) * 4);
          EXPECT_EQ(b.size, (14u * 32 + 8) * 4);
        }
      }
      // y is a graph output (not planned); the residual r is planned and is not y's.
      EXPECT_EQ(set.buffer_of[5], -1);
      auto plan = PlanMemory(set.buffers, "greedy-size");
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_TRUE(VerifyNoOverlap(plan->buffers, plan->arena_bytes).ok());
    }
  }
  // With y planned (include_io), y takes r's bytes only where the caller allows it.
  for (bool in_place : {false, true}) {
    LifetimeOptions o;
    o.include_io = true;
    o.fused_conv_in_place = in_place;
    const BufferSet set = BuildBuffers(g, order, o);
    EXPECT_EQ(set.buffers[set.buffer_of[5]].alias_of, in_place ? set.buffer_of[4] : -1);
  }
}

TEST(MemoryPlanner, UnknownPlannerIsAnError) {
  auto plan = PlanMemory(Chain({64}), "magic");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("unknown planner 'magic'"), std::string::npos);
}

// The search is bounded by work, not time: a large graph gets few steps (each about items^2),
// and its plan is still valid.
TEST(MemoryPlanner, ThousandBuffersTakeFewSearchSteps) {
  EXPECT_LE(DefaultSearchSteps(1000), 3);
  auto bufs = Random(1000, 7);
  auto plan = PlanMemory(bufs, "default");
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(VerifyNoOverlap(plan->buffers, plan->arena_bytes).ok());
  EXPECT_GE(plan->arena_bytes, plan->lower_bound_bytes);
}

ir::Graph Diamond() {
  // x -> a (big) -> c ; x -> b (small) -> d ; out = e(c, d). Running b's branch first keeps
  // the big tensor live for less time.
  ir::Graph g;
  auto add = [&](const std::string& n, Dims d) {
    return g.AddValue(n, ir::TypeInfo::Tensor(DType::kFloat32, std::move(d)));
  };
  int x = add("x", {4});
  int a = add("a", {1000}), c = add("c", {10}), b = add("b", {500}), d = add("d", {400});
  int e = add("e", {10});
  g.inputs = {x};
  auto node = [&](const std::string& n, std::vector<int> in, int out) {
    ir::Node nd;
    nd.name = n;
    nd.op_type = "Op";
    nd.inputs = std::move(in);
    nd.outputs = {out};
    g.values[out].producer = static_cast<int>(g.nodes.size());
    g.nodes.push_back(nd);
  };
  node("A", {x}, a);
  node("C", {a}, c);
  node("B", {x}, b);
  node("D", {b}, d);
  node("E", {c, d}, e);
  g.outputs = {e};
  return g;
}

TEST(Reorder, ExactSearchNeverWorseThanFileOrder) {
  ir::Graph g = Diamond();
  Schedule s = ChooseSchedule(g);
  EXPECT_TRUE(s.exact);
  EXPECT_LE(s.peak_bytes, s.original_peak);
  EXPECT_EQ(PeakBytes(g, s.order), s.peak_bytes);
  // A valid topological order: every producer first.
  std::vector<int> pos(g.nodes.size());
  for (size_t i = 0; i < s.order.size(); ++i) pos[s.order[i]] = static_cast<int>(i);
  EXPECT_LT(pos[0], pos[1]);
  EXPECT_LT(pos[2], pos[3]);
  EXPECT_LT(pos[1], pos[4]);
  EXPECT_LT(pos[3], pos[4]);
}

}  // namespace
}  // namespace kiln::planner
