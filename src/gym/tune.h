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
// merely equal. Candidates are scored in parallel by a TuneEvaluator; results are reduced by
// candidate index, so a deterministic objective gives the same answer for the same seed whatever
// the timing and wherever the candidates ran.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gym/client.h"
#include "gym/environment.h"

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

// A candidate's score, or why it has none.
struct TuneScore {
  double value = 0;
  Status status;
};

// What Tune searches: the action names and whether the objective is deterministic.
struct TuneSpace {
  std::vector<std::string> actions;
  bool deterministic = true;
};

// Where Tune's candidates are scored: gym services over gRPC (ClientEvaluator), this process
// (LocalEvaluator), or elsewhere (the Python package's Dask evaluator). Action indices are the
// action space's.
class TuneEvaluator {
 public:
  virtual ~TuneEvaluator() = default;
  // `observation`: the objective's observation space (ArenaBytes, CodeSizeBytes, Runtime).
  virtual Expected<TuneSpace> Space(const std::string& observation) = 0;
  // Scores every sequence by that observation, out[i] for seqs[i]; calls done() after each one,
  // never two at once. `serial`: one after another on one worker (the alternating timings behind
  // a measured objective's decision).
  virtual std::vector<TuneScore> Score(const std::vector<std::vector<int>>& seqs, bool serial,
                                       const std::function<void(const TuneScore&)>& done) = 0;
  // The Pipeline observation after `seq`.
  virtual Expected<std::string> Pipeline(const std::vector<int>& seq) = 0;
};

// Candidates on gym services: one worker per client (clients may reach different replicas). The
// benchmark must exist on every client's service.
class ClientEvaluator : public TuneEvaluator {
 public:
  ClientEvaluator(std::vector<GymClient*> clients, std::string benchmark);
  Expected<TuneSpace> Space(const std::string& observation) override;
  std::vector<TuneScore> Score(const std::vector<std::vector<int>>& seqs, bool serial,
                               const std::function<void(const TuneScore&)>& done) override;
  Expected<std::string> Pipeline(const std::vector<int>& seq) override;

 private:
  std::vector<GymClient*> clients_;
  std::string benchmark_;
  Spaces spaces_;
  int observation_ = -1;
};

// Candidates in this process: sessions of `benchmark` on `jobs` threads.
class LocalEvaluator : public TuneEvaluator {
 public:
  LocalEvaluator(const Environment& env, const BenchmarkModel& benchmark, int jobs);
  Expected<TuneSpace> Space(const std::string& observation) override;
  std::vector<TuneScore> Score(const std::vector<std::vector<int>>& seqs, bool serial,
                               const std::function<void(const TuneScore&)>& done) override;
  Expected<std::string> Pipeline(const std::vector<int>& seq) override;
  // One candidate: a fresh session of the benchmark, the actions, then observation `space`.
  static TuneScore ScoreOne(const Environment& env, const BenchmarkModel& benchmark,
                            const std::vector<int>& seq, int space);

 private:
  const Environment& env_;
  const BenchmarkModel& benchmark_;
  int jobs_;
  int observation_ = -1;
};

// A result as JSON (its fields by name, the pipeline as a string) and back: how a search that ran
// elsewhere (the Python package's, on Dask) reports to `kiln tune`.
std::string TuneResultToJson(const TuneResult& r);
Expected<TuneResult> TuneResultFromJson(const std::string& json);

// The actions that amount to the default pipeline: its passes, the default planner and schedule.
std::vector<std::string> DefaultPipelineActions();

// The observation space an objective (arena | codesize | latency) scores, or null.
const char* TuneObservation(const std::string& objective);

Expected<TuneResult> Tune(TuneEvaluator& evaluator, const TuneOptions& options);
// Tune on gym services (ClientEvaluator).
Expected<TuneResult> Tune(const std::vector<GymClient*>& clients, const std::string& benchmark,
                          const TuneOptions& options);

}  // namespace kiln::gym
