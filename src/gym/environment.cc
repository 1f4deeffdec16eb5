#include "gym/environment.h"

#include "gym/state.h"
#include "passes/infer_shapes.h"
#include "planner/memory_planner.h"

namespace kiln::gym {
namespace {

constexpr const char* kPlannerPrefix = "planner:";
const char* const kScheduleActions[] = {"schedule:min-peak", "schedule:file-order"};

}  // namespace

// ---------------------------------------------------------------------------------------------
// State

std::vector<State::Successor> State::Successors(const Environment& env) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int n = env.num_passes();
  if (!analysed_) {
    effects_.assign(n, Effect::kNoChange);
    errors_.assign(n, "");
    next_.assign(n, {});
  }
  std::vector<Successor> out(n);
  for (int i = 0; i < n; ++i) {
    if (analysed_ && effects_[i] != Effect::kChanged) {
      out[i].effect = effects_[i];
      out[i].error = errors_[i];
      continue;
    }
    if (analysed_) {
      if (auto alive = next_[i].lock()) {
        out[i] = {Effect::kChanged, alive, ""};
        continue;
      }
    }
    // Run the pass on a copy; the original's constants are shared, never written.
    ir::Model copy = ir::CloneModel(model_);
    Expected<bool> changed = env.pass(i).run(copy);
    Status st = changed.ok() ? ir::Verify(*copy.graph) : changed.status();
    if (!st.ok()) {
      effects_[i] = Effect::kFailed;
      errors_[i] = st.message();
      out[i] = {Effect::kFailed, nullptr, st.message()};
      continue;
    }
    if (!*changed) {
      effects_[i] = Effect::kNoChange;
      continue;
    }
    auto next = std::make_shared<const State>(std::move(copy));
    effects_[i] = Effect::kChanged;
    next_[i] = next;
    out[i] = {Effect::kChanged, next, ""};
  }
  analysed_ = true;
  return out;
}

bool State::Cached(const std::string& key, ObservationValue* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return false;
  *out = it->second;
  return true;
}

void State::Cache(const std::string& key, const ObservationValue& v) const {
  std::lock_guard<std::mutex> lock(mu_);
  cache_[key] = v;
}

std::shared_ptr<const planner::GraphPlan> State::Schedule(bool reorder) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (schedule_[reorder]) return schedule_[reorder];
  }
  auto gp = std::make_shared<planner::GraphPlan>();
  const ir::Graph& g = *model_.graph;
  if (reorder) {
    gp->schedule = planner::ChooseSchedule(g);
  } else {
    for (size_t i = 0; i < g.nodes.size(); ++i) gp->schedule.order.push_back(static_cast<int>(i));
    gp->schedule.peak_bytes = gp->schedule.original_peak =
        planner::PeakBytes(g, gp->schedule.order);
  }
  gp->buffers = planner::BuildBuffers(g, gp->schedule.order, planner::LifetimeOptions{});
  std::lock_guard<std::mutex> lock(mu_);
  if (!schedule_[reorder]) schedule_[reorder] = gp;
  return schedule_[reorder];
}

// ---------------------------------------------------------------------------------------------
// Environment

Environment::Environment(EnvironmentOptions options) : options_(std::move(options)) {
  for (const auto& p : options_.passes.empty() ? passes::RegisteredPasses() : options_.passes) {
    passes_.push_back(&p);
    actions_.push_back(p.name);
  }
  actions_.push_back(std::string(kPlannerPrefix) + "default");
  for (const auto& name : planner::PlannerNames()) actions_.push_back(kPlannerPrefix + name);
  for (const char* s : kScheduleActions) actions_.push_back(s);
}

const std::vector<ObservationSpaceInfo>& Environment::observation_spaces() const {
  static const std::vector<ObservationSpaceInfo> kSpaces = MakeObservationSpaces();
  return kSpaces;
}

int Environment::ActionIndex(const std::string& name) const {
  for (size_t i = 0; i < actions_.size(); ++i)
    if (actions_[i] == name) return static_cast<int>(i);
  return -1;
}

int Environment::ObservationIndex(const std::string& name) const {
  const auto& spaces = observation_spaces();
  for (size_t i = 0; i < spaces.size(); ++i)
    if (spaces[i].name == name) return static_cast<int>(i);
  return -1;
}

