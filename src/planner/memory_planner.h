// Static memory planning for a scheduled graph.
//
// Input: buffers (one per intermediate tensor) with a byte size and a lifetime [first, last] in
// node positions of the schedule; two buffers interfere when their lifetimes intersect. Buffers
// that share bytes by design (views, in-place results, Concat inputs written into their slice of
// the output) come as alias groups: the group is planned as one buffer spanning its members'
// lifetimes, and each member sits at a fixed offset inside it.
//
// Output: an offset per buffer such that no two interfering buffers overlap (proved by
// VerifyNoOverlap), minimizing the arena size. Planners (select with --planner):
//   none            no reuse: every buffer gets its own bytes (the upper baseline)
//   tflm            TensorFlow Lite Micro's greedy: largest first, first gap that fits
//   greedy-size     largest first, best-fitting gap (the smallest gap that fits, else the end)
//   greedy-conflicts most-interfering first (by the bytes it conflicts with), best fit
//   coloring        interference-graph colouring: size-aware greedy colouring, then local search
//                   (moves, swaps, dissolving colours); colours are laid out end to end
//   anneal          improvement search: hill climbing with restarts over the order fed to the
//                   best-fit packer, from the best greedy order
//   default         runs the four above in turn, stops at the lower bound, keeps the smallest arena
// The search planners run a number of steps, not a time, so a graph gets the same plan everywhere.
// The lower bound is the largest sum of simultaneously live bytes; on chain-shaped graphs the
// packers reach it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::planner {

constexpr size_t kArenaAlignment = 64;

struct Buffer {
  std::string name;
  int value = -1;     // the graph value it holds
  size_t size = 0;    // bytes, aligned
  int first_use = 0;  // schedule positions, inclusive
  int last_use = 0;
  int alias_of = -1;        // index of the buffer whose bytes this one shares by design, or -1
  size_t alias_offset = 0;  // byte offset inside alias_of's bytes
  size_t offset = 0;        // assigned by the planner
};

struct Plan {
  std::string planner;
  std::vector<Buffer> buffers;
  size_t arena_bytes = 0;
  size_t lower_bound_bytes = 0;
};

// The planner names, in the order `default` tries them.
const std::vector<std::string>& PlannerNames();
// The search steps each search planner takes when none are given: fewer on larger graphs, so that
// the search is under 0.1 s on any graph.
long DefaultSearchSteps(size_t items);
// Assigns offsets with the named planner; the search planners take `max_steps` steps each, or
// DefaultSearchSteps when it is 0.
Expected<Plan> PlanMemory(std::vector<Buffer> buffers, const std::string& planner,
                          long max_steps = 0);
// Checks that no two buffers that are live at the same time share a byte, unless one aliases the
// other by design; also that every buffer lies inside the arena.
Status VerifyNoOverlap(const std::vector<Buffer>& buffers, size_t arena_bytes);
// The largest sum of sizes of buffers live at one schedule position (alias groups counted once).
size_t LowerBound(const std::vector<Buffer>& buffers);

}  // namespace kiln::planner
