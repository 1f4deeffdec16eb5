// kiln.gym's core: the optimization environment of `kiln serve`, in this process (no gRPC).
#include <pybind11/stl.h>

#include <map>
#include <memory>

#include "binding.h"
#include "gym/environment.h"
#include "gym/tune.h"

namespace kiln::python {
namespace {

constexpr const char* kBuiltinPrefix = "benchmark://kiln-v0/";

void CheckGym(const gym::GymStatus& s) {
  if (!s.ok()) throw KilnError(s.message);
}

py::object ObservationToPython(const gym::ObservationValue& v) {
  using Kind = gym::ObservationValue::Kind;
  switch (v.kind) {
    case Kind::kInt64List:
      return py::cast(v.ints);
    case Kind::kDoubleList:
      return py::cast(v.doubles);
    case Kind::kString:
      return py::str(v.str);
    case Kind::kBinary:
      return py::bytes(v.str);
    case Kind::kScalarInt64:
      return py::int_(v.scalar_int);
    case Kind::kScalarDouble:
      return py::float_(v.scalar_double);
  }
  return py::none();
}

const char* KindName(gym::ObservationValue::Kind k) {
  using Kind = gym::ObservationValue::Kind;
  switch (k) {
    case Kind::kInt64List:
      return "int64_list";
    case Kind::kDoubleList:
      return "double_list";
    case Kind::kString:
      return "string";
    case Kind::kBinary:
      return "binary";
    case Kind::kScalarInt64:
      return "int64";
    case Kind::kScalarDouble:
      return "double";
  }
  return "";
}

// The environment and the benchmarks added to it, which its sessions point at.
class GymEnvironment {
 public:
  GymEnvironment(long planner_steps, const std::string& cc, int runtime_runs) {
    if (planner_steps < 1) throw KilnError("planner_steps must be at least 1");
    if (runtime_runs < 1) throw KilnError("runtime_runs must be at least 1");
    gym::EnvironmentOptions o;
    o.planner_steps = planner_steps;
    o.cc = cc;
    o.runtime_runs = runtime_runs;
    env_ = std::make_unique<gym::Environment>(o);
  }

  const gym::Environment& env() const { return *env_; }

  std::vector<std::string> BuiltinBenchmarks() const {
    std::vector<std::string> uris;
    for (const auto& [name, bytes] : gym::BuiltinBenchmarkFiles())
      uris.push_back(kBuiltinPrefix + name);
    return uris;
  }

  // Adds `model` (bytes or a path) as `uri`; a built-in uri needs no model.
  std::string AddBenchmark(const std::string& uri, const py::object& model) {
    ir::Model m;
    if (model.is_none()) {
      for (const auto& [name, bytes] : gym::BuiltinBenchmarkFiles())
        if (uri == kBuiltinPrefix + name) m = LoadModelArg(py::bytes(bytes));
      if (!m.graph) throw KilnError("'" + uri + "' is not a built-in benchmark; give its model");
    } else {
      m = LoadModelArg(model);
    }
    auto b = std::make_shared<gym::BenchmarkModel>();
    {
      py::gil_scoped_release nogil;
      CheckGym(env_->MakeBenchmark(uri, std::move(m), b.get()));
    }
    benchmarks_[uri] = b;
    return uri;
  }

  std::shared_ptr<const gym::BenchmarkModel> Benchmark(const std::string& uri) const {
    auto it = benchmarks_.find(uri);
    if (it == benchmarks_.end()) throw KilnError("no benchmark '" + uri + "' was added");
    return it->second;
  }

  int SpaceIndex(const std::string& name) const {
    const int i = env_->ObservationIndex(name);
    if (i < 0) throw KilnError("no observation space '" + name + "'");
    return i;
  }

 private:
  std::unique_ptr<gym::Environment> env_;
  std::map<std::string, std::shared_ptr<const gym::BenchmarkModel>> benchmarks_;
};

// A session keeps its benchmark alive; the environment is kept alive by Python (keep_alive).
class GymSession {
 public:
  GymSession(const GymEnvironment& env, const std::string& uri)
      : env_(env),
        benchmark_(env.Benchmark(uri)),
        session_(std::make_unique<gym::Session>(env.env(), *benchmark_)) {}
  GymSession(const GymSession& other)
      : env_(other.env_), benchmark_(other.benchmark_), session_(other.session_->Fork()) {}

  std::pair<bool, bool> Step(const std::vector<int>& actions) {
    gym::StepResult r;
    py::gil_scoped_release nogil;
    CheckGym(session_->Step(actions, &r));
    return {r.end_of_session, r.action_had_no_effect};
  }

  py::object Observe(const std::string& space) {
    const int i = env_.SpaceIndex(space);
    gym::ObservationValue v;
    {
      py::gil_scoped_release nogil;
      CheckGym(session_->Observe(i, &v));
    }
    return ObservationToPython(v);
  }

  std::string Pipeline() const { return passes::PipelineToJson(session_->pipeline()); }
  std::vector<int> Applied() const { return session_->actions_applied(); }

 private:
  const GymEnvironment& env_;
  std::shared_ptr<const gym::BenchmarkModel> benchmark_;
  std::unique_ptr<gym::Session> session_;
};

}  // namespace

void BindGym(py::module_& m) {
  m.def("default_pipeline_actions", &gym::DefaultPipelineActions,
        "the action names that amount to kiln's default pipeline");
  py::class_<GymEnvironment>(m, "GymEnvironment")
      .def(py::init<long, const std::string&, int>(), py::arg("planner_steps") = 2000,
           py::arg("cc") = "cc", py::arg("runtime_runs") = 5)
      .def_property_readonly("actions", [](const GymEnvironment& e) { return e.env().actions(); })
      .def_property_readonly("observation_spaces",
                             [](const GymEnvironment& e) {
                               py::list out;
                               for (const auto& s : e.env().observation_spaces()) {
                                 py::dict d;
                                 d["name"] = s.name;
                                 d["kind"] = KindName(s.kind);
                                 d["length"] = s.list_length;
                                 d["min"] = s.min;
                                 d["max"] =
                                     s.max < s.min ? py::float_(INFINITY) : py::float_(s.max);
                                 d["deterministic"] = s.deterministic;
                                 d["platform_dependent"] = s.platform_dependent;
                                 d["description"] = s.description;
                                 out.append(d);
                               }
                               return out;
                             })
      .def("builtin_benchmarks", &GymEnvironment::BuiltinBenchmarks)
      .def("add_benchmark", &GymEnvironment::AddBenchmark, py::arg("uri"),
           py::arg("model") = py::none());
  py::class_<GymSession>(m, "GymSession")
      .def(py::init<const GymEnvironment&, const std::string&>(), py::arg("env"), py::arg("uri"),
           py::keep_alive<1, 2>())
      .def("step", &GymSession::Step, py::arg("actions"))
      .def("observe", &GymSession::Observe, py::arg("space"))
      .def(
          "fork", [](const GymSession& s) { return GymSession(s); }, py::keep_alive<0, 1>())
      .def("pipeline", &GymSession::Pipeline)
      .def_property_readonly("actions_applied", &GymSession::Applied);
}

}  // namespace kiln::python