GymStatus Environment::MakeBenchmark(const std::string& uri, ir::Model model,
                                     BenchmarkModel* out) const {
  Status st = ir::Verify(*model.graph);
  // Symbolic input dims (a batch) are fixed at 1: one inference is what gets planned.
  passes::ShapeOverrides fixed;
  for (int v : model.graph->RuntimeInputs()) {
    const ir::TypeInfo& t = model.graph->values[v].type;
    if (!t.has_shape || t.shape_known()) continue;
    Dims d = t.dims;
    for (auto& x : d) x = x < 0 ? 1 : x;
    fixed[model.graph->values[v].name] = d;
  }
  if (st.ok()) st = passes::InferShapes(model, fixed);
  if (!st.ok()) return GymStatus::Error(Code::kInvalidArgument, uri + ": " + st.message());
  const ir::Graph& g = *model.graph;
  for (int v : g.RuntimeInputs())
    if (!g.values[v].type.shape_known())
      return GymStatus::Error(Code::kInvalidArgument, uri + ": input '" + g.values[v].name +
                                                          "' has dynamic dims " +
                                                          g.values[v].type.ToString() +
                                                          " (the service plans known shapes)");
  out->uri = uri;
  out->fixed_shapes = fixed;
  out->initial = std::make_shared<const State>(std::move(model));
  return {};
}

// ---------------------------------------------------------------------------------------------
// Session

Session::Session(const Environment& env, const BenchmarkModel& benchmark)
    : env_(&env),
      benchmark_(benchmark.uri),
      fixed_shapes_(benchmark.fixed_shapes),
      state_(benchmark.initial) {}

GymStatus Session::Step(const std::vector<int>& actions, StepResult* result) {
  // Work on copies so that an error leaves the session as it was.
  std::shared_ptr<const State> state = state_;
  std::vector<std::string> effective = effective_passes_;
  std::string planner = planner_;
  bool reorder = reorder_;
  bool any_effect = false;
  const int num_actions = static_cast<int>(env_->actions().size());
  for (int a : actions) {
    if (a < 0 || a >= num_actions)
      return GymStatus::Error(Code::kOutOfRange, "action " + std::to_string(a) +
                                                     " is not in the action space (0.." +
                                                     std::to_string(num_actions - 1) + ")");
    const std::string& name = env_->actions()[a];
    if (a < env_->num_passes()) {
      State::Successor s = state->Successors(*env_)[a];
      if (s.effect == State::Effect::kFailed)
        return GymStatus::Error(Code::kInternal,
                                "pass " + name + " failed on " + benchmark_ + ": " + s.error);
      if (s.effect == State::Effect::kChanged) {
        state = s.state;
        effective.push_back(name);
        any_effect = true;
      }
    } else if (name.rfind(kPlannerPrefix, 0) == 0) {
      std::string p = name.substr(std::char_traits<char>::length(kPlannerPrefix));
      any_effect = any_effect || p != planner;
      planner = p;
    } else {
      bool r = name == kScheduleActions[0];
      any_effect = any_effect || r != reorder;
      reorder = r;
    }
  }
  // An exact end of session: no pass changes the IR any more. Successors() also runs every pass
  // on a new state once, so stepping into any of them later costs nothing.
  bool end = true;
  std::vector<std::shared_ptr<const State>> lookahead;
  for (auto& s : state->Successors(*env_)) {
    end = end && s.effect != State::Effect::kChanged;
    if (s.state) lookahead.push_back(std::move(s.state));
  }
  lookahead_ = std::move(lookahead);  // keeps the successors alive while the session is here
  state_ = std::move(state);
  effective_passes_ = std::move(effective);
  planner_ = std::move(planner);
  reorder_ = reorder;
  applied_.insert(applied_.end(), actions.begin(), actions.end());
  result->action_had_no_effect = !any_effect;
  result->end_of_session = end;
  return {};
}

GymStatus Session::Observe(int space, ObservationValue* out) {
  const int n = static_cast<int>(env_->observation_spaces().size());
  if (space < 0 || space >= n)
    return GymStatus::Error(Code::kOutOfRange, "observation space " + std::to_string(space) +
                                                   " does not exist (0.." + std::to_string(n - 1) +
                                                   ")");
  if (env_->observation_spaces()[space].name == "Pipeline") {
    out->kind = ObservationValue::Kind::kString;
    out->str = passes::PipelineToJson(pipeline());
    return {};
  }
  return ComputeObservation(*env_, *state_, planner_, reorder_, space, out);
}

std::unique_ptr<Session> Session::Fork() const {
  return std::unique_ptr<Session>(new Session(*this));
}

passes::Pipeline Session::pipeline() const {
  passes::Pipeline p;
  p.passes = effective_passes_;
  p.planner = planner_;
  p.reorder = reorder_;
  p.planner_steps = env_->options().planner_steps;
  p.shapes = fixed_shapes_;
  return p;
}

}  // namespace kiln::gym
