// kiln tune: search over action sequences through the gym service.
//
// Every candidate is a sequence of actions replayed on a fresh session of the benchmark and scored
// by one observation (ArenaBytes, CodeSizeBytes or Runtime; lower is better). The baseline is the
// default pipeline (passes::DefaultPipeline with the default planner). The search spends the
// budget (candidate evaluations) in two phases: random sequences (half of them the default
// pipeline followed by random actions), then greedy extension of the best sequence one action at
// a time until no action helps, then pruning of actions that do not matter. A measured objective
// (Runtime) must win by a 3% noise margin, and the decision rests on the default and the best
// timed again, alternately, on one worker (medians of 7 each). When nothing beats the default by
// the margin, the result is the default pipeline itself: Tune never returns one that is worse or
// merely equal. Candidates run on `clients` in parallel (one worker per client;
// clients may reach different replicas); results are reduced by candidate index, so a
// deterministic objective gives the same answer for the same seed whatever the timing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gym/client.h"

namespace kiln::gym {

struct TuneOptions {
  std::string objective;  // arena | codesize | latency
  int budget = 100;       // candidate evaluations in all
  uint64_t seed = 0;
  int max_length = 0;  // longest random sequence (0: the number of actions)
  // Called after every evaluation (from worker threads, serialized).
  std::function<void(int done, int total, double best)> progress;
};

struct TuneResult {
  std::string observation;  // the space scored
  double margin = 0;        // the fraction by which a sequence must beat the default (noise margin)
  double baseline = 0, best = 0;
  bool improved = false;  // false: nothing beat the default by the margin, and best is the default
  std::vector<std::string>
      best_actions;           // the sequence replayed; pipeline_json is what it amounts to
  std::string pipeline_json;  // the best state's Pipeline observation
  int evaluations = 0;
  int confirm_rounds =
      0;  // a measured objective: alternating timings of default and best (medians)
};

// The benchmark must exist on every client's service.
Expected<TuneResult> Tune(const std::vector<GymClient*>& clients, const std::string& benchmark,
                          const TuneOptions& options);

}  // namespace kiln::gym
