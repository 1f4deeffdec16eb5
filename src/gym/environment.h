// The optimization environment behind `kiln serve` (DESIGN.md 2.6), free of gRPC types.
//
// A benchmark is a model (after shape inference). A session holds the model as optimized so far,
// the actions applied and the planner choice. The action space is the pass registry
// (passes/pipeline.h) followed by the planner choices and the two schedule choices. States are
// immutable and shared: a fork copies two pointers, and a pass works on a clone whose constants
// share their bytes with the original (copy on write). Every state answers, for every pass,
// whether that pass would change it (computed once per state, when the state is entered), which
// gives `action_had_no_effect` before running anything and an exact `end_of_session`: no pass can
// change the IR any more (planner and schedule choices stay selectable; they change no IR).
//
// Observations are computed on demand and cached per state (and planner choice where they
// depend on it). Planning here is deterministic: the search planners run a fixed number of steps
// (EnvironmentOptions::planner_steps), which a pipeline file records so `kiln compile --pipeline`
// reproduces the plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/pipeline.h"

namespace kiln::gym {

// Status codes as gRPC names them; the service maps them one to one.
enum class Code {
  kOk,
  kInvalidArgument,
  kNotFound,
  kOutOfRange,
  kFailedPrecondition,
  kResourceExhausted,
  kInternal
};
struct GymStatus {
  Code code = Code::kOk;
  std::string message;
  bool ok() const { return code == Code::kOk; }
  static GymStatus Error(Code c, std::string m) { return {c, std::move(m)}; }
};

struct ObservationValue {
  enum class Kind { kInt64List, kDoubleList, kString, kBinary, kScalarInt64, kScalarDouble };
  Kind kind = Kind::kScalarInt64;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::string str;
  int64_t scalar_int = 0;
  double scalar_double = 0;
};

struct ObservationSpaceInfo {
  std::string name;
  ObservationValue::Kind kind;
  size_t list_length = 0;    // lists: every observation has this many elements
  double min = 0, max = -1;  // scalars and list elements: [min, max]; max < min means +inf
  std::string opaque_data_format;
  bool deterministic = true, platform_dependent = false;
  ObservationValue default_value;
  std::string description;
};

struct EnvironmentOptions {
  std::string cc = "cc";      // compiles the generated C for CodeSizeBytes (at -Os)
  long planner_steps = 2000;  // search steps per planner (deterministic plans)
  int runtime_runs = 5;       // timed runs behind one Runtime observation (median)
  // Builds and counts for CortexM4Instructions; empty: the source tree's scripts/cortex_m4_run.
  std::string cortex_m4_run;
  // The pass actions; empty: every registered pass (passes/pipeline.h). Tests add their own.
  std::vector<passes::PassInfo> passes;
};

class State;

// The models of models/, embedded at build time (embed_models.cmake): (name, ONNX bytes). The
// service offers each as benchmark://kiln-v0/NAME.
const std::vector<std::pair<std::string, std::string>>& BuiltinBenchmarkFiles();

// What kiln knows about a benchmark: its uri and model (shapes inferred), shared by its sessions.
struct BenchmarkModel {
  std::string uri;
  std::shared_ptr<const State> initial;
  passes::ShapeOverrides fixed_shapes;  // symbolic input dims fixed at 1
  size_t source_bytes = 0;              // of the model file it came from
};

class Environment {
 public:
  explicit Environment(EnvironmentOptions options = {});
  Environment(const Environment&) = delete;  // sessions point at it
  Environment& operator=(const Environment&) = delete;

  const std::vector<std::string>& actions() const { return actions_; }
  const std::vector<ObservationSpaceInfo>& observation_spaces() const;
  const EnvironmentOptions& options() const { return options_; }
  int num_passes() const { return static_cast<int>(passes_.size()); }
  const passes::PassInfo& pass(int i) const { return *passes_[i]; }
  int ActionIndex(const std::string& name) const;       // -1 when there is none
  int ObservationIndex(const std::string& name) const;  // -1 when there is none

  // Validates a model (any error is kInvalidArgument naming the benchmark) and makes its
  // initial state: the model after shape inference, symbolic input dims fixed at 1.
  GymStatus MakeBenchmark(const std::string& uri, ir::Model model, BenchmarkModel* out) const;

 private:
  EnvironmentOptions options_;
  std::vector<const passes::PassInfo*> passes_;
  std::vector<std::string> actions_;
};

struct StepResult {
  bool end_of_session = false;
  bool action_had_no_effect = true;
};

class Session {
 public:
  Session(const Environment& env, const BenchmarkModel& benchmark);

  const std::string& benchmark() const { return benchmark_; }
  // Applies the actions in order. On an error (bad index: kOutOfRange; a failing pass:
  // kInternal naming it) the session is left as it was before the call.
  GymStatus Step(const std::vector<int>& actions, StepResult* result);
  GymStatus Observe(int space, ObservationValue* out);
  // An independent copy in the same state (shares the immutable states).
  std::unique_ptr<Session> Fork() const;
  // The passes that changed the IR, in order, with the planner choice: replaying it from the
  // benchmark with `kiln compile --pipeline` reproduces this state.
  passes::Pipeline pipeline() const;
  const std::vector<int>& actions_applied() const { return applied_; }

 private:
  Session(const Session&) = default;
  const Environment* env_;
  std::string benchmark_;
  passes::ShapeOverrides fixed_shapes_;
  std::shared_ptr<const State> state_;
  std::vector<std::shared_ptr<const State>> lookahead_;  // what each pass would make of state_
  std::vector<int> applied_;  // every action index given to Step, in order
  std::vector<std::string> effective_passes_;
  std::string planner_ = "default";
  bool reorder_ = true;
};

}  // namespace kiln::gym
