// One immutable IR state of the environment (internal to gym/): the model, what each pass does
// to it, and the observations computed on it so far.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gym/environment.h"
#include "planner/plan_graph.h"

namespace kiln::gym {

class State {
 public:
  // `model` must have its shapes inferred and be verified.
  explicit State(ir::Model model) : model_(std::move(model)) {}

  const ir::Model& model() const { return model_; }

  enum class Effect { kNoChange, kChanged, kFailed };
  struct Successor {
    Effect effect = Effect::kNoChange;
    std::shared_ptr<const State> state;  // for kChanged
    std::string error;                   // for kFailed
  };
  // What every pass of `env` does to this state (each pass runs once per state; successors are
  // kept weakly here, so the caller holds the ones it may step into).
  std::vector<Successor> Successors(const Environment& env) const;

  // Observation cache, keyed by space name and the planner choice where it matters.
  bool Cached(const std::string& key, ObservationValue* out) const;
  void Cache(const std::string& key, const ObservationValue& v) const;
  // The schedule and buffers of the main graph for a reorder choice (computed once).
  std::shared_ptr<const planner::GraphPlan> Schedule(bool reorder) const;

 private:
  ir::Model model_;
  mutable std::mutex mu_;
  mutable bool analysed_ = false;
  mutable std::vector<Effect> effects_;
  mutable std::vector<std::string> errors_;
  mutable std::vector<std::weak_ptr<const State>> next_;
  mutable std::map<std::string, ObservationValue> cache_;
  mutable std::shared_ptr<const planner::GraphPlan> schedule_[2];
};

// Computes observation `space` of a state under a planner choice (observations.cc).
GymStatus ComputeObservation(const Environment& env, const State& state, const std::string& planner,
                             bool reorder, int space, ObservationValue* out);
// The observation spaces, in index order (observations.cc).
std::vector<ObservationSpaceInfo> MakeObservationSpaces();

}  // namespace kiln::gym
